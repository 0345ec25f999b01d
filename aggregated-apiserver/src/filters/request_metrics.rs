//! The request counter and latency histogram (`<prefix>_requests_total`,
//! `<prefix>_request_duration_seconds`), counted per thread.
//!
//! prometheus-client's `Family` takes a read lock and hashes the labels on
//! every lookup, and its `Histogram` takes a write lock on every
//! observation: with them every request would take two locks that all the
//! worker threads share, and bounce their cache lines between the cores.
//! Here each thread counts into a table of its own, behind a lock only a
//! scrape ever contends for, and a scrape adds the tables up. The
//! exposition is the one the two families write.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, NoLabelSet};
use prometheus_client::metrics::MetricType;

use crate::auth::cache::KeyHasher;

/// A series of the counter: verb, resource and HTTP code. Label values are
/// static strings and the code a number: counting allocates only for a
/// series a thread sees for the first time.
type SeriesKey = (&'static str, &'static str, u16);

#[derive(Debug, EncodeLabelSet)]
struct RequestLabels {
    verb: &'static str,
    resource: &'static str,
    code: u16,
}

#[derive(Debug, EncodeLabelSet)]
struct LatencyLabels {
    verb: &'static str,
    resource: &'static str,
}

/// One series' requests: how many, their latencies' sum, and how many fell
/// in each bucket (not cumulative; the last bucket is +Inf).
#[derive(Clone, Debug, Default)]
struct Counts {
    count: u64,
    sum: f64,
    buckets: Box<[u64]>,
}

impl Counts {
    fn new(buckets: usize) -> Self {
        Self { count: 0, sum: 0.0, buckets: vec![0; buckets].into_boxed_slice() }
    }

    /// Adds `other`'s counts (an empty `Counts`, the default, takes its buckets).
    fn add(&mut self, other: &Counts) {
        if self.buckets.len() < other.buckets.len() {
            let mut buckets = self.buckets.to_vec();
            buckets.resize(other.buckets.len(), 0);
            self.buckets = buckets.into_boxed_slice();
        }
        self.count += other.count;
        self.sum += other.sum;
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *mine += theirs;
        }
    }
}

type Table = HashMap<SeriesKey, Counts, KeyHasher>;

/// One thread's table.
#[derive(Default)]
struct Shard {
    table: Mutex<Table>,
}

fn lock(table: &Mutex<Table>) -> MutexGuard<'_, Table> {
    // Counts only: a poisoned table still holds consistent numbers.
    table.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Which [`RequestMetrics`] a shard belongs to (a process may hold several: tests).
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's shard of each [`RequestMetrics`] it has counted into.
    static SHARDS: RefCell<Vec<(u64, Arc<Shard>)>> = const { RefCell::new(Vec::new()) };
}

/// The counter and the histogram; see the module's documentation.
pub struct RequestMetrics {
    id: u64,
    /// The histogram's upper bounds, in order, without +Inf.
    bounds: Box<[f64]>,
    /// Every thread's shard (a shard outlives its thread here).
    shards: Mutex<Vec<Arc<Shard>>>,
    /// What the shards of threads that ended had counted.
    retired: Mutex<Table>,
}

impl std::fmt::Debug for RequestMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestMetrics").field("id", &self.id).finish_non_exhaustive()
    }
}

impl RequestMetrics {
    /// Latencies bucketed by `bounds` (upper bounds, increasing; +Inf is added).
    pub fn new(bounds: impl IntoIterator<Item = f64>) -> Self {
        Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            bounds: bounds.into_iter().collect(),
            shards: Mutex::default(),
            retired: Mutex::default(),
        }
    }

    /// Counts one answered request, `seconds` after it came.
    pub fn observe(&self, verb: &'static str, resource: &'static str, code: u16, seconds: f64) {
        let bucket = self.bounds.iter().position(|bound| seconds <= *bound).unwrap_or(self.bounds.len());
        // `try_with`: a thread being torn down has no table left, and its
        // request goes uncounted rather than panicking.
        let _ = SHARDS.try_with(|shards| {
            let mut shards = shards.borrow_mut();
            let shard = match shards.iter().position(|(id, _)| *id == self.id) {
                Some(at) => &shards[at].1,
                None => {
                    // Shards of metrics dropped since (only this thread holds them) go.
                    shards.retain(|(_, shard)| Arc::strong_count(shard) > 1);
                    shards.push((self.id, self.register()));
                    &shards[shards.len() - 1].1
                }
            };
            let mut table = lock(&shard.table);
            let counts = table.entry((verb, resource, code)).or_insert_with(|| Counts::new(self.bounds.len() + 1));
            counts.count += 1;
            counts.sum += seconds;
            counts.buckets[bucket] += 1;
        });
    }

    /// A new shard for the calling thread. The shards of threads that ended
    /// (held by this list alone) are folded into `retired` first, so that
    /// threads coming and going cannot grow the list.
    fn register(&self) -> Arc<Shard> {
        let shard = Arc::new(Shard::default());
        let mut shards = self.shards.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut retired = lock(&self.retired);
        shards.retain(|held| {
            if Arc::strong_count(held) > 1 {
                return true;
            }
            for (key, counts) in lock(&held.table).iter() {
                retired.entry(*key).or_default().add(counts);
            }
            false
        });
        shards.push(shard.clone());
        shard
    }

    /// Every thread's counts added up, by series in order.
    fn totals(&self) -> BTreeMap<SeriesKey, Counts> {
        let mut totals: BTreeMap<SeriesKey, Counts> = BTreeMap::new();
        let mut add = |table: &Table| {
            for (key, counts) in table {
                totals.entry(*key).or_default().add(counts);
            }
        };
        let shards: Vec<Arc<Shard>> = self.shards.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        for shard in &shards {
            add(&lock(&shard.table));
        }
        add(&lock(&self.retired));
        totals
    }
}

