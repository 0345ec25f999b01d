//! The audit policy: audit.k8s.io/v1 `Policy` as k8s.io/apiserver reads it
//! (`pkg/audit/policy/reader.go`, `pkg/apis/audit/validation`) and evaluates
//! it (`pkg/audit/policy/checker.go`): the first rule that matches a request
//! decides its level, the stages left out and whether managedFields are
//! dropped; a request no rule matches is not audited.

use std::path::Path;

use anyhow::{bail, Context as _};
use serde::Deserialize;
use serde_json::Value;

use crate::apimachinery::field_error::{aggregate, FieldError, FieldErrorKind};
use crate::apimachinery::gofmt::go_quote;
use crate::apimachinery::names::validate_dns1123_subdomain;
use crate::apimachinery::request_info::RequestInfo;
use crate::auth::authn::UserInfo;

use super::event::{Level, Stage, API_VERSION};

/// audit.k8s.io/v1 `Policy`, as written in the policy file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
    #[serde(default)]
    pub omit_stages: Vec<String>,
    #[serde(default)]
    pub omit_managed_fields: bool,
}

/// One rule: every field given must match (lists match when they hold the
/// request's value); `level` is required.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    #[serde(default)]
    pub level: String,
    #[serde(default)]
    pub users: Vec<String>,
    #[serde(default)]
    pub user_groups: Vec<String>,
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default)]
    pub resources: Vec<GroupResources>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
    #[serde(default)]
    pub omit_stages: Vec<String>,
    #[serde(default)]
    pub omit_managed_fields: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupResources {
    /// "" is the core group.
    #[serde(default)]
    pub group: String,
    /// `pods`, `pods/status`, `*/status`, `pods/*`, `*`; none: every resource of the group.
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// The fields each level of a policy may have: kube decodes strictly, and
/// when only unknown fields are wrong, warns and reads the policy leniently.
const POLICY_FIELDS: &[&str] = &["apiVersion", "kind", "metadata", "rules", "omitStages", "omitManagedFields"];
const RULE_FIELDS: &[&str] = &[
    "level",
    "users",
    "userGroups",
    "verbs",
    "resources",
    "namespaces",
    "nonResourceURLs",
    "omitStages",
    "omitManagedFields",
];
const GROUP_RESOURCES_FIELDS: &[&str] = &["group", "resources", "resourceNames"];

/// What the policy decides for one request (kube's `RequestAuditConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestAuditConfig {
    pub level: Level,
    pub omit_stages: Stages,
    pub omit_managed_fields: bool,
}

/// A set of stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stages(u8);

impl Stages {
    pub fn contains(self, stage: Stage) -> bool {
        self.0 & (1 << stage as u8) != 0
    }

    fn insert(&mut self, stage: Stage) {
        self.0 |= 1 << stage as u8;
    }

    fn union(self, other: Stages) -> Stages {
        Stages(self.0 | other.0)
    }
}

/// A policy read, validated and ready to evaluate.
#[derive(Debug, Clone)]
pub struct PolicyEvaluator {
    rules: Vec<(PolicyRule, RequestAuditConfig)>,
    default: RequestAuditConfig,
}

/// What a rule is matched against: who asks, and what for.
pub struct Attributes<'a> {
    /// None when authentication failed: rules naming users or groups do not match.
    pub user: Option<&'a UserInfo>,
    pub info: &'a RequestInfo,
}

