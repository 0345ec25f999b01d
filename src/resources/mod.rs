//! The kinds this server serves. Adding a kind: one file here describing it
//! (a [`crate::machinery::resource::Kind`]) and one line in [`build`].

pub mod farmpod;
pub mod llama;
pub mod namespaces;

use std::sync::Arc;

use crate::config::{ServeArgs, StorageBackend};
use crate::machinery::encode::KindIndexer;
use crate::machinery::registry::Registry;
use crate::machinery::resource::Kind;
use crate::ops::health::{Check, DetailedCheck, FnCheck};
use crate::storage::etcd::{EtcdStore, KeyCodec};
use crate::storage::memory::MemoryStore;
use crate::storage::Store;

/// The served kinds with their storage, and the readiness checks they add.
pub struct Served {
    pub registries: Vec<Arc<Registry>>,
    pub ready_checks: Vec<Arc<dyn Check>>,
    pub pod_cache: Arc<farmpod::PodCache>,
}

fn memory_store(kind: &Arc<dyn Kind>, args: &ServeArgs) -> Arc<MemoryStore> {
    Arc::new(
        MemoryStore::new(Arc::new(KindIndexer(kind.clone())), args.watch_history, args.watch_buffer)
            .with_history_bytes(args.watch_history_bytes)
            .with_max_object_bytes(args.max_object_bytes),
    )
}

/// Where the kinds this server owns keep their objects.
enum Storage {
    Memory,
    Etcd { client: Box<etcd_client::Client>, prefix: String },
}

impl Storage {
    async fn open(args: &ServeArgs) -> anyhow::Result<Self> {
        match args.storage {
            StorageBackend::Memory => Ok(Self::Memory),
            StorageBackend::Etcd => {
                let options = args.etcd_options();
                let prefix = options.checked_prefix()?;
                let client = options.connect().await?;
                tracing::info!(servers = ?options.servers, prefix, "storing in etcd");
                Ok(Self::Etcd { client: Box::new(client), prefix })
            }
        }
    }

    /// A store for `kind`, and its readiness check when it has one.
    fn store_for(&self, kind: &Arc<dyn Kind>, args: &ServeArgs) -> (Arc<dyn Store>, Option<Arc<dyn Check>>) {
        match self {
            Self::Memory => (memory_store(kind, args), None),
            Self::Etcd { client, prefix } => {
                let codec = KeyCodec::new(prefix, kind.names().plural, kind.namespaced());
                let store =
                    EtcdStore::start((**client).clone(), codec, memory_store(kind, args), args.etcd_request_timeout);
                let feed = store.feed();
                (Arc::new(store), Some(Arc::new(FnCheck("etcd", move || feed.readiness()))))
            }
        }
    }
}

/// The one client for the cluster (from --kubeconfig or the usual inference),
/// shared by the Pod watch, the authentication ConfigMap watch, TokenReviews and
/// SubjectAccessReviews. kube-rs' own retry layer is off: watches retry with
/// their backoff, and reviews with kube's webhook backoff under their deadline
/// (`auth::review`), so nothing is retried twice.
pub async fn cluster_client(args: &ServeArgs) -> anyhow::Result<kube::Client> {
    use anyhow::Context;
    let mut config = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?
        }
        None => kube::Config::infer().await.context("no kubeconfig and not running in a cluster")?,
    };
    config.default_retry = false;
    kube::Client::try_from(config).context("building the Kubernetes client")
}

/// Builds every served kind; starts the Pod watch when a cluster is configured.
/// `cluster` is the client for the cluster whose Pods FarmPods show (or why there is none).
pub async fn build(args: &ServeArgs, cluster: anyhow::Result<kube::Client>) -> anyhow::Result<Served> {
    let storage = Storage::open(args).await?;
    let mut ready_checks: Vec<Arc<dyn Check>> = Vec::new();
    let llama: Arc<dyn Kind> = Arc::new(llama::LlamaKind);
    let (llama_store, llama_check) = storage.store_for(&llama, args);
    ready_checks.extend(llama_check);
    let mut llamas = Registry::new(llama.clone(), llama_store);
    // Creates in a namespace the cluster does not have (or is terminating) are
    // refused as kube's NamespaceLifecycle does. Without a cluster there is no
    // source of namespaces: every namespace is taken to exist.
    if let Ok(client) = &cluster {
        let lifecycle = namespaces::NamespaceLifecycle::start(client.clone());
        let readiness = lifecycle.clone();
        ready_checks.push(Arc::new(FnCheck("namespace-cache", move || readiness.readiness())));
        llamas = llamas.with_namespace_admission(lifecycle);
    }
    let llamas = Arc::new(llamas);

    let (pod_cache, client) = match cluster {
        Ok(client) => (Arc::new(farmpod::PodCache::default()), Some(client)),
        Err(e) => {
            tracing::warn!(error = format!("{e:#}"), "FarmPods disabled: no cluster to read Pods from");
            (farmpod::PodCache::disabled(format!("{e:#}")), None)
        }
    };
    let farmpod: Arc<dyn Kind> = Arc::new(farmpod::FarmPodKind { cache: pod_cache.clone() });
    let pod_store = memory_store(&farmpod, args);
    if let Some(client) = client {
        farmpod::spawn_pod_watch(client, args.pod_namespaces.clone(), pod_store.clone(), pod_cache.clone());
    }
    let farmpods = Arc::new(Registry::new(farmpod, pod_store));
    let (cache, detail) = (pod_cache.clone(), pod_cache.clone());
    ready_checks.push(Arc::new(DetailedCheck(
        "farmpod-cache",
        move || cache.readiness(),
        move || detail.readiness_detail(),
    )));
    Ok(Served { registries: vec![llamas, farmpods], ready_checks, pod_cache })
}
