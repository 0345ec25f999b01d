//! A real admission webhook server for the tests: HTTPS with a CA of its
//! own (the caBundle of the configurations), answering each path with one
//! behaviour, and recording every AdmissionReview it was sent.
//!
//! | path | answer |
//! | --- | --- |
//! | `/allow` | allowed |
//! | `/deny` | denied: 403 Forbidden, "llamas named <name> are not welcome" |
//! | `/deny-plain` | denied with no Status at all |
//! | `/warn` | allowed, one warning and one audit annotation |
//! | `/label` | a JSON patch adding the label `mutated: yes` |
//! | `/bad-schema` | a JSON patch making `spec.weight` a string |
//! | `/rename` | a JSON patch renaming the object |
//! | `/break-managed-fields` | a JSON patch making managedFields undecodable (an unknown operation) |
//! | `/reinvoke-first` | annotates `first-saw-second: yes` once the label `second` is there |
//! | `/reinvoke-second` | adds the label `second: yes` |
//! | `/hang` | answers after 5 s |
//! | `/hold` | allowed; for objects named `held-*`, only once the test calls [`WebhookServer::release_held`] |
//! | `/garbage` | a body that is no AdmissionReview |
//! | `/wrong-uid` | an answer for another request |
//! | `/http-error` | HTTP 500 with a text body |
//! | `/convert` | a CRD conversion webhook for Llamas in any group: the ConversionReview's objects converted by farm-apiserver's own conversions |

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use rcgen::{CertificateParams, KeyPair, SanType};
use serde_json::{json, Value};

use super::identity::new_ca;

/// What a webhook server presents at the TLS handshake.
pub struct Serving {
    /// The certificate chain, leaf first, PEM.
    pub chain_pem: String,
    /// The leaf's private key, PEM.
    pub key_pem: String,
    /// Whether the server speaks TLS 1.2 only (else 1.2 and 1.3).
    pub tls12_only: bool,
}

/// A webhook server running until the test process ends.
pub struct WebhookServer {
    pub port: u16,
    /// The CA that signed the serving certificate, PEM.
    pub ca_pem: String,
    /// Every review received: (path, AdmissionReview).
    pub reviews: Arc<Mutex<Vec<(String, Value)>>>,
    /// The `traceparent` each review came with, by the review's request UID.
    pub traceparents: Arc<Mutex<BTreeMap<String, String>>>,
    /// Set once `/hold` may answer for the objects it holds.
    released: tokio::sync::watch::Sender<bool>,
}

impl WebhookServer {
    /// Serves on 127.0.0.1 with a certificate for `localhost`, 127.0.0.1 and `dns_names`.
    pub async fn start(dns_names: &[&str]) -> WebhookServer {
        Self::start_requiring(dns_names, None).await
    }

    /// As [`Self::start`], refusing at the TLS handshake any caller without a
    /// client certificate signed by `client_ca_pem` when one is given.
    pub async fn start_requiring(dns_names: &[&str], client_ca_pem: Option<&str>) -> WebhookServer {
        let (issuer, ca_pem) = new_ca("test-webhook-ca");
        let key = KeyPair::generate().unwrap();
        let mut names: Vec<String> = vec!["localhost".into()];
        names.extend(dns_names.iter().map(|s| s.to_string()));
        let mut params = CertificateParams::new(names).unwrap();
        params.subject_alt_names.push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
        let cert = params.signed_by(&key, &issuer).unwrap();
        let serving = Serving { chain_pem: cert.pem(), key_pem: key.serialize_pem(), tls12_only: false };
        Self::serve(&serving, ca_pem, client_ca_pem)
    }

    /// Serves `serving`'s certificate chain on 127.0.0.1; `ca_pem` is what
    /// configurations trust it by (their caBundle).
    pub fn start_serving(serving: &Serving, ca_pem: String) -> WebhookServer {
        Self::serve(serving, ca_pem, None)
    }

