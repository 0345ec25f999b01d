//! The HTTP face of the registries: turns a classified request into a registry
//! call and encodes the answer in the negotiated representation.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use chrono::Utc;
use http::{header, HeaderMap, HeaderValue, StatusCode};
use rand::Rng;
use tokio_util::sync::CancellationToken;

use crate::admission::{Operation, Requester};
use crate::apimachinery::duration::parse_seconds;
use crate::apimachinery::errors::{ApiError, ApiResult, Target};
use crate::apimachinery::gojson;
use crate::apimachinery::managed_fields::Writer;
use crate::apimachinery::options::{
    decode_delete_options, DeleteOptions, ListOptions, Query, Rv, WriteOptions, WriteVerb,
};
use crate::apimachinery::patch::Patch;
use crate::apimachinery::request_info::{RequestInfo, RequestVerb};
use crate::apimachinery::resource::Verb;
use crate::apimachinery::serializer::{self, BodyError, BodyType};
use crate::audit::context::AuditContext;
use crate::auth::authn::{request_user, UserInfo};
use crate::endpoints::deprecation;
use crate::endpoints::list_body::ObjectListBody;
use crate::endpoints::negotiation::{self, Encoding, Output, Shape};
use crate::endpoints::warnings::{warning_header, warning_headers};
use crate::endpoints::watch::{self, WatchJob};
use crate::heavy;
use crate::registry::encode::{self, IncludeObject, ListMeta};
use crate::registry::subresource::{Subresource, SubresourceRequest};
use crate::registry::{DeleteOutcome, Part, Registry, WatchStart, WriteOutcome};
use crate::storage::StoredObject;

/// Server-wide knobs of the resource handlers, as flags.
#[derive(clap::Args, Debug, Clone)]
pub struct ApiSettings {
    /// Seconds between BOOKMARK events on watches that allow them.
    #[arg(long, default_value = "60", value_parser = parse_seconds)]
    pub bookmark_interval: Duration,

    /// Largest accepted request body in bytes (413 beyond).
    #[arg(long, default_value_t = 3 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Watches without timeoutSeconds end after a random time between this and
    /// twice this (kube-apiserver's --min-request-timeout), so clients spread
    /// their re-watches.
    #[arg(long, default_value = "1800", value_parser = parse_seconds)]
    pub min_request_timeout: Duration,
}

impl Default for ApiSettings {
    fn default() -> Self {
        Self {
            bookmark_interval: Duration::from_secs(60),
            max_body_bytes: 3 * 1024 * 1024,
            min_request_timeout: Duration::from_secs(1800),
        }
    }
}

