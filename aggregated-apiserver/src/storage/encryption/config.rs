//! `--encryption-provider-config`: kube's `EncryptionConfiguration`
//! (`apiserver.config.k8s.io/v1`), in YAML or JSON.
//!
//! ```yaml
//! apiVersion: apiserver.config.k8s.io/v1
//! kind: EncryptionConfiguration
//! resources:
//! - resources: [llamas.farm.example.com]   # or *.farm.example.com, *.*
//!   providers:
//!   - aesgcm:
//!       keys:
//!       - name: key2
//!         secret: <base64 of 16, 24 or 32 random bytes>
//!   - aescbc:
//!       keys:
//!       - name: key1
//!         secret: <base64 of 32 random bytes>
//!   - identity: {}
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context};
use base64::Engine as _;
use serde::Deserialize;

use super::providers::{AesCbcKey, AesGcmKey, Named, Provider, SecretboxKey};
use super::Transformer;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    api_version: String,
    kind: String,
    #[serde(default)]
    resources: Vec<ResourceConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourceConfig {
    resources: Vec<String>,
    providers: Vec<ProviderConfig>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ProviderConfig {
    aesgcm: Option<Keys>,
    aescbc: Option<Keys>,
    secretbox: Option<Keys>,
    identity: Option<serde_json::Value>,
    kms: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Keys {
    keys: Vec<Key>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Key {
    name: String,
    secret: String,
}

/// Which providers each resource's values go through.
#[derive(Debug, Default)]
pub struct EncryptionConfig {
    /// `<resource>.<group>`, `*.<group>` or `*.*`, the first entry naming it.
    by_resource: BTreeMap<String, Transformer>,
}

impl EncryptionConfig {
    /// Reads and checks the file; a bad one stops the server at start.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading --encryption-provider-config {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("--encryption-provider-config {}", path.display()))
    }

    fn parse(text: &str) -> anyhow::Result<Self> {
        let file: File = serde_norway::from_str(text).context("not an EncryptionConfiguration")?;
        if file.api_version != "apiserver.config.k8s.io/v1" || file.kind != "EncryptionConfiguration" {
            bail!(
                "apiVersion {:?} and kind {:?}: expected apiserver.config.k8s.io/v1 EncryptionConfiguration",
                file.api_version,
                file.kind
            );
        }
        let mut by_resource = BTreeMap::new();
        for (i, config) in file.resources.iter().enumerate() {
            let at = format!("resources[{i}]");
            if config.resources.is_empty() {
                bail!("{at}.resources: Required value: resource must be specified");
            }
            if config.providers.is_empty() {
                bail!("{at}.providers: Required value: provider must be specified");
            }
            let providers = config
                .providers
                .iter()
                .enumerate()
                .map(|(j, p)| provider(p).with_context(|| format!("{at}.providers[{j}]")))
                .collect::<anyhow::Result<Vec<_>>>()?;
            for resource in &config.resources {
                let name = resource_name(resource).with_context(|| format!("{at}.resources"))?;
                // The first entry that names a resource is the one used, as in kube.
                by_resource.entry(name).or_insert_with(|| Transformer { providers: providers.clone() });
            }
        }
        Ok(Self { by_resource })
    }

    /// The providers of `resource` in `group`: its own entry, else its
    /// group's `*.<group>`, else `*.*`, else none (plain JSON).
    pub fn transformer(&self, group: &str, resource: &str) -> Transformer {
        [format!("{resource}.{group}"), format!("*.{group}"), "*.*".to_string()]
            .iter()
            .find_map(|name| self.by_resource.get(name))
            .cloned()
            .unwrap_or_default()
    }
}

/// A resource as written in the file: `secrets` (the core group),
/// `llamas.farm.example.com`, `*.farm.example.com`, `*.` or `*.*`.
fn resource_name(written: &str) -> anyhow::Result<String> {
    if written != written.to_lowercase() || written.is_empty() {
        bail!("{written:?}: resource name must be lowercase");
    }
    Ok(match written.split_once('.') {
        Some(_) => written.to_string(),
        None if written == "*" => bail!("\"*\": use '*.' to encrypt every resource of the core group or '*.*' for all"),
        None => format!("{written}."),
    })
}

fn provider(config: &ProviderConfig) -> anyhow::Result<Provider> {
    let set = [
        config.aesgcm.is_some(),
        config.aescbc.is_some(),
        config.secretbox.is_some(),
        config.identity.is_some(),
        config.kms.is_some(),
    ];
    if set.iter().filter(|s| **s).count() != 1 {
        bail!("exactly one provider must be specified in each provider entry (aesgcm, aescbc, secretbox, identity)");
    }
    if config.kms.is_some() {
        bail!("kms: KMS providers are not supported by this server; use aesgcm, aescbc or secretbox");
    }
    if config.identity.is_some() {
        return Ok(Provider::Identity);
    }
    if let Some(keys) = &config.aesgcm {
        return Ok(Provider::AesGcm(named(keys, "aesgcm", &[16, 24, 32], AesGcmKey::new)?));
    }
    if let Some(keys) = &config.aescbc {
        return Ok(Provider::AesCbc(named(keys, "aescbc", &[32], |s| s.try_into().ok().map(AesCbcKey))?));
    }
    let keys = config.secretbox.as_ref().context("no provider")?;
    Ok(Provider::Secretbox(named(keys, "secretbox", &[32], |s| {
        use crypto_secretbox::KeyInit as _;
        crypto_secretbox::XSalsa20Poly1305::new_from_slice(s).ok().map(|c| SecretboxKey(std::sync::Arc::new(c)))
    })?))
}

/// The provider's keys, each checked as kube checks them.
fn named<K>(
    keys: &Keys,
    provider: &str,
    sizes: &[usize],
    make: impl Fn(&[u8]) -> Option<K>,
) -> anyhow::Result<Vec<Named<K>>> {
    if keys.keys.is_empty() {
        bail!("{provider}.keys: Required value: keys must be specified");
    }
    let mut seen = std::collections::HashSet::new();
    keys.keys
        .iter()
        .enumerate()
        .map(|(i, key)| {
            let at = format!("{provider}.keys[{i}]");
            if key.name.is_empty() {
                bail!("{at}.name: Required value: key's name must be specified");
            }
            if key.name.contains(':') {
                bail!("{at}.name: Invalid value: {:?}: should not contain ':'", key.name);
            }
            if !seen.insert(key.name.as_str()) {
                bail!("{at}.name: Duplicate value: {:?}", key.name);
            }
            let secret = base64::engine::general_purpose::STANDARD
                .decode(key.secret.trim())
                .map_err(|e| anyhow::anyhow!("{at}.secret: Invalid value: REDACTED: secrets must be base64 encoded: {e}"))?;
            if !sizes.contains(&secret.len()) {
                bail!(
                    "{at}.secret: Invalid value: REDACTED: secret is not of the expected length, got {}, expected one of {sizes:?}",
                    secret.len()
                );
            }
            let key_for = make(&secret).ok_or_else(|| anyhow::anyhow!("{at}.secret: not a usable key"))?;
            Ok(Named { name: key.name.clone(), key: key_for })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(providers: &str) -> String {
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [llamas.farm.example.com]\n  providers:\n{providers}"
        )
    }

    const KEY32: &str = "c2VjcmV0IGlzIHNlY3VyZSwgb3IgaXMgaXQ/IDEyMzQ=";
    const KEY16: &str = "MTIzNDU2Nzg5MDEyMzQ1Ng==";

    #[test]
    fn every_provider_round_trips_and_reads_the_others() {
        let all = [
            format!("  - aesgcm: {{keys: [{{name: k1, secret: {KEY16}}}]}}\n"),
            format!("  - aescbc: {{keys: [{{name: k1, secret: {KEY32}}}]}}\n"),
            format!("  - secretbox: {{keys: [{{name: k1, secret: {KEY32}}}]}}\n"),
            "  - identity: {}\n".to_string(),
        ];
        let key = b"/registry/llamas/default/dolly";
        let data = br#"{"kind":"Llama"}"#.to_vec();
        for (i, first) in all.iter().enumerate() {
            let mut providers = first.clone();
            providers.extend(all.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, p)| p.clone()));
            let writer =
                EncryptionConfig::parse(&config(&providers)).unwrap().transformer("farm.example.com", "llamas");
            let stored = writer.seal(data.clone(), key).unwrap();
            assert_eq!(stored.starts_with(b"k8s:enc:"), i != 3);
            let (read, stale) = writer.open(&stored, key).unwrap();
            assert_eq!((&read[..], stale), (&data[..], false));
            // The same providers with this one last read it, as stale.
            if i != 3 {
                let rotated = [&all[i + 1..], &all[..=i]].concat().concat();
                let reader =
                    EncryptionConfig::parse(&config(&rotated)).unwrap().transformer("farm.example.com", "llamas");
                let (read, stale) = reader.open(&stored, key).unwrap_or_else(|e| panic!("{first}: {e}"));
                assert_eq!((&read[..], stale), (&data[..], true));
            }
        }
    }

    #[test]
    fn aesgcm_binds_the_value_to_its_key() {
        let t = EncryptionConfig::parse(&config(&format!("  - aesgcm: {{keys: [{{name: k1, secret: {KEY32}}}]}}\n")))
            .unwrap()
            .transformer("farm.example.com", "llamas");
        let stored = t.seal(b"{}".to_vec(), b"/a").unwrap();
        let err = t.open(&stored, b"/b").unwrap_err();
        assert!(err.contains("message authentication failed") && err.contains("k8s:enc:aesgcm:v1:k1"), "{err}");
    }

    #[test]
    fn a_missing_key_or_provider_is_an_error_never_plain_text() {
        let gcm = EncryptionConfig::parse(&config(&format!("  - aesgcm: {{keys: [{{name: k1, secret: {KEY32}}}]}}\n")))
            .unwrap();
        let stored = gcm.transformer("farm.example.com", "llamas").seal(b"{}".to_vec(), b"/a").unwrap();
        let other =
            EncryptionConfig::parse(&config(&format!("  - aesgcm: {{keys: [{{name: k2, secret: {KEY32}}}]}}\n")))
                .unwrap();
        let err = other.transformer("farm.example.com", "llamas").open(&stored, b"/a").unwrap_err();
        assert!(err.contains("no matching key was found"), "{err}");
        let identity = EncryptionConfig::parse(&config("  - identity: {}\n")).unwrap();
        assert!(identity.transformer("farm.example.com", "llamas").open(&stored, b"/a").is_err());
        // A resource the file does not name reads plain data only.
        assert!(gcm.transformer("farm.example.com", "alpacas").open(&stored, b"/a").is_err());
        assert!(gcm.transformer("farm.example.com", "alpacas").open(b"{}", b"/a").is_ok());
    }

    #[test]
    fn wildcards_and_the_first_entry_win() {
        let text = format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: ['*.farm.example.com']\n  providers: [{{secretbox: {{keys: [{{name: a, secret: {KEY32}}}]}}}}]\n- resources: [llamas.farm.example.com, '*.*']\n  providers: [{{aescbc: {{keys: [{{name: b, secret: {KEY32}}}]}}}}]\n"
        );
        let c = EncryptionConfig::parse(&text).unwrap();
        let of = |g: &str, r: &str| format!("{:?}", c.transformer(g, r));
        assert!(of("farm.example.com", "llamas").contains("aescbc"));
        assert!(of("farm.example.com", "alpacas").contains("secretbox"));
        assert!(of("example.org", "things").contains("aescbc"));
    }

    #[test]
    fn bad_files_are_refused_naming_the_place() {
        let err = |providers: &str| format!("{:#}", EncryptionConfig::parse(&config(providers)).unwrap_err());
        assert!(err("  - aescbc: {keys: [{name: k, secret: MTIz}]}\n").contains("expected one of [32]"));
        assert!(err("  - aesgcm: {keys: []}\n").contains("keys must be specified"));
        assert!(err("  - kms: {name: x}\n").contains("KMS providers are not supported"));
        assert!(err("  - {}\n").contains("exactly one provider"));
        assert!(err(&format!("  - aesgcm: {{keys: [{{name: a, secret: {KEY32}}}, {{name: a, secret: {KEY32}}}]}}\n"))
            .contains("Duplicate value"));
        assert!(format!("{:#}", EncryptionConfig::parse("kind: Other\napiVersion: v1\n").unwrap_err())
            .contains("expected apiserver.config.k8s.io/v1 EncryptionConfiguration"));
    }
}
