//! `--audit-*-truncate-*` (k8s.io/apiserver `plugin/pkg/audit/truncate`): an
//! event larger than the limit loses its request and response objects (and
//! says so in the annotation `audit.k8s.io/truncated: "true"`); one still too
//! large is dropped (counted as plugin `truncate`); batches are split so that
//! none passes the batch limit.

use std::sync::Arc;

use super::backend::{Backend, Handed};
use super::encode::EventRef;
use super::event::{Event, Level};
use super::metrics::{AuditMetrics, Impacted};
use super::options::TruncateConfig;

const ANNOTATION_KEY: &str = "audit.k8s.io/truncated";

pub struct Truncate {
    delegate: Arc<dyn Backend>,
    config: TruncateConfig,
    metrics: AuditMetrics,
}

impl Truncate {
    /// `delegate` itself when truncation is off.
    pub fn wrap(delegate: Arc<dyn Backend>, config: TruncateConfig, metrics: AuditMetrics) -> Arc<dyn Backend> {
        if config.enabled {
            Arc::new(Self { delegate, config, metrics })
        } else {
            delegate
        }
    }
}

fn size(event: &EventRef<'_>) -> usize {
    SIZING.with_borrow_mut(|buf| {
        buf.clear();
        let size = event.write_json(buf).map_or(usize::MAX, |()| buf.len() + 1);
        if buf.capacity() > MAX_KEPT_BYTES {
            *buf = Vec::new();
        }
        size
    })
}

thread_local! {
    /// Where an event is encoded to be measured.
    static SIZING: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

const MAX_KEPT_BYTES: usize = 64 << 10;

impl Truncate {
    /// `event` as it may be written: itself, or without its objects (owned,
    /// then); None when it is too large even so.
    fn fit(&self, event: &EventRef<'_>) -> Option<(Option<Event>, usize)> {
        let event_size = size(event);
        if event_size <= self.config.max_event_size {
            return Some((None, event_size));
        }
        if event.level() < Level::Request {
            return None;
        }
        let mut truncated = event.to_event();
        truncated.request_object = None;
        truncated.response_object = None;
        truncated.annotations.insert(ANNOTATION_KEY.into(), "true".into());
        let event_size = size(&EventRef::from(&truncated));
        (event_size <= self.config.max_event_size).then_some((Some(truncated), event_size))
    }
}

#[async_trait::async_trait]
impl Backend for Truncate {
    async fn process_events(&self, events: &[Arc<Event>]) -> bool {
        let mut ok = true;
        let mut batch: Vec<Arc<Event>> = Vec::new();
        let mut batch_size = 0;
        let mut too_large = Vec::new();
        for event in events {
            let Some((truncated, event_size)) = self.fit(&EventRef::from(&**event)) else {
                too_large.push(event.clone());
                continue;
            };
            let event = truncated.map_or_else(|| event.clone(), Arc::new);
            if !batch.is_empty() && batch_size + event_size > self.config.max_batch_size {
                ok &= self.delegate.process_events(&batch).await;
                batch.clear();
                batch_size = 0;
            }
            batch_size += event_size;
            batch.push(event);
        }
        if !batch.is_empty() {
            ok &= self.delegate.process_events(&batch).await;
        }
        if !too_large.is_empty() {
            let error = "event is too large even after truncating";
            self.metrics.plugin_error("truncate", &error, Impacted::Events(&too_large));
        }
        ok
    }

    /// One event: the batch limit does not split it.
    fn process_now(&self, event: &EventRef<'_>) -> Option<Handed> {
        if !self.delegate.at_once() {
            return None;
        }
        match self.fit(event) {
            Some((None, _)) => self.delegate.process_now(event),
            Some((Some(truncated), _)) => self.delegate.process_now(&EventRef::from(&truncated)),
            None => {
                let error = "event is too large even after truncating";
                self.metrics.plugin_error("truncate", &error, Impacted::Event(event));
                Some(Handed::Done(true))
            }
        }
    }

    fn at_once(&self) -> bool {
        self.delegate.at_once()
    }

    async fn shutdown(&self) {
        self.delegate.shutdown().await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use chrono::Utc;

    use super::*;

    #[derive(Default)]
    struct Keep(Mutex<Vec<Vec<Arc<Event>>>>);

    #[async_trait::async_trait]
    impl Backend for Keep {
        async fn process_events(&self, events: &[Arc<Event>]) -> bool {
            self.0.lock().unwrap().push(events.to_vec());
            true
        }
    }

    #[tokio::test]
    async fn large_objects_go_then_large_events_then_batches_split() {
        let keep = Arc::new(Keep::default());
        let metrics = AuditMetrics::default();
        let config = TruncateConfig { enabled: true, max_batch_size: 600, max_event_size: 500 };
        let t = Truncate::wrap(keep.clone(), config, metrics.clone());
        let mut big = Event::new(Level::RequestResponse, "a".into(), Utc::now());
        big.request_object = Some(serde_json::json!({"data": "x".repeat(2000)}));
        let mut huge_uri = Event::new(Level::Metadata, "b".into(), Utc::now());
        huge_uri.request_uri = "/".repeat(2000);
        let small = Event::new(Level::Metadata, "c".into(), Utc::now());
        let events: Vec<Arc<Event>> = vec![big.into(), huge_uri.into(), small.clone().into(), small.into()];
        assert!(t.process_events(&events).await);
        let batches = keep.0.lock().unwrap().clone();
        let ids: Vec<Vec<&str>> = batches.iter().map(|b| b.iter().map(|e| e.audit_id.as_str()).collect()).collect();
        assert_eq!(ids, vec![vec!["a", "c"], vec!["c"]], "the 600-byte batch limit splits them");
        assert!(batches[0][0].request_object.is_none());
        assert_eq!(batches[0][0].annotations.get(ANNOTATION_KEY).map(String::as_str), Some("true"));
        assert_eq!(metrics.errors_of("truncate"), 1, "the Metadata event too large is dropped");
    }
}