impl PolicyEvaluator {
    /// Reads the policy file as kube-apiserver does at start. The error names
    /// the file and what is wrong with it.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let bytes = std::fs::read(path).with_context(|| format!("reading audit policy file {}", path.display()))?;
        Self::from_bytes(&bytes).with_context(|| format!("loading audit policy file {}", path.display()))
    }

    /// A policy from YAML or JSON.
    pub fn from_bytes(bytes: &[u8]) -> anyhow::Result<Self> {
        let (json, _) = crate::apimachinery::serializer::yaml_to_json(bytes).map_err(anyhow::Error::msg)?;
        let value: Value = serde_json::from_slice(&json).context("decoding the policy")?;
        let Some(object) = value.as_object() else { bail!("the policy is not an object") };
        let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
        if kind.is_empty() {
            bail!("Object 'Kind' is missing in the policy");
        }
        if api_version != API_VERSION || kind != "Policy" {
            bail!("unknown group version kind {api_version}, Kind={kind} in policy: only {API_VERSION} Policy is read");
        }
        let unknown = unknown_fields(&value);
        if !unknown.is_empty() {
            tracing::warn!(
                fields = %unknown.join(", "),
                "audit policy contains errors, falling back to lenient decoding: unknown fields ignored"
            );
        }
        let policy: Policy = serde_json::from_value(value).context("decoding the policy")?;
        Self::new(policy)
    }

    /// Validates `policy` (kube's `ValidatePolicy`, then "at least one rule").
    pub fn new(policy: Policy) -> anyhow::Result<Self> {
        if let Some(errors) = aggregate(validate(&policy)) {
            bail!("{errors}");
        }
        if policy.rules.is_empty() {
            bail!("loaded illegal policy with 0 rules");
        }
        let policy_stages = stages(&policy.omit_stages);
        let rules = policy
            .rules
            .into_iter()
            .map(|rule| {
                let config = RequestAuditConfig {
                    level: Level::parse(&rule.level).unwrap_or(Level::None),
                    // A rule leaves out the policy's stages as well as its own.
                    omit_stages: policy_stages.union(stages(&rule.omit_stages)),
                    omit_managed_fields: rule.omit_managed_fields.unwrap_or(policy.omit_managed_fields),
                };
                (rule, config)
            })
            .collect();
        let default = RequestAuditConfig {
            level: Level::None,
            omit_stages: policy_stages,
            omit_managed_fields: policy.omit_managed_fields,
        };
        Ok(Self { rules, default })
    }

    /// The first matching rule's decision; `None` level when no rule matches.
    pub fn evaluate(&self, attrs: &Attributes<'_>) -> RequestAuditConfig {
        self.rules.iter().find(|(rule, _)| rule_matches(rule, attrs)).map_or(self.default, |(_, config)| *config)
    }

    /// The decision for `info` when it is the same whoever asks, before
    /// authentication: the first rule matching what was asked names no users
    /// or groups (or none matches). None when it depends on the user. A
    /// request decided `None` this way costs auditing no record at all (the
    /// probes, in the sample policy).
    pub fn evaluate_early(&self, info: &RequestInfo) -> Option<RequestAuditConfig> {
        for (rule, config) in &self.rules {
            if !request_matches(rule, info) {
                continue;
            }
            return (rule.users.is_empty() && rule.user_groups.is_empty()).then_some(*config);
        }
        Some(self.default)
    }
}

fn stages(names: &[String]) -> Stages {
    let mut set = Stages::default();
    for stage in names.iter().filter_map(|s| Stage::parse(s)) {
        set.insert(stage);
    }
    set
}

/// Fields the policy's types do not have, as paths (`rules[0].verb`).
fn unknown_fields(policy: &Value) -> Vec<String> {
    fn check(value: &Value, known: &[&str], path: &str, out: &mut Vec<String>) {
        if let Some(object) = value.as_object() {
            let prefix = if path.is_empty() { String::new() } else { format!("{path}.") };
            out.extend(object.keys().filter(|k| !known.contains(&k.as_str())).map(|k| format!("{prefix}{k}")));
        }
    }
    let mut out = Vec::new();
    check(policy, POLICY_FIELDS, "", &mut out);
    for (i, rule) in policy.get("rules").and_then(Value::as_array).into_iter().flatten().enumerate() {
        check(rule, RULE_FIELDS, &format!("rules[{i}]"), &mut out);
        for (j, gr) in rule.get("resources").and_then(Value::as_array).into_iter().flatten().enumerate() {
            check(gr, GROUP_RESOURCES_FIELDS, &format!("rules[{i}].resources[{j}]"), &mut out);
        }
    }
    out
}

