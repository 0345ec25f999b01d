//! Which admission plugins run, with kube-apiserver's flags
//! (k8s.io/apiserver's `AdmissionOptions`). Every plugin this server has is
//! on by default, as in every k8s.io/apiserver-based server: a cluster's
//! webhooks and policies apply to the kinds served here unless the operator
//! turns them off by name. `--enable-admission-plugins` therefore changes
//! nothing today, but is taken (and checked) as kube takes it, so the same
//! flags work on both.

use clap::Args;

/// The admission plugins, by kube's names.
pub const NAMESPACE_LIFECYCLE: &str = "NamespaceLifecycle";
pub const MUTATING_ADMISSION_POLICY: &str = "MutatingAdmissionPolicy";
pub const MUTATING_ADMISSION_WEBHOOK: &str = "MutatingAdmissionWebhook";
pub const VALIDATING_ADMISSION_WEBHOOK: &str = "ValidatingAdmissionWebhook";
pub const VALIDATING_ADMISSION_POLICY: &str = "ValidatingAdmissionPolicy";

/// The plugins this server has (kube's registered plugins of a generic
/// server), all on unless disabled.
const PLUGINS: [&str; 5] = [
    NAMESPACE_LIFECYCLE,
    MUTATING_ADMISSION_POLICY,
    MUTATING_ADMISSION_WEBHOOK,
    VALIDATING_ADMISSION_POLICY,
    VALIDATING_ADMISSION_WEBHOOK,
];

#[derive(Args, Debug, Clone, Default)]
pub struct AdmissionOptions {
    /// Admission plugins to enable in addition to those on by default (all
    /// of them: NamespaceLifecycle, MutatingAdmissionPolicy,
    /// MutatingAdmissionWebhook, ValidatingAdmissionPolicy,
    /// ValidatingAdmissionWebhook). Comma-separated; the order does not
    /// matter.
    #[arg(long = "enable-admission-plugins", value_delimiter = ',')]
    pub enabled: Vec<String>,

    /// Admission plugins to turn off although they are on by default
    /// (comma-separated, any of those of --enable-admission-plugins; the
    /// order does not matter). Off, writes are not admitted by the
    /// cluster's webhooks or policies of that type.
    #[arg(long = "disable-admission-plugins", value_delimiter = ',')]
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

    /// kube's checks, in its words: unknown plugins, and plugins both
    /// enabled and disabled.
    pub fn validate(&self) -> anyhow::Result<()> {
        let mut errors = Vec::new();
        for (flag, names) in
            [("enable-admission-plugins", &self.enabled), ("disable-admission-plugins", &self.disabled)]
        {
            for name in names.iter().filter(|n| !PLUGINS.contains(&n.as_str())) {
                errors.push(format!("{flag} plugin {name:?} is unknown"));
            }
        }
        let mut both: Vec<&str> =
            self.enabled.iter().filter(|e| self.disabled.contains(e)).map(String::as_str).collect();
        both.sort_unstable();
        both.dedup();
        if !both.is_empty() {
            errors.push(format!(
                "[{}] in enable-admission-plugins and disable-admission-plugins overlapped",
                both.join(" ")
            ));
        }
        match errors.as_slice() {
            [] => Ok(()),
            [one] => Err(anyhow::anyhow!("{one}")),
            many => Err(anyhow::anyhow!("[{}]", many.join(", "))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(enabled: &[&str], disabled: &[&str]) -> AdmissionOptions {
        AdmissionOptions {
            enabled: enabled.iter().map(|s| s.to_string()).collect(),
            disabled: disabled.iter().map(|s| s.to_string()).collect(),
            config_file: None,
        }
    }

    #[test]
    fn plugins_are_checked_in_kubes_words() {
        assert!(options(&["NamespaceLifecycle"], &["ValidatingAdmissionWebhook"]).validate().is_ok());
        assert_eq!(
            options(&["AlwaysPullImages"], &[]).validate().unwrap_err().to_string(),
            "enable-admission-plugins plugin \"AlwaysPullImages\" is unknown"
        );
        assert_eq!(
            options(&["Nope"], &["Gone", "MutatingAdmissionPolicy"]).validate().unwrap_err().to_string(),
            "[enable-admission-plugins plugin \"Nope\" is unknown, disable-admission-plugins plugin \"Gone\" is unknown]"
        );
        assert_eq!(
            options(&["ValidatingAdmissionPolicy", "NamespaceLifecycle"], &["NamespaceLifecycle", "ValidatingAdmissionPolicy"])
                .validate()
                .unwrap_err()
                .to_string(),
            "[NamespaceLifecycle ValidatingAdmissionPolicy] in enable-admission-plugins and disable-admission-plugins overlapped"
        );
    }

    #[test]
    fn disabled_plugins_are_off_and_the_rest_on() {
        let o = options(&["MutatingAdmissionWebhook"], &["MutatingAdmissionPolicy"]);
        assert!(!o.enabled(MUTATING_ADMISSION_POLICY));
        assert!(o.enabled(MUTATING_ADMISSION_WEBHOOK) && o.enabled(NAMESPACE_LIFECYCLE));
    }
}
