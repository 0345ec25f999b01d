//! What a Kubernetes object is, with no I/O in it: the rules kube-apiserver
//! applies to an object's bytes and fields, one concern per module, the way
//! k8s.io/apimachinery (and apiextensions-apiserver's schema package) holds
//! them apart from the server.
//!
//! * [`resource`]: what names a resource (group, version, kind, plural) and
//!   the verbs that may be asked of it;
//! * [`request_info`]: what a request asks, read from its method and path as
//!   kube's RequestInfoFactory reads it (the `http` crate's types, no I/O);
//! * [`duration`]: durations as the flags take them;
//! * [`gojson`]: Go-compatible JSON decoding (duplicate keys, Go's scanner
//!   and error wording, strict-decoding texts);
//! * [`schema`]: structural schemas (pruning, validation, CEL rules);
//! * [`cel`]: CEL expressions with kube's cost limits, for schema rules and
//!   admission;
//! * [`objectmeta`]: TypeMeta and ObjectMeta rules, on create and update;
//! * [`names`]: DNS-1123 labels and subdomains, qualified names, label values;
//! * [`labels`], [`fields`]: label and field selectors;
//! * [`jsonpath`]: the JSONPath of a CRD's printer columns;
//! * [`field_error`]: `field.Error`, what a failed check reports;
//! * [`errors`]: the API's errors as `metav1.Status` (k8s.io/apimachinery's
//!   `api/errors`);
//! * [`options`]: the options of a request (list, write, delete), decoded
//!   from its query and body with kube's rules and wording;
//! * [`patch`]: PATCH bodies (JSON patch, merge patch) and their bounds;
//! * [`serializer`]: request bodies in JSON and YAML, read into JSON, and
//!   [`yaml_limits`], the checks that bound the cost of parsing a YAML body;
//! * [`gofmt`]: how Go prints and parses values, for kube's exact wording;
//! * [`uid`]: new UIDs (random UUIDs);
//! * [`version`]: the order kube gives API versions;
//! * [`fieldpath`], [`typed`], [`managed_fields`]: server-side apply and
//!   managedFields (structured-merge-diff's field sets, schema-driven merge
//!   and comparison, and k8s.io/apiserver's field manager).
//!
//! [`crate::endpoints`] puts these behind HTTP.

pub mod cel;
pub mod duration;
pub mod errors;
pub mod field_error;
pub mod fieldpath;
pub mod fields;
pub mod gofmt;
pub mod gojson;
pub mod jsonpath;
pub mod labels;
pub mod managed_fields;
pub mod names;
pub mod objectmeta;
pub mod options;
pub mod patch;
pub mod request_info;
pub mod resource;
pub mod schema;
pub mod serializer;
pub mod typed;
pub mod uid;
pub mod version;
pub mod yaml_limits;

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod test_fixtures;
