//! Audit fixtures: a policy with a rule per level, reading the audit log the
//! server writes, and a webhook receiver (HTTPS, with the kubeconfig that
//! points at it) that keeps the EventLists it is sent, refuses them, or never
//! answers.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::Value;

/// Writes to Llamas in full, deletes with their request, status writes in
/// full, other Llama and FarmPod requests as metadata, the probes and metrics
/// not at all, everything else (discovery) as metadata without RequestReceived.
pub const POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/metrics"]
- level: None
  users: ["system:kube-aggregator"]
- level: RequestResponse
  verbs: ["create", "update", "patch"]
  resources:
  - group: farm.example.com
    resources: ["llamas"]
- level: Request
  verbs: ["delete", "deletecollection"]
  resources:
  - group: farm.example.com
    resources: ["llamas"]
- level: RequestResponse
  resources:
  - group: farm.example.com
    resources: ["*/status"]
- level: Metadata
  resources:
  - group: farm.example.com
- level: Metadata
  omitStages: ["RequestReceived"]
"#;

/// farm-apiserver registered on `cp` with delegated authentication (the
/// user comes from the aggregator), auditing under `policy` to `log`.
pub async fn register_audited<'cp>(
    cp: &'cp super::cluster::ControlPlane,
    policy: &Path,
    log: &Path,
) -> super::cluster::Registered<'cp> {
    let (policy, log) = (policy.to_string_lossy(), log.to_string_lossy());
    super::cluster::register_on(
        cp,
        &["--authentication", "delegated", "--audit-policy-file", &policy, "--audit-log-path", &log],
    )
    .await
}

/// Writes `policy` into `dir` and returns its path.
pub fn write_policy(dir: &Path, policy: &str) -> PathBuf {
    let path = dir.join("audit-policy.yaml");
    std::fs::write(&path, policy).expect("write the audit policy");
    path
}

/// Every event of a JSON audit log, in order: whole lines only (one being
/// written as the log is read has no newline yet).
pub fn events(log: &Path) -> Vec<Value> {
    let mut text = std::fs::read_to_string(log).unwrap_or_default();
    text.truncate(text.rfind('\n').map_or(0, |end| end + 1));
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("audit line {l:?}: {e}"))).collect()
}

/// The events of one audit ID.
pub fn of(events: &[Value], audit_id: &str) -> Vec<Value> {
    events.iter().filter(|e| e["auditID"] == audit_id).cloned().collect()
}

/// The stages of `events`, in order.
pub fn stages(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| e["stage"].as_str().unwrap_or_default().to_string()).collect()
}

/// Waits until the events of `audit_id` in `log` reach `stage`, and returns them.
pub async fn wait_for(log: &Path, audit_id: &str, stage: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found = of(&events(log), audit_id);
        if found.iter().any(|e| e["stage"] == stage) {
            return found;
        }
        assert!(Instant::now() < deadline, "no {stage} event for {audit_id}; its events: {found:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The Audit-ID a response carried.
pub fn audit_id(headers: &reqwest::header::HeaderMap) -> String {
    headers
        .get("audit-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no Audit-ID in {headers:?}"))
        .to_string()
}

/// What a webhook receiver does with a POST.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Receiver {
    /// Keeps the body and answers 200.
    Keep,
    /// Answers 500.
    Refuse,
    /// Reads the request and never answers.
    Hang,
}

/// A webhook receiver over HTTPS on loopback, and a kubeconfig pointing at it.
pub struct Webhook {
    pub kubeconfig: PathBuf,
    /// Every body POSTed to it, as JSON, with its path.
    pub received: Arc<Mutex<Vec<(String, Value)>>>,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Webhook {
    pub async fn start(mode: Receiver) -> Webhook {
        super::install_crypto();
        let dir = tempfile::tempdir().expect("tempdir");
        let key = rcgen::KeyPair::generate().expect("key");
        // Self-signed and CA:TRUE, as `openssl req -x509` makes one: the
        // kubeconfig trusts it as itself, as kube-apiserver's Go client does.
        let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).expect("self-signed");
        let config =
            axum_server::tls_rustls::RustlsConfig::from_pem(cert.pem().into_bytes(), key.serialize_pem().into_bytes())
                .await
                .expect("TLS config");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let received: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
        let kept = received.clone();
        let app = axum::Router::new().fallback(move |uri: http::Uri, body: bytes::Bytes| {
            let kept = kept.clone();
            async move {
                match mode {
                    Receiver::Keep => {
                        let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        kept.lock().unwrap().push((uri.path().to_string(), value));
                        http::StatusCode::OK
                    }
                    Receiver::Refuse => http::StatusCode::INTERNAL_SERVER_ERROR,
                    Receiver::Hang => {
                        std::future::pending::<()>().await;
                        http::StatusCode::OK
                    }
                }
            }
        });
        let server = axum_server::from_tcp_rustls(listener, config).expect("server");
        let task = tokio::spawn(async move {
            let _ = server.serve(app.into_make_service()).await;
        });
        let ca = base64::engine::general_purpose::STANDARD.encode(cert.pem());
        let kubeconfig = dir.path().join("webhook.kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: audit\n  cluster:\n    server: https://127.0.0.1:{port}/audit/events\n    certificate-authority-data: {ca}\ncontexts:\n- name: audit\n  context: {{cluster: audit, user: audit}}\ncurrent-context: audit\nusers:\n- name: audit\n  user: {{token: audit-token}}\n"
            ),
        )
        .expect("kubeconfig");
        Webhook { kubeconfig, received, _dir: dir, task }
    }

    /// Every event received so far, with the EventList it came in (its index).
    pub fn events(&self) -> Vec<(usize, Value)> {
        let received = self.received.lock().unwrap();
        received
            .iter()
            .enumerate()
            .flat_map(|(i, (_, list))| {
                list["items"].as_array().cloned().unwrap_or_default().into_iter().map(move |e| (i, e))
            })
            .collect()
    }
}
