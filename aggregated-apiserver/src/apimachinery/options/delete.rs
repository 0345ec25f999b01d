//! `metav1.DeleteOptions` of a delete or deletecollection, decoded strictly
//! into k8s-openapi's typed structure the way kube-apiserver's
//! `DeleteResource`/`DeleteCollection` handlers do
//! (k8s.io/apiserver `pkg/endpoints/handlers/delete.go`):
//!
//! * a non-empty body is the whole of the options; the query's
//!   `dryRun`/`gracePeriodSeconds`/`propagationPolicy`/`orphanDependents` are
//!   then ignored, exactly as in kube (so `?dryRun=All` with a body `{}`
//!   deletes for real there too);
//! * an empty body takes them from the query through the parameter codec
//!   (`preconditions` only exist in a body);
//! * the body is JSON decoded with Go's rules: field names match
//!   case-sensitively, unknown fields are ignored, `null` leaves a field
//!   unset, the last of duplicate fields wins, and a wrongly typed field
//!   is refused with `encoding/json`'s message for the first one in
//!   document order (`json: cannot unmarshal string into Go struct field
//!   DeleteOptions.dryRun of type []string`), never half-applied;
//! * `kind`/`apiVersion` may be absent or name DeleteOptions in any version;
//!   another kind is refused with the scheme's wording;
//! * then `ValidateDeleteOptions`: one 422 naming every bad field.
//!
//! Every decoding failure is a 400 BadRequest, as kube-apiserver answers from
//! 1.35 on (k8s.io/apiserver's change "DeleteOptions decode errors should
//! return 400 instead of 500"); 1.34 sends the same message as a 500.

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{json, Value};

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, Preconditions};

use super::params::Query;
use super::validate_dry_run;
use crate::apimachinery::errors::{ApiError, ApiResult};
use crate::apimachinery::field_error::{FieldError, FieldErrorKind};
use crate::apimachinery::gofmt::go_equal_fold;
use crate::apimachinery::gojson::{decode_json, go_json_kind, unmarshal_field_type_error, VERSION_KIND_ERROR_PREFIX};

/// The version a body's kind is looked up in when it names none: the
/// handler's `scope.MetaGroupVersion`.
const DEFAULT_GROUP: &str = "meta.k8s.io";
const DEFAULT_VERSION: &str = "v1";

/// Kinds kube's meta scheme knows in every group version (the option types
/// and the unversioned ones of `metav1.AddToGroupVersion`): a body naming one
/// decodes, then fails to convert to DeleteOptions.
const UNVERSIONED_META_KINDS: &[&str] = &[
    "ListOptions",
    "GetOptions",
    "CreateOptions",
    "UpdateOptions",
    "PatchOptions",
    "Status",
    "APIVersions",
    "APIGroupList",
    "APIGroup",
    "APIResourceList",
];

/// Kinds the meta scheme knows only in meta.k8s.io (v1 and v1beta1).
const META_GROUP_KINDS: &[&str] =
    &["WatchEvent", "Table", "TableOptions", "PartialObjectMetadata", "PartialObjectMetadataList"];

/// The DeleteOptions of a delete: from `body` if it has any bytes, else from
/// the query; validated. Decoding failures are 400, validation 422.
pub fn decode_delete_options(body: &[u8], query: &Query) -> ApiResult<DeleteOptions> {
    let opts = if body.is_empty() { from_query(query)? } else { from_body(body).map_err(ApiError::bad_request)? };
    validate(&opts)?;
    Ok(opts)
}

/// Whether the options ask for a dry run (`dryrun.IsDryRun`: any value;
/// validation has already refused values other than `All`).
pub fn is_dry_run(opts: &DeleteOptions) -> bool {
    opts.dry_run.as_ref().is_some_and(|d| !d.is_empty())
}

/// `Convert_url_Values_To_v1_DeleteOptions`.
fn from_query(q: &Query) -> ApiResult<DeleteOptions> {
    let dry_run: Vec<String> = q.all("dryRun").map(str::to_string).collect();
    Ok(DeleteOptions {
        grace_period_seconds: q.int("gracePeriodSeconds")?,
        orphan_dependents: q.bool("orphanDependents"),
        propagation_policy: q.get("propagationPolicy").map(str::to_string),
        dry_run: (!dry_run.is_empty()).then_some(dry_run),
        // Unsafe deletion of corrupt objects is behind a feature gate kube
        // keeps off by default, and then drops this field before anything
        // reads it; there are no corrupt objects to delete here either.
        ignore_store_read_error_with_cluster_breaking_potential: None,
        ..Default::default()
    })
}

