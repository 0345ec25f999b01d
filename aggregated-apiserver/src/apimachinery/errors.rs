//! Every failure leaves the server as a `metav1.Status` body with the code,
//! reason and details kube-apiserver would use for the same situation.
//! Field errors (`apimachinery::field_error`) become a 422 Invalid here, one
//! `metav1.StatusCause` each. How an error is written as an HTTP answer is
//! [`crate::endpoints::status`]'s business.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, Status};
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{StatusCause, StatusDetails};
use serde_json::Value;

use crate::apimachinery::field_error::FieldError;

/// The reason field of a `metav1.Status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    NotAcceptable,
    AlreadyExists,
    Conflict,
    Gone,
    Expired,
    RequestEntityTooLarge,
    UnsupportedMediaType,
    Invalid,
    TooManyRequests,
    InternalError,
    ServiceUnavailable,
    Timeout,
    /// `StatusReasonUnknown`: no reason (kube's answer to an error it did not
    /// classify, e.g. a failed conversion of an applied configuration).
    Unknown,
}

impl Reason {
    /// The reason a Status names; one kube does not define reads as Unknown.
    pub fn parse(text: &str) -> Self {
        const ALL: [Reason; 18] = [
            Reason::BadRequest,
            Reason::Unauthorized,
            Reason::Forbidden,
            Reason::NotFound,
            Reason::MethodNotAllowed,
            Reason::NotAcceptable,
            Reason::AlreadyExists,
            Reason::Conflict,
            Reason::Gone,
            Reason::Expired,
            Reason::RequestEntityTooLarge,
            Reason::UnsupportedMediaType,
            Reason::Invalid,
            Reason::TooManyRequests,
            Reason::InternalError,
            Reason::ServiceUnavailable,
            Reason::Timeout,
            Reason::Unknown,
        ];
        ALL.into_iter().find(|r| r.as_str() == text).unwrap_or(Reason::Unknown)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::BadRequest => "BadRequest",
            Self::Unauthorized => "Unauthorized",
            Self::Forbidden => "Forbidden",
            Self::NotFound => "NotFound",
            Self::MethodNotAllowed => "MethodNotAllowed",
            Self::NotAcceptable => "NotAcceptable",
            Self::AlreadyExists => "AlreadyExists",
            Self::Conflict => "Conflict",
            Self::Gone => "Gone",
            Self::Expired => "Expired",
            Self::RequestEntityTooLarge => "RequestEntityTooLarge",
            Self::UnsupportedMediaType => "UnsupportedMediaType",
            Self::Invalid => "Invalid",
            Self::TooManyRequests => "TooManyRequests",
            Self::InternalError => "InternalError",
            Self::ServiceUnavailable => "ServiceUnavailable",
            Self::Timeout => "Timeout",
            Self::Unknown => "",
        }
    }
}

/// An API error: everything needed to build the `metav1.Status` answer.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: u16,
    pub reason: Reason,
    pub message: String,
    /// Boxed: most errors have none, and results stay small.
    pub details: Option<Box<StatusDetails>>,
    /// Seconds for a Retry-After header (429, 503, 504).
    pub retry_after: Option<u32>,
    /// A Status someone else wrote (an admission webhook's denial), passed on
    /// as it came: its reason need not be one kube defines.
    pub verbatim: Option<Box<Status>>,
    /// Warnings for the client gathered before the request failed (kube
    /// sends them with a failure too).
    pub warnings: Vec<String>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({} {})", self.message, self.code, self.reason.as_str())
    }
}

impl std::error::Error for ApiError {}

pub type ApiResult<T> = Result<T, ApiError>;

/// Names the object an error is about, for `details`.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub group: &'a str,
    pub kind: &'a str,
    /// The plural resource name, used in messages like `widgets.example.com "x" not found`.
    pub resource: &'a str,
    pub name: &'a str,
}

impl Target<'_> {
    /// `widgets.example.com` (or `widgets` for the core group).
    pub fn qualified_resource(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// The same target without its name (kube's MethodNotSupported names no object).
    pub fn without_name(self) -> Self {
        Self { name: "", ..self }
    }

    fn details(&self) -> StatusDetails {
        details(self.group, self.resource, self.name)
    }
}

