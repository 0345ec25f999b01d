//! Encryption at rest, as kube-apiserver does it
//! (k8s.io/apiserver `pkg/storage/value` and `encryptionconfig`): each
//! value written to etcd goes through its resource's providers from
//! `--encryption-provider-config` (kube's `EncryptionConfiguration`).
//!
//! The first provider (and its first key) writes; every provider reads what
//! carries its prefix, so keys rotate by putting a new key first, writing
//! every object again (an empty patch, or the storage version migration),
//! and then removing the old key. The stored bytes are kube's, byte for
//! byte: `k8s:enc:<provider>:v1:<key name>:` then
//!
//! - aesgcm: a 12-byte random nonce and AES-GCM's sealed data, the etcd key
//!   as additional authenticated data (an encrypted value moved to another
//!   key does not decrypt);
//! - aescbc: a 16-byte random IV and AES-CBC over the PKCS#7-padded data;
//! - secretbox: a 24-byte random nonce and NaCl secretbox (XSalsa20-Poly1305).
//!
//! `identity` stores plain JSON and reads only what is not encrypted. A
//! value no provider can read is an error for that object, never plain
//! text handed on.

mod config;
mod providers;

use std::borrow::Cow;

pub use config::EncryptionConfig;
use providers::Provider;

/// A stored value read: the plain data, and whether it was written with
/// anything but the first provider's first key (a write would store it again
/// with that one).
pub type Opened<'a> = (Cow<'a, [u8]>, bool);

/// The prefix every encrypted value starts with (kube's `k8s:enc:`).
const ENCRYPTED: &[u8] = b"k8s:enc:";

/// One resource's providers, in the configuration's order.
#[derive(Clone, Default)]
pub struct Transformer {
    /// Empty: plain JSON (and encrypted values refused), as for a resource
    /// the configuration does not name.
    providers: Vec<Provider>,
}

impl std::fmt::Debug for Transformer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.providers.iter().map(Provider::name).collect();
        f.debug_struct("Transformer").field("providers", &names).finish()
    }
}

impl Transformer {
    /// Whether values are stored as plain JSON (no provider, or identity first).
    pub fn is_plain(&self) -> bool {
        self.providers.first().is_none_or(|p| matches!(p, Provider::Identity))
    }

    /// What is written for `data` at etcd key `key`.
    pub fn seal(&self, data: Vec<u8>, key: &[u8]) -> Result<Vec<u8>, String> {
        match self.providers.first() {
            None => Ok(data),
            Some(provider) => provider.encrypt(data, key),
        }
    }

    /// What `stored` at etcd key `key` holds, and whether it was written
    /// with anything but the first provider's first key (a write would
    /// store it again with that one).
    pub fn open<'a>(&self, stored: &'a [u8], key: &[u8]) -> Result<Opened<'a>, String> {
        if self.providers.is_empty() {
            return match stored.starts_with(ENCRYPTED) {
                true => Err(unreadable(stored, vec!["no provider is configured for this resource".into()])),
                false => Ok((Cow::Borrowed(stored), false)),
            };
        }
        let mut errors = Vec::new();
        for (i, provider) in self.providers.iter().enumerate() {
            match provider.decrypt(stored, key) {
                None => continue,
                Some(Ok((data, stale))) => return Ok((data, stale || i != 0)),
                // Another provider of the same kind may hold the key.
                Some(Err(e)) => errors.push(e),
            }
        }
        if errors.is_empty() {
            errors.push("no provider reads values with this prefix".into());
        }
        Err(unreadable(stored, errors))
    }
}

/// The error for a value nothing could read, naming its prefix.
fn unreadable(stored: &[u8], errors: Vec<String>) -> String {
    let prefix = match stored.starts_with(ENCRYPTED) {
        true => {
            let shown: Vec<&[u8]> = stored.splitn(6, |b| *b == b':').take(5).collect();
            String::from_utf8_lossy(&shown.join(&b':')).into_owned()
        }
        false => "plain data".to_string(),
    };
    format!("failed to decrypt data ({prefix}): {}", errors.join("; "))
}