/// Decodes a non-empty body; `Err` is kube's message for the 400.
fn from_body(body: &[u8]) -> Result<DeleteOptions, String> {
    if body.trim_ascii() == b"null" {
        // Go decodes `null` into a struct as nothing at all.
        return Ok(DeleteOptions::default());
    }
    // Syntax errors, a top level that is not an object and a non-string
    // kind/apiVersion, worded by Go's scanner and kube's version/kind sniffing.
    decode_json(body)?;
    let text = String::from_utf8_lossy(body);
    let members = Members::parse(&text)?;
    check_kind(&members, body)?;
    decode_fields(&members)
}

/// `ValidateDeleteOptions` (apimachinery `pkg/apis/meta/v1/validation`).
fn validate(opts: &DeleteOptions) -> ApiResult<()> {
    let mut errs = Vec::new();
    if let (Some(policy), Some(_)) = (&opts.propagation_policy, opts.orphan_dependents) {
        errs.push(FieldError::invalid(
            "propagationPolicy",
            &json!(policy),
            "orphanDependents and deletionPropagation cannot be both set",
        ));
    }
    if let Some(policy) = &opts.propagation_policy {
        if !matches!(policy.as_str(), "Foreground" | "Background" | "Orphan") {
            errs.push(
                FieldError::new(
                    FieldErrorKind::NotSupported,
                    "propagationPolicy",
                    "supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
                )
                .with_value(&json!(policy)),
            );
        }
    }
    errs.extend(validate_dry_run(opts.dry_run.as_deref().unwrap_or_default()));
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid("meta.k8s.io", "DeleteOptions", "", &errs))
    }
}

/// The members of a JSON object in document order, each value kept as its
/// raw text (serde_json's `Map` sorts keys, and Go reports the first bad
/// field in document order and quotes number literals as written).
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'a> Members<'a> {
    /// `text` must hold one JSON object (checked by [`decode_json`] first).
    fn parse(text: &'a str) -> Result<Self, String> {
        serde_json::from_str(text).map_err(|e| format!("{VERSION_KIND_ERROR_PREFIX}{e}"))
    }

    /// What Go's `encoding/json` (case-insensitive, last match wins) reads
    /// into kube's `apiVersion`/`kind` sniffing struct.
    fn type_meta(&self, field: &str) -> String {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| go_equal_fold(k, field))
            .and_then(|(_, raw)| serde_json::from_str::<Option<String>>(raw.get()).ok().flatten())
            .unwrap_or_default()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for MembersVisitor<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'a>, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, &'de RawValue>()? {
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        deserializer.deserialize_map(MembersVisitor(std::marker::PhantomData))
    }
}

/// The kind check of kube's decoder for a DeleteOptions body: the kind and
/// version default to `DeleteOptions` in meta.k8s.io/v1; DeleteOptions is
/// accepted in any version; another kind the meta scheme knows cannot be
/// converted; any other is not registered.
fn check_kind(members: &Members<'_>, body: &[u8]) -> Result<(), String> {
    let api_version = members.type_meta("apiVersion");
    let kind = members.type_meta("kind");
    let (mut group, mut version) = match api_version.matches('/').count() {
        0 => (String::new(), api_version.clone()),
        1 => api_version.split_once('/').map(|(g, v)| (g.to_string(), v.to_string())).unwrap_or_default(),
        _ => return Err(format!("unexpected GroupVersion string: {api_version}")),
    };
    // The serializer's gvkWithDefaults.
    if group.is_empty() && version.is_empty() {
        (group, version) = (DEFAULT_GROUP.to_string(), DEFAULT_VERSION.to_string());
    } else if version.is_empty() && group == DEFAULT_GROUP {
        version = DEFAULT_VERSION.to_string();
    }
    if version.is_empty() {
        return Err(format!("Object 'apiVersion' is missing in '{}'", String::from_utf8_lossy(body)));
    }
    let known_here = UNVERSIONED_META_KINDS.contains(&kind.as_str())
        || (group == DEFAULT_GROUP && META_GROUP_KINDS.contains(&kind.as_str()));
    match kind.as_str() {
        "" | "DeleteOptions" => Ok(()),
        k if known_here => Err(format!("converting (v1.{k}) to (v1.DeleteOptions): unknown conversion")),
        k => {
            let gv = if group.is_empty() { version } else { format!("{group}/{version}") };
            Err(format!(
                "no kind {} is registered for version {} in scheme \"pkg/runtime/scheme.go:110\"",
                json!(k),
                json!(gv)
            ))
        }
    }
}