/// Counts open watches per resource (implemented by the metrics module).
pub trait WatchGauge: Send + Sync {
    fn opened(&self, resource: &'static str);
    fn closed(&self, resource: &'static str);
}

/// The served kinds and what their handlers share.
pub struct ServedKinds {
    pub registries: Vec<Arc<Registry>>,
    pub settings: ApiSettings,
    pub shutdown: CancellationToken,
    pub watches: Arc<dyn WatchGauge>,
}

impl ServedKinds {
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<Registry>> {
        self.registries.iter().find(|r| {
            let n = r.kind.names();
            n.group == group && n.version == version && n.plural == plural
        })
    }
}

fn respond(code: u16, body: Bytes, content_type: &str, warnings: &[String]) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, content_type_value(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    for v in warning_headers(warnings) {
        h.append(header::WARNING, v);
    }
    resp
}

/// `content_type` as a header value; the common ones without a copy of
/// their own (an allocation of every GET).
fn content_type_value(content_type: &str) -> HeaderValue {
    const JSON: &str = "application/json";
    match content_type {
        JSON => HeaderValue::from_static(JSON),
        negotiation::YAML_CONTENT_TYPE => HeaderValue::from_static(negotiation::YAML_CONTENT_TYPE),
        other => HeaderValue::from_str(other).unwrap_or(HeaderValue::from_static(JSON)),
    }
}

/// The Content-Type of a watch stream in this output.
fn content_type(output: Output) -> String {
    match output {
        Output::Json => "application/json".into(),
        Output::Table(v) => format!("application/json;as=Table;v={v};g=meta.k8s.io"),
        Output::Metadata(v) => format!("application/json;as=PartialObjectMetadata;v={v};g=meta.k8s.io"),
    }
}

fn write_response(out: WriteOutcome, encoding: Encoding) -> ApiResult<Response> {
    encoded(out.code, out.body, "application/json", &out.warnings, encoding)
}

/// An answer in the negotiated encoding: JSON as built, or the same document
/// as YAML with kube's `application/yaml` Content-Type.
fn encoded(code: u16, json: Bytes, content_type: &str, warnings: &[String], encoding: Encoding) -> ApiResult<Response> {
    match encoding {
        Encoding::Json => Ok(respond(code, json, content_type, warnings)),
        Encoding::Yaml => {
            let yaml = serializer::json_to_yaml(&json).map_err(ApiError::internal_error)?;
            Ok(respond(code, Bytes::from(yaml), negotiation::YAML_CONTENT_TYPE, warnings))
        }
    }
}

/// Reads the body up to the size limit: 413 beyond it.
async fn read_body(body: Body, limit: usize) -> ApiResult<Bytes> {
    match axum::body::to_bytes(body, limit).await {
        Ok(b) => Ok(b),
        Err(e) => {
            let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(&e);
            while let Some(s) = source {
                if s.is::<http_body_util::LengthLimitError>() {
                    return Err(ApiError::too_large(format_args!("limit is {limit}")));
                }
                source = s.source();
            }
            Err(ApiError::bad_request(format!("error reading request body: {e}")))
        }
    }
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Serves a request already classified as a resource request.
pub fn serve(
    res: Arc<ServedKinds>,
    info: RequestInfo,
    req: http::Request<Body>,
) -> impl std::future::Future<Output = Response> + Send {
    // Looked up once: dispatch serves it, and a deprecated version's warning
    // comes first on every answer, as kube's CRD handler records it before serving.
    let reg = res.find(info.api_group(), info.api_version(), info.resource()).cloned();
    let deprecated = reg.as_ref().and_then(|reg| reg.kind.deprecation_warning()).and_then(warning_header);
    let audit = deprecated.as_ref().and_then(|_| req.extensions().get::<AuditContext>().cloned());
    let long_running = matches!(info.verb, RequestVerb::Resource(Verb::Watch));
    // Not an `async fn`, which would hold its arguments beside dispatch's future.
    futures::FutureExt::map(dispatch(res, reg, info, req), move |answer| {
        let response = answer.unwrap_or_else(IntoResponse::into_response);
        // kube's CRD handler hands what it does not route to the next handler
        // before it marks a deprecated version's request.
        let routed = response.extensions().get::<NotRouted>().is_none();
        match deprecated.filter(|_| routed) {
            Some(warning) => deprecation::mark(response, warning, audit, long_running),
            None => response,
        }
    })
}

/// `work` in a box of its own, for the branches of [`dispatch`] whose state is
/// large (a write with admission's webhook calls and CEL evaluation, a watch's
/// start). An async fn's future is as large as its largest branch, and the
/// filters and axum move the handler's future into a box more than once per
/// request: inline, these branches would make every GET copy kilobytes of
/// state it never uses (measured: docs/performance.md, "The filter chain and
/// the handler's futures"). Boxed, a GET carries a pointer for each of them,
/// and a write pays one allocation.
fn apart<F: std::future::Future>(work: F) -> std::pin::Pin<Box<F>> {
    Box::pin(work)
}

/// Runs a write whose input is `work` bytes: as one computation in a turn
/// ([`heavy`]) when no admission plugin may act on it (`admitted` false);
/// else as it is, the registry taking turns around its computing steps
/// only. A turn held while a webhook answers would make every other user's
/// large computation wait on that webhook.
async fn write_in_turns<F>(admitted: bool, work: usize, write: F) -> F::Output
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    match admitted {
        true => write.await,
        false => heavy::run_async(work, write).await,
    }
}

/// Serves a resource request for `reg`, the registry its path names (None: none).
async fn dispatch(
    res: Arc<ServedKinds>,
    reg: Option<Arc<Registry>>,
    info: RequestInfo,
    req: http::Request<Body>,
) -> ApiResult<Response> {
    // What kube-apiserver's CRD handler does not route at all gets its plain
    // "404 page not found": an unknown resource, and (for a namespaced kind)
    // anything but a list or watch across all namespaces.
    let Some(reg) = reg else {
        return Ok(page_not_found());
    };
    let kind = reg.kind.clone();
    let names = kind.names();
    if !kind.namespaced() && !info.namespace().is_empty() {
        return Ok(page_not_found());
    }
    let all_namespaces = kind.namespaced() && info.namespace().is_empty();
    if all_namespaces && !matches!(info.verb, RequestVerb::Resource(Verb::List | Verb::Watch)) {
        return Ok(page_not_found());
    }
    let target = Target { group: names.group, kind: names.kind, resource: names.plural, name: info.name() };
    if let Some(sub) = kind.subresources().iter().find(|s| s.name == info.subresource()) {
        return serve_subresource(&res, &reg, sub, &info, req).await;
    }
    // Segments after the subresource are ignored, as kube's request info does.
    let part = match info.subresource() {
        "" => Part::Main,
        "status" if kind.has_status_subresource() => Part::Status,
        "scale" if kind.scale().is_some() => Part::Scale,
        // An unknown subresource: kube's CRD handler answers NotFound for the named object.
        _ => return Err(ApiError::not_found(target)),
    };
    // Which verb serves which request, as kube-apiserver's CRD handler
    // dispatches them: a POST on an object's path is a create of the body
    // (the name in the path is not used), a PUT or PATCH on the collection
    // fails for want of a name, and the status subresource has get, update
    // and patch only.
    let named = !info.name().is_empty();
    let RequestVerb::Resource(verb) = info.verb else {
        // kube's request info has no verb for other methods (OPTIONS...).
        return Err(ApiError::method_not_allowed(target.without_name(), ""));
    };
    let verb = match verb {
        Verb::Update | Verb::Patch if !named => return Err(ApiError::bad_request("name must be provided")),
        Verb::Create | Verb::Delete if part != Part::Main => {
            return Err(ApiError::method_not_allowed(target.without_name(), verb.as_str()))
        }
        verb => verb,
    };
    if part != Part::Main && !matches!(verb, Verb::Get | Verb::Update | Verb::Patch) {
        return Err(ApiError::method_not_allowed(target.without_name(), verb.as_str()));
    }
    if !kind.supports(verb) {
        return Err(ApiError::method_not_allowed(target, verb.as_str()));
    }
    if let Some(why) = kind.unavailable() {
        return Err(ApiError::service_unavailable(why));
    }
    let query = Query::parse(req.uri().query())?;
    let ns = info.namespace();
    let name = info.name();
    let (parts, body) = req.into_parts();
    let accept = header_str(&parts.headers, header::ACCEPT);
    // The user admission reports to webhooks: the one the aggregator
    // authenticated (after impersonation), never this server's own.
    let anonymous = UserInfo::default();
    let user = Requester {
        user: request_user(&parts.extensions).unwrap_or(&anonymous),
        audit: parts.extensions.get::<AuditContext>(),
    };
    match verb {
        Verb::Get if part == Part::Scale => {
            let (output, encoding) = negotiation::negotiate(accept, Shape::Object)?;
            let rv = Rv::parse(query.get("resourceVersion"))?;
            let scale = reg.get_scale(ns, name, rv).await?;
            let answer = match output {
                Output::Json => scale,
                Output::Metadata(version) => encode::partial_of(version, &scale),
                Output::Table(version) => encode::scale_table(version, &scale, Utc::now()),
            };
            let body = serde_json::to_vec(&answer).map_err(ApiError::internal_error)?;
            encoded(200, Bytes::from(body), "application/json", &[], encoding)
        }
        Verb::Get => {
            let (output, encoding) = negotiation::negotiate(accept, Shape::Object)?;
            let rv = Rv::parse(query.get("resourceVersion"))?;
            let obj = reg.get(ns, name, rv).await?;
            let include = IncludeObject::parse(query.get("includeObject"))?;
            let work = converted_bytes(output, encoding, std::iter::once(&obj));
            heavy::run_async(work, async { one_object(&reg, output, encoding, &obj, include) }).await
        }
        Verb::List => {
            let (output, encoding) = negotiation::negotiate(accept, Shape::List)?;
            let opts = ListOptions::from_query(&query)?;
            let include = IncludeObject::parse(query.get("includeObject"))?;
            let (meta, items) = reg.list((!all_namespaces).then_some(ns), &opts).await?;
            let work = converted_bytes(output, encoding, items.iter());
            heavy::run_async(work, async { list_response(&reg, output, encoding, &meta, items, include) }).await
        }
        Verb::Watch => {
            let (output, _json) = negotiation::negotiate(accept, Shape::Watch)?;
            let mut opts = ListOptions::from_query(&query)?;
            opts.watch = true;
            if !name.is_empty() {
                // A watch on a single object is a watch with metadata.name=<name>.
                opts.field_selector = match opts.field_selector.as_str() {
                    "" => format!("metadata.name={name}"),
                    other => format!("{other},metadata.name={name}"),
                };
            }
            apart(start_watch(&res, reg, (!all_namespaces).then_some(ns), opts, output)).await
        }
        Verb::Create => {
            let wopts = write_options(&query, WriteVerb::Create, &parts.headers)?;
            let encoding = negotiation::plain_encoding(accept);
            let content_type = header_str(&parts.headers, header::CONTENT_TYPE);
            object_body_format(content_type)?;
            let raw = read_body(body, res.settings.max_body_bytes).await?;
            let work = reg.write_work(raw.len());
            let admitted = reg.admits(&[Operation::Create], part, ns);
            apart(write_in_turns(admitted, work, async {
                let object = heavy::run_async(work, async { object_body(&reg, content_type, &raw) }).await?;
                let out = reg.create(ns, &raw, &object, &wopts, user).await?;
                heavy::run_async(out.body.len(), async { write_response(out, encoding) }).await
            }))
            .await
        }
        Verb::Update => {
            let wopts = write_options(&query, WriteVerb::Update, &parts.headers)?;
            let encoding = negotiation::plain_encoding(accept);
            let content_type = header_str(&parts.headers, header::CONTENT_TYPE);
            object_body_format(content_type)?;
            let raw = read_body(body, res.settings.max_body_bytes).await?;
            let work = reg.write_work(raw.len());
            let admitted = reg.admits(&[Operation::Update], part, ns);
            apart(write_in_turns(admitted, work, async {
                let object = heavy::run_async(work, async { object_body(&reg, content_type, &raw) }).await?;
                let out = reg.update(ns, name, part, &raw, &object, &wopts, user).await?;
                heavy::run_async(out.body.len(), async { write_response(out, encoding) }).await
            }))
            .await
        }
        Verb::Patch => {
            let body_type = serializer::body_type(header_str(&parts.headers, header::CONTENT_TYPE));
            if body_type == Some(BodyType::ApplyPatchYaml) {
                let wopts = write_options(&query, WriteVerb::Apply, &parts.headers)?;
                let raw = read_body(body, res.settings.max_body_bytes).await?;
                let work = reg.write_work(raw.len());
                // An apply creates the object when it does not exist.
                let admitted = reg.admits(&[Operation::Create, Operation::Update], part, ns);
                return apart(write_in_turns(admitted, work, async {
                    let content_type = header_str(&parts.headers, header::CONTENT_TYPE);
                    let config = heavy::run_async(work, async { object_body(&reg, content_type, &raw) }).await?;
                    let out = reg.apply(ns, name, part, &raw, &config, &wopts, user).await?;
                    heavy::run_async(out.body.len(), async { write_response(out, negotiation::plain_encoding(accept)) })
                        .await
                }))
                .await;
            }
            let wopts = write_options(&query, WriteVerb::Patch, &parts.headers)?;
            let body = read_body(body, res.settings.max_body_bytes).await?;
            let admitted = reg.admits(&[Operation::Update], part, ns);
            let patch_and_answer = async |patch: &Patch| {
                let out = reg.patch(ns, name, part, patch, body.len(), &wopts, user).await?;
                heavy::run_async(out.body.len(), async { write_response(out, negotiation::plain_encoding(accept)) })
                    .await
            };
            // A large body is parsed in a turn (the turn its write takes,
            // without admission): half a megabyte of operations costs
            // milliseconds to parse, which would hold an async worker and
            // every request queued behind it. A small one is parsed here,
            // and then what applying it costs decides: its copies may add up
            // to 3 MiB.
            let work = reg.write_work(body.len());
            if work >= heavy::HEAVY_BYTES {
                return apart(write_in_turns(admitted, work, async {
                    let patch = heavy::run_async(work, async { Patch::parse(body_type, &body) }).await?;
                    patch_and_answer(&patch).await
                }))
                .await;
            }
            let patch = Patch::parse(body_type, &body)?;
            let work = reg.write_work(body.len() + patch.growth_bytes());
            apart(write_in_turns(admitted, work, patch_and_answer(&patch))).await
        }
        Verb::Delete => {
            let body = read_body(body, res.settings.max_body_bytes).await?;
            let opts = delete_options(&parts.headers, &body, &query)?;
            let encoding = negotiation::plain_encoding(accept);
            let (outcome, warnings) = apart(reg.delete(ns, name, &opts, user)).await?;
            let answer = match outcome {
                // Through a Value, as every Status body here (ApiError::status_body): its
                // keys come out sorted, where k8s-openapi writes apiVersion and kind first.
                DeleteOutcome::Deleted(status) => Bytes::from(
                    serde_json::to_value(&status)
                        .and_then(|status| serde_json::to_vec(&status))
                        .map_err(ApiError::internal_error)?,
                ),
                DeleteOutcome::Pending(obj) => obj,
            };
            encoded(200, answer, "application/json", &warnings, encoding)
        }
        Verb::DeleteCollection => {
            // kube decodes and validates the ListOptions before it reads the body.
            let list = ListOptions::from_query(&query)?;
            let body = read_body(body, res.settings.max_body_bytes).await?;
            let opts = delete_options(&parts.headers, &body, &query)?;
            let (meta, items, warnings) = apart(reg.delete_collection(ns, &list, &opts, user)).await?;
            let meta = ListMeta { continue_token: None, ..meta };
            let list = ObjectListBody::new(reg.kind.names(), &meta, items);
            encoded(200, list.into_bytes(), "application/json", &warnings, negotiation::plain_encoding(accept))
        }
    }
}

/// A request to a subresource the kind serves with its own function: the
/// function's stream, ended when the server shuts down.
async fn serve_subresource(
    res: &ServedKinds,
    reg: &Registry,
    sub: &Subresource,
    info: &RequestInfo,
    req: http::Request<Body>,
) -> ApiResult<Response> {
    let names = reg.kind.names();
    let target = Target { group: names.group, kind: names.kind, resource: names.plural, name: info.name() };
    let verb = match info.verb {
        RequestVerb::Resource(verb) => verb,
        _ => return Err(ApiError::method_not_allowed(target.without_name(), "")),
    };
    if info.name().is_empty() || !sub.verbs.contains(&verb) {
        return Err(ApiError::method_not_allowed(target.without_name(), verb.as_str()));
    }
    if let Some(why) = reg.kind.unavailable() {
        return Err(ApiError::service_unavailable(why));
    }
    let query = Query::parse(req.uri().query())?;
    let user = request_user(req.extensions()).map(UserInfo::to_api).unwrap_or_default();
    let stored = reg.get(info.namespace(), info.name(), Rv::Unset).await?;
    let object = stored.value().map_err(ApiError::internal_error)?;
    let request = SubresourceRequest {
        namespace: info.namespace().to_string(),
        name: info.name().to_string(),
        object,
        query: query.into_pairs(),
        user,
    };
    let streamed = (sub.serve)(request).await.map_err(refused_by_kind)?;
    let shutdown = res.shutdown.clone().cancelled_owned();
    let body = streamed.body.take_until(shutdown);
    let mut resp = respond(200, Bytes::new(), &streamed.content_type, &[]);
    *resp.body_mut() = Body::from_stream(body);
    Ok(resp)
}

/// A kind's function's refusal, answered as the Status it wrote.
fn refused_by_kind(status: kube::core::Status) -> ApiError {
    let code = if status.code == 0 { 500 } else { status.code };
    let value = serde_json::to_value(&status).unwrap_or_default();
    match serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>(value) {
        Ok(mut status) => {
            status.code = Some(i32::from(code));
            ApiError::from_status(status)
        }
        Err(_) => ApiError::internal(status.message),
    }
}

/// The options of a write, with its manager settled: `fieldManager`, else
/// derived from the User-Agent as kube does (`fieldManager` itself stays as
/// sent: admission is told of it so).
fn write_options(query: &Query, verb: WriteVerb, headers: &HeaderMap) -> ApiResult<WriteOptions> {
    let mut wopts = WriteOptions::from_query(query, verb)?;
    let user_agent = header_str(headers, header::USER_AGENT).unwrap_or("");
    wopts.manager = Writer::manager_name(&wopts.field_manager, user_agent);
    Ok(wopts)
}

/// Marks an answer for a path no served kind routes (a deprecated version's
/// warning is not added to it).
#[derive(Clone, Copy)]
struct NotRouted;

/// Go's `http.NotFound`, which kube-apiserver answers for paths nothing serves.
fn page_not_found() -> Response {
    let mut resp = Response::new(Body::from("404 page not found\n"));
    resp.extensions_mut().insert(NotRouted);
    *resp.status_mut() = StatusCode::NOT_FOUND;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    resp
}

/// The Content-Type of a create or update must be one a whole object can come
/// in (checked before the body is read, as kube does).
fn object_body_format(content_type: Option<&str>) -> ApiResult<()> {
    match serializer::BodyFormat::of(content_type) {
        Some(_) => Ok(()),
        None => Err(unknown_object_format()),
    }
}

fn unknown_object_format() -> ApiError {
    // The words of kube-apiserver serving a CRD, which lists protobuf too.
    ApiError::unsupported_media_type(
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf",
    )
}

/// A create or update body as the JSON the registry decodes; a YAML body that
/// cannot be converted is an unrecognized object, in kube's words.
fn object_body<'a>(reg: &Registry, content_type: Option<&str>, raw: &'a [u8]) -> ApiResult<serializer::JsonBody<'a>> {
    serializer::request_body_to_json(content_type, raw).map_err(|e| match e {
        BodyError::UnsupportedMediaType => unknown_object_format(),
        BodyError::Yaml(why) => {
            ApiError::bad_request(gojson::unrecognized_object_message(&why, raw, reg.kind.names().kind))
        }
    })
}

