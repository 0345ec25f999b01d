//! The watch cache's feed, as k8s.io/apiserver's cacher does it: one etcd
//! watch per kind keeps the in-memory cache ([`MemoryStore`]) at etcd's state.
//! It lists the prefix, watches from the listed revision on, applies every
//! event at its etcd revision, answers progress requests (so a read can wait
//! until the cache has reached a revision learned from etcd), reconnects with
//! backoff from the last revision it has, and re-lists when etcd has compacted
//! that revision away (closing open watches: their clients get 410 and re-list).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use etcd_client::{Client, EventType, GetOptions, WatchOptions};
use serde_json::Value;
use tokio::sync::Notify;

use super::client::MAX_MESSAGE_BYTES;
use super::KeyCodec;
use crate::storage::memory::MemoryStore;

/// Objects read per request while listing the prefix.
const LIST_PAGE: i64 = 500;
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What readiness and readers know of the feed.
#[derive(Default)]
pub struct FeedState {
    /// Whether the cache has listed etcd once; it stays so. Apart from
    /// `health` because every read of the latest state checks it: a lock
    /// there would be one that all threads take.
    synced: AtomicBool,
    health: Mutex<Health>,
    /// A reader waits for a revision the cache has not reached: ask etcd for
    /// a progress notification (which carries the current revision).
    progress_wanted: Notify,
}

#[derive(Default)]
struct Health {
    /// Since when etcd has been unreachable, and why; `None` while it answers.
    down: Option<(DateTime<Utc>, String)>,
}

impl FeedState {
    /// Asks the feed for a progress notification from etcd (its revision
    /// moves on without a change of the kind's keys).
    pub fn request_progress(&self) {
        self.progress_wanted.notify_one();
    }

    fn up(&self) {
        if let Ok(mut h) = self.health.lock() {
            if let Some((since, _)) = h.down.take() {
                tracing::info!(down_since = %since, "etcd reachable again");
            }
        }
        self.synced.store(true, Ordering::Release);
    }

    /// Records a failure; the first one of an outage sets "since".
    pub fn down(&self, why: String) {
        if let Ok(mut h) = self.health.lock() {
            match &mut h.down {
                Some((_, reason)) => *reason = why,
                None => {
                    tracing::warn!(error = why, "etcd unreachable; reads of the latest state fail, resourceVersion=0 reads and watches go on from the cache");
                    h.down = Some((Utc::now(), why));
                }
            }
        }
    }

    /// Whether the cache has listed etcd at least once.
    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Readiness: fails until the first list, and while etcd is unreachable,
    /// saying since when.
    pub fn readiness(&self) -> Result<(), String> {
        let h = self.health.lock().map_err(|_| "etcd feed state poisoned".to_string())?;
        match (&h.down, self.synced()) {
            (Some((since, why)), _) => Err(format!(
                "etcd unreachable since {} ({}s): {why}",
                since.to_rfc3339_opts(SecondsFormat::Secs, true),
                (Utc::now() - *since).num_seconds()
            )),
            (None, false) => Err("the watch cache has not listed etcd yet".into()),
            (None, true) => Ok(()),
        }
    }
}

/// Keeps `cache` at the state of the keys under `codec`'s prefix until the
/// process ends.
pub fn spawn(client: Client, codec: KeyCodec, cache: Arc<MemoryStore>, state: Arc<FeedState>) {
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        let mut listed = false;
        loop {
            if !listed {
                match list(&client, &codec).await {
                    Ok((rev, objects)) => {
                        tracing::debug!(
                            prefix = codec.prefix(),
                            revision = rev,
                            objects = objects.len(),
                            "listed etcd"
                        );
                        if let Err(e) = cache.reset(rev, objects) {
                            tracing::error!(error = %e, "resetting the watch cache");
                        }
                        listed = true;
                    }
                    Err(e) => {
                        state.down(e);
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                        continue;
                    }
                }
            }
            match follow(&client, &codec, &cache, &state).await {
                Ended::Compacted => {
                    tracing::warn!(prefix = codec.prefix(), "etcd compacted past the cache's revision; re-listing");
                    listed = false;
                }
                Ended::Failed(why) => {
                    state.down(why);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            }
            backoff = Duration::from_millis(100);
        }
    });
}

