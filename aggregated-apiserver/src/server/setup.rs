//! What an application gives the server to serve: its kinds, each with the
//! store the options choose, and the readiness checks and gauges they add.
//! [`crate::server::run`] hands a [`Setup`] to the application's own function,
//! which calls [`Setup::stored`] for each kind the server owns and
//! [`Setup::serve`] for views it feeds itself.

use std::sync::Arc;

use anyhow::Context as _;

use crate::admission::authorizer::CelAuthorizer;
use crate::admission::metrics::AdmissionMetrics;
use crate::admission::namespace_lifecycle::NamespaceLifecycle;
use crate::admission::options::{
    AdmissionOptions, MUTATING_ADMISSION_POLICY, MUTATING_ADMISSION_WEBHOOK, NAMESPACE_LIFECYCLE,
    VALIDATING_ADMISSION_POLICY, VALIDATING_ADMISSION_WEBHOOK,
};
use crate::admission::policy::mutating::MutatingPolicies;
use crate::admission::policy::params::ParamSources;
use crate::admission::policy::validating::Policies;
use crate::admission::webhook::authentication::WebhookAuthentication;
use crate::admission::webhook::Webhooks;
use crate::admission::{Admission, AdmissionPlugin};
use crate::apimachinery::managed_fields::Versions;
use crate::apimachinery::schema::validations::RuleErrors;
use crate::auth::authz::{AccessReviewer, Authorizer, AuthzOptions, KubeAccessReviewer};
use crate::registry::encode::KindIndexer;
use crate::registry::kind::Kind;
use crate::registry::version_store::VersionStore;
use crate::registry::Registry;
use crate::server::health::{Check, FnCheck};
use crate::storage::encryption::EncryptionConfig;
use crate::storage::etcd::{EtcdStore, KeyCodec};
use crate::storage::memory::MemoryStore;
use crate::storage::options::{StorageBackend, StorageOptions};
use crate::storage::Store;

/// A value the metrics endpoint reads when it is scraped.
pub struct Gauge {
    /// The metric's name, after the application's prefix.
    pub name: &'static str,
    /// Its `# HELP` text.
    pub help: &'static str,
    /// Reads its value.
    pub value: Box<dyn Fn() -> f64 + Send + Sync>,
}

/// Where the kinds this server owns keep their objects.
enum Storage {
    Memory,
    Etcd { client: Box<etcd_client::Client>, prefix: String, encryption: EncryptionConfig },
}

/// What the application's serving function is given, and fills.
pub struct Setup {
    options: StorageOptions,
    /// The cluster this server belongs to (from --kubeconfig or the usual
    /// inference), or why there is none.
    pub cluster: crate::error::Result<kube::Client>,
    storage: Storage,
    admission_options: AdmissionOptions,
    /// Read at start from `--admission-control-config-file`, handed to the webhooks.
    webhook_authentication: Option<WebhookAuthentication>,
    /// Started with the first stored kind, shared by every one.
    namespaces: Option<Arc<NamespaceLifecycle>>,
    /// The admission plugins, started with the first stored kind.
    admission: Option<Admission>,
    /// Admission's metrics, under kube's names.
    admission_metrics: Arc<AdmissionMetrics>,
    /// What admission expressions' `authorizer` asks: this server's authorizer.
    cel_authorizer: CelAuthorizer,
    pub(crate) registries: Vec<Arc<Registry>>,
    pub(crate) ready_checks: Vec<Arc<dyn Check>>,
    pub(crate) gauges: Vec<Gauge>,
    pub(crate) first_ready: Vec<Box<dyn FnOnce() + Send>>,
}

