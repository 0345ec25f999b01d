//! The deployment manifests (manifests/): the dev overlay, with certificates
//! made by `farm-apiserver certs`, is accepted by a real kube-apiserver
//! (server-side dry run of every object) and carries the real caBundle, the
//! hardened Pod and the aggregated RBAC roles; the base and the cert-manager
//! overlay render. Runs against its own control plane.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use base64::Engine;
use common::cluster::{self, ControlPlane};
use serde_json::Value;

fn repo_manifests() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("manifests")
}

/// Copies a directory tree, leaving out `skip` (and what is under it).
fn copy_tree(from: &Path, to: &Path, skip: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("mkdir {}: {e}", to.display()));
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display())) {
        let entry = entry.expect("dir entry");
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src == skip {
            continue;
        }
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&src, &dst, skip);
        } else {
            std::fs::copy(&src, &dst).unwrap_or_else(|e| panic!("copy {}: {e}", src.display()));
        }
    }
}

/// A copy of manifests/ whose dev overlay has fresh certificates from
/// `farm-apiserver certs` (whatever the working tree's certs/ holds is not copied).
struct Manifests {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Manifests {
    fn with_dev_certs() -> Manifests {
        let dir = tempfile::Builder::new().prefix("farm-manifests-").tempdir().expect("tempdir");
        let root = dir.path().join("manifests");
        let src = repo_manifests();
        copy_tree(&src, &root, &src.join("overlays/dev/certs"));
        let out = Command::new(env!("CARGO_BIN_EXE_farm-apiserver"))
            .args(["certs", "--out"])
            .arg(root.join("overlays/dev/certs"))
            .args(["--service-name", "farm-apiserver", "--service-namespace", "farm-system"])
            .output()
            .expect("run farm-apiserver certs");
        assert!(out.status.success(), "farm-apiserver certs: {out:?}");
        Manifests { _dir: dir, root }
    }

    fn dev(&self) -> String {
        self.root.join("overlays/dev").display().to_string()
    }

    fn cert_file(&self, name: &str) -> Vec<u8> {
        let path = self.root.join("overlays/dev/certs").join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    }
}

/// kubectl without a cluster (`kubectl kustomize`).
fn kustomize(dir: &Path) -> String {
    let out = Command::new(common::kubectl_bin()).arg("kustomize").arg(dir).output().expect("run kubectl kustomize");
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The control plane, with namespace farm-system really created (from
/// base/namespace.yaml, Pod Security labels included): a server-side dry run
/// of namespaced objects needs their namespace to exist.
fn controlplane_with_namespace() -> &'static ControlPlane {
    static NAMESPACE: OnceLock<()> = OnceLock::new();
    let cp = cluster::controlplane();
    NAMESPACE.get_or_init(|| {
        let ns = repo_manifests().join("base/namespace.yaml");
        let out = cp.kubectl(&["apply", "-f", &ns.display().to_string()]);
        assert!(out.0, "creating namespace farm-system: {out:?}");
    });
    cp
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The one object of this kind and name in a List.
fn find<'a>(items: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = items.iter().filter(|o| o["kind"] == kind && o["metadata"]["name"] == name).collect();
    assert_eq!(found.len(), 1, "{kind} {name} in the rendered manifests");
    found[0]
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

#[test]
fn dev_overlay_passes_server_side_dry_run() {
    let cp = controlplane_with_namespace();
    let m = Manifests::with_dev_certs();
    // The documented entry point: `kubectl apply -k manifests/` (the dev overlay).
    let top = m.root.display().to_string();
    let (ok, stdout, stderr) = cp.kubectl(&["apply", "--dry-run=server", "-k", &top]);
    assert!(ok, "kubectl apply --dry-run=server -k manifests/ failed:\n{stdout}\n{stderr}");
    // The restricted Pod Security level the namespace enforces would show up
    // here as "Warning: would violate PodSecurity ..." for the Deployment.
    assert!(!stderr.contains("Warning"), "warnings from the server:\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    for object in [
        "namespace/farm-system",
        "serviceaccount/farm-apiserver",
        "clusterrole.rbac.authorization.k8s.io/farm-apiserver",
        "clusterrole.rbac.authorization.k8s.io/farm-apiserver:aggregate-to-view",
        "clusterrole.rbac.authorization.k8s.io/farm-apiserver:aggregate-to-edit",
        "clusterrole.rbac.authorization.k8s.io/farm-apiserver:aggregate-to-admin",
        "clusterrolebinding.rbac.authorization.k8s.io/farm-apiserver",
        "clusterrolebinding.rbac.authorization.k8s.io/farm-apiserver:system:auth-delegator",
        "rolebinding.rbac.authorization.k8s.io/farm-apiserver-auth-reader",
        "deployment.apps/farm-apiserver",
        "service/farm-apiserver",
        "apiservice.apiregistration.k8s.io/v1alpha.farm.example.com",
        "secret/farm-apiserver-tls",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("{object} ")) && l.ends_with("(server dry run)")),
            "{object} not in the server dry run:\n{stdout}"
        );
    }
    assert_eq!(lines.len(), 13, "exactly the objects above:\n{stdout}");
}