enum Ended {
    Compacted,
    Failed(String),
}

/// Every object under the prefix at one revision, read in pages.
async fn list(
    client: &Client,
    codec: &KeyCodec,
) -> Result<(u64, Vec<(crate::storage::ObjectKey, Value, u64)>), String> {
    let mut kv = client.kv_client().max_decoding_message_size(MAX_MESSAGE_BYTES);
    let end = codec.range_end();
    let mut from = codec.prefix().as_bytes().to_vec();
    let mut revision = 0i64;
    let mut objects = Vec::new();
    loop {
        let mut options = GetOptions::new().with_range(end.clone()).with_limit(LIST_PAGE);
        if revision > 0 {
            options = options.with_revision(revision);
        }
        let resp = kv.get(from.clone(), Some(options)).await.map_err(|e| format!("listing etcd: {e}"))?;
        if revision == 0 {
            revision = resp.header().map(|h| h.revision()).ok_or("etcd answered without a header")?;
        }
        for item in resp.kvs() {
            if let Some((key, obj)) = codec.decode(item.key(), item.value()) {
                objects.push((key, obj, item.mod_revision() as u64));
            }
        }
        match resp.kvs().last() {
            Some(last) if resp.more() => {
                from = last.key().to_vec();
                from.push(0);
            }
            _ => break,
        }
    }
    Ok((revision as u64, objects))
}

/// Watches from the cache's revision on, applying events, until the watch
/// fails or etcd says the revision was compacted.
async fn follow(client: &Client, codec: &KeyCodec, cache: &MemoryStore, state: &FeedState) -> Ended {
    let start = cache.revision() + 1;
    let options =
        WatchOptions::new().with_range(codec.range_end()).with_start_revision(start as i64).with_progress_notify();
    let mut watch_client = client.watch_client().max_decoding_message_size(MAX_MESSAGE_BYTES);
    let mut stream = match watch_client.watch(codec.prefix().as_bytes().to_vec(), Some(options)).await {
        Ok(s) => s,
        Err(e) => return Ended::Failed(format!("watching etcd: {e}")),
    };
    loop {
        tokio::select! {
            _ = state.progress_wanted.notified() => {
                if let Err(e) = stream.request_progress().await {
                    return Ended::Failed(format!("asking etcd for progress: {e}"));
                }
            }
            message = stream.message() => {
                let resp = match message {
                    Ok(Some(resp)) => resp,
                    Ok(None) => return Ended::Failed("etcd closed the watch".into()),
                    Err(e) => return Ended::Failed(format!("etcd watch: {e}")),
                };
                if resp.canceled() {
                    if resp.compact_revision() > 0 {
                        return Ended::Compacted;
                    }
                    return Ended::Failed(format!("etcd cancelled the watch: {}", resp.cancel_reason()));
                }
                if resp.created() {
                    state.up();
                    continue;
                }
                if resp.events().is_empty() {
                    // A progress notification: every event up to this revision
                    // has been delivered.
                    if let Some(h) = resp.header() {
                        cache.advance(h.revision() as u64);
                    }
                    continue;
                }
                for event in resp.events() {
                    let Some(item) = event.kv() else { continue };
                    let Some(key) = codec.decode_key(item.key()) else { continue };
                    let rev = item.mod_revision() as u64;
                    let obj = match event.event_type() {
                        EventType::Put => match codec.decode(item.key(), item.value()) {
                            Some((_, obj)) => Some(obj),
                            None => continue,
                        },
                        EventType::Delete => {
                            codec.forget(&key);
                            None
                        }
                    };
                    if let Err(e) = cache.apply(&key, obj, rev) {
                        tracing::error!(error = %e, key = ?key, "applying an etcd event to the cache");
                    }
                }
            }
        }
    }
}
