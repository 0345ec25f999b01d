//! Calling a webhook: where it is (its `url`, or its `service` resolved as
//! kube-apiserver resolves one), how it is trusted (its `caBundle`, else the
//! system's roots, and for a service the name `<service>.<namespace>.svc`),
//! and the POST itself under the webhook's timeout, with kube's words for
//! whatever goes wrong.
//!
//! A service is resolved through the Service object, as kube-apiserver does
//! (an ExternalName's host, else the cluster IP and the service port), rather
//! than through cluster DNS: a webhook kube-apiserver can reach is reachable
//! from here too, also from a laptop that has no cluster DNS. TLS still
//! checks the name `<service>.<namespace>.svc`, the name its certificate is for.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::WebhookClientConfig;
use k8s_openapi::api::core::v1::Service;
use kube::Api;

use rustls::pki_types::pem::PemObject as _;

use super::authentication::WebhookAuthentication;
use super::source::Hook;
use crate::transport::{client_config, go_tls_error, Roots};

/// A webhook's answer larger than this is refused: no answer needs more than
/// a few objects' worth (objects are at most a few MiB).
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// How long a resolved Service is trusted before it is read again.
const SERVICE_TTL: Duration = Duration::from_secs(10);

/// A failed call, as kube's `ErrCallingWebhook`: `reason` is the text after
/// `failed calling webhook "<name>": `; `code` the HTTP code the webhook
/// answered, 0 when it answered none.
#[derive(Debug)]
pub struct CallError {
    pub reason: String,
    pub code: u16,
}

impl CallError {
    fn new(reason: impl Into<String>) -> Self {
        Self { reason: reason.into(), code: 0 }
    }
}

/// Where a webhook is reached and how it is named.
struct Endpoint {
    /// The host and port its credentials are looked up by.
    target: (String, u16),
    /// The URL as kube shows it in errors (with the service's DNS name).
    url: reqwest::Url,
    /// The name TLS checks, and the address it is reached at (None: by the
    /// URL's own host).
    resolved: Option<(String, SocketAddr)>,
}

#[derive(Hash, PartialEq, Eq, Clone)]
struct ClientKey {
    ca_bundle: Vec<u8>,
    resolved: Option<(String, SocketAddr)>,
    /// The client certificate and key presented, PEM.
    identity: Option<(Vec<u8>, Vec<u8>)>,
}

/// The webhook clients of a server, kept per trust and address, so that
/// connections are reused between calls.
pub struct Caller {
    cluster: kube::Client,
    authentication: WebhookAuthentication,
    clients: Mutex<HashMap<ClientKey, reqwest::Client>>,
    services: Mutex<HashMap<(String, String), ReadService>>,
}

/// A Service and when it was read.
type ReadService = (Instant, Arc<Service>);

impl Caller {
    pub fn new(cluster: kube::Client, authentication: WebhookAuthentication) -> Self {
        Self { cluster, authentication, clients: Mutex::new(HashMap::new()), services: Mutex::new(HashMap::new()) }
    }

