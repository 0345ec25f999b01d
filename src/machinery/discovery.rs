//! Discovery: `/apis` (legacy APIGroupList and the aggregated
//! apidiscovery.k8s.io/v2 document with ETag), `/apis/{group}` (APIGroup),
//! `/apis/{group}/{version}` (APIResourceList, also the aggregator's
//! availability probe), and the empty core `/api`. All are built once at
//! startup: the served kinds never change at run time.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::response::Response;
use http::{header, HeaderMap};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::registry::Registry;
use super::static_doc::StaticDoc;

const AGGREGATED_V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
const AGGREGATED_V2BETA1: &str = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

pub struct Discovery {
    group_list: StaticDoc,
    aggregated_v2: StaticDoc,
    aggregated_v2beta1: StaticDoc,
    empty_aggregated_v2: StaticDoc,
    empty_aggregated_v2beta1: StaticDoc,
    api_versions: StaticDoc,
    groups: BTreeMap<String, StaticDoc>,
    versions: BTreeMap<(String, String), StaticDoc>,
}

fn group_version_entry(group: &str, version: &str) -> Value {
    json!({ "groupVersion": format!("{group}/{version}"), "version": version })
}

impl Discovery {
    pub fn new(registries: &[Arc<Registry>]) -> Self {
        // group -> version -> registries, in registration order.
        let mut by_group: BTreeMap<&str, BTreeMap<&str, Vec<&Arc<Registry>>>> = BTreeMap::new();
        for r in registries {
            let n = r.kind.names();
            by_group.entry(n.group).or_default().entry(n.version).or_default().push(r);
        }
        let mut groups_json = Vec::new();
        let mut groups = BTreeMap::new();
        let mut versions = BTreeMap::new();
        let mut aggregated_items = Vec::new();
        for (group, vs) in &by_group {
            let version_entries: Vec<Value> = vs.keys().map(|v| group_version_entry(group, v)).collect();
            let preferred = version_entries.first().cloned().unwrap_or(Value::Null);
            let group_json = json!({ "name": group, "versions": version_entries, "preferredVersion": preferred });
            groups_json.push(group_json.clone());
            let mut api_group = group_json;
            api_group["kind"] = json!("APIGroup");
            api_group["apiVersion"] = json!("v1");
            groups.insert(group.to_string(), StaticDoc::new(&api_group));
            let mut agg_versions = Vec::new();
            for (version, regs) in vs {
                let resources: Vec<Value> = regs.iter().flat_map(|r| resource_list_entries(r)).collect();
                let list = json!({
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": format!("{group}/{version}"),
                    "resources": resources,
                });
                versions.insert((group.to_string(), version.to_string()), StaticDoc::new(&list));
                let agg_resources: Vec<Value> = regs.iter().map(|r| aggregated_resource(r)).collect();
                agg_versions.push(json!({ "version": version, "resources": agg_resources, "freshness": "Current" }));
            }
            aggregated_items
                .push(json!({ "metadata": { "name": group, "creationTimestamp": null }, "versions": agg_versions }));
        }
        let aggregated = |api: &str, items: &[Value]| {
            StaticDoc::new(
                &json!({ "kind": "APIGroupDiscoveryList", "apiVersion": api, "metadata": {}, "items": items }),
            )
        };
        Self {
            group_list: StaticDoc::new(&json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups_json })),
            aggregated_v2: aggregated("apidiscovery.k8s.io/v2", &aggregated_items),
            aggregated_v2beta1: aggregated("apidiscovery.k8s.io/v2beta1", &aggregated_items),
            empty_aggregated_v2: aggregated("apidiscovery.k8s.io/v2", &[]),
            empty_aggregated_v2beta1: aggregated("apidiscovery.k8s.io/v2beta1", &[]),
            api_versions: StaticDoc::new(
                &json!({ "kind": "APIVersions", "versions": [], "serverAddressByClientCIDRs": [] }),
            ),
            groups,
            versions,
        }
    }

    /// Answers a discovery path, or None when the path is not discovery.
    pub fn serve(&self, path: &str, headers: &HeaderMap) -> Option<Response> {
        let parts: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
        let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
        match parts.as_slice() {
            ["apis"] => Some(match aggregated_version(accept) {
                Some(V2) => doc_response(&self.aggregated_v2, AGGREGATED_V2, headers),
                Some(_) => doc_response(&self.aggregated_v2beta1, AGGREGATED_V2BETA1, headers),
                None => doc_response(&self.group_list, "application/json", headers),
            }),
            ["api"] => Some(match aggregated_version(accept) {
                Some(V2) => doc_response(&self.empty_aggregated_v2, AGGREGATED_V2, headers),
                Some(_) => doc_response(&self.empty_aggregated_v2beta1, AGGREGATED_V2BETA1, headers),
                None => doc_response(&self.api_versions, "application/json", headers),
            }),
            ["apis", group] => self.groups.get(*group).map(|d| doc_response(d, "application/json", headers)),
            ["apis", group, version] => self
                .versions
                .get(&(group.to_string(), version.to_string()))
                .map(|d| doc_response(d, "application/json", headers)),
            _ => None,
        }
    }
}

