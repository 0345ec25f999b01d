//! The one encoding of a stored object. An object is written once, already
//! inside the watch line of the change that stored it:
//! `{"type":"MODIFIED","object":<object JSON>}\n`. Its JSON and its metadata
//! (for PartialObjectMetadata views) are views into that same allocation, so
//! the object, its metadata view, and the line every watcher is sent share
//! one copy of the bytes.

use std::ops::Range;

use bytes::Bytes;
use serde_json::Value;

use super::{EventType, StoreError};

/// An object's encoding: the watch line and the object's place in it.
pub struct Framed {
    /// `{"type":"<TYPE>","object":<object>}\n`
    pub line: Bytes,
    /// The object's JSON, a view into `line`.
    pub object: Bytes,
    /// The JSON of its `metadata` (empty without one), a view into `line`.
    pub metadata: Bytes,
}

/// Encodes `obj` (a JSON object) as the watch line of a change of type
/// `kind`. The object JSON is byte for byte what `serde_json::to_vec` writes.
pub fn frame(obj: &Value, kind: EventType) -> Result<Framed, StoreError> {
    let Some(map) = obj.as_object() else {
        return Err(StoreError::Internal("stored objects are JSON objects".into()));
    };
    let fail = |e: serde_json::Error| StoreError::Internal(format!("encoding object: {e}"));
    let mut buf = Vec::with_capacity(1024);
    buf.extend_from_slice(b"{\"type\":\"");
    buf.extend_from_slice(kind.as_str().as_bytes());
    buf.extend_from_slice(b"\",\"object\":");
    let start = buf.len();
    buf.push(b'{');
    let mut metadata: Range<usize> = 0..0;
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        serde_json::to_writer(&mut buf, key).map_err(fail)?;
        buf.push(b':');
        let at = buf.len();
        serde_json::to_writer(&mut buf, value).map_err(fail)?;
        if key == "metadata" {
            metadata = at..buf.len();
        }
    }
    buf.push(b'}');
    let end = buf.len();
    buf.extend_from_slice(b"}\n");
    // Held for as long as the object is: no spare capacity.
    buf.shrink_to_fit();
    let line = Bytes::from(buf);
    Ok(Framed { object: line.slice(start..end), metadata: line.slice(metadata), line })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_object_and_its_metadata_are_views_into_the_watch_line() {
        let obj = json!({"kind": "Widget", "metadata": {"name": "a", "labels": {"x": "\"y\""}}, "spec": {"w": 1.5}});
        let f = frame(&obj, EventType::Modified).unwrap();
        assert_eq!(f.object, serde_json::to_vec(&obj).unwrap());
        assert_eq!(f.metadata, serde_json::to_vec(&obj["metadata"]).unwrap());
        let line: Value = serde_json::from_slice(&f.line).unwrap();
        assert_eq!(line, json!({"type": "MODIFIED", "object": obj}));
        assert!(f.line.ends_with(b"}\n"));
        let range = |b: &Bytes| b.as_ptr() as usize - f.line.as_ptr() as usize;
        assert!(range(&f.object) + f.object.len() < f.line.len(), "the object is inside the line");
        assert!(range(&f.metadata) > range(&f.object));
        assert!(frame(&json!([1]), EventType::Added).is_err());
    }
}
