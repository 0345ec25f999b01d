//! Admission metrics under kube-apiserver's names and labels
//! (k8s.io/apiserver `pkg/admission/metrics`), so that the dashboards and
//! alerts written for kube-apiserver's webhooks read this server too.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry as PromRegistry;

/// `type` label values: kube calls a mutating webhook's step "admit".
pub const ADMIT: &str = "admit";
pub const VALIDATING: &str = "validating";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLabels {
    name: String,
    operation: &'static str,
    rejected: bool,
    r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    name: String,
    operation: &'static str,
    code: u16,
    rejected: bool,
    r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RejectionLabels {
    name: String,
    operation: &'static str,
    r#type: &'static str,
    error_type: &'static str,
    rejection_code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyCheckLabels {
    policy: String,
    policy_binding: String,
    error_type: &'static str,
    enforcement_action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MutationLabels {
    policy: String,
    policy_binding: String,
    error_type: &'static str,
}

/// How a MutatingAdmissionPolicy's mutation ended (kube's `error_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutationOutcome {
    Applied,
    /// Its expression did not compile.
    CompileError,
    /// Its expression would pass the cost limit.
    OutOfBudget,
    /// Anything else: an expression in error, a patch that does not apply.
    Invalid,
}

impl MutationOutcome {
    fn label(self) -> &'static str {
        match self {
            MutationOutcome::Applied => "no_error",
            MutationOutcome::CompileError => "compile_error",
            MutationOutcome::OutOfBudget => "out_of_budget",
            MutationOutcome::Invalid => "invalid_error",
        }
    }
}

fn mutation_histogram() -> Histogram {
    // kube's buckets for a mutation's latency.
    Histogram::new([0.0000005, 0.001, 0.01, 0.1, 1.0])
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailOpenLabels {
    name: String,
    r#type: &'static str,
}

/// Why a webhook call refused a request (kube's `error_type` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectionKind {
    /// The webhook answered allowed: false.
    Denied,
    /// The webhook could not be called or answered badly (failurePolicy Fail).
    CallingWebhook,
    /// This server failed (a patch that would not apply, ...).
    Internal,
}

impl RejectionKind {
    fn label(self) -> &'static str {
        match self {
            RejectionKind::Denied => "no_error",
            RejectionKind::CallingWebhook => "calling_webhook_error",
            RejectionKind::Internal => "apiserver_internal_error",
        }
    }
}

type DurationFamily = Family<WebhookLabels, Histogram, fn() -> Histogram>;

fn webhook_histogram() -> Histogram {
    // kube's buckets for webhook latency.
    Histogram::new([0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0])
}

/// The admission metrics of one server.
pub struct AdmissionMetrics {
    duration: DurationFamily,
    requests: Family<RequestLabels, Counter>,
    rejections: Family<RejectionLabels, Counter>,
    fail_open: Family<FailOpenLabels, Counter>,
    policy_checks: Family<PolicyCheckLabels, Counter>,
    mutations: Family<MutationLabels, Counter>,
    mutation_duration: Family<MutationLabels, Histogram, fn() -> Histogram>,
}

impl Default for AdmissionMetrics {
    fn default() -> Self {
        Self {
            duration: Family::new_with_constructor(webhook_histogram),
            requests: Family::default(),
            rejections: Family::default(),
            fail_open: Family::default(),
            policy_checks: Family::default(),
            mutations: Family::default(),
            mutation_duration: Family::new_with_constructor(mutation_histogram),
        }
    }
}

impl AdmissionMetrics {
    /// Adds the families to `registry` (one without the application's prefix).
    pub fn register(&self, registry: &mut PromRegistry) {
        registry.register(
            "apiserver_admission_webhook_admission_duration_seconds",
            "Admission webhook latency in seconds, identified by name and broken out for each operation and API resource and type (validate or admit)",
            self.duration.clone(),
        );
        registry.register(
            "apiserver_admission_webhook_request",
            "Admission webhook request total, identified by name and broken out for each admission type (validating or mutating) and operation",
            self.requests.clone(),
        );
        registry.register(
            "apiserver_admission_webhook_rejection_count",
            "Admission webhook rejection count, identified by name and broken out for each admission type (validating or admit) and operation",
            self.rejections.clone(),
        );
        registry.register(
            "apiserver_admission_webhook_fail_open_count",
            "Admission webhook fail open count, identified by name and broken out for each admission type (validating or mutating)",
            self.fail_open.clone(),
        );
        registry.register(
            "apiserver_validating_admission_policy_check",
            "Validation admission policy check total, labeled by policy and further identified by binding and enforcement action taken",
            self.policy_checks.clone(),
        );
        registry.register(
            "apiserver_mutating_admission_policy_check",
            "Mutation admission policy check total, labeled by policy and further identified by binding.",
            self.mutations.clone(),
        );
        registry.register(
            "apiserver_mutating_admission_policy_check_duration_seconds",
            "Mutation admission latency for individual mutation expressions in seconds, labeled by policy and binding.",
            self.mutation_duration.clone(),
        );
    }

    /// One webhook call: how long it took and what it answered (`code` is
    /// the HTTP code, 0 when there was none).
    pub fn observe_call(
        &self,
        name: &str,
        step: &'static str,
        operation: &'static str,
        elapsed: Duration,
        rejected: bool,
        code: u16,
    ) {
        let labels = WebhookLabels { name: name.to_string(), operation, rejected, r#type: step };
        self.duration.get_or_create(&labels).observe(elapsed.as_secs_f64());
        let labels = RequestLabels { name: name.to_string(), operation, code, rejected, r#type: step };
        self.requests.get_or_create(&labels).inc();
    }

    pub fn observe_rejection(
        &self,
        name: &str,
        step: &'static str,
        operation: &'static str,
        kind: RejectionKind,
        code: u16,
    ) {
        let labels = RejectionLabels {
            name: name.to_string(),
            operation,
            r#type: step,
            error_type: kind.label(),
            rejection_code: code,
        };
        self.rejections.get_or_create(&labels).inc();
    }

    pub fn observe_fail_open(&self, name: &str, step: &'static str) {
        self.fail_open.get_or_create(&FailOpenLabels { name: name.to_string(), r#type: step }).inc();
    }
}

impl AdmissionMetrics {
    /// One mutation of a MutatingAdmissionPolicy under a binding.
    pub fn observe_mutation(&self, policy: &str, binding: &str, outcome: MutationOutcome, elapsed: Duration) {
        let labels = MutationLabels {
            policy: policy.to_string(),
            policy_binding: binding.to_string(),
            error_type: outcome.label(),
        };
        self.mutations.get_or_create(&labels).inc();
        self.mutation_duration.get_or_create(&labels).observe(elapsed.as_secs_f64());
    }

    /// A validation of a policy failed under a binding: counted once per
    /// action the binding takes (`deny`, `warn`, `audit`).
    pub fn observe_policy_check(&self, policy: &str, binding: &str, actions: &[String]) {
        for action in actions {
            let enforcement_action = match action.as_str() {
                "Deny" => "deny",
                "Warn" => "warn",
                "Audit" => "audit",
                _ => continue,
            };
            let labels = PolicyCheckLabels {
                policy: policy.to_string(),
                policy_binding: binding.to_string(),
                error_type: "no_error",
                enforcement_action,
            };
            self.policy_checks.get_or_create(&labels).inc();
        }
    }
}