/// kube's `ValidatePolicy`, in its words.
fn validate(policy: &Policy) -> Vec<String> {
    let mut errors = Vec::new();
    validate_omit_stages(&policy.omit_stages, "omitStages", &mut errors);
    for (i, rule) in policy.rules.iter().enumerate() {
        let path = format!("rules[{i}]");
        match rule.level.as_str() {
            "" => errors.push(FieldError::required(format!("{path}.level"), "")),
            level if Level::parse(level).is_none() => errors.push(FieldError {
                kind: FieldErrorKind::NotSupported,
                field: format!("{path}.level"),
                value: Some(go_quote(level)),
                detail: "supported values: \"None\", \"Metadata\", \"Request\", \"RequestResponse\"".into(),
            }),
            _ => {}
        }
        for (j, url) in rule.non_resource_urls.iter().enumerate() {
            if url == "*" {
                continue;
            }
            let field = format!("{path}.nonResourceURLs[{j}]");
            if !url.starts_with('/') {
                errors.push(FieldError::invalid_raw(
                    &field,
                    &go_quote(url),
                    "non-resource URL rules must begin with a '/' character",
                ));
            }
            if !url.is_empty() && url[..url.len() - 1].contains('*') {
                errors.push(FieldError::invalid_raw(
                    &field,
                    &go_quote(url),
                    "non-resource URL wildcards '*' must be the final character of the rule",
                ));
            }
        }
        for gr in &rule.resources {
            if !gr.group.is_empty() {
                let msgs = validate_dns1123_subdomain(&gr.group);
                if !msgs.is_empty() {
                    errors.push(FieldError::invalid_raw(
                        format!("{path}.resources.group"),
                        &go_quote(&gr.group),
                        msgs.join(","),
                    ));
                }
            }
            if !gr.resource_names.is_empty() && gr.resources.is_empty() {
                errors.push(FieldError::invalid_raw(
                    format!("{path}.resources.resourceNames"),
                    &format!("{:?}", gr.resource_names),
                    "using resourceNames requires at least one resource",
                ));
            }
        }
        validate_omit_stages(&rule.omit_stages, &format!("{path}.omitStages"), &mut errors);
        if !rule.non_resource_urls.is_empty() && (!rule.resources.is_empty() || !rule.namespaces.is_empty()) {
            errors.push(FieldError::invalid_raw(
                format!("{path}.nonResourceURLs"),
                &format!("{:?}", rule.non_resource_urls),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
    }
    errors.into_iter().map(|e| e.full_message()).collect()
}

fn validate_omit_stages(omit: &[String], path: &str, errors: &mut Vec<FieldError>) {
    for (i, stage) in omit.iter().enumerate() {
        if Stage::parse(stage).is_none() {
            errors.push(FieldError::invalid_raw(
                format!("{path}[{i}]"),
                &go_quote(stage),
                "allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic",
            ));
        }
    }
}

/// kube's `ruleMatches`.
fn rule_matches(rule: &PolicyRule, attrs: &Attributes<'_>) -> bool {
    if !rule.users.is_empty() && !attrs.user.is_some_and(|u| rule.users.contains(&u.name)) {
        return false;
    }
    if !rule.user_groups.is_empty()
        && !attrs.user.is_some_and(|u| u.groups.iter().any(|g| rule.user_groups.contains(g)))
    {
        return false;
    }
    request_matches(rule, attrs.info)
}

/// The part of `ruleMatches` about what was asked, not who asked.
fn request_matches(rule: &PolicyRule, info: &RequestInfo) -> bool {
    if !rule.verbs.is_empty() && !rule.verbs.iter().any(|v| v == info.verb.as_str()) {
        return false;
    }
    if !rule.namespaces.is_empty() || !rule.resources.is_empty() {
        return matches_resource(rule, info);
    }
    if !rule.non_resource_urls.is_empty() {
        return !info.is_resource_request && rule.non_resource_urls.iter().any(|spec| path_matches(info.path(), spec));
    }
    true
}

/// A non-resource URL rule: `*`, the exact path, or a prefix ending in `*`.
fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*"
        || spec == path
        || spec.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

/// kube's `ruleMatchesResource`: namespaces ("" for cluster-scoped requests),
/// then any group-resources entry: `res`, `res/sub`, `*`, `*/sub`, `res/*`,
/// narrowed by resourceNames.
fn matches_resource(rule: &PolicyRule, info: &RequestInfo) -> bool {
    if !info.is_resource_request {
        return false;
    }
    if !rule.namespaces.is_empty() && !rule.namespaces.iter().any(|ns| ns == info.namespace()) {
        return false;
    }
    if rule.resources.is_empty() {
        return true;
    }
    let (resource, subresource) = (info.resource(), info.subresource());
    rule.resources.iter().filter(|gr| gr.group == info.api_group()).any(|gr| {
        if gr.resources.is_empty() {
            return true;
        }
        if !gr.resource_names.is_empty() && !gr.resource_names.iter().any(|n| n == info.name()) {
            return false;
        }
        gr.resources.iter().any(|res| {
            let combined = match res.split_once('/') {
                Some((r, s)) => r == resource && s == subresource,
                None => subresource.is_empty() && res == resource,
            };
            combined
                || res == "*"
                || (!subresource.is_empty() && res.strip_prefix("*/") == Some(subresource))
                || res.strip_suffix("/*") == Some(resource)
        })
    })
}

#[cfg(test)]
mod tests {
    use http::Method;

    use super::*;
    use crate::apimachinery::request_info::classify;

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:kube-proxy"]
- level: None
  userGroups: ["system:nodes"]
  verbs: ["get"]
- level: RequestResponse
  resources:
  - group: example.com
    resources: ["widgets/status"]
- level: Metadata
  resources:
  - group: example.com
    resources: ["widgets"]
    resourceNames: ["secret-widget"]
  omitManagedFields: false
- level: Request
  verbs: ["create", "update", "patch"]
  namespaces: ["prod"]
  omitStages: [ResponseStarted]
- level: Request
  resources:
  - group: example.com
    resources: ["*/scale"]
- level: Metadata
  resources:
  - group: other.example.com
    resources: ["things/*"]
- level: None
  nonResourceURLs: ["/healthz*", "/version"]
- level: Metadata
  nonResourceURLs: ["/apis*"]
- level: RequestResponse
  resources:
  - group: example.com
omitManagedFields: true
"#;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo { name: name.into(), groups: groups.iter().map(|g| g.to_string()).collect(), ..Default::default() }
    }

    fn eval(p: &PolicyEvaluator, u: Option<&UserInfo>, method: Method, path: &str) -> RequestAuditConfig {
        let (path, query) = path.split_once('?').map_or((path, None), |(p, q)| (p, Some(q)));
        let info = classify(&method, path, query);
        p.evaluate(&Attributes { user: u, info: &info })
    }

    fn level(p: &PolicyEvaluator, u: Option<&UserInfo>, method: Method, path: &str) -> Level {
        eval(p, u, method, path).level
    }

    const WIDGETS: &str = "/apis/example.com/v1alpha/namespaces/ns/widgets";

    #[test]
    fn the_first_matching_rule_decides() {
        let p = PolicyEvaluator::from_bytes(POLICY.as_bytes()).unwrap();
        let alice = user("alice", &["system:authenticated"]);
        let proxy = user("system:kube-proxy", &[]);
        let node = user("system:node:a", &["system:nodes"]);
        // users
        assert_eq!(level(&p, Some(&proxy), Method::POST, WIDGETS), Level::None);
        // userGroups and verbs together: the node's get is not audited, its list is
        assert_eq!(level(&p, Some(&node), Method::GET, &format!("{WIDGETS}/a")), Level::None);
        assert_eq!(level(&p, Some(&node), Method::GET, WIDGETS), Level::RequestResponse);
        // subresources
        assert_eq!(level(&p, Some(&alice), Method::PUT, &format!("{WIDGETS}/a/status")), Level::RequestResponse);
        // resourceNames
        assert_eq!(level(&p, Some(&alice), Method::GET, &format!("{WIDGETS}/secret-widget")), Level::Metadata);
        assert_eq!(level(&p, Some(&alice), Method::GET, &format!("{WIDGETS}/other")), Level::RequestResponse);
        // a resourceNames rule never matches collections (no name)
        assert_eq!(level(&p, Some(&alice), Method::GET, WIDGETS), Level::RequestResponse);
        // namespaces with verbs
        let prod = "/apis/example.com/v1alpha/namespaces/prod/widgets";
        assert_eq!(level(&p, Some(&alice), Method::POST, prod), Level::Request);
        assert_eq!(level(&p, Some(&alice), Method::DELETE, &format!("{prod}/a")), Level::RequestResponse);
        // */sub matches any resource's subresource, not the resource itself
        assert_eq!(level(&p, Some(&alice), Method::GET, &format!("{WIDGETS}/a/scale")), Level::Request);
        // res/* matches the resource and all its subresources
        let things = "/apis/other.example.com/v1/namespaces/ns/things";
        assert_eq!(level(&p, Some(&alice), Method::GET, things), Level::Metadata);
        assert_eq!(level(&p, Some(&alice), Method::GET, &format!("{things}/t/status")), Level::Metadata);
        // another group, no rule: not audited
        assert_eq!(level(&p, Some(&alice), Method::GET, "/apis/x.io/v1/namespaces/ns/things"), Level::None);
        // non-resource URLs: exact, prefix with *, and never a resource request
        assert_eq!(level(&p, Some(&alice), Method::GET, "/healthz"), Level::None);
        assert_eq!(level(&p, Some(&alice), Method::GET, "/healthz/ping"), Level::None);
        assert_eq!(level(&p, Some(&alice), Method::GET, "/version"), Level::None);
        assert_eq!(level(&p, Some(&alice), Method::GET, "/apis/example.com/v1alpha"), Level::Metadata);
        assert_eq!(level(&p, Some(&alice), Method::GET, "/metrics"), Level::None);
        // without a user (failed authentication) user rules never match
        assert_eq!(level(&p, None, Method::GET, &format!("{WIDGETS}/a")), Level::RequestResponse);
    }

    /// Decided before authentication only when no user could change it, and
    /// then as `evaluate` decides for anyone.
    #[test]
    fn early_decisions_are_those_no_user_changes() {
        let p = PolicyEvaluator::from_bytes(POLICY.as_bytes()).unwrap();
        let early = |method: Method, path: &str| p.evaluate_early(&classify(&method, path, None));
        // The first two rules name users and groups and match any Widget get.
        assert_eq!(early(Method::GET, &format!("{WIDGETS}/a")), None);
        assert_eq!(early(Method::POST, WIDGETS), None, "system:kube-proxy's rule matches every request");
        let p = PolicyEvaluator::from_bytes(
            b"{\"apiVersion\":\"audit.k8s.io/v1\",\"kind\":\"Policy\",\"rules\":[
              {\"level\":\"None\",\"nonResourceURLs\":[\"/healthz\"]},
              {\"level\":\"None\",\"users\":[\"system:kube-aggregator\"]},
              {\"level\":\"Request\",\"verbs\":[\"create\"]}]}",
        )
        .unwrap();
        let early = |method: Method, path: &str| p.evaluate_early(&classify(&method, path, None)).map(|c| c.level);
        assert_eq!(early(Method::GET, "/healthz"), Some(Level::None));
        assert_eq!(early(Method::GET, WIDGETS), None, "the aggregator's rule comes first");
        let alice = user("alice", &[]);
        for (method, path) in [(Method::GET, "/healthz"), (Method::POST, WIDGETS)] {
            if let Some(config) = p.evaluate_early(&classify(&method, path, None)) {
                assert_eq!(config, eval(&p, Some(&alice), method.clone(), path));
                assert_eq!(config, eval(&p, None, method, path));
            }
        }
    }

    #[test]
    fn omitted_stages_and_managed_fields_combine_policy_and_rule() {
        let p = PolicyEvaluator::from_bytes(POLICY.as_bytes()).unwrap();
        let alice = user("alice", &[]);
        let c = eval(&p, Some(&alice), Method::POST, "/apis/example.com/v1alpha/namespaces/prod/widgets");
        assert!(c.omit_stages.contains(Stage::RequestReceived) && c.omit_stages.contains(Stage::ResponseStarted));
        assert!(!c.omit_stages.contains(Stage::ResponseComplete));
        assert!(c.omit_managed_fields, "the policy's omitManagedFields applies to a rule without one");
        let c = eval(&p, Some(&alice), Method::GET, &format!("{WIDGETS}/secret-widget"));
        assert!(!c.omit_managed_fields, "a rule's own omitManagedFields wins");
        assert!(c.omit_stages.contains(Stage::RequestReceived) && !c.omit_stages.contains(Stage::ResponseStarted));
        let none = eval(&p, Some(&alice), Method::GET, "/apis/x.io/v1/things");
        assert_eq!(none.level, Level::None);
        assert!(none.omit_stages.contains(Stage::RequestReceived));
    }

    #[test]
    fn a_rule_without_conditions_matches_everything() {
        let p = PolicyEvaluator::from_bytes(
            b"{\"apiVersion\":\"audit.k8s.io/v1\",\"kind\":\"Policy\",\"rules\":[{\"level\":\"Metadata\"}]}",
        )
        .unwrap();
        assert_eq!(level(&p, None, Method::GET, "/healthz"), Level::Metadata);
        assert_eq!(level(&p, None, Method::DELETE, WIDGETS), Level::Metadata);
    }

    #[test]
    fn bad_policies_are_refused_in_kubes_words() {
        let err = |yaml: &str| format!("{:#}", PolicyEvaluator::from_bytes(yaml.as_bytes()).unwrap_err());
        let head = "apiVersion: audit.k8s.io/v1\nkind: Policy\n";
        assert_eq!(err(&format!("{head}rules: []")), "loaded illegal policy with 0 rules");
        assert_eq!(err(&format!("{head}rules:\n- users: [a]")), "rules[0].level: Required value");
        assert_eq!(
            err(&format!("{head}rules:\n- level: Everything")),
            "rules[0].level: Unsupported value: \"Everything\": supported values: \"None\", \"Metadata\", \"Request\", \"RequestResponse\""
        );
        assert_eq!(
            err(&format!("{head}omitStages: [Sometimes]\nrules:\n- level: None")),
            "omitStages[0]: Invalid value: \"Sometimes\": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic"
        );
        let both =
            err(&format!("{head}rules:\n- level: None\n  nonResourceURLs: [healthz, '/a*b*']\n  namespaces: [x]"));
        assert!(both.starts_with("[rules[0].nonResourceURLs[0]: Invalid value: \"healthz\": non-resource URL rules must begin with a '/' character, rules[0].nonResourceURLs[1]: Invalid value: \"/a*b*\": non-resource URL wildcards"), "{both}");
        assert!(both.ends_with("rules cannot apply to both regular resources and non-resource URLs]"), "{both}");
        assert!(err("apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: None}]")
            .contains("only audit.k8s.io/v1 Policy"));
        assert!(err("rules: [{level: None}]").contains("'Kind' is missing"));
        assert!(err(&format!("{head}rules: [{{level: None")).starts_with("yaml: line"));
        assert!(err(&format!("{head}rules: 5")).starts_with("decoding the policy"));
        // Unknown fields are warned about and ignored, as kube's lenient fallback does.
        assert!(PolicyEvaluator::from_bytes(format!("{head}rules:\n- level: None\n  verb: [get]").as_bytes()).is_ok());
    }
}
