//! What the API machinery reads of a stored object without parsing its bytes:
//! labels for selectors, selectable fields, table cells, uid, creation time,
//! and its metadata for PartialObjectMetadata views. It is kept once per
//! stored version, so it is laid out to be small.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::apimachinery::labels::Labels;

/// The index of one stored object.
#[derive(Debug, Clone, Default)]
pub struct ObjectIndex {
    /// `metadata.uid`.
    pub uid: Box<str>,
    /// `metadata.labels`.
    pub labels: LabelSet,
    /// Values of the kind's selectable fields, in the order the kind declares them.
    pub fields: Box<[Box<str>]>,
    /// Table cells for the kind's own columns (Name and Age are added around them).
    pub cells: Box<[Value]>,
    /// `metadata.creationTimestamp`.
    pub creation_timestamp: Option<DateTime<Utc>>,
    /// The JSON of `metadata`: set by the store, as a view into the object's
    /// own bytes, never a copy.
    pub metadata: bytes::Bytes,
}

/// Computes the index of an object; provided by the API layer, which knows the kind.
pub trait Indexer: Send + Sync {
    /// The index of `obj`, as it is about to be stored.
    fn index(&self, obj: &serde_json::Value) -> ObjectIndex;
}

/// An object's labels in one allocation: for each label, in key order, the
/// key's length (4 bytes, little endian), the key, the value's length, the
/// value. A few labels cost one small allocation instead of a map node and
/// two strings each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSet(Box<[u8]>);

impl LabelSet {
    /// The labels, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        let mut rest: &[u8] = &self.0;
        std::iter::from_fn(move || {
            let key = take_str(&mut rest)?;
            let value = take_str(&mut rest)?;
            Some((key, value))
        })
    }

    /// Whether there is no label.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The next length-prefixed string of `rest`, moving past it.
fn take_str<'a>(rest: &mut &'a [u8]) -> Option<&'a str> {
    let (len, tail) = rest.split_first_chunk::<4>()?;
    let len = u32::from_le_bytes(*len) as usize;
    let (s, tail) = (tail.get(..len)?, tail.get(len..)?);
    *rest = tail;
    std::str::from_utf8(s).ok()
}

impl<'a> FromIterator<(&'a str, &'a str)> for LabelSet {
    fn from_iter<I: IntoIterator<Item = (&'a str, &'a str)>>(labels: I) -> Self {
        let mut sorted: Vec<(&str, &str)> = labels.into_iter().collect();
        sorted.sort_unstable();
        sorted.dedup_by(|a, b| a.0 == b.0);
        let size = sorted.iter().map(|(k, v)| 8 + k.len() + v.len()).sum();
        let mut out = Vec::with_capacity(size);
        for (k, v) in sorted {
            for s in [k, v] {
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
        }
        Self(out.into_boxed_slice())
    }
}

impl Labels for LabelSet {
    fn get(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
    fn count(&self) -> usize {
        self.iter().count()
    }
    fn in_key_order(&self) -> impl Iterator<Item = (&str, &str)> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_set_reads_back_what_it_was_built_from() {
        let set: LabelSet = [("tier", "web"), ("app", ""), ("a/b.c", "x-1")].into_iter().collect();
        let read: Vec<_> = set.iter().collect();
        assert_eq!(read, [("a/b.c", "x-1"), ("app", ""), ("tier", "web")]);
        assert_eq!(set.get("app"), Some(""));
        assert_eq!(set.get("tier"), Some("web"));
        assert_eq!(set.get("ti"), None);
        assert!(LabelSet::default().is_empty() && LabelSet::default().get("app").is_none());
        let selector = crate::apimachinery::labels::LabelSelector::parse("tier in (web,db),app").unwrap();
        assert!(selector.matches(&set));
    }
}
