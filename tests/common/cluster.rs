//! End-to-end fixture: a real control plane (tests/controlplane: embedded etcd,
//! kube-apiserver with the aggregator, kube-controller-manager) started once
//! per test process and shared, and farm-apiserver registered behind it through
//! an ExternalName Service and an APIService carrying a real caBundle.
//!
//! The APIService is global to a control plane: the shared one serves the
//! farm-apiserver of [`shared`]. A test that registers another farm-apiserver
//! (other flags, a wrong caBundle, a replaced replica) does so on a control
//! plane of its own, [`ControlPlane::start`], so that it never takes the
//! group away from the tests running beside it.
//!
//! Nothing here skips: if the control plane cannot be built or started, the
//! test fails with the reason.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::Value;

use super::{kubectl, kubectl_stdin, Options, Server};

/// A running control plane: the shared one ([`controlplane`]), or one a test
/// owns, stopped when dropped.
pub struct ControlPlane {
    child: Mutex<Child>,
    /// Held open: the control plane stops when its stdin closes, so it dies
    /// with the test process whatever way that ends (or when dropped).
    stdin: Mutex<Option<ChildStdin>>,
    pub info: Value,
    pub kubeconfig: PathBuf,
    pub user_kubeconfig: PathBuf,
    pub server: String,
    /// The process running etcd, kube-apiserver and kube-controller-manager.
    pub pid: u32,
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Builds tests/controlplane (a no-op when up to date); panics with the build's
/// output when it fails.
pub fn build_controlplane() -> PathBuf {
    let script = repo_root().join("tests/controlplane/build.sh");
    let started = Instant::now();
    let out = Command::new("bash").arg(&script).output().expect("run tests/controlplane/build.sh");
    assert!(
        out.status.success(),
        "building the control plane failed ({:?}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if started.elapsed() > Duration::from_secs(5) {
        eprintln!("built the control plane in {:?}", started.elapsed());
    }
    repo_root().join("target/controlplane/controlplane")
}

impl ControlPlane {
    /// Builds (when needed) and starts a control plane of its own, and waits
    /// until it serves.
    pub fn start() -> ControlPlane {
        start_controlplane(&[], &[])
    }

    /// A control plane of its own whose kube-apiserver has extra flags
    /// (`--audit-policy-file=...`).
    pub fn start_with(apiserver_args: &[&str]) -> ControlPlane {
        start_controlplane(apiserver_args, &[])
    }

    /// A control plane of its own with extra flags for kube-apiserver and for
    /// kube-controller-manager (`--controllers=...` adds to the controllers
    /// it runs).
    pub fn start_with_controllers(apiserver_args: &[&str], controller_manager_args: &[&str]) -> ControlPlane {
        start_controlplane(apiserver_args, controller_manager_args)
    }
}

/// Stops a control plane a test owns (the shared one lives in a static and is
/// never dropped): its stdin closes, so it cleans up and exits, as it does
/// when the test process ends.
impl Drop for ControlPlane {
    fn drop(&mut self) {
        drop(self.stdin.get_mut().unwrap_or_else(|e| e.into_inner()).take());
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        let deadline = Instant::now() + Duration::from_secs(20);
        while matches!(child.try_wait(), Ok(None)) {
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn start_controlplane(apiserver_args: &[&str], controller_manager_args: &[&str]) -> ControlPlane {
    let bin = build_controlplane();
    let dir = tempfile::Builder::new().prefix("farm-cp-").tempdir().expect("tempdir").keep();
    let log = std::fs::File::create(dir.join("controlplane.log")).expect("log file");
    let mut child = Command::new(&bin)
        .arg("--dir")
        .arg(dir.join("cp"))
        .args(apiserver_args.iter().map(|a| format!("--apiserver-arg={a}")))
        .args(controller_manager_args.iter().map(|a| format!("--controller-manager-arg={a}")))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
    let stdin = child.stdin.take().expect("stdin");
    let pid = child.id();
    let info =
        read_ready_line(&mut child, Duration::from_secs(180), &dir.join("controlplane.log"), "the control plane");
    let path = |k: &str| PathBuf::from(info[k].as_str().unwrap_or_else(|| panic!("{k} in {info}")));
    ControlPlane {
        kubeconfig: path("kubeconfig"),
        user_kubeconfig: path("userKubeconfig"),
        server: info["server"].as_str().expect("server").to_string(),
        pid,
        info,
        child: Mutex::new(child),
        stdin: Mutex::new(Some(stdin)),
    }
}

/// Waits for the `READY {json}` line tests/controlplane prints on stdout when
/// it serves, or panics with its log.
pub fn read_ready_line(child: &mut Child, timeout: Duration, log: &Path, what: &str) -> Value {
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(json) = line.strip_prefix("READY ") {
                let _ = tx.send(json.to_string());
            }
        }
    });
    let ready = rx.recv_timeout(timeout).unwrap_or_else(|_| {
        let log = std::fs::read_to_string(log).unwrap_or_default();
        panic!("{what} did not become ready:\n{log}")
    });
    serde_json::from_str(&ready).expect("READY json")
}

/// The control plane shared by the tests of this process.
pub fn controlplane() -> &'static ControlPlane {
    static CP: OnceLock<ControlPlane> = OnceLock::new();
    CP.get_or_init(|| start_controlplane(&[], &[]))
}

