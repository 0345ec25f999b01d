//! One request's audit record (k8s.io/apiserver `pkg/audit/context.go`'s
//! `AuditContext`): the event under construction, what the policy decided for
//! it, and the stages written so far. While auditing is on, every request
//! carries one in its extensions, and it is the hook the rest of the server
//! uses to add to the event:
//!
//! ```ignore
//! if let Some(audit) = req.extensions().get::<AuditContext>() {
//!     audit.add_annotation("validation.policy.admission.k8s.io/validation_failure", "...");
//! }
//! ```
//!
//! ([`add_annotation`] does exactly that.) Annotations are kept whatever the
//! level (the policy may not have been evaluated yet when they are added) and
//! written with the events that follow; as in kube, the first value of a key
//! wins and a different later one is logged and ignored. With auditing off no
//! request has one, and all of this costs a lookup in the extensions.

use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use k8s_openapi::api::authentication::v1::UserInfo as EventUser;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusDetails};
use serde_json::Value;

use super::event::{Event, Level, ObjectReference, Stage};
use super::policy::{Attributes, RequestAuditConfig};
use super::request::{body_json, strip_managed_fields};
use super::Auditor;
use crate::auth::authn::UserInfo;
use crate::endpoints::request_info::RequestInfo;

/// Bytes of a request or response body kept for its event, at most; a larger
/// body is recorded without its object (kube's own bound is the truncate
/// backend's event size, which applies on top of this).
pub const MAX_CAPTURED_BYTES: usize = 10 << 20;

/// Adds an annotation to the audit event of the request whose extensions
/// these are; nothing when the request is not audited.
pub fn add_annotation(extensions: &http::Extensions, key: &str, value: &str) {
    if let Some(audit) = extensions.get::<AuditContext>() {
        audit.add_annotation(key, value);
    }
}

/// A request's audit record: cheap to clone, shared by the filters, the body
/// wrappers and whoever annotates it.
#[derive(Clone)]
pub struct AuditContext(Arc<Record>);

struct Record {
    auditor: Arc<Auditor>,
    audit_id: String,
    state: Mutex<State>,
}

struct State {
    /// None until the policy is evaluated, after authentication.
    config: Option<RequestAuditConfig>,
    /// Shared with the backends once written: changed through [`State::event`],
    /// which copies it only while a backend still holds a stage written before
    /// (a batch buffer); a blocking backend has let go by then, so writing
    /// RequestReceived no longer copies the event (callgrind: a clone and its
    /// drop, 3,000 instructions of an audited GET).
    event: Arc<Event>,
    /// The request body as the handler read it, when its object is recorded.
    request_body: Option<Captured>,
    request_content_type: Option<String>,
    response_content_type: Option<String>,
    response_content_encoding: Option<String>,
    /// ResponseComplete (or Panic) has been written: nothing more is.
    finished: bool,
}

impl State {
    /// The event, to change.
    fn event(&mut self) -> &mut Event {
        Arc::make_mut(&mut self.event)
    }
}

/// Body bytes kept up to [`MAX_CAPTURED_BYTES`].
#[derive(Default)]
pub struct Captured {
    chunks: Vec<Bytes>,
    len: usize,
    overflowed: bool,
}

impl Captured {
    pub fn push(&mut self, chunk: &Bytes) {
        if self.overflowed || self.len + chunk.len() > MAX_CAPTURED_BYTES {
            self.overflowed = true;
            self.chunks.clear();
            return;
        }
        self.len += chunk.len();
        self.chunks.push(chunk.clone());
    }

    pub(crate) fn bytes(&self) -> Option<Vec<u8>> {
        (!self.overflowed).then(|| self.chunks.concat())
    }
}

/// What the request looked like when it arrived.
pub struct Arrival<'a> {
    pub received: DateTime<Utc>,
    pub request_uri: String,
    pub source_ips: Vec<String>,
    pub user_agent: String,
    pub content_type: Option<&'a str>,
    pub info: &'a RequestInfo,
}

