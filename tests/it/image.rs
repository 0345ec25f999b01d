//! The container image users run (Dockerfile, scripts/image), run as a Pod
//! of the Deployment in manifests/ runs: its args, security context and
//! volumes, the service account's token and CA mounted where client libraries
//! look, `KUBERNETES_SERVICE_HOST`/`PORT` pointing at the control plane, the
//! serving certificate from the Secret; registered through the APIService and
//! used through the aggregator with kubectl. On the memory store, and as two
//! replicas on the control plane's own etcd.
//!
//! The control plane's kubelet is simulated and runs no container: podman starts the containers (host
//! network, the control plane listens on loopback) and the Service is an
//! ExternalName to localhost, as for every other test here.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::Value;

use crate::common;
use crate::common::cluster::{registration_yaml, wait_available, wait_openapi_v3, wait_served, ControlPlane};
use crate::common::podman::{image_archive, Container, PodContext, Podman};

const NAMESPACE: &str = "farm-system";

/// The objects of the manifests for a cluster without cert-manager (the dev
/// overlay, with certificates made by `farm-apiserver certs`), and the CA
/// that signed the serving certificate.
struct Install {
    objects: Vec<Value>,
    ca_bundle: String,
    _dir: tempfile::TempDir,
}

fn render_install() -> Install {
    let dir = tempfile::Builder::new().prefix("farm-image-manifests-").tempdir().expect("tempdir");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests");
    let status = Command::new("cp").arg("-r").arg(&src).arg(dir.path()).status().expect("cp");
    assert!(status.success(), "copy manifests/");
    let overlay = dir.path().join("manifests/overlays/dev");
    let out = Command::new(env!("CARGO_BIN_EXE_farm-apiserver"))
        .args(["certs", "--out"])
        .arg(overlay.join("certs"))
        .args(["--service-name", "farm-apiserver", "--service-namespace", NAMESPACE])
        .output()
        .expect("run farm-apiserver certs");
    assert!(out.status.success(), "farm-apiserver certs: {out:?}");
    let out =
        Command::new(common::kubectl_bin()).args(["kustomize"]).arg(&overlay).output().expect("kubectl kustomize");
    assert!(out.status.success(), "kubectl kustomize: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let objects: Vec<Value> = text
        .split("\n---\n")
        .filter(|doc| !doc.trim().is_empty())
        .map(|doc| serde_norway::from_str::<Value>(doc).unwrap_or_else(|e| panic!("rendered manifest: {e}\n{doc}")))
        .collect();
    let ca = std::fs::read(overlay.join("certs/ca.crt")).expect("ca.crt");
    Install { objects, ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca), _dir: dir }
}

impl Install {
    fn find(&self, kind: &str) -> &Value {
        self.objects.iter().find(|o| o["kind"] == kind).unwrap_or_else(|| panic!("no {kind} in the manifests"))
    }

    /// Everything the Pod needs in the cluster: the namespace, the service
    /// account and its RBAC (the token the container gets is only as good as
    /// what the manifests grant), the Secret and the ConfigMaps. The
    /// Deployment has no kubelet to run it and the Service, APIService are
    /// replaced by the loopback registration.
    fn apply_cluster_objects(&self, cp: &ControlPlane) {
        let items: Vec<&Value> = self
            .objects
            .iter()
            .filter(|o| !matches!(o["kind"].as_str(), Some("Deployment" | "Service" | "APIService")))
            .collect();
        cp.apply(&serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string());
    }
}

/// A control plane of its own (the APIService is global), with the install's
/// cluster objects applied once; tests here take turns registering their
/// containers on it.
struct Cluster {
    cp: ControlPlane,
    install: Install,
    podman: Podman,
    image: String,
}

fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let podman = Podman::new();
        let image = podman.load(image_archive());
        let cp = ControlPlane::start();
        let install = render_install();
        install.apply_cluster_objects(&cp);
        Cluster { cp, install, podman, image }
    })
}

/// One test at a time owns the APIService.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// Starts a container of the Deployment's Pod template listening on `port`,
/// and waits until it answers /readyz (as the kubelet's readiness probe,
/// without credentials).
async fn start_replica<'c>(c: &'c Cluster, name: &str, port: u16, extra_args: &[String]) -> Container<'c> {
    let deployment = c.install.find("Deployment");
    let pod = PodContext {
        cp: &c.cp,
        namespace: NAMESPACE,
        extra_args: extra_args.to_vec(),
        bind: format!("0.0.0.0:{port}"),
    };
    let started = Instant::now();
    let container = c.podman.run_pod(&c.image, name, &deployment["spec"]["template"], &pod);
    let ca = base64::engine::general_purpose::STANDARD.decode(&c.install.ca_bundle).expect("caBundle");
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("ca"))
        // The serving certificate names the Service, not 127.0.0.1.
        .resolve("farm-apiserver.farm-system.svc", format!("127.0.0.1:{port}").parse().expect("addr"))
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let deadline = started + Duration::from_secs(60);
    loop {
        let probe = client.get(format!("https://farm-apiserver.farm-system.svc:{port}/readyz")).send().await;
        if matches!(&probe, Ok(r) if r.status().is_success()) {
            eprintln!("{name}: ready {:?} after podman run", started.elapsed());
            return container;
        }
        assert!(Instant::now() < deadline, "{name} not ready within 60 s ({probe:?}); its log:\n{}", container.logs());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Points the APIService at the container on `port` and waits until the
/// aggregator serves the group from it over verified TLS.
async fn register(c: &Cluster, port: u16) {
    c.cp.apply(&registration_yaml(port, &c.install.ca_bundle));
    // The aggregator reconnects to the new endpoint within moments; until the
    // discovery it proxies comes from a live server, kubectl would race it.
    wait_available(&c.cp, Duration::from_secs(60)).await;
    wait_served(&c.cp, Duration::from_secs(60)).await;
    wait_openapi_v3(&c.cp, Duration::from_secs(60)).await;
}

fn kubectl(c: &Cluster, args: &[&str]) -> String {
    common::ok(c.cp.kubectl(args))
}

fn llama_yaml(name: &str, namespace: &str, weight: u32) -> String {
    format!(
        "apiVersion: farm.example.com/v1alpha\nkind: Llama\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  weight: {weight}\n  height: 1.5\n"
    )
}

fn apply(c: &Cluster, yaml: &str) {
    common::ok(common::kubectl_stdin(&c.cp.kubeconfig, &["apply", "-f", "-"], Some(yaml)));
}

/// The user and group the container's process runs as (from /proc).
fn process_ids(pid: u32) -> (String, String) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let field = |name: &str| {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name} in {status}"));
        line.split_whitespace().nth(1).expect("real id").to_string()
    };
    (field("Uid:"), field("Gid:"))
}

