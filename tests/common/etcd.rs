//! A real etcd for storage tests: `controlplane --etcd-only` (tests/controlplane),
//! the same embedded etcd the control plane runs, on its own. It can be stopped
//! and started again on the same port with the same data, and serves plain
//! http or https with client-certificate authentication.

use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use super::cluster::{build_controlplane, read_ready_line};

pub struct Etcd {
    child: Option<Child>,
    /// Held open: etcd stops when it closes, so it dies with the test process.
    stdin: Option<ChildStdin>,
    pub dir: PathBuf,
    pub port: u16,
    pub tls: bool,
    /// Serving a self-signed CA:TRUE certificate, trusted as itself (--etcd-cafile is that certificate).
    pub self_signed: bool,
    pub info: Value,
}

impl Etcd {
    /// A new etcd in a new directory on a free port.
    pub fn start(tls: bool) -> Etcd {
        Self::start_with(tls, false)
    }

    /// An etcd over TLS whose serving certificate is self-signed and CA:TRUE,
    /// as `openssl req -x509` makes one: clients trust it as itself.
    pub fn start_self_signed() -> Etcd {
        Self::start_with(true, true)
    }

    fn start_with(tls: bool, self_signed: bool) -> Etcd {
        let dir = tempfile::Builder::new().prefix("farm-etcd-").tempdir().expect("tempdir").keep();
        let mut etcd = Etcd { child: None, stdin: None, dir, port: 0, tls, self_signed, info: Value::Null };
        etcd.run();
        etcd
    }

    fn run(&mut self) {
        let bin = build_controlplane();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("etcd.log"))
            .expect("etcd log file");
        let mut cmd = Command::new(&bin);
        cmd.arg("--etcd-only").arg("--dir").arg(&self.dir).arg("--etcd-port").arg(self.port.to_string());
        if self.tls {
            cmd.arg("--etcd-tls");
        }
        if self.self_signed {
            cmd.arg("--etcd-self-signed-serving");
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        self.info = read_ready_line(&mut child, Duration::from_secs(60), &self.dir.join("etcd.log"), "etcd");
        let endpoint = self.endpoint();
        self.port = endpoint.rsplit(':').next().and_then(|p| p.parse().ok()).expect("etcd port");
        self.stdin = child.stdin.take();
        self.child = Some(child);
    }

    pub fn endpoint(&self) -> String {
        self.info["etcdEndpoint"].as_str().expect("etcdEndpoint").to_string()
    }

    /// A file named in the READY line (etcdCAFile, etcdCertFile, etcdKeyFile).
    pub fn file(&self, field: &str) -> PathBuf {
        PathBuf::from(self.info[field].as_str().unwrap_or_else(|| panic!("{field} in {}", self.info)))
    }

    /// farm-apiserver's flags for this etcd, with its own key prefix.
    pub fn server_args(&self, prefix: &str) -> Vec<String> {
        let mut args = vec![
            "--storage".into(),
            "etcd".into(),
            "--etcd-servers".into(),
            self.endpoint(),
            "--etcd-prefix".into(),
            prefix.into(),
        ];
        if self.tls {
            for (flag, field) in [
                ("--etcd-cafile", "etcdCAFile"),
                ("--etcd-certfile", "etcdCertFile"),
                ("--etcd-keyfile", "etcdKeyFile"),
            ] {
                args.push(flag.into());
                args.push(self.file(field).display().to_string());
            }
        }
        args
    }

    /// An etcd client for the test itself (plain http only).
    pub async fn client(&self) -> etcd_client::Client {
        etcd_client::Client::connect([self.endpoint()], None).await.expect("etcd client")
    }

    /// Kills etcd at once (SIGKILL), as a crash or a lost machine would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.stdin = None;
    }

    /// Starts etcd again on the same port with the same data.
    pub fn restart(&mut self) {
        self.kill();
        self.run();
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The plain-http etcd shared by every test of this binary; tests keep apart
/// by key prefix.
pub fn shared() -> &'static Etcd {
    static SHARED: OnceLock<Etcd> = OnceLock::new();
    SHARED.get_or_init(|| Etcd::start(false))
}

/// A key prefix no other test uses.
pub fn unique_prefix() -> String {
    format!("/farm-tests/{}", uuid::Uuid::new_v4().simple())
}
