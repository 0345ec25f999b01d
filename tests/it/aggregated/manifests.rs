//! The deployment manifests (manifests/), rendered from the Helm chart by
//! scripts/manifests: the checked-in files are what the script renders now;
//! the dev overlay, with certificates made by `farm-apiserver certs`, is
//! accepted by a real kube-apiserver (server-side dry run of every object) and
//! carries the real caBundle, the hardened Pod and the aggregated RBAC roles;
//! the base renders; install.yaml passes a dry run of every object but
//! cert-manager's, holds no key and no caBundle, and has cert-manager inject
//! the CA. The HA overlay (replicated farm-apiserver on a dedicated etcd)
//! passes a server-side dry run of every object but cert-manager's, and its
//! certificates fit the names and flags they are used with.
//!
//! Runs against a control plane of its own, shared with the chart's tests
//! (aggregated::chart): the test process's shared one holds the registration
//! of the shared farm-apiserver (namespace farm-system, Service
//! farm-apiserver, the APIService), which the dry runs would meet as existing
//! objects. The chart's install test creates real objects there, so the dry
//! runs read [`cluster_objects`] and that test writes it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::common;
use crate::common::cluster::ControlPlane;
use crate::common::helm;
use base64::Engine;
use serde_json::{json, Value};

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
pub(super) fn kustomize(dir: &Path) -> String {
    let out = Command::new(common::kubectl_bin()).arg("kustomize").arg(dir).output().expect("run kubectl kustomize");
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The control plane of these tests and the chart's, with namespace
/// farm-system really created (the chart's Namespace, Pod Security labels
/// included): a server-side dry run of namespaced objects needs their
/// namespace to exist.
pub(super) fn controlplane_with_namespace() -> &'static ControlPlane {
    static CP: OnceLock<ControlPlane> = OnceLock::new();
    CP.get_or_init(|| {
        let cp = ControlPlane::start();
        let chart = helm::chart_dir().display().to_string();
        let (ok, namespace, stderr) = helm::helm(
            None,
            &["template", "farm-apiserver", &chart, "-n", "farm-system", "--set", "namespace.create=true"],
        );
        assert!(ok, "helm template: {stderr}");
        let namespace = namespace
            .split("\n---\n")
            .find(|doc| doc.contains("\nkind: Namespace\n"))
            .unwrap_or_else(|| panic!("a Namespace in {namespace}"));
        let (ok, stdout, stderr) = common::kubectl_stdin(&cp.kubeconfig, &["apply", "-f", "-"], Some(namespace));
        assert!(ok, "creating namespace farm-system: {stdout}{stderr}");
        cp
    })
}

/// Who may change objects of the shared control plane: the dry runs read (they
/// must not meet objects they did not apply, which kubectl warns of), the
/// chart's install test writes (it installs, upgrades and uninstalls a release
/// with the one APIService of the cluster).
fn cluster_objects() -> &'static RwLock<()> {
    static LOCK: RwLock<()> = RwLock::new(());
    &LOCK
}

/// Held by a test that dry-runs objects on [`controlplane_with_namespace`].
pub(super) fn dry_runs() -> RwLockReadGuard<'static, ()> {
    cluster_objects().read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Held by a test that creates objects on [`controlplane_with_namespace`]
/// (and removes them before it ends).
pub(super) fn real_objects() -> RwLockWriteGuard<'static, ()> {
    cluster_objects().write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub(super) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The one object of this kind and name in a List.
pub(super) fn find<'a>(items: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = items.iter().filter(|o| o["kind"] == kind && o["metadata"]["name"] == name).collect();
    assert_eq!(found.len(), 1, "{kind} {name} in the rendered manifests");
    found[0]
}

pub(super) fn strings(v: &Value) -> Vec<&str> {
    v.as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

#[test]
fn dev_overlay_passes_server_side_dry_run() {
    let cp = controlplane_with_namespace();
    let _dry_runs = dry_runs();
    let m = Manifests::with_dev_certs();
    let (ok, stdout, stderr) = cp.kubectl(&["apply", "--dry-run=server", "-k", &m.dev()]);
    assert!(ok, "kubectl apply --dry-run=server -k manifests/overlays/dev failed:\n{stdout}\n{stderr}");
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
        "apiservice.apiregistration.k8s.io/v1beta1.farm.example.com",
        "secret/farm-apiserver-tls",
        "configmap/farm-apiserver-audit-policy",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("{object} ")) && l.ends_with("(server dry run)")),
            "{object} not in the server dry run:\n{stdout}"
        );
    }
    assert_eq!(lines.len(), 15, "exactly the objects above:\n{stdout}");
}