#[tokio::test]
async fn image_runs_as_the_deployments_pod_behind_the_aggregator() {
    let c = cluster();
    let _turn = TURN.lock().await;
    let port = free_port();
    let replica = start_replica(c, "farm-memory", port, &[]).await;
    assert_eq!(process_ids(replica.pid()), ("65532".into(), "65532".into()), "the server runs as the image's user");
    register(c, port).await;

    let ns = common::cluster::namespace(&c.cp, "image-memory");
    // A watch through the aggregator, opened before the write it must see.
    let watch = common::KubectlStream::start(&c.cp.kubeconfig, &["get", "llamas.farm.example.com", "-n", &ns, "-w"]);
    apply(c, &llama_yaml("dolly", &ns, 120));
    watch.expect_line(&["dolly"], Duration::from_secs(30));
    let listed = kubectl(c, &["get", "llamas.farm.example.com", "-n", &ns, "-o", "name"]);
    assert_eq!(listed.trim(), "llama.farm.example.com/dolly");

    // FarmPods come from the container's own watch of the control plane's
    // Pods, through the service account's token: a Pod of the namespace shows.
    apply(
        c,
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: shearer\n  namespace: {ns}\nspec:\n  containers:\n  - name: c\n    image: example.invalid/shearer\n"
        ),
    );
    common::cluster::eventually("the Pod as a FarmPod", Duration::from_secs(30), || {
        let (ok, out, _) = c.cp.kubectl(&["get", "farmpods", "-n", &ns, "-o", "name"]);
        ok && out.contains("shearer")
    })
    .await;

    // Stopped as the kubelet stops a Pod: SIGTERM, a drain, exit code 0.
    assert_eq!(replica.stop(40), 0, "exit code after SIGTERM; log:\n{}", replica.logs());
    assert!(replica.remove(), "the container is gone after podman rm");
}

#[tokio::test]
async fn two_containers_are_two_replicas_on_the_control_planes_etcd() {
    let c = cluster();
    let _turn = TURN.lock().await;
    let etcd = c.cp.info["etcdEndpoint"].as_str().expect("etcdEndpoint").to_string();
    let prefix = common::etcd::unique_prefix();
    let storage: Vec<String> = ["--storage", "etcd", "--etcd-servers", &etcd, "--etcd-prefix", &prefix]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (port_a, port_b) = (free_port(), free_port());
    let a = start_replica(c, "farm-etcd-a", port_a, &storage).await;
    let b = start_replica(c, "farm-etcd-b", port_b, &storage).await;
    let ns = common::cluster::namespace(&c.cp, "image-etcd");

    // Written through replica a, watched and read through replica b.
    register(c, port_a).await;
    apply(c, &llama_yaml("alpha", &ns, 100));
    register(c, port_b).await;
    let watch = common::KubectlStream::start(&c.cp.kubeconfig, &["get", "llamas.farm.example.com", "-n", &ns, "-w"]);
    watch.expect_line(&["alpha"], Duration::from_secs(30));
    apply(c, &llama_yaml("beta", &ns, 110));
    watch.expect_line(&["beta"], Duration::from_secs(30));

    // Replica b gone, replica a serves what b wrote.
    assert_eq!(b.stop(40), 0, "replica b's exit code; log:\n{}", b.logs());
    register(c, port_a).await;
    let listed = kubectl(c, &["get", "llamas.farm.example.com", "-n", &ns, "-o", "name"]);
    assert_eq!(listed.lines().collect::<Vec<_>>(), ["llama.farm.example.com/alpha", "llama.farm.example.com/beta"]);
    let weight = kubectl(c, &["get", "llamas.farm.example.com", "beta", "-n", &ns, "-o", "jsonpath={.spec.weightKg}"]);
    assert_eq!(weight, "110");
    assert_eq!(a.stop(40), 0, "replica a's exit code; log:\n{}", a.logs());
    assert!(a.remove() && b.remove(), "both containers are gone after podman rm");
}
