//! The server: TLS listener, request routing, logging and metrics around every
//! request, and graceful shutdown (SIGTERM drains in-flight requests and ends
//! watches cleanly).

pub mod cluster;
pub mod connection;
pub mod dev_certs;
pub mod health;
pub mod metrics;
pub mod open_files;
pub mod options;
pub mod setup;
pub mod tls;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use anyhow::{bail, Context};
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use futures::future::Either;
use futures::FutureExt;
use http::{header, HeaderValue, Method, Request};
use tokio_util::sync::CancellationToken;
use tower::Service;

use crate::apimachinery::errors::{ApiError, Reason};
use crate::apimachinery::request_info::RequestInfo;
use crate::auth::options::Authentication;
use crate::endpoints::discovery::Discovery;
use crate::endpoints::handlers::{self, ApiSettings, ServedKinds};
use crate::endpoints::openapi::OpenApi;
use crate::filters::{authorization, Chain, FilterOptions, Filters};
use crate::server::health::{FnCheck, Health};
use crate::server::metrics::Metrics;
use options::{ServerOptions, ServingOptions};
use setup::Setup;

/// How long buffered audit events may take to be written at exit.
const AUDIT_FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Who the server is: named in its logs, `/version` and its OpenAPI documents.
#[derive(Debug, Clone, Copy)]
pub struct Identity {
    /// The program's name, e.g. `sample-apiserver`.
    pub name: &'static str,
    /// Its version (semver, without a leading `v`).
    pub version: &'static str,
    /// The source revision it was built from, or "".
    pub git_commit: &'static str,
}

/// Everything a request may need.
pub struct App {
    pub resources: Arc<ServedKinds>,
    /// Authentication and authorization; None with `--authentication none`.
    pub guard: Option<crate::auth::Guard>,
    pub discovery: Discovery,
    pub openapi: OpenApi,
    pub health: Health,
    pub metrics: Arc<Metrics>,
    /// With an audit policy and a backend only.
    pub auditor: Option<Arc<crate::audit::Auditor>>,
    /// With `--tracing-config-file` only.
    tracing: Option<Arc<crate::trace::Tracing>>,
    filters: Arc<Filters>,
    version: bytes::Bytes,
    /// What the application asked to run once the server is first ready.
    first_ready: FirstReady,
}

