//! Herd: a namespaced group of llamas grazing together, kept at a size. Its
//! size is the scale subresource's: `kubectl scale herd/<name> --replicas=N`
//! and a HorizontalPodAutoscaler change `spec.replicas` through
//! `herds/<name>/scale`, and whoever tends the herd reports its head count
//! and the selector of its llamas in the status. Served in `v1beta1` only.
//! The Rust type is what kube-rs clients use (`Api<Herd>`, `Api::get_scale`)
//! and, through the CustomResourceDefinition kube derives from it, how the
//! server describes the kind.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use aggregated_apiserver::CustomResourceKind;

/// How large the herd should be, and where it grazes.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[allow(clippy::duplicated_attributes)]
#[kube(
    group = "farm.example.com",
    version = "v1beta1",
    kind = "Herd",
    plural = "herds",
    namespaced,
    status = "HerdStatus",
    shortname = "hd",
    category = "farm",
    doc = "A herd of the farm's llamas.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    )
)]
#[kube(printcolumn(
    name = "Desired",
    type_ = "integer",
    description = "How many llamas the herd should have",
    json_path = ".spec.replicas"
))]
#[kube(printcolumn(
    name = "Current",
    type_ = "integer",
    description = "How many llamas the herd has",
    json_path = ".status.replicas"
))]
#[kube(printcolumn(
    name = "Pasture",
    type_ = "string",
    description = "Where the herd grazes",
    json_path = ".spec.pasture"
))]
#[kube(printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"))]
#[serde(rename_all = "camelCase")]
pub struct HerdSpec {
    /// How many llamas the herd should have; what the scale subresource reads and writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Where the herd grazes: a DNS label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 63, "pattern" = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub pasture: Option<String>,
}

/// What whoever tends the herd last observed of it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HerdStatus {
    /// How many llamas the herd has.
    #[serde(default)]
    pub replicas: i32,
    /// The label selector of the herd's llamas, in its string form
    /// (`herd=north`): what an autoscaler reads from the Scale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}

/// The kind farm-apiserver serves: Herd's derived CustomResourceDefinition,
/// its scale subresource included.
pub fn kind() -> aggregated_apiserver::Result<CustomResourceKind> {
    CustomResourceKind::of::<Herd>()
}

#[cfg(test)]
mod tests {
    use aggregated_apiserver::{Kind, ScalePaths};

    use super::*;

    #[test]
    fn the_derived_definition_gives_the_herd_a_scale_subresource() {
        let kind = kind().unwrap();
        assert_eq!(kind.names().plural, "herds");
        assert!(kind.has_status_subresource());
        assert_eq!(
            kind.scale(),
            Some(&ScalePaths::new(".spec.replicas", ".status.replicas").with_label_selector(".status.selector"))
        );
    }
}
