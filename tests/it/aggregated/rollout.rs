//! A rolling update behind the real aggregator drops nothing: two replicas
//! on etcd, each in turn replaced by a new one and terminated, while reads,
//! writes and a watch go through kube-apiserver. The test plays the Service:
//! a TCP proxy routing new connections only to replicas whose /readyz
//! passes, as EndpointSlices and kube-proxy do, and dropping a replica only
//! [`ENDPOINT_LAG`] after its readiness first fails (the probe, the
//! EndpointSlice controller and kube-proxy take that long in a cluster).
//! Connections already open stay where they are, as with kube-proxy.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::cluster::{self, client_without_retries, namespace, ControlPlane};
use crate::common::{etcd, Options, Server};
use base64::Engine as _;
use farm_apiserver::llama::v1beta1::{Llama, LlamaSpec};
use futures::{StreamExt as _, TryStreamExt as _};
use kube::api::{ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, ResourceExt as _};

/// How long after a replica's readiness first fails the Service stops
/// routing to it.
const ENDPOINT_LAG: Duration = Duration::from_secs(2);
/// How often the Service probes each replica's /readyz.
const PROBE_PERIOD: Duration = Duration::from_millis(500);
/// The replicas' --shutdown-delay-duration: longer than the probe period
/// and the lag together, as the chart's 10 s is in a cluster.
const SHUTDOWN_DELAY: &str = "8s";

/// One replica as the Service sees it.
struct Endpoint {
    port: u16,
    ready: bool,
    /// When its readiness first failed, while it is still routed to.
    failing_since: Option<Instant>,
}

/// The Service: a loopback TCP proxy over the ready replicas.
#[derive(Clone)]
struct Service {
    endpoints: Arc<Mutex<Vec<Endpoint>>>,
    next: Arc<AtomicUsize>,
    /// Connections that found no endpoint (each a failed request).
    refused: Arc<AtomicUsize>,
}

