//! Field errors: one invalid field of an object, its kind, and how Go renders
//! it. Mirrors k8s.io/apimachinery `pkg/util/validation/field` (`field.Error`,
//! `field.ErrorType`, `ErrorList.ToAggregate`). Turning a list of them into a
//! 422 `metav1.Status` is the HTTP side's job ([`crate::apimachinery::errors`]).

use serde::Serialize;
use serde_json::Value;

use crate::apimachinery::gofmt::go_value;

/// One invalid field, as a `metav1.StatusCause` of a 422 Invalid answer.
///
/// `kind` is the cause type kube-apiserver uses (`FieldValueInvalid`,
/// `FieldValueRequired`, ...); `message` is the text after the field path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldError {
    /// What is wrong with the field.
    pub kind: FieldErrorKind,
    /// The field's path, e.g. `spec.replicas` or `metadata.labels[app]`.
    pub field: String,
    /// The offending value rendered the way Go's `field.Error` renders it, when
    /// the error type shows one (Invalid, NotSupported, Duplicate, TooLong...).
    pub value: Option<String>,
    /// Why, in words (may be empty).
    pub detail: String,
}

/// What is wrong with a field: Go's `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum FieldErrorKind {
    /// The value is not acceptable (`Invalid value`).
    Invalid,
    /// The field must be set (`Required value`).
    Required,
    /// The field may not be set, or not to this value (`Forbidden`).
    Forbidden,
    /// The value repeats another (`Duplicate value`).
    Duplicate,
    /// The value is not one of those allowed (`Unsupported value`).
    NotSupported,
    /// The value is longer than allowed (`Too long`).
    TooLong,
    /// There are more items than allowed (`Too many`).
    TooMany,
    /// The value has the wrong type (`Invalid value`).
    TypeInvalid,
}

impl FieldErrorKind {
    /// The `metav1.CauseType` string.
    pub fn cause_type(self) -> &'static str {
        match self {
            Self::Invalid => "FieldValueInvalid",
            Self::Required => "FieldValueRequired",
            Self::Forbidden => "FieldValueForbidden",
            Self::Duplicate => "FieldValueDuplicate",
            Self::NotSupported => "FieldValueNotSupported",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    fn summary(self) -> &'static str {
        match self {
            Self::Invalid => "Invalid value",
            Self::Required => "Required value",
            Self::Forbidden => "Forbidden",
            Self::Duplicate => "Duplicate value",
            Self::NotSupported => "Unsupported value",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::TypeInvalid => "Invalid value",
        }
    }
}

impl FieldError {
    /// An error of `kind` at `field`, without a value.
    pub fn new(kind: FieldErrorKind, field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { kind, field: field.into(), value: None, detail: detail.into() }
    }

    /// An Invalid error showing `value` as Go shows it.
    ///
    /// ```
    /// use aggregated_apiserver::FieldError;
    /// use serde_json::json;
    ///
    /// let e = FieldError::invalid("spec.times", &json!(0), "must be at least 1");
    /// assert_eq!(e.message_body(), "Invalid value: 0: must be at least 1");
    /// ```
    pub fn invalid(field: impl Into<String>, value: &Value, detail: impl Into<String>) -> Self {
        Self { kind: FieldErrorKind::Invalid, field: field.into(), value: Some(go_value(value)), detail: detail.into() }
    }

    /// A Required error: the field must be set.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Required, field, detail)
    }

    /// A Forbidden error: the field may not be set, or not so.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Forbidden, field, detail)
    }

    /// An Invalid error whose value is shown as given (Go prints some values,
    /// like a missing resourceVersion, unquoted: `Invalid value: 0x0`).
    pub fn invalid_raw(field: impl Into<String>, raw: &str, detail: impl Into<String>) -> Self {
        Self { kind: FieldErrorKind::Invalid, field: field.into(), value: Some(raw.to_string()), detail: detail.into() }
    }

    /// The same error, showing `value` as Go shows it.
    pub fn with_value(mut self, value: &Value) -> Self {
        self.value = Some(go_value(value));
        self
    }

    /// The message body without the field path, e.g.
    /// `Invalid value: "Bad": must be lowercase`.
    pub fn message_body(&self) -> String {
        let mut s = self.kind.summary().to_string();
        if let Some(v) = &self.value {
            s.push_str(": ");
            s.push_str(v);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// `field: body`, the way `field.Error.Error()` prints.
    pub fn full_message(&self) -> String {
        format!("{}: {}", self.field, self.message_body())
    }
}

/// `ErrorList.ToAggregate().Error()` over already rendered errors: duplicates
/// dropped, one error shown bare, several as `[e1, e2]`. `None` when there
/// are no errors.
pub fn aggregate(errs: Vec<String>) -> Option<String> {
    let mut unique: Vec<String> = Vec::with_capacity(errs.len());
    for e in errs {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    match unique.len() {
        0 => None,
        1 => unique.pop(),
        _ => Some(format!("[{}]", unique.join(", "))),
    }
}
