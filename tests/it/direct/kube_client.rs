//! kube-rs against farm-apiserver directly: typed `Api<Llama>` calls and the
//! `kube::runtime::watcher`, which must see every change, also across a 410
//! that forces it to re-list.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::{Backend, Server};
use farm_apiserver::llama::v1beta1::{Llama, LlamaSpec, LlamaStatus};
use futures::StreamExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

async fn client(s: &Server) -> Client {
    let kc = kube::config::Kubeconfig::read_from(s.kubeconfig()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
    Client::try_from(cfg).unwrap()
}

fn new_llama(name: &str, weight: f64) -> Llama {
    Llama::new(name, LlamaSpec { weight_kg: weight, height_m: 1.2, max_weight_kg: None, ear_tag: None, pasture: None })
}

async fn typed_api_round_trip(backend: Backend) {
    let s = Server::start_on(backend, &[]).await;
    let api: Api<Llama> = Api::namespaced(client(&s).await, "default");
    let created = api.create(&PostParams::default(), &new_llama("kuzco", 31.4)).await.unwrap();
    assert_eq!(created.spec.weight_kg, 31.4);
    assert!(created.uid().is_some());
    let mut got = api.get("kuzco").await.unwrap();
    got.spec.height_m = 1.8;
    let replaced = api.replace("kuzco", &PostParams::default(), &got).await.unwrap();
    assert_eq!(replaced.metadata.generation, Some(2));
    let patched = api
        .patch("kuzco", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"fluffy": "yes"}}})))
        .await
        .unwrap();
    assert_eq!(patched.labels().get("fluffy").map(String::as_str), Some("yes"));
    let status = LlamaStatus { observed_generation: Some(2), conditions: vec![] };
    let with_status =
        api.patch_status("kuzco", &PatchParams::default(), &Patch::Merge(json!({"status": status}))).await.unwrap();
    assert_eq!(with_status.status.unwrap().observed_generation, Some(2));
    let list = api.list(&ListParams::default().labels("fluffy=yes")).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let err = api.create(&PostParams::default(), &new_llama("kuzco", 1.0)).await.unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.reason, "AlreadyExists");
        }
        other => panic!("expected an API error, got {other:?}"),
    }
    api.delete("kuzco", &DeleteParams::default()).await.unwrap();
    assert!(api.get_opt("kuzco").await.unwrap().is_none());
}

/// A kube-rs client of each version sees the same llamas: what a v1beta1
/// client writes, a v1alpha client reads in its own words (the pasture in
/// an annotation), changes and writes back, losing nothing; a v1alpha
/// watcher receives the v1beta1 client's changes, converted.
async fn clients_of_both_versions_share_the_llamas(backend: Backend) {
    use farm_apiserver::llama::{v1alpha, PASTURE_ANNOTATION};
    let s = Server::start_on(backend, &[]).await;
    let client = client(&s).await;
    let new: Api<Llama> = Api::namespaced(client.clone(), "default");
    let old: Api<v1alpha::Llama> = Api::namespaced(client, "default");
    let mut llama = new_llama("pacha", 40.0);
    llama.spec.pasture = Some("north".into());
    let created = new.create(&PostParams::default(), &llama).await.unwrap();

    let watched = watcher::watcher(old.clone(), watcher::Config::default()).boxed();
    let mut seen = old.get("pacha").await.unwrap();
    assert_eq!((seen.spec.weight, seen.spec.height), (40.0, 1.2));
    assert_eq!(seen.annotations().get(PASTURE_ANNOTATION).map(String::as_str), Some("north"));
    assert_eq!((seen.uid(), seen.resource_version()), (created.uid(), created.resource_version()));
    seen.spec.weight = 41.0;
    old.replace("pacha", &PostParams::default(), &seen).await.unwrap();
    let now = new.get("pacha").await.unwrap();
    assert_eq!((now.spec.weight_kg, now.spec.pasture.as_deref()), (41.0, Some("north")));
    assert!(now.annotations().get(PASTURE_ANNOTATION).is_none(), "{now:?}");

    new.patch("pacha", &PatchParams::default(), &Patch::Merge(json!({"spec": {"weightKg": 42.0, "pasture": "south"}})))
        .await
        .unwrap();
    let mut watched = watched;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let event = tokio::time::timeout_at(deadline, watched.next()).await.expect("the change reaches v1alpha");
        if let Some(Ok(Event::Apply(l) | Event::InitApply(l))) = event {
            if l.spec.weight == 42.0 {
                assert_eq!(l.annotations().get(PASTURE_ANNOTATION).map(String::as_str), Some("south"));
                break;
            }
        }
    }
}

