//! OpenAPI documents built from the kinds' schemas: `/openapi/v2` (Swagger 2.0,
//! which the aggregator merges) and `/openapi/v3` with one document per
//! group-version (what `kubectl explain` reads). Operations carry
//! `x-kubernetes-group-version-kind` and the write parameters, because kubectl
//! decides from the PATCH parameters whether the server supports
//! `fieldValidation`.
//!
//! Each document is served in JSON and in protobuf ([`gnostic`]), both
//! encoded once at startup; [`serve`] answers a request with one of them as
//! kube-openapi does ([`accept`] picks which).

mod accept;
mod gnostic;
mod serve;
mod v2_schema;
mod wire;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use schemars::generate::SchemaSettings;
use schemars::transform::{RemoveRefSiblings, Transform as _};
use schemars::Schema;
use serde_json::{json, Map, Value};

use self::gnostic::Spec;
use self::serve::Encoded;
use crate::apimachinery::resource::{Names, Verb, SCALE_GROUP, SCALE_KIND, SCALE_VERSION};
use crate::endpoints::static_doc::StaticDoc;
use crate::registry::Registry;

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";

/// The schema name kube-apiserver uses: reversed group, version, kind.
fn schema_name(n: &Names, kind: &str) -> String {
    let group: Vec<&str> = n.group.split('.').rev().collect();
    format!("{}.{}.{kind}", group.join("."), n.version)
}

fn meta_ref(v3: bool, name: &str) -> Value {
    json!({ "$ref": format!("{}{META}.{name}", if v3 { "#/components/schemas/" } else { "#/definitions/" }) })
}

/// The schema a scale subresource's operations name.
const SCALE_SCHEMA: &str = "io.k8s.api.autoscaling.v1.Scale";

fn kind_ref(v3: bool, name: &str) -> Value {
    json!({ "$ref": format!("{}{name}", if v3 { "#/components/schemas/" } else { "#/definitions/" }) })
}

/// The metav1 schemas the kinds' operations and `metadata` refer to, as
/// kube-apiserver publishes them (a CRD's document carries the same ones):
/// generated from k8s-openapi's types, which hold kube's descriptions (what
/// `kubectl explain widget.metadata` shows), types, formats and `required`, with
/// the few things its generator leaves out put back by [`kube_additions`].
fn meta_schemas(v3: bool, scale: bool) -> Map<String, Value> {
    let mut settings = SchemaSettings::draft07();
    settings.definitions_path = if v3 { "/components/schemas" } else { "/definitions" }.into();
    settings.meta_schema = None;
    // kube's Swagger 2.0 keeps a description beside a `$ref`; OpenAPI 3 has
    // it beside an `allOf` of the `$ref` instead, done below once the
    // additions (defaults beside item references) are in.
    settings.transforms = Vec::new();
    let mut generator = settings.into_generator();
    // The roots: what a kind's schema and operations name. The rest (Time,
    // OwnerReference, ManagedFieldsEntry, FieldsV1, StatusDetails, StatusCause,
    // Preconditions) comes in through their references.
    generator.subschema_for::<metav1::ObjectMeta>();
    generator.subschema_for::<metav1::ListMeta>();
    generator.subschema_for::<metav1::Status>();
    generator.subschema_for::<metav1::DeleteOptions>();
    generator.subschema_for::<metav1::Patch>();
    if scale {
        // What a scale subresource reads and writes.
        generator.subschema_for::<k8s_openapi::api::autoscaling::v1::Scale>();
    }
    let mut schemas = generator.take_definitions(false);
    for (name, path, key, value, only_v3) in kube_additions() {
        if only_v3 && !v3 {
            continue;
        }
        let Some(Value::Object(at)) = schemas.get_mut(&format!("{META}.{name}")).and_then(|s| s.pointer_mut(path))
        else {
            // Only if k8s-openapi's schemas changed shape (a unit test checks).
            tracing::warn!(schema = name, path, "OpenAPI: no such place in the generated schema");
            continue;
        };
        at.insert(key.into(), value);
    }
    // k8s-openapi's Status requires `metadata` (a struct field, not an Option,
    // in Rust); kube's Status schema requires nothing.
    if let Some(Value::Object(status)) = schemas.get_mut(&format!("{META}.Status")) {
        status.remove("required");
    }
    if v3 {
        for schema in schemas.values_mut() {
            if let Value::Object(object) = std::mem::take(schema) {
                let mut wrapped = Schema::from(object);
                RemoveRefSiblings::default().transform(&mut wrapped);
                *schema = wrapped.to_value();
            }
        }
    }
    schemas
}