#[test]
fn dev_overlay_carries_ca_bundle_hardened_pod_and_rbac() {
    let cp = controlplane_with_namespace();
    let _dry_runs = dry_runs();
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
    // v1beta1, preferred: the same, one version priority above.
    let beta = find(items, "APIService", "v1beta1.farm.example.com");
    assert_eq!(beta["spec"]["caBundle"], ca_bundle.as_str(), "{beta:#}");
    assert_eq!((&beta["spec"]["version"], &beta["spec"]["versionPriority"]), (&json!("v1beta1"), &json!(16)));
    assert_eq!(beta["spec"]["service"], api["spec"]["service"]);

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
    // The chart's default image: the placeholder users replace with theirs
    // (kustomize `images:` in an overlay of their own).
    let app_version = chart_app_version();
    assert_eq!(container["image"], format!("ghcr.io/example/farm-apiserver:{app_version}").as_str());
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
    // Auditing: the policy from its ConfigMap (the chart's sample policy, which
    // direct::audit starts a server with), the log on a volume of its own.
    for pair in [
        ["--audit-policy-file", "/etc/farm-apiserver/audit/policy.yaml"],
        ["--audit-log-path", "/var/log/farm-apiserver/audit.log"],
    ] {
        assert!(args.windows(2).any(|w| w == pair), "{pair:?} in {args:?}");
    }
    let policy_mount = mounts.iter().find(|v| v["mountPath"] == "/etc/farm-apiserver/audit").expect("policy mount");
    let policy_volume = volumes.iter().find(|v| v["name"] == policy_mount["name"]).expect("policy volume");
    let policy = find(items, "ConfigMap", policy_volume["configMap"]["name"].as_str().expect("a ConfigMap"));
    let sample = std::fs::read_to_string(helm::chart_dir().join("files/audit-policy.yaml")).expect("audit-policy.yaml");
    assert_eq!(policy["data"]["policy.yaml"], sample.as_str());
    let log_mount = mounts.iter().find(|v| v["mountPath"] == "/var/log/farm-apiserver").expect("audit log mount");
    let log_volume = volumes.iter().find(|v| v["name"] == log_mount["name"]).expect("audit log volume");
    assert!(log_volume["emptyDir"]["sizeLimit"].is_string(), "a bounded volume: {log_volume}");

    // The server's own ClusterRole: Pods and Namespaces read, token and access
    // reviews, webhook configurations watched and their Services read, nothing else.
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
            (vec![""], vec!["pods/log"], vec!["get"]),
            (vec![""], vec!["namespaces"], vec!["get", "list", "watch"]),
            (vec!["authentication.k8s.io"], vec!["tokenreviews"], vec!["create"]),
            (vec!["authorization.k8s.io"], vec!["subjectaccessreviews"], vec!["create"]),
            (
                vec!["admissionregistration.k8s.io"],
                vec![
                    "mutatingwebhookconfigurations",
                    "validatingwebhookconfigurations",
                    "validatingadmissionpolicies",
                    "validatingadmissionpolicybindings",
                    "mutatingadmissionpolicies",
                    "mutatingadmissionpolicybindings"
                ],
                vec!["list", "watch"]
            ),
            (vec![""], vec!["services"], vec!["get"]),
            (
                vec!["flowcontrol.apiserver.k8s.io"],
                vec!["flowschemas", "prioritylevelconfigurations"],
                vec!["list", "watch"]
            ),
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
    assert_eq!(
        strings(&view["resources"]),
        ["llamas", "llamas/status", "herds", "herds/status", "herds/scale", "farmpods", "farmpods/log"]
    );
    assert_eq!(strings(&view["verbs"]), ["get", "list", "watch"]);
    let edit = &find(items, "ClusterRole", "farm-apiserver:aggregate-to-edit")["rules"][0];
    assert_eq!(strings(&edit["resources"]), ["llamas", "herds", "herds/scale"]);
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

/// The chart's appVersion: the default image tag.
pub(super) fn chart_app_version() -> String {
    let chart = std::fs::read_to_string(helm::chart_dir().join("Chart.yaml")).expect("Chart.yaml");
    let line = chart.lines().find_map(|l| l.strip_prefix("appVersion:")).expect("appVersion in Chart.yaml");
    line.trim().trim_matches('"').to_string()
}

/// The checked-in files scripts/manifests renders are what it renders now: a
/// change to the chart that was not followed by the script fails here.
#[test]
fn generated_manifests_are_current() {
    let dir = tempfile::Builder::new().prefix("farm-manifests-fresh-").tempdir().expect("tempdir");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/manifests");
    let out = Command::new("bash").arg(&script).arg(dir.path()).output().expect("run scripts/manifests");
    assert!(out.status.success(), "scripts/manifests failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let written: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
    assert_eq!(written, ["install.yaml", "base/farm-apiserver.yaml", "overlays/ha/farm-apiserver.yaml"]);
    for path in &written {
        let fresh = std::fs::read_to_string(dir.path().join(path)).expect("rendered file");
        let checked_in = std::fs::read_to_string(repo_manifests().join(path))
            .unwrap_or_else(|e| panic!("manifests/{path}: {e}; run scripts/manifests and commit what it writes"));
        if fresh != checked_in {
            let (line, (was, now)) = checked_in
                .lines()
                .chain(std::iter::repeat(""))
                .zip(fresh.lines().chain(std::iter::repeat("")))
                .enumerate()
                .find(|(_, (was, now))| was != now)
                .expect("a differing line");
            panic!(
                "manifests/{path} is stale (line {}: {was:?}, now rendered as {now:?}): \
                 run scripts/manifests and commit what it writes",
                line + 1
            );
        }
    }
}

/// install.yaml, for `kubectl apply -f`: says it needs cert-manager, and
/// holds nothing every user would share (no key, no certificate, no
/// caBundle); cert-manager's objects make the private CA and the serving
/// certificate for the names the aggregator dials, and inject the CA; every
/// other object passes a server-side dry run under the restricted Pod
/// Security level.
#[test]
fn install_yaml_needs_cert_manager_and_holds_no_key() {
    let cp = controlplane_with_namespace();
    let _dry_runs = dry_runs();
    let rendered = std::fs::read_to_string(repo_manifests().join("install.yaml")).expect("manifests/install.yaml");
    let header: String = rendered.lines().take_while(|l| l.starts_with('#')).collect::<Vec<_>>().join("\n");
    for words in ["kubectl apply -f manifests/install.yaml", "Needs cert-manager", "helm install farm-apiserver"] {
        assert!(header.contains(words), "the header says {words:?}:\n{header}");
    }
    for forbidden in ["PRIVATE KEY", "BEGIN CERTIFICATE", "caBundle:", "insecureSkipTLSVerify", "kind: Secret"] {
        assert!(!rendered.contains(forbidden), "{forbidden} in install.yaml");
    }
    let objects = local_objects(&rendered);

    let cert_manager = kinds_and_names(objects.iter().filter(|o| is_cert_manager(o)));
    assert_eq!(
        cert_manager,
        [
            ("Certificate", "farm-apiserver-ca"),
            ("Certificate", "farm-apiserver-tls"),
            ("Issuer", "farm-apiserver-ca"),
            ("Issuer", "farm-apiserver-selfsigned"),
        ]
    );
    let api = find(&objects, "APIService", "v1alpha.farm.example.com");
    assert_eq!(api["metadata"]["annotations"]["cert-manager.io/inject-ca-from"], "farm-system/farm-apiserver-tls");
    let serving = certificate_for(&objects, "farm-apiserver-tls");
    assert_eq!(serving["metadata"]["name"], "farm-apiserver-tls", "the Certificate the annotation names");
    let names = strings(&serving["spec"]["dnsNames"]);
    let service = &api["spec"]["service"];
    let host =
        format!("{}.{}.svc", service["name"].as_str().expect("name"), service["namespace"].as_str().expect("ns"));
    assert!(covers(&names, &host), "{host} in {names:?}");
    assert!(strings(&serving["spec"]["usages"]).contains(&"server auth"), "{serving}");
    let issuer = find(&objects, "Issuer", serving["spec"]["issuerRef"]["name"].as_str().expect("issuer"));
    let ca = certificate_for(&objects, issuer["spec"]["ca"]["secretName"].as_str().expect("a CA Issuer"));
    assert_eq!(ca["spec"]["isCA"], true, "{ca}");
    assert_eq!(
        find(&objects, "Issuer", ca["spec"]["issuerRef"]["name"].as_str().expect("issuer"))["spec"]["selfSigned"],
        json!({})
    );
    let deployment = find(&objects, "Deployment", "farm-apiserver");
    let (pod, container) = pod_and_container(deployment);
    assert_eq!(secret_file(pod, container, "/etc/farm-apiserver/tls/tls.crt"), ("farm-apiserver-tls", "tls.crt"));

    let (items, stderr) = dry_run(cp, &objects);
    assert!(!stderr.contains("Warning"), "warnings from the server:\n{stderr}");
    let accepted = kinds_and_names(items.iter());
    assert_eq!(
        accepted,
        [
            ("APIService", "v1alpha.farm.example.com"),
            ("APIService", "v1beta1.farm.example.com"),
            ("ClusterRole", "farm-apiserver"),
            ("ClusterRole", "farm-apiserver:aggregate-to-admin"),
            ("ClusterRole", "farm-apiserver:aggregate-to-edit"),
            ("ClusterRole", "farm-apiserver:aggregate-to-view"),
            ("ClusterRoleBinding", "farm-apiserver"),
            ("ClusterRoleBinding", "farm-apiserver:system:auth-delegator"),
            ("ConfigMap", "farm-apiserver-audit-policy"),
            ("Deployment", "farm-apiserver"),
            ("Namespace", "farm-system"),
            ("RoleBinding", "farm-apiserver-auth-reader"),
            ("Service", "farm-apiserver"),
            ("ServiceAccount", "farm-apiserver"),
        ]
    );
    let namespace = find(&items, "Namespace", "farm-system");
    assert_eq!(namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted");
    let deployment = find(&items, "Deployment", "farm-apiserver");
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert_eq!(deployment["spec"]["strategy"]["type"], "Recreate", "memory storage: never two Pods at once");
    let (pod, container) = pod_and_container(deployment);
    assert_hardened(pod, container);
}

/// The objects' (kind, name) pairs, sorted.
fn kinds_and_names<'a>(objects: impl Iterator<Item = &'a Value>) -> Vec<(&'a str, &'a str)> {
    let mut pairs: Vec<(&str, &str)> =
        objects.map(|o| (o["kind"].as_str().expect("kind"), o["metadata"]["name"].as_str().expect("name"))).collect();
    pairs.sort_unstable();
    pairs
}

/// Every object of rendered manifests as JSON, whatever its kind: kubectl reads
/// the YAML locally and prints each object back (`label --local` removing a
/// label no object has: no server, no discovery), so cert-manager's objects,
/// whose kinds the test control plane does not know, can be inspected too.
pub(super) fn local_objects(rendered: &str) -> Vec<Value> {
    let dir = tempfile::Builder::new().prefix("farm-rendered-").tempdir().expect("tempdir");
    let file = dir.path().join("rendered.yaml");
    std::fs::write(&file, rendered).expect("write rendered manifests");
    let out = Command::new(common::kubectl_bin())
        .env("KUBECONFIG", "/dev/null")
        .args(["label", "--local", "-o", "json", "-f"])
        .arg(&file)
        .arg("farm-test-no-such-label-")
        .output()
        .expect("run kubectl label --local");
    assert!(out.status.success(), "kubectl label --local: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let objects: Vec<Value> = serde_json::Deserializer::from_str(&stdout)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let documents = rendered.lines().filter(|l| l.starts_with("apiVersion: ")).count();
    assert_eq!(objects.len(), documents, "one JSON object per rendered object");
    objects
}

/// The HA overlay, rendered, and its objects as JSON.
fn ha_overlay() -> (String, Vec<Value>) {
    let rendered = kustomize(&repo_manifests().join("overlays/ha"));
    let objects = local_objects(&rendered);
    (rendered, objects)
}

pub(super) fn is_cert_manager(object: &Value) -> bool {
    object["apiVersion"].as_str().is_some_and(|v| v.starts_with("cert-manager.io/"))
}

/// Objects of kinds the test control plane has no CRD for: cert-manager's and
/// prometheus-operator's.
pub(super) fn is_custom(object: &Value) -> bool {
    is_cert_manager(object) || object["apiVersion"].as_str().is_some_and(|v| v.starts_with("monitoring.coreos.com/"))
}

/// Server-side dry run of the objects whose kinds the test control plane knows:
/// all but cert-manager's and prometheus-operator's (their CRDs are not
/// installed there; such objects are checked as rendered). Returns what
/// kube-apiserver would store, after defaulting and admission, and kubectl's
/// stderr.
pub(super) fn dry_run(cp: &ControlPlane, objects: &[Value]) -> (Vec<Value>, String) {
    let known: Vec<&Value> = objects.iter().filter(|o| !is_custom(o)).collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": known});
    let (ok, stdout, stderr) = common::kubectl_stdin(
        &cp.kubeconfig,
        &["apply", "--dry-run=server", "-f", "-", "-o", "json"],
        Some(&list.to_string()),
    );
    assert!(ok, "kubectl apply --dry-run=server failed:\n{stdout}\n{stderr}");
    let list: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(list["kind"], "List", "{stdout}");
    (list["items"].as_array().expect("items").clone(), stderr)
}

/// The value of a command-line flag, given as `--name value` or `--name=value`.
pub(super) fn flag<'a>(args: &[&'a str], name: &str) -> Option<&'a str> {
    args.iter().enumerate().find_map(|(i, arg)| {
        if *arg == name {
            args.get(i + 1).copied()
        } else {
            arg.strip_prefix(name).and_then(|rest| rest.strip_prefix('='))
        }
    })
}

