//! farm-apiserver's container image, run as a kubelet runs a Pod of the
//! Deployment: the image built by scripts/image (once per test process),
//! loaded into a podman store of the test's own, and containers started from
//! a Pod template (args, env, security context, and its volumes materialised
//! from the objects a control plane holds: Secrets and ConfigMaps as files,
//! the service account's token, CA and namespace, emptyDirs as tmpfs).
//!
//! The containers share the host's network (the test control plane listens on
//! loopback). Nothing here skips: a missing podman or a failed build fails
//! the test with the reason.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use base64::Engine;
use serde_json::Value;

use super::cluster::ControlPlane;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The OCI archive scripts/image wrote: built on the first call (cargo makes
/// the static binary, a no-op when it is fresh; buildah puts it in the image).
pub fn image_archive() -> &'static Path {
    static ARCHIVE: OnceLock<PathBuf> = OnceLock::new();
    ARCHIVE.get_or_init(|| {
        let out = Command::new("bash").arg(repo_root().join("scripts/image")).output().expect("run scripts/image");
        assert!(
            out.status.success(),
            "scripts/image failed ({:?}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let last = stdout.lines().last().unwrap_or_else(|| panic!("scripts/image printed no path:\n{stdout}"));
        let path = PathBuf::from(last.trim());
        assert!(path.is_file(), "scripts/image's last line is not a file: {last}");
        path
    })
}

/// A podman image store of its own (vfs, in a temporary directory), with the
/// settings this machine needs (scripts/containers/containers.conf).
pub struct Podman {
    dir: tempfile::TempDir,
}

impl Podman {
    pub fn new() -> Podman {
        // Installs podman and runc where it can (as root, with apt-get), else fails naming the command.
        let tools = Command::new("bash")
            .arg(repo_root().join("scripts/container-tools"))
            .output()
            .expect("run scripts/container-tools");
        assert!(tools.status.success(), "{}", String::from_utf8_lossy(&tools.stderr));
        Podman { dir: tempfile::Builder::new().prefix("farm-podman-").tempdir().expect("tempdir") }
    }

    /// `podman` with this store; Ok(stdout) or Err(stderr).
    pub fn run(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new("podman")
            .env("CONTAINERS_CONF", repo_root().join("scripts/containers/containers.conf"))
            .arg("--root")
            .arg(self.dir.path().join("root"))
            .arg("--runroot")
            .arg(self.dir.path().join("run"))
            .args(["--storage-driver", "vfs"])
            .args(args)
            .output()
            .expect("run podman");
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!("podman {args:?}: {:?}\n{}", out.status, String::from_utf8_lossy(&out.stderr)))
        }
    }

    /// Loads an OCI archive; returns the image's id.
    pub fn load(&self, archive: &Path) -> String {
        let path = archive.display().to_string();
        let out = self.run(&["load", "--quiet", "-i", &path]).unwrap_or_else(|e| panic!("{e}"));
        // "Loaded image: localhost/farm-apiserver:0.1.0" (or sha256:...).
        let name = out.lines().last().and_then(|l| l.split(": ").nth(1)).unwrap_or_else(|| panic!("{out}"));
        let id = self.run(&["image", "inspect", "--format", "{{.Id}}", name.trim()]).unwrap_or_else(|e| panic!("{e}"));
        id.trim().to_string()
    }

    fn scratch(&self, name: &str) -> PathBuf {
        let dir = self.dir.path().join("volumes").join(name);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        dir
    }
}

/// What a Pod of a Deployment gets from the control plane besides its spec.
pub struct PodContext<'a> {
    pub cp: &'a ControlPlane,
    pub namespace: &'a str,
    /// Arguments appended to the container's (storage flags of a profile).
    pub extra_args: Vec<String>,
    /// The value of `--bind`: containers share the host's network, so each
    /// listens on a port of its own.
    pub bind: String,
}

/// A running container, removed (with `podman rm -f`) when dropped.
pub struct Container<'p> {
    podman: &'p Podman,
    pub name: String,
}

