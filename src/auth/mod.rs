//! Delegated authentication and authorization, as an aggregated API server
//! does them: the aggregator is recognised by its front-proxy client
//! certificate, other callers by client certificates or bearer tokens
//! (TokenReview), and every request is authorized with the cluster's own RBAC
//! (SubjectAccessReview).

pub mod authn;
pub mod authz;
pub mod cache;
pub mod review;

use std::sync::Arc;

use anyhow::Context;
use http::request::Parts;

use crate::config::ServeArgs;

use crate::machinery::request_info::RequestInfo;
use crate::machinery::status::ApiError;
use crate::tls::PeerCertificates;

/// The request-path guard: authenticates, then authorizes.
pub struct Guard {
    pub authn: Arc<authn::Authenticator>,
    pub authz: Arc<authz::Authorizer>,
}

impl Guard {
    /// Ok when the request may proceed; the 401 or 403 Status otherwise.
    /// `also_requires` lists further (group, resource) pairs the caller must be
    /// allowed the same access to (a view of other objects, e.g. FarmPods of Pods).
    pub async fn check(
        &self,
        parts: &Parts,
        info: &RequestInfo,
        also_requires: &[(&str, &str)],
    ) -> Result<(), ApiError> {
        if authz::always_allowed_path(&info.path) {
            return Ok(());
        }
        let peer = parts.extensions.get::<PeerCertificates>().cloned().unwrap_or_default();
        let user = match self.authn.authenticate(&parts.headers, &peer).await {
            authn::AuthnOutcome::Authenticated(u) => u,
            // Anonymous requests are not served yet: no credentials is a 401 too.
            authn::AuthnOutcome::NoCredentials => {
                tracing::debug!(path = %info.path, "request without credentials");
                return Err(ApiError::unauthorized("Unauthorized"));
            }
            authn::AuthnOutcome::Unauthenticated { reason } => {
                tracing::debug!(path = %info.path, %reason, "unauthenticated request");
                return Err(ApiError::unauthorized("Unauthorized"));
            }
        };
        let attrs = authz::Attributes::from_request(info);
        let uri = parts.uri.path_and_query().map_or_else(|| parts.uri.path(), |pq| pq.as_str());
        let refusal = |attrs: &authz::Attributes, decision| match decision {
            authz::Decision::Allow => Ok(()),
            authz::Decision::Deny { reason } => Err(authz::forbidden(&user, attrs, &reason)),
            authz::Decision::Error { message } => Err(authz::internal_error(uri, &message)),
        };
        refusal(&attrs, self.authz.authorize(&user, &attrs).await)?;
        for (group, resource) in also_requires {
            let other = attrs.for_resource(group, resource);
            refusal(&other, self.authz.authorize(&user, &other).await)?;
        }
        Ok(())
    }
}

/// The delegated guard: authentication configured from the cluster's
/// extension-apiserver-authentication ConfigMap (watched) with flag overrides,
/// tokens checked by TokenReview, authorization by SubjectAccessReview.
pub async fn delegated(args: &ServeArgs) -> anyhow::Result<Guard> {
    let client = crate::resources::cluster_client(args)
        .await
        .context("--authentication delegated needs the cluster (in-cluster service account or --kubeconfig)")?;
    let read = |p: &std::path::Path| std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()));
    let mut overrides = authn::AuthnConfig::default();
    if let Some(ca) = &args.client_ca_file {
        overrides.client_ca_pem = Some(read(ca)?);
    }
    if args.requestheader_client_ca_file.is_some() || args.requestheader_allowed_names.is_some() {
        overrides.request_header = Some(authn::RequestHeaderConfig {
            ca_pem: args.requestheader_client_ca_file.as_deref().map(read).transpose()?.unwrap_or_default(),
            allowed_names: args.requestheader_allowed_names.clone().unwrap_or_default(),
            ..Default::default()
        });
    }
    let (namespace, name) = args.authentication_configmap.split_once('/').with_context(|| {
        format!("--authentication-configmap {:?} is not namespace/name", args.authentication_configmap)
    })?;
    // Read once now, so the server starts with its trust configured; then watch.
    let initial = authn::fetch_configmap_config(client.clone(), namespace, name)
        .await?
        .unwrap_or_default()
        .with_overrides(&overrides);
    // TokenReviews and SubjectAccessReviews each get their own rate limiter with the same flags,
    // as kube's delegating authenticator and authorizer each have their own client at QPS 200 /
    // burst 400: a flood of bogus tokens then cannot starve the authorization of real users.
    let limits = review::ReviewLimits { qps: args.review_qps, burst: args.review_burst, queue: args.review_queue };
    let policy = review::ReviewPolicy { limits, ..Default::default() };
    // Retries are ours (kube's backoff, under the review deadline): none inside kube-rs as well.
    let review_client = review_client(args).await?;
    let tokens: Arc<dyn authn::TokenReviewer> = Arc::new(authn::KubeTokenReviewer::new(review_client.clone()));
    let token_options = authn::TokenOptions { cache_ttl: args.token_cache_ttl, review: policy, ..Default::default() };
    let authenticator = Arc::new(authn::Authenticator::new(initial, Some(tokens), token_options)?);
    authn::spawn_configmap_watch(
        client.clone(),
        namespace.to_string(),
        name.to_string(),
        overrides,
        authenticator.clone(),
    );
    let reviewer: Arc<dyn authz::AccessReviewer> = Arc::new(authz::KubeAccessReviewer::new(review_client));
    let authz_options = authz::AuthzOptions {
        allow_ttl: args.authorization_allow_ttl,
        deny_ttl: args.authorization_deny_ttl,
        review: policy,
        ..Default::default()
    };
    let authorizer = authz::Authorizer::new(reviewer, authz_options);
    Ok(Guard { authn: authenticator, authz: Arc::new(authorizer) })
}

/// The client reviews are sent with: the cluster's, without kube-rs' own retry layer (reviews
/// are retried by [`review::ReviewRunner`], with kube's backoff and under the review deadline).
async fn review_client(args: &ServeArgs) -> anyhow::Result<kube::Client> {
    let mut config = crate::resources::cluster_config(args)
        .await
        .context("--authentication delegated needs the cluster (in-cluster service account or --kubeconfig)")?;
    config.default_retry = false;
    kube::Client::try_from(config).context("building the Kubernetes client for reviews")
}
