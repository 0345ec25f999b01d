//! A kind's store seen in another of the kind's versions: what it hands out
//! is converted from the version it was stored in to this one (the body, and
//! the index that tables, selectors and metadata views read), and what is
//! written through it is converted to the storage version first. The
//! registry of a version is the same generic registry over this store, so
//! every verb, watch, patch and apply works in any version.
//!
//! The storage version is served through it too, for what an earlier release
//! stored in another version: such an object is read converted, and any
//! write to it, one that changes nothing included, stores it again in the
//! storage version, as kube-apiserver's storage does (and as kube's storage
//! version migration relies on). An object already in the storage version
//! is handed out as it is stored, without a conversion or a copy.
//!
//! The last view of each object is kept while the object is unchanged (its
//! revision), so that reading it again, or sending one change to many
//! watchers, converts it once: the cost of the other version is one
//! conversion per change, and the memory of a second copy of what is read
//! in it, within a bound: past a total, the kept views are let go.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use crate::registry::conversion::Converter;
use crate::registry::encode::KindIndexer;
use crate::storage::framed::frame;
use crate::storage::{
    Event, EventType, Indexer, KeyParts, ListPage, ListRequest, Mutation, ObjectKey, Store, StoreError, StoredObject,
    Updated, WatchStream,
};

/// The largest object whose view is kept, in bytes as stored.
const MAX_KEPT_VIEW: usize = 16 << 20;
/// The most the kept views of one version may hold, in bytes as stored.
const MAX_KEPT_VIEWS: usize = 64 << 20;

/// The last two views of each object read in a version (a change's object
/// and the one before it, which a watch event carries too), and their size.
#[derive(Default)]
struct Views {
    by_key: HashMap<Arc<ObjectKey>, [Option<StoredObject>; 2]>,
    bytes: usize,
}

impl Views {
    fn get(&self, o: &StoredObject) -> Option<StoredObject> {
        let kept = self.by_key.get(&o.key)?;
        kept.iter().flatten().find(|v| v.rv == o.rv).cloned()
    }

    fn size(kept: &[Option<StoredObject>; 2]) -> usize {
        kept.iter().flatten().map(|v| v.bytes.len()).sum()
    }
}

#[derive(Clone)]
pub(crate) struct VersionStore {
    inner: Arc<dyn Store>,
    convert: Converter,
    /// `group/version` of this version, and of the storage version.
    api_version: String,
    storage_api_version: String,
    /// This version's index of an object.
    indexer: KindIndexer,
    /// The last view of each object read in this version.
    views: Arc<RwLock<Views>>,
}

impl VersionStore {
    pub(crate) fn new(
        inner: Arc<dyn Store>,
        convert: Converter,
        api_version: String,
        storage_api_version: String,
        indexer: KindIndexer,
    ) -> Self {
        Self { inner, convert, api_version, storage_api_version, indexer, views: Arc::default() }
    }

    fn converted(&self, obj: Value, to: &str) -> Result<Value, StoreError> {
        let from = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
        self.convert
            .convert(obj, to)
            .map_err(|why| StoreError::Internal(format!("converting the object from {from} to {to}: {why}")))
    }

    /// Whether `o` is shown as it is stored: this is the storage version,
    /// and `o` is stored in it (as objects are stored with their keys in
    /// order, `apiVersion` first).
    fn as_stored(&self, o: &StoredObject) -> bool {
        self.api_version == self.storage_api_version && stored_in(o, &self.api_version)
    }

    /// `o` as this version shows it.
    fn view(&self, o: &StoredObject) -> Result<StoredObject, StoreError> {
        if self.as_stored(o) {
            return Ok(o.clone());
        }
        let kept = self.views.read().ok().and_then(|views| views.get(o));
        if let Some(kept) = kept {
            return Ok(kept);
        }
        // A large object's conversion keeps no async worker (a read's, a
        // watch's) from the others' requests.
        let view = crate::heavy::run_in_place(o.bytes.len(), || {
            let obj = self.converted(o.value()?, &self.api_version)?;
            let mut index = self.indexer.index(&obj);
            let framed = frame(&obj, EventType::Added)?;
            index.metadata = framed.metadata;
            Ok::<_, StoreError>(StoredObject::new(o.key.clone(), o.rv, framed.object, index))
        })?;
        if o.bytes.len() <= MAX_KEPT_VIEW {
            self.keep(&view);
        }
        Ok(view)
    }