impl Service {
    async fn start(ca: &std::path::Path) -> (Service, u16) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let service = Service {
            endpoints: Arc::new(Mutex::new(Vec::new())),
            next: Arc::new(AtomicUsize::new(0)),
            refused: Arc::new(AtomicUsize::new(0)),
        };
        let routing = service.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let Some(port) = routing.pick() else {
                    routing.refused.fetch_add(1, Ordering::SeqCst);
                    continue;
                };
                tokio::spawn(async move {
                    if let Ok(mut upstream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                    }
                });
            }
        });
        let probing = service.clone();
        let probe = crate::common::client_trusting(ca).unwrap();
        tokio::spawn(async move {
            loop {
                let ports: Vec<u16> = probing.endpoints.lock().unwrap().iter().map(|e| e.port).collect();
                for port in ports {
                    let ok = probe
                        .get(format!("https://127.0.0.1:{port}/readyz"))
                        .timeout(Duration::from_secs(1))
                        .send()
                        .await
                        .is_ok_and(|r| r.status().is_success());
                    let mut endpoints = probing.endpoints.lock().unwrap();
                    if let Some(e) = endpoints.iter_mut().find(|e| e.port == port) {
                        match (ok, e.failing_since) {
                            (true, _) => (e.ready, e.failing_since) = (true, None),
                            (false, None) if e.ready => e.failing_since = Some(Instant::now()),
                            (false, Some(since)) if since.elapsed() >= ENDPOINT_LAG => e.ready = false,
                            (false, _) => {}
                        }
                    }
                }
                tokio::time::sleep(PROBE_PERIOD).await;
            }
        });
        (service, port)
    }

    /// A ready replica, round robin.
    fn pick(&self) -> Option<u16> {
        let endpoints = self.endpoints.lock().unwrap();
        let ready: Vec<u16> = endpoints.iter().filter(|e| e.ready).map(|e| e.port).collect();
        (!ready.is_empty()).then(|| ready[self.next.fetch_add(1, Ordering::SeqCst) % ready.len()])
    }

    /// A new replica: routed to once its readiness passes.
    fn add(&self, port: u16) {
        self.endpoints.lock().unwrap().push(Endpoint { port, ready: false, failing_since: None });
    }

    fn remove(&self, port: u16) {
        self.endpoints.lock().unwrap().retain(|e| e.port != port);
    }

    /// Waits until the Service routes to `port`.
    async fn wait_ready(&self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.endpoints.lock().unwrap().iter().any(|e| e.port == port && e.ready) {
            assert!(Instant::now() < deadline, "the replica on {port} never became ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn llama(name: &str, weight: f64) -> Llama {
    Llama::new(name, LlamaSpec { weight_kg: weight, height_m: 1.5, max_weight_kg: None, ear_tag: None, pasture: None })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_update_drops_no_request_and_no_watch_event() {
    let etcd = etcd::shared();
    let prefix = etcd::unique_prefix();
    let cp = ControlPlane::start();
    let certs = tempfile::tempdir().unwrap();
    let mut args = etcd.server_args(&prefix);
    args.extend(["--shutdown-delay-duration".into(), SHUTDOWN_DELAY.into(), "--shutdown-grace".into(), "10".into()]);
    let replica = || {
        Server::start_with(Options {
            args: args.clone(),
            kubeconfig: Some(cp.kubeconfig.clone()),
            cert_dir: Some(certs.path().to_path_buf()),
            ..Default::default()
        })
    };
    let mut replicas = vec![replica().await, replica().await];
    let (service, service_port) = Service::start(&replicas[0].ca_file).await;
    for r in &replicas {
        service.add(r.port);
    }
    for r in &replicas {
        service.wait_ready(r.port).await;
    }
    let ca = std::fs::read(&replicas[0].ca_file).unwrap();
    cp.apply(&cluster::registration_yaml(service_port, &base64::engine::general_purpose::STANDARD.encode(ca)));
    cluster::wait_available(&cp, Duration::from_secs(60)).await;
    cluster::wait_served(&cp, Duration::from_secs(60)).await;
    let ns = namespace(&cp, "rollout");
    let client = client_without_retries(&cp.kubeconfig).await.unwrap();
    let llamas: Api<Llama> = Api::namespaced(client.clone(), &ns);
    llamas.create(&PostParams::default(), &llama("reader", 30.0)).await.unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    // The load stops however the test ends (a blocking task left running
    // would hold the runtime, and the test, forever).
    let _stop_on_drop = StopOnDrop(stop.clone());
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let requests = Arc::new(AtomicUsize::new(0));
    // Reads: a GET and a LIST, over and over.
    let reads = {
        let (llamas, stop, failures, requests) = (llamas.clone(), stop.clone(), failures.clone(), requests.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                if let Err(e) = llamas.get("reader").await {
                    failures.lock().unwrap().push(format!("GET: {e}"));
                }
                if let Err(e) = llamas.list(&ListParams::default()).await {
                    failures.lock().unwrap().push(format!("LIST: {e}"));
                }
                requests.fetch_add(2, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    // Where the watch starts: before the first write, which it must see.
    let start_rv = llamas.list(&ListParams::default().limit(1)).await.unwrap().metadata.resource_version.unwrap();
    // Writes: a create and a patch each round; the resourceVersion of each.
    let written = Arc::new(Mutex::new(Vec::<String>::new()));
    let writes = {
        let (llamas, stop, failures, requests, written) =
            (llamas.clone(), stop.clone(), failures.clone(), requests.clone(), written.clone());
        tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let name = format!("w{i}");
                match llamas.create(&PostParams::default(), &llama(&name, 10.0)).await {
                    Ok(l) => written.lock().unwrap().push(l.resource_version().unwrap_or_default()),
                    Err(e) => failures.lock().unwrap().push(format!("create {name}: {e}")),
                }
                let patch = Patch::Merge(serde_json::json!({"spec": {"weightKg": 11.0}}));
                match llamas.patch(&name, &PatchParams::default(), &patch).await {
                    Ok(l) => written.lock().unwrap().push(l.resource_version().unwrap_or_default()),
                    Err(e) => failures.lock().unwrap().push(format!("patch {name}: {e}")),
                }
                requests.fetch_add(2, Ordering::SeqCst);
                i += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    // A watch from the current resourceVersion, resumed from the last one
    // seen whenever it ends (as when its replica goes).
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let watch_ends = Arc::new(AtomicUsize::new(0));
    let watching = {
        let (llamas, stop, failures, seen, ends) =
            (llamas.clone(), stop.clone(), failures.clone(), seen.clone(), watch_ends.clone());
        tokio::spawn(async move {
            let mut rv = start_rv;
            while !stop.load(Ordering::SeqCst) {
                let params = WatchParams::default().timeout(290);
                let mut stream = match llamas.watch(&params, &rv).await {
                    Ok(stream) => stream.boxed(),
                    Err(e) => {
                        failures.lock().unwrap().push(format!("watch from {rv}: {e}"));
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                };
                loop {
                    match stream.try_next().await {
                        Ok(Some(WatchEvent::Added(l) | WatchEvent::Modified(l) | WatchEvent::Deleted(l))) => {
                            rv = l.resource_version().unwrap_or_default();
                            if l.name_any() != "reader" {
                                seen.lock().unwrap().push(rv.clone());
                            }
                        }
                        Ok(Some(WatchEvent::Bookmark(b))) => rv = b.metadata.resource_version,
                        Ok(Some(WatchEvent::Error(e))) => {
                            failures.lock().unwrap().push(format!("watch error event: {e:?}"));
                            break;
                        }
                        Ok(None) => {
                            ends.fetch_add(1, Ordering::SeqCst);
                            break;
                        }
                        Err(e) => {
                            failures.lock().unwrap().push(format!("watch stream: {e}"));
                            break;
                        }
                    }
                }
            }
        })
    };
    // The APIServices stay Available throughout.
    let unavailable = Arc::new(Mutex::new(Vec::new()));
    let availability = {
        let (stop, unavailable) = (stop.clone(), unavailable.clone());
        let kubeconfig = cp.kubeconfig.clone();
        tokio::task::spawn_blocking(move || {
            while !stop.load(Ordering::SeqCst) {
                for name in cluster::APISERVICES {
                    let out = crate::common::kubectl(
                        &kubeconfig,
                        &[
                            "get",
                            "apiservice",
                            name,
                            "-o",
                            "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
                        ],
                    );
                    if out.1 != "True" {
                        unavailable.lock().unwrap().push(format!("{name}: {out:?}"));
                    }
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        })
    };

    // Each replica in turn: a new one starts and becomes ready, then the old
    // one is terminated (SIGTERM, as the kubelet does) and leaves the Service
    // once it has exited.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for _ in 0..2 {
        let new = replica().await;
        service.add(new.port);
        service.wait_ready(new.port).await;
        let mut old = replicas.remove(0);
        let status = old.terminate().await;
        assert!(status.success(), "the old replica exited with {status}:\n{}", old.log());
        service.remove(old.port);
        replicas.push(new);
        tokio::time::sleep(Duration::from_secs(2)).await;
    }

    stop.store(true, Ordering::SeqCst);
    reads.await.unwrap();
    writes.await.unwrap();
    availability.await.unwrap();
    // The watch catches up with the last write, then is let go.
    let last = written.lock().unwrap().last().cloned().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !seen.lock().unwrap().contains(&last) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    watching.abort();

    let failures = failures.lock().unwrap().clone();
    let total = requests.load(Ordering::SeqCst);
    assert!(failures.is_empty(), "{} of {total} requests failed: {failures:#?}", failures.len());
    assert_eq!(service.refused.load(Ordering::SeqCst), 0, "connections found no ready replica");
    assert!(unavailable.lock().unwrap().is_empty(), "APIService unavailable: {:?}", unavailable.lock().unwrap());
    let (ends, watched, writes) =
        (watch_ends.load(Ordering::SeqCst), seen.lock().unwrap().len(), written.lock().unwrap().len());
    // Every replica goes, the one serving the watch too: it resumed elsewhere.
    assert!(ends >= 1, "the watch was never ended: {ends} ends, {watched} events, {writes} writes");
    // Every write seen once, in order, and nothing else.
    let written = written.lock().unwrap().clone();
    let seen = seen.lock().unwrap().clone();
    let mut repeated = BTreeMap::new();
    for rv in &seen {
        *repeated.entry(rv.clone()).or_insert(0) += 1;
    }
    repeated.retain(|_, n| *n > 1);
    assert!(repeated.is_empty(), "the watch repeated events: {repeated:?}");
    let missed: Vec<_> = written.iter().filter(|rv| !seen.contains(rv)).collect();
    assert!(missed.is_empty(), "the watch missed {} of {} writes: {missed:?}", missed.len(), written.len());
    assert_eq!(seen, written, "the watch saw the writes in their order");
    eprintln!(
        "rollout: {total} requests, {} writes watched, {} watch ends, no failure",
        written.len(),
        watch_ends.load(Ordering::SeqCst)
    );
}
