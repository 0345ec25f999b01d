//! API Priority and Fairness, as k8s.io/apiserver gives it to aggregated
//! servers: every request but a watch is classified by the cluster's
//! FlowSchemas into a PriorityLevelConfiguration, and runs when its level has
//! a free seat, waits in its flow's queue, or is answered 429. The server's
//! seats (`--max-requests-inflight` plus `--max-mutating-requests-inflight`,
//! kube's server concurrency limit) are shared among the limited levels by
//! their nominal concurrency shares; exempt levels are never limited. The
//! answer names the schema and level by UID (`X-Kubernetes-PF-FlowSchema-UID`,
//! `X-Kubernetes-PF-PriorityLevel-UID`), as kube's does.
//!
//! A list takes kube's estimate of its work in seats ([`width`]). What kube
//! has and this does not: seats borrowed between levels (`lendablePercent`,
//! `borrowingLimitPercent`), extra seats for a write by the watchers it
//! wakes, and the status conditions kube-apiserver writes on the objects
//! (they are its to write).
//! Until the configuration is read, and in a cluster that does not serve
//! `flowcontrol.apiserver.k8s.io/v1`, the in-flight limits apply instead.

mod classify;
mod level;
pub mod metrics;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use http::HeaderValue;
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use kube::runtime::reflector::Store;
use kube::Client;

use level::{Ticket, Waiting};
use metrics::{FlowControlMetrics, FlowMetrics, Rejection};

use crate::apimachinery::request_info::RequestInfo;
use crate::auth::authn::UserInfo;
use crate::config_watch::{follow_both, Synced};
use classify::Classifier;

/// kube's response headers naming what classified a request.
pub const FLOW_SCHEMA_UID: &str = "x-kubernetes-pf-flowschema-uid";
pub const PRIORITY_LEVEL_UID: &str = "x-kubernetes-pf-prioritylevel-uid";

/// The cluster's flow control configuration, followed, and the levels' seats.
pub struct FlowControl {
    seats: usize,
    /// The longest a request waits in a queue (kube: a quarter of the request timeout).
    longest_wait: Duration,
    classifier: ArcSwap<Classifier>,
    synced: Synced,
    metrics: Arc<FlowControlMetrics>,
}

/// What classified a request: the UIDs its answer carries.
#[derive(Clone)]
pub struct Classification {
    pub flow_schema_uid: HeaderValue,
    pub priority_level_uid: HeaderValue,
}

/// What became of a request.
pub enum Decision {
    /// It runs now, holding its seat until answered.
    Run(Seat, Classification),
    /// It waits for a seat.
    Wait(Queued, Classification),
    Reject(Classification),
}

/// A running request's place at its level (none at an exempt level): freed,
/// and counted as finished, when it drops.
pub struct Seat {
    _ticket: Option<Ticket>,
    flow: Arc<FlowMetrics>,
}

impl Seat {
    fn new(ticket: Option<Ticket>, flow: Arc<FlowMetrics>) -> Self {
        flow.started();
        Self { _ticket: ticket, flow }
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.flow.finished();
    }
}

/// A request waiting in its queue.
pub struct Queued {
    waiting: Waiting,
    longest: Duration,
    since: std::time::Instant,
    flow: Arc<FlowMetrics>,
    metrics: Arc<FlowControlMetrics>,
}

impl Queued {
    /// Its seat once one is free, or None when it has waited as long as a
    /// request may.
    pub async fn seat(self) -> Option<Seat> {
        let Queued { waiting, longest, since, flow, metrics } = self;
        let ticket = waiting.seat(longest).await;
        metrics.dequeued(&flow, since.elapsed(), ticket.is_some());
        match ticket {
            Some(ticket) => Some(Seat::new(Some(ticket), flow)),
            None => {
                metrics.rejected(&flow.labels, Rejection::TimeOut);
                None
            }
        }
    }
}

impl FlowControl {
    /// Follows the cluster's FlowSchemas and PriorityLevelConfigurations,
    /// sharing `seats` among the levels.
    pub fn start(client: Client, seats: usize, longest_wait: Duration, metrics: Arc<FlowControlMetrics>) -> Arc<Self> {
        let flow_control = Arc::new(Self {
            seats,
            longest_wait,
            classifier: ArcSwap::from_pointee(Classifier::default()),
            synced: Synced::new("flow control configuration", 2),
            metrics,
        });
        let following = flow_control.clone();
        tokio::spawn(async move {
            follow_both(client, &following.synced, |schemas, levels| following.rebuild(schemas, levels)).await
        });
        flow_control
    }

