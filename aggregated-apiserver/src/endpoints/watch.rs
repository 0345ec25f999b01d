//! Watch streams: newline-delimited `{"type","object"}` events written from
//! stored bytes, with selector transitions (an object leaving the selection is
//! sent as DELETED, one entering it as ADDED), bookmarks, timeouts, the
//! initial-events-end bookmark, and an in-stream 410 ERROR when the requested
//! history is gone. A watcher that falls behind is closed; it never holds up
//! the writers or the other watchers.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use chrono::Utc;
use futures::{FutureExt, StreamExt};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::apimachinery::errors::ApiError;
use crate::endpoints::negotiation::Output;
use crate::registry::encode::{self, IncludeObject, ListMeta};
use crate::registry::{Filter, Registry, WatchPlan};
use crate::storage::{Event, EventType, StoredObject, WatchEnd};

/// Everything one watch stream needs to run.
pub struct WatchJob {
    pub registry: Arc<Registry>,
    pub plan: WatchPlan,
    pub filter: Filter,
    pub output: Output,
    pub bookmarks: bool,
    pub bookmark_interval: Duration,
    pub timeout: Duration,
    pub shutdown: CancellationToken,
    /// Called once when the stream ends (metrics).
    pub on_end: Option<Box<dyn FnOnce() + Send>>,
}