impl AuditContext {
    pub(crate) fn new(auditor: Arc<Auditor>, audit_id: String, arrival: Arrival<'_>) -> Self {
        let mut event = Event::new(Level::None, audit_id.clone(), arrival.received);
        event.request_uri = arrival.request_uri;
        event.verb = arrival.info.verb.as_str().to_string();
        event.source_ips = arrival.source_ips;
        event.user_agent = arrival.user_agent;
        if arrival.info.is_resource_request {
            let info = arrival.info;
            event.object_ref = Some(ObjectReference {
                resource: info.resource.clone(),
                namespace: info.namespace.clone(),
                name: info.name.clone(),
                api_group: info.api_group.clone(),
                api_version: info.api_version.clone(),
                subresource: info.subresource.clone(),
                ..Default::default()
            });
        }
        let state = State {
            config: None,
            event: Arc::new(event),
            request_body: None,
            request_content_type: arrival.content_type.map(str::to_string),
            response_content_type: None,
            response_content_encoding: None,
            finished: false,
        };
        Self(Arc::new(Record { auditor, audit_id, state: Mutex::new(state) }))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves a record still worth writing.
        self.0.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The request's audit ID (the aggregator's `Audit-ID`, or one made here).
    pub fn audit_id(&self) -> &str {
        &self.0.audit_id
    }

    /// The level the policy chose, once it has (after authentication).
    pub fn level(&self) -> Option<Level> {
        self.state().config.map(|c| c.level)
    }

    /// Adds `key: value` to the event's annotations; a key already set to
    /// another value keeps it (logged), as kube's `AddAuditAnnotation`.
    pub fn add_annotation(&self, key: &str, value: &str) {
        let mut state = self.state();
        if state.config.is_some_and(|c| c.level == Level::None) {
            return;
        }
        match state.event.annotations.get(key) {
            Some(existing) if existing != value => tracing::warn!(
                audit_id = %self.0.audit_id, key, value, existing = %existing,
                "audit annotation already set to another value; keeping the first"
            ),
            Some(_) => {}
            None => {
                state.event().annotations.insert(key.to_string(), value.to_string());
            }
        }
    }

    /// Evaluates the policy for the request `info` made by `user` (None:
    /// nobody was authenticated) and records who that is. Once only.
    pub(crate) fn evaluate(&self, user: Option<&UserInfo>, info: &RequestInfo) -> RequestAuditConfig {
        let mut state = self.state();
        if let Some(config) = state.config {
            return config;
        }
        let config = self.0.auditor.policy.evaluate(&Attributes { user, info });
        self.0.auditor.metrics.level(config.level);
        state.config = Some(config);
        state.event().level = config.level;
        if let Some(user) = user {
            state.event().user = event_user(user);
        }
        config
    }

    /// The request as its event describes it, for a policy evaluated after
    /// the request's own description is gone (a refusal before authentication).
    pub(crate) fn request_info(&self) -> RequestInfo {
        use crate::endpoints::request_info::RequestVerb;
        let state = self.state();
        let event = &state.event;
        let path = event.request_uri.split('?').next().unwrap_or_default().to_string();
        let resource_verb = crate::registry::kind::Verb::ALL.iter().find(|v| v.as_str() == event.verb);
        let verb = match resource_verb {
            Some(verb) if event.object_ref.is_some() => RequestVerb::Resource(*verb),
            _ => RequestVerb::Method(event.verb.clone().into()),
        };
        let mut info = RequestInfo { path, verb, ..Default::default() };
        if let Some(r) = &event.object_ref {
            info.is_resource_request = true;
            info.api_group = r.api_group.clone();
            info.api_version = r.api_version.clone();
            info.namespace = r.namespace.clone();
            info.resource = r.resource.clone();
            info.subresource = r.subresource.clone();
            info.name = r.name.clone();
        }
        info
    }