impl Container<'_> {
    /// `podman stop`: SIGTERM, then the exit code once the server has drained.
    pub fn stop(&self, grace_seconds: u32) -> i64 {
        let grace = grace_seconds.to_string();
        self.podman.run(&["stop", "--time", &grace, &self.name]).unwrap_or_else(|e| panic!("{e}"));
        let code = self
            .podman
            .run(&["inspect", "--format", "{{.State.ExitCode}}", &self.name])
            .unwrap_or_else(|e| panic!("{e}"));
        code.trim().parse().unwrap_or_else(|e| panic!("exit code {code:?}: {e}"))
    }

    /// `podman rm`; true when podman no longer lists the container.
    pub fn remove(&self) -> bool {
        self.podman.run(&["rm", &self.name]).unwrap_or_else(|e| panic!("{e}"));
        let left = self.podman.run(&["ps", "--all", "--format", "{{.Names}}"]).unwrap_or_else(|e| panic!("{e}"));
        !left.lines().any(|l| l.trim() == self.name)
    }

    pub fn logs(&self) -> String {
        self.podman.run(&["logs", &self.name]).unwrap_or_else(|e| e)
    }

    /// The host pid of the container's process.
    pub fn pid(&self) -> u32 {
        let pid =
            self.podman.run(&["inspect", "--format", "{{.State.Pid}}", &self.name]).unwrap_or_else(|e| panic!("{e}"));
        pid.trim().parse().unwrap_or_else(|e| panic!("pid {pid:?}: {e}"))
    }
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        let _ = self.podman.run(&["rm", "--force", "--time", "0", &self.name]);
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

fn get_json(cp: &ControlPlane, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let (ok, out, err) = cp.kubectl(&all);
    assert!(ok, "kubectl {args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl {args:?} printed no JSON: {e}"))
}

/// Writes `files` (name → bytes) into `dir` with `mode`, group-owned by
/// `group` as the kubelet does for a Pod with an fsGroup.
fn write_files(dir: &Path, files: &[(String, Vec<u8>)], mode: u32, group: Option<u32>) {
    use std::os::unix::fs::PermissionsExt;
    for (name, bytes) in files {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        if let Some(gid) = group {
            std::os::unix::fs::chown(&path, Some(0), Some(gid)).expect("chown");
        }
    }
}

/// The files of a Secret or ConfigMap volume.
fn object_files(cp: &ControlPlane, namespace: &str, kind: &str, name: &str) -> Vec<(String, Vec<u8>)> {
    let object = get_json(cp, &["get", kind, name, "-n", namespace]);
    let mut files = Vec::new();
    if let Some(data) = object["data"].as_object() {
        for (key, value) in data {
            let text = value.as_str().unwrap_or_default();
            let bytes = if kind == "secret" {
                base64::engine::general_purpose::STANDARD.decode(text).expect("secret data is base64")
            } else {
                text.as_bytes().to_vec()
            };
            files.push((key.clone(), bytes));
        }
    }
    files
}

