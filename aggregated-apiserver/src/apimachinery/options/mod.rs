//! Request options, the one place they are decoded: the query of every verb
//! through kube-apiserver's parameter codec ([`params`]), ListOptions
//! ([`list`]), Create/Update/PatchOptions ([`write`](mod@write)) and DeleteOptions from a
//! body or the query ([`delete`]). Each decodes into a typed value and refuses
//! what kube-apiserver refuses, with its status code and wording, so a
//! malformed option is never silently ignored.

pub mod delete;
pub mod list;
pub mod params;
pub mod write;

use serde_json::json;

pub use delete::{decode_delete_options, is_dry_run, DeleteOptions};
pub use list::{ListOptions, Rv, RvMatch};
pub use params::Query;
pub use write::{FieldValidation, WriteOptions, WriteVerb};

use crate::apimachinery::field_error::{FieldError, FieldErrorKind};

/// `ValidateDryRun`: every value must be `All` (an empty one too).
fn validate_dry_run(values: &[String]) -> Option<FieldError> {
    values.iter().any(|v| v != "All").then(|| {
        FieldError::new(FieldErrorKind::NotSupported, "dryRun", "supported values: \"All\"").with_value(&json!(values))
    })
}
