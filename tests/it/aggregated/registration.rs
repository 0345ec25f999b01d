//! Registering farm-apiserver with the aggregator: a wrong caBundle is
//! reported on the APIService with a clear reason, and the right one makes it
//! Available. Runs against its own control plane (the APIService is global).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::cluster::{self, registration_yaml, wait_available};
use crate::common::{Options, Server};
use base64::Engine;

#[tokio::test]
async fn wrong_ca_bundle_is_reported_then_fixed() {
    let t0 = Instant::now();
    let own = cluster::ControlPlane::start();
    let cp = &own;
    eprintln!("control plane up after {:?}", t0.elapsed());
    let server = Server::start_with(Options { kubeconfig: Some(cp.kubeconfig.clone()), ..Default::default() }).await;
    // A CA that did not sign the serving certificate.
    let other = tempfile::tempdir().unwrap();
    let out =
        Command::new(env!("CARGO_BIN_EXE_farm-apiserver")).args(["certs", "--out"]).arg(other.path()).output().unwrap();
    assert!(out.status.success());
    let wrong = std::fs::read_to_string(other.path().join("cabundle.b64")).unwrap();
    cp.apply(&registration_yaml(server.port, wrong.trim()));
    // The aggregator's availability probe does not verify TLS, so the
    // APIService turns Available; what it proxies fails, saying why.
    wait_available(cp, Duration::from_secs(60)).await;
    eprintln!("available after {:?}", t0.elapsed());
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let err = cluster::proxied_discovery(cp).await.expect_err("a wrong caBundle must not be trusted");
        assert!(err.contains("x509: certificate signed by unknown authority"), "{err}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("x509 seen until {:?}", t0.elapsed());
    let get = cp.kubectl(&["get", "llamas", "-A"]);
    eprintln!("kubectl get failed after {:?}", t0.elapsed());
    assert!(!get.0, "llamas are not served through a registration that fails TLS: {get:?}");

    let right = base64::engine::general_purpose::STANDARD.encode(std::fs::read(&server.ca_file).unwrap());
    cp.apply(&registration_yaml(server.port, &right));
    cluster::wait_served(cp, Duration::from_secs(60)).await;
    eprintln!("served after {:?}", t0.elapsed());
    let get = cp.kubectl(&["get", "llamas", "-A"]);
    assert!(get.0, "{get:?}");
}
