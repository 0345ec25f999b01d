//! How the objects of a kind served in several versions convert between
//! them: through the storage version, the hub, as k8s.io/sample-apiserver
//! converts through its internal type and a CRD through its conversion
//! webhook, but in Rust, in the server, with the kinds' own types.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::apimachinery::patch::apply_changes;

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

/// Converts `obj`, an `S`, to a `T` with the kind's own conversion. The
/// result's `metadata` is the object's own with what the conversion changed
/// of it (an annotation it moved, say): the rest is kept as the client wrote
/// it, whatever the types would write instead.
fn typed_conversion<S, T>(obj: Value) -> Result<Value, String>
where
    S: DeserializeOwned + Serialize,
    T: Serialize + TryFrom<S>,
    <T as TryFrom<S>>::Error: std::fmt::Display,
{
    let source = S::deserialize(&obj).map_err(|e| format!("the object does not read as its version: {e}"))?;
    let before = serde_json::to_value(&source).map_err(|e| e.to_string())?;
    let target = T::try_from(source).map_err(|e| e.to_string())?;
    let mut out = serde_json::to_value(&target).map_err(|e| e.to_string())?;
    if let (Some(mut metadata), Some(before), Some(after)) =
        (obj.get("metadata").cloned(), before.get("metadata"), out.get("metadata"))
    {
        apply_changes(&mut metadata, before, after);
        out["metadata"] = metadata;
    }
    Ok(out)
}

/// What a [`Convert`] is handed around as.
pub(crate) type Converter = Arc<dyn Convert>;
