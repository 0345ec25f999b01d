//! How this server authenticates to webhooks, as kube-apiserver does: an
//! AdmissionConfiguration file (`--admission-control-config-file`) names, for
//! the MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins, a
//! kubeconfig whose users are credentials by webhook host: `<host>:<port>`,
//! then `*.<domain>` for each domain of the host, then the same without the
//! port when it is 443, then `*`. A service webhook's host is
//! `<service>.<namespace>.svc`. Client certificates and bearer tokens are
//! supported (kube's `restConfigFromKubeconfig`); without a match, the call is
//! anonymous.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use base64::Engine;
use kube::config::{AuthInfo, Kubeconfig};
use secrecy::ExposeSecret;
use serde_json::Value;

use crate::admission::options::{MUTATING_ADMISSION_WEBHOOK, VALIDATING_ADMISSION_WEBHOOK};

/// The credentials one call presents.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Credentials {
    /// Client certificate chain and key, PEM.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    pub bearer_token: Option<String>,
}

/// The kubeconfig users of one plugin, by name.
#[derive(Default)]
pub struct AuthInfos {
    users: HashMap<String, Credentials>,
    /// The user of the kubeconfig's current context: kube's last resort
    /// before an anonymous call.
    current: Option<Credentials>,
}

/// The credentials of both webhook plugins.
#[derive(Default)]
pub struct WebhookAuthentication {
    pub mutating: AuthInfos,
    pub validating: AuthInfos,
}

impl WebhookAuthentication {
    /// Reads the AdmissionConfiguration at `path` (none: anonymous calls).
    /// Anything that does not read stops the server, naming the file.
    pub fn load(path: Option<&Path>) -> anyhow::Result<Self> {
        let Some(path) = path else { return Ok(Self::default()) };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading admission configuration {}", path.display()))?;
        let config: Value = serde_norway::from_str(&text)
            .with_context(|| format!("parsing admission configuration {}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut auth = Self::default();
        for plugin in config.get("plugins").and_then(Value::as_array).into_iter().flatten() {
            let name = plugin.get("name").and_then(Value::as_str).unwrap_or("");
            let target = match name {
                MUTATING_ADMISSION_WEBHOOK => &mut auth.mutating,
                VALIDATING_ADMISSION_WEBHOOK => &mut auth.validating,
                _ => continue,
            };
            // The plugin's configuration inline, or in a file of its own.
            let configuration = match (plugin.get("configuration"), plugin.get("path").and_then(Value::as_str)) {
                (Some(c), _) => c.clone(),
                (None, Some(file)) => {
                    let file = relative_to(base, file);
                    let text = std::fs::read_to_string(&file)
                        .with_context(|| format!("reading {name} configuration {}", file.display()))?;
                    serde_norway::from_str(&text).with_context(|| format!("parsing {}", file.display()))?
                }
                (None, None) => continue,
            };
            let Some(kubeconfig) = configuration.get("kubeConfigFile").and_then(Value::as_str) else { continue };
            let kubeconfig = relative_to(base, kubeconfig);
            *target = AuthInfos::read(&kubeconfig)
                .with_context(|| format!("{name}: reading kubeConfigFile {}", kubeconfig.display()))?;
        }
        Ok(auth)
    }
}

fn relative_to(base: &Path, file: &str) -> PathBuf {
    let file = PathBuf::from(file);
    if file.is_absolute() {
        file
    } else {
        base.join(file)
    }
}

fn credentials(info: &AuthInfo, base: &Path) -> anyhow::Result<Credentials> {
    let read = |data: Option<String>, file: Option<&String>, what: &str| -> anyhow::Result<Option<Vec<u8>>> {
        match (data, file) {
            (Some(data), _) => base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .map(Some)
                .with_context(|| format!("{what}-data is not base64")),
            (None, Some(file)) => {
                let file = relative_to(base, file);
                std::fs::read(&file).map(Some).with_context(|| format!("reading {what} {}", file.display()))
            }
            (None, None) => Ok(None),
        }
    };
    let certificate =
        read(info.client_certificate_data.clone(), info.client_certificate.as_ref(), "client-certificate")?;
    let key = read(
        info.client_key_data.as_ref().map(|k| k.expose_secret().to_string()),
        info.client_key.as_ref(),
        "client-key",
    )?;
    let identity = match (certificate, key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        _ => bail!("a client certificate needs its key, and a key its certificate"),
    };
    let bearer_token = match (&info.token, &info.token_file) {
        (Some(token), _) => Some(token.expose_secret().trim().to_string()),
        (None, Some(file)) => {
            let file = relative_to(base, file);
            Some(
                std::fs::read_to_string(&file)
                    .with_context(|| format!("reading tokenFile {}", file.display()))?
                    .trim()
                    .to_string(),
            )
        }
        (None, None) => None,
    };
    Ok(Credentials { identity, bearer_token })
}

impl AuthInfos {
    fn read(path: &Path) -> anyhow::Result<Self> {
        let kubeconfig = Kubeconfig::read_from(path)?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut users = HashMap::new();
        for named in &kubeconfig.auth_infos {
            let Some(info) = &named.auth_info else { continue };
            let credentials = credentials(info, base).with_context(|| format!("user {:?}", named.name))?;
            users.insert(named.name.clone(), credentials);
        }
        let current = kubeconfig
            .current_context
            .as_ref()
            .and_then(|name| kubeconfig.contexts.iter().find(|c| &c.name == name))
            .and_then(|c| c.context.as_ref())
            .and_then(|c| c.user.as_ref())
            .and_then(|user| users.get(user).cloned());
        Ok(Self { users, current })
    }

    /// The credentials for a webhook at `host:port`, in kube's order of names.
    pub fn for_target(&self, host: &str, port: u16) -> Credentials {
        let target = format!("{host}:{port}");
        let mut names = vec![target.clone()];
        names.extend(wildcards(&target));
        if port == 443 {
            names.push(host.to_string());
            names.extend(wildcards(host));
        }
        names.push("*".to_string());
        names.iter().find_map(|n| self.users.get(n)).or(self.current.as_ref()).cloned().unwrap_or_default()
    }
}

/// `*.b.c` and `*.c` for `a.b.c`.
fn wildcards(target: &str) -> Vec<String> {
    let steps: Vec<&str> = target.split('.').collect();
    (1..steps.len()).map(|i| format!("*.{}", steps[i..].join("."))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_found_as_kube_finds_them() {
        let credentials = |token: &str| Credentials { identity: None, bearer_token: Some(token.into()) };
        let infos = AuthInfos {
            users: [
                ("hook.ns.svc:8443", "exact"),
                ("*.ns.svc:8443", "namespace-and-port"),
                ("other.ns.svc", "no-port"),
                ("*.svc", "cluster"),
                ("*", "default"),
            ]
            .into_iter()
            .map(|(n, t)| (n.to_string(), credentials(t)))
            .collect(),
            current: None,
        };
        let token = |host: &str, port| infos.for_target(host, port).bearer_token.unwrap_or_default();
        assert_eq!(token("hook.ns.svc", 8443), "exact");
        assert_eq!(token("else.ns.svc", 8443), "namespace-and-port");
        assert_eq!(token("other.ns.svc", 443), "no-port", "443 is tried without the port");
        assert_eq!(token("other.ns.svc", 9443), "default", "another port is not 443");
        assert_eq!(token("x.y.svc", 443), "cluster");
        assert_eq!(token("example.com", 443), "default");
        assert_eq!(AuthInfos::default().for_target("example.com", 443), Credentials::default());
    }
}
