//! Connection-level protections of the HTTPS server against the real binary: the header
//! read timeout (slowloris), the idle timeout (HTTP/1.1 keep-alive and HTTP/2) that never
//! cuts a watch, request headers up to --max-request-header-bytes on both protocols, and
//! --max-connections, which caps idle connections only: beyond it the idlest is closed, never
//! one with a request in flight nor the aggregator's (1,000 watches lock nobody out).
//! Timeouts are set short through the real flags; no test asserts how fast anything
//! happens, only that it does (within generous hang guards) or that it has not yet happened.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::common::{client_trusting, connect, connector, install_crypto, llama, Server, GROUP_PATH};
use futures::StreamExt as _;
use http_body_util::{BodyExt as _, Empty, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// Bounds every wait, so a protection that does not work fails the test instead of hanging it.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Sends one HTTP/1.1 request on `stream` and reads its whole response (Content-Length or
/// chunked), leaving the connection open; returns the status line.
async fn http1_roundtrip(stream: &mut TlsStream<TcpStream>, path: &str) -> String {
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write request");
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let byte = stream.read_u8().await.expect("read response head");
        head.push(byte);
    }
    let head = String::from_utf8_lossy(&head).to_string();
    let length = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>()))
        .map(|v| v.expect("content-length"));
    match length {
        Some(n) => {
            let mut body = vec![0; n];
            stream.read_exact(&mut body).await.expect("read body");
        }
        None => {
            // Chunked: read to the last chunk.
            let mut tail = Vec::new();
            while !tail.ends_with(b"0\r\n\r\n") {
                tail.push(stream.read_u8().await.expect("read chunked body"));
            }
        }
    }
    head.lines().next().unwrap_or_default().to_string()
}

/// Reads until the server closes `stream` (end of file or an error); what it says is ignored.
async fn until_closed(stream: &mut TlsStream<TcpStream>) {
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/<pid>/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Waits until `condition` holds, within the hang guard.
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "{what}: not within {HANG_GUARD:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---- slowloris ---------------------------------------------------------------------------------

const SLOW_CONNECTIONS: usize = 1000;

/// 1,000 connections trickle a request header, a line every 300 ms; the header read timeout
/// closes every one of them while other clients, on pooled and on fresh connections, keep
/// getting answers; the server's file descriptors go back to where they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_connections_are_closed_while_others_are_served() {
    let s = Server::start(&["--http-header-read-timeout", "8", "--http-idle-timeout", "60", "--max-connections", "0"])
        .await;
    let pooled = s.client.clone();
    let fresh = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(&s.ca_file).unwrap()).unwrap())
        .pool_max_idle_per_host(0)
        .http1_only()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let probe = s.url(GROUP_PATH);
    assert_eq!(pooled.get(&probe).send().await.unwrap().status(), 200);
    let baseline = open_fds(s.pid());

    let tls = connector(&s.ca_file, &[b"http/1.1"]);
    let opened = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    // Handshakes a few at a time, as an attacker on one machine would; each trickles on its own.
    let handshakes = Arc::new(tokio::sync::Semaphore::new(32));
    let mut tricklers = Vec::new();
    for i in 0..SLOW_CONNECTIONS {
        let (s_port, tls, opened, closed, handshakes) =
            (s.port, tls.clone(), opened.clone(), closed.clone(), handshakes.clone());
        tricklers.push(tokio::spawn(async move {
            let permit = handshakes.acquire_owned().await.unwrap();
            let tcp = TcpStream::connect(("127.0.0.1", s_port)).await.expect("connect");
            let mut stream = tls.connect(ServerName::try_from("localhost").unwrap(), tcp).await.expect("TLS handshake");
            drop(permit);
            opened.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 1024];
            let mut line = format!("GET {GROUP_PATH} HTTP/1.1\r\nHost: localhost\r\n").into_bytes();
            loop {
                if stream.write_all(&line).await.is_err() {
                    break;
                }
                line = format!("X-Slow-{i}: still typing\r\n").into_bytes();
                tokio::select! {
                    read = stream.read(&mut buf) => match read {
                        Ok(0) | Err(_) => break,
                        // Whatever the server says before closing, the header never completes.
                        Ok(_) => {}
                    },
                    _ = tokio::time::sleep(Duration::from_millis(300)) => {}
                }
            }
            closed.fetch_add(1, Ordering::SeqCst);
        }));
    }

    // Normal clients while the slow ones are connected and until the last is closed.
    let mut answered = 0;
    let mut peak_fds = 0;
    let all_closed = tokio::time::Instant::now() + HANG_GUARD;
    while closed.load(Ordering::SeqCst) < SLOW_CONNECTIONS {
        assert!(
            tokio::time::Instant::now() < all_closed,
            "only {} of {SLOW_CONNECTIONS} trickling connections were closed ({} opened)",
            closed.load(Ordering::SeqCst),
            opened.load(Ordering::SeqCst)
        );
        for client in [&pooled, &fresh] {
            let r = client.get(&probe).send().await.expect("a normal request during the slowloris");
            assert_eq!(r.status(), 200, "a normal request during the slowloris");
            answered += 1;
        }
        peak_fds = peak_fds.max(open_fds(s.pid()));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for t in tricklers {
        t.await.expect("trickler");
    }
    assert_eq!(opened.load(Ordering::SeqCst), SLOW_CONNECTIONS);
    assert!(answered > 0);
    assert!(
        peak_fds > baseline + SLOW_CONNECTIONS / 2,
        "the slow connections were open at once: peak {peak_fds} fds, baseline {baseline}"
    );
    eventually("the server's fds back near the baseline", || open_fds(s.pid()) <= baseline + 5).await;
    let r = pooled.get(&probe).send().await.unwrap();
    assert_eq!(r.status(), 200);
    println!(
        "slowloris: {SLOW_CONNECTIONS} trickling connections closed; {answered} normal requests answered; fds baseline {baseline}, peak {peak_fds}, after {}",
        open_fds(s.pid())
    );
}