/// Whether a label selector (matchLabels only) selects these labels.
pub(super) fn selects(selector: &Value, labels: &Value) -> bool {
    let Some(match_labels) = selector["matchLabels"].as_object() else { return false };
    selector["matchExpressions"].as_array().is_none_or(Vec::is_empty)
        && !match_labels.is_empty()
        && match_labels.iter().all(|(k, v)| labels[k] == *v)
}

/// The Secret volume mounted at `dir` in this Pod spec: (secretName, readOnly).
fn secret_mounted_at<'a>(pod: &'a Value, container: &'a Value, dir: &str) -> (&'a str, bool) {
    let mounts = container["volumeMounts"].as_array().expect("volumeMounts");
    let mount = mounts.iter().find(|m| m["mountPath"] == dir).unwrap_or_else(|| panic!("a mount at {dir}: {mounts:?}"));
    let volumes = pod["volumes"].as_array().expect("volumes");
    let volume = volumes.iter().find(|v| v["name"] == mount["name"]).expect("the mount's volume");
    let secret = volume["secret"]["secretName"].as_str().unwrap_or_else(|| panic!("{dir} is a Secret: {volume}"));
    (secret, mount["readOnly"] == true)
}

/// The Secret a file flag's path is in: (secretName, file name). The file is
/// mounted read-only.
pub(super) fn secret_file<'a>(pod: &'a Value, container: &'a Value, path: &'a str) -> (&'a str, &'a str) {
    let (dir, file) = path.rsplit_once('/').unwrap_or_else(|| panic!("a path: {path}"));
    let (secret, read_only) = secret_mounted_at(pod, container, dir);
    assert!(read_only, "{dir} mounted read-only");
    (secret, file)
}