/// What kube-apiserver's metav1 schemas carry and k8s-openapi's leave out:
/// (schema, JSON pointer in it, key, JSON value, OpenAPI 3 only).
///
/// These stay written by hand because k8s-openapi's generator keeps neither
/// kube's `x-kubernetes-*` extensions (list types and map keys, patch
/// strategies, the atomic OwnerReference, Status's group-version-kind, which
/// `kubectl explain` finds schemas by) nor the defaults kube's OpenAPI 3 puts
/// on map values and list items. With them the documents match what
/// kube-apiserver publishes, so the aggregator, merging this server's
/// `/openapi/v2` into its own, finds the same definitions instead of keeping
/// ours apart as `..._v2`. DeleteOptions alone differs: kube lists one
/// group-version-kind per group it serves, not this server's list, and the
/// aggregator compares definitions regardless of their group-version-kinds.
fn kube_additions() -> Vec<(&'static str, &'static str, &'static str, Value, bool)> {
    vec![
        ("ObjectMeta", "/properties/finalizers", "x-kubernetes-list-type", json!("set"), false),
        ("ObjectMeta", "/properties/finalizers", "x-kubernetes-patch-strategy", json!("merge"), false),
        ("ObjectMeta", "/properties/managedFields", "x-kubernetes-list-type", json!("atomic"), false),
        ("ObjectMeta", "/properties/ownerReferences", "x-kubernetes-list-type", json!("map"), false),
        ("ObjectMeta", "/properties/ownerReferences", "x-kubernetes-list-map-keys", json!(["uid"]), false),
        ("ObjectMeta", "/properties/ownerReferences", "x-kubernetes-patch-strategy", json!("merge"), false),
        ("ObjectMeta", "/properties/ownerReferences", "x-kubernetes-patch-merge-key", json!("uid"), false),
        ("OwnerReference", "", "x-kubernetes-map-type", json!("atomic"), false),
        (
            "Status",
            "",
            "x-kubernetes-group-version-kind",
            json!([{ "group": "", "kind": "Status", "version": "v1" }]),
            false,
        ),
        ("Status", "/properties/details", "x-kubernetes-list-type", json!("atomic"), false),
        ("StatusDetails", "/properties/causes", "x-kubernetes-list-type", json!("atomic"), false),
        ("DeleteOptions", "/properties/dryRun", "x-kubernetes-list-type", json!("atomic"), false),
        ("ObjectMeta", "/properties/annotations/additionalProperties", "default", json!(""), true),
        ("ObjectMeta", "/properties/labels/additionalProperties", "default", json!(""), true),
        ("ObjectMeta", "/properties/finalizers/items", "default", json!(""), true),
        ("ObjectMeta", "/properties/managedFields/items", "default", json!({}), true),
        ("ObjectMeta", "/properties/ownerReferences/items", "default", json!({}), true),
        ("OwnerReference", "/properties/apiVersion", "default", json!(""), true),
        ("OwnerReference", "/properties/kind", "default", json!(""), true),
        ("OwnerReference", "/properties/name", "default", json!(""), true),
        ("OwnerReference", "/properties/uid", "default", json!(""), true),
        ("Status", "/properties/metadata", "default", json!({}), true),
        ("StatusDetails", "/properties/causes/items", "default", json!({}), true),
        ("DeleteOptions", "/properties/dryRun/items", "default", json!(""), true),
    ]
}