impl App {
    /// The application's state: `serve` is given a [`Setup`] and adds the
    /// kinds to serve to it.
    pub async fn new(
        options: &ServerOptions,
        identity: Identity,
        lifecycle: &Lifecycle,
        serve: impl AsyncFnOnce(&mut Setup) -> crate::error::Result<()>,
    ) -> anyhow::Result<Arc<Self>> {
        // Flags kube would refuse stop the server before it starts anything.
        options.admission.validate()?;
        // First, so that a policy that does not read stops the server before
        // it connects to anything.
        let metrics = Arc::new(Metrics::new(identity.name));
        let auditor = crate::audit::Auditor::start(&options.audit, metrics.audit().clone()).await?;
        let tracing = match &options.tracing.tracing_config_file {
            Some(path) => Some(crate::trace::Tracing::start(&crate::trace::TracingConfig::load(path)?, identity.name)?),
            None => None,
        };
        // One client for everything that talks to the cluster: the
        // application's watches, the authentication ConfigMap, TokenReviews
        // and SubjectAccessReviews.
        let cluster = cluster::cluster_client(&options.cluster).await;
        let guard = match options.authentication.mode(options.serving.bind) {
            Authentication::None => None,
            Authentication::Delegated => {
                let client = cluster.as_ref().map_err(|e| anyhow::anyhow!("{e:#}")).context(
                    "--authentication delegated needs the cluster (in-cluster service account or --kubeconfig)",
                )?;
                Some(
                    crate::auth::delegated(
                        &options.authentication,
                        &options.authorization,
                        &options.reviews,
                        client.clone(),
                    )
                    .await?,
                )
            }
        };
        let authorizer = guard.as_ref().map(|g| g.authz.clone());
        // API Priority and Fairness, from the cluster's configuration; the
        // in-flight limits' sum is kube's server concurrency limit.
        let limits = &options.limits;
        let flow_control = match &cluster {
            Ok(client) if limits.enable_priority_and_fairness => Some(crate::flowcontrol::FlowControl::start(
                client.clone(),
                (limits.max_requests_inflight + limits.max_mutating_requests_inflight).max(1),
                limits.request_timeout / 4,
                metrics.flow_control(),
            )),
            _ => None,
        };
        let mut served =
            Setup::new(&options.storage, &options.admission, metrics.admission(), cluster, authorizer).await?;
        serve(&mut served).await?;
        let registries = served.registries;
        let first_ready = FirstReady::new(served.first_ready);
        for gauge in served.gauges {
            metrics.gauge_fn(gauge.name, gauge.help, gauge.value);
        }
        let settings: ApiSettings = options.api.clone();
        let discovery = Discovery::new(&registries);
        let openapi = OpenApi::new(&registries, identity.name, identity.version);
        let stopping = lifecycle.stopping.clone();
        let mut ready: Vec<Arc<dyn crate::server::health::Check>> = vec![Arc::new(FnCheck("shutdown", move || {
            if stopping.is_cancelled() {
                Err("server is shutting down".into())
            } else {
                Ok(())
            }
        }))];
        ready.extend(served.ready_checks);
        let health = Health { live: Vec::new(), ready };
        let version = serde_json::json!({
            "major": identity.version.split('.').next().unwrap_or("0"),
            "minor": identity.version.split('.').nth(1).unwrap_or("0"),
            "gitVersion": format!("v{}", identity.version),
            "gitCommit": identity.git_commit,
            "gitTreeState": "",
            "buildDate": "",
            "goVersion": "",
            "compiler": "rustc",
            "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
        });
        let shutdown = lifecycle.shutdown.clone();
        let resources = Arc::new(ServedKinds { registries, settings, shutdown, watches: metrics.clone() });
        let filter_options = FilterOptions {
            limits: &options.limits,
            authentication: &options.authentication,
            authorization: &options.authorization,
        };
        let shared = crate::filters::Shared {
            resources: resources.clone(),
            requests: metrics.requests(),
            auditor: auditor.clone(),
            tracing: tracing.clone(),
            flow_control,
            grace_over: lifecycle.grace_over.clone(),
            retry_after: lifecycle.retry_after.clone(),
        };
        let filters = Filters::new(filter_options, guard.as_ref(), shared);
        Ok(Arc::new(Self {
            guard,
            resources,
            discovery,
            openapi,
            health,
            metrics,
            auditor,
            tracing,
            filters: Arc::new(filters),
            version: bytes::Bytes::from(serde_json::to_vec(&version).unwrap_or_default()),
            first_ready,
        }))
    }

    /// The server's one route: the handler inside the filter chain (see
    /// [`crate::filters`]).
    pub fn router(
        self: &Arc<Self>,
    ) -> Chain<impl Service<Request<Body>, Response = Response, Error = Infallible, Future: Send> + Clone + Send + Sync>
    {
        let app = self.clone();
        self.filters.around(tower::service_fn(move |req| route(&app, req).map(Ok)))
    }
}

/// Work the application asked to run once, when the server is first ready
/// ([`Setup::on_first_ready`]).
struct FirstReady(std::sync::Mutex<Vec<Box<dyn FnOnce() + Send>>>);

impl FirstReady {
    fn new(hooks: Vec<Box<dyn FnOnce() + Send>>) -> Self {
        Self(std::sync::Mutex::new(hooks))
    }

    fn is_pending(&self) -> bool {
        self.0.lock().is_ok_and(|hooks| !hooks.is_empty())
    }

    /// Runs the hooks the first time; later calls find none.
    fn run(&self) {
        let hooks = match self.0.lock() {
            Ok(mut hooks) => std::mem::take(&mut *hooks),
            Err(_) => return,
        };
        for hook in hooks {
            hook();
        }
    }
}

fn is_read(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD)
}

/// The one entry point behind the filters: serves the request. Only a
/// resource request's answer is awaited; everything else is answered at once.
fn route(app: &App, mut req: Request<Body>) -> impl Future<Output = Response> + Send + 'static {
    // Taken, not copied: nothing after the filters reads it from the request.
    let info = req.extensions_mut().remove::<RequestInfo>().unwrap_or_default();
    if info.is_resource_request {
        return Either::Left(handlers::serve(app.resources.clone(), info, req));
    }
    Either::Right(std::future::ready(serve_nonresource(app, req)))
}