    /// POSTs `body` (an AdmissionReview) to the webhook and returns its answer's body.
    pub async fn call(&self, hook: &Hook, body: Vec<u8>) -> Result<Vec<u8>, CallError> {
        let endpoint = self.endpoint(&hook.client_config, hook.timeout).await?;
        let shown = endpoint.url.to_string();
        let users = if hook.mutating { &self.authentication.mutating } else { &self.authentication.validating };
        let credentials = users.for_target(&endpoint.target.0, endpoint.target.1);
        let client = self.client(&hook.client_config, endpoint.resolved.clone(), credentials.identity)?;
        // The trace context of the request being admitted, when it is traced.
        let mut request =
            client.post(endpoint.url.clone()).headers(crate::trace::headers_for(&opentelemetry::Context::current()));
        if let Some(token) = &credentials.bearer_token {
            request = request.bearer_auth(token);
        }
        let request = request
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, */*")
            .timeout(hook.timeout)
            .body(body);
        let mut response = request.send().await.map_err(|e| CallError::new(post_error(&shown, &e)))?;
        let code = response.status().as_u16();
        let mut answer = Vec::new();
        loop {
            match tokio::time::timeout(hook.timeout, response.chunk()).await {
                Err(_) => {
                    return Err(CallError {
                        reason: format!("failed to call webhook: Post {shown:?}: context deadline exceeded"),
                        code,
                    })
                }
                Ok(Err(e)) => return Err(CallError { reason: post_error(&shown, &e), code }),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(chunk))) => {
                    if answer.len() + chunk.len() > MAX_ANSWER_BYTES {
                        return Err(CallError {
                            reason: format!(
                                "failed to call webhook: the answer is larger than {MAX_ANSWER_BYTES} bytes"
                            ),
                            code,
                        });
                    }
                    answer.extend_from_slice(&chunk);
                }
            }
        }
        if !(200..300).contains(&code) {
            return Err(CallError { reason: format!("failed to call webhook: {}", http_error(code, &answer)), code });
        }
        Ok(answer)
    }

    async fn endpoint(&self, config: &WebhookClientConfig, timeout: Duration) -> Result<Endpoint, CallError> {
        // client-go sends the timeout as a query parameter too, rounded up to seconds.
        let timeout_param = format!("timeout={}s", timeout.as_secs().max(1));
        if let Some(service) = &config.service {
            let port = service.port.filter(|p| *p != 0).unwrap_or(443);
            let server_name = format!("{}.{}.svc", service.name, service.namespace);
            let path = service.path.as_deref().unwrap_or("");
            let shown =
                format!("https://{server_name}:{port}{}?{timeout_param}", if path.is_empty() { "/" } else { path });
            let url = reqwest::Url::parse(&shown)
                .map_err(|e| CallError::new(format!("failed to call webhook: parse {shown:?}: {e}")))?;
            let address = self
                .resolve_service(&service.namespace, &service.name, port)
                .await
                .map_err(|why| CallError::new(format!("failed to call webhook: Post {shown:?}: {why}")))?;
            let target = (server_name.clone(), u16::try_from(port).unwrap_or(443));
            return Ok(Endpoint { target, url, resolved: Some((server_name, address)) });
        }
        let Some(url) = config.url.as_deref() else {
            return Err(CallError::new("webhook configuration must have either service or URL"));
        };
        let mut url = reqwest::Url::parse(url).map_err(|e| CallError::new(format!("Unparsable URL: {e}")))?;
        url.set_query(Some(&timeout_param));
        let target = (url.host_str().unwrap_or("").to_string(), url.port_or_known_default().unwrap_or(443));
        Ok(Endpoint { target, url, resolved: None })
    }

    /// The address of a Service's port, as kube-apiserver's cluster-IP
    /// resolver finds it.
    async fn resolve_service(&self, namespace: &str, name: &str, port: i32) -> Result<SocketAddr, String> {
        let service = self.service(namespace, name).await?;
        let spec = service.spec.clone().unwrap_or_default();
        let (host, port) = match spec.type_.as_deref().unwrap_or("ClusterIP") {
            "ExternalName" => (spec.external_name.clone().unwrap_or_default(), port),
            "ClusterIP" | "LoadBalancer" | "NodePort" => {
                let ip = spec.cluster_ip.clone().unwrap_or_default();
                if ip == "None" || ip.is_empty() {
                    return Err("cannot route to service with ClusterIP \"None\"".into());
                }
                if !spec.ports.iter().flatten().any(|p| p.port == port) {
                    return Err(format!("no service port {port} found for service {name:?}"));
                }
                (ip, port)
            }
            other => return Err(format!("unsupported service type {other:?}")),
        };
        let port = u16::try_from(port).map_err(|_| format!("invalid port {port}"))?;
        let mut addresses = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| format!("dial tcp: lookup {host}: {e}"))?;
        addresses.next().ok_or_else(|| format!("dial tcp: lookup {host}: no such host"))
    }

    async fn service(&self, namespace: &str, name: &str) -> Result<Arc<Service>, String> {
        let key = (namespace.to_string(), name.to_string());
        if let Some((read, service)) = self.services.lock().ok().and_then(|s| s.get(&key).cloned()) {
            if read.elapsed() < SERVICE_TTL {
                return Ok(service);
            }
        }
        let api: Api<Service> = Api::namespaced(self.cluster.clone(), namespace);
        match api.get_opt(name).await {
            Ok(Some(service)) => {
                let service = Arc::new(service);
                if let Ok(mut services) = self.services.lock() {
                    services.insert(key, (Instant::now(), service.clone()));
                }
                Ok(service)
            }
            Ok(None) => Err(format!("service \"{name}\" not found")),
            Err(e) => Err(format!("reading service {namespace}/{name}: {e}")),
        }
    }

    fn client(
        &self,
        config: &WebhookClientConfig,
        resolved: Option<(String, SocketAddr)>,
        identity: Option<(Vec<u8>, Vec<u8>)>,
    ) -> Result<reqwest::Client, CallError> {
        let ca_bundle = config.ca_bundle.as_ref().map(|b| b.0.clone()).unwrap_or_default();
        let key = ClientKey { ca_bundle, resolved, identity };
        if let Some(client) = self.clients.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(client);
        }
        let client = build_client(&key).map_err(|e| CallError::new(format!("could not get REST client: {e}")))?;
        if let Ok(mut clients) = self.clients.lock() {
            // Configurations come and go: a bounded cache, emptied when full.
            if clients.len() >= 256 {
                clients.clear();
            }
            clients.insert(key, client.clone());
        }
        Ok(client)
    }
}

fn build_client(key: &ClientKey) -> anyhow::Result<reqwest::Client> {
    use anyhow::Context as _;
    let roots = if key.ca_bundle.is_empty() { Roots::System } else { Roots::Pem(key.ca_bundle.clone()) };
    let identity = match &key.identity {
        None => None,
        Some((certificate, private_key)) => {
            let chain: Vec<_> = rustls_pemfile::certs(&mut certificate.as_slice())
                .collect::<Result<_, _>>()
                .context("reading the client certificate")?;
            let private_key =
                rustls::pki_types::PrivateKeyDer::from_pem_slice(private_key).context("reading the client key")?;
            Some((chain, private_key))
        }
    };
    // kube-apiserver speaks HTTP/1.1 to webhooks.
    let tls = client_config(roots, identity, &[b"http/1.1"])?;
    let mut builder = reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .redirect(reqwest::redirect::Policy::none())
        .pool_idle_timeout(Duration::from_secs(90))
        .no_proxy();
    if let Some((server_name, address)) = &key.resolved {
        builder = builder.resolve(server_name, *address);
    }
    builder.build().context("building the webhook client")
}

/// A failed POST in the words of Go's `net/http` client, as kube reports it.
fn post_error(shown: &str, e: &reqwest::Error) -> String {
    let why = if e.is_timeout() {
        "context deadline exceeded".to_string()
    } else if let Some(tls) = go_tls_error(e) {
        tls
    } else {
        // The innermost cause says what happened (refused, TLS, reset).
        let mut source: &dyn std::error::Error = e;
        while let Some(next) = source.source() {
            source = next;
        }
        if e.is_connect() {
            format!("dial tcp: {source}")
        } else {
            source.to_string()
        }
    };
    format!("failed to call webhook: Post {shown:?}: {why}")
}

/// What client-go says of a non-2xx answer: the Status it carries, else the body.
fn http_error(code: u16, body: &[u8]) -> String {
    if let Ok(status) = serde_json::from_slice::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>(body) {
        if let Some(message) = status.message.filter(|m| !m.is_empty()) {
            return message;
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        format!("the server responded with the status code {code} but did not return more information")
    } else {
        format!("an error on the server ({text:?}) has prevented the request from succeeding")
    }
}
