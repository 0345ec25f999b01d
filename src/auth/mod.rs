//! Delegated authentication and authorization, as an aggregated API server
//! does them: the aggregator is recognised by its front-proxy client
//! certificate, other callers by client certificates or bearer tokens
//! (TokenReview), and every request is authorized with the cluster's own RBAC
//! (SubjectAccessReview).

pub mod authn;
pub mod authz;

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
            authn::AuthnOutcome::Unauthenticated { reason } => {
                tracing::debug!(path = %info.path, %reason, "unauthenticated request");
                return Err(ApiError::unauthorized("Unauthorized"));
            }
        };
        let attrs = authz::Attributes::from_request(info);
        if let authz::Decision::Deny { reason } = self.authz.authorize(&user, &attrs).await {
            return Err(authz::forbidden(&user, &attrs, &reason));
        }
        for (group, resource) in also_requires {
            let other = attrs.for_resource(group, resource);
            if let authz::Decision::Deny { reason } = self.authz.authorize(&user, &other).await {
                return Err(authz::forbidden(&user, &other, &reason));
            }
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
    let tokens: Arc<dyn authn::TokenReviewer> = Arc::new(authn::KubeTokenReviewer::new(client.clone()));
    let authenticator = Arc::new(authn::Authenticator::new(initial, Some(tokens), args.token_cache_ttl)?);
    authn::spawn_configmap_watch(
        client.clone(),
        namespace.to_string(),
        name.to_string(),
        overrides,
        authenticator.clone(),
    );
    let reviewer: Arc<dyn authz::AccessReviewer> = Arc::new(authz::KubeAccessReviewer::new(client));
    let authorizer = authz::Authorizer::new(reviewer, args.authorization_allow_ttl, args.authorization_deny_ttl);
    Ok(Guard { authn: authenticator, authz: Arc::new(authorizer) })
}
