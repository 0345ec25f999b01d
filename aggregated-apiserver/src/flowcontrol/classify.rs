//! The cluster's FlowSchemas and PriorityLevelConfigurations
//! (`flowcontrol.apiserver.k8s.io/v1`) as the classifier reads them: the
//! schemas in kube's order, each matched by its rules as kube matches them
//! (k8s.io/apiserver `pkg/util/flowcontrol/rule.go`), naming a priority level
//! with its seats and queues.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::flowcontrol::v1::{
    FlowSchema, FlowSchemaSpec, LimitResponse, LimitedPriorityLevelConfiguration, NonResourcePolicyRule,
    PriorityLevelConfiguration, PriorityLevelConfigurationSpec, ResourcePolicyRule, Subject,
};

use super::level::{Level, Queuing};
use super::metrics::{FlowControlMetrics, FlowLabels, FlowMetrics};
use crate::apimachinery::request_info::RequestInfo;
use crate::auth::authn::UserInfo;

/// Where a classified request goes.
pub struct Classified<'a> {
    pub schema: &'a Schema,
    /// The flow's distinguisher: the user's name, the namespace, or nothing.
    pub distinguisher: &'a str,
}

/// A FlowSchema, ready to match.
pub struct Schema {
    pub name: String,
    /// Its flows' counters, labelled by the level's name and its own.
    pub metrics: Arc<FlowMetrics>,
    /// The UID, as the answer's header carries it.
    pub uid: http::HeaderValue,
    pub level: Arc<PriorityLevel>,
    rules: Vec<k8s_openapi::api::flowcontrol::v1::PolicyRulesWithSubjects>,
    distinguisher: Distinguisher,
}

#[derive(Clone, Copy)]
enum Distinguisher {
    None,
    ByUser,
    ByNamespace,
}

/// A PriorityLevelConfiguration: exempt (never limited) or limited to its seats.
pub struct PriorityLevel {
    pub name: String,
    /// The UID, as the answer's header carries it.
    pub uid: http::HeaderValue,
    /// None for an exempt level.
    pub limited: Option<Arc<Level>>,
}

/// The configuration in force: the schemas in matching order.
#[derive(Default)]
pub struct Classifier {
    schemas: Vec<Schema>,
}

/// kube's defaults for a limited level's fields left unset.
const DEFAULT_SHARES: i32 = 30;
const DEFAULT_QUEUES: i32 = 64;
const DEFAULT_HAND_SIZE: i32 = 8;
const DEFAULT_QUEUE_LENGTH_LIMIT: i32 = 50;

