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
//! Annotations are kept whatever the
//! level (the policy may not have been evaluated yet when they are added) and
//! written with the events that follow; as in kube, the first value of a key
//! wins and a different later one is logged and ignored. With auditing off no
//! request has one, and all of this costs a lookup in the extensions.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::uri::PathAndQuery;
use http::{header, HeaderMap, HeaderValue, Uri};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusDetails};
use serde_json::Value;

use super::backend::Handed;
use super::encode::{annotation_json, shared_annotation_json, shared_user_json, user_json, EventRef, Parts};
use super::event::{Event, Level, ObjectReference, Stage};
use super::parts::{Annotation, Annotations, RefText, RequestParts};
use super::policy::{Attributes, RequestAuditConfig};
use super::request::{body_json, strip_managed_fields};
use super::ticket::Ticket;
use super::Auditor;
use crate::apimachinery::request_info::{RequestInfo, RequestVerb};
use crate::apimachinery::resource::Verb;
use crate::auth::authn::UserInfo;

/// Bytes of a request or response body kept for its event, at most; a larger
/// body is recorded without its object (kube's own bound is the truncate
/// backend's event size, which applies on top of this).
pub const MAX_CAPTURED_BYTES: usize = 10 << 20;

/// A request's audit record: cheap to clone, shared by the filters, the body
/// wrappers and whoever annotates it.
#[derive(Clone)]
pub struct AuditContext(Arc<Record>);

struct Record {
    auditor: Arc<Auditor>,
    request: RequestParts,
    state: Mutex<State>,
}

/// What the request's events gather as it is served.
#[derive(Default)]
struct State {
    /// Decided before authentication when no user could change it
    /// ([`super::policy::PolicyEvaluator::evaluate_early`]), else by [`AuditContext::evaluate`].
    config: Option<RequestAuditConfig>,
    /// The policy step after authentication has run (or the request was
    /// answered before it: see [`AuditContext::evaluate`]).
    evaluated: bool,
    /// The user and the user impersonated, as their events' JSON.
    user: Option<Arc<str>>,
    impersonated_user: Option<Arc<str>>,
    /// A created object's reference, its name and namespace from the body.
    /// Boxed, as the Status below: each is rare and large, and a record
    /// over 1,032 bytes is past glibc's per-thread cache, so every audited
    /// request's record would go through the arena (measured:
    /// docs/performance.md, "Auditing: the record and its encoding").
    object_ref: Option<Box<ObjectReference>>,
    /// The answer's code: every answered request's responseStatus.
    response_code: Option<u16>,
    /// A responseStatus that says more than the code (a failure's Status, a
    /// panic, a connection closed early); written instead of the bare code.
    response_status: Option<Box<Status>>,
    request_object: Option<Value>,
    response_object: Option<Value>,
    annotations: Annotations,
    /// The request body as the handler read it, when its object is recorded.
    request_body: Option<Captured>,
    request_content_type: Option<HeaderValue>,
    response_content_type: Option<String>,
    response_content_encoding: Option<String>,
    /// ResponseComplete (or Panic) has been written: nothing more is.
    finished: bool,
    /// RequestReceived, queued in a group its request has not awaited yet:
    /// a read answered at once waits for it with its ResponseComplete
    /// ([`AuditContext::defer_received`]).
    received_unwritten: Option<Ticket>,
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
    pub audit_id: HeaderValue,
    pub received: DateTime<Utc>,
    pub headers: &'a HeaderMap,
    pub uri: &'a Uri,
    pub peer: Option<SocketAddr>,
    pub info: &'a RequestInfo,
    /// The policy's decision when it needs no user.
    pub config: Option<RequestAuditConfig>,
}

/// An event that a backend has to keep or await ([`AuditContext::process_now`]).
pub(crate) enum Pending {
    /// For a backend that waits: the event, owned.
    Owned(Arc<Auditor>, Box<Event>),
    /// Queued in a group written shortly ([`super::group`]).
    Queued(Ticket),
    /// An owned event after a RequestReceived still queued, awaited first.
    OwnedAfter(Ticket, Arc<Auditor>, Box<Event>),
}

