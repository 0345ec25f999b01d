//! OpenAPI documents built from the kinds' schemas: `/openapi/v2` (Swagger 2.0,
//! which the aggregator merges) and `/openapi/v3` with one document per
//! group-version (what `kubectl explain` reads). Operations carry
//! `x-kubernetes-group-version-kind` and the write parameters, because kubectl
//! decides from the PATCH parameters whether the server supports
//! `fieldValidation`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::response::Response;
use http::HeaderMap;
use serde_json::{json, Map, Value};

use crate::endpoints::static_doc::StaticDoc;
use crate::registry::kind::{Names, Verb};
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

fn kind_ref(v3: bool, name: &str) -> Value {
    json!({ "$ref": format!("{}{name}", if v3 { "#/components/schemas/" } else { "#/definitions/" }) })
}

/// The metav1 types the kinds refer to, with the descriptions `kubectl explain` shows.
fn meta_schemas(v3: bool) -> Vec<(String, Value)> {
    let s = |d: &str| json!({ "type": "string", "description": d });
    let time = |d: &str| json!({ "type": "string", "format": "date-time", "description": d });
    let owner_ref = json!({
        "type": "object",
        "description": "OwnerReference contains enough information to let you identify an owning object. An owning object must be in the same namespace as the dependent, or be cluster-scoped, so there is no namespace field.",
        "required": ["apiVersion", "kind", "name", "uid"],
        "properties": {
            "apiVersion": s("API version of the referent."),
            "kind": s("Kind of the referent."),
            "name": s("Name of the referent."),
            "uid": s("UID of the referent."),
            "controller": { "type": "boolean", "description": "If true, this reference points to the managing controller." },
            "blockOwnerDeletion": { "type": "boolean", "description": "If true, AND if the owner has the \"foregroundDeletion\" finalizer, then the owner cannot be deleted from the key-value store until this reference is removed." }
        },
        "x-kubernetes-map-type": "atomic"
    });
    let string_map =
        |d: &str| json!({ "type": "object", "additionalProperties": { "type": "string" }, "description": d });
    let object_meta = json!({
        "type": "object",
        "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
        "properties": {
            "name": s("Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Cannot be updated."),
            "generateName": s("GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided."),
            "namespace": s("Namespace defines the space within which each name must be unique. Cannot be updated."),
            "uid": s("UID is the unique in time and space value for this object. Populated by the system. Read-only."),
            "resourceVersion": s("An opaque value that represents the internal version of this object that can be used by clients to determine when objects have changed. Populated by the system. Read-only."),
            "generation": { "type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state. Populated by the system. Read-only." },
            "creationTimestamp": time("CreationTimestamp is a timestamp representing the server time when this object was created. Populated by the system. Read-only."),
            "deletionTimestamp": time("DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted. Set by the server when a graceful deletion is requested by the user. Read-only."),
            "deletionGracePeriodSeconds": { "type": "integer", "format": "int64", "description": "Number of seconds allowed for this object to gracefully terminate before it will be removed from the system. Read-only." },
            "labels": string_map("Map of string keys and values that can be used to organize and categorize (scope and select) objects."),
            "annotations": string_map("Annotations is an unstructured key value map stored with a resource that may be set by external tools to store and retrieve arbitrary metadata."),
            "ownerReferences": {
                "type": "array",
                "description": "List of objects depended by this object. If ALL objects in the list have been deleted, this object will be garbage collected.",
                "items": kind_ref(v3, &format!("{META}.OwnerReference")),
                "x-kubernetes-list-map-keys": ["uid"],
                "x-kubernetes-list-type": "map",
                "x-kubernetes-patch-merge-key": "uid",
                "x-kubernetes-patch-strategy": "merge"
            },
            "finalizers": {
                "type": "array",
                "description": "Must be empty before the object is deleted from the registry. Each entry is an identifier for the responsible component that will remove the entry from the list.",
                "items": { "type": "string" },
                "x-kubernetes-list-type": "set",
                "x-kubernetes-patch-strategy": "merge"
            },
            "selfLink": s("Deprecated: selfLink is a legacy read-only field that is no longer populated by the system."),
            "managedFields": { "type": "array", "description": "ManagedFields maps workflow-id and version to the set of fields that are managed by that workflow.", "items": { "type": "object" } }
        }
    });
    let list_meta = json!({
        "type": "object",
        "description": "ListMeta describes metadata that synthetic resources must have, including lists and various status objects.",
        "properties": {
            "resourceVersion": s("String that identifies the server's internal version of this object that can be used by clients to determine when objects have changed."),
            "continue": s("continue may be set if the user set a limit on the number of items returned, and indicates that the server has more data available."),
            "remainingItemCount": { "type": "integer", "format": "int64", "description": "The number of subsequent items in the list which are not included in this list response." },
            "selfLink": s("Deprecated: selfLink is a legacy read-only field that is no longer populated by the system.")
        }
    });
    let status = json!({
        "type": "object",
        "description": "Status is a return value for calls that don't return other objects.",
        "properties": {
            "apiVersion": s("APIVersion defines the versioned schema of this representation of an object."),
            "kind": s("Kind is a string value representing the REST resource this object represents."),
            "code": { "type": "integer", "format": "int32", "description": "Suggested HTTP return code for this status, 0 if not set." },
            "message": s("A human-readable description of the status of this operation."),
            "reason": s("A machine-readable description of why this operation is in the \"Failure\" status."),
            "status": s("Status of the operation. One of: \"Success\" or \"Failure\"."),
            "details": { "type": "object", "description": "Extended data associated with the reason." },
            "metadata": meta_ref(v3, "ListMeta")
        },
        "x-kubernetes-group-version-kind": [{ "group": "", "kind": "Status", "version": "v1" }]
    });
    let delete_options = json!({
        "type": "object",
        "description": "DeleteOptions may be provided when deleting an API object.",
        "properties": {
            "dryRun": { "type": "array", "items": { "type": "string" }, "description": "When present, indicates that modifications should not be persisted." },
            "propagationPolicy": s("Whether and how garbage collection will be performed. Acceptable values are: 'Orphan', 'Background', 'Foreground'."),
            "preconditions": { "type": "object", "description": "Must be fulfilled before a deletion is carried out.", "properties": { "uid": s("Specifies the target UID."), "resourceVersion": s("Specifies the target ResourceVersion") } },
            "gracePeriodSeconds": { "type": "integer", "format": "int64", "description": "The duration in seconds before the object should be deleted." },
            "orphanDependents": { "type": "boolean", "description": "Deprecated: please use the PropagationPolicy." }
        }
    });
    vec![
        (format!("{META}.ObjectMeta"), object_meta),
        (format!("{META}.ListMeta"), list_meta),
        (format!("{META}.OwnerReference"), owner_ref),
        (format!("{META}.Status"), status),
        (format!("{META}.DeleteOptions"), delete_options),
        (
            format!("{META}.Patch"),
            json!({ "type": "object", "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body." }),
        ),
    ]
}