impl Classifier {
    /// The classifier of `schemas` and `levels`, the server's `seats` shared
    /// among the limited levels in proportion to their nominal concurrency
    /// shares (kube's `nominalCL = ceil(serverCL * shares / Σ shares)`).
    /// `previous` keeps the seats and queues of levels whose configuration is
    /// unchanged, so a change elsewhere drops no waiting request; each
    /// schema's counters are taken from `metrics`.
    pub fn new(
        schemas: &[Arc<FlowSchema>],
        levels: &[Arc<PriorityLevelConfiguration>],
        seats: usize,
        previous: &Classifier,
        metrics: &FlowControlMetrics,
    ) -> Self {
        let shares = |plc: &PriorityLevelConfiguration| -> i32 {
            let spec = level_spec(plc);
            match spec.map(|s| s.type_.as_str()) {
                Some("Limited") => spec
                    .and_then(|s| s.limited.as_ref())
                    .and_then(|l| l.nominal_concurrency_shares)
                    .unwrap_or(DEFAULT_SHARES),
                _ => spec.and_then(|s| s.exempt.as_ref()).and_then(|e| e.nominal_concurrency_shares).unwrap_or(0),
            }
            .max(0)
        };
        let total: u64 = levels.iter().map(|l| shares(l) as u64).sum::<u64>().max(1);
        let mut by_name: HashMap<String, Arc<PriorityLevel>> = HashMap::new();
        for plc in levels {
            let name = plc.metadata.name.clone().unwrap_or_default();
            let uid = header(plc.metadata.uid.as_deref());
            let spec = level_spec(plc);
            let limited = match spec.map(|s| s.type_.as_str()) {
                Some("Limited") => {
                    let limit = ((seats as u64 * shares(plc) as u64).div_ceil(total)).max(1) as usize;
                    let response = spec.and_then(|s| s.limited.as_ref()).and_then(limit_response);
                    let queuing = match response {
                        Some(r) if r.type_ == "Queue" => {
                            let q = r.queuing.as_ref();
                            let field = |f: Option<i32>, default: i32| f.unwrap_or(default).max(1) as usize;
                            Some(Queuing {
                                queues: field(q.and_then(|q| q.queues), DEFAULT_QUEUES),
                                hand_size: field(q.and_then(|q| q.hand_size), DEFAULT_HAND_SIZE),
                                queue_length_limit: field(
                                    q.and_then(|q| q.queue_length_limit),
                                    DEFAULT_QUEUE_LENGTH_LIMIT,
                                ),
                            })
                        }
                        // Reject, and kube's default of a level without a limitResponse.
                        Some(_) => None,
                        None => None,
                    };
                    let kept = previous
                        .level(&name)
                        .and_then(|l| l.limited.clone())
                        .filter(|level| level.limit() == limit && level.queuing() == queuing);
                    Some(kept.unwrap_or_else(|| Level::new(limit, queuing)))
                }
                _ => None,
            };
            by_name.insert(name.clone(), Arc::new(PriorityLevel { name, uid, limited }));
        }
        let mut sorted: Vec<&Arc<FlowSchema>> = schemas.iter().collect();
        sorted.sort_by(|a, b| {
            let precedence = |s: &FlowSchema| schema_spec(s).and_then(|s| s.matching_precedence).unwrap_or(1000);
            precedence(a).cmp(&precedence(b)).then_with(|| a.metadata.name.cmp(&b.metadata.name))
        });
        let schemas = sorted
            .into_iter()
            .filter_map(|fs| {
                let spec = schema_spec(fs)?;
                // A schema naming a level that does not exist matches nothing, as in kube.
                let level = by_name.get(&spec.priority_level_configuration.name)?.clone();
                let distinguisher = match spec.distinguisher_method.as_ref().map(|d| d.type_.as_str()) {
                    Some("ByUser") => Distinguisher::ByUser,
                    Some("ByNamespace") => Distinguisher::ByNamespace,
                    _ => Distinguisher::None,
                };
                let name = fs.metadata.name.clone().unwrap_or_default();
                let labels = FlowLabels { priority_level: level.name.clone(), flow_schema: name.clone() };
                let metrics = Arc::new(metrics.flow(labels));
                Some(Schema {
                    name,
                    metrics,
                    uid: header(fs.metadata.uid.as_deref()),
                    level,
                    rules: spec.rules.clone().unwrap_or_default(),
                    distinguisher,
                })
            })
            .collect();
        Self { schemas }
    }

    /// Each limited level that a schema names, with its seats.
    pub fn seats(&self) -> impl Iterator<Item = (String, usize)> + '_ {
        let mut seen = std::collections::BTreeMap::new();
        for schema in &self.schemas {
            if let Some(level) = &schema.level.limited {
                seen.insert(schema.level.name.clone(), level.limit());
            }
        }
        seen.into_iter()
    }

    fn level(&self, name: &str) -> Option<&Arc<PriorityLevel>> {
        self.schemas.iter().map(|s| &s.level).find(|l| l.name == name)
    }

    /// The first schema whose rules match the request, and its flow.
    pub fn classify<'a>(&'a self, user: &'a UserInfo, info: &'a RequestInfo) -> Option<Classified<'a>> {
        let schema = self.schemas.iter().find(|s| s.rules.iter().any(|rule| matches_rule(rule, user, info)))?;
        let distinguisher = match schema.distinguisher {
            Distinguisher::None => "",
            Distinguisher::ByUser => user.name.as_str(),
            Distinguisher::ByNamespace => info.namespace(),
        };
        Some(Classified { schema, distinguisher })
    }
}