/// A keep-alive HTTP/1.1 connection gets the idle timeout, not the header timeout, to start
/// its next request; once its first bytes arrive the header timeout applies.
#[tokio::test]
async fn http1_keep_alive_waits_idle_timeout_then_header_timeout() {
    let s = Server::start(&["--http-header-read-timeout", "1", "--http-idle-timeout", "60"]).await;
    let tls = connector(&s.ca_file, &[b"http/1.1"]);
    let mut stream = connect(&s, &tls).await.expect("connect");
    assert!(http1_roundtrip(&mut stream, GROUP_PATH).await.contains(" 200 "));
    // Three header timeouts of silence: still open, because the idle timeout applies.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(http1_roundtrip(&mut stream, GROUP_PATH).await.contains(" 200 "));
    // A request header that never completes is closed by the header timeout.
    stream.write_all(b"GET /apis HTTP/1.1\r\nHost: localhost\r\n").await.expect("partial header");
    tokio::time::timeout(HANG_GUARD, until_closed(&mut stream)).await.expect("closed by the header read timeout");
}

/// The first request's header must come within the header timeout of accept, also when the
/// client says nothing at all after the TLS handshake, on either protocol.
#[tokio::test]
async fn silent_connections_are_closed_by_the_header_timeout() {
    let s = Server::start(&["--http-header-read-timeout", "1", "--http-idle-timeout", "600"]).await;
    for alpn in [&b"http/1.1"[..], b"h2"] {
        let mut stream = connect(&s, &connector(&s.ca_file, &[alpn])).await.expect("connect");
        tokio::time::timeout(HANG_GUARD, until_closed(&mut stream)).await.expect("silent connection closed");
    }
    // HTTP/2: the preface and SETTINGS are sent, but never a HEADERS frame.
    let mut stream = connect(&s, &connector(&s.ca_file, &[b"h2"])).await.expect("connect");
    stream.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").await.expect("preface");
    tokio::time::timeout(HANG_GUARD, until_closed(&mut stream)).await.expect("HTTP/2 without a request closed");
}