fn require_json_body(headers: &HeaderMap) -> ApiResult<()> {
    match serializer::body_type(header_str(headers, header::CONTENT_TYPE)) {
        Some(BodyType::Json) => Ok(()),
        _ => Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json (got {})",
            header_str(headers, header::CONTENT_TYPE).unwrap_or("")
        ))),
    }
}

/// The DeleteOptions of a delete: a body must be JSON (as for a create); an
/// empty one means the options are in the query.
fn delete_options(headers: &HeaderMap, body: &[u8], query: &Query) -> ApiResult<DeleteOptions> {
    if !body.is_empty() {
        require_json_body(headers)?;
    }
    decode_delete_options(body, query)
}

fn one_object(
    reg: &Registry,
    output: Output,
    encoding: Encoding,
    obj: &StoredObject,
    include: IncludeObject,
) -> ApiResult<Response> {
    let body = match output {
        Output::Json => obj.bytes.clone(),
        Output::Metadata(v) => encode::partial_object(v, obj),
        Output::Table(v) => encode::table(
            v,
            &reg.columns,
            &ListMeta { resource_version: obj.rv, ..Default::default() },
            std::slice::from_ref(obj),
            include,
            Utc::now(),
        ),
    };
    // kube-apiserver labels a Table or PartialObjectMetadata answer with the
    // serializer's plain `application/json`, whatever `as=` was asked for.
    encoded(200, body, "application/json", &[], encoding)
}

