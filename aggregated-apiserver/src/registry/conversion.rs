//! How the objects of a kind served in several versions convert between
//! them: through the storage version, the hub, as k8s.io/sample-apiserver
//! converts through its internal type and a CRD through its conversion
//! webhook, but in Rust, in the server, with the kinds' own types.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Converts the objects of a kind between its served versions.
pub trait Convert: Send + Sync {
    /// `obj`, in whichever served version its `apiVersion` names, in
    /// `api_version` (`group/version`); the error says why it cannot be.
    fn convert(&self, obj: Value, api_version: &str) -> Result<Value, String>;
}

type Step = dyn Fn(Value) -> Result<Value, String> + Send + Sync;

/// One version besides the hub: how its objects become the hub's and back.
#[derive(Clone)]
struct Spoke {
    api_version: String,
    to_hub: Arc<Step>,
    from_hub: Arc<Step>,
}

/// Conversions through a hub version (the stored one), from typed
/// conversions each way between the hub's type and each other version's.
#[derive(Clone)]
pub(crate) struct Hub {
    api_version: String,
    spokes: Vec<Spoke>,
}

impl Hub {
    /// A hub of one version, `api_version`, for now without others.
    pub(crate) fn new(api_version: String) -> Self {
        Self { api_version, spokes: Vec::new() }
    }

    /// Adds version `V` (`api_version`), converted to and from the hub's type `H`.
    pub(crate) fn add<H, V>(&mut self, api_version: String)
    where
        H: DeserializeOwned + Serialize + TryFrom<V> + 'static,
        V: DeserializeOwned + Serialize + TryFrom<H> + 'static,
        <H as TryFrom<V>>::Error: std::fmt::Display,
        <V as TryFrom<H>>::Error: std::fmt::Display,
    {
        self.spokes.push(Spoke {
            api_version,
            to_hub: Arc::new(|obj| typed_conversion::<V, H>(obj)),
            from_hub: Arc::new(|obj| typed_conversion::<H, V>(obj)),
        });
    }

    fn spoke(&self, api_version: &str) -> Result<&Spoke, String> {
        self.spokes
            .iter()
            .find(|s| s.api_version == api_version)
            .ok_or_else(|| format!("{api_version} is not a version of this kind"))
    }
}

impl Convert for Hub {
    fn convert(&self, obj: Value, api_version: &str) -> Result<Value, String> {
        let from = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
        if from == api_version {
            return Ok(obj);
        }
        let hub = if from == self.api_version { obj } else { (self.spoke(&from)?.to_hub)(obj)? };
        if api_version == self.api_version {
            return Ok(hub);
        }
        (self.spoke(api_version)?.from_hub)(hub)
    }
}

/// Converts `obj`, an `S`, to a `T` with the kind's own conversion. What the
/// conversion left as it was, at the same place (metadata, status, fields
/// both versions share), is kept as the client wrote it, whatever the types
/// would write instead; a number a type made a float is written as Go
/// writes one, `1` for `1.0`, as a conversion webhook written in Go would.
fn typed_conversion<S, T>(mut obj: Value) -> Result<Value, String>
where
    S: DeserializeOwned,
    T: Serialize + TryFrom<S>,
    <T as TryFrom<S>>::Error: std::fmt::Display,
{
    // managedFields are the server's, never a conversion's (kube restores
    // them after a conversion webhook), and may be most of a large object:
    // they go around the typed conversion.
    let managed_fields = obj.get_mut("metadata").and_then(Value::as_object_mut).and_then(|m| m.remove("managedFields"));
    // An integer field may hold an integral float (`1.0`, `-0`), which Go
    // reads as the integer and serde does not: read again with Go's numbers.
    let source = S::deserialize(&obj)
        .or_else(|_| {
            let mut go = obj.clone();
            go_numbers(&mut go);
            S::deserialize(&go)
        })
        .map_err(|e| format!("the object does not read as its version: {e}"))?;
    let target = T::try_from(source).map_err(|e| e.to_string())?;
    let mut out = serde_json::to_value(&target).map_err(|e| e.to_string())?;
    restore(&mut out, &obj);
    if let (Some(managed_fields), Some(meta)) = (managed_fields, out.get_mut("metadata").and_then(Value::as_object_mut))
    {
        meta.insert("managedFields".into(), managed_fields);
    }
    Ok(out)
}