impl Pending {
    /// Whether the event is recorded: false when a strict backend failed.
    pub async fn process(self) -> bool {
        match self {
            Pending::Owned(auditor, event) => auditor.process_owned(event).await,
            Pending::Queued(ticket) => ticket.wait().await,
            Pending::OwnedAfter(received, auditor, event) => {
                let received = received.wait().await;
                auditor.process_owned(event).await && received
            }
        }
    }
}

impl AuditContext {
    pub(crate) fn new(auditor: Arc<Auditor>, arrival: Arrival<'_>) -> Self {
        let uri = arrival.uri;
        // One pass over the few headers rather than a hashed lookup for each
        // of the four, which costs more on every request.
        let (mut forwarded_for, mut real_ip, mut user_agent, mut content_type) = (None, None, None, None);
        for (name, value) in arrival.headers {
            let slot = if name == header::USER_AGENT {
                &mut user_agent
            } else if name == header::CONTENT_TYPE {
                &mut content_type
            } else if name.as_str() == "x-forwarded-for" {
                &mut forwarded_for
            } else if name.as_str() == "x-real-ip" {
                &mut real_ip
            } else {
                continue;
            };
            // The first of a repeated header, as `HeaderMap::get` answers.
            if slot.is_none() {
                *slot = Some(value.clone());
            }
        }
        let request = RequestParts {
            audit_id: arrival.audit_id,
            received: arrival.received,
            uri: uri
                .path_and_query()
                .cloned()
                .or_else(|| PathAndQuery::try_from(uri.path()).ok())
                .unwrap_or_else(|| PathAndQuery::from_static("/")),
            verb: arrival.info.verb.clone(),
            forwarded_for,
            real_ip,
            peer: arrival.peer.map(|p| p.ip().to_canonical()),
            user_agent,
            object_ref: arrival.info.is_resource_request.then(|| RefText::new(arrival.info)),
            encoded: Default::default(),
        };
        if let Some(config) = arrival.config {
            auditor.metrics.level(config.level);
        }
        let state = State { config: arrival.config, request_content_type: content_type, ..Default::default() };
        Self(Arc::new(Record { auditor, request, state: Mutex::new(state) }))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves a record still worth writing.
        self.0.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The request's audit ID (the aggregator's `Audit-ID`, or one made here).
    pub fn audit_id(&self) -> &HeaderValue {
        &self.0.request.audit_id
    }

    /// The level the policy chose, once the policy step has run (after authentication).
    pub fn level(&self) -> Option<Level> {
        let state = self.state();
        state.config.filter(|_| state.evaluated).map(|c| c.level)
    }

    /// Adds `key: value` to the event's annotations; a key already set to
    /// another value keeps it (logged), as kube's `AddAuditAnnotation`.
    pub fn add_annotation(&self, key: &str, value: &str) {
        self.annotate(Cow::Owned(key.to_string()), value, || (Arc::from(value), annotation_json(key, value)));
    }

    /// [`Self::add_annotation`] of a value the caller already shares (the
    /// authorizer's cached reason): neither is copied.
    pub fn add_shared_annotation(&self, key: &'static str, value: &Arc<str>) {
        self.annotate(Cow::Borrowed(key), value, || (value.clone(), shared_annotation_json(key, value)));
    }

    /// `made`: the value to keep and its annotation's JSON, when it is kept.
    fn annotate(&self, key: Cow<'static, str>, value: &str, made: impl FnOnce() -> (Arc<str>, Arc<str>)) {
        let mut state = self.state();
        if state.config.is_some_and(|c| c.level == Level::None) {
            return;
        }
        match state.annotations.find(&key) {
            Ok(at) => {
                let existing = &state.annotations.0[at].value;
                if **existing != *value {
                    tracing::warn!(
                        audit_id = ?self.0.request.audit_id, key = %key, value, existing = %existing,
                        "audit annotation already set to another value; keeping the first"
                    );
                }
            }
            Err(at) => {
                let (value, json) = made();
                state.annotations.0.insert(at, Annotation { key, value, json });
            }
        }
    }

