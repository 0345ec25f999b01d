//! API Priority and Fairness's metrics under kube's names and labels
//! (k8s.io/apiserver `pkg/util/flowcontrol/metrics`), so that the dashboards
//! and alerts written for kube-apiserver's flow control read this server too.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FlowLabels {
    pub priority_level: String,
    pub flow_schema: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RejectedLabels {
    priority_level: String,
    flow_schema: String,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WaitLabels {
    priority_level: String,
    flow_schema: String,
    execute: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LevelLabels {
    priority_level: String,
}

/// The counters of one flow schema (and its level).
pub struct FlowMetrics {
    pub labels: FlowLabels,
    dispatched: Counter,
    executing: Gauge,
    in_queue: Gauge,
}

impl FlowMetrics {
    /// A request starts to run: counted as dispatched and executing.
    pub fn started(&self) {
        self.dispatched.inc();
        self.executing.inc();
    }

    pub fn finished(&self) {
        self.executing.dec();
    }

    pub fn queued(&self) {
        self.in_queue.inc();
    }
}

/// Why a request was refused (kube's `reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// Its queue was full.
    QueueFull,
    /// Its level has no free seat and does not queue.
    ConcurrencyLimit,
    /// It waited in its queue for as long as a request may.
    TimeOut,
}

impl Rejection {
    fn label(self) -> &'static str {
        match self {
            Rejection::QueueFull => "queue-full",
            Rejection::ConcurrencyLimit => "concurrency-limit",
            Rejection::TimeOut => "time-out",
        }
    }
}

fn wait_histogram() -> Histogram {
    // kube's buckets for the time spent in a queue.
    Histogram::new([0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0])
}

/// The flow control metrics of one server.
pub struct FlowControlMetrics {
    rejected: Family<RejectedLabels, Counter>,
    dispatched: Family<FlowLabels, Counter>,
    in_queue: Family<FlowLabels, Gauge>,
    executing: Family<FlowLabels, Gauge>,
    wait: Family<WaitLabels, Histogram, fn() -> Histogram>,
    nominal_seats: Family<LevelLabels, Gauge>,
}

impl Default for FlowControlMetrics {
    fn default() -> Self {
        Self {
            rejected: Family::default(),
            dispatched: Family::default(),
            in_queue: Family::default(),
            executing: Family::default(),
            wait: Family::new_with_constructor(wait_histogram),
            nominal_seats: Family::default(),
        }
    }
}

impl FlowControlMetrics {
    /// Adds the families to `registry` (one without the application's prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "apiserver_flowcontrol_rejected_requests",
            "Number of requests rejected by API Priority and Fairness subsystem",
            self.rejected.clone(),
        );
        registry.register(
            "apiserver_flowcontrol_dispatched_requests",
            "Number of requests executed by API Priority and Fairness subsystem",
            self.dispatched.clone(),
        );
        registry.register(
            "apiserver_flowcontrol_current_inqueue_requests",
            "Number of requests currently pending in queues of the API Priority and Fairness subsystem",
            self.in_queue.clone(),
        );
        registry.register(
            "apiserver_flowcontrol_current_executing_requests",
            "Number of requests in any execution stage in the API Priority and Fairness subsystem",
            self.executing.clone(),
        );
        registry.register(
            "apiserver_flowcontrol_request_wait_duration_seconds",
            "Length of time a request spent waiting in its queue",
            self.wait.clone(),
        );
        registry.register(
            "apiserver_flowcontrol_nominal_limit_seats",
            "Nominal number of execution seats configured for each priority level",
            self.nominal_seats.clone(),
        );
    }

    /// One flow schema's counters, taken once per configuration so that a
    /// request counts itself without looking its labels up.
    pub fn flow(&self, labels: FlowLabels) -> FlowMetrics {
        FlowMetrics {
            dispatched: self.dispatched.get_or_create(&labels).clone(),
            executing: self.executing.get_or_create(&labels).clone(),
            in_queue: self.in_queue.get_or_create(&labels).clone(),
            labels,
        }
    }

    pub fn rejected(&self, flow: &FlowLabels, why: Rejection) {
        let labels = RejectedLabels {
            priority_level: flow.priority_level.clone(),
            flow_schema: flow.flow_schema.clone(),
            reason: why.label(),
        };
        self.rejected.get_or_create(&labels).inc();
    }

    /// A queued request of `flow` leaves its queue after `waited`, to run or not.
    pub fn dequeued(&self, flow: &FlowMetrics, waited: Duration, runs: bool) {
        flow.in_queue.dec();
        let labels = WaitLabels {
            priority_level: flow.labels.priority_level.clone(),
            flow_schema: flow.labels.flow_schema.clone(),
            execute: if runs { "true" } else { "false" },
        };
        self.wait.get_or_create(&labels).observe(waited.as_secs_f64());
    }

    /// The seats of each limited level, as configured now.
    pub fn nominal_seats(&self, levels: impl Iterator<Item = (String, usize)>) {
        self.nominal_seats.clear();
        for (priority_level, seats) in levels {
            self.nominal_seats.get_or_create(&LevelLabels { priority_level }).set(seats as i64);
        }
    }
}