/// Puts back into `out` (the converted object) the client's own `orig`
/// wherever `out` holds the same value at the same place, as the types
/// wrote it (a number of the same value, a time of the same instant);
/// elsewhere writes integral floats as integers.
fn restore(out: &mut Value, orig: &Value) {
    match (out, orig) {
        (Value::Object(fields), Value::Object(origs)) => {
            for (key, value) in fields.iter_mut() {
                match origs.get(key) {
                    Some(orig) => restore(value, orig),
                    None => go_numbers(value),
                }
            }
        }
        (Value::Array(items), Value::Array(origs)) if items.len() == origs.len() => {
            for (item, orig) in items.iter_mut().zip(origs) {
                restore(item, orig);
            }
        }
        (out @ Value::Number(_), Value::Number(o)) if out.as_f64() == o.as_f64() => *out = orig.clone(),
        (out @ Value::String(_), Value::String(o)) if out.as_str().is_some_and(|s| same_instant(s, o)) => {
            *out = orig.clone()
        }
        (other, _) => go_numbers(other),
    }
}

/// Whether two different strings are times of the same instant (RFC 3339),
/// as a type may write a time otherwise than the client did.
fn same_instant(a: &str, b: &str) -> bool {
    let looks_like_time = |s: &str| s.len() >= 20 && s.as_bytes().get(10) == Some(&b'T');
    a != b
        && looks_like_time(a)
        && looks_like_time(b)
        && matches!(
            (chrono::DateTime::parse_from_rfc3339(a), chrono::DateTime::parse_from_rfc3339(b)),
            (Ok(a), Ok(b)) if a == b
        )
}

/// Integral floats as integers, as Go's encoding/json writes a float64.
fn go_numbers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0) {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(go_numbers),
        Value::Object(fields) => fields.values_mut().for_each(go_numbers),
        _ => {}
    }
}

/// What a [`Convert`] is handed around as.
pub(crate) type Converter = Arc<dyn Convert>;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn what_a_conversion_left_alone_is_kept_as_written_and_floats_read_as_go_writes_them() {
        // v1's `size` is v2's `width`; the rest is the same in both.
        let orig = json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00+00:00"},
            "spec": {"size": 3, "tags": ["a", "b"], "limit": 2.0, "unit": "kg"}, "status": {"at": "2026-01-01T00:00:00+00:00"}});
        let mut out = json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"width": 3.0, "tags": ["a", "b"], "ratio": 0.5, "limit": 2.0, "unit": "g"},
            "status": {"at": "2026-01-01T00:00:00Z"}});
        restore(&mut out, &orig);
        assert_eq!(
            out,
            json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00+00:00"},
                "spec": {"width": 3, "tags": ["a", "b"], "ratio": 0.5, "limit": 2.0, "unit": "g"},
                "status": {"at": "2026-01-01T00:00:00+00:00"}})
        );
        // An integral float reads as an integer field's value.
        let old = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "generation": -0.0}});
        let seen =
            typed_conversion::<k8s_openapi::api::core::v1::ConfigMap, k8s_openapi::api::core::v1::ConfigMap>(old);
        assert_eq!(seen.unwrap()["metadata"]["generation"], json!(-0.0));
        // A value the conversion changed is the conversion's.
        let mut changed = json!({"w": 2000.0, "at": "2026-01-02T00:00:00Z"});
        restore(&mut changed, &json!({"w": 2, "at": "2026-01-01T00:00:00Z"}));
        assert_eq!(changed, json!({"w": 2000, "at": "2026-01-02T00:00:00Z"}));
    }
}