impl Setup {
    pub(crate) async fn new(
        options: &StorageOptions,
        admission_options: &AdmissionOptions,
        admission_metrics: Arc<AdmissionMetrics>,
        cluster: anyhow::Result<kube::Client>,
        authorizer: Option<Arc<Authorizer>>,
    ) -> anyhow::Result<Self> {
        let storage = match options.storage {
            StorageBackend::Memory => {
                if let Some(path) = &options.encryption_provider_config {
                    anyhow::bail!(
                        "--encryption-provider-config {} encrypts what is stored in etcd: it needs --storage etcd",
                        path.display()
                    );
                }
                Storage::Memory
            }
            StorageBackend::Etcd => {
                let encryption = match &options.encryption_provider_config {
                    Some(path) => EncryptionConfig::load(path)?,
                    None => EncryptionConfig::default(),
                };
                let options = options.etcd_options();
                let prefix = options.checked_prefix()?;
                let client = options.connect().await?;
                tracing::info!(servers = ?options.servers, prefix, "storing in etcd");
                Storage::Etcd { client: Box::new(client), prefix, encryption }
            }
        };
        // Without authorization of its own (`--authentication none`),
        // admission still asks the cluster what a user may do, as the
        // policies written for it expect.
        let cel_authorizer = CelAuthorizer::new(authorizer.or_else(|| {
            let client = cluster.as_ref().ok()?.clone();
            let reviewer: Arc<dyn AccessReviewer> = Arc::new(KubeAccessReviewer::new(client));
            Some(Arc::new(Authorizer::new(reviewer, AuthzOptions::default())))
        }));
        Ok(Self {
            options: options.clone(),
            cluster: cluster.map_err(crate::error::Error::from),
            storage,
            admission_options: admission_options.clone(),
            webhook_authentication: Some(WebhookAuthentication::load(admission_options.config_file.as_deref())?),
            namespaces: None,
            admission: None,
            admission_metrics,
            cel_authorizer,
            registries: Vec::new(),
            ready_checks: Vec::new(),
            gauges: Vec::new(),
            first_ready: Vec::new(),
        })
    }

    /// Runs `hook` once, when the server is first ready (every readiness
    /// check passes): the end of start-up, for process policy such as handing
    /// memory used only while starting back to the system.
    pub fn on_first_ready(&mut self, hook: impl FnOnce() + Send + 'static) {
        self.first_ready.push(Box::new(hook));
    }

    /// A store in memory for `kind`, with the watch history the options set:
    /// for a view the application fills itself.
    pub fn memory_store(&self, kind: &Arc<dyn Kind>) -> Arc<MemoryStore> {
        let options = &self.options;
        Arc::new(
            MemoryStore::new(Arc::new(KindIndexer(kind.clone())), options.watch_history, options.watch_buffer)
                .with_history_bytes(options.watch_history_bytes)
                .with_max_object_bytes(options.max_object_bytes),
        )
    }

    /// Serves `kind` as one this server owns and stores (in memory or in
    /// etcd, as the options say), admitted as kube-apiserver admits a custom
    /// resource: creates in a namespace the cluster does not have, or is
    /// terminating, are refused as kube's NamespaceLifecycle refuses them,
    /// and every write goes through the cluster's admission webhooks.
    /// Without a cluster there is no source of namespaces or webhooks: every
    /// namespace is taken to exist, and nothing else is asked.
    ///
    /// Fails when the kind's schema has CEL rules (`x-kubernetes-validations`)
    /// that do not compile or may cost more than kube allows: the error
    /// names each such rule by its place in the schema.
    pub fn stored(&mut self, kind: Arc<dyn Kind>) -> crate::error::Result<Arc<Registry>> {
        let names = kind.names();
        let registry =
            self.stored_registry(kind).with_context(|| format!("serving {}.{}", names.plural, names.group))?;
        Ok(registry)
    }

    fn stored_registry(&mut self, kind: Arc<dyn Kind>) -> Result<Arc<Registry>, RuleErrors> {
        let store: Arc<dyn Store> = match &self.storage {
            Storage::Memory => self.memory_store(&kind),
            Storage::Etcd { client, prefix, encryption } => {
                let names = kind.names();
                let values = encryption.transformer(names.group, names.plural);
                if !values.is_plain() {
                    tracing::info!(resource = %format!("{}.{}", names.plural, names.group), ?values, "encrypting at rest");
                }
                let codec = KeyCodec::new(prefix, names.plural, kind.namespaced()).with_values(values);
                let store = EtcdStore::start(
                    (**client).clone(),
                    codec,
                    self.memory_store(&kind),
                    self.options.etcd_request_timeout,
                );
                let feed = store.feed();
                self.ready_checks.push(Arc::new(FnCheck("etcd", move || feed.readiness())));
                Arc::new(store)
            }
        };
        // Each version is served from the same store, seen in it: the other
        // versions converted, the storage version as stored (and converted
        // where an earlier release stored another).
        let Some(others) = kind.other_versions() else {
            return self.admitted_registry(kind, store, None);
        };
        let storage_version = kind.names().api_version();
        let seen_in = |version: &Arc<dyn Kind>| {
            Arc::new(VersionStore::new(
                store.clone(),
                others.convert.clone(),
                version.names().api_version(),
                storage_version.clone(),
                KindIndexer(version.clone()),
            ))
        };
        let all: Vec<Arc<dyn Kind>> = others.kinds.iter().cloned().chain([kind.clone()]).collect();
        let versions = Registry::versions_of(&all, others.convert.clone());
        for version in &others.kinds {
            self.admitted_registry(version.clone(), seen_in(version), Some(versions.clone()))?;
        }
        let stored = seen_in(&kind);
        self.admitted_registry(kind, stored, Some(versions))
    }

