//! Discovery: `/apis` (legacy APIGroupList and the aggregated
//! apidiscovery.k8s.io/v2 document with ETag), `/apis/{group}` (APIGroup),
//! `/apis/{group}/{version}` (APIResourceList, also the aggregator's
//! availability probe), and the empty core `/api`. All are built once at
//! startup: the served kinds never change at run time.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::response::Response;
use http::{header, HeaderMap};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroup, APIGroupList, APIResource, APIResourceList, APIVersions, GroupVersionForDiscovery,
};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::apimachinery::resource::{Verb, SCALE_GROUP, SCALE_KIND, SCALE_VERSION};
use crate::apimachinery::version::compare_kube_aware;
use crate::endpoints::static_doc::StaticDoc;
use crate::registry::Registry;

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

fn group_version_entry(group: &str, version: &str) -> GroupVersionForDiscovery {
    GroupVersionForDiscovery { group_version: format!("{group}/{version}"), version: version.to_string() }
}

fn to_value(doc: &impl serde::Serialize) -> Value {
    serde_json::to_value(doc).unwrap_or(Value::Null)
}

impl Discovery {
    pub fn new(registries: &[Arc<Registry>]) -> Self {
        // group -> version -> registries, in registration order.
        let mut by_group: BTreeMap<&str, BTreeMap<&str, Vec<&Arc<Registry>>>> = BTreeMap::new();
        for r in registries {
            let n = r.kind.names();
            by_group.entry(n.group).or_default().entry(n.version).or_default().push(r);
        }
        let mut api_groups = Vec::new();
        let mut groups = BTreeMap::new();
        let mut versions = BTreeMap::new();
        let mut aggregated_items = Vec::new();
        for (group, vs) in &by_group {
            // The preferred version first, as kube orders a group's versions.
            let mut vs: Vec<_> = vs.iter().collect();
            vs.sort_by(|(a, _), (b, _)| compare_kube_aware(b, a));
            let version_entries: Vec<GroupVersionForDiscovery> =
                vs.iter().map(|(v, _)| group_version_entry(group, v)).collect();
            let api_group = APIGroup {
                name: group.to_string(),
                preferred_version: version_entries.first().cloned(),
                server_address_by_client_cidrs: None,
                versions: version_entries,
            };
            groups.insert(group.to_string(), StaticDoc::new(&to_value(&api_group)));
            api_groups.push(api_group);
            let mut agg_versions = Vec::new();
            for (version, regs) in vs {
                let list = APIResourceList {
                    group_version: format!("{group}/{version}"),
                    resources: regs.iter().flat_map(|r| resource_list_entries(r)).collect(),
                };
                versions.insert((group.to_string(), version.to_string()), StaticDoc::new(&to_value(&list)));
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
        let mut group_list = to_value(&APIGroupList { groups: api_groups });
        // Go leaves out the (empty) apiVersion and kind of the groups inside
        // the list; k8s-openapi writes them for every APIGroup.
        if let Some(entries) = group_list.get_mut("groups").and_then(Value::as_array_mut) {
            for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
                entry.remove("apiVersion");
                entry.remove("kind");
            }
        }
        Self {
            group_list: StaticDoc::new(&group_list),
            aggregated_v2: aggregated("apidiscovery.k8s.io/v2", &aggregated_items),
            aggregated_v2beta1: aggregated("apidiscovery.k8s.io/v2beta1", &aggregated_items),
            empty_aggregated_v2: aggregated("apidiscovery.k8s.io/v2", &[]),
            empty_aggregated_v2beta1: aggregated("apidiscovery.k8s.io/v2beta1", &[]),
            api_versions: StaticDoc::new(&to_value(&APIVersions {
                server_address_by_client_cidrs: Vec::new(),
                versions: Vec::new(),
            })),
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

/// A subresource as discovery lists it (legacy and aggregated alike).
struct Listed<'a> {
    name: &'a str,
    group: &'a str,
    version: &'a str,
    kind: &'a str,
    verbs: Vec<&'static str>,
}

/// The kind's subresources: status and scale when it has them, then its own.
fn subresources(r: &Registry) -> Vec<Listed<'_>> {
    let n = r.kind.names();
    let written = vec!["get", "patch", "update"];
    let mut out = Vec::new();
    if r.kind.has_status_subresource() {
        out.push(Listed { name: "status", group: n.group, version: n.version, kind: n.kind, verbs: written.clone() });
    }
    if r.kind.scale().is_some() {
        let (group, version, kind) = (SCALE_GROUP, SCALE_VERSION, SCALE_KIND);
        out.push(Listed { name: "scale", group, version, kind, verbs: written });
    }
    for sub in r.kind.subresources() {
        let (group, version, kind) = sub.response_kind.unwrap_or((n.group, n.version, n.kind));
        let verbs = sub.verbs.iter().map(|v| v.as_str()).collect();
        out.push(Listed { name: sub.name, group, version, kind, verbs });
    }
    out
}

/// The kind's verbs in the order kube-apiserver lists a CRD's.
fn verbs(r: &Registry) -> Vec<&'static str> {
    const ORDER: [Verb; 8] = [
        Verb::Delete,
        Verb::DeleteCollection,
        Verb::Get,
        Verb::List,
        Verb::Patch,
        Verb::Create,
        Verb::Update,
        Verb::Watch,
    ];
    let served = r.kind.verbs();
    ORDER.iter().filter(|v| served.contains(v)).map(|v| v.as_str()).collect()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn resource_list_entries(r: &Registry) -> Vec<APIResource> {
    let n = r.kind.names();
    let mut out = vec![APIResource {
        name: n.plural.to_string(),
        singular_name: n.singular.to_string(),
        namespaced: r.kind.namespaced(),
        kind: n.kind.to_string(),
        verbs: strings(&verbs(r)),
        short_names: Some(strings(n.short_names)),
        categories: Some(strings(n.categories)),
        storage_version_hash: Some(storage_version_hash(n.group, n.version, n.kind)),
        group: None,
        version: None,
    }];
    for sub in subresources(r) {
        let elsewhere = (sub.group, sub.version) != (n.group, n.version);
        out.push(APIResource {
            name: format!("{}/{}", n.plural, sub.name),
            singular_name: String::new(),
            namespaced: r.kind.namespaced(),
            kind: sub.kind.to_string(),
            verbs: strings(&sub.verbs),
            short_names: None,
            categories: None,
            storage_version_hash: None,
            group: elsewhere.then(|| sub.group.to_string()),
            version: elsewhere.then(|| sub.version.to_string()),
        });
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
    let subresources: Vec<Value> = subresources(r)
        .into_iter()
        .map(|sub| {
            let response_kind = json!({ "group": sub.group, "version": sub.version, "kind": sub.kind });
            json!({ "subresource": sub.name, "responseKind": response_kind, "verbs": sub.verbs })
        })
        .collect();
    if !subresources.is_empty() {
        v["subresources"] = Value::Array(subresources);
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