/// Decodes the fields of DeleteOptions as Go's `encoding/json` would: the
/// first type error in document order is the answer.
fn decode_fields(members: &Members<'_>) -> Result<DeleteOptions, String> {
    let mut out = DeleteOptions::default();
    let mut first_error: Option<String> = None;
    let mut note = |r: Result<(), String>| {
        if let Err(e) = r {
            first_error.get_or_insert(e);
        }
    };
    for (key, raw) in &members.0 {
        let at = |field: &str| GoField { strukt: "DeleteOptions", path: field.to_string() };
        match key.as_str() {
            "gracePeriodSeconds" => note(at(key).int64(raw).map(|v| out.grace_period_seconds = v)),
            "orphanDependents" => note(at(key).bool(raw).map(|v| out.orphan_dependents = v)),
            "propagationPolicy" => {
                note(at(key).string(raw, "v1.DeletionPropagation").map(|v| out.propagation_policy = v))
            }
            "dryRun" => note(at(key).string_list(raw).map(|v| out.dry_run = v)),
            "preconditions" => note(decode_preconditions(raw).map(|v| out.preconditions = v)),
            "ignoreStoreReadErrorWithClusterBreakingPotential" => {
                // Type-checked like any field; the value is dropped (see from_query).
                note(at(key).bool(raw).map(drop))
            }
            "apiVersion" => note(at(key).string(raw, "string").map(|v| out.api_version = v)),
            "kind" => note(at(key).string(raw, "string").map(|v| out.kind = v)),
            // Unknown fields, and known ones in another case, are ignored.
            _ => {}
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

fn decode_preconditions(raw: &RawValue) -> Result<Option<Preconditions>, String> {
    let value = parse_raw(raw)?;
    match value {
        Value::Null => return Ok(None),
        Value::Object(_) => {}
        other => return Err(GoField::new("DeleteOptions", "preconditions").type_error(&other, "v1.Preconditions")),
    }
    let members = Members::parse(raw.get())?;
    let mut out = Preconditions::default();
    let mut first_error: Option<String> = None;
    for (key, raw) in &members.0 {
        let at = GoField::new("Preconditions", &format!("preconditions.{key}"));
        let r = match key.as_str() {
            "uid" => at.string(raw, "types.UID").map(|v| out.uid = v),
            "resourceVersion" => at.string(raw, "string").map(|v| out.resource_version = v),
            _ => Ok(()),
        };
        if let Err(e) = r {
            first_error.get_or_insert(e);
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(Some(out)),
    }
}

fn parse_raw(raw: &RawValue) -> Result<Value, String> {
    serde_json::from_str(raw.get()).map_err(|e| format!("{VERSION_KIND_ERROR_PREFIX}{e}"))
}

/// A field of a Go struct, named in `UnmarshalTypeError`'s way:
/// `Go struct field <Struct>.<path from the top>`.
struct GoField {
    strukt: &'static str,
    path: String,
}

impl GoField {
    fn new(strukt: &'static str, path: &str) -> Self {
        Self { strukt, path: path.to_string() }
    }

    fn type_error(&self, value: &Value, go_type: &str) -> String {
        self.type_error_as(go_json_kind(value), go_type)
    }

    fn type_error_as(&self, what: &str, go_type: &str) -> String {
        unmarshal_field_type_error(what, self.strukt, &self.path, go_type)
    }

    /// A `*int64`. A number that is not an int64 is named with its literal,
    /// as Go does (`number 1.5`, `number 1E5`).
    fn int64(&self, raw: &RawValue) -> Result<Option<i64>, String> {
        match parse_raw(raw)? {
            Value::Null => Ok(None),
            Value::Number(n) => match n.as_i64() {
                Some(i) if !raw.get().contains(['.', 'e', 'E']) => Ok(Some(i)),
                _ => Err(self.type_error_as(&format!("number {}", raw.get().trim()), "int64")),
            },
            other => Err(self.type_error(&other, "int64")),
        }
    }

    fn bool(&self, raw: &RawValue) -> Result<Option<bool>, String> {
        match parse_raw(raw)? {
            Value::Null => Ok(None),
            Value::Bool(b) => Ok(Some(b)),
            other => Err(self.type_error(&other, "bool")),
        }
    }

    fn string(&self, raw: &RawValue, go_type: &str) -> Result<Option<String>, String> {
        match parse_raw(raw)? {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s)),
            other => Err(self.type_error(&other, go_type)),
        }
    }

    /// A `[]string`; a `null` element is Go's zero value, "".
    fn string_list(&self, raw: &RawValue) -> Result<Option<Vec<String>>, String> {
        match parse_raw(raw)? {
            Value::Null => Ok(None),
            Value::Array(items) => items
                .into_iter()
                .map(|item| match item {
                    Value::Null => Ok(String::new()),
                    Value::String(s) => Ok(s),
                    other => Err(self.type_error(&other, "string")),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            other => Err(self.type_error(&other, "[]string")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(b: &str) -> ApiResult<DeleteOptions> {
        decode_delete_options(b.as_bytes(), &Query::default())
    }

    fn query(q: &str) -> ApiResult<DeleteOptions> {
        decode_delete_options(b"", &Query::parse(Some(q)).unwrap())
    }

    fn bad(b: &str) -> String {
        let e = body(b).unwrap_err();
        assert_eq!((e.code, e.reason), (400, crate::apimachinery::errors::Reason::BadRequest), "{b}: {e:?}");
        e.message
    }

    #[test]
    fn wrongly_typed_fields_are_refused_with_gos_words() {
        let cases = [
            (r#"{"dryRun":"All"}"#, "json: cannot unmarshal string into Go struct field DeleteOptions.dryRun of type []string"),
            (r#"{"dryRun":[1]}"#, "json: cannot unmarshal number into Go struct field DeleteOptions.dryRun of type string"),
            (r#"{"preconditions":{"uid":1}}"#, "json: cannot unmarshal number into Go struct field Preconditions.preconditions.uid of type types.UID"),
            (r#"{"preconditions":{"resourceVersion":1}}"#, "json: cannot unmarshal number into Go struct field Preconditions.preconditions.resourceVersion of type string"),
            (r#"{"preconditions":"x"}"#, "json: cannot unmarshal string into Go struct field DeleteOptions.preconditions of type v1.Preconditions"),
            (r#"{"gracePeriodSeconds":"5"}"#, "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64"),
            (r#"{"gracePeriodSeconds":1.5}"#, "json: cannot unmarshal number 1.5 into Go struct field DeleteOptions.gracePeriodSeconds of type int64"),
            (r#"{"gracePeriodSeconds":1E5}"#, "json: cannot unmarshal number 1E5 into Go struct field DeleteOptions.gracePeriodSeconds of type int64"),
            (r#"{"gracePeriodSeconds":18446744073709551615}"#, "json: cannot unmarshal number 18446744073709551615 into Go struct field DeleteOptions.gracePeriodSeconds of type int64"),
            (r#"{"propagationPolicy":1}"#, "json: cannot unmarshal number into Go struct field DeleteOptions.propagationPolicy of type v1.DeletionPropagation"),
            (r#"{"orphanDependents":"true"}"#, "json: cannot unmarshal string into Go struct field DeleteOptions.orphanDependents of type bool"),
            (r#"{"orphanDependents":1.5}"#, "json: cannot unmarshal number into Go struct field DeleteOptions.orphanDependents of type bool"),
            // The first bad field in document order.
            (r#"{"dryRun":["All"],"orphanDependents":1,"gracePeriodSeconds":"x"}"#, "json: cannot unmarshal number into Go struct field DeleteOptions.orphanDependents of type bool"),
            (r#"{"preconditions":{"uid":1,"resourceVersion":2},"dryRun":"x"}"#, "json: cannot unmarshal number into Go struct field Preconditions.preconditions.uid of type types.UID"),
        ];
        for (b, want) in cases {
            assert_eq!(bad(b), want, "{b}");
        }
    }

    #[test]
    fn bodies_that_are_not_delete_options() {
        assert_eq!(
            bad("not json"),
            "couldn't get version/kind; json parse error: invalid character 'o' in literal null (expecting 'u')"
        );
        assert_eq!(bad(" "), "couldn't get version/kind; json parse error: unexpected end of JSON input");
        assert!(bad("[]").starts_with(
            "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct {"
        ));
        assert_eq!(
            bad(r#"{"kind":"Foo","apiVersion":"v1"}"#),
            r#"no kind "Foo" is registered for version "v1" in scheme "pkg/runtime/scheme.go:110""#
        );
        assert_eq!(
            bad(r#"{"kind":"Foo"}"#),
            r#"no kind "Foo" is registered for version "meta.k8s.io/v1" in scheme "pkg/runtime/scheme.go:110""#
        );
        assert_eq!(
            bad(r#"{"kind":"Status","apiVersion":"bogus/v9"}"#),
            "converting (v1.Status) to (v1.DeleteOptions): unknown conversion"
        );
        assert_eq!(bad(r#"{"kind":"Table"}"#), "converting (v1.Table) to (v1.DeleteOptions): unknown conversion");
        assert_eq!(
            bad(r#"{"kind":"Table","apiVersion":"v1"}"#),
            r#"no kind "Table" is registered for version "v1" in scheme "pkg/runtime/scheme.go:110""#
        );
        assert_eq!(bad(r#"{"kind":"DeleteOptions","apiVersion":"a/b/c"}"#), "unexpected GroupVersion string: a/b/c");
        assert_eq!(
            bad(r#"{"kind":"DeleteOptions","kind":"Foo"}"#),
            r#"no kind "Foo" is registered for version "meta.k8s.io/v1" in scheme "pkg/runtime/scheme.go:110""#
        );
        assert_eq!(bad(r#"{"kind":1}"#), "couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string");
    }

    #[test]
    fn accepted_bodies() {
        for b in [
            r#"{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","dryRun":["All"]}"#,
            r#"{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}"#,
            r#"{"kind":"DeleteOptions","apiVersion":"bogus/v9","dryRun":["All"]}"#,
            r#"{"apiVersion":"apps/v1","dryRun":["All"]}"#,
            r#"{"kind":"Foo","Kind":"DeleteOptions","dryRun":["All"]}"#,
            r#"{"unknownField":1,"dryRun":["All"]}"#,
            r#"{"dryRun":null,"dryRun":["All"]}"#,
        ] {
            assert!(is_dry_run(&body(b).unwrap()), "{b}");
        }
        // Names match case-sensitively: `DryRun` is an unknown field.
        assert!(!is_dry_run(&body(r#"{"DryRun":["All"]}"#).unwrap()));
        assert_eq!(body("null").unwrap(), DeleteOptions::default());
        let o = body(r#"{"preconditions":{"uid":"u","resourceVersion":"7"},"gracePeriodSeconds":-1}"#).unwrap();
        assert_eq!(o.preconditions.as_ref().and_then(|p| p.uid.as_deref()), Some("u"));
        assert_eq!(o.preconditions.as_ref().and_then(|p| p.resource_version.as_deref()), Some("7"));
        assert_eq!(o.grace_period_seconds, Some(-1));
    }

    #[test]
    fn validation_is_one_422() {
        let e = body(r#"{"dryRun":["Bad"],"propagationPolicy":"Orphan","orphanDependents":true}"#).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(e.message, "DeleteOptions.meta.k8s.io \"\" is invalid: [propagationPolicy: Invalid value: \"Orphan\": orphanDependents and deletionPropagation cannot be both set, dryRun: Unsupported value: [\"Bad\"]: supported values: \"All\"]");
        let e = body(r#"{"dryRun":[null]}"#).unwrap_err();
        assert_eq!(
            e.message,
            "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"\"]: supported values: \"All\""
        );
        let e = query("propagationPolicy=Bad").unwrap_err();
        assert_eq!(e.message, "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Bad\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"");
    }

    #[test]
    fn the_query_counts_only_without_a_body() {
        assert!(is_dry_run(&query("dryRun=All").unwrap()));
        assert!(!is_dry_run(&decode_delete_options(b"{}", &Query::parse(Some("dryRun=All")).unwrap()).unwrap()));
        assert_eq!(
            query("gracePeriodSeconds=x").unwrap_err().message,
            "strconv.ParseInt: parsing \"x\": invalid syntax"
        );
        assert_eq!(query("orphanDependents=yes").unwrap().orphan_dependents, Some(true));
        assert_eq!(query("dryRun=").unwrap_err().code, 422);
    }
}