/// The kind's schema with `metadata` pointing at ObjectMeta and the GVK extension.
fn object_schema(r: &Registry, v3: bool) -> Value {
    let n = r.kind.names();
    let mut schema = r.kind.schema();
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
        st.insert("parameters".into(), Value::Array(named_common));
        paths.insert(format!("{base}{ns_prefix}/{}/{{name}}/status", n.plural), Value::Object(st));
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
    let mut out = Map::new();
    for (k, v) in meta_schemas(v3) {
        out.insert(k, v);
    }
    for r in regs {
        let n = r.kind.names();
        out.insert(schema_name(n, n.kind), object_schema(r, v3));
        out.insert(schema_name(n, n.list_kind), list_schema(r, v3));
    }
    out
}

pub struct OpenApi {
    v2: StaticDoc,
    v3_index: StaticDoc,
    v3: BTreeMap<String, StaticDoc>,
}

impl OpenApi {
    pub fn new(registries: &[Arc<Registry>], server_version: &str) -> Self {
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
                "info": { "title": "farm-apiserver", "version": server_version },
                "paths": paths,
                "components": { "schemas": schemas(regs, true) },
            });
            v3.insert(gv.clone(), StaticDoc::new(&doc));
        }
        let index_paths: Map<String, Value> = v3
            .iter()
            .map(|(gv, d)| (gv.clone(), json!({ "serverRelativeURL": format!("/openapi/v3/{gv}?hash={}", d.hash()) })))
            .collect();
        let all: Vec<&Arc<Registry>> = registries.iter().collect();
        let mut v2_paths = Map::new();
        for r in &all {
            add_paths(&mut v2_paths, r, false);
        }
        let v2 = json!({
            "swagger": "2.0",
            "info": { "title": "farm-apiserver", "version": server_version },
            "paths": v2_paths,
            "definitions": schemas(&all, false),
        });
        Self { v2: StaticDoc::new(&v2), v3_index: StaticDoc::new(&json!({ "paths": index_paths })), v3 }
    }

    /// Answers an OpenAPI path, or None when the path is not one.
    pub fn serve(&self, path: &str, headers: &HeaderMap) -> Option<Response> {
        let path = path.trim_end_matches('/');
        let doc = match path {
            "/openapi/v2" => &self.v2,
            "/openapi/v3" => &self.v3_index,
            p => self.v3.get(p.strip_prefix("/openapi/v3/")?)?,
        };
        Some(doc.respond("application/json", "no-cache, private", headers))
    }
}