/// The exposition of [`RequestMetrics`], registered in the application's registry.
#[derive(Debug)]
pub struct RequestMetricsCollector(pub Arc<RequestMetrics>);

impl Collector for RequestMetricsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let totals = self.0.totals();
        {
            let mut family = encoder.encode_descriptor(
                "requests",
                "API requests by verb, resource and HTTP code",
                None,
                MetricType::Counter,
            )?;
            for (&(verb, resource, code), counts) in &totals {
                family
                    .encode_family(&RequestLabels { verb, resource, code })?
                    .encode_counter::<NoLabelSet, _, u64>(&counts.count, None)?;
            }
        }
        let mut latencies: BTreeMap<(&'static str, &'static str), Counts> = BTreeMap::new();
        for (&(verb, resource, _), counts) in &totals {
            latencies.entry((verb, resource)).or_default().add(counts);
        }
        let mut family = encoder.encode_descriptor(
            "request_duration_seconds",
            "Time to answer an API request (to the first byte for watches)",
            None,
            MetricType::Histogram,
        )?;
        // The encoder writes f64::MAX as +Inf, as for prometheus-client's own histograms.
        let bounds: Vec<f64> = self.0.bounds.iter().copied().chain(std::iter::once(f64::MAX)).collect();
        for (&(verb, resource), counts) in &latencies {
            let buckets: Vec<(f64, u64)> = bounds.iter().copied().zip(counts.buckets.iter().copied()).collect();
            family.encode_family(&LatencyLabels { verb, resource })?.encode_histogram::<NoLabelSet>(
                counts.sum,
                counts.count,
                &buckets,
                None,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::*;

    fn exposition(metrics: &Arc<RequestMetrics>) -> String {
        let mut registry = Registry::with_prefix("app");
        registry.register_collector(Box::new(RequestMetricsCollector(metrics.clone())));
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn threads_count_apart_and_a_scrape_adds_them_up() {
        let metrics = Arc::new(RequestMetrics::new([0.001, 0.01]));
        metrics.observe("get", "widgets", 200, 0.0005);
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let metrics = metrics.clone();
                std::thread::spawn(move || {
                    metrics.observe("get", "widgets", 200, 0.005);
                    metrics.observe("get", "widgets", 404, 0.02);
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let text = exposition(&metrics);
        for line in [
            "# TYPE app_requests counter\n",
            "app_requests_total{verb=\"get\",resource=\"widgets\",code=\"200\"} 4\n",
            "app_requests_total{verb=\"get\",resource=\"widgets\",code=\"404\"} 3\n",
            "# TYPE app_request_duration_seconds histogram\n",
            "app_request_duration_seconds_count{verb=\"get\",resource=\"widgets\"} 7\n",
            "app_request_duration_seconds_bucket{le=\"0.001\",verb=\"get\",resource=\"widgets\"} 1\n",
            "app_request_duration_seconds_bucket{le=\"0.01\",verb=\"get\",resource=\"widgets\"} 4\n",
            "app_request_duration_seconds_bucket{le=\"+Inf\",verb=\"get\",resource=\"widgets\"} 7\n",
        ] {
            assert!(text.contains(line), "{line:?} in\n{text}");
        }
        let sum: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("app_request_duration_seconds_sum{verb=\"get\",resource=\"widgets\"} "))
            .unwrap()
            .parse()
            .unwrap();
        assert!((sum - 0.0755).abs() < 1e-9, "{sum}");
    }

    #[test]
    fn the_shards_of_ended_threads_are_folded_and_keep_their_counts() {
        let metrics = Arc::new(RequestMetrics::new([1.0]));
        for _ in 0..5 {
            let metrics = metrics.clone();
            std::thread::spawn(move || metrics.observe("list", "widgets", 200, 0.1)).join().unwrap();
        }
        // Each new thread's registration folded the ended ones' shards.
        assert_eq!(metrics.shards.lock().unwrap().len(), 1);
        metrics.observe("list", "widgets", 200, 0.1);
        assert!(
            exposition(&metrics).contains("app_requests_total{verb=\"list\",resource=\"widgets\",code=\"200\"} 6\n")
        );
    }
}
