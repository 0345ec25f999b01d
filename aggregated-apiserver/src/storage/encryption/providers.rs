//! The providers of an `EncryptionConfiguration` and their keys.

use std::borrow::Cow;
use std::sync::Arc;

use aes::cipher::{block_padding::Pkcs7, BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use aes_gcm::aead::{Aead, AeadCore, KeyInit, Payload};
use crypto_secretbox::XSalsa20Poly1305;
use rand::RngCore;

use super::{Opened, ENCRYPTED};

/// One provider: its keys, the first of which encrypts.
#[derive(Clone)]
pub enum Provider {
    AesGcm(Vec<Named<AesGcmKey>>),
    AesCbc(Vec<Named<AesCbcKey>>),
    Secretbox(Vec<Named<SecretboxKey>>),
    Identity,
}

/// A key and the name it is stored under.
#[derive(Clone)]
pub struct Named<K> {
    pub name: String,
    pub key: K,
}

/// An AES key of 16, 24 or 32 bytes, for GCM.
#[derive(Clone)]
pub enum AesGcmKey {
    Aes128(Arc<aes_gcm::Aes128Gcm>),
    Aes192(Arc<aes_gcm::AesGcm<aes::Aes192, aes_gcm::aead::consts::U12>>),
    Aes256(Arc<aes_gcm::Aes256Gcm>),
}

/// A 32-byte AES key, for CBC.
#[derive(Clone)]
pub struct AesCbcKey(pub [u8; 32]);

/// A 32-byte secretbox key.
#[derive(Clone)]
pub struct SecretboxKey(pub Arc<XSalsa20Poly1305>);

type Aes256CbcEnc = cbc::Encryptor<aes::Aes256>;
type Aes256CbcDec = cbc::Decryptor<aes::Aes256>;

const GCM_NONCE: usize = 12;
const CBC_IV: usize = 16;
const SECRETBOX_NONCE: usize = 24;

impl AesGcmKey {
    /// The key for `secret`, which must be 16, 24 or 32 bytes.
    pub fn new(secret: &[u8]) -> Option<Self> {
        Some(match secret.len() {
            16 => Self::Aes128(Arc::new(aes_gcm::Aes128Gcm::new_from_slice(secret).ok()?)),
            24 => Self::Aes192(Arc::new(aes_gcm::AesGcm::new_from_slice(secret).ok()?)),
            32 => Self::Aes256(Arc::new(aes_gcm::Aes256Gcm::new_from_slice(secret).ok()?)),
            _ => return None,
        })
    }

    fn seal(&self, nonce: &[u8], payload: Payload<'_, '_>) -> Result<Vec<u8>, aes_gcm::Error> {
        let nonce = aes_gcm::Nonce::from_slice(nonce);
        match self {
            Self::Aes128(c) => c.encrypt(nonce, payload),
            Self::Aes192(c) => c.encrypt(nonce, payload),
            Self::Aes256(c) => c.encrypt(nonce, payload),
        }
    }

    fn open(&self, nonce: &[u8], payload: Payload<'_, '_>) -> Result<Vec<u8>, aes_gcm::Error> {
        let nonce = aes_gcm::Nonce::from_slice(nonce);
        match self {
            Self::Aes128(c) => c.decrypt(nonce, payload),
            Self::Aes192(c) => c.decrypt(nonce, payload),
            Self::Aes256(c) => c.decrypt(nonce, payload),
        }
    }
}

impl Provider {
    /// The provider's name in the configuration.
    pub fn name(&self) -> &'static str {
        match self {
            Self::AesGcm(_) => "aesgcm",
            Self::AesCbc(_) => "aescbc",
            Self::Secretbox(_) => "secretbox",
            Self::Identity => "identity",
        }
    }

    /// `k8s:enc:<name>:v1:`; none for identity.
    fn prefix(&self) -> Option<String> {
        match self {
            Self::Identity => None,
            _ => Some(format!("k8s:enc:{}:v1:", self.name())),
        }
    }

    /// `data` as stored under `key` with the first key.
    pub fn encrypt(&self, data: Vec<u8>, key: &[u8]) -> Result<Vec<u8>, String> {
        // The nonce (or IV) the value is sealed with, and the sealed data.
        let (name, nonce, sealed): (&str, Vec<u8>, Vec<u8>) = match self {
            Self::Identity => return Ok(data),
            Self::AesGcm(keys) => {
                let k = &keys[0];
                let mut nonce = [0u8; GCM_NONCE];
                rand::rng().fill_bytes(&mut nonce);
                let sealed = k
                    .key
                    .seal(&nonce, Payload { msg: &data, aad: key })
                    .map_err(|_| "encrypting with aesgcm failed".to_string())?;
                (&k.name, nonce.to_vec(), sealed)
            }
            Self::AesCbc(keys) => {
                let k = &keys[0];
                let mut iv = [0u8; CBC_IV];
                rand::rng().fill_bytes(&mut iv);
                let sealed = Aes256CbcEnc::new(&k.key.0.into(), &iv.into()).encrypt_padded_vec_mut::<Pkcs7>(&data);
                (&k.name, iv.to_vec(), sealed)
            }
            Self::Secretbox(keys) => {
                let k = &keys[0];
                let nonce = XSalsa20Poly1305::generate_nonce(&mut crypto_secretbox::aead::OsRng);
                let sealed = k
                    .key
                    .0
                    .encrypt(&nonce, data.as_slice())
                    .map_err(|_| "encrypting with secretbox failed".to_string())?;
                (&k.name, nonce.to_vec(), sealed)
            }
        };
        let prefix = self.prefix().unwrap_or_default();
        Ok([prefix.as_bytes(), name.as_bytes(), b":", &nonce, &sealed].concat())
    }

    /// What `stored` under `key` holds, if it carries this provider's
    /// prefix (None otherwise), and whether a key other than the first
    /// wrote it.
    pub fn decrypt<'a>(&self, stored: &'a [u8], key: &[u8]) -> Option<Result<Opened<'a>, String>> {
        let Some(prefix) = self.prefix() else {
            return (!stored.starts_with(ENCRYPTED)).then_some(Ok((Cow::Borrowed(stored), false)));
        };
        let rest = stored.strip_prefix(prefix.as_bytes())?;
        let (name, sealed) = match rest.iter().position(|b| *b == b':') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => return Some(Err(format!("no key name in the {} value", self.name()))),
        };
        let opened = match self {
            Self::Identity => unreachable!("identity has no prefix"),
            Self::AesGcm(keys) => find(keys, name).map(|(i, k)| {
                if sealed.len() < GCM_NONCE {
                    return Err("the stored data was shorter than the required size".into());
                }
                let (nonce, data) = sealed.split_at(GCM_NONCE);
                k.open(nonce, Payload { msg: data, aad: key })
                    .map(|plain| (plain, i != 0))
                    .map_err(|_| "cipher: message authentication failed".into())
            }),
            Self::AesCbc(keys) => find(keys, name).map(|(i, k)| {
                if sealed.len() < CBC_IV {
                    return Err("the stored data was shorter than the required size".into());
                }
                let (iv, data) = sealed.split_at(CBC_IV);
                if data.is_empty() || data.len() % CBC_IV != 0 {
                    return Err("the stored data is not a multiple of the block size".into());
                }
                let iv: [u8; CBC_IV] = iv.try_into().map_err(|_| "bad IV".to_string())?;
                Aes256CbcDec::new(&k.0.into(), &iv.into())
                    .decrypt_padded_vec_mut::<Pkcs7>(data)
                    .map(|plain| (plain, i != 0))
                    .map_err(|_| "invalid padding on input".into())
            }),
            Self::Secretbox(keys) => find(keys, name).map(|(i, k)| {
                if sealed.len() < SECRETBOX_NONCE + 16 {
                    return Err("the stored data was shorter than the required size".into());
                }
                let (nonce, data) = sealed.split_at(SECRETBOX_NONCE);
                k.0.decrypt(crypto_secretbox::Nonce::from_slice(nonce), data)
                    .map(|plain| (plain, i != 0))
                    .map_err(|_| "output array was not large enough for encryption".into())
            }),
        };
        Some(match opened {
            Some(result) => result.map(|(plain, stale)| (Cow::Owned(plain), stale)),
            None => Err(format!(
                "no matching key was found for the provided {} transformer (key {:?})",
                self.name(),
                String::from_utf8_lossy(name)
            )),
        })
    }
}

/// The key named `name`, and its place.
fn find<'k, K>(keys: &'k [Named<K>], name: &[u8]) -> Option<(usize, &'k K)> {
    keys.iter().enumerate().find(|(_, k)| k.name.as_bytes() == name).map(|(i, k)| (i, &k.key))
}
