//! Which cluster the server belongs to: `--kubeconfig`, else kube's usual
//! inference (`KUBECONFIG` or `~/.kube/config`, then the in-cluster service
//! account), and the one client every watch and review shares.
//!
//! When there is none, the error says once what is missing and what to do.
//! kube's configuration errors print their cause inside their own message and
//! return it as their source too, so an error chain (`{:#}`) repeated one io
//! error three times; the errors made here carry their text only.

use std::io::ErrorKind;
use std::path::Path;

use kube::config::{InClusterError, KubeConfigOptions, Kubeconfig, KubeconfigError};

use crate::server::options::ClusterOptions;

/// The one client for the cluster (from --kubeconfig or the usual inference),
/// shared by every watch of the cluster, TokenReviews and
/// SubjectAccessReviews. kube-rs' own retry layer is off: watches retry with
/// their backoff, and reviews with kube's webhook backoff under their deadline
/// (`auth::review`), so nothing is retried twice.
pub async fn cluster_client(options: &ClusterOptions) -> anyhow::Result<kube::Client> {
    let mut config = match &options.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| anyhow::anyhow!(kubeconfig_problem(path, &e)))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| anyhow::anyhow!(kubeconfig_problem(path, &e)))?
        }
        None => match kube::Config::infer().await {
            Ok(config) => config,
            Err(_) => return Err(anyhow::anyhow!(why_no_cluster().await)),
        },
    };
    config.default_retry = false;
    crate::transport::kube_client(config).map_err(|e| anyhow::anyhow!("building the Kubernetes client: {e:#}"))
}

/// What is wrong with a kubeconfig, naming its path once.
fn kubeconfig_problem(path: &Path, error: &KubeconfigError) -> String {
    match error {
        KubeconfigError::ReadConfig(io, _) => format!("reading kubeconfig {}: {io}", path.display()),
        other => format!("kubeconfig {}: {other}", path.display()),
    }
}

/// Why kube's inference found no cluster. `infer` keeps both failures to
/// itself, so each source is asked again (cheap, and only when it failed):
/// nothing at all, an unusable kubeconfig, or an unusable in-cluster setup.
async fn why_no_cluster() -> String {
    const WHAT_TO_DO: &str = "set KUBECONFIG or --kubeconfig, or run in a Pod";
    let from_file = match kube::Config::from_kubeconfig(&KubeConfigOptions::default()).await {
        Ok(_) => return "the kubeconfig could not be loaded".into(),
        Err(e) => e,
    };
    let in_cluster = match kube::Config::incluster() {
        Ok(_) => return "the in-cluster configuration could not be loaded".into(),
        Err(e) => e,
    };
    let in_a_pod = !matches!(in_cluster, InClusterError::ReadEnvironmentVariable(_));
    match from_file {
        KubeconfigError::ReadConfig(io, path) if io.kind() == ErrorKind::NotFound && !in_a_pod => {
            format!("no cluster configured: no kubeconfig at {} and not running in a Pod; {WHAT_TO_DO}", path.display())
        }
        KubeconfigError::FindPath if !in_a_pod => {
            format!("no cluster configured: no KUBECONFIG, no home directory and not running in a Pod; {WHAT_TO_DO}")
        }
        _ if in_a_pod => format!("in-cluster configuration: {in_cluster}"),
        KubeconfigError::ReadConfig(io, path) => format!("reading kubeconfig {}: {io}", path.display()),
        other => format!("kubeconfig: {other}"),
    }
}