    fn rebuild(&self, schemas: &Store<FlowSchema>, levels: &Store<PriorityLevelConfiguration>) {
        if !self.synced.all() {
            return;
        }
        let (schemas, levels) = (schemas.state(), levels.state());
        let classifier = Classifier::new(&schemas, &levels, self.seats, &self.classifier.load(), &self.metrics);
        self.metrics.nominal_seats(classifier.seats());
        self.classifier.store(Arc::new(classifier));
        tracing::debug!(schemas = schemas.len(), levels = levels.len(), "flow control configuration changed");
    }

    /// Whether the configuration has been read: until then, the in-flight
    /// limits apply.
    pub fn in_force(&self) -> bool {
        self.synced.all()
    }

    /// Classifies the request, which takes `width` seats (see [`width`]),
    /// and decides it; None when no schema matches
    /// (a cluster without kube's mandatory catch-all): the in-flight limits
    /// apply to it.
    pub fn decide(&self, user: &UserInfo, info: &RequestInfo, width: usize) -> Option<Decision> {
        let classifier = self.classifier.load();
        let classified = classifier.classify(user, info)?;
        let classification = Classification {
            flow_schema_uid: classified.schema.uid.clone(),
            priority_level_uid: classified.schema.level.uid.clone(),
        };
        let flow = classified.schema.metrics.clone();
        let Some(level) = &classified.schema.level.limited else {
            return Some(Decision::Run(Seat::new(None, flow), classification));
        };
        Some(match level.admit(&(classified.schema.name.as_str(), classified.distinguisher), width) {
            level::Admission::Now(ticket) => Decision::Run(Seat::new(Some(ticket), flow), classification),
            level::Admission::Queued(waiting) => {
                flow.queued();
                let since = std::time::Instant::now();
                let metrics = self.metrics.clone();
                Decision::Wait(Queued { waiting, longest: self.longest_wait, since, flow, metrics }, classification)
            }
            level::Admission::Rejected => {
                let why = if level.queuing().is_some() { Rejection::QueueFull } else { Rejection::ConcurrencyLimit };
                self.metrics.rejected(&flow.labels, why);
                Decision::Reject(classification)
            }
        })
    }
}

/// kube's work estimate of a request, in seats (k8s.io/apiserver
/// `listWorkEstimator`): a list takes one seat per 100 objects it may read
/// (all of the resource's, or its `limit`), at least one and at most ten;
/// every other request one.
pub fn width(objects: impl FnOnce() -> Option<usize>, info: &RequestInfo, limit: Option<usize>) -> usize {
    const OBJECTS_PER_SEAT: usize = 100;
    const MAXIMUM_SEATS: usize = 10;
    if info.verb != crate::apimachinery::request_info::RequestVerb::Resource(crate::Verb::List) {
        return 1;
    }
    let Some(stored) = objects() else { return 1 };
    let read = limit.filter(|&l| l > 0).map_or(stored, |l| l.min(stored));
    read.div_ceil(OBJECTS_PER_SEAT).clamp(1, MAXIMUM_SEATS)
}

impl Classification {
    /// Names the schema and level in `headers`.
    pub fn write(&self, headers: &mut http::HeaderMap) {
        headers.insert(FLOW_SCHEMA_UID, self.flow_schema_uid.clone());
        headers.insert(PRIORITY_LEVEL_UID, self.priority_level_uid.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_takes_a_seat_per_hundred_objects_it_may_read_up_to_ten() {
        let list = crate::apimachinery::request_info::classify(&http::Method::GET, "/apis/g/v1/widgets", None);
        let get = crate::apimachinery::request_info::classify(&http::Method::GET, "/apis/g/v1/widgets/w", None);
        let of = |stored: usize, limit: Option<usize>| width(|| Some(stored), &list, limit);
        assert_eq!((of(0, None), of(100, None), of(101, None), of(950, None), of(50_000, None)), (1, 1, 2, 10, 10));
        assert_eq!((of(5_000, Some(250)), of(50, Some(500)), of(5_000, Some(0))), (3, 1, 10));
        assert_eq!(width(|| Some(50_000), &get, None), 1);
        assert_eq!(width(|| None, &list, None), 1, "a resource this server does not serve");
    }
}
