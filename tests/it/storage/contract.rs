//! The storage contract, one suite run against both backends: the memory
//! store, and etcd behind its watch cache (a real etcd, see common/etcd.rs).
//! Each test gets two handles on one store ("replicas"): the same memory store
//! twice, or two etcd stores with their own caches over one key prefix.

use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::common::Backend;
use aggregated_apiserver::storage::{
    EtcdStore, EventType, Indexer, KeyCodec, ListRequest, MemoryStore, Mutation, ObjectIndex, ObjectKey, Store,
    StoreError, StoredObject, Updated,
};
use futures::StreamExt;
use serde_json::{json, Value};

struct NameIndex;
impl Indexer for NameIndex {
    fn index(&self, obj: &Value) -> ObjectIndex {
        ObjectIndex { uid: obj["metadata"]["uid"].as_str().unwrap_or("").into(), ..Default::default() }
    }
}

fn cache(history: usize) -> Arc<MemoryStore> {
    Arc::new(MemoryStore::new(Arc::new(NameIndex), history, 1024))
}

/// Two handles on one store, with `history` events kept for resumption.
async fn replicas(backend: Backend, history: usize) -> (Arc<dyn Store>, Arc<dyn Store>) {
    match backend {
        Backend::Memory => {
            let s: Arc<dyn Store> = cache(history);
            (s.clone(), s)
        }
        Backend::Etcd => {
            let etcd = common::etcd::shared();
            let codec = KeyCodec::new(&common::etcd::unique_prefix(), "things", true);
            let open = || async {
                let store =
                    EtcdStore::start(etcd.client().await, codec.clone(), cache(history), Duration::from_secs(5));
                let deadline = std::time::Instant::now() + Duration::from_secs(10);
                while let Err(why) = store.readiness() {
                    assert!(std::time::Instant::now() < deadline, "the etcd store did not sync: {why}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Arc::new(store) as Arc<dyn Store>
            };
            (open().await, open().await)
        }
    }
}

fn obj(name: &str, n: i64) -> Value {
    json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")}, "spec": {"n": n}})
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new("ns", name)
}

fn all() -> ListRequest<'static> {
    ListRequest { namespace: None, at: None, start_after: None, offset: None, limit: None, filter: None }
}

fn n_of(o: &StoredObject) -> i64 {
    o.value().unwrap()["spec"]["n"].as_i64().unwrap()
}

/// Sets spec.n through guaranteed_update.
async fn put_n(s: &dyn Store, name: &str, n: i64) -> StoredObject {
    let mut set = |cur: &StoredObject| {
        let mut v = cur.value().unwrap();
        v["spec"]["n"] = json!(n);
        Mutation::Put(v)
    };
    match s.guaranteed_update(&key(name), &mut set).await.unwrap() {
        Updated::Put(o) => o,
        other => panic!("{other:?}"),
    }
}

async fn revisions_are_stamped_and_creates_refuse_duplicates(backend: Backend) {
    let (a, b) = replicas(backend, 100).await;
    let x = a.create(&key("x"), obj("x", 1)).await.unwrap();
    let y = b.create(&key("y"), obj("y", 1)).await.unwrap();
    assert!(y.rv > x.rv);
    let v = x.value().unwrap();
    assert_eq!(v["metadata"]["resourceVersion"], x.rv.to_string());
    assert_eq!(b.create(&key("x"), obj("x", 2)).await.unwrap_err(), StoreError::AlreadyExists);
    // The other replica reads the write, at the same revision, once synced.
    b.sync_latest().await.unwrap();
    let seen = b.get(&key("x")).unwrap().expect("x through the other replica");
    assert_eq!(seen.rv, x.rv);
    assert_eq!(seen.bytes, x.bytes);
    assert_eq!(b.len(), 2);
}

async fn guaranteed_update_decides_on_the_current_state(backend: Backend) {
    let (a, b) = replicas(backend, 100).await;
    let created = a.create(&key("x"), obj("x", 1)).await.unwrap();
    // The other replica may not have seen the create yet: it still finds it.
    let put = put_n(b.as_ref(), "x", 2).await;
    assert!(put.rv > created.rv);
    assert_eq!(n_of(&put), 2);
    let mut keep = |_: &StoredObject| Mutation::Keep;
    match a.guaranteed_update(&key("x"), &mut keep).await.unwrap() {
        Updated::Kept(o) => assert_eq!(o.rv, put.rv, "Keep answers the current state"),
        other => panic!("{other:?}"),
    }
    let mut abort = |_: &StoredObject| Mutation::Abort;
    assert!(matches!(a.guaranteed_update(&key("x"), &mut abort).await.unwrap(), Updated::Aborted));
    let mut delete = |_: &StoredObject| Mutation::Delete;
    match b.guaranteed_update(&key("x"), &mut delete).await.unwrap() {
        Updated::Deleted(last) => {
            assert!(last.rv > put.rv, "a deletion has a revision of its own");
            assert_eq!(n_of(&last), 2);
        }
        other => panic!("{other:?}"),
    }
    // A replica whose cache still holds the object may offer it, but nothing
    // is written to a key that is gone.
    let mut put = |cur: &StoredObject| Mutation::Put(cur.value().unwrap());
    assert_eq!(a.guaranteed_update(&key("x"), &mut put).await.unwrap_err(), StoreError::NotFound);
    a.sync_latest().await.unwrap();
    assert!(a.get(&key("x")).unwrap().is_none());
}

async fn concurrent_read_modify_writes_lose_nothing(backend: Backend) {
    let (a, b) = replicas(backend, 1000).await;
    a.create(&key("counter"), obj("counter", 0)).await.unwrap();
    let mut writers = Vec::new();
    for store in [a.clone(), b.clone(), a.clone(), b.clone()] {
        writers.push(tokio::spawn(async move {
            for _ in 0..25 {
                let mut inc = |cur: &StoredObject| {
                    let mut v = cur.value().unwrap();
                    v["spec"]["n"] = json!(v["spec"]["n"].as_i64().unwrap() + 1);
                    Mutation::Put(v)
                };
                store.guaranteed_update(&key("counter"), &mut inc).await.unwrap();
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    b.sync_latest().await.unwrap();
    assert_eq!(n_of(&b.get(&key("counter")).unwrap().unwrap()), 100);
}

async fn lists_read_one_revision_and_page(backend: Backend) {
    let (a, b) = replicas(backend, 100).await;
    for name in ["a", "b", "c", "d"] {
        a.create(&key(name), obj(name, 1)).await.unwrap();
    }
    a.create(&ObjectKey::new("other", "z"), json!({"metadata": {"name": "z", "namespace": "other"}})).await.unwrap();
    b.sync_latest().await.unwrap();
    let p1 = b.list(ListRequest { namespace: Some("ns"), limit: Some(2), ..all() }).await.unwrap();
    let names =
        |p: &aggregated_apiserver::storage::ListPage| p.items.iter().map(|o| o.key.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&p1), ["a", "b"]);
    assert_eq!(p1.remaining, Some(2));
    // Writes after the first page do not show in the next one.
    put_n(a.as_ref(), "c", 9).await;
    a.create(&key("bb"), obj("bb", 1)).await.unwrap();
    b.sync_latest().await.unwrap();
    let after = p1.next_start_after.clone().unwrap();
    let p2 = b
        .list(ListRequest { namespace: Some("ns"), at: Some(p1.rv), start_after: Some(&after), ..all() })
        .await
        .unwrap();
    assert_eq!(names(&p2), ["c", "d"]);
    assert_eq!(n_of(&p2.items[0]), 1, "the page shows c as it was at the list's revision");
    assert!(p2.next_start_after.is_none());
    // The remaining count at the list's revision, from the offset the caller
    // knows (the items of earlier pages) or by counting.
    for offset in [Some(1), None] {
        let p = b
            .list(ListRequest {
                namespace: Some("ns"),
                at: Some(p1.rv),
                start_after: Some(&ObjectKey::new("ns", "a")),
                offset,
                limit: Some(1),
                ..all()
            })
            .await
            .unwrap();
        assert_eq!((names(&p), p.remaining), (vec!["b".to_string()], Some(2)), "offset {offset:?}");
    }
    let now = b.list(ListRequest { namespace: Some("ns"), limit: Some(2), ..all() }).await.unwrap();
    assert_eq!(now.remaining, Some(3), "a, b | bb, c, d");
    let everything_paged = b.list(ListRequest { limit: Some(1), ..all() }).await.unwrap();
    assert_eq!(everything_paged.remaining, Some(5));
    let everything = b.list(all()).await.unwrap();
    assert_eq!(everything.items.len(), 6);
    // A revision not reached yet.
    let future = everything.rv + 1_000_000;
    assert!(matches!(b.list(ListRequest { at: Some(future), ..all() }).await, Err(StoreError::TooLarge { .. })));
    assert!(matches!(b.wait_for_rv(future, Duration::from_millis(300)).await, Err(StoreError::TooLarge { .. })));
}

async fn watches_resume_from_any_kept_revision(backend: Backend) {
    let (a, b) = replicas(backend, 100).await;
    let x = a.create(&key("x"), obj("x", 1)).await.unwrap();
    a.create(&ObjectKey::new("other", "z"), json!({"metadata": {"name": "z", "namespace": "other"}})).await.unwrap();
    let x2 = put_n(a.as_ref(), "x", 2).await;
    b.wait_for_rv(x2.rv, Duration::from_secs(5)).await.unwrap();
    let mut w = b.watch(Some("ns"), x.rv).await.unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(5), w.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(ev.kind, EventType::Modified);
    assert_eq!(ev.rv(), x2.rv);
    assert_eq!(ev.prev.as_ref().unwrap().rv, x.rv);
    // Live events from the other replica, in order, with their revisions.
    let mut delete = |_: &StoredObject| Mutation::Delete;
    let gone = match a.guaranteed_update(&key("x"), &mut delete).await.unwrap() {
        Updated::Deleted(o) => o,
        other => panic!("{other:?}"),
    };
    let ev = tokio::time::timeout(Duration::from_secs(5), w.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(ev.kind, EventType::Deleted);
    assert_eq!(ev.rv(), gone.rv);
    assert_eq!(ev.object.bytes, gone.bytes);
}

async fn history_beyond_the_window_is_expired(backend: Backend) {
    let (a, b) = replicas(backend, 3).await;
    let first = a.create(&key("first"), obj("first", 1)).await.unwrap();
    for i in 0..6 {
        a.create(&key(&format!("x{i}")), obj("x", i)).await.unwrap();
    }
    b.sync_latest().await.unwrap();
    assert!(matches!(b.watch(None, first.rv).await, Err(StoreError::Expired { .. })));
    assert!(matches!(b.list(ListRequest { at: Some(first.rv), ..all() }).await, Err(StoreError::Expired { .. })));
    let latest = b.sync_latest().await.unwrap();
    assert!(b.watch(None, latest).await.is_ok());
}

on_both_stores!(
    revisions_are_stamped_and_creates_refuse_duplicates,
    guaranteed_update_decides_on_the_current_state,
    concurrent_read_modify_writes_lose_nothing,
    lists_read_one_revision_and_page,
    watches_resume_from_any_kept_revision,
    history_beyond_the_window_is_expired,
);