    /// The policy step for the request `info` made by `user` (None: nobody
    /// was authenticated): the policy is evaluated unless it was decided on
    /// arrival, and the user recorded. Once only.
    pub(crate) fn evaluate(&self, user: Option<&Arc<UserInfo>>, info: &RequestInfo) -> RequestAuditConfig {
        let mut state = self.state();
        let config = match state.config {
            Some(config) => config,
            None => {
                let config = self.0.auditor.policy.evaluate(&Attributes { user: user.map(|u| &**u), info });
                self.0.auditor.metrics.level(config.level);
                state.config = Some(config);
                config
            }
        };
        if state.evaluated {
            return config;
        }
        state.evaluated = true;
        if config.level >= Level::Metadata {
            state.user = user.map(shared_user_json);
        }
        config
    }

    /// The request as its record describes it, for a policy evaluated after
    /// the request's own description is gone (a refusal before authentication).
    pub(crate) fn request_info(&self) -> RequestInfo {
        let r = &self.0.request;
        match &r.object_ref {
            Some(fields) => {
                let [resource, namespace, name, group, version, subresource] = fields.fields();
                let parts = [group, version, namespace, resource, subresource, name];
                RequestInfo::resource_request(r.verb.clone(), r.uri.path(), parts)
            }
            None => RequestInfo::non_resource(r.verb.clone(), r.uri.path()),
        }
    }

    /// The user the request acts as after impersonation (kube's `LogImpersonatedUser`).
    pub(crate) fn set_impersonated_user(&self, user: &UserInfo) {
        let mut state = self.state();
        if state.config.is_some_and(|c| c.level >= Level::Metadata) {
            state.impersonated_user = Some(user_json(user));
        }
    }

    /// Whether the request body is kept for the event: for the object of a
    /// Request-level event, and for the objectRef of a create or an update
    /// (a created object's name, the uid and resourceVersion sent).
    pub(crate) fn wants_request_body(&self) -> bool {
        let level = self.state().config.map_or(Level::None, |c| c.level);
        level >= Level::Request || (level >= Level::Metadata && self.0.request.sends_object())
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
        state.response_code = Some(code);
        state.response_content_type = content_type.map(str::to_string);
        state.response_content_encoding = content_encoding.map(str::to_string);
    }

    /// Whether the response body is kept: the object of a RequestResponse
    /// event (never a watch stream), and a Status for responseStatus: every
    /// failure's (a watch refused before it streams too), and a delete's
    /// (kube answers a delete that removed the object with a Success Status).
    pub(crate) fn wants_response_body(&self, code: u16, long_running: bool) -> bool {
        let level = self.state().config.map_or(Level::None, |c| c.level);
        let may_be_status = code >= 400 || self.0.request.verb == RequestVerb::Resource(Verb::Delete);
        (level == Level::RequestResponse && !long_running) || (level >= Level::Metadata && may_be_status)
    }

    /// The handler panicked: the Panic stage, with kube's 500 (kube writes no
    /// ResponseComplete after it).
    pub(crate) fn panicked_now(&self, what: &str) -> Option<Pending> {
        self.state().response_status = Some(Box::new(Status {
            code: Some(500),
            status: Some("Failure".into()),
            reason: Some("InternalError".into()),
            message: Some(format!("APIServer panic'd: {what}")),
            ..Default::default()
        }));
        let pending = self.process_now(Stage::Panic).err();
        self.state().finished = true;
        pending
    }