impl ControlPlane {
    pub fn kubectl(&self, args: &[&str]) -> (bool, String, String) {
        kubectl(&self.kubeconfig, args)
    }

    pub fn apply(&self, yaml: &str) {
        let out = kubectl_stdin(&self.kubeconfig, &["apply", "-f", "-"], Some(yaml));
        assert!(out.0, "kubectl apply failed: {out:?}\n{yaml}");
    }

    pub async fn client(&self) -> kube::Client {
        client_for(&self.kubeconfig).await
    }
}

pub async fn client_for(kubeconfig: &Path) -> kube::Client {
    super::install_crypto();
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let cfg =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.expect("config");
    kube::Client::try_from(cfg).expect("client")
}

/// farm-apiserver's APIServices: v1beta1 (preferred) and v1alpha.
pub const APISERVICES: [&str; 2] = ["v1beta1.farm.example.com", "v1alpha.farm.example.com"];

/// The Service and APIService that put farm-apiserver behind the aggregator
/// (the template scripts/playground uses too).
pub fn registration_yaml(port: u16, ca_bundle_b64: &str) -> String {
    let template = std::fs::read_to_string(repo_root().join("tests/controlplane/register-local.yaml"))
        .expect("tests/controlplane/register-local.yaml");
    template.replace("${PORT}", &port.to_string()).replace("${CA_BUNDLE}", ca_bundle_b64)
}

/// The Available condition of the APIServices: (status, reason, message),
/// of the first that is not available (else the last's).
pub fn apiservice_available(cp: &ControlPlane) -> (String, String, String) {
    let mut last = Default::default();
    for name in APISERVICES {
        last = one_apiservice_available(cp, name);
        if last.0 != "True" {
            break;
        }
    }
    last
}

fn one_apiservice_available(cp: &ControlPlane, name: &str) -> (String, String, String) {
    let out = cp.kubectl(&["get", "apiservice", name, "-o", "json"]);
    if !out.0 {
        return ("Missing".into(), String::new(), format!("{name}: {}", out.2));
    }
    let v: Value = serde_json::from_str(&out.1).unwrap_or_default();
    let cond = v["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Available").cloned())
        .unwrap_or_default();
    let s = |k: &str| cond[k].as_str().unwrap_or("").to_string();
    (s("status"), s("reason"), format!("{name}: {}", s("message")))
}

/// Waits until the APIService reports Available=True, or panics with the last condition.
pub async fn wait_available(cp: &ControlPlane, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let cond = apiservice_available(cp);
        if cond.0 == "True" {
            return;
        }
        assert!(Instant::now() < deadline, "APIServices {APISERVICES:?} not Available within {timeout:?}: {cond:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A request proxied by the aggregator to farm-apiserver: Ok(body) or the error
/// kubectl printed. (The APIService's Available condition alone proves little:
/// the aggregator's availability probe skips TLS verification.)
pub async fn proxied_discovery(cp: &ControlPlane) -> Result<String, String> {
    let mut body = String::new();
    for version in ["v1beta1", "v1alpha"] {
        body = proxied_version_discovery(cp, version).await?;
    }
    Ok(body)
}

/// A kube-rs client without its default retries of 5xx answers: the
/// failure is the answer.
pub async fn client_without_retries(kubeconfig: &Path) -> Result<kube::Client, String> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| e.to_string())?;
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    cfg.default_retry = false;
    kube::Client::try_from(cfg).map_err(|e| e.to_string())
}

