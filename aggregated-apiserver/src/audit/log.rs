//! The log backend (k8s.io/apiserver `plugin/pkg/audit/log`): one line per
//! event, JSON (`--audit-log-format json`, the default) or kube's `legacy`
//! text line, to a rotated file ([`super::rotate`]) or standard output (`-`).
//! A line is written whole with one `write` under the lock, so lines never
//! interleave; a failure is counted as plugin `log` and logged.

use std::io::Write;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;

use super::backend::{Backend, LineBackend};
use super::encode::EventRef;
use super::event::Event;
use super::metrics::{AuditMetrics, Impacted};
use super::rotate::{RotatingFile, Rotation};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Legacy,
}

pub struct LogBackend {
    out: Out,
    format: Format,
    metrics: AuditMetrics,
}

/// Where lines go.
enum Out {
    /// Appended by any thread at once (see [`RotatingFile`]).
    File(RotatingFile),
    /// One writer at a time: standard output, a writer of the application's.
    Locked(Mutex<Box<dyn Write + Send>>),
}

impl Out {
    fn write(&self, lines: &[u8]) -> Result<(), String> {
        match self {
            Out::File(file) => file.append(lines).map_err(|e| e.to_string()),
            Out::Locked(out) => match out.lock() {
                Ok(mut out) => out.write_all(lines).and_then(|()| out.flush()).map_err(|e| e.to_string()),
                Err(_) => Err("the audit log's lock is poisoned".to_string()),
            },
        }
    }
}

impl LogBackend {
    /// Writes to `path` (`-`: standard output), created now as kube creates it at start.
    pub fn open(path: &str, rotation: Rotation, format: Format, metrics: AuditMetrics) -> anyhow::Result<Self> {
        if path == "-" {
            return Ok(Self::new(Box::new(std::io::stdout()), format, metrics));
        }
        let file = RotatingFile::open(std::path::Path::new(path), rotation)
            .with_context(|| format!("opening the audit log {path}"))?;
        Ok(Self { out: Out::File(file), format, metrics })
    }

    /// Writes to `out`, one writer at a time.
    pub fn new(out: Box<dyn Write + Send>, format: Format, metrics: AuditMetrics) -> Self {
        Self { out: Out::Locked(Mutex::new(out)), format, metrics }
    }
}

/// Lines written with one `write`, at most (a batch of large events is
/// written in pieces, each well under any file size limit).
const MAX_WRITE_BYTES: usize = 1 << 20;

/// A thread's encoding buffer larger than this is not kept for the next events.
const MAX_KEPT_BUFFER_BYTES: usize = 64 << 10;

thread_local! {
    /// Each thread encodes its events into one buffer kept from call to call:
    /// a fresh `Vec` per event would grow several times on the way to a GET's
    /// ~600 bytes and then be copied into the batch's lines (measured:
    /// docs/performance.md, "Auditing: the backends' buffers").
    static LINES: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl LogBackend {
    /// Writes `count` encoded lines, one `write` per [`MAX_WRITE_BYTES`] at
    /// most, cut at line ends; a failed write costs the events in it.
    fn write_lines(&self, mut lines: &[u8], count: usize) -> bool {
        let mut ok = true;
        let mut left = count;
        while !lines.is_empty() {
            let end = if lines.len() <= MAX_WRITE_BYTES {
                lines.len()
            } else {
                // The last line end within the limit, else the first past it.
                lines[..MAX_WRITE_BYTES]
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .or_else(|| lines.iter().position(|b| *b == b'\n'))
                    .map_or(lines.len(), |i| i + 1)
            };
            let (piece, rest) = lines.split_at(end);
            let in_piece = if rest.is_empty() { left } else { piece.iter().filter(|b| **b == b'\n').count() };
            left = left.saturating_sub(in_piece);
            ok &= self.write(piece, in_piece);
            lines = rest;
        }
        ok
    }

    /// Writes `lines` (`count` events) with one `write`.
    fn write(&self, lines: &[u8], count: usize) -> bool {
        match self.out.write(lines) {
            Ok(()) => true,
            Err(error) => {
                self.metrics.plugin_error(self.plugin(), &error, Impacted::Lines { lines, count });
                false
            }
        }
    }

    /// Encodes `events` into the thread's buffer and writes them.
    fn write_events<'a, 'e: 'a>(&self, events: impl IntoIterator<Item = &'a EventRef<'e>>) -> bool {
        LINES.with_borrow_mut(|lines| {
            lines.clear();
            let mut ok = true;
            let mut count = 0;
            for event in events {
                let start = lines.len();
                if let Err(e) = self.encode_line(event, lines) {
                    lines.truncate(start);
                    self.metrics.plugin_error(
                        self.plugin(),
                        &format!("encoding the event: {e}"),
                        Impacted::Event(event),
                    );
                    ok = false;
                    continue;
                }
                count += 1;
            }
            ok &= self.write_lines(lines, count);
            if lines.capacity() > MAX_KEPT_BUFFER_BYTES {
                *lines = Vec::new();
            }
            ok
        })
    }
}

#[async_trait::async_trait]
impl Backend for LogBackend {
    /// The lines of a batch are encoded outside the lock and written
    /// together: in batch mode the system calls are per batch, not per event.
    async fn process_events(&self, events: &[Arc<Event>]) -> bool {
        let events: Vec<EventRef<'_>> = events.iter().map(|e| EventRef::from(&**e)).collect();
        self.write_events(&events)
    }
}

#[async_trait::async_trait]
impl LineBackend for LogBackend {
    fn encode_line(&self, event: &EventRef<'_>, out: &mut Vec<u8>) -> serde_json::Result<()> {
        match self.format {
            Format::Json => event.write_json(out)?,
            Format::Legacy => out.extend_from_slice(event.legacy_line().as_bytes()),
        }
        out.push(b'\n');
        Ok(())
    }

    async fn process_lines(&self, lines: &[u8], count: usize) -> bool {
        self.write_lines(lines, count)
    }

    /// A file write: never awaited.
    fn write_lines_now(&self, lines: &[u8], count: usize) -> Option<bool> {
        Some(self.write_lines(lines, count))
    }

    fn writes_now(&self) -> bool {
        true
    }

    fn plugin(&self) -> &'static str {
        "log"
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