    /// Keeps `view` among its key's last two (the newest two revisions).
    /// Past the bytes a version may keep, the views before each key's last
    /// go, then, if need be, all others (those of deleted objects among
    /// them). It never asks the store: it runs where the store may hold its
    /// own lock.
    fn keep(&self, view: &StoredObject) {
        let Ok(mut views) = self.views.write() else { return };
        let views = &mut *views;
        let kept = views.by_key.entry(view.key.clone()).or_default();
        let before = Views::size(kept);
        let rv = |v: &Option<StoredObject>| v.as_ref().map(|v| v.rv);
        if kept.iter().any(|v| rv(v) == Some(view.rv)) || rv(&kept[1]) > Some(view.rv) {
            return;
        }
        // The newest first: the older of the two gives way.
        kept[1] = Some(view.clone());
        kept.sort_by_key(|v| std::cmp::Reverse(rv(v)));
        let after = Views::size(kept);
        views.bytes = views.bytes + after - before;
        if views.bytes > MAX_KEPT_VIEWS {
            // The views before the last go first, then the others' last.
            views.by_key.values_mut().for_each(|kept| kept[1] = None);
            views.by_key.retain(|_, kept| kept[0].is_some());
            views.bytes = views.by_key.values().map(Views::size).sum();
            if views.bytes > MAX_KEPT_VIEWS {
                views.by_key.retain(|key, _| *key == view.key);
                views.bytes = views.by_key.values().map(Views::size).sum();
            }
        }
    }

    /// The bytes of `objects` whose view is not kept: what seeing them in
    /// this version will convert.
    fn to_convert<'o>(&self, objects: impl Iterator<Item = &'o StoredObject>) -> usize {
        let Ok(views) = self.views.read() else { return 0 };
        objects.filter(|o| !self.as_stored(o) && views.get(o).is_none()).map(|o| o.bytes.len()).sum()
    }

    fn view_event(&self, event: &Arc<Event>) -> Result<Arc<Event>, StoreError> {
        if self.as_stored(&event.object) && event.prev.as_ref().is_none_or(|p| self.as_stored(p)) {
            // The stored change itself, with what its watchers already share.
            return Ok(event.clone());
        }
        let prev = event.prev.as_ref().map(|p| self.view(p)).transpose()?;
        Ok(Arc::new(Event::new(event.kind, self.view(&event.object)?, prev)))
    }

    fn view_updated(&self, updated: Updated) -> Result<Updated, StoreError> {
        Ok(match updated {
            Updated::Put(o) => Updated::Put(self.view(&o)?),
            Updated::Deleted(o) => Updated::Deleted(self.view(&o)?),
            Updated::Kept(o) => Updated::Kept(self.view(&o)?),
            Updated::Aborted => Updated::Aborted,
        })
    }
}

/// Whether `o` is stored in `api_version`: its JSON begins with it, as the
/// stored encoding writes an object's keys in order; an object written
/// otherwise is read to know.
fn stored_in(o: &StoredObject, api_version: &str) -> bool {
    const FIRST: &[u8] = b"{\"apiVersion\":\"";
    match o.bytes.strip_prefix(FIRST) {
        Some(rest) => rest.strip_prefix(api_version.as_bytes()).is_some_and(|rest| rest.first() == Some(&b'"')),
        None => o.value().is_ok_and(|v| v.get("apiVersion").and_then(Value::as_str) == Some(api_version)),
    }
}

#[async_trait::async_trait]
impl Store for VersionStore {
    fn current_rv(&self) -> u64 {
        self.inner.current_rv()
    }

    fn len(&self) -> usize {
        self.inner.len()
    }

    async fn sync_latest(&self) -> Result<u64, StoreError> {
        self.inner.sync_latest().await
    }

    fn always_latest(&self) -> bool {
        self.inner.always_latest()
    }

    async fn wait_for_rv(&self, rv: u64, timeout: Duration) -> Result<(), StoreError> {
        self.inner.wait_for_rv(rv, timeout).await
    }

    fn cached_size(&self, key: &ObjectKey) -> Option<usize> {
        self.inner.cached_size(key)
    }

    fn get(&self, key: &dyn KeyParts) -> Result<Option<StoredObject>, StoreError> {
        self.inner.get(key)?.map(|o| self.view(&o)).transpose()
    }

