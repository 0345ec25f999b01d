//! Delegated authentication and authorization, as an aggregated API server
//! does them: the aggregator is recognised by its front-proxy client
//! certificate, other callers by client certificates or bearer tokens
//! (TokenReview), and every request is authorized with the cluster's own RBAC
//! (SubjectAccessReview).

pub mod authn;
pub mod authz;
pub mod cache;
pub mod options;
pub mod review;

use std::sync::Arc;

use anyhow::Context;
use options::{AuthenticationOptions, AuthorizationOptions, ReviewOptions};

/// The delegated authenticator and authorizer, used by the request path's
/// filters (`crate::filters`).
pub struct Guard {
    pub authn: Arc<authn::Authenticator>,
    pub authz: Arc<authz::Authorizer>,
}

/// The delegated guard: authentication configured from the cluster's
/// extension-apiserver-authentication ConfigMap (watched) with flag overrides,
/// tokens checked by TokenReview, authorization by SubjectAccessReview.
pub async fn delegated(
    args: &AuthenticationOptions,
    authorization: &AuthorizationOptions,
    reviews: &ReviewOptions,
    client: kube::Client,
) -> anyhow::Result<Guard> {
    let read = |p: &std::path::Path| std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()));
    let mut overrides = authn::AuthnConfig::default();
    if let Some(ca) = &args.client_ca_file {
        overrides.client_ca_pem = Some(read(ca)?);
    }
    if args.requestheader_client_ca_file.is_some() || args.requestheader_allowed_names.is_some() {
        overrides.request_header = Some(authn::RequestHeaderConfig {
            ca_pem: args.requestheader_client_ca_file.as_deref().map(read).transpose()?.unwrap_or_default(),
            allowed_names: args.requestheader_allowed_names.clone().unwrap_or_default(),
            // With the CA from a flag the ConfigMap's header names are not used
            // (as in kube): the flag-side defaults are.
            ..match args.requestheader_client_ca_file {
                Some(_) => authn::RequestHeaderConfig::kube_defaults(),
                None => authn::RequestHeaderConfig::default(),
            }
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
    let limits =
        review::ReviewLimits { qps: reviews.review_qps, burst: reviews.review_burst, queue: reviews.review_queue };
    let policy = review::ReviewPolicy { limits, ..Default::default() };
    let tokens: Arc<dyn authn::TokenReviewer> = Arc::new(authn::KubeTokenReviewer::new(client.clone()));
    let token_options = authn::TokenOptions { cache_ttl: args.token_cache_ttl, review: policy, ..Default::default() };
    let authenticator = Arc::new(authn::Authenticator::new(initial, Some(tokens), token_options)?);
    authn::spawn_configmap_watch(
        client.clone(),
        namespace.to_string(),
        name.to_string(),
        overrides,
        authenticator.clone(),
    );
    let reviewer: Arc<dyn authz::AccessReviewer> = Arc::new(authz::KubeAccessReviewer::new(client));
    let authz_options = authz::AuthzOptions {
        allow_ttl: authorization.authorization_allow_ttl,
        deny_ttl: authorization.authorization_deny_ttl,
        review: policy,
        ..Default::default()
    };
    let authorizer = authz::Authorizer::new(reviewer, authz_options);
    Ok(Guard { authn: authenticator, authz: Arc::new(authorizer) })
}