    /// Serves `kind` from `store`, with the cluster's admission.
    fn admitted_registry(
        &mut self,
        kind: Arc<dyn Kind>,
        store: Arc<dyn Store>,
        versions: Option<Arc<Versions>>,
    ) -> Result<Arc<Registry>, RuleErrors> {
        let mut registry = Registry::with_rules(kind, store)?;
        if let Some(versions) = versions {
            registry = registry.with_versions(versions);
        }
        if let Some(lifecycle) = self.namespace_lifecycle() {
            if self.admission_options.enabled(NAMESPACE_LIFECYCLE) {
                registry = registry.with_namespace_admission(lifecycle);
            }
        }
        if let Some(admission) = self.admission() {
            registry = registry.with_admission(admission);
        }
        let registry = Arc::new(registry);
        self.registries.push(registry.clone());
        Ok(registry)
    }

    /// Serves a registry the application built itself (a read-only view over
    /// a store it fills, for example).
    pub fn serve(&mut self, registry: Arc<Registry>) {
        self.registries.push(registry);
    }

    /// Readiness waits for `check` too.
    pub fn ready_check(&mut self, check: Arc<dyn Check>) {
        self.ready_checks.push(check);
    }

    /// `/metrics` shows `gauge` too.
    pub fn gauge(&mut self, gauge: Gauge) {
        self.gauges.push(gauge);
    }

    /// The mutating and validating plugins (kube's order), started once.
    fn admission(&mut self) -> Option<Admission> {
        if self.admission.is_none() {
            let client = self.cluster.as_ref().ok()?.clone();
            let namespaces = self.namespace_lifecycle()?;
            let mutating = self.admission_options.enabled(MUTATING_ADMISSION_WEBHOOK);
            let validating = self.admission_options.enabled(VALIDATING_ADMISSION_WEBHOOK);
            // kube's order: mutating policies, then the webhooks' mutating
            // step; validating policies before the webhooks' validating step.
            let mut plugins: Vec<Arc<dyn AdmissionPlugin>> = Vec::new();
            let params = ParamSources::new(client.clone());
            if self.admission_options.enabled(MUTATING_ADMISSION_POLICY) {
                let policies = Arc::new(MutatingPolicies::start(
                    client.clone(),
                    params.clone(),
                    namespaces.clone(),
                    self.cel_authorizer.clone(),
                    self.admission_metrics.clone(),
                ));
                let readiness = policies.clone();
                self.ready_checks.push(Arc::new(FnCheck("mutating-admission-policies", move || readiness.readiness())));
                plugins.push(policies);
            }
            if self.admission_options.enabled(VALIDATING_ADMISSION_POLICY) {
                let policies = Arc::new(Policies::start(
                    client.clone(),
                    params,
                    namespaces.clone(),
                    self.admission_metrics.clone(),
                    self.cel_authorizer.clone(),
                ));
                let readiness = policies.clone();
                self.ready_checks.push(Arc::new(FnCheck("admission-policies", move || readiness.readiness())));
                plugins.push(policies);
            }
            if mutating || validating {
                let authentication = self.webhook_authentication.take().unwrap_or_default();
                let webhooks = Arc::new(Webhooks::start(
                    client,
                    namespaces,
                    self.admission_metrics.clone(),
                    mutating,
                    validating,
                    authentication,
                    self.cel_authorizer.clone(),
                ));
                let readiness = webhooks.clone();
                self.ready_checks.push(Arc::new(FnCheck("webhook-configurations", move || readiness.readiness())));
                plugins.push(webhooks);
            }
            self.admission = Some(Admission::new(plugins));
        }
        self.admission.clone()
    }

    fn namespace_lifecycle(&mut self) -> Option<Arc<NamespaceLifecycle>> {
        if self.namespaces.is_none() {
            let client = self.cluster.as_ref().ok()?;
            let lifecycle = NamespaceLifecycle::start(client.clone());
            let readiness = lifecycle.clone();
            self.ready_checks.push(Arc::new(FnCheck("namespace-cache", move || readiness.readiness())));
            self.namespaces = Some(lifecycle);
        }
        self.namespaces.clone()
    }
}
