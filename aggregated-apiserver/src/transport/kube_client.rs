//! A kube-rs client whose TLS trusts what client-go trusts: kube's own
//! client stack (base URL, credentials, extra headers, timeouts), with the
//! server's certificate checked by [`GoVerifier`] instead of webpki.

use std::sync::Arc;

use anyhow::Context as _;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt as _;
use tower::{BoxError, ServiceBuilder};

use super::{GoVerifier, Roots};

/// A client for `config`'s server, trusting its CA (the in-cluster CA file
/// read again as it rotates), else the system's roots.
pub fn kube_client(config: kube::Config) -> anyhow::Result<kube::Client> {
    if let Some(proxy) = &config.proxy_url {
        anyhow::bail!("proxy {proxy} is not supported: the client reaches the server directly");
    }
    let mut tls = config.rustls_client_config().context("the client's TLS configuration")?;
    if !config.accept_invalid_certs {
        let roots = match (&config.root_cert_file, &config.root_cert) {
            (Some(path), _) => Roots::File(path.clone()),
            (None, Some(ders)) => Roots::Der(ders.clone()),
            (None, None) => Roots::System,
        };
        tls.dangerous().set_certificate_verifier(Arc::new(GoVerifier::new(roots)?));
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let mut https = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = rustls::pki_types::ServerName::try_from(name.clone())
            .with_context(|| format!("tls-server-name {name:?} is not a host name"))?;
        https = https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let mut connector = hyper_timeout::TimeoutConnector::new(https.enable_http1().wrap_connector(http));
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer().context("the client's credentials")?)
        .layer(config.extra_headers_layer().context("the client's headers")?)
        .map_err(BoxError::from)
        .service(client);
    Ok(kube::Client::new(service, config.default_namespace))
}

#[cfg(test)]
mod tests {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};

    use super::*;

    /// An HTTPS server on 127.0.0.1 answering every request with `{}`,
    /// presenting a self-signed certificate of `is_ca`; its PEM and port.
    async fn server(is_ca: IsCa) -> (String, u16) {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        params.is_ca = is_ca;
        let cert = params.self_signed(&key).unwrap();
        let tls = axum_server::tls_rustls::RustlsConfig::from_pem(cert.pem().into(), key.serialize_pem().into())
            .await
            .unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = axum::Router::new().fallback(|| async { "{}" });
        tokio::spawn(axum_server::from_tcp_rustls(listener, tls).unwrap().serve(app.into_make_service()));
        (cert.pem(), port)
    }

    fn config(port: u16, ca_pem: &str) -> kube::Config {
        let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().unwrap());
        let der = rustls::pki_types::pem::PemObject::from_pem_slice(ca_pem.as_bytes())
            .map(|c: rustls::pki_types::CertificateDer<'_>| c.to_vec())
            .unwrap();
        config.root_cert = Some(vec![der]);
        config
    }

    async fn get(client: &kube::Client) -> Result<String, kube::Error> {
        client.request_text(http::Request::get("/version").body(Vec::new()).unwrap()).await
    }

    #[tokio::test]
    async fn a_server_whose_ca_true_certificate_is_the_trusted_one_is_reached() {
        let (pem, port) = server(IsCa::Ca(BasicConstraints::Unconstrained)).await;
        let client = kube_client(config(port, &pem)).unwrap();
        assert_eq!(get(&client).await.unwrap(), "{}");
    }

    #[tokio::test]
    async fn a_server_signed_by_no_trusted_authority_is_refused_in_gos_words() {
        let (_, port) = server(IsCa::ExplicitNoCa).await;
        let (other, _) = server(IsCa::ExplicitNoCa).await;
        let client = kube_client(config(port, &other)).unwrap();
        let error = get(&client).await.unwrap_err();
        assert_eq!(
            crate::transport::go_tls_error(&error).as_deref(),
            // Both certificates have rcgen's name: Go tries the other as the
            // issuer, and says why it is not.
            Some(
                "tls: failed to verify certificate: x509: certificate signed by unknown authority (possibly because \
                 of \"x509: invalid signature: parent certificate cannot sign this kind of certificate\" while \
                 trying to verify candidate authority certificate \"rcgen self signed cert\")"
            ),
            "{error:?}"
        );
    }
}