// ---- idle timeout ------------------------------------------------------------------------------

/// Sends one GET over a hyper client connection of the given protocol and returns the
/// connection's driver, which ends when the server closes the connection.
async fn one_request_then_idle(s: &Server, http2: bool) -> tokio::task::JoinHandle<()> {
    let alpn: &[u8] = if http2 { b"h2" } else { b"http/1.1" };
    let io = TokioIo::new(connect(s, &connector(&s.ca_file, &[alpn])).await.expect("connect"));
    let request =
        || hyper::Request::get(GROUP_PATH).header("host", "localhost").body(Empty::<bytes::Bytes>::new()).unwrap();
    let (status, driver) = if http2 {
        let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await.expect("h2");
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        let r = send.send_request(request()).await.expect("h2 request");
        let status = r.status();
        r.into_body().collect().await.expect("h2 body");
        (status, driver)
    } else {
        let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.expect("http/1.1");
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        let r = send.send_request(request()).await.expect("http/1.1 request");
        let status = r.status();
        r.into_body().collect().await.expect("http/1.1 body");
        (status, driver)
    };
    assert_eq!(status, 200);
    driver
}

/// Idle keep-alive HTTP/1.1 and HTTP/2 connections are closed by the idle timeout.
#[tokio::test]
async fn idle_connections_are_closed() {
    let s = Server::start(&["--http-idle-timeout", "1", "--http-header-read-timeout", "30"]).await;
    let h1 = one_request_then_idle(&s, false).await;
    let h2 = one_request_then_idle(&s, true).await;
    tokio::time::timeout(HANG_GUARD, h1).await.expect("idle HTTP/1.1 connection closed").unwrap();
    tokio::time::timeout(HANG_GUARD, h2).await.expect("idle HTTP/2 connection closed").unwrap();
}