// Kubernetes 1.37 makes these fields required.
k8s_openapi::k8s_if_le_1_36! {
    fn schema_spec(schema: &FlowSchema) -> Option<&FlowSchemaSpec> {
        schema.spec.as_ref()
    }

    fn level_spec(level: &PriorityLevelConfiguration) -> Option<&PriorityLevelConfigurationSpec> {
        level.spec.as_ref()
    }

    fn limit_response(limited: &LimitedPriorityLevelConfiguration) -> Option<&LimitResponse> {
        limited.limit_response.as_ref()
    }
}
k8s_openapi::k8s_if_ge_1_37! {
    fn schema_spec(schema: &FlowSchema) -> Option<&FlowSchemaSpec> {
        Some(&schema.spec)
    }

    fn level_spec(level: &PriorityLevelConfiguration) -> Option<&PriorityLevelConfigurationSpec> {
        Some(&level.spec)
    }

    fn limit_response(limited: &LimitedPriorityLevelConfiguration) -> Option<&LimitResponse> {
        Some(&limited.limit_response)
    }
}

fn matches_rule(
    rule: &k8s_openapi::api::flowcontrol::v1::PolicyRulesWithSubjects,
    user: &UserInfo,
    info: &RequestInfo,
) -> bool {
    if !rule.subjects.iter().any(|s| matches_subject(s, user)) {
        return false;
    }
    if info.is_resource_request {
        rule.resource_rules.iter().flatten().any(|r| matches_resource(r, info))
    } else {
        rule.non_resource_rules.iter().flatten().any(|r| matches_non_resource(r, info))
    }
}

fn matches_subject(subject: &Subject, user: &UserInfo) -> bool {
    match subject.kind.as_str() {
        "User" => subject.user.as_ref().is_some_and(|u| u.name == "*" || u.name == user.name),
        "Group" => subject.group.as_ref().is_some_and(|g| g.name == "*" || user.groups.contains(&g.name)),
        "ServiceAccount" => subject.service_account.as_ref().is_some_and(|sa| {
            let Some(rest) = user.name.strip_prefix("system:serviceaccount:") else { return false };
            match rest.split_once(':') {
                Some((namespace, name)) => namespace == sa.namespace && (sa.name == "*" || name == sa.name),
                None => false,
            }
        }),
        _ => false,
    }
}

fn matches_resource(rule: &ResourcePolicyRule, info: &RequestInfo) -> bool {
    if !contains(&rule.verbs, info.verb.as_str(), "*") {
        return false;
    }
    let resource = match info.subresource() {
        "" => std::borrow::Cow::Borrowed(info.resource()),
        sub => std::borrow::Cow::Owned(format!("{}/{sub}", info.resource())),
    };
    if !contains(&rule.resources, &resource, "*") || !contains(&rule.api_groups, info.api_group(), "*") {
        return false;
    }
    if info.namespace().is_empty() {
        return rule.cluster_scope.unwrap_or(false);
    }
    rule.namespaces.as_deref().is_some_and(|namespaces| contains(namespaces, info.namespace(), "*"))
}

fn matches_non_resource(rule: &NonResourcePolicyRule, info: &RequestInfo) -> bool {
    if !contains(&rule.verbs, info.verb.as_str(), "*") {
        return false;
    }
    let path = info.path();
    rule.non_resource_urls.iter().any(|url| {
        if url == "*" || url == path {
            return true;
        }
        // `/healthz` and `/healthz/*` both match `/healthz/etcd`, as in kube.
        let prefix = url.strip_suffix('*').unwrap_or(url);
        if prefix.ends_with('/') {
            path.starts_with(prefix)
        } else {
            path.starts_with(prefix) && path[prefix.len()..].starts_with('/')
        }
    })
}

/// A UID as a header value (a UID that cannot be one is sent empty).
fn header(uid: Option<&str>) -> http::HeaderValue {
    uid.and_then(|uid| http::HeaderValue::from_str(uid).ok()).unwrap_or(http::HeaderValue::from_static(""))
}