    /// The user the request acts as after impersonation (kube's `LogImpersonatedUser`).
    pub(crate) fn set_impersonated_user(&self, user: &UserInfo) {
        let mut state = self.state();
        if state.config.is_some_and(|c| c.level >= Level::Metadata) {
            state.event().impersonated_user = Some(event_user(user));
        }
    }

    /// Whether the request body is kept for the event: for the object of a
    /// Request-level event, and for the name of a created object.
    pub(crate) fn wants_request_body(&self) -> bool {
        let state = self.state();
        let level = state.config.map_or(Level::None, |c| c.level);
        level >= Level::Request
            || (level >= Level::Metadata && state.event.object_ref.is_some() && state.event.verb == "create")
    }

    pub(crate) fn start_request_body(&self) {
        self.state().request_body = Some(Captured::default());
    }

    pub(crate) fn request_chunk(&self, chunk: &Bytes) {
        if let Some(body) = self.state().request_body.as_mut() {
            body.push(chunk);
        }
    }

    /// The response's code and how its body is encoded.
    pub(crate) fn responded(&self, code: u16, content_type: Option<&str>, content_encoding: Option<&str>) {
        let mut state = self.state();
        state.event().response_status = Some(Status { code: Some(i32::from(code)), ..Default::default() });
        state.response_content_type = content_type.map(str::to_string);
        state.response_content_encoding = content_encoding.map(str::to_string);
    }

    /// Whether the response body is kept: the object of a RequestResponse
    /// event (never a watch stream), and a Status for responseStatus: every
    /// failure's (a watch refused before it streams too), and a delete's
    /// (kube answers a delete that removed the object with a Success Status).
    pub(crate) fn wants_response_body(&self, code: u16, long_running: bool) -> bool {
        let state = self.state();
        let level = state.config.map_or(Level::None, |c| c.level);
        let may_be_status = code >= 400 || state.event.verb == "delete";
        (level == Level::RequestResponse && !long_running) || (level >= Level::Metadata && may_be_status)
    }

    /// The handler panicked: the Panic stage, with kube's 500 (kube writes no
    /// ResponseComplete after it).
    pub(crate) async fn panicked(&self, what: &str) {
        {
            let mut state = self.state();
            state.event().response_status = Some(Status {
                code: Some(500),
                status: Some("Failure".into()),
                reason: Some("InternalError".into()),
                message: Some(format!("APIServer panic'd: {what}")),
                ..Default::default()
            });
        }
        self.process(Stage::Panic).await;
        self.state().finished = true;
    }

    /// Fills in the bodies (`response`: what the client was sent, when kept)
    /// and writes the ResponseComplete event.
    pub(crate) async fn complete(&self, response: Option<Vec<u8>>) {
        {
            let mut state = self.state();
            if state.finished {
                return;
            }
            let State { event, config, request_body, request_content_type, .. } = &mut *state;
            let Some(config) = *config else { return };
            if let Some(bytes) = request_body.take().and_then(|b| b.bytes()) {
                record_request(Arc::make_mut(event), &config, request_content_type.as_deref(), &bytes);
            }
            if let Some(bytes) = response {
                let (ct, ce) = (state.response_content_type.clone(), state.response_content_encoding.clone());
                let event = state.event();
                record_response(event, &config, ct.as_deref(), ce.as_deref(), &bytes);
            }
        }
        self.process(Stage::ResponseComplete).await;
        self.state().finished = true;
    }

    /// Answered before the policy was evaluated (kube's `withFailedRequestAudit`):
    /// the Status of the refusal, in one ResponseStarted event.
    pub(crate) async fn refused(&self, body: &[u8]) {
        {
            let mut state = self.state();
            let Some(config) = state.config else { return };
            let (ct, ce) = (state.response_content_type.clone(), state.response_content_encoding.clone());
            record_response(state.event(), &config, ct.as_deref(), ce.as_deref(), body);
            // kube's failed-request event carries no response object.
            state.event().response_object = None;
        }
        self.process(Stage::ResponseStarted).await;
        self.state().finished = true;
    }