    fn serve(serving: &Serving, ca_pem: String, client_ca_pem: Option<&str>) -> WebhookServer {
        use rustls::pki_types::pem::PemObject as _;
        let certs: Vec<_> = rustls::pki_types::CertificateDer::pem_slice_iter(serving.chain_pem.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let versions: &[&rustls::SupportedProtocolVersion] =
            if serving.tls12_only { &[&rustls::version::TLS12] } else { rustls::DEFAULT_VERSIONS };
        let builder =
            rustls::ServerConfig::builder_with_provider(provider.clone()).with_protocol_versions(versions).unwrap();
        let builder = match client_ca_pem {
            None => builder.with_no_client_auth(),
            Some(pem) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in rustls_pemfile::certs(&mut pem.as_bytes()) {
                    roots.add(cert.unwrap()).unwrap();
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .unwrap();
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_single_cert(certs, key).unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let reviews: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
        let recorded = reviews.clone();
        let traceparents: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
        let traced = traceparents.clone();
        let (released, release) = tokio::sync::watch::channel(false);
        let app = axum::Router::new()
            .fallback(move |uri: Uri, headers: http::HeaderMap, body: Bytes| {
                let (recorded, mut release) = (recorded.clone(), release.clone());
                if let Some(parent) = headers.get("traceparent").and_then(|v| v.to_str().ok()) {
                    let uid = serde_json::from_slice::<Value>(&body)
                        .ok()
                        .and_then(|r| r["request"]["uid"].as_str().map(String::from));
                    traced.lock().unwrap().insert(uid.unwrap_or_default(), parent.to_string());
                }
                async move { answer(uri.path(), &body, &recorded, &mut release).await }
            })
            // A conversion review carries a whole list's objects.
            .layer(axum::extract::DefaultBodyLimit::max(64 << 20));
        let tls = axum_server::tls_rustls::RustlsConfig::from_config(Arc::new(config));
        // Its own runtime: the server outlives any one test's runtime.
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
            rt.block_on(async move {
                axum_server::from_tcp_rustls(listener, tls).unwrap().serve(app.into_make_service()).await.unwrap();
            });
        });
        WebhookServer { port, ca_pem, reviews, traceparents, released }
    }

    /// Lets `/hold` answer for the objects it holds, now and from now on.
    pub fn release_held(&self) {
        self.released.send_replace(true);
    }

    /// The caBundle field of a configuration (base64 of the CA's PEM).
    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    /// The reviews received for `path` about objects in `namespace`.
    pub fn reviews_for(&self, path: &str, namespace: &str) -> Vec<Value> {
        self.reviews
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, r)| p == path && r["request"]["namespace"] == namespace)
            .map(|(_, r)| r.clone())
            .collect()
    }
}

fn review_answer(review: &Value, response: Value) -> Value {
    let mut response = response;
    response["uid"] = review["request"]["uid"].clone();
    json!({"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": response})
}

fn json_patch(review: &Value, operations: Value) -> Value {
    let patch = base64::engine::general_purpose::STANDARD.encode(operations.to_string());
    review_answer(review, json!({"allowed": true, "patchType": "JSONPatch", "patch": patch}))
}