    /// Fills in the bodies (`response`: what the client was sent, when kept)
    /// and writes the ResponseComplete event; what a backend still has to
    /// await is returned.
    pub(crate) fn complete_now(&self, response: Option<Vec<u8>>) -> Option<Pending> {
        {
            let mut state = self.state();
            if state.finished {
                return None;
            }
            let config = state.config.filter(|_| state.evaluated)?;
            if let Some(bytes) = state.request_body.take().and_then(|b| b.bytes()) {
                self.record_request(&mut state, &config, &bytes);
            }
            if let Some(bytes) = response {
                record_response(&mut state, &config, &bytes);
            }
        }
        let pending = self.process_now(Stage::ResponseComplete).err();
        self.state().finished = true;
        pending
    }

    pub(crate) async fn complete(&self, response: Option<Vec<u8>>) {
        if let Some(pending) = self.complete_now(response) {
            pending.process().await;
        }
    }

    /// Answered before the policy was evaluated (kube's `withFailedRequestAudit`):
    /// the Status of the refusal, in one ResponseStarted event.
    pub(crate) async fn refused(&self, body: &[u8]) {
        {
            let mut state = self.state();
            let Some(config) = state.config else { return };
            record_response(&mut state, &config, body);
            // kube's failed-request event carries no response object.
            state.response_object = None;
        }
        self.process(Stage::ResponseStarted).await;
        self.state().finished = true;
    }

    /// The handler was dropped before it answered (the client went away).
    pub(crate) async fn closed_early(&self) {
        {
            let mut state = self.state();
            if !state.evaluated || state.finished {
                return;
            }
            state.response_status = Some(Box::new(Status {
                code: Some(200),
                status: Some("Success".into()),
                message: Some("Connection closed early".into()),
                ..Default::default()
            }));
        }
        self.complete(None).await
    }

    /// Leaves the RequestReceived event of a request that only reads, and
    /// that its handler answered at once, queued until its ResponseComplete
    /// is: the request then waits once for both, written together. Whoever
    /// writes a later stage awaits it first ([`Self::process_now`]), so the
    /// log keeps the order of the stages, and the answer waits for both.
    pub(crate) fn defer_received(&self, ticket: Ticket) {
        self.state().received_unwritten = Some(ticket);
    }

    /// The RequestReceived left queued by [`Self::defer_received`], for the
    /// caller to await before the request's answer goes out.
    pub(crate) fn take_received_unwritten(&self) -> Option<Ticket> {
        self.state().received_unwritten.take()
    }

    /// A request refused because its event could not be stored.
    pub(crate) fn rejected(&self) {
        self.0.auditor.metrics.rejected();
    }

    /// Writes the event as it stands at `stage`, unless the policy leaves the
    /// stage out; false when a strict backend could not write it.
    pub(crate) async fn process(&self, stage: Stage) -> bool {
        match self.process_now(stage) {
            Ok(ok) => ok,
            Err(pending) => pending.process().await,
        }
    }

