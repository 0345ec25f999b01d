//! Encryption at rest (`--encryption-provider-config`, kube's
//! EncryptionConfiguration) on real etcd: what is stored is kube's format
//! and never plain JSON; keys rotate by putting the new one first and
//! writing again (an empty patch); a missing key is an error for that object
//! alone; and kube-apiserver, given the same configuration, reads what
//! farm-apiserver writes and the other way round, on the control plane's own
//! etcd.

use std::path::Path;

use crate::common::cluster::ControlPlane;
use crate::common::{create, etcd, llama, send, Options, Server};
use base64::Engine as _;
use reqwest::Method;
use serde_json::{json, Value};

const MERGE: &str = "application/merge-patch+json";

/// A random key of `bytes` bytes, base64.
fn key(bytes: usize) -> String {
    let raw: Vec<u8> = (0..bytes).map(|_| rand::random::<u8>()).collect();
    base64::engine::general_purpose::STANDARD.encode(raw)
}

/// An EncryptionConfiguration for Llamas with `providers` (YAML list items).
fn config(dir: &Path, name: &str, providers: &[String]) -> std::path::PathBuf {
    let path = dir.join(name);
    let text = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [llamas.farm.example.com]\n  providers:\n{}",
        providers.iter().map(|p| format!("  - {p}\n")).collect::<String>()
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn aesgcm(name: &str, secret: &str) -> String {
    format!("aesgcm: {{keys: [{{name: {name}, secret: {secret}}}]}}")
}

/// The raw value etcd holds at `key`.
async fn stored(client: &mut etcd_client::Client, key: &str) -> Vec<u8> {
    let found = client.get(key, None).await.unwrap();
    found.kvs().first().unwrap_or_else(|| panic!("{key} in etcd")).value().to_vec()
}

async fn server(etcd_args: &[String], config: Option<&Path>) -> Server {
    let mut args = etcd_args.to_vec();
    if let Some(config) = config {
        args.extend(["--encryption-provider-config".into(), config.display().to_string()]);
    }
    Server::start_with(Options { args, ..Default::default() }).await
}

#[tokio::test]
async fn keys_rotate_and_a_missing_key_is_an_error_for_its_object_alone() {
    let etcd = etcd::shared();
    let prefix = etcd::unique_prefix();
    let args = etcd.server_args(&prefix);
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (key(32), key(32));
    let key_of = |name: &str| format!("{prefix}/llamas/default/{name}");
    let mut client = etcd.client().await;

    // Before: plain JSON, as without the flag.
    let s = server(&args, None).await;
    create(&s, "default", &llama("plain", 1.0, 1.0)).await;
    assert!(stored(&mut client, &key_of("plain")).await.starts_with(b"{"));
    drop(s);

    // Encrypting, identity still read: new writes are encrypted, and an
    // empty patch encrypts what was plain.
    let first = config(dir.path(), "first.yaml", &[aesgcm("old", &old), "identity: {}".into()]);
    let s = server(&args, Some(&first)).await;
    create(&s, "default", &llama("secret", 2.0, 1.0)).await;
    let raw = stored(&mut client, &key_of("secret")).await;
    assert!(raw.starts_with(b"k8s:enc:aesgcm:v1:old:"), "{}", String::from_utf8_lossy(&raw));
    assert!(!String::from_utf8_lossy(&raw).contains("secret\""), "the name is not readable in etcd");
    let (code, _) = send(&s, Method::GET, &s.llamas("default", "plain"), None).await;
    assert_eq!(code, 200);
    let (code, _, v) =
        crate::common::call(&s, Method::PATCH, &s.llamas("default", "plain"), MERGE, Some(b"{}".to_vec())).await;
    assert_eq!(code, 200, "{v}");
    assert!(stored(&mut client, &key_of("plain")).await.starts_with(b"k8s:enc:aesgcm:v1:old:"));
    drop(s);

    // Rotation: the new key first, the old one still read; an empty patch
    // writes each object again with the new key.
    let rotating = config(
        dir.path(),
        "rotating.yaml",
        &[format!("aesgcm: {{keys: [{{name: new, secret: {new}}}, {{name: old, secret: {old}}}]}}")],
    );
    let s = server(&args, Some(&rotating)).await;
    for name in ["plain", "secret"] {
        let (code, v) = send(&s, Method::GET, &s.llamas("default", name), None).await;
        assert_eq!(code, 200, "{v}");
        let (code, _, v) =
            crate::common::call(&s, Method::PATCH, &s.llamas("default", name), MERGE, Some(b"{}".to_vec())).await;
        assert_eq!(code, 200, "{v}");
        let raw = stored(&mut client, &key_of(name)).await;
        assert!(raw.starts_with(b"k8s:enc:aesgcm:v1:new:"), "{name}: {}", String::from_utf8_lossy(&raw));
    }
    // One object left with the old key.
    drop(s);
    let s = server(&args, Some(&first)).await;
    create(&s, "default", &llama("forgotten", 3.0, 1.0)).await;
    drop(s);

    // The old key removed: the forgotten object is an error of its own, and
    // the others are served.
    let rotated = config(dir.path(), "rotated.yaml", &[aesgcm("new", &new)]);
    let s = server(&args, Some(&rotated)).await;
    let (code, v) = send(&s, Method::GET, &s.llamas("default", "forgotten"), None).await;
    assert_eq!(code, 500, "{v}");
    let message = v["message"].as_str().unwrap_or_default();
    assert!(message.contains("failed to decrypt data") && message.contains("k8s:enc:aesgcm:v1:old"), "{v}");
    let (code, v) = send(&s, Method::GET, &s.llamas("default", "secret"), None).await;
    assert_eq!((code.as_u16(), &v["spec"]["weight"]), (200, &json!(2)), "{v}");
    let (code, list) = send(&s, Method::GET, &s.llamas("default", ""), None).await;
    assert_eq!(code, 200, "{list}");
    let names: Vec<&str> =
        list["items"].as_array().unwrap().iter().filter_map(|i| i["metadata"]["name"].as_str()).collect();
    assert_eq!(names, ["plain", "secret"]);
    let (code, _, v) =
        crate::common::call(&s, Method::PATCH, &s.llamas("default", "forgotten"), MERGE, Some(b"{}".to_vec())).await;
    assert_eq!(code, 500, "{v}");
    assert!(s.log().contains("cannot read an object stored in etcd"), "{}", s.log());
}

/// The same configuration given to kube-apiserver (for the Llama CRD in
/// farm.example.com, on a control plane of its own) and to farm-apiserver
/// (on the control plane's etcd, under kube's own keys): each reads the
/// other's encrypted Llamas, whichever provider wrote them.
#[tokio::test]
async fn kube_apiserver_and_farm_apiserver_read_each_others_encrypted_values() {
    let dir = tempfile::tempdir().unwrap();
    let (gcm, cbc, sbox) = (key(32), key(32), key(32));
    let providers = |first: usize| {
        let mut all = vec![
            aesgcm("k1", &gcm),
            format!("aescbc: {{keys: [{{name: k2, secret: {cbc}}}]}}"),
            format!("secretbox: {{keys: [{{name: k3, secret: {sbox}}}]}}"),
        ];
        all.rotate_left(first);
        all.push("identity: {}".into());
        all
    };
    let kube_config = config(dir.path(), "kube.yaml", &providers(0));
    let cp = ControlPlane::start_with(&[&format!("--encryption-provider-config={}", kube_config.display())]);
    crate::common::crd::install_llama_crd(&cp, "farm.example.com").unwrap();
    let endpoint = cp.info["etcdEndpoint"].as_str().unwrap().to_string();
    let mut client = etcd_client::Client::connect([endpoint.clone()], None).await.unwrap();
    let etcd_args: Vec<String> =
        ["--storage", "etcd", "--etcd-servers", &endpoint, "--etcd-prefix", "/registry/farm.example.com"]
            .map(String::from)
            .to_vec();
    let key_of = |name: &str| format!("/registry/farm.example.com/llamas/default/{name}");

    // kube-apiserver writes (aesgcm, its first provider); farm-apiserver reads.
    cp.apply(
        "apiVersion: farm.example.com/v1beta1\nkind: Llama\nmetadata: {name: from-kube, namespace: default}\nspec: {weightKg: 40, heightM: 1.6}\n",
    );
    let raw = stored(&mut client, &key_of("from-kube")).await;
    assert!(raw.starts_with(b"k8s:enc:aesgcm:v1:k1:"), "{}", String::from_utf8_lossy(&raw));
    let s = server(&etcd_args, Some(&config(dir.path(), "farm0.yaml", &providers(0)))).await;
    let (code, v) =
        send(&s, Method::GET, &s.url("/apis/farm.example.com/v1beta1/namespaces/default/llamas/from-kube"), None).await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["spec"], json!({"weightKg": 40, "heightM": 1.6}));
    drop(s);

    // farm-apiserver writes with each provider in turn; kube-apiserver reads.
    for (first, prefix) in [(0, "k8s:enc:aesgcm:v1:k1:"), (1, "k8s:enc:aescbc:v1:k2:"), (2, "k8s:enc:secretbox:v1:k3:")]
    {
        let s = server(&etcd_args, Some(&config(dir.path(), &format!("farm{first}.yaml"), &providers(first)))).await;
        let name = format!("from-farm-{first}");
        let mut body = json!({"apiVersion": "farm.example.com/v1beta1", "kind": "Llama", "metadata": {"name": name}, "spec": {"weightKg": 30 + first, "heightM": 1.5}});
        body["metadata"]["labels"] = json!({"writer": "farm"});
        let (code, v) =
            send(&s, Method::POST, &s.url("/apis/farm.example.com/v1beta1/namespaces/default/llamas"), Some(&body))
                .await;
        assert_eq!(code, 201, "{v}");
        let raw = stored(&mut client, &key_of(&name)).await;
        assert!(raw.starts_with(prefix.as_bytes()), "{}", String::from_utf8_lossy(&raw));
        let out = cp.kubectl(&["get", "llamas.farm.example.com", &name, "-n", "default", "-o", "json"]);
        assert!(out.0, "kube-apiserver reads what farm-apiserver wrote with {prefix}: {out:?}");
        let read: Value = serde_json::from_str(&out.1).unwrap();
        assert_eq!((&read["spec"]["weightKg"], &read["metadata"]["uid"]), (&json!(30 + first), &v["metadata"]["uid"]));
    }
}