/// Applies watcher events to a name -> weight map, counting re-lists.
fn apply(ev: Event<Llama>, state: &mut BTreeMap<String, f64>, pending: &mut BTreeMap<String, f64>, inits: &mut u32) {
    match ev {
        Event::Init => {
            *inits += 1;
            pending.clear();
        }
        Event::InitApply(l) => {
            pending.insert(l.name_any(), l.spec.weight_kg);
        }
        Event::InitDone => *state = std::mem::take(pending),
        Event::Apply(l) => {
            state.insert(l.name_any(), l.spec.weight_kg);
        }
        Event::Delete(l) => {
            state.remove(&l.name_any());
        }
    }
}

async fn server_state(api: &Api<Llama>) -> BTreeMap<String, f64> {
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|l| (l.name_any(), l.spec.weight_kg))
        .collect()
}

async fn watcher_sees_everything(backend: Backend, streaming: bool) {
    // Tiny history and watcher buffer so that a watcher that stops reading is
    // closed and its resume point is compacted: the next watch gets a 410.
    let s = Server::start_on(backend, &["--watch-history", "20", "--watch-buffer", "16"]).await;
    let api: Api<Llama> = Api::namespaced(client(&s).await, "default");
    for i in 0..3 {
        api.create(&PostParams::default(), &new_llama(&format!("pre{i}"), i as f64 + 1.0)).await.unwrap();
    }
    let cfg = if streaming { watcher::Config::default().streaming_lists() } else { watcher::Config::default() };
    let mut stream = watcher::watcher(api.clone(), cfg).boxed();
    let (mut state, mut pending, mut inits) = (BTreeMap::new(), BTreeMap::new(), 0u32);
    // Read until the initial list is applied.
    while inits == 0 || state.len() < 3 {
        let ev = tokio::time::timeout(Duration::from_secs(10), stream.next()).await.unwrap().unwrap().unwrap();
        apply(ev, &mut state, &mut pending, &mut inits);
    }
    assert_eq!(inits, 1);
    // Live changes arrive.
    api.create(&PostParams::default(), &new_llama("live", 7.0)).await.unwrap();
    api.delete("pre0", &DeleteParams::default()).await.unwrap();
    while state.contains_key("pre0") || !state.contains_key("live") {
        let ev = tokio::time::timeout(Duration::from_secs(10), stream.next()).await.unwrap().unwrap().unwrap();
        apply(ev, &mut state, &mut pending, &mut inits);
    }
    // Stop reading while large writes pile up, then more writes move the
    // history past anything the watcher saw.
    let big = "x".repeat(250 * 1024);
    for i in 0..80 {
        let mut l = new_llama(&format!("big{i}"), 100.0 + i as f64);
        l.metadata.annotations = Some([("ballast".to_string(), big.clone())].into());
        api.create(&PostParams::default(), &l).await.unwrap();
    }
    for i in 0..80 {
        api.delete(&format!("big{i}"), &DeleteParams::default()).await.unwrap();
    }
    for i in 0..30 {
        api.patch("live", &PatchParams::default(), &Patch::Merge(json!({"spec": {"weightKg": 8.0 + i as f64}})))
            .await
            .unwrap();
    }
    let want = server_state(&api).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while state != want || inits < 2 {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let ev = match tokio::time::timeout(left, stream.next()).await {
            Ok(Some(Ok(ev))) => ev,
            Ok(Some(Err(e))) => {
                // The watcher reports the 410 it recovers from; keep reading.
                eprintln!("watcher error (recovering): {e}");
                continue;
            }
            Ok(None) => panic!("watcher ended"),
            Err(_) => panic!("watcher did not converge: inits={inits}\nstate={state:?}\nwant={want:?}\n{}", s.log()),
        };
        apply(ev, &mut state, &mut pending, &mut inits);
    }
    assert!(inits >= 2, "the watcher re-listed after a 410");
    assert_eq!(state.get("live"), Some(&37.0));
}

async fn watcher_recovers_from_410_with_list_then_watch(backend: Backend) {
    watcher_sees_everything(backend, false).await;
}

async fn watcher_recovers_from_410_with_streaming_lists(backend: Backend) {
    watcher_sees_everything(backend, true).await;
}

on_both_stores!(
    typed_api_round_trip,
    clients_of_both_versions_share_the_llamas,
    watcher_recovers_from_410_with_list_then_watch,
    watcher_recovers_from_410_with_streaming_lists,
);