/// `{"type":"<kind>","object":<object>}\n`
fn encode_watch_line(kind: &str, object: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(object.len() + 40);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

/// The plain JSON line of a live event sent as `as_type`, encoded by the first
/// watcher that needs it and shared by all the others.
fn shared_json_line(ev: &Event, as_type: EventType) -> Bytes {
    ev.encoded.get_or_init(as_type, || encode_watch_line(as_type.as_str(), &ev.object.bytes))
}

/// Encodes one event line. Plain JSON lines of live events come from the
/// event's shared encoding instead (see [`shared_json_line`]).
fn event_line(registry: &Registry, output: Output, kind: EventType, obj: &StoredObject) -> Bytes {
    match output {
        Output::Json => encode_watch_line(kind.as_str(), &obj.bytes),
        Output::Metadata(v) => encode_watch_line(kind.as_str(), &encode::partial_object(v, obj)),
        Output::Table(v) => encode_watch_line(
            kind.as_str(),
            &encode::table(
                v,
                &registry.columns,
                &ListMeta { resource_version: obj.rv, ..Default::default() },
                std::slice::from_ref(obj),
                IncludeObject::Metadata,
                Utc::now(),
            ),
        ),
    }
}

/// A BOOKMARK event: only the resourceVersion (and, at the end of the initial
/// events, the `k8s.io/initial-events-end` annotation) matters to clients.
fn bookmark_line(registry: &Registry, output: Output, rv: u64, initial_end: bool) -> Bytes {
    let names = registry.kind.names();
    let (api_version, kind) = match output {
        Output::Metadata(v) => (format!("meta.k8s.io/{v}"), "PartialObjectMetadata".to_string()),
        _ => (names.api_version(), names.kind.to_string()),
    };
    let mut metadata = json!({ "resourceVersion": rv.to_string() });
    if initial_end {
        metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
    }
    let line =
        json!({ "type": "BOOKMARK", "object": { "kind": kind, "apiVersion": api_version, "metadata": metadata } });
    let mut out = serde_json::to_vec(&line).unwrap_or_default();
    out.push(b'\n');
    Bytes::from(out)
}

/// The in-stream ERROR event carrying a Status (410 Expired for a resume point
/// that is gone), as kube-apiserver sends it inside a 200 stream.
pub fn error_line(err: &ApiError) -> Bytes {
    let mut out = serde_json::to_vec(&json!({ "type": "ERROR", "object": err.status_body() })).unwrap_or_default();
    out.push(b'\n');
    Bytes::from(out)
}

/// Runs the watch, sending encoded lines into `tx` until the client leaves, the
/// timeout passes, the server shuts down, or the watcher falls behind.
pub async fn run(mut job: WatchJob, tx: mpsc::Sender<Bytes>) {
    let reg = job.registry.clone();
    let output = job.output;
    let deadline = tokio::time::sleep(job.timeout);
    tokio::pin!(deadline);
    let initial = std::mem::take(&mut job.plan.initial);
    for obj in &initial {
        if tx.send(event_line(&reg, output, EventType::Added, obj)).await.is_err() {
            return finish(job);
        }
    }
    if let Some(rv) = job.plan.initial_events_end {
        if tx.send(bookmark_line(&reg, output, rv, true)).await.is_err() {
            return finish(job);
        }
    }
    let mut bookmark_tick = tokio::time::interval(job.bookmark_interval);
    bookmark_tick.tick().await;
    let mut sent_rv = job.plan.from;
    loop {
        let item = tokio::select! {
            biased;
            _ = job.shutdown.cancelled() => break,
            _ = &mut deadline => break,
            _ = tx.closed() => break,
            _ = bookmark_tick.tick(), if job.bookmarks => {
                // The store publishes an event before its revision: when nothing
                // is waiting in the stream after reading `current`, every event up
                // to it has been delivered, so a bookmark there is safe.
                let current = reg.store.current_rv();
                match job.plan.stream.next().now_or_never() {
                    None => {
                        let rv = current.max(sent_rv);
                        if rv > 0 && tx.send(bookmark_line(&reg, output, rv, false)).await.is_err() {
                            break;
                        }
                        continue;
                    }
                    // An event was waiting: deliver it; a later tick bookmarks.
                    Some(item) => item,
                }
            }
            item = job.plan.stream.next() => item,
        };
        // Under load several events are already waiting: they go out as one
        // chunk (one write, one HTTP/2 frame) instead of one each.
        let mut batch = Batch::default();
        let mut next = Some(item);
        let mut ended = false;
        while let Some(item) = next.take() {
            let ev = match item {
                Some(Ok(ev)) => ev,
                Some(Err(WatchEnd::Lagged)) => {
                    tracing::debug!(resource = reg.kind.names().plural, "closing a watcher that fell behind");
                    ended = true;
                    break;
                }
                Some(Err(WatchEnd::Closed)) | None => {
                    ended = true;
                    break;
                }
            };
            sent_rv = ev.rv();
            if let Some(line) = line_for(&reg, &job.filter, output, &ev) {
                batch.push(line);
            }
            if batch.len < BATCH_BYTES {
                next = job.plan.stream.next().now_or_never();
            }
        }
        if let Some(chunk) = batch.take() {
            if tx.send(chunk).await.is_err() {
                break;
            }
        }
        if ended {
            break;
        }
    }
    finish(job)
}

/// The line a watcher with `filter` is sent for `ev`, if any: an object
/// leaving the selection is sent as DELETED, one entering it as ADDED.
fn line_for(reg: &Registry, filter: &Filter, output: Output, ev: &Event) -> Option<Bytes> {
    let now = filter.matches(&ev.object);
    let before = ev.prev.as_ref().is_some_and(|p| filter.matches(p));
    let kind = match ev.kind {
        EventType::Added if now => EventType::Added,
        EventType::Modified if now && before => EventType::Modified,
        EventType::Modified if now => EventType::Added,
        EventType::Modified if before => EventType::Deleted,
        EventType::Deleted if before || now => EventType::Deleted,
        _ => return None,
    };
    Some(match output {
        Output::Json => shared_json_line(ev, kind),
        other => event_line(reg, other, kind, &ev.object),
    })
}

/// How many bytes of waiting events one chunk gathers at most.
pub const BATCH_BYTES: usize = 16 * 1024;

/// Lines gathered for one send: a single line is sent as it is (shared by
/// every watcher), several are copied into one chunk.
#[derive(Default)]
struct Batch {
    first: Option<Bytes>,
    more: Option<BytesMut>,
    len: usize,
}

impl Batch {
    fn push(&mut self, line: Bytes) {
        self.len += line.len();
        match (&self.first, &mut self.more) {
            (None, _) => self.first = Some(line),
            (Some(first), None) => {
                let mut buf = BytesMut::with_capacity(BATCH_BYTES.max(self.len));
                buf.extend_from_slice(first);
                buf.extend_from_slice(&line);
                self.more = Some(buf);
            }
            (Some(_), Some(buf)) => buf.extend_from_slice(&line),
        }
    }

    fn take(self) -> Option<Bytes> {
        match self.more {
            Some(buf) => Some(buf.freeze()),
            None => self.first,
        }
    }
}

fn finish(mut job: WatchJob) {
    if let Some(f) = job.on_end.take() {
        f();
    }
}