impl Podman {
    /// Starts a container of `image` as the kubelet would start `template`'s
    /// first container (a Deployment's `spec.template`), in the namespace of
    /// `pod`, with the service account's token from the control plane.
    pub fn run_pod<'p>(&'p self, image: &str, name: &str, template: &Value, pod: &PodContext<'_>) -> Container<'p> {
        let spec = &template["spec"];
        let container = &spec["containers"][0];
        let cp = pod.cp;
        let mut args: Vec<String> =
            vec!["run".into(), "--detach".into(), "--name".into(), name.into(), "--network".into(), "host".into()];

        // The security context: the user, a read-only root, no capabilities.
        let sc = &container["securityContext"];
        let psc = &spec["securityContext"];
        let user = sc["runAsUser"].as_u64().or(psc["runAsUser"].as_u64());
        let group = sc["runAsGroup"].as_u64().or(psc["runAsGroup"].as_u64());
        let fs_group = psc["fsGroup"].as_u64().map(|g| g as u32);
        if let Some(user) = user {
            args.push("--user".into());
            args.push(match group {
                Some(g) => format!("{user}:{g}"),
                None => user.to_string(),
            });
        }
        if let Some(g) = fs_group {
            args.push("--group-add".into());
            args.push(g.to_string());
        }
        if sc["readOnlyRootFilesystem"] == true {
            args.push("--read-only".into());
            // Without this podman would mount tmpfs on /tmp, /run and /var/tmp
            // itself; a Pod gets only the volumes it names.
            args.push("--read-only-tmpfs=false".into());
        }
        for cap in strings(&sc["capabilities"]["drop"]) {
            args.push(format!("--cap-drop={cap}"));
        }
        if sc["allowPrivilegeEscalation"] == false {
            args.push("--security-opt=no-new-privileges".into());
        }

        // The environment the kubelet gives every container, then the template's.
        let authority = cp.server.trim_start_matches("https://").trim_end_matches('/');
        let (host, port) = authority.rsplit_once(':').unwrap_or((authority, "443"));
        args.push(format!("--env=KUBERNETES_SERVICE_HOST={host}"));
        args.push(format!("--env=KUBERNETES_SERVICE_PORT={port}"));
        for env in container["env"].as_array().into_iter().flatten() {
            if let (Some(k), Some(v)) = (env["name"].as_str(), env["value"].as_str()) {
                args.push(format!("--env={k}={v}"));
            }
        }

        // The service account's projected volume.
        let sa = spec["serviceAccountName"].as_str().unwrap_or("default");
        let (ok, token, err) = cp.kubectl(&["create", "token", sa, "-n", pod.namespace, "--duration", "1h"]);
        assert!(ok, "kubectl create token {sa}: {err}");
        let sa_dir = self.scratch(&format!("{name}-serviceaccount"));
        let ca = std::fs::read(cp.info["caFile"].as_str().expect("caFile")).expect("read the control plane's CA");
        let files = [
            ("token".to_string(), token.trim().as_bytes().to_vec()),
            ("ca.crt".to_string(), ca),
            ("namespace".to_string(), pod.namespace.as_bytes().to_vec()),
        ];
        write_files(&sa_dir, &files, 0o644, fs_group);
        args.push(format!("--volume={}:/var/run/secrets/kubernetes.io/serviceaccount:ro", sa_dir.display()));

        // The template's volumes.
        let volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
        for mount in container["volumeMounts"].as_array().into_iter().flatten() {
            let volume_name = mount["name"].as_str().expect("volumeMount name");
            let path = mount["mountPath"].as_str().expect("mountPath");
            let read_only = mount["readOnly"] == true;
            let volume = volumes
                .iter()
                .find(|v| v["name"] == volume_name)
                .unwrap_or_else(|| panic!("volume {volume_name} is mounted but not declared"));
            let source = |kind: &str, key: &str, field: &str| {
                let object = volume[key][field].as_str().expect("volume source name");
                let mode = volume[key]["defaultMode"].as_u64().unwrap_or(0o644) as u32;
                let dir = self.scratch(&format!("{name}-{volume_name}"));
                write_files(&dir, &object_files(cp, pod.namespace, kind, object), mode, fs_group);
                format!("--volume={}:{path}{}", dir.display(), if read_only { ":ro" } else { "" })
            };
            if volume.get("secret").is_some() {
                args.push(source("secret", "secret", "secretName"));
            } else if volume.get("configMap").is_some() {
                args.push(source("configmap", "configMap", "name"));
            } else if volume.get("emptyDir").is_some() {
                args.push(format!("--tmpfs={path}:rw,mode=0777"));
            } else {
                panic!("volume {volume_name}: only secret, configMap and emptyDir volumes are run here: {volume}");
            }
        }

        args.push(image.into());
        let mut container_args = strings(&container["args"]);
        let bind = container_args.iter().position(|a| a == "--bind").expect("the container's args name --bind");
        container_args[bind + 1] = pod.bind.clone();
        container_args.extend(pod.extra_args.iter().cloned());
        args.extend(container_args);

        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run(&refs).unwrap_or_else(|e| panic!("{e}"));
        Container { podman: self, name: name.into() }
    }
}
