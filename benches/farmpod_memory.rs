//! Where a FarmPod's bytes go: the in-process heap cost of the Pod cache,
//! counted by a counting allocator, no cluster needed. It feeds synthetic
//! Pods (the FarmPods benchmark's, as the upstream watch delivers them)
//! through the same conversion and store the server uses and reports the live
//! heap per Pod, split by structure, and the extra peak of a full re-list.
//!
//! `cargo bench --bench farmpod_memory` (release; about 20 seconds).
//! `FARM_MEMORY_PODS` (default `10000,50000`) picks the sizes.

#[path = "support/pods.rs"]
mod pods;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::Arc;

use aggregated_apiserver::storage::{Indexer, ListRequest, MemoryStore};
use aggregated_apiserver::KindIndexer;
use farm_apiserver::farmpod::{farmpod_of, FarmPodKind, PodCache, PodFeed};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;

/// Counts the bytes asked of the system allocator that are still live, and
/// the highest that count reached. glibc adds about 8 bytes per allocation
/// and rounds to 16, so `allocations` is reported too.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);
static ALLOCATIONS: AtomicIsize = AtomicIsize::new(0);
static CALLS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed) + layout.size() as isize;
        PEAK.fetch_max(live, Ordering::Relaxed);
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        CALLS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        ALLOCATIONS.fetch_sub(1, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let delta = new_size as isize - layout.size() as isize;
        let live = LIVE.fetch_add(delta, Ordering::Relaxed) + delta;
        PEAK.fetch_max(live, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Live heap bytes and allocations at one moment.
#[derive(Clone, Copy)]
struct Heap {
    bytes: isize,
    allocations: isize,
}

fn heap() -> Heap {
    Heap { bytes: LIVE.load(Ordering::Relaxed), allocations: ALLOCATIONS.load(Ordering::Relaxed) }
}

impl Heap {
    fn since(self, before: Heap) -> Heap {
        Heap { bytes: self.bytes - before.bytes, allocations: self.allocations - before.allocations }
    }

    /// Bytes per Pod, with glibc's per-allocation overhead estimated at 12 bytes.
    fn per_pod(self, pods: usize) -> (f64, f64) {
        let n = pods as f64;
        (self.bytes as f64 / n, (self.bytes as f64 + 12.0 * self.allocations as f64) / n)
    }
}

fn store() -> Arc<MemoryStore> {
    let kind = Arc::new(FarmPodKind { cache: Arc::new(PodCache::default()), subresources: Vec::new() });
    Arc::new(MemoryStore::new(Arc::new(KindIndexer(kind)), 10_000, 4096))
}

/// Feeds a full list of `pods` as the upstream watcher delivers it.
fn relist(feed: &mut PodFeed, pods: impl Iterator<Item = Pod>) {
    feed.apply(Event::Init).expect("init");
    for pod in pods {
        feed.apply(Event::InitApply(pod)).expect("init apply");
    }
    feed.apply(Event::InitDone).expect("init done");
}

fn row(out: &mut String, what: &str, h: Heap, pods: usize) {
    let (raw, with_overhead) = h.per_pod(pods);
    out.push_str(&format!("| {what} | {raw:.0} | {with_overhead:.0} | {:.1} |\n", h.allocations as f64 / pods as f64));
}

fn measure(n: usize) -> String {
    let mut out = format!("\n## Heap per FarmPod at {n} Pods\n\n");
    out.push_str("| structure | bytes per Pod | with allocator overhead (~12 B/allocation) | allocations per Pod |\n");
    out.push_str("| --- | ---: | ---: | ---: |\n");

    // What the upstream watcher decodes: one page (500) is alive at a time.
    let before = heap();
    let page: Vec<Pod> = (0..500).map(pods::cluster_pod).collect();
    let decoded = heap().since(before);
    row(&mut out, "decoded upstream Pod (one page of 500 alive during a list)", decoded, 500);
    drop(page);

    // The FarmPod as a JSON tree, the form the conversion produces.
    let before = heap();
    let trees: Vec<_> = (0..n).filter_map(|i| farmpod_of(&pods::cluster_pod(i))).collect();
    let tree = heap().since(before);
    row(&mut out, "FarmPod as a serde_json tree (transient)", tree, n);

    // Its index (labels, selectable fields, table cells, uid).
    let indexer = KindIndexer(Arc::new(FarmPodKind { cache: Arc::new(PodCache::default()), subresources: Vec::new() }));
    let before = heap();
    let indexes: Vec<_> = trees.iter().map(|(_, v)| indexer.index(v)).collect();
    let index = heap().since(before);
    drop(indexes);
    drop(trees);

    let store = store();
    let mut feed = PodFeed::new(store.clone(), None);
    let before = heap();
    relist(&mut feed, (0..n).map(pods::cluster_pod));
    let total = heap().since(before);
    let listed = futures::executor::block_on(aggregated_apiserver::storage::Store::list(
        &*store,
        ListRequest { namespace: None, at: None, start_after: None, offset: None, limit: None, filter: None },
    ))
    .expect("list");
    assert_eq!(listed.items.len(), n, "every Pod stored");
    let json: usize = listed.items.iter().map(|o| o.bytes.len()).sum();
    drop(listed);

    // The same store without history tells what the history holds.
    let bare = Arc::new(MemoryStore::new(
        Arc::new(KindIndexer(Arc::new(FarmPodKind { cache: Arc::new(PodCache::default()), subresources: Vec::new() }))),
        1,
        4096,
    ));
    let mut bare_feed = PodFeed::new(bare.clone(), None);
    let before = heap();
    relist(&mut bare_feed, (0..n).map(pods::cluster_pod));
    let without_history = heap().since(before);
    drop(bare_feed);
    drop(bare);

    let json_heap = Heap { bytes: json as isize, allocations: n as isize };
    row(&mut out, "object JSON (sum of stored lengths)", json_heap, n);
    row(&mut out, "index: labels, fields, cells, uid, metadata view", index, n);
    let rest = Heap {
        bytes: without_history.bytes - json_heap.bytes - index.bytes,
        allocations: without_history.allocations - json_heap.allocations - index.allocations,
    };
    row(&mut out, "framing, key, map and version entries (the rest, without history)", rest, n);
    row(&mut out, "watch history (10,000 events)", total.since(without_history), n);
    row(&mut out, "**total: the store at steady state**", total, n);

    // A full re-list in which every other Pod changed: the extra peak above
    // the steady state is what the re-list holds at once.
    let steady = heap();
    PEAK.store(steady.bytes, Ordering::Relaxed);
    relist(
        &mut feed,
        (0..n).map(|i| {
            let mut pod = pods::cluster_pod(i);
            if i % 2 == 0 {
                pod.metadata.labels.get_or_insert_default().insert("relisted".into(), "yes".into());
            }
            pod
        }),
    );
    let peak = PEAK.load(Ordering::Relaxed) - steady.bytes;
    out.push_str(&format!(
        "\nA full re-list (every other Pod changed) peaked {:.1} MiB above the steady state ({:.0} bytes per Pod); \
         the cluster itself is {:.1} MiB in the store.\n",
        peak as f64 / 1048576.0,
        peak as f64 / n as f64,
        total.bytes as f64 / 1048576.0
    ));
    drop(feed);
    drop(store);
    out
}

fn main() {
    let sizes: Vec<usize> = std::env::var("FARM_MEMORY_PODS")
        .unwrap_or_else(|_| "10000,50000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("FARM_MEMORY_PODS: comma-separated Pod counts"))
        .collect();
    let mut out = String::new();
    for n in sizes {
        out.push_str(&measure(n));
    }
    println!("{out}");
}