/// Whether a certificate's DNS names cover a host name (exactly, or by a
/// wildcard for its first label).
pub(super) fn covers(dns_names: &[&str], host: &str) -> bool {
    dns_names.iter().any(|name| match name.strip_prefix("*.") {
        Some(parent) => host.split_once('.').is_some_and(|(_, rest)| rest == parent),
        None => *name == host,
    })
}

/// The Certificate that writes this Secret.
pub(super) fn certificate_for<'a>(objects: &'a [Value], secret: &str) -> &'a Value {
    let found: Vec<&Value> =
        objects.iter().filter(|o| o["kind"] == "Certificate" && o["spec"]["secretName"] == secret).collect();
    assert_eq!(found.len(), 1, "one Certificate writes Secret {secret}");
    found[0]
}

/// The pod spec and the one container of a workload.
pub(super) fn pod_and_container(workload: &Value) -> (&Value, &Value) {
    let pod = &workload["spec"]["template"]["spec"];
    assert_eq!(pod["containers"].as_array().map(Vec::len), Some(1), "one container: {pod}");
    (pod, &pod["containers"][0])
}

/// A hardened container meeting the restricted Pod Security Standard.
pub(super) fn assert_hardened(pod: &Value, container: &Value) {
    let sc = &container["securityContext"];
    assert!(sc["runAsNonRoot"] == true || pod["securityContext"]["runAsNonRoot"] == true, "{sc}");
    assert_eq!(sc["readOnlyRootFilesystem"], true, "{sc}");
    assert_eq!(sc["allowPrivilegeEscalation"], false, "{sc}");
    assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"], "{sc}");
    let seccomp =
        if sc["seccompProfile"].is_null() { &pod["securityContext"]["seccompProfile"] } else { &sc["seccompProfile"] };
    assert_eq!(seccomp["type"], "RuntimeDefault", "{sc}");
}