    /// The handler was dropped before it answered (the client went away).
    pub(crate) async fn closed_early(&self) {
        {
            let mut state = self.state();
            if state.config.is_none() || state.finished {
                return;
            }
            state.event().response_status = Some(Status {
                code: Some(200),
                status: Some("Success".into()),
                message: Some("Connection closed early".into()),
                ..Default::default()
            });
        }
        self.complete(None).await
    }

    /// A request refused because its event could not be stored.
    pub(crate) fn rejected(&self) {
        self.0.auditor.metrics.rejected();
    }

    /// Writes the event as it stands at `stage`, unless the policy leaves the
    /// stage out; false when a strict backend could not write it.
    pub(crate) async fn process(&self, stage: Stage) -> bool {
        let event = {
            let mut state = self.state();
            let Some(config) = state.config else { return true };
            if config.level == Level::None || config.omit_stages.contains(stage) || state.finished {
                return true;
            }
            let event = state.event();
            event.stage = stage;
            event.stage_timestamp =
                if stage == Stage::RequestReceived { event.request_received_timestamp } else { Utc::now() };
            if matches!(stage, Stage::ResponseComplete | Stage::Panic) {
                // Nothing is written after these.
                state.finished = true;
            }
            state.event.clone()
        };
        self.0.auditor.process(event).await
    }
}

fn event_user(user: &UserInfo) -> EventUser {
    EventUser {
        username: Some(user.name.clone()).filter(|n| !n.is_empty()),
        uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
        groups: Some(user.groups.clone()).filter(|g| !g.is_empty()),
        extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
    }
}

/// The request's object (Request level and up), and the name and namespace
/// of a created object for its objectRef (kube's `LogRequestObject`).
fn record_request(event: &mut Event, config: &RequestAuditConfig, content_type: Option<&str>, bytes: &[u8]) {
    let Some(mut object) = body_json(content_type, None, bytes, MAX_CAPTURED_BYTES) else { return };
    if let Some(reference) = event.object_ref.as_mut() {
        let meta = |key: &str| object.pointer(&format!("/metadata/{key}")).and_then(Value::as_str).map(str::to_string);
        if reference.name.is_empty() && event.verb == "create" {
            reference.name = meta("name").unwrap_or_default();
        }
        if reference.namespace.is_empty() && event.verb == "create" {
            reference.namespace = meta("namespace").unwrap_or_default();
        }
    }
    if config.level < Level::Request {
        return;
    }
    // A patch is recorded as sent; objects without their managedFields when the policy says so.
    if config.omit_managed_fields && event.verb != "patch" {
        strip_managed_fields(&mut object);
    }
    event.request_object = Some(object);
}

/// A failure's Status into responseStatus (every level), the object into
/// responseObject (RequestResponse), as kube's `LogResponseObject`.
fn record_response(
    event: &mut Event,
    config: &RequestAuditConfig,
    content_type: Option<&str>,
    content_encoding: Option<&str>,
    bytes: &[u8],
) {
    let Some(mut object) = body_json(content_type, content_encoding, bytes, MAX_CAPTURED_BYTES) else { return };
    if object.get("kind").and_then(Value::as_str) == Some("Status") {
        let text = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_string);
        let code = event.response_status.as_ref().and_then(|s| s.code);
        event.response_status = Some(Status {
            code: object.get("code").and_then(Value::as_i64).and_then(|c| i32::try_from(c).ok()).or(code),
            status: text("status"),
            message: text("message"),
            reason: text("reason"),
            details: object.get("details").and_then(|d| serde_json::from_value::<StatusDetails>(d.clone()).ok()),
            ..Default::default()
        });
    }
    if config.level < Level::RequestResponse {
        return;
    }
    if config.omit_managed_fields {
        strip_managed_fields(&mut object);
    }
    event.response_object = Some(object);
}