    async fn list(&self, req: ListRequest<'_>) -> Result<ListPage, StoreError> {
        // Objects are seen in this version outside the store's lock: a
        // conversion may take long, and the store is not asked again under
        // its own lock. Large conversions take turns with other heavy work.
        let Some(filter) = req.filter else {
            let mut page = self.inner.list(req).await?;
            let work = self.to_convert(page.items.iter());
            let seen = async { page.items.iter().map(|o| self.view(o)).collect::<Result<Vec<_>, _>>() };
            page.items = crate::heavy::run_async(work, seen).await?;
            return Ok(page);
        };
        // The storage version filters in the store, as a kind of one version
        // does: its objects are seen as stored, and only one an earlier
        // release stored in another version is converted there (never
        // asking the store again, so under its lock).
        if self.api_version == self.storage_api_version {
            let seen = |o: &StoredObject| self.view(o).is_ok_and(|v| filter(&v));
            let mut page = self.inner.list(ListRequest { filter: Some(&seen), ..req }).await?;
            page.items = page.items.iter().map(|o| self.view(o)).collect::<Result<_, _>>()?;
            return Ok(page);
        }
        // Another version's selector reads its own fields: the candidates
        // are seen in it (one that cannot be is left out), then paged as
        // the store pages a filtered list.
        let limit = req.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let candidates = self.inner.list(ListRequest { limit: None, filter: None, ..req }).await?;
        let work = self.to_convert(candidates.items.iter());
        crate::heavy::run_async(work, async {
            let mut items = Vec::new();
            let mut next_start_after = None;
            for o in &candidates.items {
                let Ok(seen) = self.view(o) else { continue };
                if !filter(&seen) {
                    continue;
                }
                if items.len() == limit {
                    next_start_after = items.last().map(|o: &StoredObject| ObjectKey::clone(&o.key));
                    break;
                }
                items.push(seen);
            }
            Ok(ListPage { rv: candidates.rv, items, next_start_after, remaining: None })
        })
        .await
    }

    async fn watch(&self, namespace: Option<&str>, after_rv: u64) -> Result<WatchStream, StoreError> {
        let events = self.inner.watch(namespace, after_rv).await?;
        let this = self.clone();
        Ok(events
            .filter_map(move |event| {
                // An event this version cannot show is left out (and logged):
                // its object reads fail the same way.
                let viewed = event.map(|e| match this.view_event(&e) {
                    Ok(viewed) => Some(viewed),
                    Err(e) => {
                        tracing::error!(error = %e, "a watch event could not be converted; it is not sent");
                        None
                    }
                });
                std::future::ready(viewed.transpose())
            })
            .boxed())
    }

    async fn create(&self, key: &ObjectKey, obj: Value) -> Result<StoredObject, StoreError> {
        let stored = self.converted(obj, &self.storage_api_version)?;
        self.view(&self.inner.create(key, stored).await?)
    }

