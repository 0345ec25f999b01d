//! What a written object is checked against before it is stored: its
//! metadata (and, on an update, what may not change of it), the kind's schema
//! (the status schema alone for a write to `/status`), the schema's CEL rules
//! and the kind's own rules, every cause in one 422, as kube's CRD strategy.

use serde_json::{json, Value};

use super::scale::validate_scale_paths;
use super::{meta_str, Part, Registry};
use crate::apimachinery::errors::ApiResult;
use crate::apimachinery::field_error::{FieldError, FieldErrorKind};
use crate::apimachinery::objectmeta;
use crate::apimachinery::schema::validate::{validate_against_schema, validate_status_against_schema};

impl Registry {
    /// Schema, metadata and kind-specific validation; 422 with every cause.
    /// Validates a new object (and an update against `old`); the warnings
    /// are failed CEL rules an update did not touch (kube's ratcheting).
    pub(super) fn validate(&self, part: Part, obj: &Value, old: Option<&Value>) -> ApiResult<Vec<String>> {
        let empty = json!({});
        let meta = obj.get("metadata").unwrap_or(&empty);
        let mut errs = objectmeta::validate_object_meta(meta, self.kind.namespaced());
        if let Some(old) = old {
            let old_meta = old.get("metadata").unwrap_or(&empty);
            let update_errs = objectmeta::validate_object_meta_update(meta, old_meta);
            // kube-apiserver checks metadata updates twice for a custom
            // resource (the generic BeforeUpdate, then the CRD strategy), so
            // each such cause is listed twice; the message names it once.
            errs.extend(update_errs.iter().cloned());
            errs.extend(update_errs);
        }
        errs.extend(match part {
            Part::Main | Part::Scale => validate_against_schema(obj, &self.schema),
            Part::Status => validate_status_against_schema(obj, &self.schema),
        });
        if let Some(paths) = self.kind.scale() {
            errs.extend(validate_scale_paths(obj, paths, part != Part::Status));
        }
        let mut warnings = Vec::new();
        if let Some(rules) = &self.rules {
            // As apiextensions' strategy: the rules run unless an error
            // makes the object unfit to evaluate them (a wrong type, a
            // missing or unsupported value, a list or string over its bound,
            // which also keeps the rules' cost within their estimate).
            let blocking = errs.iter().any(|e| {
                matches!(
                    e.kind,
                    FieldErrorKind::NotSupported
                        | FieldErrorKind::Required
                        | FieldErrorKind::TooLong
                        | FieldErrorKind::TooMany
                        | FieldErrorKind::TypeInvalid
                )
            });
            if blocking {
                errs.push(FieldError::invalid(
                    "<nil>",
                    &Value::Null,
                    "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
                ));
            } else {
                let results = rules.validate(obj, old);
                errs.extend(results.errors);
                warnings = results.warnings;
            }
        }
        if errs.is_empty() {
            errs.extend(self.kind.validate(obj));
        }
        if errs.is_empty() {
            return Ok(warnings);
        }
        let name =
            meta_str(obj, "name").filter(|n| !n.is_empty()).or_else(|| meta_str(obj, "generateName")).unwrap_or("");
        Err(self.invalid(name, &errs))
    }
}
