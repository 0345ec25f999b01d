//! The one TTL cache behind both review caches: TokenReview answers (by token hash) and
//! SubjectAccessReview decisions (by user and attributes).
//!
//! Each entry carries its own expiry, so allowals, denials and token answers can live for
//! different times, and the cache holds at most `capacity` entries: a client sending endless
//! distinct tokens or attributes can only push older answers out, never grow memory. When full, an
//! insert first drops what has expired, then the oldest insertions. Time is passed in by the
//! caller (`now`), so tests drive it by hand and no background task is needed.
//!
//! A lookup only reads: an expired entry is not returned, and is dropped by
//! the next insert (or pushed out by newer ones), so a cache behind a
//! `RwLock` is read by any number of requests at once, none waiting for
//! another. Not synchronized itself: each user keeps it behind its own lock.
//! Written here rather than taken from a crate (moka was the candidate) because these two caches
//! need exactly this and a caller-driven clock keeps their TTL tests exact and instant.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// How the caches here, and the request path's other maps keyed by what
/// clients choose (user names, request paths), hash: ahash under keys drawn
/// at random when the process starts, the design of the Go runtime's map
/// hash that kube's own caches use. It runs AES rounds only where the build
/// enables the `aes` target feature; the default x86_64 build does not, and
/// gets its folded-multiply fallback (`fallback_hash`), keyed all the same.
/// Chosen by clients, the keys need a keyed hash; SipHash, the standard
/// library's, is a large part of what authorization costs a GET (measured:
/// docs/performance.md, "Authentication and authorization lookups").
pub type KeyHasher = ahash::RandomState;

/// Longest TTL honoured; longer ones are shortened to it (an `Instant` cannot hold any duration).
const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

struct Entry<V> {
    value: V,
    expires: Instant,
    seq: u64,
}

/// A bounded map whose entries expire; see the module documentation.
pub struct TtlCache<K, V> {
    capacity: usize,
    next_seq: u64,
    entries: HashMap<Arc<K>, Entry<V>, KeyHasher>,
    /// Insertion order: seq -> key.
    by_age: BTreeMap<u64, Arc<K>>,
    /// Expiry order: (expires, seq).
    by_expiry: BTreeSet<(Instant, u64)>,
}

