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

    fn line(&self, event: &Event) -> Result<Vec<u8>, serde_json::Error> {
        Ok(match self.format {
            Format::Json => {
                let mut line = serde_json::to_vec(event)?;
                line.push(b'\n');
                line
            }
            Format::Legacy => {
                let mut line = event.legacy_line().into_bytes();
                line.push(b'\n');
                line
            }
        })
    }
}

/// Lines written with one `write`, at most (a batch of large events is
/// written in pieces, each well under any file size limit).
const MAX_WRITE_BYTES: usize = 1 << 20;

impl LogBackend {
    /// Writes `lines` (the encoded `events`) with one `write`; a failure costs them all.
    fn write(&self, lines: &mut Vec<u8>, events: &mut Vec<Arc<Event>>) -> bool {
        if lines.is_empty() {
            return true;
        }
        let result = match self.out.lock() {
            Ok(mut out) => out.write_all(lines).and_then(|()| out.flush()).map_err(|e| e.to_string()),
            Err(_) => Err("the audit log's lock is poisoned".to_string()),
        };
        lines.clear();
        let ok = match result {
            Ok(()) => true,
            Err(error) => {
                self.metrics.plugin_error("log", &error, events);
                false
            }
        };
        events.clear();
        ok
    }
}

#[async_trait::async_trait]
impl Backend for LogBackend {
    /// The lines of a batch are encoded outside the lock and written
    /// together: in batch mode the system calls are per batch, not per event.
    async fn process_events(&self, events: &[Arc<Event>]) -> bool {
        let mut ok = true;
        let mut lines = Vec::new();
        let mut pending: Vec<Arc<Event>> = Vec::new();
        for event in events {
            match self.line(event) {
                Ok(line) => {
                    if !lines.is_empty() && lines.len() + line.len() > MAX_WRITE_BYTES {
                        ok &= self.write(&mut lines, &mut pending);
                    }
                    lines.extend_from_slice(&line);
                    pending.push(event.clone());
                }
                Err(e) => {
                    self.metrics.plugin_error("log", &format!("encoding the event: {e}"), std::slice::from_ref(event));
                    ok = false;
                }
            }
        }
        ok &= self.write(&mut lines, &mut pending);
        ok
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
