//! A kind described by a CustomResourceDefinition: the description kube's
//! `#[derive(CustomResource)]` writes for a Rust type ([`CustomResourceKind::of`]),
//! or any CRD read from a file. Names, scope, schema (its CEL rules
//! included), printer columns, selectable fields and the status and scale
//! subresources come from the definition, and are served as kube-apiserver serves the
//! CRD; hooks that take the typed object add what a schema cannot say.

use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use kube::core::{CustomResourceExt, Resource};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::apimachinery::field_error::FieldError;
use crate::apimachinery::jsonpath::JsonPath;
use crate::apimachinery::patch::apply_changes;
use crate::apimachinery::resource::Names;
use crate::apimachinery::version::compare_kube_aware;
use crate::error::{Error, Result};
use crate::registry::conversion::Hub;
use crate::registry::kind::{Cell, Column, Kind, OtherVersions, ScalePaths};
use crate::registry::subresource::Subresource;

type Check = dyn Fn(&Value) -> Vec<FieldError> + Send + Sync;
type PrepareCreate = dyn Fn(&mut Value) + Send + Sync;
type PrepareUpdate = dyn Fn(&mut Value, &Value) + Send + Sync;

/// A kind served as kube-apiserver serves its CustomResourceDefinition.
///
/// ```
/// use aggregated_apiserver::CustomResourceKind;
/// use kube::CustomResource;
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// /// What to say, and how often.
/// #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
/// #[kube(group = "example.com", version = "v1", kind = "Greeting", namespaced)]
/// #[kube(printcolumn(name = "Message", type_ = "string", json_path = ".spec.message"))]
/// pub struct GreetingSpec {
///     message: String,
///     times: Option<i64>,
/// }
///
/// let kind = CustomResourceKind::of::<Greeting>()?.validate(|greeting: &Greeting| match greeting.spec.times {
///     Some(times) if times < 1 => {
///         vec![aggregated_apiserver::FieldError::invalid("spec.times", &times.into(), "must be at least 1")]
///     }
///     _ => Vec::new(),
/// });
/// # use aggregated_apiserver::Kind;
/// assert_eq!(kind.names().plural, "greetings");
/// assert_eq!(kind.columns()[0].name, "Message");
/// # Ok::<(), aggregated_apiserver::Error>(())
/// ```
#[derive(Clone)]
pub struct CustomResourceKind {
    names: &'static Names,
    /// Whether the version is deprecated, and its definition's warning if it has one.
    deprecated: bool,
    deprecation_warning: Option<String>,
    namespaced: bool,
    status: bool,
    scale: Option<ScalePaths>,
    schema: Value,
    columns: &'static [Column],
    selectable_fields: &'static [&'static str],
    check: Option<Arc<Check>>,
    prepare_create: Option<Arc<PrepareCreate>>,
    prepare_update: Option<Arc<PrepareUpdate>>,
    /// The other served versions, and the conversions through this one.
    others: Vec<CustomResourceKind>,
    /// Subresources served by functions of the application's.
    subresources: Vec<Subresource>,
    hub: Option<Hub>,
}

/// Keeps `text` for the rest of the process: a kind is described once and
/// served until the process ends, and the [`Kind`] trait lends its names,
/// columns and fields for that long.
fn keep(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

/// Keeps `items` for the rest of the process, as [`keep`].
fn keep_all<T>(items: Vec<T>) -> &'static [T] {
    Box::leak(items.into_boxed_slice())
}

impl CustomResourceKind {
    /// The kind of a Rust type that derives kube's `CustomResource`, from the
    /// definition the derive writes (`K::crd()`).
    pub fn of<K: CustomResourceExt>() -> Result<Self> {
        Self::from_definition(&K::crd())
    }

    /// The kind a CustomResourceDefinition of one version describes. Fails,
    /// saying why, on what kube-apiserver would refuse of it or this server
    /// does not serve (several versions, whose conversions a definition does
    /// not hold: see [`Self::with_version`]; a printer column's JSONPath it
    /// does not evaluate).
    pub fn from_definition(crd: &CustomResourceDefinition) -> Result<Self> {
        let name = crd.metadata.name.clone().unwrap_or_else(|| crd.spec.names.plural.clone());
        describe(crd).map_err(|why| Error::msg(format!("CustomResourceDefinition {name}: {why}")))
    }