/// Health, metrics, version, OpenAPI and discovery.
fn serve_nonresource(app: &App, req: Request<Body>) -> Response {
    let path = req.uri().path();
    if !is_read(req.method()) {
        return ApiError::new(
            405,
            Reason::MethodNotAllowed,
            "the server does not allow this method on the requested resource",
        )
        .into_response();
    }
    let reveal = app.guard.is_none() || req.extensions().get::<authorization::Authorized>().is_some();
    if let Some(r) = app.health.serve(path, req.uri().query(), reveal) {
        // The first answer that the server is ready runs what the
        // application asked to run then, before the prober reads it.
        if path == "/readyz" && r.status() == http::StatusCode::OK {
            app.first_ready.run();
        }
        return r;
    }
    match path {
        "/metrics" => {
            let mut r = Response::new(Body::from(app.metrics.render(&app.resources.registries)));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
            );
            return r;
        }
        "/version" | "/version/" => {
            let mut r = Response::new(Body::from(app.version.clone()));
            r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            return r;
        }
        _ => {}
    }
    if path.starts_with("/openapi/") {
        if let Some(r) = app.openapi.serve(path, req.uri().query(), req.headers()) {
            return r;
        }
    }
    if let Some(r) = app.discovery.serve(path, req.headers()) {
        return r;
    }
    ApiError::path_not_found().into_response()
}

/// Resolves to the serving certificate files: the given ones, or development
/// certificates made (or reused) in the cert dir, their CA named after the
/// application.
fn serving_cert_files(
    args: &ServingOptions,
    identity: &Identity,
) -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf)> {
    match (&args.tls_cert_file, &args.tls_private_key_file) {
        (Some(c), Some(k)) => Ok((c.clone(), k.clone())),
        _ => {
            let paths =
                dev_certs::ensure_dev_certs(&args.cert_dir, identity, &args.service_name, &args.service_namespace)
                    .with_context(|| format!("preparing development certificates in {}", args.cert_dir.display()))?;
            tracing::info!(ca = %paths.ca_cert.display(), "serving with development certificates; trust this CA");
            Ok((paths.cert, paths.key))
        }
    }
}

/// Runs the server until SIGTERM or Ctrl-C, serving what `serve` adds to its
/// [`Setup`].
pub async fn run(
    options: ServerOptions,
    identity: Identity,
    serve: impl AsyncFnOnce(&mut Setup) -> crate::error::Result<()>,
) -> crate::error::Result<()> {
    serve_until_stopped(options, identity, serve).await.map_err(crate::error::Error::from)
}