async fn answer(
    path: &str,
    body: &[u8],
    recorded: &Mutex<Vec<(String, Value)>>,
    release: &mut tokio::sync::watch::Receiver<bool>,
) -> Response {
    let Ok(review) = serde_json::from_slice::<Value>(body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    if path == "/convert" {
        return convert(review);
    }
    recorded.lock().unwrap().push((path.to_string(), review.clone()));
    let object = &review["request"]["object"];
    let name = object["metadata"]["name"].as_str().unwrap_or("").to_string();
    let labels = &object["metadata"]["labels"];
    let body = match path {
        "/allow" => review_answer(&review, json!({"allowed": true})),
        "/deny" => review_answer(
            &review,
            json!({"allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": format!("llamas named {name} are not welcome")}}),
        ),
        "/deny-plain" => review_answer(&review, json!({"allowed": false})),
        "/warn" => review_answer(
            &review,
            json!({"allowed": true, "warnings": ["this llama is watched"], "auditAnnotations": {"checked": "yes"}}),
        ),
        "/label" if labels.is_object() => {
            json_patch(&review, json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]))
        }
        "/label" => {
            json_patch(&review, json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}]))
        }
        // For Scales: replicas doubled, and more than 10 refused.
        "/double-replicas" => {
            let replicas = object["spec"]["replicas"].as_i64().unwrap_or(0);
            json_patch(&review, json!([{"op": "replace", "path": "/spec/replicas", "value": replicas * 2}]))
        }
        "/cap-replicas" if object["spec"]["replicas"].as_i64().unwrap_or(0) > 10 => review_answer(
            &review,
            json!({"allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": "a herd of more than 10 is not welcome"}}),
        ),
        "/cap-replicas" => review_answer(&review, json!({"allowed": true})),
        "/bad-schema" => json_patch(&review, json!([{"op": "replace", "path": "/spec/weight", "value": "heavy"}])),
        "/break-managed-fields" => json_patch(
            &review,
            json!([{"op": "add", "path": "/metadata/managedFields", "value": [
                {"manager": "breaker", "operation": "Bogus", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {}}
            ]}]),
        ),
        "/rename" => json_patch(&review, json!([{"op": "replace", "path": "/metadata/name", "value": "renamed"}])),
        "/reinvoke-second" if labels["second"] == "yes" => review_answer(&review, json!({"allowed": true})),
        "/reinvoke-second" if labels.is_object() => {
            json_patch(&review, json!([{"op": "add", "path": "/metadata/labels/second", "value": "yes"}]))
        }
        "/reinvoke-second" => {
            json_patch(&review, json!([{"op": "add", "path": "/metadata/labels", "value": {"second": "yes"}}]))
        }
        "/reinvoke-first" if labels["second"] == "yes" => {
            let annotations = &object["metadata"]["annotations"];
            if annotations["first-saw-second"] == "yes" {
                review_answer(&review, json!({"allowed": true}))
            } else if annotations.is_object() {
                json_patch(
                    &review,
                    json!([{"op": "add", "path": "/metadata/annotations/first-saw-second", "value": "yes"}]),
                )
            } else {
                json_patch(
                    &review,
                    json!([{"op": "add", "path": "/metadata/annotations", "value": {"first-saw-second": "yes"}}]),
                )
            }
        }
        "/reinvoke-first" => review_answer(&review, json!({"allowed": true})),
        "/hang" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            review_answer(&review, json!({"allowed": true}))
        }
        "/hold" => {
            if name.starts_with("held-") {
                let _ = release.wait_for(|released| *released).await;
            }
            review_answer(&review, json!({"allowed": true}))
        }
        "/garbage" => return (StatusCode::OK, "this is not a review").into_response(),
        "/wrong-uid" => {
            let mut a = review_answer(&review, json!({"allowed": true}));
            a["response"]["uid"] = json!("not-the-uid");
            a
        }
        "/http-error" => return (StatusCode::INTERNAL_SERVER_ERROR, "webhook broke").into_response(),
        _ => return (StatusCode::NOT_FOUND, "no such webhook").into_response(),
    };
    ([("content-type", "application/json")], body.to_string()).into_response()
}

/// Answers a ConversionReview as a Llama CRD's conversion webhook: each
/// object, of the CRD's group, converted as farm-apiserver converts it
/// between `farm.example.com`'s versions.
fn convert(review: Value) -> Response {
    use aggregated_apiserver::Kind;
    use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
    use kube::core::Status;
    let Ok(review) = serde_json::from_value::<ConversionReview>(review) else {
        return (StatusCode::BAD_REQUEST, "not a ConversionReview").into_response();
    };
    let Ok(request) = ConversionRequest::from_review(review) else {
        return (StatusCode::BAD_REQUEST, "a ConversionReview without a request").into_response();
    };
    static CONVERT: std::sync::OnceLock<Arc<dyn aggregated_apiserver::Convert>> = std::sync::OnceLock::new();
    let converter = CONVERT.get_or_init(|| {
        let kind = farm_apiserver::llama::kind().expect("Llama is described");
        kind.other_versions().expect("Llama has other versions").convert
    });
    // `<group>/<version>` as farm.example.com's, and back.
    let split = |api_version: &str| api_version.split_once('/').map(|(g, v)| (g.to_string(), v.to_string()));
    let Some((group, desired)) = split(&request.desired_api_version) else {
        return (StatusCode::BAD_REQUEST, "desiredAPIVersion names no group").into_response();
    };
    let mut converted = Vec::new();
    let mut failed = None;
    for mut obj in request.objects.clone() {
        let version = obj["apiVersion"].as_str().and_then(split).map(|(_, v)| v).unwrap_or_default();
        obj["apiVersion"] = json!(format!("farm.example.com/{version}"));
        match converter.convert(obj, &format!("farm.example.com/{desired}")) {
            Ok(mut out) => {
                out["apiVersion"] = json!(format!("{group}/{desired}"));
                converted.push(out);
            }
            Err(why) => {
                failed = Some(why);
                break;
            }
        }
    }
    let response = ConversionResponse::for_request(request);
    let response = match failed {
        None => response.success(converted),
        Some(why) => response.failure(Status::failure(&why, "ConversionFailed")),
    };
    ([("content-type", "application/json")], serde_json::to_string(&response.into_review()).unwrap_or_default())
        .into_response()
}
