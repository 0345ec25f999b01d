//! The Helm chart (charts/farm-apiserver), through the real helm (scripts/helm)
//! and the real test control plane: `helm lint --strict` with every profile;
//! `helm template` with each documented profile (defaults, cert-manager,
//! existing Secret, etcd with TLS, HA) passes a server-side dry run of every
//! object whose kind the control plane knows, and renders what the profile is
//! for; `helm install`, `helm upgrade` (the generated CA and serving pair
//! survive) and `helm uninstall` (nothing left, the APIService gone); a bad
//! values file is refused, naming the value.
//!
//! The test control plane's kubelet is simulated (its Pods run no
//! containers): these tests check objects, not running servers. They share the control plane of
//! aggregated::manifests (one control plane for both).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

use super::manifests::{
    assert_hardened, assert_spread_over_nodes, b64, certificate_for, chart_app_version, controlplane_with_namespace,
    covers, dry_run, dry_runs, find, flag, is_custom, local_objects, pod_and_container, real_objects, secret_file,
    selects, strings,
};
use crate::common::helm::{chart_dir, helm};

fn chart() -> String {
    chart_dir().display().to_string()
}

fn profile(name: &str) -> String {
    chart_dir().join("profiles").join(name).display().to_string()
}

/// A CA and a serving certificate for farm-apiserver.farm-system.svc, made by
/// `farm-apiserver certs` (ca.crt, tls.crt, tls.key, ...).
struct Certs {
    dir: tempfile::TempDir,
}

