//! Which admission plugins run, with kube-apiserver's flag. Every plugin this
//! server has is on by default, as in every k8s.io/apiserver-based server: a
//! cluster's webhooks apply to the kinds served here unless the operator
//! turns them off by name.

use clap::Args;

/// The admission plugins, by kube's names.
pub const NAMESPACE_LIFECYCLE: &str = "NamespaceLifecycle";
pub const MUTATING_ADMISSION_POLICY: &str = "MutatingAdmissionPolicy";
pub const MUTATING_ADMISSION_WEBHOOK: &str = "MutatingAdmissionWebhook";
pub const VALIDATING_ADMISSION_WEBHOOK: &str = "ValidatingAdmissionWebhook";
pub const VALIDATING_ADMISSION_POLICY: &str = "ValidatingAdmissionPolicy";

const PLUGINS: [&str; 5] = [
    NAMESPACE_LIFECYCLE,
    MUTATING_ADMISSION_POLICY,
    MUTATING_ADMISSION_WEBHOOK,
    VALIDATING_ADMISSION_POLICY,
    VALIDATING_ADMISSION_WEBHOOK,
];

#[derive(Args, Debug, Clone, Default)]
pub struct AdmissionOptions {
    /// Admission plugins to turn off (comma-separated): NamespaceLifecycle,
    /// MutatingAdmissionPolicy, MutatingAdmissionWebhook,
    /// ValidatingAdmissionPolicy, ValidatingAdmissionWebhook. Off, writes are not admitted by the
    /// cluster's webhooks or policies of that type.
    #[arg(long = "disable-admission-plugins", value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(PLUGINS))]
    pub disabled: Vec<String>,

    /// kube's AdmissionConfiguration file: for the webhook plugins, the
    /// kubeconfig whose users are the credentials presented to webhooks (by
    /// webhook host, `*.<domain>`, or `*`; client certificates or tokens).
    #[arg(long = "admission-control-config-file")]
    pub config_file: Option<std::path::PathBuf>,
}

impl AdmissionOptions {
    pub fn enabled(&self, plugin: &str) -> bool {
        !self.disabled.iter().any(|d| d == plugin)
    }
}
