//! The `kube-system/extension-apiserver-authentication` ConfigMap kube-apiserver publishes for
//! extension API servers: its keys, how they become an [`AuthnConfig`], flag overrides, and the
//! watch that applies every change to a running [`Authenticator`].

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context as _;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt as _;

use super::{Authenticator, AuthnConfig, RequestHeaderConfig};

/// ConfigMap key: PEM bundle of the CA for client-certificate users.
pub const KEY_CLIENT_CA: &str = "client-ca-file";
/// ConfigMap key: PEM bundle of the front-proxy (request-header) CA.
pub const KEY_REQUESTHEADER_CA: &str = "requestheader-client-ca-file";
/// ConfigMap key: JSON array of allowed front-proxy Common Names.
pub const KEY_REQUESTHEADER_ALLOWED_NAMES: &str = "requestheader-allowed-names";
/// ConfigMap key: JSON array of username headers.
pub const KEY_REQUESTHEADER_USERNAME_HEADERS: &str = "requestheader-username-headers";
/// ConfigMap key: JSON array of group headers.
pub const KEY_REQUESTHEADER_GROUP_HEADERS: &str = "requestheader-group-headers";
/// ConfigMap key: JSON array of extra header prefixes.
pub const KEY_REQUESTHEADER_EXTRA_PREFIXES: &str = "requestheader-extra-headers-prefix";
/// ConfigMap key: JSON array of UID headers.
pub const KEY_REQUESTHEADER_UID_HEADERS: &str = "requestheader-uid-headers";

/// kube's `deserializeStrings`: empty = none, otherwise a JSON array of strings (`null` = none).
fn json_strings(data: &BTreeMap<String, String>, key: &str) -> anyhow::Result<Vec<String>> {
    match data.get(key).map(|v| v.trim()) {
        None | Some("") => Ok(Vec::new()),
        Some(raw) => {
            let parsed: Option<Vec<String>> =
                serde_json::from_str(raw).with_context(|| format!("{key} is not a JSON array of strings"))?;
            Ok(parsed.unwrap_or_default())
        }
    }
}

fn non_empty_pem(data: &BTreeMap<String, String>, key: &str) -> Option<String> {
    data.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()).map(str::to_string)
}

impl AuthnConfig {
    /// From the data of kube-system/extension-apiserver-authentication: keys client-ca-file,
    /// requestheader-client-ca-file, requestheader-allowed-names, requestheader-username-headers,
    /// requestheader-group-headers, requestheader-extra-headers-prefix, requestheader-uid-headers
    /// (the list values are JSON arrays of strings).
    ///
    /// A missing or blank CA key disables that authenticator (the request-header lists are then
    /// ignored). The PEM is not parsed here; [`Authenticator::new`]/[`update`](Authenticator::update) do.
    pub fn from_configmap_data(data: &BTreeMap<String, String>) -> anyhow::Result<Self> {
        let request_header = match non_empty_pem(data, KEY_REQUESTHEADER_CA) {
            None => None,
            Some(ca_pem) => Some(RequestHeaderConfig {
                ca_pem,
                allowed_names: json_strings(data, KEY_REQUESTHEADER_ALLOWED_NAMES)?,
                username_headers: json_strings(data, KEY_REQUESTHEADER_USERNAME_HEADERS)?,
                group_headers: json_strings(data, KEY_REQUESTHEADER_GROUP_HEADERS)?,
                extra_header_prefixes: json_strings(data, KEY_REQUESTHEADER_EXTRA_PREFIXES)?,
                uid_headers: json_strings(data, KEY_REQUESTHEADER_UID_HEADERS)?,
            }),
        };
        Ok(Self { request_header, client_ca_pem: non_empty_pem(data, KEY_CLIENT_CA) })
    }

    /// `self` (e.g. from the ConfigMap) with the fields set in `overrides` (e.g. from flags) winning.
    ///
    /// * `client_ca_pem`: the override's when it is `Some`.
    /// * `request_header`: as in kube, an override with a CA (`ca_pem` non-blank) replaces the whole
    ///   request-header configuration, lists included (an empty `allowed_names` there means "any").
    ///   An override without a CA only replaces the lists it sets (non-empty ones) in `self`'s.
    pub fn with_overrides(mut self, overrides: &AuthnConfig) -> AuthnConfig {
        if let Some(ca) = &overrides.client_ca_pem {
            self.client_ca_pem = Some(ca.clone());
        }
        if let Some(over) = &overrides.request_header {
            if !over.ca_pem.trim().is_empty() {
                self.request_header = Some(over.clone());
            } else if let Some(base) = &mut self.request_header {
                let pick = |mine: &mut Vec<String>, theirs: &Vec<String>| {
                    if !theirs.is_empty() {
                        mine.clone_from(theirs);
                    }
                };
                pick(&mut base.allowed_names, &over.allowed_names);
                pick(&mut base.username_headers, &over.username_headers);
                pick(&mut base.group_headers, &over.group_headers);
                pick(&mut base.extra_header_prefixes, &over.extra_header_prefixes);
                pick(&mut base.uid_headers, &over.uid_headers);
            }
        }
        self
    }
}