impl Certs {
    fn new() -> Certs {
        let dir = tempfile::Builder::new().prefix("farm-chart-certs-").tempdir().expect("tempdir");
        let out = Command::new(env!("CARGO_BIN_EXE_farm-apiserver"))
            .args(["certs", "--out"])
            .arg(dir.path())
            .args(["--service-name", "farm-apiserver", "--service-namespace", "farm-system"])
            .output()
            .expect("run farm-apiserver certs");
        assert!(out.status.success(), "farm-apiserver certs: {out:?}");
        Certs { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

/// `helm template farm-apiserver <chart> -n farm-system <args>`: the rendered
/// text and its objects.
fn template(args: &[&str]) -> (String, Vec<Value>) {
    let chart = chart();
    let mut all = vec!["template", "farm-apiserver", chart.as_str(), "--namespace", "farm-system"];
    all.extend_from_slice(args);
    let (ok, stdout, stderr) = helm(None, &all);
    assert!(ok, "helm {all:?} failed:\n{stderr}");
    let objects = local_objects(&stdout);
    (stdout, objects)
}

/// Renders with these values and dry-runs it on the control plane: the
/// objects as kube-apiserver would store them (all but cert-manager's and
/// prometheus-operator's), and the rendered objects.
fn template_and_dry_run(args: &[&str]) -> (Vec<Value>, Vec<Value>) {
    let cp = controlplane_with_namespace();
    let _dry_runs = dry_runs();
    let (rendered, objects) = template(args);
    assert!(!rendered.contains("insecureSkipTLSVerify"), "never by default:\n{rendered}");
    let (items, stderr) = dry_run(cp, &objects);
    // The namespace enforces the restricted Pod Security level: a Pod that
    // breaks it shows up as "Warning: would violate PodSecurity ...".
    assert!(!stderr.contains("Warning"), "warnings from the server:\n{stderr}");
    assert_eq!(items.len(), objects.iter().filter(|o| !is_custom(o)).count(), "every object accepted");
    (items, objects)
}

/// What every profile deploys: the hardened Pod with the Deployment's
/// arguments, the Service and APIService that point at each other, and the
/// server's RBAC.
fn assert_common(items: &[Value]) {
    let deployment = find(items, "Deployment", "farm-apiserver");
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    assert!(selects(&deployment["spec"]["selector"], labels), "{deployment}");
    let (pod, container) = pod_and_container(deployment);
    assert_hardened(pod, container);
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    assert_eq!(pod["serviceAccountName"], "farm-apiserver");
    assert_eq!(container["image"], format!("ghcr.io/example/farm-apiserver:{}", chart_app_version()).as_str());
    let args = strings(&container["args"]);
    assert_eq!(args.first(), Some(&"serve"));
    for (name, value) in [
        ("--bind", "0.0.0.0:8443"),
        ("--tls-cert-file", "/etc/farm-apiserver/tls/tls.crt"),
        ("--tls-private-key-file", "/etc/farm-apiserver/tls/tls.key"),
        ("--authentication", "delegated"),
        ("--log-format", "json"),
        ("--audit-policy-file", "/etc/farm-apiserver/audit/policy.yaml"),
    ] {
        assert_eq!(flag(&args, name), Some(value), "{name} in {args:?}");
    }
    assert_eq!(container["ports"][0]["containerPort"], 8443);

    let service = find(items, "Service", "farm-apiserver");
    assert!(selects(&serde_json::json!({"matchLabels": service["spec"]["selector"]}), labels), "{service}");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "https");
    let api = find(items, "APIService", "v1alpha.farm.example.com");
    assert_eq!(api["spec"]["service"]["name"], "farm-apiserver");
    assert_eq!(api["spec"]["service"]["namespace"], "farm-system");
    assert_eq!(api["spec"]["service"]["port"], service["spec"]["ports"][0]["port"]);
    assert_ne!(api["spec"]["insecureSkipTLSVerify"], true);

    find(items, "ClusterRole", "farm-apiserver");
    find(items, "ClusterRoleBinding", "farm-apiserver:system:auth-delegator");
    let reader = find(items, "RoleBinding", "farm-apiserver-auth-reader");
    assert_eq!(reader["metadata"]["namespace"], "kube-system");
    for role in ["view", "edit", "admin"] {
        find(items, "ClusterRole", &format!("farm-apiserver:aggregate-to-{role}"));
    }
}

/// openssl: the certificate chains to the CA and is valid for this host name.
fn assert_certificate_for(ca_pem: &[u8], cert_pem: &[u8], host: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ca, cert) = (dir.path().join("ca.crt"), dir.path().join("tls.crt"));
    std::fs::write(&ca, ca_pem).expect("write ca.crt");
    std::fs::write(&cert, cert_pem).expect("write tls.crt");
    let out = Command::new("openssl")
        .args(["verify", "-verify_hostname", host, "-CAfile"])
        .arg(&ca)
        .arg(&cert)
        .output()
        .expect("run openssl verify");
    assert!(
        out.status.success(),
        "the serving certificate is not valid for {host} under the CA: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn unb64(value: &Value) -> Vec<u8> {
    let text = value.as_str().unwrap_or_else(|| panic!("base64 text: {value}"));
    base64::engine::general_purpose::STANDARD.decode(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn lint_is_clean_with_every_profile() {
    let certs = Certs::new();
    let chart = chart();
    let ca_bundle = format!("tls.existingSecret.caBundle={}", certs.path("ca.crt"));
    let (cert_manager, existing, etcd, ha) =
        (profile("cert-manager.yaml"), profile("existing-secret.yaml"), profile("etcd.yaml"), profile("ha.yaml"));
    for values in [
        vec![],
        vec!["-f", &cert_manager],
        vec!["-f", &existing, "--set-file", &ca_bundle],
        vec!["-f", &etcd],
        vec!["-f", &cert_manager, "-f", &ha],
        vec!["--set", "serviceMonitor.enabled=true"],
    ] {
        let mut args = vec!["lint", "--strict", chart.as_str()];
        args.extend(values.iter().copied());
        let (ok, stdout, stderr) = helm(None, &args);
        assert!(ok, "helm {args:?}:\n{stdout}{stderr}");
        assert!(stdout.contains("1 chart(s) linted, 0 chart(s) failed"), "{stdout}");
        assert!(!stdout.contains("[WARNING]") && !stdout.contains("[ERROR]"), "{stdout}");
    }
}

/// Defaults: a CA and serving pair made by helm, in the Secret the Pod mounts,
/// the CA in the APIService; memory storage, one replica, Recreate.
#[test]
fn default_profile_generates_a_ca_the_apiservice_trusts() {
    let (items, objects) = template_and_dry_run(&[]);
    assert!(!objects.iter().any(is_custom), "no cert-manager, no ServiceMonitor by default");
    assert_common(&items);
    let secret = find(&items, "Secret", "farm-apiserver-tls");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    for (version, priority) in [("v1alpha", 15), ("v1beta1", 16)] {
        let api = find(&items, "APIService", &format!("{version}.farm.example.com"));
        assert_eq!(api["spec"]["caBundle"], secret["data"]["ca.crt"], "the caBundle is the Secret's CA");
        assert_eq!((&api["spec"]["version"], &api["spec"]["versionPriority"]), (&json!(version), &json!(priority)));
    }
    assert_certificate_for(
        &unb64(&secret["data"]["ca.crt"]),
        &unb64(&secret["data"]["tls.crt"]),
        "farm-apiserver.farm-system.svc",
    );
    let key = String::from_utf8(unb64(&secret["data"]["tls.key"])).expect("PEM");
    assert!(key.contains("PRIVATE KEY"), "{key}");
    let deployment = find(&items, "Deployment", "farm-apiserver");
    let (pod, container) = pod_and_container(deployment);
    assert_eq!(secret_file(pod, container, "/etc/farm-apiserver/tls/tls.key"), ("farm-apiserver-tls", "tls.key"));
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert_eq!(deployment["spec"]["strategy"]["type"], "Recreate", "memory: never two stores at once");
    // memory is the server's default: no --storage flag, so an extra one
    // (extraArgs, or a test's) is not a repeated flag the server refuses.
    assert_eq!(flag(&strings(&container["args"]), "--storage"), None);
    // Helm is not asked to render a Namespace: `helm install --create-namespace` makes it.
    assert!(objects.iter().all(|o| o["kind"] != "Namespace"));
}

#[test]
fn cert_manager_profile_issues_the_certificate_and_injects_the_ca() {
    let (items, objects) = template_and_dry_run(&["-f", &profile("cert-manager.yaml")]);
    assert_common(&items);
    assert!(items.iter().all(|o| o["kind"] != "Secret"), "cert-manager writes the Secret");
    let api = find(&items, "APIService", "v1alpha.farm.example.com");
    assert!(api["spec"]["caBundle"].is_null(), "cert-manager's CA injector fills it: {api}");
    let inject = api["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].as_str().expect("inject-ca-from");
    let (namespace, name) = inject.split_once('/').expect("namespace/name");
    let serving = find(&objects, "Certificate", name);
    assert_eq!(serving["metadata"]["namespace"], namespace);
    let deployment = find(&items, "Deployment", "farm-apiserver");
    let (pod, container) = pod_and_container(deployment);
    let (mounted, _) = secret_file(pod, container, "/etc/farm-apiserver/tls/tls.crt");
    assert_eq!(serving["spec"]["secretName"], mounted, "the Pod mounts what cert-manager writes");
    assert!(covers(&strings(&serving["spec"]["dnsNames"]), "farm-apiserver.farm-system.svc"), "{serving}");
    let issuer = find(&objects, "Issuer", serving["spec"]["issuerRef"]["name"].as_str().expect("issuer"));
    let ca = certificate_for(&objects, issuer["spec"]["ca"]["secretName"].as_str().expect("a CA Issuer"));
    assert_eq!(ca["spec"]["isCA"], true);

    // An issuer of the user's: no bootstrapped CA.
    let (_, objects) = template(&[
        "-f",
        &profile("cert-manager.yaml"),
        "--set",
        "tls.certManager.issuerRef.kind=ClusterIssuer,tls.certManager.issuerRef.name=corp-ca",
    ]);
    let custom: Vec<&Value> = objects.iter().filter(|o| is_custom(o)).collect();
    assert_eq!(custom.len(), 1, "only the serving Certificate: {custom:?}");
    assert_eq!(custom[0]["spec"]["issuerRef"]["kind"], "ClusterIssuer");
    assert_eq!(custom[0]["spec"]["issuerRef"]["name"], "corp-ca");
}

#[test]
fn existing_secret_profile_mounts_it_and_trusts_its_ca() {
    let certs = Certs::new();
    let ca = certs.path("ca.crt");
    let (items, _) = template_and_dry_run(&[
        "-f",
        &profile("existing-secret.yaml"),
        "--set-file",
        &format!("tls.existingSecret.caBundle={ca}"),
    ]);
    assert_common(&items);
    assert!(items.iter().all(|o| o["kind"] != "Secret"), "the Secret is the user's");
    let api = find(&items, "APIService", "v1alpha.farm.example.com");
    let ca_pem = std::fs::read(&ca).expect("ca.crt");
    assert_eq!(api["spec"]["caBundle"], b64(&ca_pem).as_str());
    let deployment = find(&items, "Deployment", "farm-apiserver");
    let (pod, container) = pod_and_container(deployment);
    assert_eq!(secret_file(pod, container, "/etc/farm-apiserver/tls/tls.crt"), ("farm-apiserver-tls", "tls.crt"));

    // helm template cannot read the Secret's ca.crt: without a caBundle it
    // says which value to set.
    let chart = chart();
    let (ok, _, stderr) = helm(
        None,
        &["template", "farm-apiserver", &chart, "-n", "farm-system", "-f", &profile("existing-secret.yaml")],
    );
    assert!(!ok, "rendered without a caBundle");
    assert!(stderr.contains("tls.existingSecret.caBundle"), "{stderr}");
}

#[test]
fn etcd_profile_stores_in_etcd_with_a_client_certificate() {
    let (items, _) = template_and_dry_run(&["-f", &profile("etcd.yaml")]);
    assert_common(&items);
    let deployment = find(&items, "Deployment", "farm-apiserver");
    let (pod, container) = pod_and_container(deployment);
    let args = strings(&container["args"]);
    assert_eq!(flag(&args, "--storage"), Some("etcd"));
    let servers = flag(&args, "--etcd-servers").expect("--etcd-servers");
    assert!(servers.split(',').all(|s| s.starts_with("https://")), "{servers}");
    assert_eq!(flag(&args, "--etcd-prefix"), Some("/registry/farm.example.com"));
    for (name, file) in [("--etcd-cafile", "ca.crt"), ("--etcd-certfile", "tls.crt"), ("--etcd-keyfile", "tls.key")] {
        let path = flag(&args, name).unwrap_or_else(|| panic!("{name} in {args:?}"));
        assert_eq!(secret_file(pod, container, path), ("farm-apiserver-etcd-client", file));
    }
    // Shared storage: roll one new Pod at a time, never below the replica count.
    let strategy = &deployment["spec"]["strategy"];
    assert_eq!(strategy["type"], "RollingUpdate", "{strategy}");
    assert_eq!(strategy["rollingUpdate"]["maxUnavailable"], 0, "{strategy}");
}

#[test]
fn ha_profile_runs_three_spread_replicas_with_a_disruption_budget() {
    let (items, _) = template_and_dry_run(&["-f", &profile("cert-manager.yaml"), "-f", &profile("ha.yaml")]);
    assert_common(&items);
    let deployment = find(&items, "Deployment", "farm-apiserver");
    assert_eq!(deployment["spec"]["replicas"], 3);
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    let (pod, container) = pod_and_container(deployment);
    assert_spread_over_nodes(pod, labels);
    assert_eq!(flag(&strings(&container["args"]), "--storage"), Some("etcd"));
    let pdb = find(&items, "PodDisruptionBudget", "farm-apiserver");
    assert!(selects(&pdb["spec"]["selector"], labels), "{pdb}");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1, "{pdb}");
}

/// The server's flags as values, extra arguments and environment, and the
/// ServiceMonitor (rendered, not dry-run: its CRD is not installed).
#[test]
fn values_reach_the_server_and_the_service_monitor_verifies_tls() {
    let (items, objects) = template_and_dry_run(&[
        "--set",
        "server.logFormat=text,server.maxConnections=0,server.maxRequestsInflight=800,server.requestTimeout=90",
        "--set",
        "audit.log.path=-,admission.disablePlugins={ValidatingAdmissionWebhook},server.podNamespaces={a,b}",
        "--set",
        "admission.configSecret.name=farm-admission,extraArgs={--watch-history=20000}",
        "--set",
        "env[0].name=FARM_LOG,env[0].value=debug,priorityClassName=system-cluster-critical",
        "--set",
        "rbac.admissionParamKinds[0].apiGroups={},rbac.admissionParamKinds[0].resources={configmaps}",
        "--set",
        "serviceMonitor.enabled=true,image.tag=v9.9.9",
        "--set",
        "tracing.endpoint=otel-collector.observability:4317,tracing.samplingRatePerMillion=100",
        // Names, or objects as metrics-server's chart takes them.
        "--set-json",
        r#"imagePullSecrets=["regcred",{"name":"other"}]"#,
    ]);
    let deployment = find(&items, "Deployment", "farm-apiserver");
    let (pod, container) = pod_and_container(deployment);
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["imagePullSecrets"], serde_json::json!([{"name": "regcred"}, {"name": "other"}]));
    assert_eq!(container["image"], "ghcr.io/example/farm-apiserver:v9.9.9");
    let args = strings(&container["args"]);
    for (name, value) in [
        ("--log-format", "text"),
        ("--max-connections", "0"),
        ("--max-requests-inflight", "800"),
        ("--request-timeout", "90"),
        ("--audit-log-path", "-"),
        ("--disable-admission-plugins", "ValidatingAdmissionWebhook"),
        ("--pod-namespaces", "a,b"),
        ("--admission-control-config-file", "/etc/farm-apiserver/admission/admission-config.yaml"),
        ("--tracing-config-file", "/etc/farm-apiserver/tracing/tracing.yaml"),
    ] {
        assert_eq!(flag(&args, name), Some(value), "{name} in {args:?}");
    }
    assert_eq!(flag(&args, "--max-mutating-requests-inflight"), None, "unset: the server's default");
    assert_eq!(args.last(), Some(&"--watch-history=20000"));
    assert!(flag(&args, "--audit-log-maxsize").is_none(), "no rotation on standard output: {args:?}");
    let (admission_secret, _) = secret_file(pod, container, "/etc/farm-apiserver/admission/admission-config.yaml");
    assert_eq!(admission_secret, "farm-admission");
    assert!(
        container["volumeMounts"]
            .as_array()
            .expect("mounts")
            .iter()
            .all(|m| m["mountPath"] != "/var/log/farm-apiserver"),
        "no audit log volume for standard output"
    );
    assert_eq!(container["env"][0]["name"], "FARM_LOG");
    // The tracing configuration is a ConfigMap mounted where the flag points.
    let mounted = |path: &str| {
        container["volumeMounts"].as_array().expect("mounts").iter().find(|m| m["mountPath"] == path).cloned()
    };
    let mount = mounted("/etc/farm-apiserver/tracing").expect("the tracing configuration is mounted");
    let volume =
        pod["volumes"].as_array().expect("volumes").iter().find(|v| v["name"] == mount["name"]).expect("volume");
    let tracing = find(&items, "ConfigMap", volume["configMap"]["name"].as_str().expect("a ConfigMap"));
    let config: Value =
        serde_norway::from_str(tracing["data"]["tracing.yaml"].as_str().expect("tracing.yaml")).expect("YAML");
    assert_eq!(
        config,
        serde_json::json!({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "TracingConfiguration",
            "endpoint": "otel-collector.observability:4317", "samplingRatePerMillion": 100})
    );
    let role = find(&items, "ClusterRole", "farm-apiserver");
    let last = role["rules"].as_array().and_then(|r| r.last()).expect("rules");
    assert_eq!(
        (strings(&last["resources"]), strings(&last["verbs"])),
        (vec!["configmaps"], vec!["get", "list", "watch"])
    );

    let monitor = find(&objects, "ServiceMonitor", "farm-apiserver");
    let service = find(&items, "Service", "farm-apiserver");
    assert!(selects(&monitor["spec"]["selector"], &service["metadata"]["labels"]), "{monitor}");
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], service["spec"]["ports"][0]["name"]);
    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(endpoint["path"], "/metrics");
    assert_eq!(endpoint["tlsConfig"]["serverName"], "farm-apiserver.farm-system.svc");
    assert_eq!(endpoint["tlsConfig"]["ca"]["secret"]["name"], "farm-apiserver-tls");
    assert_eq!(endpoint["tlsConfig"]["ca"]["secret"]["key"], "ca.crt");
    assert!(endpoint["tlsConfig"]["insecureSkipVerify"].is_null(), "{endpoint}");
}

/// A values file the schema (or the chart's checks) refuses, with a message
/// that names the value, at `helm template` and at `helm install` alike.
#[test]
fn bad_values_are_refused_naming_the_value() {
    let cp = controlplane_with_namespace();
    let dir = tempfile::tempdir().expect("tempdir");
    let chart = chart();
    for (values, names) in [
        ("tls:\n  type: letsencrypt\n", &["/tls/type", "'helm', 'cert-manager', 'existing-secret'"][..]),
        ("replicaCount: three\n", &["/replicaCount", "want integer"][..]),
        ("replicas: 3\n", &["'replicas' not allowed"][..]),
        ("storage:\n  type: etcd\n  etcd:\n    endpoints: [etcd:2379]\n", &["/storage/etcd/endpoints/0"][..]),
        ("apiService:\n  insecureSkipTLSVerify: \"yes\"\n", &["/apiService/insecureSkipTLSVerify"][..]),
        ("replicaCount: 3\n", &["replicaCount: 3 replicas need storage.type etcd"][..]),
        ("storage:\n  type: etcd\n", &["storage.etcd.endpoints"][..]),
        ("tracing:\n  samplingRatePerMillion: 2000000\n", &["/tracing/samplingRatePerMillion"][..]),
    ] {
        let file = dir.path().join("values.yaml");
        std::fs::write(&file, values).expect("write values");
        let file = file.display().to_string();
        let (ok, stdout, stderr) = helm(None, &["template", "farm-apiserver", &chart, "-f", &file]);
        assert!(!ok, "helm template accepted {values:?}:\n{stdout}");
        for name in names {
            assert!(stderr.contains(name), "helm template of {values:?} does not say {name:?}:\n{stderr}");
        }
        // helm install refuses it before it creates anything.
        let _real_objects = real_objects();
        let (ok, _, stderr) =
            helm(Some(&cp.kubeconfig), &["install", "farm-refused", &chart, "-n", "farm-system", "-f", &file]);
        assert!(!ok, "helm install accepted {values:?}");
        assert!(stderr.contains(names[0]), "helm install of {values:?} does not say {:?}:\n{stderr}", names[0]);
        let (_, releases, _) = helm(Some(&cp.kubeconfig), &["list", "-n", "farm-system", "-q", "-a"]);
        assert!(!releases.contains("farm-refused"), "{releases}");
    }
}

fn kubectl_json(kubeconfig: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let (ok, stdout, stderr) = crate::common::kubectl(kubeconfig, &all);
    assert!(ok, "kubectl {all:?}: {stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// `kubectl get <kinds> -l <selector>` of every object left, as "kind/name".
fn left(kubeconfig: &Path, namespace: Option<&str>, kinds: &str, selector: &str) -> Vec<String> {
    let mut args = vec!["get", kinds, "-l", selector];
    if let Some(namespace) = namespace {
        args.extend(["-n", namespace]);
    }
    let list = kubectl_json(kubeconfig, &args);
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| format!("{}/{}", o["kind"].as_str().unwrap_or("?"), o["metadata"]["name"].as_str().unwrap_or("?")))
        .collect()
}

/// Install, upgrade and uninstall on the control plane: the generated CA and
/// serving pair are made once and kept by the upgrade (same Secret data, same
/// caBundle), and the uninstall leaves nothing behind, the APIService included.
#[test]
fn install_upgrade_keeps_the_generated_ca_and_uninstall_leaves_nothing() {
    let cp = controlplane_with_namespace();
    let _real_objects = real_objects();
    let kubeconfig = cp.kubeconfig.as_path();
    let chart = chart();
    let namespace = "farm-helm";
    let release = "farm-apiserver";
    let instance = format!("app.kubernetes.io/instance={release}");

    let (ok, stdout, stderr) = helm(
        Some(kubeconfig),
        &["install", release, &chart, "-n", namespace, "--create-namespace", "--timeout", "60s"],
    );
    assert!(ok, "helm install:\n{stdout}{stderr}");
    assert!(stdout.contains("STATUS: deployed"), "{stdout}");
    let tls_before = kubectl_json(kubeconfig, &["get", "secret", "farm-apiserver-tls", "-n", namespace]);
    let api_before = kubectl_json(kubeconfig, &["get", "apiservice", "v1alpha.farm.example.com"]);
    assert_eq!(api_before["spec"]["caBundle"], tls_before["data"]["ca.crt"]);
    assert_eq!(api_before["spec"]["service"]["namespace"], namespace);
    assert_certificate_for(
        &unb64(&tls_before["data"]["ca.crt"]),
        &unb64(&tls_before["data"]["tls.crt"]),
        &format!("farm-apiserver.{namespace}.svc"),
    );
    let deployment = kubectl_json(kubeconfig, &["get", "deployment", "farm-apiserver", "-n", namespace]);
    assert_eq!(flag(&strings(&deployment["spec"]["template"]["spec"]["containers"][0]["args"]), "--log"), None);

    // An upgrade that changes the Deployment: the CA and the pair stay.
    let (ok, stdout, stderr) = helm(
        Some(kubeconfig),
        &["upgrade", release, &chart, "-n", namespace, "--set", "server.logLevel=debug", "--timeout", "60s"],
    );
    assert!(ok, "helm upgrade:\n{stdout}{stderr}");
    assert!(stdout.contains("REVISION: 2"), "{stdout}");
    let deployment = kubectl_json(kubeconfig, &["get", "deployment", "farm-apiserver", "-n", namespace]);
    assert_eq!(
        flag(&strings(&deployment["spec"]["template"]["spec"]["containers"][0]["args"]), "--log"),
        Some("debug")
    );
    let tls_after = kubectl_json(kubeconfig, &["get", "secret", "farm-apiserver-tls", "-n", namespace]);
    let api_after = kubectl_json(kubeconfig, &["get", "apiservice", "v1alpha.farm.example.com"]);
    assert_eq!(tls_after["data"], tls_before["data"], "the serving Secret survives the upgrade");
    assert_eq!(api_after["spec"]["caBundle"], api_before["spec"]["caBundle"], "the caBundle survives the upgrade");

    let (ok, stdout, stderr) =
        helm(Some(kubeconfig), &["uninstall", release, "-n", namespace, "--wait", "--timeout", "60s"]);
    assert!(ok, "helm uninstall:\n{stdout}{stderr}");
    for name in ["v1alpha.farm.example.com", "v1beta1.farm.example.com"] {
        let (ok, _, stderr) = cp.kubectl(&["get", "apiservice", name]);
        assert!(!ok && stderr.contains("NotFound"), "the APIService {name} is gone: {stderr}");
    }
    assert_eq!(
        left(kubeconfig, None, "clusterroles,clusterrolebindings", &instance),
        Vec::<String>::new(),
        "cluster-wide objects left"
    );
    assert_eq!(left(kubeconfig, Some("kube-system"), "rolebindings", &instance), Vec::<String>::new());
    // What the release made, and what the controllers made from it
    // (ReplicaSets, Pods that never ran), goes: the garbage collector takes
    // the latter after the Deployment is gone.
    let kinds = "deployments,replicasets,pods,services,secrets,configmaps,serviceaccounts,poddisruptionbudgets";
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let remaining = left(kubeconfig, Some(namespace), kinds, &instance);
        let releases = left(kubeconfig, Some(namespace), "secrets", "owner=helm");
        if remaining.is_empty() && releases.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "left in {namespace}: {remaining:?} {releases:?}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// With an existing Secret and no caBundle value, `helm install` reads the
/// Secret's ca.crt into the APIService (what `helm template` cannot do).
#[test]
fn install_with_an_existing_secret_reads_its_ca() {
    let cp = controlplane_with_namespace();
    let _real_objects = real_objects();
    let kubeconfig = cp.kubeconfig.as_path();
    let chart = chart();
    let namespace = "farm-helm-secret";
    let certs = Certs::new();
    let (ok, _, stderr) = cp.kubectl(&["create", "namespace", namespace]);
    assert!(ok || stderr.contains("AlreadyExists"), "{stderr}");
    let (ok, _, stderr) = cp.kubectl(&[
        "create",
        "secret",
        "generic",
        "farm-apiserver-tls",
        "-n",
        namespace,
        "--type",
        "kubernetes.io/tls",
        &format!("--from-file=tls.crt={}", certs.path("tls.crt")),
        &format!("--from-file=tls.key={}", certs.path("tls.key")),
        &format!("--from-file=ca.crt={}", certs.path("ca.crt")),
    ]);
    assert!(ok, "{stderr}");

    let (ok, stdout, stderr) = helm(
        Some(kubeconfig),
        &["install", "farm-apiserver", &chart, "-n", namespace, "-f", &profile("existing-secret.yaml")],
    );
    assert!(ok, "helm install:\n{stdout}{stderr}");
    let api = kubectl_json(kubeconfig, &["get", "apiservice", "v1alpha.farm.example.com"]);
    let ca_pem = std::fs::read(certs.path("ca.crt")).expect("ca.crt");
    assert_eq!(api["spec"]["caBundle"], b64(&ca_pem).as_str(), "the Secret's ca.crt");

    let (ok, stdout, stderr) = helm(Some(kubeconfig), &["uninstall", "farm-apiserver", "-n", namespace, "--wait"]);
    assert!(ok, "helm uninstall:\n{stdout}{stderr}");
    let secret = kubectl_json(kubeconfig, &["get", "secret", "farm-apiserver-tls", "-n", namespace]);
    assert!(secret["metadata"]["labels"].is_null(), "the user's Secret stays as it was: {secret}");
    let (ok, _, stderr) = cp.kubectl(&["delete", "namespace", namespace, "--wait=false"]);
    assert!(ok, "{stderr}");
}