/// The kind's schema with `metadata` pointing at ObjectMeta and the GVK extension.
fn object_schema(r: &Registry, v3: bool) -> Value {
    let n = r.kind.names();
    let mut schema = r.schema().clone();
    if !v3 {
        v2_schema::to_v2(&mut schema);
    }
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        let meta = if v3 {
            json!({ "allOf": [meta_ref(true, "ObjectMeta")], "default": {}, "description": "Standard object's metadata." })
        } else {
            let mut m = meta_ref(false, "ObjectMeta");
            m["description"] = json!("Standard object's metadata.");
            m
        };
        props.insert("metadata".into(), meta);
    }
    schema["x-kubernetes-group-version-kind"] = json!([{ "group": n.group, "kind": n.kind, "version": n.version }]);
    schema
}

fn list_schema(r: &Registry, v3: bool) -> Value {
    let n = r.kind.names();
    json!({
        "type": "object",
        "description": format!("{} is a list of {}", n.list_kind, n.kind),
        "required": ["items"],
        "properties": {
            "apiVersion": { "type": "string" },
            "kind": { "type": "string" },
            "metadata": meta_ref(v3, "ListMeta"),
            "items": { "type": "array", "items": kind_ref(v3, &schema_name(n, n.kind)) }
        },
        "x-kubernetes-group-version-kind": [{ "group": n.group, "kind": n.list_kind, "version": n.version }]
    })
}

/// A query parameter in either spec version.
fn param(v3: bool, name: &str, kind: &str, description: &str) -> Value {
    let schema = json!({ "type": kind, "uniqueItems": true });
    if v3 {
        json!({ "name": name, "in": "query", "description": description, "schema": schema })
    } else {
        json!({ "name": name, "in": "query", "description": description, "type": kind, "uniqueItems": true })
    }
}

fn path_param(v3: bool, name: &str, description: &str) -> Value {
    if v3 {
        json!({ "name": name, "in": "path", "required": true, "description": description, "schema": { "type": "string", "uniqueItems": true } })
    } else {
        json!({ "name": name, "in": "path", "required": true, "description": description, "type": "string", "uniqueItems": true })
    }
}

fn list_params(v3: bool) -> Vec<Value> {
    vec![
        param(v3, "allowWatchBookmarks", "boolean", "allowWatchBookmarks requests watch events with type \"BOOKMARK\"."),
        param(v3, "continue", "string", "The continue option should be set when retrieving more results from the server."),
        param(v3, "fieldSelector", "string", "A selector to restrict the list of returned objects by their fields. Defaults to everything."),
        param(v3, "labelSelector", "string", "A selector to restrict the list of returned objects by their labels. Defaults to everything."),
        param(v3, "limit", "integer", "limit is a maximum number of responses to return for a list call."),
        param(v3, "resourceVersion", "string", "resourceVersion sets a constraint on what resource versions a request may be served from."),
        param(v3, "resourceVersionMatch", "string", "resourceVersionMatch determines how resourceVersion is applied to list calls."),
        param(v3, "sendInitialEvents", "boolean", "`sendInitialEvents=true` may be set together with `watch=true`."),
        param(v3, "timeoutSeconds", "integer", "Timeout for the list/watch call."),
        param(v3, "watch", "boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications."),
    ]
}

fn write_params(v3: bool) -> Vec<Value> {
    vec![
        param(v3, "dryRun", "string", "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed"),
        param(v3, "fieldManager", "string", "fieldManager is a name associated with the actor or entity that is making these changes."),
        param(v3, "fieldValidation", "string", "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict"),
    ]
}

/// Writes the operations of one kind in one spec version.
struct OpWriter<'a> {
    v3: bool,
    r: &'a Registry,
}