    /// [`Self::process`] as far as it goes without waiting: written from the
    /// record under its lock when every backend writes at once (a file, a
    /// batch buffer); else the event, owned, for the caller to await.
    pub(crate) fn process_now(&self, stage: Stage) -> Result<bool, Pending> {
        let mut state = self.state();
        // Nothing before the policy step (a panic in authentication is not
        // the request's to record, as kube's WithAudit sits inside it).
        let Some(config) = state.config.filter(|_| state.evaluated) else { return Ok(true) };
        if config.level == Level::None || config.omit_stages.contains(stage) || state.finished {
            return Ok(true);
        }
        if matches!(stage, Stage::ResponseComplete | Stage::Panic) {
            // Nothing is written after these.
            state.finished = true;
        }
        // Awaited before this stage's event: its group is written by whoever awaits it.
        let received = state.received_unwritten.take();
        let request = &self.0.request;
        let event = EventRef::parts(Parts {
            request,
            level: config.level,
            stage,
            stage_timestamp: if stage == Stage::RequestReceived { request.received } else { Utc::now() },
            user: state.user.as_deref(),
            impersonated_user: state.impersonated_user.as_deref(),
            object_ref: state.object_ref.as_deref(),
            response_code: state.response_code,
            response_status: state.response_status.as_deref(),
            request_object: state.request_object.as_ref(),
            response_object: state.response_object.as_ref(),
            annotations: &state.annotations,
        });
        let auditor = &self.0.auditor;
        match (auditor.process_now(&event), received) {
            (Some(Handed::Done(ok)), None) => Ok(ok),
            (Some(Handed::Done(ok)), Some(received)) => Err(Pending::Queued(received.and(ok))),
            (Some(Handed::Queued(ticket)), None) => Err(Pending::Queued(ticket)),
            (Some(Handed::Queued(ticket)), Some(received)) => Err(Pending::Queued(received.then(ticket))),
            (None, None) => Err(Pending::Owned(auditor.clone(), Box::new(event.to_event()))),
            (None, Some(received)) => Err(Pending::OwnedAfter(received, auditor.clone(), Box::new(event.to_event()))),
        }
    }

    /// The request's object (Request level and up), and what kube's
    /// `LogRequestObject` takes from a created or updated object's metadata
    /// into the objectRef: each of name, namespace, uid and resourceVersion
    /// the request's path did not give (an update's resourceVersion is the
    /// one it was sent with).
    fn record_request(&self, state: &mut State, config: &RequestAuditConfig, bytes: &[u8]) {
        let content_type = state.request_content_type.as_ref().and_then(|v| v.to_str().ok());
        let Some(mut object) = body_json(content_type, None, bytes, MAX_CAPTURED_BYTES) else { return };
        if self.0.request.sends_object() {
            if let Some(mut reference) = self.0.request.object_ref() {
                let metadata = object.get("metadata");
                let meta = |key: &str| {
                    metadata.and_then(|m| m.get(key)).and_then(Value::as_str).unwrap_or_default().to_string()
                };
                for (field, key) in [
                    (&mut reference.name, "name"),
                    (&mut reference.namespace, "namespace"),
                    (&mut reference.uid, "uid"),
                    (&mut reference.resource_version, "resourceVersion"),
                ] {
                    if field.is_empty() {
                        *field = meta(key);
                    }
                }
                state.object_ref = Some(Box::new(reference));
            }
        }
        if config.level < Level::Request {
            return;
        }
        // A patch is recorded as sent; objects without their managedFields when the policy says so.
        if config.omit_managed_fields && self.0.request.verb != RequestVerb::Resource(Verb::Patch) {
            strip_managed_fields(&mut object);
        }
        state.request_object = Some(object);
    }
}

/// A failure's Status into responseStatus (every level), the object into
/// responseObject (RequestResponse), as kube's `LogResponseObject`.
fn record_response(state: &mut State, config: &RequestAuditConfig, bytes: &[u8]) {
    let content_type = state.response_content_type.as_deref();
    let content_encoding = state.response_content_encoding.as_deref();
    let Some(mut object) = body_json(content_type, content_encoding, bytes, MAX_CAPTURED_BYTES) else { return };
    if object.get("kind").and_then(Value::as_str) == Some("Status") {
        let text = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_string);
        let code = state.response_code.map(i32::from);
        state.response_status = Some(Box::new(Status {
            code: object.get("code").and_then(Value::as_i64).and_then(|c| i32::try_from(c).ok()).or(code),
            status: text("status"),
            message: text("message"),
            reason: text("reason"),
            details: object.get("details").and_then(|d| serde_json::from_value::<StatusDetails>(d.clone()).ok()),
            ..Default::default()
        }));
    }
    if config.level < Level::RequestResponse {
        return;
    }
    if config.omit_managed_fields {
        strip_managed_fields(&mut object);
    }
    state.response_object = Some(object);
}