/// kube's `containsString`: `value` is listed, or the list is the wildcard alone.
fn contains(list: &[String], value: &str, wildcard: &str) -> bool {
    (list.len() == 1 && list[0] == wildcard) || list.iter().any(|v| v == value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(name: &str, precedence: i32, level: &str, rules: serde_json::Value) -> Arc<FlowSchema> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "uid": format!("uid-{name}")},
                "spec": {"matchingPrecedence": precedence, "priorityLevelConfiguration": {"name": level},
                    "distinguisherMethod": {"type": "ByUser"}, "rules": rules},
            }))
            .unwrap(),
        )
    }

    fn level(name: &str, spec: serde_json::Value) -> Arc<PriorityLevelConfiguration> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "uid": format!("uid-{name}")}, "spec": spec}))
                .unwrap(),
        )
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo { name: name.into(), groups: groups.iter().map(|g| g.to_string()).collect(), ..Default::default() }
    }

    fn info(method: &str, path: &str) -> RequestInfo {
        crate::apimachinery::request_info::classify(&method.parse().unwrap(), path, None)
    }

    fn classifier() -> Classifier {
        let schemas = [
            schema(
                "exempt",
                1,
                "exempt",
                json!([{"subjects": [{"kind": "Group", "group": {"name": "system:masters"}}],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true, "namespaces": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]),
            ),
            schema(
                "llamas",
                500,
                "narrow",
                json!([{"subjects": [{"kind": "ServiceAccount", "serviceAccount": {"namespace": "farm", "name": "*"}}],
                "resourceRules": [{"verbs": ["create", "patch"], "apiGroups": ["farm.example.com"], "resources": ["llamas", "llamas/status"], "namespaces": ["farm"]}]}]),
            ),
            schema(
                "health",
                600,
                "narrow",
                json!([{"subjects": [{"kind": "User", "user": {"name": "*"}}],
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}]),
            ),
            schema(
                "catch-all",
                10000,
                "wide",
                json!([{"subjects": [{"kind": "Group", "group": {"name": "*"}}],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true, "namespaces": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]),
            ),
            schema(
                "dangling",
                2,
                "no-such-level",
                json!([{"subjects": [{"kind": "User", "user": {"name": "*"}}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]),
            ),
        ];
        let levels = [
            level("exempt", json!({"type": "Exempt"})),
            level(
                "narrow",
                json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 10, "limitResponse": {"type": "Reject"}}}),
            ),
            level(
                "wide",
                json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 30,
                "limitResponse": {"type": "Queue", "queuing": {"queues": 16, "handSize": 4, "queueLengthLimit": 5}}}}),
            ),
        ];
        Classifier::new(&schemas, &levels, 400, &Classifier::default(), &FlowControlMetrics::default())
    }

    fn schema_of(c: &Classifier, user: &UserInfo, method: &str, path: &str) -> String {
        c.classify(user, &info(method, path)).map(|c| c.schema.name.clone()).unwrap_or_default()
    }

    #[test]
    fn requests_take_the_first_matching_schema_in_kubes_order() {
        let c = classifier();
        let robot = user("system:serviceaccount:farm:robot", &[]);
        let llamas = "/apis/farm.example.com/v1beta1/namespaces/farm/llamas";
        assert_eq!(schema_of(&c, &user("admin", &["system:masters"]), "POST", llamas), "exempt");
        assert_eq!(schema_of(&c, &robot, "POST", llamas), "llamas");
        assert_eq!(schema_of(&c, &robot, "PATCH", &format!("{llamas}/dolly/status")), "llamas");
        assert_eq!(schema_of(&c, &robot, "GET", llamas), "catch-all", "another verb");
        assert_eq!(
            schema_of(&c, &robot, "POST", "/apis/farm.example.com/v1beta1/namespaces/other/llamas"),
            "catch-all"
        );
        assert_eq!(schema_of(&c, &user("system:serviceaccount:farmer:robot", &[]), "POST", llamas), "catch-all");
        assert_eq!(schema_of(&c, &user("alice", &[]), "GET", "/healthz"), "health");
        assert_eq!(schema_of(&c, &user("alice", &[]), "GET", "/healthz/etcd"), "health");
        assert_eq!(schema_of(&c, &user("alice", &[]), "GET", "/healthzx"), "catch-all");
        let post = info("POST", llamas);
        let classified = c.classify(&robot, &post).unwrap();
        assert_eq!(classified.distinguisher, "system:serviceaccount:farm:robot");
    }

    #[test]
    fn seats_are_shared_by_nominal_concurrency_shares() {
        let c = classifier();
        let seats = |name: &str| c.level(name).and_then(|l| l.limited.as_ref()).map(|l| l.limit());
        // 400 seats over shares 10 and 30 (the exempt level has none).
        assert_eq!((seats("narrow"), seats("wide"), seats("exempt")), (Some(100), Some(300), None));
        let again = Classifier::new(&[], &[], 400, &c, &FlowControlMetrics::default());
        assert!(again.schemas.is_empty());
    }
}