impl OpWriter<'_> {
    fn operation(
        &self,
        action: &str,
        op_id: &str,
        mut params: Vec<Value>,
        body: Option<Value>,
        response: Value,
        patch: bool,
    ) -> Value {
        let (v3, n) = (self.v3, self.r.kind.names());
        let content = |schema: &Value| json!({ "application/json": { "schema": schema } });
        let mut op = json!({
            "operationId": op_id,
            "tags": [format!("{}_{}", n.group.replace('.', "_"), n.version)],
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": { "group": n.group, "kind": n.kind, "version": n.version },
        });
        let responses = if v3 {
            json!({ "200": { "description": "OK", "content": content(&response) }, "401": { "description": "Unauthorized" } })
        } else {
            json!({ "200": { "description": "OK", "schema": response }, "401": { "description": "Unauthorized" } })
        };
        op["responses"] = responses;
        if let Some(body) = body {
            if v3 {
                let types: Vec<&str> = if patch {
                    vec!["application/json-patch+json", "application/merge-patch+json"]
                } else {
                    vec!["application/json"]
                };
                let mut c = Map::new();
                for t in types {
                    c.insert(t.into(), json!({ "schema": body }));
                }
                op["requestBody"] = json!({ "required": true, "content": c });
            } else {
                params.push(json!({ "name": "body", "in": "body", "required": true, "schema": body }));
                if patch {
                    op["consumes"] = json!(["application/json-patch+json", "application/merge-patch+json"]);
                }
            }
        }
        op["parameters"] = Value::Array(params);
        if !v3 {
            op["produces"] = json!(["application/json", "application/json;stream=watch"]);
            op["schemes"] = json!(["https"]);
        }
        op
    }
}