/// A watch is a request in flight: it outlives the idle and header timeouts several times
/// over, on HTTP/1.1 and HTTP/2, sees an event sent after them, and ends only at its own
/// timeoutSeconds, cleanly.
#[tokio::test]
async fn a_watch_longer_than_the_idle_timeout_is_not_cut() {
    let s = Server::start(&["--http-idle-timeout", "1", "--http-header-read-timeout", "1"]).await;
    let pem = std::fs::read(&s.ca_file).unwrap();
    let h1 = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .http1_only()
        .build()
        .unwrap();
    let h2 = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let url = format!("{}?watch=1&timeoutSeconds=10", s.llamas("default", ""));
    let mut watches = Vec::new();
    for (client, version) in [(h1, reqwest::Version::HTTP_11), (h2, reqwest::Version::HTTP_2)] {
        let r = client.get(&url).send().await.expect("watch");
        assert_eq!(r.status(), 200);
        assert_eq!(r.version(), version);
        watches.push(tokio::spawn(async move {
            let mut body = r.bytes_stream();
            let mut seen = Vec::new();
            while let Some(chunk) = body.next().await {
                seen.extend_from_slice(&chunk.expect("the watch stream is not cut"));
            }
            String::from_utf8(seen).expect("utf-8 events")
        }));
    }
    // Past three idle timeouts, an event.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let r = s.client.post(s.llamas("default", "")).json(&llama("late", 1.0, 1.0)).send().await.unwrap();
    assert_eq!(r.status(), 201);
    for w in watches {
        let events = tokio::time::timeout(HANG_GUARD, w).await.expect("watch ends at timeoutSeconds").unwrap();
        assert!(events.contains(r#""type":"ADDED""#) && events.contains(r#""name":"late""#), "{events}");
    }
}

// ---- header size -------------------------------------------------------------------------------

/// `count` headers of about 1 KB each.
fn big_headers(count: usize) -> reqwest::header::HeaderMap {
    let value = reqwest::header::HeaderValue::from_str(&"g".repeat(1000)).unwrap();
    let mut headers = reqwest::header::HeaderMap::new();
    for i in 0..count {
        let name = reqwest::header::HeaderName::from_bytes(format!("x-group-{i}").as_bytes()).unwrap();
        headers.insert(name, value.clone());
    }
    headers
}

/// Sends a GET with `count` headers of about 1 KB on a fresh HTTP/1.1 connection and returns
/// the response's status line. Writing and reading run side by side: a server refusing the
/// header answers before it has read all of it, and the rest of the write may then fail.
async fn http1_status_with_headers(s: &Server, count: usize) -> String {
    let stream = connect(s, &connector(&s.ca_file, &[b"http/1.1"])).await.expect("connect");
    let (mut read, mut write) = tokio::io::split(stream);
    let mut request = format!("GET {GROUP_PATH} HTTP/1.1\r\nHost: localhost\r\n");
    for i in 0..count {
        request.push_str(&format!("X-Group-{i}: {}\r\n", "g".repeat(1000)));
    }
    request.push_str("\r\n");
    let writer = tokio::spawn(async move {
        let _ = write.write_all(request.as_bytes()).await;
        write
    });
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        head.push(read.read_u8().await.expect("read response head"));
    }
    drop(writer);
    String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_string()
}

/// About 900 KB of headers (900 fields, far beyond hyper's default 100 fields and HTTP/2's
/// 16 KiB) are served on HTTP/1.1 and HTTP/2; 1.1 MB is refused, with 431 on HTTP/1.1 and
/// as h2 does it on HTTP/2 (431 or a refused stream), and the server goes on serving.
#[tokio::test]
async fn request_headers_up_to_the_limit_are_accepted() {
    let s = Server::start(&[]).await;
    let pem = std::fs::read(&s.ca_file).unwrap();
    let h1 = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .http1_only()
        .build()
        .unwrap();
    let h2 = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let url = s.url(GROUP_PATH);
    for (client, version) in [(&h1, reqwest::Version::HTTP_11), (&h2, reqwest::Version::HTTP_2)] {
        let r = client.get(&url).headers(big_headers(900)).send().await.expect("900 KB of headers");
        assert_eq!((r.status().as_u16(), r.version()), (200, version), "900 KB of headers over {version:?}");
    }
    let status = http1_status_with_headers(&s, 1100).await;
    assert!(status.contains(" 431 "), "1.1 MB of headers over HTTP/1.1: {status}");
    match h2.get(&url).headers(big_headers(1100)).send().await {
        Ok(r) => assert_eq!(r.status(), 431, "1.1 MB of headers over HTTP/2"),
        Err(e) => println!("HTTP/2 refused 1.1 MB of headers: {e:?}"),
    }
    for client in [&h1, &h2] {
        assert_eq!(client.get(&url).send().await.expect("served after").status(), 200);
    }
}

/// A smaller --max-request-header-bytes is enforced too (the flag, not a constant).
#[tokio::test]
async fn max_request_header_bytes_flag_is_enforced() {
    let s = Server::start(&["--max-request-header-bytes", "65536"]).await;
    let status = http1_status_with_headers(&s, 50).await;
    assert!(status.contains(" 200 "), "50 KB of headers: {status}");
    let status = http1_status_with_headers(&s, 80).await;
    assert!(status.contains(" 431 "), "80 KB of headers: {status}");
}

// ---- connection cap ----------------------------------------------------------------------------

/// Sends a request on a fresh connection and returns the status line once its head arrives,
/// leaving the connection (say, a watch) open.
async fn open_request(stream: &mut TlsStream<TcpStream>, path: &str) -> String {
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write request");
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        head.push(stream.read_u8().await.expect("read response head"));
    }
    String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_string()
}

/// Reads `stream` (say, a watch) until `needle` has come; false if the stream ended first.
async fn read_until(stream: &mut TlsStream<TcpStream>, needle: &str) -> bool {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
        if String::from_utf8_lossy(&seen).contains(needle) {
            return true;
        }
    }
}

