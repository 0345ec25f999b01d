//! Answers given before a request's body is read, over one HTTP/1.1
//! keep-alive connection: as Go's server does, a small unread body (up to
//! 256 KiB) is read and dropped so the connection serves the next request,
//! and past that the answer says `Connection: close` before the server
//! closes it. A client reusing the connection never meets a silent close.

use crate::common::{connect, connector, llama, Server};
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;

/// A request on the shared connection, with its body.
fn request(method: &str, path: &str, content_type: &str, body: Vec<u8>) -> hyper::Request<Full<bytes::Bytes>> {
    hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", content_type)
        .body(Full::new(bytes::Bytes::from(body)))
        .unwrap()
}

/// A JSON body of about `size` bytes (a Llama with a long annotation).
fn body_of(size: usize) -> Vec<u8> {
    let mut l = llama("big", 30.0, 1.5);
    l["metadata"]["annotations"] = serde_json::json!({"note": "x".repeat(size)});
    serde_json::to_vec(&l).unwrap()
}

#[tokio::test]
async fn early_answers_keep_the_connection_or_say_they_close_it() {
    let s = Server::start(&[]).await;
    let tls = connector(&s.ca_file, &[b"http/1.1"]);
    let collection = "/apis/farm.example.com/v1beta1/namespaces/default/llamas";
    let named = format!("{collection}/dolly");
    let status = format!("{named}/status");
    // Answered without reading the body: a verb the path does not serve, an
    // update without a name, a content type that is not served, a kind
    // nobody serves.
    let early = [
        ("POST", status.as_str(), "application/json", 405),
        ("PUT", collection, "application/json", 400),
        ("POST", collection, "text/plain", 415),
        ("POST", "/apis/farm.example.com/v1beta1/namespaces/default/alpacas", "application/json", 404),
        ("PATCH", named.as_str(), "application/strategic-merge-patch+json", 415),
    ];
    for size in [0, 10 << 10, 200 << 10] {
        let io = TokioIo::new(connect(&s, &tls).await.unwrap());
        let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        let driver = tokio::spawn(conn);
        for (method, path, content_type, code) in early {
            let resp =
                send.send_request(request(method, path, content_type, body_of(size))).await.unwrap_or_else(|e| {
                    panic!("{method} {path} with a {size}-byte body after earlier answers on the connection: {e}")
                });
            assert_eq!(resp.status(), code, "{method} {path}");
            assert!(resp.headers().get("connection").is_none(), "{method} {path}: {:?}", resp.headers());
            resp.into_body().collect().await.unwrap();
            send.ready().await.unwrap_or_else(|e| panic!("the connection closed after {method} {path}: {e}"));
        }
        let resp = send.send_request(request("GET", collection, "application/json", Vec::new())).await.unwrap();
        assert_eq!(resp.status(), 200);
        drop(send);
        let _ = driver.await;
    }

    // A larger body is not read (unless the answer needed it): the answer
    // says the connection closes, or the connection goes on.
    let mut closed = Vec::new();
    for (method, path, content_type, code) in early {
        let io = TokioIo::new(connect(&s, &tls).await.unwrap());
        let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        let driver = tokio::spawn(conn);
        let resp = send.send_request(request(method, path, content_type, body_of(1 << 20))).await.unwrap();
        assert_eq!(resp.status(), code, "{method} {path}");
        let close = resp.headers().get("connection").map(|v| v.as_bytes().to_vec());
        let _ = resp.into_body().collect().await;
        match close.as_deref() {
            Some(b"close") => closed.push(method),
            None => {
                let next = send.send_request(request("GET", collection, "application/json", Vec::new())).await;
                assert_eq!(next.unwrap_or_else(|e| panic!("after {method} {path}: {e}")).status(), 200);
            }
            Some(other) => panic!("{method} {path}: Connection: {}", String::from_utf8_lossy(other)),
        }
        drop(send);
        let _ = driver.await;
    }
    assert!(closed.len() >= 3, "closed after {closed:?}");
}
