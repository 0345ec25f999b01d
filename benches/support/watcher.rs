//! One benchmark watcher: a watch stream read line by line, cheaply (the event
//! type, resourceVersion and send stamp are found by substring search, no JSON
//! parse, so the client is not what is measured), that checks order, records
//! each event's delivery latency, and resumes from its last resourceVersion
//! when the server closes the stream, as a client that was cut off does.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;

/// The key (label or annotation) whose value is the write's send time in unix nanoseconds.
pub const STAMP_KEY: &str = "watchbench-sent";

/// Unix time in nanoseconds (the writers' stamps and the watchers' clock are the same clock).
pub fn unix_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// What to watch and how to read it.
pub struct WatchSpec {
    pub client: reqwest::Client,
    /// The collection URL with its selectors (`?labelSelector=...` or `?` alone).
    pub url: String,
    /// The resourceVersion to start from (a list's: no initial events).
    pub from_rv: u64,
    /// A slow reader: sleeps this long after each line until the server first
    /// closes its stream, then reads at full speed.
    pub slow_pace: Option<Duration>,
    /// Cancelled when the slow reader should stop being slow even if the
    /// server never closed it (the writes are over).
    pub hurry: CancellationToken,
    /// Keep every event's resourceVersion (for an exact completeness check).
    pub keep_rvs: bool,
}

/// Counters the benchmark polls while the watcher runs.
#[derive(Default)]
pub struct Progress {
    pub events: AtomicU64,
}

/// A time the server ended this watcher's stream, and how far it had come.
pub struct Close {
    pub after: Duration,
    pub events: u64,
    pub last_rv: u64,
    pub why: String,
}

/// Everything one watcher saw.
#[derive(Default)]
pub struct WatchReport {
    pub events: u64,
    /// Delivery latency of each event carrying a stamp, in microseconds.
    pub latencies_us: Vec<u32>,
    /// Events whose resourceVersion was not above the previous one (out of order or repeated).
    pub out_of_order: u64,
    /// Events without a stamp (not one of the benchmark's writes).
    pub unstamped: u64,
    pub rvs: Vec<u64>,
    pub closes: Vec<Close>,
    /// Failures: refused (re)connections, ERROR events (e.g. 410 Expired on resume).
    pub errors: Vec<String>,
    /// The watch could not go on (a resume refused with 410): events after it are missed.
    pub gave_up: bool,
}

fn find(haystack: &str, needle: &str) -> Option<usize> {
    haystack.find(needle).map(|i| i + needle.len())
}

/// The string value after `"key":"` (up to the next quote).
fn string_after<'a>(line: &'a str, key_quoted_colon: &str) -> Option<&'a str> {
    let start = find(line, key_quoted_colon)?;
    let len = line[start..].find('"')?;
    Some(&line[start..start + len])
}

/// Runs the watch until `stop` is cancelled. `opened` is incremented once,
/// when the first stream is established.
pub async fn run(
    spec: WatchSpec,
    progress: Arc<Progress>,
    opened: Arc<AtomicUsize>,
    stop: CancellationToken,
) -> WatchReport {
    let started = Instant::now();
    let stamp_key = format!("\"{STAMP_KEY}\":\"");
    let mut report = WatchReport::default();
    let mut last_rv = spec.from_rv;
    let mut slow = spec.slow_pace;
    let hurry = spec.hurry.clone();
    let mut first = true;
    'reconnect: while !stop.is_cancelled() {
        // No timeoutSeconds limit worth the name: the benchmark ends it.
        let url = format!("{}&watch=true&resourceVersion={last_rv}&timeoutSeconds=3600", spec.url);
        let sent = tokio::select! {
            _ = stop.cancelled() => break,
            r = spec.client.get(&url).header("Accept", "application/json").send() => r,
        };
        let mut resp = match sent {
            Ok(r) if r.status().is_success() => r,
            Ok(r) => {
                let status = r.status();
                let body = r.text().await.unwrap_or_default();
                report.errors.push(format!("watch from {last_rv}: {status}: {}", body.trim()));
                if status == reqwest::StatusCode::GONE {
                    report.gave_up = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Err(e) => {
                report.errors.push(format!("watch from {last_rv}: {e}"));
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        if first {
            first = false;
            opened.fetch_add(1, Ordering::SeqCst);
        }
        let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
        let why = loop {
            let chunk = tokio::select! {
                _ = stop.cancelled() => break 'reconnect,
                c = resp.chunk() => c,
            };
            let chunk = match chunk {
                Ok(Some(c)) => c,
                Ok(None) => break "the server ended the stream".to_string(),
                Err(e) => break format!("the stream failed: {e}"),
            };
            let now = unix_nanos();
            buf.extend_from_slice(&chunk);
            let mut consumed = 0;
            while let Some(len) = buf[consumed..].iter().position(|b| *b == b'\n') {
                let line = &buf[consumed..consumed + len];
                consumed += len + 1;
                let Ok(line) = std::str::from_utf8(line) else {
                    report.errors.push("an event line is not UTF-8".into());
                    continue;
                };
                let Some(kind) = string_after(line, "{\"type\":\"") else { continue };
                if kind == "ERROR" {
                    report
                        .errors
                        .push(format!("ERROR event after {last_rv}: {}", line.chars().take(300).collect::<String>()));
                    report.gave_up = true;
                    break 'reconnect;
                }
                let rv: u64 = string_after(line, "\"resourceVersion\":\"").and_then(|v| v.parse().ok()).unwrap_or(0);
                if kind == "BOOKMARK" {
                    last_rv = last_rv.max(rv);
                    continue;
                }
                report.events += 1;
                progress.events.fetch_add(1, Ordering::Relaxed);
                if rv <= last_rv {
                    report.out_of_order += 1;
                } else {
                    last_rv = rv;
                }
                if spec.keep_rvs {
                    report.rvs.push(rv);
                }
                match string_after(line, &stamp_key).and_then(|v| v.parse::<u64>().ok()) {
                    Some(sent) => {
                        let us = now.saturating_sub(sent) / 1000;
                        report.latencies_us.push(us.min(u32::MAX as u64) as u32);
                    }
                    None => report.unstamped += 1,
                }
                if let Some(pace) = slow {
                    tokio::select! {
                        _ = hurry.cancelled() => slow = None,
                        _ = tokio::time::sleep(pace) => {}
                    }
                }
            }
            buf.drain(..consumed);
        };
        report.closes.push(Close { after: started.elapsed(), events: report.events, last_rv, why });
        // Resumed at full speed: the slow reader has made its point.
        slow = None;
    }
    report
}