impl<K: Hash + Eq, V: Clone> TtlCache<K, V> {
    /// A cache of at most `capacity` entries; 0 caches nothing.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            next_seq: 0,
            entries: HashMap::with_hasher(KeyHasher::new()),
            by_age: BTreeMap::new(),
            by_expiry: BTreeSet::new(),
        }
    }

    /// The value under `key` if it has not expired at `now`.
    #[cfg(test)]
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        self.get_borrowed(key, now)
    }

    /// [`get`](Self::get), with the moment the value expires.
    pub fn get_until(&self, key: &K, now: Instant) -> Option<(V, Instant)> {
        self.entry(key, now)
    }

    /// [`get`](Self::get) by a borrowed form of the key, which must hash and
    /// compare as the key does (`Borrow`'s contract): a lookup that would
    /// otherwise build an owned key (copies of strings) on every hit.
    pub fn get_borrowed<Q>(&self, key: &Q, now: Instant) -> Option<V>
    where
        Arc<K>: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.entry(key, now).map(|(value, _)| value)
    }

    fn entry<Q>(&self, key: &Q, now: Instant) -> Option<(V, Instant)>
    where
        Arc<K>: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let entry = self.entries.get(key)?;
        (entry.expires > now).then(|| (entry.value.clone(), entry.expires))
    }

    /// Stores `value` under `key` until `now + ttl`, replacing what was there. A zero TTL or a
    /// zero capacity stores nothing.
    pub fn insert(&mut self, key: K, value: V, ttl: Duration, now: Instant) {
        if ttl.is_zero() || self.capacity == 0 {
            return;
        }
        self.remove(&key);
        while let Some(&(when, seq)) = self.by_expiry.first() {
            if when > now {
                break;
            }
            self.remove_seq(seq);
        }
        while self.entries.len() >= self.capacity {
            let Some((&seq, _)) = self.by_age.first_key_value() else { break };
            self.remove_seq(seq);
        }
        let expires = now + ttl.min(MAX_TTL);
        let seq = self.next_seq;
        self.next_seq += 1;
        let key = Arc::new(key);
        self.by_age.insert(seq, key.clone());
        self.by_expiry.insert((expires, seq));
        self.entries.insert(key, Entry { value, expires, seq });
    }

    /// How many entries are held (expired ones included until they are dropped).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is held.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn remove<Q>(&mut self, key: &Q)
    where
        Arc<K>: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Some(entry) = self.entries.remove(key) {
            self.by_age.remove(&entry.seq);
            self.by_expiry.remove(&(entry.expires, entry.seq));
        }
    }

    fn remove_seq(&mut self, seq: u64) {
        if let Some(key) = self.by_age.get(&seq).cloned() {
            self.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn entries_expire_at_their_own_ttl() {
        let mut cache = TtlCache::new(10);
        let t0 = Instant::now();
        cache.insert("allow", 1, 10 * S, t0);
        cache.insert("deny", 2, 3 * S, t0);
        assert_eq!(cache.get(&"allow", t0), Some(1));
        assert_eq!(cache.get(&"deny", t0 + 3 * S - Duration::from_millis(1)), Some(2));
        assert_eq!(cache.get(&"deny", t0 + 3 * S), None, "expired exactly at its TTL");
        assert_eq!(cache.len(), 2, "a lookup only reads");
        assert_eq!(cache.get(&"allow", t0 + 9 * S), Some(1));
        cache.insert("other", 3, 10 * S, t0 + 9 * S);
        assert_eq!(cache.len(), 2, "the next insert dropped the expired entry");
        assert_eq!(cache.get(&"allow", t0 + 10 * S), None);
        assert_eq!(cache.get(&"other", t0 + 10 * S), Some(3));
    }

    #[test]
    fn full_cache_drops_expired_then_oldest() {
        let mut cache = TtlCache::new(3);
        let t0 = Instant::now();
        cache.insert(1, "a", 60 * S, t0);
        cache.insert(2, "short", 5 * S, t0);
        cache.insert(3, "c", 60 * S, t0);
        // Nothing expired: the oldest (1) goes.
        cache.insert(4, "d", 60 * S, t0);
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&1, t0), None);
        // 2 has expired: it goes before the older 3.
        cache.insert(5, "e", 60 * S, t0 + 5 * S);
        assert_eq!(cache.len(), 3);
        for key in [3, 4, 5] {
            assert!(cache.get(&key, t0 + 5 * S).is_some(), "{key}");
        }
    }

    #[test]
    fn reinsertion_replaces_and_refreshes_age() {
        let mut cache = TtlCache::new(3);
        let t0 = Instant::now();
        cache.insert(1, "one", 60 * S, t0);
        cache.insert(2, "two", 60 * S, t0);
        cache.insert(3, "three", 60 * S, t0);
        cache.insert(1, "uno", 60 * S, t0);
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&1, t0), Some("uno"));
        cache.insert(4, "four", 60 * S, t0);
        assert_eq!(cache.get(&2, t0), None, "2 is now the oldest");
        assert_eq!(cache.get(&1, t0), Some("uno"));
        // Many re-insertions of one key leave no stale bookkeeping behind.
        for _ in 0..1000 {
            cache.insert(9, "nine", 60 * S, t0);
        }
        assert_eq!((cache.len(), cache.by_age.len(), cache.by_expiry.len()), (3, 3, 3));
    }

    #[test]
    fn bounded_under_many_distinct_keys() {
        let mut cache = TtlCache::new(100);
        let t0 = Instant::now();
        for i in 0..10_000u32 {
            cache.insert(i, i, 10 * S, t0);
        }
        assert_eq!((cache.len(), cache.by_age.len(), cache.by_expiry.len()), (100, 100, 100));
        assert_eq!(cache.get(&9_999, t0), Some(9_999));
        assert_eq!(cache.get(&9_899, t0), None);
    }

    #[test]
    fn zero_ttl_zero_capacity_and_huge_ttl() {
        let t0 = Instant::now();
        let mut cache = TtlCache::new(10);
        cache.insert(1, (), Duration::ZERO, t0);
        assert!(cache.is_empty());
        let mut none = TtlCache::new(0);
        none.insert(1, (), S, t0);
        assert!(none.is_empty());
        cache.insert(2, (), Duration::MAX, t0);
        assert_eq!(cache.get(&2, t0 + 300 * 24 * 3600 * S), Some(()));
    }
}