fn list_response(
    reg: &Registry,
    output: Output,
    encoding: Encoding,
    meta: &ListMeta,
    items: Vec<StoredObject>,
    include: IncludeObject,
) -> ApiResult<Response> {
    if output == Output::Json && encoding == Encoding::Json {
        // Sent as it is written: no second buffer of a large list.
        let list = ObjectListBody::new(reg.kind.names(), meta, items);
        let mut resp = respond(200, Bytes::new(), "application/json", &[]);
        *resp.body_mut() = Body::new(list);
        return Ok(resp);
    }
    let body = match output {
        Output::Json => ObjectListBody::new(reg.kind.names(), meta, items).into_bytes(),
        Output::Metadata(v) => encode::partial_list(v, meta, &items),
        Output::Table(v) => encode::table(v, &reg.columns, meta, &items, include, Utc::now()),
    };
    // Converted once; past the deadline, not converted again (to YAML).
    heavy::check_deadline()?;
    // Plain `application/json` whatever the shape, as kube-apiserver labels it.
    encoded(200, body, "application/json", &[], encoding)
}

/// The bytes an answer converts (to YAML, a Table, PartialObjectMetadata):
/// none when the stored JSON is sent as it is.
fn converted_bytes<'a>(output: Output, encoding: Encoding, objects: impl Iterator<Item = &'a StoredObject>) -> usize {
    if output == Output::Json && encoding == Encoding::Json {
        return 0;
    }
    objects.map(|o| o.bytes.len()).sum()
}