/// A series of the server's /metrics, read over a connection of its own.
async fn metric(s: &Server, series: &str) -> f64 {
    let client = client_trusting(&s.ca_file).expect("client");
    let text = client.get(s.url("/metrics")).send().await.expect("/metrics").text().await.expect("metrics body");
    common::metric_sample(&text, series).unwrap_or_else(|| panic!("no {series} in /metrics:\n{text}"))
}

const WATCH_LLAMAS: &str = "/apis/farm.example.com/v1alpha/namespaces/default/llamas?watch=1";

/// At --max-connections 3, idle connections beyond the cap do not wait: the connection idle
/// longest is closed to make room (an HTTP/2 one here), a new client is served at once, the
/// others stay usable, and a connection with a request in flight (a watch) is never closed,
/// however many connections come and go past the cap.
#[tokio::test]
async fn beyond_the_cap_the_idlest_connection_is_closed_and_requests_in_flight_never_are() {
    // Timeouts far beyond the hang guard: only the cap can close anything here.
    let s =
        Server::start(&["--max-connections", "3", "--http-idle-timeout", "600", "--http-header-read-timeout", "600"])
            .await;
    let tls = connector(&s.ca_file, &[b"http/1.1"]);
    let connect_now =
        || async { tokio::time::timeout(HANG_GUARD, connect(&s, &tls)).await.expect("served").expect("TLS") };
    let mut watch = connect_now().await;
    assert!(open_request(&mut watch, WATCH_LLAMAS).await.contains(" 200 "));
    // Three idle connections, each after one request: the oldest speaks HTTP/2.
    let oldest = tokio::time::timeout(HANG_GUARD, one_request_then_idle(&s, true)).await.expect("served");
    let mut idle = Vec::new();
    for _ in 0..2 {
        let mut stream = connect_now().await;
        assert!(http1_roundtrip(&mut stream, GROUP_PATH).await.contains(" 200 "));
        idle.push(stream);
    }
    // A new client beyond the cap is served at once, and the oldest idle connection is closed.
    let mut newcomer = connect_now().await;
    let status = tokio::time::timeout(HANG_GUARD, http1_roundtrip(&mut newcomer, GROUP_PATH)).await;
    assert!(status.expect("the newcomer is served").contains(" 200 "));
    tokio::time::timeout(HANG_GUARD, oldest).await.expect("the idlest connection was closed").unwrap();
    // The other idle connections were not.
    for stream in &mut idle {
        assert!(
            http1_roundtrip(stream, GROUP_PATH).await.contains(" 200 "),
            "an idle connection younger than the closed one"
        );
    }
    // Churn: twenty connections that never send a request, then a write on yet another one.
    let mut churn = Vec::new();
    for _ in 0..20 {
        churn.push(connect_now().await);
    }
    let mut writer = connect_now().await;
    let body = serde_json::to_string(&llama("past-the-cap", 1.0, 1.0)).unwrap();
    let post = format!(
        "POST {GROUP_PATH}/namespaces/default/llamas HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    writer.write_all(post.as_bytes()).await.expect("write POST");
    assert!(tokio::time::timeout(HANG_GUARD, read_until(&mut writer, " 201 ")).await.expect("the POST is answered"));
    // Of the 23 connections idle before the writer's, at most two still count with it: the
    // others are closed. Which two depends on timing: a connection whose handshake the server
    // has not finished yet is closed first, and a loaded server may still be finishing a
    // churn connection's handshake when the next one arrives.
    let mut closing: futures::stream::FuturesUnordered<_> =
        idle.iter_mut().chain(churn.iter_mut()).chain(std::iter::once(&mut newcomer)).map(until_closed).collect();
    for closed in 0..21 {
        let next = tokio::time::timeout(HANG_GUARD, closing.next()).await;
        assert!(next.is_ok(), "only {closed} of the 23 older idle connections were closed");
    }
    drop(closing);
    let seen = tokio::time::timeout(HANG_GUARD, read_until(&mut watch, r#""name":"past-the-cap""#)).await;
    assert!(seen.expect("the watch sees the event"), "the watch's connection was closed");
    assert!(metric(&s, "farm_apiserver_connections_closed_by_cap").await >= 20.0);
}

/// The issue's case: with the default --max-connections (1000), 1,000 HTTP/1.1 watches are
/// open, one connection each; a new client is still served, and a write made then reaches
/// every watch. (Before, the watches held every connection slot and the new client's TLS
/// handshake waited in the listen backlog until a watch ended.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_watches_do_not_lock_out_a_new_client() {
    const WATCHES: usize = 1000;
    let s = Server::start(&[]).await;
    let rss_before = rss_kib(s.pid());
    let tls = connector(&s.ca_file, &[b"http/1.1"]);
    let handshakes = Arc::new(tokio::sync::Semaphore::new(32));
    let mut opening = Vec::new();
    for _ in 0..WATCHES {
        let (port, tls, handshakes) = (s.port, tls.clone(), handshakes.clone());
        opening.push(tokio::spawn(async move {
            let _permit = handshakes.acquire_owned().await.expect("semaphore");
            let tcp = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
            let mut stream = tls.connect(ServerName::try_from("localhost").unwrap(), tcp).await.expect("TLS handshake");
            let status = open_request(&mut stream, WATCH_LLAMAS).await;
            assert!(status.contains(" 200 "), "a watch: {status}");
            stream
        }));
    }
    let mut watches = Vec::new();
    for w in opening {
        watches.push(tokio::time::timeout(HANG_GUARD, w).await.expect("1,000 watches open").expect("watch"));
    }
    assert!(open_fds(s.pid()) > WATCHES, "the watches hold {WATCHES} connections");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_watching = rss_kib(s.pid());

    // A new client, on a connection of its own, with nothing but a hang guard.
    let fresh = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(&s.ca_file).unwrap()).unwrap())
        .http1_only()
        .build()
        .unwrap();
    let answer = tokio::time::timeout(HANG_GUARD, fresh.get(s.url(GROUP_PATH)).send()).await;
    assert_eq!(answer.expect("a new client is served beside 1,000 watches").unwrap().status(), 200);
    let created = tokio::time::timeout(
        HANG_GUARD,
        fresh.post(s.llamas("default", "")).json(&llama("seen-by-all", 1.0, 1.0)).send(),
    )
    .await;
    assert_eq!(created.expect("a write beside 1,000 watches").unwrap().status(), 201);
    let reading: Vec<_> = watches
        .into_iter()
        .map(|mut w| tokio::spawn(async move { read_until(&mut w, r#""name":"seen-by-all""#).await }))
        .collect();
    let mut saw = 0;
    for r in reading {
        if tokio::time::timeout(HANG_GUARD, r).await.expect("the event reaches the watch").unwrap() {
            saw += 1;
        }
    }
    assert_eq!(saw, WATCHES, "every watch saw the write");
    println!(
        "{WATCHES} HTTP/1.1 watches open; a new client served; the write reached all {saw}; RSS {rss_before} KiB -> {rss_watching} KiB ({:.1} KiB per watch and its connection)",
        rss_watching.saturating_sub(rss_before) as f64 / WATCHES as f64
    );
}

/// A TLS connector presenting the control plane's front-proxy client certificate, as the
/// aggregator does, speaking HTTP/2 as kube-apiserver's proxy does.
fn front_proxy_connector(s: &Server, cert: &[u8], key: &[u8]) -> TlsConnector {
    install_crypto();
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(&s.ca_file).expect("read CA") {
        roots.add(c.expect("CA PEM")).expect("add CA");
    }
    let chain = CertificateDer::pem_slice_iter(cert).collect::<Result<Vec<_>, _>>().expect("client certificate PEM");
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key).expect("client key PEM");
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .expect("identity");
    config.alpn_protocols = vec![b"h2".to_vec()];
    TlsConnector::from(Arc::new(config))
}

/// The aggregator is never locked out nor closed by the cap: with the cap full of idle
/// connections that never send a request, a client presenting the front-proxy certificate
/// connects and is served; its connection, idle, then outlives anonymous connections
/// churning past the cap (connections younger than it are closed, it is not); a certificate
/// from the front-proxy CA with a name not allowed to proxy is closed like anyone's.
#[tokio::test]
async fn the_aggregator_is_never_locked_out_nor_closed() {
    let cp = common::cluster::controlplane();
    let s = Server::start_with(common::Options {
        args: [
            "--authentication",
            "delegated",
            "--max-connections",
            "4",
            "--http-idle-timeout",
            "600",
            "--http-header-read-timeout",
            "600",
        ]
        .map(String::from)
        .to_vec(),
        kubeconfig: Some(cp.kubeconfig.clone()),
        ..Default::default()
    })
    .await;
    let anonymous = connector(&s.ca_file, &[b"http/1.1"]);
    let connect_now = |tls: TlsConnector| {
        let port = s.port;
        async move {
            let tcp = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
            let tls = tls.connect(ServerName::try_from("localhost").unwrap(), tcp);
            tokio::time::timeout(HANG_GUARD, tls).await.expect("the TLS handshake is served").expect("TLS")
        }
    };
    // Fill the cap with connections that never send a request.
    let mut fillers = Vec::new();
    for _ in 0..4 {
        fillers.push(connect_now(anonymous.clone()).await);
    }

    let (cert, key) = common::identity::files(cp, "frontProxyClientCertFile", "frontProxyClientKeyFile");
    let io = TokioIo::new(connect_now(front_proxy_connector(&s, &cert, &key)).await);
    let (mut aggregator, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await.expect("h2");
    let aggregator_conn = tokio::spawn(conn);
    // What kube-apiserver sends for a user in system:masters (no SubjectAccessReview needed).
    let as_admin = |method: &str, path: &str, body: Vec<u8>| {
        hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "localhost")
            .header("x-remote-user", "aggregated-admin")
            .header("x-remote-group", "system:masters")
            .header("content-type", "application/json")
            .body(Full::new(bytes::Bytes::from(body)))
            .unwrap()
    };
    let llamas = format!("{GROUP_PATH}/namespaces/default/llamas");
    let r = tokio::time::timeout(HANG_GUARD, aggregator.send_request(as_admin("GET", &llamas, Vec::new()))).await;
    let r = r.expect("the aggregator is served with the cap full").expect("request");
    assert_eq!(r.status(), 200, "the front-proxy identity was accepted");
    r.into_body().collect().await.expect("body");

    // Signed by the front-proxy CA, but a name the cluster does not allow to proxy: not exempt.
    let ca = common::identity::existing_ca(
        Path::new(&common::identity::path_of(cp, "frontProxyCAFile")),
        Path::new(&common::identity::path_of(cp, "frontProxyCAKeyFile")),
    );
    let (intruder_cert, intruder_key) = common::identity::leaf(&ca, "intruder");
    let mut intruder = connect_now(front_proxy_connector(&s, &intruder_cert, &intruder_key)).await;

    // Anonymous connections churn well past the cap while the aggregator's connection is idle.
    let mut churn = Vec::new();
    for _ in 0..12 {
        let mut stream = connect_now(anonymous.clone()).await;
        assert!(http1_roundtrip(&mut stream, "/readyz").await.contains(" 200 "));
        churn.push(stream);
    }
    // The fillers, the intruder and connections opened after the aggregator's were closed...
    for stream in fillers.iter_mut().chain([&mut intruder]).chain(churn.iter_mut().take(4)) {
        tokio::time::timeout(HANG_GUARD, until_closed(stream)).await.expect("closed by the cap");
    }
    // ...the aggregator's was not: the same connection serves again.
    assert!(!aggregator_conn.is_finished(), "the aggregator's connection was closed");
    let body = serde_json::to_vec(&llama("after-churn", 1.0, 1.0)).unwrap();
    let r = tokio::time::timeout(HANG_GUARD, aggregator.send_request(as_admin("POST", &llamas, body))).await;
    let r = r.expect("served again").expect("the aggregator's connection is still open");
    assert_eq!(r.status(), 201);
}

// ---- what an idle connection costs -----------------------------------------------------------

/// Measures the server's resident memory per idle TLS connection (one request served on each,
/// then kept open), for HTTP/1.1 and HTTP/2, and checks it stays within the budget the
/// --max-connections default is sized by (docs/configuration.md, "Connections": 256 KiB a connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connection_memory() {
    const EACH: usize = 500;
    for (alpn, name) in [(&b"http/1.1"[..], "HTTP/1.1"), (b"h2", "HTTP/2")] {
        // A server of its own for each protocol: freed memory is not handed back to the system.
        let s = Server::start(&["--max-connections", "0"]).await;
        let tls = connector(&s.ca_file, &[alpn]);
        // Warm up allocator arenas and lazily built state with a few connections first.
        let mut open = Vec::new();
        for _ in 0..20 {
            open.push(one_request_then_idle_io(&s, &tls, alpn == b"h2").await);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = rss_kib(s.pid());
        for _ in 0..EACH {
            open.push(one_request_then_idle_io(&s, &tls, alpn == b"h2").await);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = rss_kib(s.pid());
        let per = (after.saturating_sub(before)) as f64 / EACH as f64;
        println!("{name}: RSS {before} KiB -> {after} KiB with {EACH} more idle TLS connections: {per:.1} KiB each");
        assert!(per < 256.0, "{name}: {per:.1} KiB per idle connection");
        drop(open);
    }
    // The worst a slow client can make a connection cost: a request head just under the limit
    // that never ends, held in hyper's buffer until the header read timeout.
    const BIG: usize = 50;
    let s = Server::start(&["--max-connections", "0"]).await;
    let tls = connector(&s.ca_file, &[b"http/1.1"]);
    let partial =
        format!("GET {GROUP_PATH} HTTP/1.1\r\nHost: localhost\r\n{}", "X-Group: gggggggggg\r\n".repeat(45_000));
    let mut open = Vec::new();
    open.push(connect(&s, &tls).await.expect("connect"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib(s.pid());
    for _ in 0..BIG {
        let mut stream = connect(&s, &tls).await.expect("connect");
        stream.write_all(partial.as_bytes()).await.expect("900 KB of an unfinished header");
        open.push(stream);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = rss_kib(s.pid());
    println!(
        "unfinished 900 KB headers: RSS {before} KiB -> {after} KiB with {BIG} connections: {:.1} KiB each",
        (after.saturating_sub(before)) as f64 / BIG as f64
    );
}

/// One request on a new connection of the given protocol, then the connection kept idle.
async fn one_request_then_idle_io(s: &Server, tls: &TlsConnector, http2: bool) -> Box<dyn std::any::Any + Send> {
    let io = TokioIo::new(connect(s, tls).await.expect("connect"));
    let request =
        hyper::Request::get(GROUP_PATH).header("host", "localhost").body(Empty::<bytes::Bytes>::new()).unwrap();
    if http2 {
        let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await.expect("h2");
        let driver = tokio::spawn(conn);
        let r = send.send_request(request).await.expect("h2 request");
        assert_eq!(r.status(), 200);
        r.into_body().collect().await.expect("h2 body");
        Box::new((send, AbortOnDrop(driver)))
    } else {
        let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.expect("http/1.1");
        let driver = tokio::spawn(conn);
        let r = send.send_request(request).await.expect("http/1.1 request");
        assert_eq!(r.status(), 200);
        r.into_body().collect().await.expect("http/1.1 body");
        Box::new((send, AbortOnDrop(driver)))
    }
}

struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