#[test]
fn dev_overlay_carries_ca_bundle_hardened_pod_and_rbac() {
    let cp = controlplane_with_namespace();
    let m = Manifests::with_dev_certs();
    let rendered = kustomize(&m.root.join("overlays/dev"));
    assert!(!rendered.contains("insecureSkipTLSVerify"), "{rendered}");
    assert!(!rendered.contains("ca.key"), "the CA's key must not be deployed:\n{rendered}");

    // What kube-apiserver would store: a List of every object after decoding,
    // defaulting and admission.
    let (ok, stdout, stderr) = cp.kubectl(&["apply", "--dry-run=server", "-k", &m.dev(), "-o", "json"]);
    assert!(ok, "{stderr}");
    let list: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(list["kind"], "List", "{stdout}");
    let items = list["items"].as_array().expect("items");

    // caBundle: base64 of the generated CA, the value `certs` wrote to cabundle.b64.
    let ca_bundle = b64(&m.cert_file("ca.crt"));
    let cabundle_b64 = String::from_utf8(m.cert_file("cabundle.b64")).expect("utf-8");
    assert_eq!(cabundle_b64.trim(), ca_bundle);
    let api = find(items, "APIService", "v1alpha.farm.example.com");
    assert_eq!(api["spec"]["caBundle"], ca_bundle.as_str(), "{api:#}");
    assert_ne!(api["spec"]["insecureSkipTLSVerify"], true, "{api:#}");
    assert_eq!(api["spec"]["group"], "farm.example.com");
    assert_eq!(api["spec"]["version"], "v1alpha");
    assert_eq!(api["spec"]["groupPriorityMinimum"], 1000);
    assert_eq!(api["spec"]["versionPriority"], 15);
    assert_eq!(api["spec"]["service"]["namespace"], "farm-system");
    assert_eq!(api["spec"]["service"]["name"], "farm-apiserver");
    assert_eq!(api["spec"]["service"]["port"], 443);

    // The Secret the Deployment mounts: the serving pair and the (public) CA.
    let secret = find(items, "Secret", "farm-apiserver-tls");
    assert_eq!(secret["metadata"]["namespace"], "farm-system");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    let mut keys: Vec<&str> = secret["data"].as_object().expect("data").keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["ca.crt", "tls.crt", "tls.key"]);
    assert_eq!(secret["data"]["ca.crt"], ca_bundle.as_str());
    assert_eq!(secret["data"]["tls.crt"], b64(&m.cert_file("tls.crt")).as_str());
    assert_eq!(secret["data"]["tls.key"], b64(&m.cert_file("tls.key")).as_str());

    let service = find(items, "Service", "farm-apiserver");
    assert_eq!(service["spec"]["type"], "ClusterIP");
    assert_eq!(service["spec"]["ports"][0]["port"], 443);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "https");

    let deployment = find(items, "Deployment", "farm-apiserver");
    assert_eq!(deployment["metadata"]["namespace"], "farm-system");
    assert_eq!(deployment["spec"]["replicas"], 1);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "farm-apiserver");
    assert_eq!(pod["containers"].as_array().map(Vec::len), Some(1));
    let container = &pod["containers"][0];
    assert_eq!(container["image"], "farm-apiserver:latest");
    let args = strings(&container["args"]);
    assert_eq!(args.first(), Some(&"serve"));
    for pair in [
        ["--bind", "0.0.0.0:8443"],
        ["--tls-cert-file", "/etc/farm-apiserver/tls/tls.crt"],
        ["--tls-private-key-file", "/etc/farm-apiserver/tls/tls.key"],
        ["--authentication", "delegated"],
        ["--log-format", "json"],
    ] {
        assert!(args.windows(2).any(|w| w == pair), "{pair:?} in {args:?}");
    }
    let sc = &container["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true, "{sc}");
    assert_eq!(sc["runAsUser"], 65532, "{sc}");
    assert_eq!(sc["readOnlyRootFilesystem"], true, "{sc}");
    assert_eq!(sc["allowPrivilegeEscalation"], false, "{sc}");
    assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"], "{sc}");
    assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault", "{sc}");
    assert_eq!(container["ports"][0]["containerPort"], 8443);
    assert_eq!(container["ports"][0]["name"], "https");
    for (probe, path) in [("livenessProbe", "/livez"), ("readinessProbe", "/readyz")] {
        let get = &container[probe]["httpGet"];
        assert_eq!((get["path"].as_str(), get["scheme"].as_str()), (Some(path), Some("HTTPS")), "{probe}: {get}");
    }
    assert_eq!(container["resources"]["requests"]["cpu"], "50m");
    assert_eq!(container["resources"]["requests"]["memory"], "64Mi");
    assert_eq!(container["resources"]["limits"]["memory"], "256Mi");
    let volumes = pod["volumes"].as_array().expect("volumes");
    let tls = volumes.iter().find(|v| v["name"] == "tls").expect("tls volume");
    assert_eq!(tls["secret"]["secretName"], secret["metadata"]["name"]);
    let mounts = container["volumeMounts"].as_array().expect("volumeMounts");
    let tls_mount = mounts.iter().find(|v| v["name"] == "tls").expect("tls mount");
    assert_eq!(tls_mount["mountPath"], "/etc/farm-apiserver/tls");
    assert_eq!(tls_mount["readOnly"], true);
    let tmp_mount = mounts.iter().find(|v| v["mountPath"] == "/tmp").expect("/tmp mount");
    let tmp = volumes.iter().find(|v| v["name"] == tmp_mount["name"]).expect("/tmp volume");
    assert!(tmp["emptyDir"].is_object(), "/tmp is an emptyDir: {tmp}");

    // The server's own ClusterRole: Pods read, token and access reviews, nothing else.
    let own = find(items, "ClusterRole", "farm-apiserver");
    let rules: Vec<(Vec<&str>, Vec<&str>, Vec<&str>)> = own["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| (strings(&r["apiGroups"]), strings(&r["resources"]), strings(&r["verbs"])))
        .collect();
    assert_eq!(
        rules,
        [
            (vec![""], vec!["pods"], vec!["get", "list", "watch"]),
            (vec!["authentication.k8s.io"], vec!["tokenreviews"], vec!["create"]),
            (vec!["authorization.k8s.io"], vec!["subjectaccessreviews"], vec!["create"]),
        ]
    );
    let reader = find(items, "RoleBinding", "farm-apiserver-auth-reader");
    assert_eq!(reader["metadata"]["namespace"], "kube-system");
    assert_eq!(reader["roleRef"]["name"], "extension-apiserver-authentication-reader");
    let delegator = find(items, "ClusterRoleBinding", "farm-apiserver:system:auth-delegator");
    assert_eq!(delegator["roleRef"]["name"], "system:auth-delegator");
    for binding in [reader, delegator, find(items, "ClusterRoleBinding", "farm-apiserver")] {
        assert_eq!(binding["subjects"][0]["kind"], "ServiceAccount");
        assert_eq!(binding["subjects"][0]["name"], "farm-apiserver");
        assert_eq!(binding["subjects"][0]["namespace"], "farm-system");
    }

    // Roles aggregated into view/edit/admin as for built-in resources: view's
    // rules reach all three, edit's reach edit and admin, admin's only admin.
    for (role, into) in [
        ("farm-apiserver:aggregate-to-view", &["view", "edit", "admin"][..]),
        ("farm-apiserver:aggregate-to-edit", &["edit", "admin"][..]),
        ("farm-apiserver:aggregate-to-admin", &["admin"][..]),
    ] {
        let labels = find(items, "ClusterRole", role)["metadata"]["labels"].clone();
        for target in ["view", "edit", "admin"] {
            let label = &labels[format!("rbac.authorization.k8s.io/aggregate-to-{target}")];
            if into.contains(&target) {
                assert_eq!(label, "true", "{role} aggregates to {target}: {labels}");
            } else {
                assert!(label.is_null(), "{role} must not aggregate to {target}: {labels}");
            }
        }
    }
    let view = &find(items, "ClusterRole", "farm-apiserver:aggregate-to-view")["rules"][0];
    assert_eq!(strings(&view["resources"]), ["llamas", "llamas/status", "farmpods"]);
    assert_eq!(strings(&view["verbs"]), ["get", "list", "watch"]);
    let edit = &find(items, "ClusterRole", "farm-apiserver:aggregate-to-edit")["rules"][0];
    assert_eq!(strings(&edit["resources"]), ["llamas"]);
    assert_eq!(strings(&edit["verbs"]), ["create", "update", "patch", "delete", "deletecollection"]);
}

#[test]
fn base_renders_without_ca_bundle() {
    let rendered = kustomize(&repo_manifests().join("base"));
    assert!(rendered.contains("kind: APIService"), "{rendered}");
    assert!(!rendered.contains("caBundle"), "the overlays supply the caBundle:\n{rendered}");
    assert!(!rendered.contains("insecureSkipTLSVerify"), "{rendered}");
    assert!(!rendered.contains("kind: Secret"), "{rendered}");
}

#[test]
fn cert_manager_overlay_renders() {
    let rendered = kustomize(&repo_manifests().join("overlays/cert-manager"));
    assert!(rendered.contains("cert-manager.io/inject-ca-from: farm-system/farm-apiserver-tls"), "{rendered}");
    assert!(rendered.contains("secretName: farm-apiserver-tls"), "{rendered}");
    assert!(rendered.contains("- farm-apiserver.farm-system.svc\n"), "{rendered}");
    assert!(!rendered.contains("caBundle"), "cert-manager's CA injector fills it:\n{rendered}");
    assert!(!rendered.contains("insecureSkipTLSVerify"), "{rendered}");
}