/// [`proxied_discovery`] of one version.
async fn proxied_version_discovery(cp: &ControlPlane, version: &str) -> Result<String, String> {
    let req =
        http::Request::get(format!("/apis/farm.example.com/{version}")).body(Vec::new()).map_err(|e| e.to_string())?;
    let client = client_without_retries(&cp.kubeconfig).await?;
    match client.request_text(req).await {
        Ok(body) => Ok(body),
        Err(kube::Error::Api(status)) => Err(format!("{} {}: {}", status.code, status.reason, status.message)),
        Err(e) => Err(e.to_string()),
    }
}

/// Waits until the aggregator proxies to farm-apiserver over verified TLS.
pub async fn wait_served(cp: &ControlPlane, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        match proxied_discovery(cp).await {
            Ok(body) if body.contains("APIResourceList") => return,
            other => {
                assert!(Instant::now() < deadline, "farm.example.com not served through kube-apiserver: {other:?}")
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until kube-apiserver's OpenAPI v3 index lists our group version. The
/// aggregator adds it some time after the APIService is available; until then
/// kubectl cannot see that Llamas take `fieldValidation` and validates on the
/// client against OpenAPI v2 instead (a status-only apply then fails there
/// for want of `spec`).
pub async fn wait_openapi_v3(cp: &ControlPlane, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let (ok, index, err) = cp.kubectl(&["get", "--raw", "/openapi/v3"]);
        if ok && ["v1beta1", "v1alpha"].iter().all(|v| index.contains(&format!("apis/farm.example.com/{v}"))) {
            return;
        }
        assert!(Instant::now() < deadline, "farm.example.com's versions never listed in /openapi/v3: {err}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// farm-apiserver reading Pods from a control plane, registered behind it.
pub struct Registered<'cp> {
    pub server: Server,
    pub cp: &'cp ControlPlane,
}

/// Starts farm-apiserver against `cp` and registers it there, in place of
/// whatever farm-apiserver was registered before: on the shared control plane
/// that is [`shared`]'s alone, another registration needs a control plane of
/// its own ([`ControlPlane::start`]).
pub async fn register_on<'cp>(cp: &'cp ControlPlane, extra: &[&str]) -> Registered<'cp> {
    let server = Server::start_with(Options {
        args: extra.iter().map(|a| a.to_string()).collect(),
        kubeconfig: Some(cp.kubeconfig.clone()),
        tie_to_test_process: true,
        ..Default::default()
    })
    .await;
    let ca = std::fs::read(&server.ca_file).expect("ca.crt");
    cp.apply(&registration_yaml(server.port, &base64::engine::general_purpose::STANDARD.encode(ca)));
    wait_available(cp, Duration::from_secs(60)).await;
    wait_served(cp, Duration::from_secs(60)).await;
    wait_openapi_v3(cp, Duration::from_secs(60)).await;
    Registered { server, cp }
}

/// The farm-apiserver registered on the shared control plane, for every test
/// of this process. (Its `server.client` may hold connections of another
/// test's runtime: make a client of your own for direct requests.)
pub async fn shared() -> &'static Registered<'static> {
    static REG: tokio::sync::OnceCell<Registered<'static>> = tokio::sync::OnceCell::const_new();
    REG.get_or_init(|| register_on(controlplane(), &[])).await
}

/// A namespace of its own for one test.
pub fn namespace(cp: &ControlPlane, name: &str) -> String {
    let out = cp.kubectl(&["create", "namespace", name]);
    assert!(out.0 || out.2.contains("AlreadyExists"), "{out:?}");
    name.to_string()
}

/// Waits until kube-apiserver's authorizer has seen a new grant: `kubectl
/// auth can-i <args>` answers yes. RBAC is read from an informer's cache, so
/// a binding just created may still be unknown to the first request after it.
pub async fn wait_until_allowed(cp: &ControlPlane, args: &[&str]) {
    let mut command = vec!["auth", "can-i"];
    command.extend_from_slice(args);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = cp.kubectl(&command);
        if out.1.trim() == "yes" {
            return;
        }
        assert!(Instant::now() < deadline, "never allowed within 30 s: kubectl {command:?}: {out:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Polls `f` until it returns true.
pub async fn eventually(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