const V2: u8 = 2;

/// Which aggregated discovery version the Accept header asks for, if any
/// (its media ranges are tried in order, as kube-apiserver does).
fn aggregated_version(accept: &str) -> Option<u8> {
    for range in accept.split(',') {
        let params: Vec<&str> = range.split(';').map(str::trim).collect();
        let has = |p: &str| params.iter().any(|x| x.eq_ignore_ascii_case(p));
        if params.first().is_some_and(|e| *e == "application/json")
            && has("g=apidiscovery.k8s.io")
            && has("as=APIGroupDiscoveryList")
        {
            if has("v=v2") {
                return Some(V2);
            }
            if has("v=v2beta1") {
                return Some(1);
            }
        }
        if params.first().is_some_and(|e| matches!(*e, "application/json" | "*/*")) && !range.contains("as=") {
            return None;
        }
    }
    None
}

fn doc_response(doc: &StaticDoc, content_type: &'static str, headers: &HeaderMap) -> Response {
    doc.respond(content_type, "public", headers)
}

fn verbs(r: &Registry) -> Vec<&'static str> {
    r.kind.verbs().iter().map(|v| v.as_str()).collect()
}

fn resource_list_entries(r: &Registry) -> Vec<Value> {
    let n = r.kind.names();
    let mut out = vec![json!({
        "name": n.plural,
        "singularName": n.singular,
        "namespaced": r.kind.namespaced(),
        "kind": n.kind,
        "verbs": verbs(r),
        "shortNames": n.short_names,
        "categories": n.categories,
        "storageVersionHash": storage_version_hash(n.group, n.version, n.kind),
    })];
    if r.kind.has_status_subresource() {
        out.push(json!({
            "name": format!("{}/status", n.plural),
            "singularName": "",
            "namespaced": r.kind.namespaced(),
            "kind": n.kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    out
}

fn aggregated_resource(r: &Registry) -> Value {
    let n = r.kind.names();
    let response_kind = json!({ "group": n.group, "version": n.version, "kind": n.kind });
    let mut v = json!({
        "resource": n.plural,
        "responseKind": response_kind,
        "scope": if r.kind.namespaced() { "Namespaced" } else { "Cluster" },
        "singularResource": n.singular,
        "verbs": verbs(r),
        "shortNames": n.short_names,
        "categories": n.categories,
    });
    if r.kind.has_status_subresource() {
        v["subresources"] =
            json!([{ "subresource": "status", "responseKind": response_kind, "verbs": ["get", "patch", "update"] }]);
    }
    v
}

/// kube-apiserver's storageVersionHash: base64 of the first 8 bytes of the
/// SHA-256 of "group/version/kind".
fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    use base64::Engine;
    let digest = Sha256::digest(format!("{group}/{version}/{kind}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}