    /// Serves `version`, the kind of `V`, too: objects are stored in this
    /// kind's version, whose Rust type is `H`, and converted to and from `V`
    /// with the conversions between the two types (`TryFrom` each way; a
    /// failed conversion is answered 500 with its reason, and nothing is
    /// written). `V` derives `CustomResource` for the same group, kind and
    /// plural; its names, schema, columns, selectable fields and hooks are
    /// its own (`CustomResourceKind::of::<V>()`, and what it adds).
    ///
    /// The conversions must lose nothing: an object read in one version and
    /// written back in another is the same object (a field one version does
    /// not have travels in an annotation, as kube's own types do).
    pub fn with_version<H, V>(mut self, version: CustomResourceKind) -> Result<Self>
    where
        H: Resource<DynamicType = ()> + DeserializeOwned + Serialize + TryFrom<V> + 'static,
        V: CustomResourceExt + Resource<DynamicType = ()> + DeserializeOwned + Serialize + TryFrom<H> + 'static,
        <H as TryFrom<V>>::Error: std::fmt::Display,
        <V as TryFrom<H>>::Error: std::fmt::Display,
    {
        let stored = self.names.api_version();
        if H::api_version(&()) != stored {
            return Err(Error::msg(format!(
                "{} is not the type of {stored} {}: the conversions go through the stored version's type",
                std::any::type_name::<H>(),
                self.names.kind
            )));
        }
        let (ours, theirs) = (self.names, version.names);
        if V::api_version(&()) != theirs.api_version() {
            return Err(Error::msg(format!(
                "{} is not the type of {} {}",
                std::any::type_name::<V>(),
                theirs.api_version(),
                theirs.kind
            )));
        }
        if (theirs.group, theirs.kind, theirs.plural) != (ours.group, ours.kind, ours.plural)
            || version.namespaced != self.namespaced
        {
            return Err(Error::msg(format!(
                "{} {} is not a version of {stored} {}: the group, kind, plural and scope must be the same",
                theirs.api_version(),
                theirs.kind,
                ours.kind
            )));
        }
        self.hub.get_or_insert_with(|| Hub::new(stored)).add::<H, V>(theirs.api_version());
        self.others.push(version);
        Ok(self)
    }

    /// Field paths usable in field selectors besides the definition's
    /// `selectableFields` (e.g. `spec.weight`): a CRD may select only on
    /// string, integer and boolean fields, this server on any scalar.
    pub fn also_selectable(mut self, paths: &[&str]) -> Self {
        let mut fields = self.selectable_fields.to_vec();
        fields.extend(paths.iter().map(|p| keep(p.trim_start_matches('.').to_string())));
        self.selectable_fields = keep_all(fields);
        self
    }

    /// Serves `subresource` too (a stream such as a log), with the function it holds.
    pub fn with_subresource(mut self, subresource: Subresource) -> Self {
        self.subresources.push(subresource);
        self
    }

    /// Checks beyond the schema, on the typed object: what they return is
    /// answered as kube answers field errors (422 Invalid). An object that
    /// passed the schema but does not read as `K` is refused with the reason.
    pub fn validate<K: DeserializeOwned>(
        mut self,
        check: impl Fn(&K) -> Vec<FieldError> + Send + Sync + 'static,
    ) -> Self {
        self.check = Some(Arc::new(move |obj: &Value| match K::deserialize(obj) {
            Ok(typed) => check(&typed),
            Err(e) => vec![FieldError::invalid("", &Value::Null, format!("the object does not read as its type: {e}"))],
        }));
        self
    }

    /// Changes to a new object before it is validated (defaults, fields a
    /// client may not set), on the typed object; an object that does not read
    /// as `K` is left as it is, for validation to refuse.
    pub fn prepare_for_create<K: DeserializeOwned + Serialize>(
        mut self,
        prepare: impl Fn(&mut K) + Send + Sync + 'static,
    ) -> Self {
        self.prepare_create = Some(Arc::new(move |obj: &mut Value| {
            if let Ok(mut typed) = K::deserialize(&*obj) {
                let before = serde_json::to_value(&typed);
                prepare(&mut typed);
                if let (Ok(before), Ok(after)) = (before, serde_json::to_value(&typed)) {
                    apply_changes(obj, &before, &after);
                }
            }
        }));
        self
    }

