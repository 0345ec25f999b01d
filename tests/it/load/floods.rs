//! Floods: more watches than the server admits (`--max-watches`, default 4000).
//! The ones over the cap are refused at once with 429 and Retry-After, the
//! admitted ones stay live (each receives the event of a later write), the
//! server's memory stays bounded, and other clients are still served.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common;
use crate::common::fuzz::rss_bytes;
use crate::common::{Options, Server, GROUP_PATH};
use futures::StreamExt;
use tokio::sync::{mpsc, watch};

const WATCHES: usize = 5_000;
/// The server's default `--max-watches`; with `--authentication none` there is
/// no user to apply the per-user cap to, so this is the only one.
const MAX_WATCHES: usize = 4_000;
/// HTTP/2 connections carrying the watches: fewer streams each than hyper's
/// default concurrent-stream limit (200), so no watch waits for a stream.
const CONNECTIONS: usize = 50;
const RSS_BOUND: u64 = 256 << 20;

#[derive(Debug)]
enum Seen {
    /// 429 with its Retry-After header and Status reason.
    Refused {
        retry_after: Option<String>,
        reason: String,
    },
    /// 200: the watch is open.
    Admitted,
    /// An admitted watch received the ADDED event of the flood's write.
    Event,
    Other(String),
}

fn h2_client(server: &Server) -> reqwest::Client {
    let ca = std::fs::read(&server.ca_file).unwrap();
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .http2_prior_knowledge()
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_over_the_cap_get_429_and_the_server_keeps_serving() {
    let server = Server::start_with(Options { log: Some("info".into()), ..Default::default() }).await;
    let clients: Vec<reqwest::Client> = (0..CONNECTIONS).map(|_| h2_client(&server)).collect();
    let url = format!("{}{GROUP_PATH}/namespaces/flood/llamas?watch=true&timeoutSeconds=300", server.base);
    let (tx, mut rx) = mpsc::unbounded_channel::<Seen>();
    // Admitted watches stay open until this flips.
    let (release_tx, release_rx) = watch::channel(false);

    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (peak, pid) = (peak.clone(), server.pid());
        tokio::spawn(async move {
            loop {
                peak.fetch_max(rss_bytes(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };

    for i in 0..WATCHES {
        let (client, url, tx, mut release) =
            (clients[i % CONNECTIONS].clone(), url.clone(), tx.clone(), release_rx.clone());
        tokio::spawn(async move {
            let resp = match client.get(&url).send().await {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(Seen::Other(format!("transport: {e:?}")));
                    return;
                }
            };
            match resp.status().as_u16() {
                429 => {
                    let retry_after =
                        resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_string);
                    let body: serde_json::Value = resp.json().await.unwrap_or_default();
                    let reason = body["reason"].as_str().unwrap_or("").to_string();
                    let _ = tx.send(Seen::Refused { retry_after, reason });
                }
                200 => {
                    let _ = tx.send(Seen::Admitted);
                    let mut body = resp.bytes_stream();
                    let mut seen = Vec::new();
                    loop {
                        tokio::select! {
                            chunk = body.next() => match chunk {
                                Some(Ok(c)) => {
                                    seen.extend_from_slice(&c);
                                    if String::from_utf8_lossy(&seen).contains(r#""type":"ADDED""#) {
                                        let _ = tx.send(Seen::Event);
                                        seen.clear();
                                    }
                                }
                                other => {
                                    let _ = tx.send(Seen::Other(format!("watch ended early: {other:?}")));
                                    return;
                                }
                            },
                            _ = release.changed() => return,
                        }
                    }
                }
                code => {
                    let _ = tx.send(Seen::Other(format!("{code} {}", resp.text().await.unwrap_or_default())));
                }
            }
        });
    }
    drop(tx);

    // Every watch has its answer.
    let (mut admitted, mut refused, mut events, mut other) = (0usize, Vec::new(), 0usize, Vec::new());
    let deadline = Instant::now() + Duration::from_secs(180);
    while admitted + refused.len() + other.len() < WATCHES {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(Seen::Admitted)) => admitted += 1,
            Ok(Some(Seen::Refused { retry_after, reason })) => refused.push((retry_after, reason)),
            Ok(Some(Seen::Event)) => events += 1,
            Ok(Some(Seen::Other(o))) => other.push(o),
            Ok(None) | Err(_) => break,
        }
    }
    let answered = admitted + refused.len() + other.len();
    assert_eq!(answered, WATCHES, "only {answered} of {WATCHES} watches were answered in time");
    assert!(
        other.is_empty(),
        "{} watches got neither 200 nor 429, e.g. {:?}",
        other.len(),
        &other[..other.len().min(5)]
    );
    assert_eq!(admitted, MAX_WATCHES, "admitted watches");
    assert_eq!(refused.len(), WATCHES - MAX_WATCHES, "refused watches");
    for (retry_after, reason) in &refused {
        assert_eq!(retry_after.as_deref(), Some("1"), "Retry-After of a 429");
        assert_eq!(reason, "TooManyRequests");
    }

    // Another client is served while the 4,000 watches are open, and its write
    // reaches every one of them.
    let other_client = common::client_trusting(&server.ca_file).unwrap();
    let started = Instant::now();
    let list = other_client.get(server.llamas("flood", "")).send().await.unwrap();
    assert_eq!(list.status(), 200, "a LIST during the flood");
    let create =
        other_client.post(server.llamas("flood", "")).json(&common::llama("dolly", 31.4, 1.7)).send().await.unwrap();
    assert_eq!(create.status(), 201, "a create during the flood");
    eprintln!("LIST and create during the flood took {:?}", started.elapsed());
    while events < MAX_WATCHES {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(Seen::Event)) => events += 1,
            Ok(Some(Seen::Other(o))) => panic!("an admitted watch failed: {o}"),
            Ok(Some(s)) => panic!("unexpected {s:?}"),
            Ok(None) | Err(_) => break,
        }
    }
    assert_eq!(events, MAX_WATCHES, "watches that received the ADDED event");

    let peak_rss = peak.load(Ordering::Relaxed).max(rss_bytes(server.pid()));
    eprintln!(
        "{admitted} watches admitted, {} refused with 429; peak RSS {:.1} MiB",
        refused.len(),
        peak_rss as f64 / 1048576.0
    );
    assert!(peak_rss > 0, "RSS was never read");
    assert!(peak_rss < RSS_BOUND, "peak RSS {} MiB during the flood", peak_rss >> 20);

    // Closing the watches frees their slots: a new watch is admitted again.
    release_tx.send(true).unwrap();
    let after = format!("{}{GROUP_PATH}/namespaces/flood/llamas?watch=true&timeoutSeconds=1", server.base);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = other_client.get(&after).send().await.unwrap().status();
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "no watch admitted after the flood ended: {status}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    sampler.abort();
    assert!(!server.log().contains("panicked"), "the server panicked:\n{}", server.log());
}