/// Adds the paths of one kind.
fn add_paths(paths: &mut Map<String, Value>, r: &Registry, v3: bool) {
    let w = OpWriter { v3, r };
    let n = r.kind.names();
    let obj = kind_ref(v3, &schema_name(n, n.kind));
    let list = kind_ref(v3, &schema_name(n, n.list_kind));
    let status = meta_ref(v3, "Status");
    let camel = |s: &str| {
        let mut c = s.chars();
        c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
    };
    let gv = format!("{}{}", n.group.split('.').map(camel).collect::<String>(), camel(n.version));
    let base = format!("/apis/{}/{}", n.group, n.version);
    let ns_prefix = if r.kind.namespaced() { "/namespaces/{namespace}" } else { "" };
    let scope = if r.kind.namespaced() { "Namespaced" } else { "" };
    let mut common = vec![param(v3, "pretty", "string", "If 'true', then the output is pretty printed.")];
    if r.kind.namespaced() {
        common.push(path_param(v3, "namespace", "object name and auth scope, such as for teams and projects"));
    }
    let has = |v: Verb| r.kind.supports(v);

    let mut collection = Map::new();
    if has(Verb::List) {
        collection.insert(
            "get".into(),
            w.operation("list", &format!("list{gv}{scope}{}", n.kind), list_params(v3), None, list.clone(), false),
        );
    }
    if has(Verb::Create) {
        collection.insert(
            "post".into(),
            w.operation(
                "post",
                &format!("create{gv}{scope}{}", n.kind),
                write_params(v3),
                Some(obj.clone()),
                obj.clone(),
                false,
            ),
        );
    }
    if has(Verb::DeleteCollection) {
        let mut p = list_params(v3);
        p.push(param(v3, "dryRun", "string", "When present, indicates that modifications should not be persisted."));
        p.push(param(v3, "propagationPolicy", "string", "Whether and how garbage collection will be performed."));
        collection.insert(
            "delete".into(),
            w.operation(
                "deletecollection",
                &format!("deletecollection{gv}{scope}{}", n.kind),
                p,
                Some(meta_ref(v3, "DeleteOptions")),
                status.clone(),
                false,
            ),
        );
    }
    collection.insert("parameters".into(), Value::Array(common.clone()));
    paths.insert(format!("{base}{ns_prefix}/{}", n.plural), Value::Object(collection));

    let mut named_common = common.clone();
    named_common.push(path_param(v3, "name", &format!("name of the {}", n.kind)));
    let mut item = Map::new();
    if has(Verb::Get) {
        item.insert(
            "get".into(),
            w.operation("get", &format!("read{gv}{scope}{}", n.kind), vec![], None, obj.clone(), false),
        );
    }
    if has(Verb::Update) {
        item.insert(
            "put".into(),
            w.operation(
                "put",
                &format!("replace{gv}{scope}{}", n.kind),
                write_params(v3),
                Some(obj.clone()),
                obj.clone(),
                false,
            ),
        );
    }
    if has(Verb::Patch) {
        item.insert(
            "patch".into(),
            w.operation(
                "patch",
                &format!("patch{gv}{scope}{}", n.kind),
                write_params(v3),
                Some(meta_ref(v3, "Patch")),
                obj.clone(),
                true,
            ),
        );
    }
    if has(Verb::Delete) {
        let p = vec![
            param(v3, "dryRun", "string", "When present, indicates that modifications should not be persisted."),
            param(v3, "propagationPolicy", "string", "Whether and how garbage collection will be performed."),
        ];
        item.insert(
            "delete".into(),
            w.operation(
                "delete",
                &format!("delete{gv}{scope}{}", n.kind),
                p,
                Some(meta_ref(v3, "DeleteOptions")),
                status.clone(),
                false,
            ),
        );
    }
    item.insert("parameters".into(), Value::Array(named_common.clone()));
    paths.insert(format!("{base}{ns_prefix}/{}/{{name}}", n.plural), Value::Object(item));

    if r.kind.has_status_subresource() {
        let mut st = Map::new();
        st.insert(
            "get".into(),
            w.operation("get", &format!("read{gv}{scope}{}Status", n.kind), vec![], None, obj.clone(), false),
        );
        if has(Verb::Update) {
            st.insert(
                "put".into(),
                w.operation(
                    "put",
                    &format!("replace{gv}{scope}{}Status", n.kind),
                    write_params(v3),
                    Some(obj.clone()),
                    obj.clone(),
                    false,
                ),
            );
        }
        if has(Verb::Patch) {
            st.insert(
                "patch".into(),
                w.operation(
                    "patch",
                    &format!("patch{gv}{scope}{}Status", n.kind),
                    write_params(v3),
                    Some(meta_ref(v3, "Patch")),
                    obj.clone(),
                    true,
                ),
            );
        }
        st.insert("parameters".into(), Value::Array(named_common.clone()));
        paths.insert(format!("{base}{ns_prefix}/{}/{{name}}/status", n.plural), Value::Object(st));
    }
    if r.kind.scale().is_some() {
        let scale = kind_ref(v3, SCALE_SCHEMA);
        let mut sc = Map::new();
        sc.insert(
            "get".into(),
            w.operation("get", &format!("read{gv}{scope}{}Scale", n.kind), vec![], None, scale.clone(), false),
        );
        sc.insert(
            "put".into(),
            w.operation(
                "put",
                &format!("replace{gv}{scope}{}Scale", n.kind),
                write_params(v3),
                Some(scale.clone()),
                scale.clone(),
                false,
            ),
        );
        sc.insert(
            "patch".into(),
            w.operation(
                "patch",
                &format!("patch{gv}{scope}{}Scale", n.kind),
                write_params(v3),
                Some(meta_ref(v3, "Patch")),
                scale,
                true,
            ),
        );
        for op in sc.values_mut() {
            op["x-kubernetes-group-version-kind"] =
                json!({ "group": SCALE_GROUP, "kind": SCALE_KIND, "version": SCALE_VERSION });
        }
        sc.insert("parameters".into(), Value::Array(named_common.clone()));
        paths.insert(format!("{base}{ns_prefix}/{}/{{name}}/scale", n.plural), Value::Object(sc));
    }
    for sub in r.kind.subresources() {
        // A stream of text, as kube documents `pods/log`.
        let mut capitalized = sub.name.to_string();
        if let Some(first) = capitalized.get_mut(..1) {
            first.make_ascii_uppercase();
        }
        let op_id = format!("read{gv}{scope}{}{capitalized}", n.kind);
        let mut st = Map::new();
        st.insert("get".into(), w.operation("get", &op_id, vec![], None, json!({ "type": "string" }), false));
        st.insert("parameters".into(), Value::Array(named_common.clone()));
        paths.insert(format!("{base}{ns_prefix}/{}/{{name}}/{}", n.plural, sub.name), Value::Object(st));
    }
    if r.kind.namespaced() && has(Verb::List) {
        let mut all = Map::new();
        all.insert(
            "get".into(),
            w.operation("list", &format!("list{gv}{}ForAllNamespaces", n.kind), list_params(v3), None, list, false),
        );
        all.insert(
            "parameters".into(),
            json!([param(v3, "pretty", "string", "If 'true', then the output is pretty printed.")]),
        );
        paths.insert(format!("{base}/{}", n.plural), Value::Object(all));
    }
}