/// `Some` unless empty: Go's `omitempty`.
fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// StatusDetails naming an object: group, kind (kube puts the resource
/// there) and name, each left out when empty.
pub fn details(group: &str, kind: &str, name: &str) -> StatusDetails {
    StatusDetails { group: non_empty(group), kind: non_empty(kind), name: non_empty(name), ..Default::default() }
}

/// One StatusCause: its reason (`FieldValueInvalid`, ...), message and field.
pub fn cause(reason: &str, message: impl Into<String>, field: &str) -> StatusCause {
    StatusCause { reason: non_empty(reason), message: Some(message.into()), field: non_empty(field) }
}

impl ApiError {
    pub fn new(code: u16, reason: Reason, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
            verbatim: None,
            warnings: Vec::new(),
        }
    }

    /// The same error, with `earlier` warnings before its own.
    pub fn with_warnings(mut self, mut earlier: Vec<String>) -> Self {
        earlier.append(&mut self.warnings);
        self.warnings = earlier;
        self
    }

    /// An error answered with `status` as it is (code, reason, message and
    /// details), as kube passes on a webhook's Status.
    pub fn from_status(status: Status) -> Self {
        let code = status.code.and_then(|c| u16::try_from(c).ok()).unwrap_or(500);
        let reason = Reason::parse(status.reason.as_deref().unwrap_or(""));
        let message = status.message.clone().unwrap_or_default();
        Self { verbatim: Some(Box::new(status)), ..Self::new(code, reason, message) }
    }

    pub fn with_details(mut self, details: StatusDetails) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, Reason::BadRequest, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(401, Reason::Unauthorized, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, Reason::InternalError, message)
    }

    pub fn internal_error(err: impl std::fmt::Display) -> Self {
        Self::internal(format!("Internal error occurred: {err}"))
    }

    /// kube's `NewInternalError` as a registry answers it: [`Self::internal_error`]
    /// with the error as its one cause.
    pub fn internal_error_cause(err: impl std::fmt::Display) -> Self {
        let why = err.to_string();
        let causes = Some(vec![cause("", why.clone(), "")]);
        Self::internal_error(why).with_details(StatusDetails { causes, ..Default::default() })
    }

    pub fn service_unavailable(message: impl Into<String>) -> Self {
        let mut e = Self::new(503, Reason::ServiceUnavailable, message);
        e.retry_after = Some(1);
        e
    }

    /// kube-apiserver's 504 for a request that outlived its deadline (the
    /// request timeout, or a storage call that did not answer in time).
    pub fn deadline_exceeded() -> Self {
        Self::new(
            504,
            Reason::Timeout,
            "Timeout: request did not complete within requested timeout - context deadline exceeded",
        )
        .with_details(StatusDetails::default())
    }

    /// 429 with `Retry-After`, as kube's in-flight limit answers (its words;
    /// kube writes them as plain text, we as a Status like every other failure).
    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: u32) -> Self {
        let mut e = Self::new(429, Reason::TooManyRequests, message);
        e.retry_after = Some(retry_after_seconds);
        e
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, Reason::NotAcceptable, message)
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, Reason::UnsupportedMediaType, message)
    }

    /// 413 in kube's words (`NewRequestEntityTooLargeError`).
    pub fn too_large(why: impl std::fmt::Display) -> Self {
        Self::new(413, Reason::RequestEntityTooLarge, format!("Request entity too large: {why}"))
    }

    /// A path that matches nothing served here: kube-apiserver answers a bare
    /// 404 Status with message "the server could not find the requested resource".
    pub fn path_not_found() -> Self {
        Self::new(404, Reason::NotFound, "the server could not find the requested resource")
            .with_details(StatusDetails::default())
    }

    pub fn not_found(t: Target<'_>) -> Self {
        Self::new(404, Reason::NotFound, format!("{} \"{}\" not found", t.qualified_resource(), t.name))
            .with_details(t.details())
    }

    pub fn already_exists(t: Target<'_>) -> Self {
        Self::new(409, Reason::AlreadyExists, format!("{} \"{}\" already exists", t.qualified_resource(), t.name))
            .with_details(t.details())
    }

    /// 409 Conflict, e.g. a stale resourceVersion on update.
    pub fn conflict(t: Target<'_>, why: impl std::fmt::Display) -> Self {
        Self::new(
            409,
            Reason::Conflict,
            format!("Operation cannot be fulfilled on {} \"{}\": {why}", t.qualified_resource(), t.name),
        )
        .with_details(t.details())
    }

    pub fn method_not_allowed(t: Target<'_>, verb: &str) -> Self {
        let d = t.details();
        Self::new(
            405,
            Reason::MethodNotAllowed,
            format!("{verb} is not supported on resources of kind \"{}\"", t.qualified_resource()),
        )
        .with_details(d)
    }

    /// 410 Expired, e.g. a compacted continue token or resourceVersion.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, Reason::Expired, message)
    }

    /// 410 Gone, what the watch cache says about a resourceVersion too old to resume from.
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, Reason::Gone, message)
    }

    /// 422 Invalid with one cause per bad field, worded like kube-apiserver:
    /// `Widget.example.com "x" is invalid: [a: Invalid value..., b: ...]`.
    pub fn invalid(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Self {
        let qualified_kind = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        // Go's ErrorList.ToAggregate names each distinct message once.
        let mut messages: Vec<String> = Vec::new();
        for e in errors {
            let m = e.full_message();
            if !messages.contains(&m) {
                messages.push(m);
            }
        }
        let list = match messages.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let causes: Vec<StatusCause> =
            errors.iter().map(|e| cause(e.kind.cause_type(), e.message_body(), &e.field)).collect();
        let details = StatusDetails { causes: Some(causes), ..details(group, kind, name) };
        Self::new(422, Reason::Invalid, format!("{qualified_kind} \"{name}\" is invalid: {list}")).with_details(details)
    }

    /// The `metav1.Status` document of this error.
    pub fn status(&self) -> Status {
        if let Some(status) = &self.verbatim {
            return Status { metadata: ListMeta::default(), ..(**status).clone() };
        }
        let mut details = self.details.as_deref().cloned();
        if let Some(secs) = self.retry_after {
            details.get_or_insert_with(StatusDetails::default).retry_after_seconds =
                Some(i32::try_from(secs).unwrap_or(i32::MAX));
        }
        Status {
            code: Some(i32::from(self.code)),
            details,
            message: Some(self.message.clone()),
            metadata: ListMeta::default(),
            reason: non_empty(self.reason.as_str()),
            status: Some("Failure".into()),
        }
    }

    pub fn status_body(&self) -> Value {
        serde_json::to_value(self.status()).unwrap_or(Value::Null)
    }
}

/// A large computation stopped at its request's deadline (crate::heavy).
impl From<crate::heavy::DeadlineExceeded> for ApiError {
    fn from(_: crate::heavy::DeadlineExceeded) -> Self {
        ApiError::deadline_exceeded()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn invalid_lists_every_cause_like_kube() {
        let errs = vec![
            FieldError::invalid("spec.weight", &json!(-1), "must be greater than 0"),
            FieldError::required("spec.height", ""),
        ];
        let e = ApiError::invalid("example.com", "Widget", "x", &errs);
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "Widget.example.com \"x\" is invalid: [spec.weight: Invalid value: -1: must be greater than 0, spec.height: Required value]"
        );
        let b = e.status_body();
        assert_eq!(b["details"]["causes"][0]["reason"], "FieldValueInvalid");
        assert_eq!(b["details"]["causes"][1]["field"], "spec.height");
    }

    #[test]
    fn not_found_names_qualified_resource() {
        let t = Target { group: "example.com", kind: "Widget", resource: "widgets", name: "bob" };
        let e = ApiError::not_found(t);
        assert_eq!(e.message, "widgets.example.com \"bob\" not found");
        assert_eq!(e.status_body()["details"]["kind"], "widgets");
    }
}
