//! `metav1.CreateOptions`, `UpdateOptions` and `PatchOptions`: the query of a
//! create, update or patch, decoded by kube's parameter codec and checked by
//! `ValidateCreateOptions` and its siblings (one 422 naming every bad field).

use crate::apimachinery::objectmeta::FIELD_MANAGER_MAX_LENGTH;
use serde_json::json;

use super::params::{go_param_bool, Query};
use super::validate_dry_run;
use crate::apimachinery::errors::ApiError;
use crate::apimachinery::field_error::{FieldError, FieldErrorKind};
use crate::apimachinery::gofmt::{go_quote, is_go_printable};

/// `fieldValidation`: what to do with unknown and duplicate fields in a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

/// Which write the options belong to: names the options kind in a 422.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteVerb {
    Create,
    Update,
    Patch,
    /// A patch in `application/apply-patch+yaml`: server-side apply.
    Apply,
}

impl WriteVerb {
    fn options_kind(self) -> &'static str {
        match self {
            WriteVerb::Create => "CreateOptions",
            WriteVerb::Update => "UpdateOptions",
            WriteVerb::Patch | WriteVerb::Apply => "PatchOptions",
        }
    }
}

/// Options shared by create, update and patch.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    pub dry_run: bool,
    /// What decoding does with unknown and duplicate fields (Warn unless sent).
    pub field_validation: FieldValidation,
    /// `fieldValidation` as sent (None: not sent, or sent empty), which
    /// admission is told of as it was sent.
    pub field_validation_sent: Option<FieldValidation>,
    /// `fieldManager` as sent (may be empty except for apply), which
    /// admission is told of as it was sent.
    pub field_manager: String,
    /// Who the write's changes are recorded for in managedFields:
    /// `fieldManager`, else what the handler derives from the User-Agent.
    pub manager: String,
    /// `force`: an apply takes the fields it conflicts on.
    pub force: bool,
}

impl WriteOptions {
    pub fn from_query(q: &Query, verb: WriteVerb) -> Result<Self, ApiError> {
        let mut errs = Vec::new();
        // ValidatePatchOptions: only an apply may force, and it must name its manager.
        if verb == WriteVerb::Patch && q.get("force").is_some() {
            errs.push(FieldError::forbidden("force", "may not be specified for non-apply patch"));
        }
        let field_manager = q.get("fieldManager").unwrap_or("");
        if verb == WriteVerb::Apply && field_manager.is_empty() {
            errs.push(FieldError::required("fieldManager", "is required for apply patch"));
        }
        errs.extend(validate_field_manager(field_manager));
        let dry_run: Vec<String> = q.all("dryRun").map(str::to_string).collect();
        errs.extend(validate_dry_run(&dry_run));
        let field_validation_sent = match q.get("fieldValidation").unwrap_or("") {
            "" => None,
            "Warn" => Some(FieldValidation::Warn),
            "Ignore" => Some(FieldValidation::Ignore),
            "Strict" => Some(FieldValidation::Strict),
            other => {
                errs.push(
                    FieldError::new(
                        FieldErrorKind::NotSupported,
                        "fieldValidation",
                        "supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
                    )
                    .with_value(&json!(other)),
                );
                None
            }
        };
        if !errs.is_empty() {
            return Err(ApiError::invalid("meta.k8s.io", verb.options_kind(), "", &errs));
        }
        let force = q.get("force").is_some_and(go_param_bool);
        Ok(Self {
            dry_run: !dry_run.is_empty(),
            // kube-apiserver's default since fieldValidation went GA is Warn.
            field_validation: field_validation_sent.unwrap_or(FieldValidation::Warn),
            field_validation_sent,
            field_manager: field_manager.to_string(),
            manager: field_manager.to_string(),
            force,
        })
    }
}

/// `ValidateFieldManager`: at most 128 bytes, printable characters only
/// (the field manager names the writer in managedFields).
fn validate_field_manager(manager: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if manager.len() > FIELD_MANAGER_MAX_LENGTH {
        errs.push(FieldError::new(
            FieldErrorKind::TooLong,
            "fieldManager",
            format!("may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes"),
        ));
    }
    for (pos, c) in manager.char_indices() {
        if !is_go_printable(c) {
            errs.push(FieldError::invalid_raw(
                "fieldManager",
                &go_quote(manager),
                format!("invalid character U+{:04X} (at position {pos})", u32::from(c)),
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(q: &str, verb: WriteVerb) -> Result<WriteOptions, ApiError> {
        WriteOptions::from_query(&Query::parse(Some(q)).unwrap(), verb)
    }

    #[test]
    fn dry_run_only_all_with_kubes_wording() {
        assert!(opts("dryRun=All", WriteVerb::Create).unwrap().dry_run);
        assert!(!opts("", WriteVerb::Create).unwrap().dry_run);
        let e = opts("dryRun=All&dryRun=Bad&fieldValidation=strict", WriteVerb::Update).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "UpdateOptions.meta.k8s.io \"\" is invalid: [dryRun: Unsupported value: [\"All\",\"Bad\"]: supported values: \"All\", fieldValidation: Unsupported value: \"strict\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"]"
        );
        let e = opts("fieldManager=%01&dryRun=Bad", WriteVerb::Create).unwrap_err();
        assert_eq!(
            e.message,
            "CreateOptions.meta.k8s.io \"\" is invalid: [fieldManager: Invalid value: \"\\x01\": invalid character U+0001 (at position 0), dryRun: Unsupported value: [\"Bad\"]: supported values: \"All\"]"
        );
        let long = format!("fieldManager={}", "m".repeat(129));
        assert_eq!(
            opts(&long, WriteVerb::Update).unwrap_err().message,
            "UpdateOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be more than 128 bytes"
        );
        assert_eq!(
            opts("force=true", WriteVerb::Patch).unwrap_err().message,
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
        );
        assert!(opts("force=true", WriteVerb::Create).is_ok());
        assert_eq!(
            opts("force=true", WriteVerb::Apply).unwrap_err().message,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
        );
        assert!(opts("force=true&fieldManager=m", WriteVerb::Apply).unwrap().force);
        // An empty dryRun value is not "no dry run": kube refuses it.
        assert_eq!(opts("dryRun=", WriteVerb::Patch).unwrap_err().code, 422);
    }
}
