//! The log backend (k8s.io/apiserver `plugin/pkg/audit/log`): one line per
//! event, JSON (`--audit-log-format json`, the default) or kube's `legacy`
//! text line, to a rotated file ([`super::rotate`]) or standard output (`-`).
//! A line is written whole with one `write` under the lock, so lines never
//! interleave; a failure is counted as plugin `log` and logged.

use std::io::Write;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;

use super::event::Event;
use super::metrics::AuditMetrics;
use super::rotate::{RotatingFile, Rotation};
use super::sink::Backend;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Legacy,
}

pub struct LogBackend {
    out: Mutex<Box<dyn Write + Send>>,
    format: Format,
    metrics: AuditMetrics,
}

impl LogBackend {
    /// Writes to `path` (`-`: standard output), created now as kube creates it at start.
    pub fn open(path: &str, rotation: Rotation, format: Format, metrics: AuditMetrics) -> anyhow::Result<Self> {
        let out: Box<dyn Write + Send> = if path == "-" {
            Box::new(std::io::stdout())
        } else {
            Box::new(
                RotatingFile::open(std::path::Path::new(path), rotation)
                    .with_context(|| format!("opening the audit log {path}"))?,
            )
        };
        Ok(Self::new(out, format, metrics))
    }

    pub fn new(out: Box<dyn Write + Send>, format: Format, metrics: AuditMetrics) -> Self {
        Self { out: Mutex::new(out), format, metrics }
    }

    /// Appends the event's line to `out`.
    fn encode(&self, event: &Event, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        match self.format {
            Format::Json => event.write_json(out)?,
            Format::Legacy => out.extend_from_slice(event.legacy_line().as_bytes()),
        }
        out.push(b'\n');
        Ok(())
    }
}

/// Lines written with one `write`, at most (a batch of large events is
/// written in pieces, each well under any file size limit).
const MAX_WRITE_BYTES: usize = 1 << 20;

/// A thread's encoding buffer larger than this is not kept for the next events.
const MAX_KEPT_BUFFER_BYTES: usize = 64 << 10;

thread_local! {
    /// Each thread encodes its events into one buffer kept from call to call:
    /// a fresh `Vec` per event grew four times on the way to a GET's ~600
    /// bytes, and was then copied into the batch's lines (callgrind: malloc,
    /// realloc and memcpy were a fifth of what auditing added to a GET).
    static LINES: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl LogBackend {
    /// Encodes `events` into `lines` and writes them, one `write` per
    /// [`MAX_WRITE_BYTES`] at most; a failed write costs the events in it.
    fn write_events(&self, lines: &mut Vec<u8>, events: &[Arc<Event>]) -> bool {
        lines.clear();
        let mut ok = true;
        // The events whose lines are in `lines`: events[first..], but those
        // that could not be encoded (counted already).
        let mut first = 0;
        let mut unencoded: Vec<usize> = Vec::new();
        for (i, event) in events.iter().enumerate() {
            let start = lines.len();
            if let Err(e) = self.encode(event, lines) {
                lines.truncate(start);
                self.metrics.plugin_error("log", &format!("encoding the event: {e}"), std::slice::from_ref(event));
                unencoded.push(i);
                ok = false;
                continue;
            }
            if start > 0 && lines.len() > MAX_WRITE_BYTES {
                ok &= self.write(&lines[..start], events, first..i, &unencoded);
                lines.drain(..start);
                first = i;
            }
        }
        ok &= self.write(lines, events, first..events.len(), &unencoded);
        ok
    }

    /// Writes `lines`, the encoded `events[range]` (but those `unencoded`), with one `write`.
    fn write(&self, lines: &[u8], events: &[Arc<Event>], range: std::ops::Range<usize>, unencoded: &[usize]) -> bool {
        if lines.is_empty() {
            return true;
        }
        let result = match self.out.lock() {
            Ok(mut out) => out.write_all(lines).and_then(|()| out.flush()).map_err(|e| e.to_string()),
            Err(_) => Err("the audit log's lock is poisoned".to_string()),
        };
        match result {
            Ok(()) => true,
            Err(error) => {
                let impacted: Vec<Arc<Event>> =
                    range.filter(|i| !unencoded.contains(i)).map(|i| events[i].clone()).collect();
                self.metrics.plugin_error("log", &error, &impacted);
                false
            }
        }
    }
}

#[async_trait::async_trait]
impl Backend for LogBackend {
    /// The lines of a batch are encoded outside the lock and written
    /// together: in batch mode the system calls are per batch, not per event.
    async fn process_events(&self, events: &[Arc<Event>]) -> bool {
        self.write_all_events(events)
    }

    /// A file write: never awaited.
    fn process_events_now(&self, events: &[Arc<Event>]) -> Option<bool> {
        Some(self.write_all_events(events))
    }
}

impl LogBackend {
    fn write_all_events(&self, events: &[Arc<Event>]) -> bool {
        LINES.with_borrow_mut(|lines| {
            let ok = self.write_events(lines, events);
            if lines.capacity() > MAX_KEPT_BUFFER_BYTES {
                *lines = Vec::new();
            }
            ok
        })
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::audit::event::Level;

    /// A writer that shares what it was given.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    struct Broken;

    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn one_line_per_event_in_either_format_and_failures_are_counted() {
        let ev = Arc::new(Event::new(Level::Metadata, "id-1".into(), Utc::now()));
        let out = Shared::default();
        let json = LogBackend::new(Box::new(out.clone()), Format::Json, AuditMetrics::default());
        assert!(json.process_events(&[ev.clone(), ev.clone()]).await);
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let parsed: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(parsed["auditID"], "id-1");
        let out = Shared::default();
        let legacy = LogBackend::new(Box::new(out.clone()), Format::Legacy, AuditMetrics::default());
        assert!(legacy.process_events(std::slice::from_ref(&ev)).await);
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert!(
            text.contains(" AUDIT: id=\"id-1\" stage=\"RequestReceived\"") && text.ends_with("\"<deferred>\"\n"),
            "{text}"
        );
        let metrics = AuditMetrics::default();
        let broken = LogBackend::new(Box::new(Broken), Format::Json, metrics.clone());
        assert!(!broken.process_events(&[ev.clone(), ev]).await);
        assert_eq!(metrics.errors_of("log"), 2);
    }
}