/// How many chunks of a watch stream may wait for its connection.
const WATCH_CHUNKS_IN_FLIGHT: usize = 16;

async fn start_watch(
    res: &Arc<ServedKinds>,
    reg: Arc<Registry>,
    ns: Option<&str>,
    opts: ListOptions,
    output: Output,
) -> ApiResult<Response> {
    let filter = reg.filter(&opts)?;
    let timeout = match opts.timeout_seconds {
        Some(s) => Duration::from_secs(s),
        None => {
            let base = res.settings.min_request_timeout.as_secs_f64();
            Duration::from_secs_f64(base * rand::rng().random_range(1.0..2.0))
        }
    };
    let ct = match output {
        Output::Json => "application/json".to_string(),
        other => content_type(other),
    };
    // Chunks between the watch task and the connection: at most
    // WATCH_CHUNKS_IN_FLIGHT x watch::BATCH_BYTES (or one large object each)
    // per watcher; a client that stops reading is then bounded by the
    // store's watcher buffer, which closes it.
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(WATCH_CHUNKS_IN_FLIGHT);
    match reg.watch(ns, &opts).await? {
        WatchStart::Expired(err) => {
            // kube-apiserver answers 200 and sends the 410 as an ERROR event, so
            // clients re-list rather than retry the same resourceVersion.
            let _ = tx.send(watch::error_line(&err)).await;
            drop(tx);
        }
        WatchStart::Stream(plan) => {
            let resource = reg.kind.names().plural;
            res.watches.opened(resource);
            let gauge = res.watches.clone();
            let job = WatchJob {
                registry: reg.clone(),
                plan: *plan,
                filter,
                output,
                bookmarks: opts.allow_bookmarks,
                bookmark_interval: res.settings.bookmark_interval,
                timeout,
                shutdown: res.shutdown.clone(),
                on_end: Some(Box::new(move || gauge.closed(resource))),
            };
            tokio::spawn(watch::run(job, tx));
        }
    }
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok::<_, std::convert::Infallible>);
    let mut resp = respond(200, Bytes::new(), &ct, &[]);
    *resp.body_mut() = Body::from_stream(stream);
    Ok(resp)
}

use futures::StreamExt as _;