    async fn guaranteed_update(
        &self,
        key: &ObjectKey,
        try_update: &mut (dyn for<'o> FnMut(&'o StoredObject) -> Mutation + Send),
    ) -> Result<Updated, StoreError> {
        let mut failed = None;
        let updated = self
            .inner
            .guaranteed_update(key, &mut |current| {
                let decided = self.view(current).map(|view| try_update(&view)).and_then(|decided| match decided {
                    Mutation::Put(obj) => self.converted(obj, &self.storage_api_version).map(Mutation::Put),
                    // What changes nothing still stores an object of an
                    // older version in the storage version.
                    Mutation::Keep if !stored_in(current, &self.storage_api_version) => {
                        self.converted(current.value()?, &self.storage_api_version).map(Mutation::Put)
                    }
                    other => Ok(other),
                });
                decided.unwrap_or_else(|e| {
                    failed = Some(e);
                    Mutation::Abort
                })
            })
            .await?;
        match failed {
            Some(e) => Err(e),
            None => self.view_updated(updated),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::apimachinery::resource::{Names, TEST_NAMES};
    use crate::registry::conversion::Convert;
    use crate::registry::kind::Kind;
    use crate::storage::memory::MemoryStore;

    /// example.com/v1 Widget's v2: `spec.size` is v1's `spec.width`; a
    /// `spec.broken` object cannot be converted. Counts its conversions.
    #[derive(Default)]
    struct Renames(std::sync::atomic::AtomicUsize);

    impl Convert for Renames {
        fn convert(&self, mut obj: Value, api_version: &str) -> Result<Value, String> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if obj.pointer("/spec/broken").is_some() {
                return Err("spec.broken has no equivalent".into());
            }
            let (from, to) = if api_version == "example.com/v2" { ("width", "size") } else { ("size", "width") };
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                if let Some(value) = spec.remove(from) {
                    spec.insert(to.into(), value);
                }
            }
            obj["apiVersion"] = json!(api_version);
            Ok(obj)
        }
    }

    static V2: Names = Names { version: "v2", ..TEST_NAMES };

    struct V2Widget;

    impl Kind for V2Widget {
        fn names(&self) -> &'static Names {
            &V2
        }
        fn schema(&self) -> Value {
            json!({"type": "object"})
        }
        fn selectable_fields(&self) -> &'static [&'static str] {
            &["spec.size"]
        }
    }

    fn stores() -> (Arc<MemoryStore>, VersionStore, Arc<Renames>) {
        let inner = Arc::new(MemoryStore::new(Arc::new(KindIndexer(Arc::new(V2Widget))), 10, 10));
        let renames = Arc::new(Renames::default());
        let v2 = VersionStore::new(
            inner.clone(),
            renames.clone(),
            "example.com/v2".into(),
            "example.com/v1".into(),
            KindIndexer(Arc::new(V2Widget)),
        );
        (inner, v2, renames)
    }

    fn widget(version: &str, spec: Value) -> Value {
        json!({"apiVersion": format!("example.com/{version}"), "kind": "Widget", "metadata": {"name": "w", "namespace": "ns"}, "spec": spec})
    }

    #[tokio::test]
    async fn writes_are_stored_in_the_storage_version_and_read_in_this_one() {
        let (inner, v2, renames) = stores();
        let key = ObjectKey::new("ns", "w");
        let created = v2.create(&key, widget("v2", json!({"size": 3}))).await.unwrap();
        assert_eq!(created.value().unwrap()["spec"], json!({"size": 3}));
        let stored = inner.get(&key).unwrap().unwrap().value().unwrap();
        assert_eq!((&stored["apiVersion"], &stored["spec"]), (&json!("example.com/v1"), &json!({"width": 3})));
        // This version's selectable field, read from the converted object.
        assert_eq!(&*v2.get(&key).unwrap().unwrap().index.fields[0], "3");
        let matching = |o: &StoredObject| &*o.index.fields[0] == "3";
        let req = ListRequest {
            namespace: None,
            at: None,
            start_after: None,
            offset: None,
            limit: None,
            filter: Some(&matching),
        };
        assert_eq!(v2.list(req).await.unwrap().items.len(), 1);
        // Converted once in, once out: the reads since used the kept view.
        assert_eq!(renames.0.load(std::sync::atomic::Ordering::Relaxed), 2);
        inner.guaranteed_update(&key, &mut |_| Mutation::Put(widget("v1", json!({"width": 4})))).await.unwrap();
        assert_eq!(v2.get(&key).unwrap().unwrap().value().unwrap()["spec"], json!({"size": 4}), "a change is seen");
    }

    #[tokio::test]
    async fn the_storage_version_hands_out_what_is_stored_and_migrates_older_objects_on_any_write() {
        let (inner, _, renames) = stores();
        let v1 = VersionStore::new(
            inner.clone(),
            renames.clone(),
            "example.com/v1".into(),
            "example.com/v1".into(),
            KindIndexer(Arc::new(V2Widget)),
        );
        let (current, older) = (ObjectKey::new("ns", "a"), ObjectKey::new("ns", "b"));
        inner.create(&current, widget("v1", json!({"width": 1}))).await.unwrap();
        let stored = inner.get(&current).unwrap().unwrap();
        let read = v1.get(&current).unwrap().unwrap();
        assert_eq!(read.bytes.as_ptr(), stored.bytes.as_ptr(), "handed out as stored, not copied");
        // An earlier release stored v2.
        inner.create(&older, widget("v2", json!({"size": 2}))).await.unwrap();
        assert_eq!(v1.get(&older).unwrap().unwrap().value().unwrap()["spec"], json!({"width": 2}));
        let before = inner.get(&older).unwrap().unwrap().rv;
        let kept = v1.guaranteed_update(&older, &mut |_| Mutation::Keep).await.unwrap();
        let Updated::Put(written) = kept else { panic!("a write that changes nothing stores v1") };
        assert!(written.rv > before);
        let now = inner.get(&older).unwrap().unwrap().value().unwrap();
        assert_eq!((&now["apiVersion"], &now["spec"]), (&json!("example.com/v1"), &json!({"width": 2})));
        // Stored in v1 now: nothing changes, nothing is written.
        let again = v1.guaranteed_update(&older, &mut |_| Mutation::Keep).await.unwrap();
        assert!(matches!(again, Updated::Kept(_)));
        assert_eq!(renames.0.load(std::sync::atomic::Ordering::Relaxed), 2, "the older object converted twice only");
    }

    #[tokio::test]
    async fn a_conversion_that_fails_writes_nothing_and_says_why() {
        let (inner, v2, _) = stores();
        let key = ObjectKey::new("ns", "w");
        let refused = v2.create(&key, widget("v2", json!({"broken": true}))).await.err().unwrap();
        assert_eq!(
            refused.to_string(),
            StoreError::Internal(
                "converting the object from example.com/v2 to example.com/v1: spec.broken has no equivalent".into()
            )
            .to_string()
        );
        assert!(inner.get(&key).unwrap().is_none());
        // Stored before (by another version, say), it cannot be read here either.
        inner.create(&key, widget("v1", json!({"broken": true}))).await.unwrap();
        assert!(v2.get(&key).is_err());
        let kept = v2.guaranteed_update(&key, &mut |_| Mutation::Keep).await;
        assert!(kept.is_err());
    }
}
