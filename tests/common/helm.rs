//! helm, as the tests run it: the binary `scripts/helm` builds and caches
//! (target/helm/helm, pinned by tools/helm/go.mod), built at most once per
//! test process. Nothing skips: a failed build fails the test with its output.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The chart, charts/farm-apiserver.
pub fn chart_dir() -> PathBuf {
    repo_root().join("charts/farm-apiserver")
}

/// The path of the helm binary, built by `scripts/helm --print-path` when
/// missing or out of date.
pub fn helm_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/helm"))
            .arg("--print-path")
            .output()
            .expect("run scripts/helm --print-path");
        assert!(
            out.status.success(),
            "building helm (scripts/helm) failed ({:?}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// Runs helm with these arguments (and a kubeconfig, for the commands that
/// talk to a cluster); returns (success, stdout, stderr). helm's own caches
/// and configuration go to a directory of this process, never the user's.
pub fn helm(kubeconfig: Option<&Path>, args: &[&str]) -> (bool, String, String) {
    static HOME: OnceLock<tempfile::TempDir> = OnceLock::new();
    let home = HOME.get_or_init(|| tempfile::Builder::new().prefix("farm-helm-home-").tempdir().expect("tempdir"));
    let mut command = Command::new(helm_bin());
    command
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .env("KUBECONFIG", kubeconfig.unwrap_or(Path::new("/dev/null")))
        .args(args);
    let out = command.output().expect("run helm");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