async fn serve_until_stopped(
    options: ServerOptions,
    identity: Identity,
    serve: impl AsyncFnOnce(&mut Setup) -> crate::error::Result<()>,
) -> anyhow::Result<()> {
    let args = &options.serving;
    let authentication = options.authentication.mode(args.bind);
    if authentication == Authentication::None && !args.bind.ip().is_loopback() {
        bail!("--authentication none trusts every caller and is only allowed on a loopback address, not {}", args.bind);
    }
    let (cert, key) = serving_cert_files(args, &identity)?;
    let reloading = tls::ReloadingCert::load(&cert, &key)
        .with_context(|| format!("loading serving certificate {} and key {}", cert.display(), key.display()))?;
    let _reloader = reloading.spawn_reloader(args.cert_reload_interval);
    let tls_config = tls::server_config(reloading)?;

    let lifecycle = Lifecycle::new(args.shutdown_send_retry_after);
    let app = App::new(&options, identity, &lifecycle, serve).await?;
    if app.first_ready.is_pending() {
        // What the application asked to run when the server is first ready
        // runs at the first ready answer to a probe (see route), or here for
        // a server nobody probes.
        let app = app.clone();
        tokio::spawn(async move {
            while !app.health.ready.iter().all(|check| check.check().is_ok()) {
                if app.resources.shutdown.is_cancelled() {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            app.first_ready.run();
        });
    }
    let handle = axum_server::Handle::new();
    tokio::spawn(lifecycle.run(handle.clone(), args.shutdown_delay_duration, args.shutdown_grace));
    {
        // The address actually bound: with `--bind 127.0.0.1:0` the port is
        // chosen by the system, and this line is where a person finds it.
        let handle = handle.clone();
        tokio::spawn(async move {
            if let Some(address) = handle.listening().await {
                tracing::info!(%address, version = identity.version, ?authentication, "{} serving", identity.name);
            }
        });
    }
    let limits = &options.connections;
    open_files::raise_limit(limits, &options.limits, &options.reviews);
    // The aggregator's connections are never closed by the connection cap: it is recognised
    // by the same front-proxy certificate test authentication makes (see crate::server::connection).
    let exempt: Option<crate::server::connection::Exempt> = app.guard.as_ref().map(|guard| {
        let authn = guard.authn.clone();
        Arc::new(move |peer: &crate::auth::authn::peer::Peer| authn.is_front_proxy(peer))
            as crate::server::connection::Exempt
    });
    let cap = limits.idle_connections(exempt);
    if let Some(cap) = &cap {
        let idle = cap.clone();
        app.metrics.gauge_fn(
            "idle_connections",
            "Connections without a request in flight, counted against --max-connections (the aggregator's are not)",
            move || idle.len() as f64,
        );
        // A count since start, so by rights a counter; it stays a gauge because
        // a counter's sample is exposed as `<name>_total`, and readers of the
        // bare name (tests/connection_limits.rs) would find nothing.
        let closed = cap.clone();
        app.metrics.gauge_fn(
            "connections_closed_by_cap",
            "Idle connections closed to make room for others at --max-connections, since start",
            move || closed.closed_total() as f64,
        );
    }
    let served = tls::serve_tls(args.bind, app.router(), tls_config, handle, limits, cap).await;
    // The events still buffered by batch backends are written before the
    // process ends, for a while: a webhook that does not answer would
    // otherwise hold the exit for its retries (5 attempts of 30 s).
    if let Some(auditor) = &app.auditor {
        if tokio::time::timeout(AUDIT_FLUSH_TIMEOUT, auditor.shutdown()).await.is_err() {
            tracing::warn!(timeout = ?AUDIT_FLUSH_TIMEOUT, "audit events still buffered at exit were not all written");
        }
    }
    if let Some(tracing) = app.tracing.clone() {
        // The exporter's flush blocks its caller until the batch is sent.
        let _ = tokio::task::spawn_blocking(move || tracing.shutdown()).await;
    }
    served
}

/// The server's way from SIGTERM to exit, as kube-apiserver's (its
/// lifecycle signals): `/readyz` fails at once while everything is still
/// served, so load balancers and EndpointSlices stop sending new requests;
/// after `--shutdown-delay-duration` the listener closes, HTTP/2 connections
/// are told to go away, idle ones close and watches end (their clients
/// resume elsewhere from their last resourceVersion); requests still in
/// flight after `--shutdown-grace` are answered 429 with Retry-After, and the
/// connections close.
pub struct Lifecycle {
    /// SIGTERM (or Ctrl-C) received: not ready.
    stopping: CancellationToken,
    /// The shutdown delay is over: no new connections, watches end.
    shutdown: CancellationToken,
    /// The grace is over: what is still in flight is answered.
    grace_over: CancellationToken,
    /// With `--shutdown-send-retry-after`: after the delay the listener stays
    /// open, new requests are answered 429, and the listener closes once the
    /// ones in flight have drained.
    retry_after: Option<Arc<crate::filters::deadline::RetryAfter>>,
}

/// Time for the answers given when the grace is over to be written before
/// the connections close.
const LAST_ANSWERS: std::time::Duration = std::time::Duration::from_secs(2);

impl Lifecycle {
    fn new(send_retry_after: bool) -> Self {
        Self {
            stopping: CancellationToken::new(),
            shutdown: CancellationToken::new(),
            grace_over: CancellationToken::new(),
            retry_after: send_retry_after.then(Default::default),
        }
    }

    fn run(
        &self,
        handle: axum_server::Handle<std::net::SocketAddr>,
        delay: std::time::Duration,
        grace: std::time::Duration,
    ) -> impl Future<Output = ()> + Send + 'static {
        let (stopping, shutdown, grace_over) = (self.stopping.clone(), self.shutdown.clone(), self.grace_over.clone());
        let retry_after = self.retry_after.clone();
        async move {
            wait_for_signal().await;
            stopping.cancel();
            if !delay.is_zero() {
                tracing::info!(?delay, "stopping: /readyz fails; serving on for the shutdown delay");
                tokio::time::sleep(delay).await;
            }
            let grace_ends = tokio::time::Instant::now() + grace;
            shutdown.cancel();
            if let Some(retry_after) = retry_after {
                tracing::info!(
                    ?grace,
                    "shutting down: new requests are answered 429, watches end, in-flight requests drain"
                );
                retry_after.refusing.cancel();
                let _ = tokio::time::timeout_at(grace_ends, retry_after.drained()).await;
                tracing::info!("in-flight requests drained: no new connections");
            } else {
                tracing::info!(?grace, "shutting down: no new connections, watches end, in-flight requests drain");
            }
            let left = grace_ends.saturating_duration_since(tokio::time::Instant::now());
            handle.graceful_shutdown(Some(left + LAST_ANSWERS));
            tokio::time::sleep_until(grace_ends).await;
            grace_over.cancel();
        }
    }
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {},
                    _ = term.recv() => {},
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the server");
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