/// Spread over nodes: a hard topology spread on the host name and a preferred
/// anti-affinity, both selecting the workload's own Pods.
pub(super) fn assert_spread_over_nodes(pod: &Value, labels: &Value) {
    let spread = pod["topologySpreadConstraints"].as_array().expect("topologySpreadConstraints");
    let by_host = spread.iter().find(|c| c["topologyKey"] == "kubernetes.io/hostname").expect("spread over hosts");
    assert_eq!(by_host["maxSkew"], 1, "{by_host}");
    assert_eq!(by_host["whenUnsatisfiable"], "DoNotSchedule", "{by_host}");
    assert!(selects(&by_host["labelSelector"], labels), "{by_host} selects {labels}");
    let anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        .as_array()
        .expect("preferred pod anti-affinity");
    assert!(
        anti.iter().any(|t| t["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
            && selects(&t["podAffinityTerm"]["labelSelector"], labels)),
        "{anti:?}"
    );
}

#[test]
fn ha_overlay_passes_server_side_dry_run() {
    let cp = controlplane_with_namespace();
    let _dry_runs = dry_runs();
    let (rendered, objects) = ha_overlay();
    assert!(!rendered.contains("insecureSkipTLSVerify"), "{rendered}");

    // What is left out of the dry run: cert-manager's objects, and nothing else.
    let cert_manager = kinds_and_names(objects.iter().filter(|o| is_cert_manager(o)));
    assert_eq!(
        cert_manager,
        [
            ("Certificate", "farm-apiserver-ca"),
            ("Certificate", "farm-apiserver-etcd-client"),
            ("Certificate", "farm-apiserver-tls"),
            ("Certificate", "farm-etcd-ca"),
            ("Certificate", "farm-etcd-peer"),
            ("Certificate", "farm-etcd-server"),
            ("Issuer", "farm-apiserver-ca"),
            ("Issuer", "farm-apiserver-selfsigned"),
            ("Issuer", "farm-etcd-ca"),
        ]
    );

    let (items, stderr) = dry_run(cp, &objects);
    // The restricted Pod Security level the namespace enforces would show up
    // here as "Warning: would violate PodSecurity ..." for the Deployment or
    // the StatefulSet.
    assert!(!stderr.contains("Warning"), "warnings from the server:\n{stderr}");
    let accepted = kinds_and_names(items.iter());
    assert_eq!(
        accepted,
        [
            ("APIService", "v1alpha.farm.example.com"),
            ("APIService", "v1beta1.farm.example.com"),
            ("ClusterRole", "farm-apiserver"),
            ("ClusterRole", "farm-apiserver:aggregate-to-admin"),
            ("ClusterRole", "farm-apiserver:aggregate-to-edit"),
            ("ClusterRole", "farm-apiserver:aggregate-to-view"),
            ("ClusterRoleBinding", "farm-apiserver"),
            ("ClusterRoleBinding", "farm-apiserver:system:auth-delegator"),
            ("ConfigMap", "farm-apiserver-audit-policy"),
            ("Deployment", "farm-apiserver"),
            ("Namespace", "farm-system"),
            ("NetworkPolicy", "farm-etcd"),
            ("PodDisruptionBudget", "farm-apiserver"),
            ("PodDisruptionBudget", "farm-etcd"),
            ("RoleBinding", "farm-apiserver-auth-reader"),
            ("Service", "farm-apiserver"),
            ("Service", "farm-etcd"),
            ("Service", "farm-etcd-client"),
            ("ServiceAccount", "farm-apiserver"),
            ("StatefulSet", "farm-etcd"),
        ],
        "the server accepted exactly these"
    );
    assert_eq!(accepted.len() + cert_manager.len(), objects.len());
}

#[test]
fn ha_overlay_runs_replicated_apiserver_on_dedicated_etcd() {
    let cp = controlplane_with_namespace();
    let _dry_runs = dry_runs();
    let (_, objects) = ha_overlay();
    let (items, _) = dry_run(cp, &objects);

    // The dedicated etcd: three members with a volume each, all started at
    // once (no member is Ready before there is a quorum).
    let etcd = find(&items, "StatefulSet", "farm-etcd");
    assert_eq!(etcd["metadata"]["namespace"], "farm-system");
    assert_eq!(etcd["spec"]["replicas"], 3);
    assert_eq!(etcd["spec"]["podManagementPolicy"], "Parallel");
    let etcd_labels = &etcd["spec"]["template"]["metadata"]["labels"];
    assert!(selects(&etcd["spec"]["selector"], etcd_labels));
    let claims = etcd["spec"]["volumeClaimTemplates"].as_array().expect("volumeClaimTemplates");
    assert_eq!(claims.len(), 1, "{claims:?}");
    let claim = &claims[0];
    assert_eq!(strings(&claim["spec"]["accessModes"]), ["ReadWriteOnce"], "{claim}");
    assert!(claim["spec"]["resources"]["requests"]["storage"].is_string(), "{claim}");
    let (etcd_pod, member) = pod_and_container(etcd);
    assert!(
        member["image"].as_str().is_some_and(|i| i.starts_with("registry.k8s.io/etcd:3.6.")),
        "{}",
        member["image"]
    );
    assert_hardened(etcd_pod, member);
    assert_spread_over_nodes(etcd_pod, etcd_labels);
    for resource in ["cpu", "memory"] {
        assert!(member["resources"]["requests"][resource].is_string(), "{resource} request: {}", member["resources"]);
    }
    let etcd_args = strings(&member["args"]);
    let etcd_flag = |name: &str| flag(&etcd_args, name).unwrap_or_else(|| panic!("{name} in {etcd_args:?}"));
    // Data on the claim's volume.
    let data_mount = member["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .find(|m| m["name"] == claim["metadata"]["name"])
        .expect("the claim mounted");
    let data_dir = data_mount["mountPath"].as_str().expect("mountPath");
    assert!(etcd_flag("--data-dir").starts_with(data_dir), "--data-dir on the volume {data_dir}");
    // TLS for clients and peers, both requiring certificates.
    assert_eq!(etcd_flag("--client-cert-auth"), "true");
    assert_eq!(etcd_flag("--peer-client-cert-auth"), "true");
    assert!(etcd_flag("--listen-client-urls").starts_with("https://"), "{etcd_args:?}");
    assert!(etcd_flag("--listen-peer-urls").starts_with("https://"), "{etcd_args:?}");
    for file in [
        "--trusted-ca-file",
        "--cert-file",
        "--key-file",
        "--peer-trusted-ca-file",
        "--peer-cert-file",
        "--peer-key-file",
    ] {
        secret_file(etcd_pod, member, etcd_flag(file));
    }
    // The members, by their stable names in the headless Service.
    let peers = find(&items, "Service", etcd["spec"]["serviceName"].as_str().expect("serviceName"));
    assert_eq!(peers["spec"]["clusterIP"], "None", "headless: {peers}");
    assert_eq!(peers["spec"]["publishNotReadyAddresses"], true, "{peers}");
    assert!(selects(&json!({"matchLabels": peers["spec"]["selector"]}), etcd_labels));
    let members: Vec<String> = (0..3)
        .map(|i| {
            format!(
                "farm-etcd-{i}=https://farm-etcd-{i}.{}.farm-system.svc:2380",
                peers["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(etcd_flag("--initial-cluster"), members.join(","));
    assert_eq!(etcd_flag("--initial-cluster-state"), "new");
    // Probes on the plain-HTTP health port: alive without a quorum, ready with one.
    let metrics_port =
        member["ports"].as_array().expect("ports").iter().find(|p| p["name"] == "metrics").expect("metrics port");
    assert!(etcd_flag("--listen-metrics-urls").ends_with(&format!(":{}", metrics_port["containerPort"])));
    for (probe, path) in [("startupProbe", "/livez"), ("livenessProbe", "/livez"), ("readinessProbe", "/readyz")] {
        let get = &member[probe]["httpGet"];
        assert_eq!((get["path"].as_str(), get["port"].as_str()), (Some(path), Some("metrics")), "{probe}: {get}");
    }
    let etcd_pdb = find(&items, "PodDisruptionBudget", "farm-etcd");
    assert_eq!(etcd_pdb["spec"]["maxUnavailable"], 1, "a quorum of 3 survives one: {etcd_pdb}");
    assert!(selects(&etcd_pdb["spec"]["selector"], etcd_labels), "{etcd_pdb}");

    // farm-apiserver: replicated, rolled one surge Pod at a time, never below
    // its replica count, spread over nodes.
    let deployment = find(&items, "Deployment", "farm-apiserver");
    let replicas = deployment["spec"]["replicas"].as_i64().expect("replicas");
    assert!(replicas >= 2, "replicas {replicas}");
    let strategy = &deployment["spec"]["strategy"];
    assert_eq!(strategy["type"], "RollingUpdate", "{strategy}");
    assert_eq!(strategy["rollingUpdate"]["maxUnavailable"], 0, "{strategy}");
    assert_eq!(strategy["rollingUpdate"]["maxSurge"], 1, "{strategy}");
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    let (pod, container) = pod_and_container(deployment);
    assert_spread_over_nodes(pod, labels);
    assert_hardened(pod, container);
    let pdb = find(&items, "PodDisruptionBudget", "farm-apiserver");
    assert!(selects(&pdb["spec"]["selector"], labels), "{pdb}");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1, "{pdb}");

    // Its storage: etcd, over https, at the dedicated etcd's client Service
    // (never the cluster's own etcd), with the client certificate's files.
    let args = strings(&container["args"]);
    assert_eq!(args.first(), Some(&"serve"));
    for pair in [
        ["--storage", "etcd"],
        ["--bind", "0.0.0.0:8443"],
        ["--tls-cert-file", "/etc/farm-apiserver/tls/tls.crt"],
        ["--tls-private-key-file", "/etc/farm-apiserver/tls/tls.key"],
        ["--authentication", "delegated"],
    ] {
        assert!(args.windows(2).any(|w| w == pair), "{pair:?} in {args:?}");
    }
    let servers = flag(&args, "--etcd-servers").unwrap_or_else(|| panic!("--etcd-servers in {args:?}"));
    for server in servers.split(',') {
        let host_port = server.strip_prefix("https://").unwrap_or_else(|| panic!("etcd over https: {server}"));
        let (host, port) = host_port.split_once(':').unwrap_or_else(|| panic!("host:port in {server}"));
        let (service_name, domain) = host.split_once('.').expect("a Service's name");
        assert_eq!(domain, "farm-system.svc", "{server}");
        let service = find(&items, "Service", service_name);
        assert!(selects(&json!({"matchLabels": service["spec"]["selector"]}), etcd_labels), "{service}");
        let service_port = &service["spec"]["ports"][0];
        assert_eq!(service_port["port"].to_string(), port, "{service}");
        assert_eq!(service_port["targetPort"], "client", "{service}");
        assert_ne!(service["spec"]["clusterIP"], "None", "the client Service is not the headless one");
    }
    let mut client_secrets: Vec<(&str, &str)> = ["--etcd-cafile", "--etcd-certfile", "--etcd-keyfile"]
        .iter()
        .map(|name| secret_file(pod, container, flag(&args, name).unwrap_or_else(|| panic!("{name} in {args:?}"))))
        .collect();
    client_secrets.sort_unstable();
    assert_eq!(
        client_secrets,
        [
            ("farm-apiserver-etcd-client", "ca.crt"),
            ("farm-apiserver-etcd-client", "tls.crt"),
            ("farm-apiserver-etcd-client", "tls.key")
        ]
    );
    // Ready only with etcd (/readyz includes the etcd check); alive without it.
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/livez")] {
        let get = &container[probe]["httpGet"];
        assert_eq!((get["path"].as_str(), get["scheme"].as_str()), (Some(path), Some("HTTPS")), "{probe}: {get}");
    }

    // Only farm-apiserver (and the members) reach etcd's client port.
    let policy = find(&items, "NetworkPolicy", "farm-etcd");
    assert!(selects(&policy["spec"]["podSelector"], etcd_labels), "{policy}");
    let client_rules: Vec<&Value> = policy["spec"]["ingress"]
        .as_array()
        .expect("ingress")
        .iter()
        .filter(|r| r["ports"].as_array().is_some_and(|ps| ps.iter().any(|p| p["port"] == "client")))
        .collect();
    assert!(!client_rules.is_empty(), "{policy}");
    for rule in &client_rules {
        let from = rule["from"].as_array().expect("client port only from some Pods");
        assert!(
            from.iter().all(|f| selects(&f["podSelector"], labels) || selects(&f["podSelector"], etcd_labels)),
            "{rule}"
        );
    }
    assert!(client_rules.iter().any(|r| selects(&r["from"][0]["podSelector"], labels)), "{policy}");
}

#[test]
fn ha_overlay_certificates_fit_etcd_and_farm_apiserver() {
    let (rendered, objects) = ha_overlay();
    // The serving certificate and caBundle as in overlays/cert-manager.
    assert!(!rendered.contains("caBundle"), "cert-manager's CA injector fills it:\n{rendered}");
    assert!(!rendered.contains("insecureSkipTLSVerify"), "{rendered}");
    let api = find(&objects, "APIService", "v1alpha.farm.example.com");
    assert_eq!(api["metadata"]["annotations"]["cert-manager.io/inject-ca-from"], "farm-system/farm-apiserver-tls");

    let etcd = find(&objects, "StatefulSet", "farm-etcd");
    let (etcd_pod, member) = pod_and_container(etcd);
    let etcd_args = strings(&member["args"]);
    let etcd_flag = |name: &str| flag(&etcd_args, name).unwrap_or_else(|| panic!("{name} in {etcd_args:?}"));
    let deployment = find(&objects, "Deployment", "farm-apiserver");
    let (pod, container) = pod_and_container(deployment);
    let args = strings(&container["args"]);
    let apiserver_flag = |name: &str| flag(&args, name).unwrap_or_else(|| panic!("{name} in {args:?}"));

    // Each file comes from the Secret of a Certificate of the right kind.
    let (server_secret, file) = secret_file(etcd_pod, member, etcd_flag("--cert-file"));
    assert_eq!(file, "tls.crt");
    assert_eq!(secret_file(etcd_pod, member, etcd_flag("--key-file")), (server_secret, "tls.key"));
    assert_eq!(secret_file(etcd_pod, member, etcd_flag("--trusted-ca-file")), (server_secret, "ca.crt"));
    let (peer_secret, file) = secret_file(etcd_pod, member, etcd_flag("--peer-cert-file"));
    assert_eq!(file, "tls.crt");
    assert_eq!(secret_file(etcd_pod, member, etcd_flag("--peer-key-file")), (peer_secret, "tls.key"));
    assert_eq!(secret_file(etcd_pod, member, etcd_flag("--peer-trusted-ca-file")), (peer_secret, "ca.crt"));
    let (client_secret, _) = secret_file(pod, container, apiserver_flag("--etcd-certfile"));
    assert_eq!(secret_file(pod, container, apiserver_flag("--etcd-keyfile")), (client_secret, "tls.key"));
    assert_eq!(secret_file(pod, container, apiserver_flag("--etcd-cafile")), (client_secret, "ca.crt"));
    let server = certificate_for(&objects, server_secret);
    let peer = certificate_for(&objects, peer_secret);
    let client = certificate_for(&objects, client_secret);

    // One CA of etcd's own signs all three (each Secret's ca.crt is that CA,
    // which is how each side trusts the others), and not the serving
    // certificate of farm-apiserver: etcd trusts nothing the aggregator trusts.
    let issuer_name = server["spec"]["issuerRef"]["name"].as_str().expect("issuer");
    for cert in [peer, client] {
        assert_eq!(cert["spec"]["issuerRef"], server["spec"]["issuerRef"], "{cert}");
    }
    assert_eq!(server["spec"]["issuerRef"]["kind"], "Issuer");
    let issuer = find(&objects, "Issuer", issuer_name);
    let ca = certificate_for(&objects, issuer["spec"]["ca"]["secretName"].as_str().expect("a CA Issuer"));
    assert_eq!(ca["spec"]["isCA"], true, "{ca}");
    let serving = certificate_for(&objects, "farm-apiserver-tls");
    assert_ne!(serving["spec"]["issuerRef"]["name"], issuer_name, "etcd's CA is its own");
    assert_ne!(ca["spec"]["secretName"], "farm-apiserver-ca");

    let names = |cert: &'_ Value| -> Vec<String> {
        strings(&cert["spec"]["dnsNames"]).into_iter().map(str::to_string).collect()
    };
    let usages =
        |cert: &'_ Value| -> Vec<String> { strings(&cert["spec"]["usages"]).into_iter().map(str::to_string).collect() };
    // The server certificate: valid for every name farm-apiserver dials
    // (--etcd-servers) and each member advertises; "client auth" too, since
    // etcd's gRPC gateway dials the member with it.
    let server_names = names(server);
    let server_names: Vec<&str> = server_names.iter().map(String::as_str).collect();
    for url in apiserver_flag("--etcd-servers").split(',') {
        let host = url.trim_start_matches("https://").split(':').next().expect("host");
        assert!(covers(&server_names, host), "{host} in {server_names:?}");
    }
    for i in 0..3 {
        assert!(covers(&server_names, &format!("farm-etcd-{i}.farm-etcd.farm-system.svc")), "{server_names:?}");
    }
    assert!(usages(server).contains(&"server auth".to_string()), "{server}");
    assert!(usages(server).contains(&"client auth".to_string()), "{server}");
    // The peer certificate: valid for every member's peer URL, both ways, with
    // the one common name peers accept.
    let peer_names = names(peer);
    let peer_names: Vec<&str> = peer_names.iter().map(String::as_str).collect();
    for member_url in etcd_flag("--initial-cluster").split(',') {
        let url = member_url.split_once('=').expect("name=url").1;
        let host = url.trim_start_matches("https://").split(':').next().expect("host");
        assert!(covers(&peer_names, host), "{host} in {peer_names:?}");
    }
    assert!(usages(peer).contains(&"server auth".to_string()), "{peer}");
    assert!(usages(peer).contains(&"client auth".to_string()), "{peer}");
    assert_eq!(peer["spec"]["commonName"], etcd_flag("--peer-cert-allowed-cn"));
    // farm-apiserver's client certificate: for client authentication only, and
    // without DNS or IP names (etcd would check the Pod IP against them).
    assert_eq!(usages(client), ["client auth", "digital signature"], "{client}");
    assert!(client["spec"]["dnsNames"].is_null() && client["spec"]["ipAddresses"].is_null(), "{client}");
    assert_eq!(client["spec"]["commonName"], "farm-apiserver");
    assert_ne!(client["spec"]["commonName"], peer["spec"]["commonName"], "cannot pose as a peer");
    for cert in [server, peer, client] {
        assert_eq!(cert["metadata"]["namespace"], "farm-system");
        assert!(cert["spec"]["renewBefore"].is_string(), "renewed before it expires: {cert}");
    }
}