fn schemas(regs: &[&Arc<Registry>], v3: bool) -> Map<String, Value> {
    let mut out = meta_schemas(v3, regs.iter().any(|r| r.kind.scale().is_some()));
    for r in regs {
        let n = r.kind.names();
        out.insert(schema_name(n, n.kind), object_schema(r, v3));
        out.insert(schema_name(n, n.list_kind), list_schema(r, v3));
    }
    out
}

pub struct OpenApi {
    v2: Encoded,
    v3_index: StaticDoc,
    v3: BTreeMap<String, Encoded>,
}

impl OpenApi {
    /// The documents of `registries`, titled with the server's name and version.
    pub fn new(registries: &[Arc<Registry>], server_name: &str, server_version: &str) -> Self {
        let mut by_gv: BTreeMap<String, Vec<&Arc<Registry>>> = BTreeMap::new();
        for r in registries {
            let n = r.kind.names();
            by_gv.entry(format!("apis/{}/{}", n.group, n.version)).or_default().push(r);
        }
        let mut v3 = BTreeMap::new();
        for (gv, regs) in &by_gv {
            let mut paths = Map::new();
            for r in regs {
                add_paths(&mut paths, r, true);
            }
            let doc = json!({
                "openapi": "3.0.0",
                "info": { "title": server_name, "version": server_version },
                "paths": paths,
                "components": { "schemas": schemas(regs, true) },
            });
            v3.insert(gv.clone(), Encoded::new(&doc, Spec::V3, gv));
        }
        let index_paths: Map<String, Value> = v3
            .iter()
            .map(|(gv, d)| {
                (gv.clone(), json!({ "serverRelativeURL": format!("/openapi/v3/{gv}?hash={}", d.json.hash()) }))
            })
            .collect();
        let all: Vec<&Arc<Registry>> = registries.iter().collect();
        let mut v2_paths = Map::new();
        for r in &all {
            add_paths(&mut v2_paths, r, false);
        }
        let v2 = json!({
            "swagger": "2.0",
            "info": { "title": server_name, "version": server_version },
            "paths": v2_paths,
            "definitions": schemas(&all, false),
        });
        Self { v2: Encoded::new(&v2, Spec::V2, "v2"), v3_index: StaticDoc::new(&json!({ "paths": index_paths })), v3 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `$ref` below `value`.
    fn refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    out.push(r);
                }
                map.values().for_each(|v| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn meta_schemas_are_complete_and_carry_kubes_additions() {
        for v3 in [false, true] {
            let schemas = meta_schemas(v3, true);
            assert!(schemas.contains_key(SCALE_SCHEMA), "{:?}", schemas.keys().collect::<Vec<_>>());
            let prefix = if v3 { "#/components/schemas/" } else { "#/definitions/" };
            let mut found = Vec::new();
            schemas.values().for_each(|s| refs(s, &mut found));
            assert!(!found.is_empty());
            for r in found {
                let name = r.strip_prefix(prefix).unwrap_or_else(|| panic!("{r} outside {prefix}"));
                assert!(schemas.contains_key(name), "{r} does not resolve (v3: {v3})");
            }
            for (name, path, key, value, only_v3) in kube_additions() {
                let at = schemas[&format!("{META}.{name}")].pointer(path).and_then(|at| at.get(key));
                let want = (v3 || !only_v3).then_some(&value);
                assert_eq!(at, want, "{name}{path} {key} (v3: {v3})");
            }
            let status = &schemas[&format!("{META}.Status")];
            assert!(status.get("required").is_none(), "{status}");
            let meta = &schemas[&format!("{META}.ObjectMeta")];
            let created = &meta["properties"]["creationTimestamp"];
            assert!(created["description"].as_str().is_some_and(|d| d.starts_with("CreationTimestamp")));
            let time = format!("{prefix}{META}.Time");
            if v3 {
                // OpenAPI 3: nothing beside a $ref, as kube publishes it.
                assert_eq!(created["allOf"], json!([{ "$ref": time }]), "{created}");
                assert!(created.get("$ref").is_none());
            } else {
                assert_eq!(created["$ref"], json!(time), "{created}");
            }
        }
    }
}