    /// Changes to an updated object, given the stored one, before it is
    /// validated; on the typed objects, as [`Self::prepare_for_create`].
    pub fn prepare_for_update<K: DeserializeOwned + Serialize>(
        mut self,
        prepare: impl Fn(&mut K, &K) + Send + Sync + 'static,
    ) -> Self {
        self.prepare_update = Some(Arc::new(move |new: &mut Value, old: &Value| {
            if let (Ok(mut typed), Ok(old)) = (K::deserialize(&*new), K::deserialize(old)) {
                let before = serde_json::to_value(&typed);
                prepare(&mut typed, &old);
                if let (Ok(before), Ok(after)) = (before, serde_json::to_value(&typed)) {
                    apply_changes(new, &before, &after);
                }
            }
        }));
        self
    }
}

/// kube's warning for a deprecated version without a warning of its own
/// (apiextensions-apiserver's `defaultDeprecationWarning`): it names the
/// highest served version above it that is not deprecated, if any.
fn default_deprecation_warning(deprecated: &Names, versions: &[&CustomResourceKind]) -> String {
    let warning = format!("{}/{} {} is deprecated", deprecated.group, deprecated.version, deprecated.kind);
    let better = versions
        .iter()
        .filter(|v| !v.deprecated && compare_kube_aware(deprecated.version, v.names.version).is_lt())
        .map(|v| v.names.version)
        .max_by(|a, b| compare_kube_aware(a, b));
    match better {
        Some(version) => format!("{warning}; use {}/{version} {}", deprecated.group, deprecated.kind),
        None => warning,
    }
}

fn describe(crd: &CustomResourceDefinition) -> std::result::Result<CustomResourceKind, String> {
    let spec = &crd.spec;
    let version = match spec.versions.as_slice() {
        [version] => version,
        [] => return Err("it has no version".into()),
        _ => {
            return Err("it has several versions: serve each from its Rust type, with the conversions between \
                        them (CustomResourceKind::with_version)"
                .into())
        }
    };
    let namespaced = match spec.scope.as_str() {
        "Namespaced" => true,
        "Cluster" => false,
        other => return Err(format!("scope {other:?} is neither Namespaced nor Cluster")),
    };
    let names = &spec.names;
    let list = |v: &Option<Vec<String>>| keep_all(v.iter().flatten().map(|s| keep(s.clone())).collect());
    let names = Names {
        group: keep(spec.group.clone()),
        version: keep(version.name.clone()),
        kind: keep(names.kind.clone()),
        list_kind: keep(names.list_kind.clone().unwrap_or_else(|| format!("{}List", names.kind))),
        plural: keep(names.plural.clone()),
        singular: keep(names.singular.clone().unwrap_or_else(|| names.kind.to_lowercase())),
        short_names: list(&names.short_names),
        categories: list(&names.categories),
    };
    let schema = version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .ok_or("its version has no openAPIV3Schema")?;
    let schema = serde_json::to_value(schema).map_err(|e| format!("its schema does not encode: {e}"))?;
    Ok(CustomResourceKind {
        names: Box::leak(Box::new(names)),
        deprecated: version.deprecated.unwrap_or(false),
        deprecation_warning: version.deprecation_warning.clone(),
        namespaced,
        status: version.subresources.as_ref().is_some_and(|s| s.status.is_some()),
        scale: version.subresources.as_ref().and_then(|s| s.scale.as_ref()).map(|scale| ScalePaths {
            spec_replicas: scale.spec_replicas_path.clone(),
            status_replicas: scale.status_replicas_path.clone(),
            label_selector: scale.label_selector_path.clone(),
        }),
        schema,
        columns: keep_all(columns(version)?),
        selectable_fields: keep_all(
            version
                .selectable_fields
                .iter()
                .flatten()
                .map(|f| keep(f.json_path.trim_start_matches('.').to_string()))
                .collect(),
        ),
        check: None,
        prepare_create: None,
        prepare_update: None,
        others: Vec::new(),
        subresources: Vec::new(),
        hub: None,
    })
}

