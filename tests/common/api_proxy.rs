//! An HTTPS proxy in front of a control plane's kube-apiserver that can hide
//! one API group version, as a cluster that does not serve it (yet) answers:
//! 404 for every path under it, discovery included. Everything else is
//! passed on with the control plane's admin identity, streamed (watches too).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use rcgen::{CertificateParams, KeyPair, SanType};

use super::cluster::ControlPlane;
use super::compare::admin_client_builder;
use super::identity::new_ca;

pub struct ApiProxy {
    /// A kubeconfig pointing at the proxy.
    pub kubeconfig: PathBuf,
    hidden: Arc<AtomicBool>,
    _dir: tempfile::TempDir,
}

impl ApiProxy {
    /// Proxies `cp`, hiding `/apis/<group_version>` until [`Self::reveal`].
    pub async fn start(cp: &ControlPlane, group_version: &str) -> ApiProxy {
        let (issuer, ca_pem) = new_ca("test-api-proxy-ca");
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.subject_alt_names.push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
        let cert = params.signed_by(&key, &issuer).unwrap();
        let key = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        // Watches stay open for minutes: no overall timeout upstream.
        let upstream = admin_client_builder(cp).timeout(Duration::from_secs(3600)).build().unwrap();
        let (target, prefix) = (cp.server.clone(), format!("/apis/{group_version}"));
        let hidden = Arc::new(AtomicBool::new(true));
        let hiding = hidden.clone();
        let app = axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let (upstream, target, prefix, hiding) = (upstream.clone(), target.clone(), prefix.clone(), hiding.clone());
            async move {
                let path = uri.path();
                if hiding.load(Ordering::SeqCst) && (path == prefix || path.starts_with(&format!("{prefix}/"))) {
                    return (StatusCode::NOT_FOUND, [("content-type", "text/plain")], "404 page not found\n")
                        .into_response();
                }
                let url = format!("{target}{}", uri.path_and_query().map_or("", |p| p.as_str()));
                let mut request = upstream.request(method, url).body(body);
                for name in ["accept", "content-type"] {
                    if let Some(value) = headers.get(name) {
                        request = request.header(name, value);
                    }
                }
                match request.send().await {
                    Ok(answer) => {
                        let mut response = Response::builder().status(answer.status().as_u16());
                        if let Some(value) = answer.headers().get("content-type") {
                            response = response.header("content-type", value);
                        }
                        response.body(Body::from_stream(answer.bytes_stream())).unwrap()
                    }
                    Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
                }
            }
        });
        let tls = axum_server::tls_rustls::RustlsConfig::from_config(Arc::new(config));
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
            rt.block_on(async move {
                axum_server::from_tcp_rustls(listener, tls).unwrap().serve(app.into_make_service()).await.unwrap();
            });
        });
        let dir = tempfile::tempdir().unwrap();
        let ca_file = dir.path().join("proxy-ca.crt");
        std::fs::write(&ca_file, &ca_pem).unwrap();
        let kubeconfig = dir.path().join("proxy.kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority: {}\nusers:\n- name: proxied\n  user: {{}}\ncontexts:\n- name: proxy\n  context:\n    cluster: proxy\n    user: proxied\ncurrent-context: proxy\n",
                ca_file.display()
            ),
        )
        .unwrap();
        ApiProxy { kubeconfig, hidden, _dir: dir }
    }

    /// Serves the hidden group version from now on.
    pub fn reveal(&self) {
        self.hidden.store(false, Ordering::SeqCst);
    }

    /// Hides the group version again, as a cluster that turned it off.
    pub fn hide(&self) {
        self.hidden.store(true, Ordering::SeqCst);
    }
}