// ---------------------------------------------------------------------------------------------
// ConfigMap
// ---------------------------------------------------------------------------------------------

/// Reads the authentication ConfigMap once (e.g. at startup); `Ok(None)` when it does not exist.
pub async fn fetch_configmap_config(
    client: kube::Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Option<AuthnConfig>> {
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let Some(configmap) = api.get_opt(name).await.with_context(|| format!("reading ConfigMap {namespace}/{name}"))?
    else {
        return Ok(None);
    };
    AuthnConfig::from_configmap_data(&configmap.data.unwrap_or_default())
        .with_context(|| format!("ConfigMap {namespace}/{name}"))
        .map(Some)
}

/// Applies one version of the ConfigMap; returns whether the configuration changed.
fn apply_configmap(authn: &Authenticator, configmap: ConfigMap, overrides: &AuthnConfig, source: &str) -> bool {
    let data = configmap.data.unwrap_or_default();
    let config = match AuthnConfig::from_configmap_data(&data) {
        Ok(config) => config.with_overrides(overrides),
        Err(err) => {
            tracing::warn!(configmap = source, error = format!("{err:#}"), "ignoring invalid authentication ConfigMap");
            return false;
        }
    };
    if config == authn.config() {
        tracing::debug!(configmap = source, "authentication ConfigMap unchanged");
        return false;
    }
    match authn.update(config) {
        Ok(()) => {
            tracing::info!(configmap = source, config = authn.compiled().summary(), "applied authentication ConfigMap");
            true
        }
        Err(err) => {
            tracing::warn!(
                configmap = source,
                error = format!("{err:#}"),
                "rejected authentication ConfigMap; keeping the current configuration"
            );
            false
        }
    }
}

/// Watches kube-system/extension-apiserver-authentication (or the given namespace/name) with a kube-rs watcher and
/// applies every change with `update`, merged with `overrides` (fields set there win: flags). Logs each applied change.
///
/// A deleted ConfigMap or an invalid version leaves the current configuration in force (as kube
/// does). Watch errors are retried with kube-rs' default backoff; the task runs until aborted.
pub fn spawn_configmap_watch(
    client: kube::Client,
    namespace: String,
    name: String,
    overrides: AuthnConfig,
    authn: Arc<Authenticator>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let source = format!("{namespace}/{name}");
        let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let mut events = std::pin::pin!(watcher(api, config).default_backoff());
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Apply(configmap) | watcher::Event::InitApply(configmap)) => {
                    apply_configmap(&authn, configmap, &overrides, &source);
                }
                Ok(watcher::Event::Delete(_)) => tracing::warn!(
                    configmap = %source,
                    "authentication ConfigMap deleted; keeping the current configuration"
                ),
                Ok(watcher::Event::Init | watcher::Event::InitDone) => {}
                Err(err) => tracing::warn!(configmap = %source, error = %err, "authentication ConfigMap watch error"),
            }
        }
        tracing::warn!(configmap = %source, "authentication ConfigMap watch ended");
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::*;
    use super::*;

    #[test]
    fn from_configmap_data_realistic() {
        let front = ca("front-proxy-ca");
        let client = ca("kubernetes");
        let data = BTreeMap::from([
            (KEY_CLIENT_CA.to_string(), client.pem.clone()),
            (KEY_REQUESTHEADER_CA.to_string(), front.pem.clone()),
            (KEY_REQUESTHEADER_ALLOWED_NAMES.to_string(), r#"["front-proxy-client"]"#.to_string()),
            (KEY_REQUESTHEADER_USERNAME_HEADERS.to_string(), r#"["X-Remote-User"]"#.to_string()),
            (KEY_REQUESTHEADER_GROUP_HEADERS.to_string(), r#"["X-Remote-Group"]"#.to_string()),
            (KEY_REQUESTHEADER_EXTRA_PREFIXES.to_string(), r#"["X-Remote-Extra-"]"#.to_string()),
            (KEY_REQUESTHEADER_UID_HEADERS.to_string(), r#"["X-Remote-Uid"]"#.to_string()),
        ]);
        let config = AuthnConfig::from_configmap_data(&data).unwrap();
        assert_eq!(
            config,
            AuthnConfig {
                request_header: Some(RequestHeaderConfig {
                    ca_pem: front.pem.trim().to_string(),
                    ..rh_config("", &["front-proxy-client"])
                }),
                client_ca_pem: Some(client.pem.trim().to_string()),
            }
        );
        Authenticator::new(config, None, TokenOptions::default()).unwrap();

        // Older clusters: no UID key; empty string and null lists are empty.
        let mut older = data.clone();
        older.remove(KEY_REQUESTHEADER_UID_HEADERS);
        older.insert(KEY_REQUESTHEADER_ALLOWED_NAMES.to_string(), String::new());
        older.insert(KEY_REQUESTHEADER_EXTRA_PREFIXES.to_string(), "null".to_string());
        let config = AuthnConfig::from_configmap_data(&older).unwrap();
        let rh = config.request_header.unwrap();
        assert!(rh.uid_headers.is_empty() && rh.allowed_names.is_empty() && rh.extra_header_prefixes.is_empty());
        assert_eq!(rh.username_headers, strings(&["X-Remote-User"]));

        // Only client-ca-file (no front proxy configured).
        let only_client = BTreeMap::from([
            (KEY_CLIENT_CA.to_string(), client.pem.clone()),
            (KEY_REQUESTHEADER_CA.to_string(), "  \n".to_string()),
            (KEY_REQUESTHEADER_USERNAME_HEADERS.to_string(), r#"["X-Remote-User"]"#.to_string()),
        ]);
        let config = AuthnConfig::from_configmap_data(&only_client).unwrap();
        assert!(config.request_header.is_none());
        assert!(config.client_ca_pem.is_some());
        assert_eq!(AuthnConfig::from_configmap_data(&BTreeMap::new()).unwrap(), AuthnConfig::default());

        // Not JSON arrays of strings.
        for bad in ["X-Remote-User", "[1]", r#"{"a":"b"}"#, r#"["unterminated"#] {
            let mut broken = data.clone();
            broken.insert(KEY_REQUESTHEADER_USERNAME_HEADERS.to_string(), bad.to_string());
            let err = AuthnConfig::from_configmap_data(&broken).unwrap_err();
            assert!(err.to_string().contains(KEY_REQUESTHEADER_USERNAME_HEADERS), "{err}");
        }
    }

    #[test]
    fn overrides_win() {
        let base = AuthnConfig {
            request_header: Some(rh_config("cm-ca", &["front-proxy-client"])),
            client_ca_pem: Some("cm-client-ca".into()),
        };
        assert_eq!(base.clone().with_overrides(&AuthnConfig::default()), base);

        let flags = AuthnConfig { request_header: Some(rh_config("flag-ca", &[])), client_ca_pem: Some("flag".into()) };
        assert_eq!(base.clone().with_overrides(&flags), flags);

        let headers_only = AuthnConfig {
            request_header: Some(RequestHeaderConfig {
                username_headers: strings(&["X-Proxy-User"]),
                ..Default::default()
            }),
            client_ca_pem: None,
        };
        let merged = base.clone().with_overrides(&headers_only);
        let rh = merged.request_header.unwrap();
        assert_eq!(rh.ca_pem, "cm-ca");
        assert_eq!(rh.username_headers, strings(&["X-Proxy-User"]));
        assert_eq!(rh.allowed_names, strings(&["front-proxy-client"]));
        assert_eq!(merged.client_ca_pem.as_deref(), Some("cm-client-ca"));
        // Lists alone cannot enable request-header authentication.
        assert_eq!(AuthnConfig::default().with_overrides(&headers_only), AuthnConfig::default());
    }

    #[tokio::test]
    async fn apply_configmap_updates_only_on_valid_change() {
        let front = ca("front-proxy-ca");
        let cert = Leaf::client("front-proxy-client").sign(&front);
        let a = authn(AuthnConfig::default());
        let configmap = |data: &[(&str, &str)]| ConfigMap {
            data: Some(data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        };
        let good = configmap(&[
            (KEY_REQUESTHEADER_CA, &front.pem),
            (KEY_REQUESTHEADER_USERNAME_HEADERS, r#"["X-Remote-User"]"#),
        ]);
        assert!(apply_configmap(&a, good.clone(), &AuthnConfig::default(), "test"));
        assert!(!apply_configmap(&a, good, &AuthnConfig::default(), "test"), "unchanged");
        assert_eq!(user(a.authenticate(&proxy_headers(), &peer(&[&cert])).await).name, "alice");

        let bad_json = configmap(&[(KEY_REQUESTHEADER_CA, &front.pem), (KEY_REQUESTHEADER_USERNAME_HEADERS, "[")]);
        assert!(!apply_configmap(&a, bad_json, &AuthnConfig::default(), "test"));
        let bad_pem = configmap(&[(KEY_REQUESTHEADER_CA, "garbage"), (KEY_REQUESTHEADER_USERNAME_HEADERS, "[]")]);
        assert!(!apply_configmap(&a, bad_pem, &AuthnConfig::default(), "test"));
        assert_eq!(user(a.authenticate(&proxy_headers(), &peer(&[&cert])).await).name, "alice");

        // Overrides (flags) win over the ConfigMap.
        let flags = AuthnConfig {
            request_header: Some(RequestHeaderConfig {
                username_headers: strings(&["X-Flag-User"]),
                ..Default::default()
            }),
            client_ca_pem: None,
        };
        let good = configmap(&[
            (KEY_REQUESTHEADER_CA, &front.pem),
            (KEY_REQUESTHEADER_USERNAME_HEADERS, r#"["X-Remote-User"]"#),
        ]);
        assert!(apply_configmap(&a, good, &flags, "test"));
        assert_eq!(a.authenticate(&proxy_headers(), &peer(&[&cert])).await, AuthnOutcome::NoCredentials);
        let h = headers(&[("X-Flag-User", "flagged")]);
        assert_eq!(user(a.authenticate(&h, &peer(&[&cert])).await).name, "flagged");
    }
}