/// The version's printer columns, or Age alone when it states none (as
/// kube-apiserver serves such a CRD).
fn columns(version: &CustomResourceDefinitionVersion) -> std::result::Result<Vec<Column>, String> {
    let Some(stated) = version.additional_printer_columns.as_ref().filter(|c| !c.is_empty()) else {
        return Ok(vec![Column::AGE]);
    };
    stated.iter().map(column).collect()
}

fn column(c: &CustomResourceColumnDefinition) -> std::result::Result<Column, String> {
    JsonPath::parse(&c.json_path).map_err(|why| format!("printer column {:?}: {why}", c.name))?;
    let description = match c.description.as_deref() {
        Some(d) if !d.is_empty() => d.to_string(),
        _ => format!("Custom resource definition column (in JSONPath format): {}", c.json_path),
    };
    Ok(Column {
        name: keep(c.name.clone()),
        type_: keep(c.type_.clone()),
        format: keep(c.format.clone().unwrap_or_default()),
        description: keep(description),
        priority: c.priority.unwrap_or(0),
        cell: Cell::Path(keep(c.json_path.clone())),
    })
}

impl Kind for CustomResourceKind {
    fn names(&self) -> &'static Names {
        self.names
    }

    fn namespaced(&self) -> bool {
        self.namespaced
    }

    fn has_status_subresource(&self) -> bool {
        self.status
    }

    fn scale(&self) -> Option<&ScalePaths> {
        self.scale.as_ref()
    }

    fn subresources(&self) -> &[Subresource] {
        &self.subresources
    }

    fn schema(&self) -> Value {
        self.schema.clone()
    }

    fn columns(&self) -> &'static [Column] {
        self.columns
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        self.selectable_fields
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(prepare) = &self.prepare_create {
            prepare(obj);
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if let Some(prepare) = &self.prepare_update {
            prepare(new, old);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        self.check.as_ref().map(|check| check(obj)).unwrap_or_default()
    }

    fn deprecation_warning(&self) -> Option<&str> {
        self.deprecation_warning.as_deref().filter(|_| self.deprecated)
    }

    fn other_versions(&self) -> Option<OtherVersions> {
        let hub = self.hub.clone()?;
        let all: Vec<&CustomResourceKind> = std::iter::once(self).chain(&self.others).collect();
        let kinds = self
            .others
            .iter()
            .map(|version| {
                let mut version = version.clone();
                if version.deprecated && version.deprecation_warning.is_none() {
                    version.deprecation_warning = Some(default_deprecation_warning(version.names, &all));
                }
                Arc::new(version) as Arc<dyn Kind>
            })
            .collect();
        Some(OtherVersions { kinds, convert: Arc::new(hub) })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_definition_this_server_cannot_serve_is_refused_with_the_reason() {
        let mut crd = json!({
            "metadata": {"name": "things.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "things", "kind": "Thing"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                    "additionalPrinterColumns": [{"name": "Deep", "type": "string", "jsonPath": "..spec"}]}]}
        });
        let read = |crd: &Value| serde_json::from_value::<CustomResourceDefinition>(crd.clone()).unwrap();
        let refused = |crd: &Value| CustomResourceKind::from_definition(&read(crd)).err().unwrap().to_string();
        assert!(refused(&crd).starts_with("CustomResourceDefinition things.example.com: printer column \"Deep\""));
        crd["spec"]["versions"][0]["additionalPrinterColumns"] = json!([]);
        crd["spec"]["scope"] = json!("Galaxy");
        assert!(refused(&crd).contains("scope \"Galaxy\" is neither Namespaced nor Cluster"));
        crd["spec"]["scope"] = json!("Cluster");
        let kind = CustomResourceKind::from_definition(&read(&crd)).unwrap();
        // Defaults as kube-apiserver's: singular and list kind, Age alone.
        assert_eq!((kind.names().singular, kind.names().list_kind, kind.namespaced()), ("thing", "ThingList", false));
        assert_eq!(kind.columns().iter().map(|c| c.name).collect::<Vec<_>>(), ["Age"]);
    }
}
