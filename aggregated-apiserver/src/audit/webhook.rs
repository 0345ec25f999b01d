//! The webhook backend (k8s.io/apiserver `plugin/pkg/audit/webhook`): each
//! batch is POSTed as one audit.k8s.io/v1 `EventList` to the server of the
//! kubeconfig `--audit-webhook-config-file` (its URL, path included, its CA,
//! client certificate or token), with 30 s per attempt and, on any failure,
//! up to 5 attempts spaced from `--audit-webhook-initial-backoff` by ×1.5
//! with 20% jitter (kube's `DefaultRetryBackoffWithInitialDelay`). A batch
//! that never gets through is counted as plugin `webhook` and logged.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rand::Rng;

use super::backend::{Backend, LineBackend};
use super::encode::EventRef;
use super::event::Event;
use super::metrics::{AuditMetrics, Impacted};

/// kube's `defaultRequestTimeout` of webhooks.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const ATTEMPTS: u32 = 5;

pub struct WebhookBackend {
    client: kube::Client,
    /// The path (and query) of the kubeconfig's server URL.
    path: String,
    initial_backoff: Duration,
    metrics: AuditMetrics,
}

impl WebhookBackend {
    /// The webhook of the kubeconfig at `config_file`.
    pub async fn new(config_file: &Path, initial_backoff: Duration, metrics: AuditMetrics) -> anyhow::Result<Self> {
        let kubeconfig = kube::config::Kubeconfig::read_from(config_file)
            .with_context(|| format!("reading the audit webhook kubeconfig {}", config_file.display()))?;
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
            .await
            .with_context(|| format!("loading the audit webhook kubeconfig {}", config_file.display()))?;
        // kube-rs joins a request's path to the server URL's with a slash: the
        // URL's own path goes on each request instead, so it is POSTed to as written.
        let url = config.cluster_url.clone();
        let path = url.path_and_query().map_or("/", |pq| pq.as_str()).to_string();
        let mut base = http::uri::Builder::new();
        if let Some(scheme) = url.scheme() {
            base = base.scheme(scheme.clone());
        }
        if let Some(authority) = url.authority() {
            base = base.authority(authority.clone());
        }
        config.cluster_url = base.path_and_query("/").build().context("the audit webhook's server URL")?;
        config.default_retry = false;
        config.connect_timeout = Some(REQUEST_TIMEOUT);
        let client = crate::transport::kube_client(config).context("building the audit webhook client")?;
        Ok(Self { client, path, initial_backoff, metrics })
    }

    async fn post(&self, body: &[u8]) -> anyhow::Result<()> {
        let request = http::Request::post(&self.path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec())
            .context("building the request")?;
        match tokio::time::timeout(REQUEST_TIMEOUT, self.client.request_text(request)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(anyhow::Error::new(e)),
            Err(_) => anyhow::bail!("no answer within {REQUEST_TIMEOUT:?}"),
        }
    }
}

#[async_trait::async_trait]
impl Backend for WebhookBackend {
    async fn process_events(&self, events: &[Arc<Event>]) -> bool {
        let mut lines = Vec::new();
        for event in events {
            if let Err(e) = self.encode_line(&EventRef::from(&**event), &mut lines) {
                self.metrics.plugin_error(self.plugin(), &format!("encoding the event: {e}"), Impacted::Events(events));
                return false;
            }
        }
        self.process_lines(&lines, events.len()).await
    }
}

#[async_trait::async_trait]
impl LineBackend for WebhookBackend {
    /// An event's JSON: an item of the EventList.
    fn encode_line(&self, event: &EventRef<'_>, out: &mut Vec<u8>) -> serde_json::Result<()> {
        event.write_json(out)?;
        out.push(b'\n');
        Ok(())
    }

    fn plugin(&self) -> &'static str {
        "webhook"
    }

    /// POSTs the lines as one EventList.
    async fn process_lines(&self, lines: &[u8], count: usize) -> bool {
        let body = event_list(lines);
        let mut delay = self.initial_backoff;
        let mut last_error = None;
        for attempt in 1..=ATTEMPTS {
            match self.post(&body).await {
                Ok(()) => return true,
                Err(e) => last_error = Some(e),
            }
            if attempt < ATTEMPTS {
                let jitter = rand::rng().random_range(0.0..0.2);
                tokio::time::sleep(delay.mul_f64(1.0 + jitter)).await;
                delay = delay.mul_f64(1.5);
            }
        }
        let error = last_error.map_or_else(String::new, |e| format!("{e:#}"));
        self.metrics.plugin_error(self.plugin(), &error, Impacted::Lines { lines, count });
        false
    }
}

/// The EventList of events encoded as JSON lines: the bytes `EventList`'s
/// `Serialize` writes (the items are the lines, a comma where each newline was).
fn event_list(lines: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(lines.len() + 96);
    body.extend_from_slice(b"{\"kind\":\"EventList\",\"apiVersion\":\"audit.k8s.io/v1\",\"metadata\":{},\"items\":[");
    // JSON has no raw newline inside a line: each one ends an item.
    let items = lines.strip_suffix(b"\n").unwrap_or(lines);
    body.extend(items.iter().map(|b| if *b == b'\n' { b',' } else { *b }));
    body.extend_from_slice(b"]}");
    body
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::audit::event::Level;

    #[test]
    fn event_lists_hold_their_events_as_kube_writes_a_list() {
        let first = || Arc::new(Event::new(Level::Metadata, "a".into(), Utc::now()));
        let mut second = Event::new(Level::Request, "b\nc".into(), Utc::now());
        second.request_object = Some(serde_json::json!({"text": "x\ny", "list": [1, 2]}));
        for events in [vec![], vec![first()], vec![first(), Arc::new(second)]] {
            let mut lines = Vec::new();
            for event in &events {
                EventRef::from(&**event).write_json(&mut lines).unwrap();
                lines.push(b'\n');
            }
            let items: Vec<serde_json::Value> = lines
                .split(|b| *b == b'\n')
                .filter(|line| !line.is_empty())
                .map(|line| serde_json::from_slice(line).unwrap())
                .collect();
            let list = String::from_utf8(event_list(&lines)).unwrap();
            assert!(
                list.starts_with(r#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":["#),
                "{list}"
            );
            let list: serde_json::Value = serde_json::from_str(&list).unwrap();
            assert_eq!(list["items"], serde_json::Value::Array(items), "{list}");
        }
    }
}
