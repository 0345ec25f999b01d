//! The certificates of admission webhooks, side by side: one webhook server
//! per shape of certificate (the `openssl req -x509` of most tutorials, CA
//! chains, key types, names, expiry, TLS 1.2 only, ...), each bound to Llamas
//! of both groups, so that kube-apiserver calls it for the CRD and
//! farm-apiserver for its Llamas. Each webhook denies what it is sent: a 403
//! with its message shows the call went through; a 500 shows the call
//! failed, and its message says why. Both servers must admit or refuse
//! exactly alike, in the same words.

use std::process::Command;

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, SanType};
use serde_json::{json, Value};

use super::admission::{comparison, configuration, install, llama, uninstall, Hook};
use crate::common::compare::Step;
use crate::common::webhook::{Serving, WebhookServer};

/// What a case expects of both servers.
enum Expect {
    /// The webhook was called (and denied, as it always does).
    Called,
    /// The server's certificate was refused for this reason (Go's `x509: ...`).
    Unverified(&'static str),
    /// The call failed before any connection; the message holds this text.
    Refused(&'static str),
}

/// One webhook server and how configurations trust it.
struct Case {
    name: &'static str,
    /// The host of the webhook's URL (its port is the server's).
    host: &'static str,
    server: WebhookServer,
    expect: Expect,
}

/// A key and certificate made by rcgen.
struct Made {
    params: CertificateParams,
    key: KeyPair,
    pem: String,
}

impl Made {
    fn issuer(&self) -> Issuer<'_, &KeyPair> {
        Issuer::from_params(&self.params, &self.key)
    }
}

fn params(cn: &str, sans: &[&str], is_ca: IsCa) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    for san in sans {
        params.subject_alt_names.push(match san.parse() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName((*san).try_into().unwrap()),
        });
    }
    params.is_ca = is_ca;
    params
}

fn make(params: CertificateParams, key: KeyPair, issuer: Option<&Made>) -> Made {
    let cert = match issuer {
        None => params.self_signed(&key).unwrap(),
        Some(issuer) => params.signed_by(&key, &issuer.issuer()).unwrap(),
    };
    Made { pem: cert.pem(), params, key }
}

fn ca(cn: &str) -> Made {
    make(params(cn, &[], IsCa::Ca(BasicConstraints::Unconstrained)), KeyPair::generate().unwrap(), None)
}

/// A leaf for 127.0.0.1 and localhost signed by `issuer`, with a key of `algorithm`.
fn leaf(issuer: &Made, algorithm: &'static rcgen::SignatureAlgorithm) -> Made {
    let key = KeyPair::generate_for(algorithm).unwrap();
    make(params("farm-webhook", &["127.0.0.1", "localhost"], IsCa::NoCa), key, Some(issuer))
}

fn serving(chain: &[&Made], key: &KeyPair) -> Serving {
    Serving {
        chain_pem: chain.iter().map(|m| m.pem.as_str()).collect(),
        key_pem: key.serialize_pem(),
        tls12_only: false,
    }
}

/// Runs openssl with `args` in `dir`, as a tutorial has a user run it.
fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("running openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A self-signed certificate made the way most webhook tutorials make one:
/// `openssl req -x509`, which marks it CA:TRUE. Its certificate is its caBundle.
fn openssl_req_x509(key_spec: &str, extra: &[&str]) -> Serving {
    let dir = tempfile::tempdir().unwrap();
    let mut args =
        vec!["req", "-x509", "-newkey", key_spec, "-nodes", "-keyout", "key.pem", "-out", "cert.pem", "-days", "2"];
    args.extend_from_slice(extra);
    openssl(dir.path(), &args);
    let read = |file: &str| std::fs::read_to_string(dir.path().join(file)).unwrap();
    Serving { chain_pem: read("cert.pem"), key_pem: read("key.pem"), tls12_only: false }
}

/// An RSA key of `bits` (ring, rcgen's backend, makes none): from openssl.
fn rsa_key(bits: u32) -> KeyPair {
    let dir = tempfile::tempdir().unwrap();
    let bits = format!("rsa_keygen_bits:{bits}");
    openssl(dir.path(), &["genpkey", "-algorithm", "RSA", "-pkeyopt", &bits, "-out", "key.pem"]);
    let pem = std::fs::read_to_string(dir.path().join("key.pem")).unwrap();
    KeyPair::from_pem_and_sign_algo(&pem, &rcgen::PKCS_RSA_SHA256).unwrap()
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let mut add = |name: &'static str, host: &'static str, served: Serving, ca_bundle: String, expect: Expect| {
        cases.push(Case { name, host, server: WebhookServer::start_serving(&served, ca_bundle), expect });
    };

    // The tutorial's certificate, CA:TRUE, trusted as itself.
    let tutorial = openssl_req_x509(
        "rsa:2048",
        &["-subj", "/CN=farm-webhook", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
    );
    let bundle = tutorial.chain_pem.clone();
    add("openssl-req-x509", "127.0.0.1", tutorial, bundle, Expect::Called);

    // A self-signed leaf that says CA:FALSE, trusted as itself.
    let key = KeyPair::generate().unwrap();
    let own = make(params("farm-webhook", &["127.0.0.1"], IsCa::ExplicitNoCa), key, None);
    add("self-signed-leaf", "127.0.0.1", serving(&[&own], &own.key), own.pem.clone(), Expect::Called);

    // Leaves signed by a CA, with keys of each kind (P-256 is rcgen's default).
    let root = ca("farm-webhook-root");
    let p256 = leaf(&root, &rcgen::PKCS_ECDSA_P256_SHA256);
    add("ca-signed-p256", "127.0.0.1", serving(&[&p256], &p256.key), root.pem.clone(), Expect::Called);
    let p384 = leaf(&root, &rcgen::PKCS_ECDSA_P384_SHA384);
    add("ca-signed-p384", "127.0.0.1", serving(&[&p384], &p384.key), root.pem.clone(), Expect::Called);
    let ed25519 = leaf(&root, &rcgen::PKCS_ED25519);
    add("ca-signed-ed25519", "127.0.0.1", serving(&[&ed25519], &ed25519.key), root.pem.clone(), Expect::Called);
    let rsa = make(params("farm-webhook", &["127.0.0.1"], IsCa::NoCa), rsa_key(4096), Some(&root));
    add("ca-signed-rsa4096", "127.0.0.1", serving(&[&rsa], &rsa.key), root.pem.clone(), Expect::Called);
    // Reached by name: the DNS SAN is checked.
    add("dns-san", "localhost", serving(&[&p256], &p256.key), root.pem.clone(), Expect::Called);
    // A leaf that says CA:TRUE under a CA is still a leaf.
    let key = KeyPair::generate().unwrap();
    let ca_leaf =
        make(params("farm-webhook", &["127.0.0.1"], IsCa::Ca(BasicConstraints::Unconstrained)), key, Some(&root));
    add("ca-true-leaf", "127.0.0.1", serving(&[&ca_leaf], &ca_leaf.key), root.pem.clone(), Expect::Called);

    // An intermediate, served after the leaf; without it there is no chain.
    let intermediate = make(
        params("farm-webhook-intermediate", &[], IsCa::Ca(BasicConstraints::Unconstrained)),
        KeyPair::generate().unwrap(),
        Some(&root),
    );
    let below = leaf(&intermediate, &rcgen::PKCS_ECDSA_P256_SHA256);
    add(
        "intermediate-served",
        "127.0.0.1",
        serving(&[&below, &intermediate], &below.key),
        root.pem.clone(),
        Expect::Called,
    );
    add(
        "intermediate-missing",
        "127.0.0.1",
        serving(&[&below], &below.key),
        root.pem.clone(),
        Expect::Unverified("x509: certificate signed by unknown authority"),
    );

    // A caBundle of several certificates, the right one among them.
    let several = [ca("farm-other-a").pem, root.pem.clone(), ca("farm-other-b").pem].concat();
    add("bundle-of-several", "127.0.0.1", serving(&[&p256], &p256.key), several, Expect::Called);
    // A caBundle without the signer; and one whose CA has the signer's name but another key.
    add(
        "unknown-authority",
        "127.0.0.1",
        serving(&[&p256], &p256.key),
        ca("farm-unrelated").pem,
        Expect::Unverified("x509: certificate signed by unknown authority"),
    );
    add(
        "same-name-other-key",
        "127.0.0.1",
        serving(&[&p256], &p256.key),
        ca("farm-webhook-root").pem,
        Expect::Unverified(
            "x509: certificate signed by unknown authority (possibly because of \"x509: ECDSA verification failure\" \
             while trying to verify candidate authority certificate \"farm-webhook-root\")",
        ),
    );

    // Names: only a common name; another host's certificate, by name and by address.
    let cn_only = openssl_req_x509("ec", &["-pkeyopt", "ec_paramgen_curve:P-256", "-subj", "/CN=localhost"]);
    let bundle = cn_only.chain_pem.clone();
    add(
        "cn-only",
        "localhost",
        cn_only,
        bundle,
        Expect::Unverified("x509: certificate relies on legacy Common Name field, use SANs instead"),
    );
    let key = KeyPair::generate().unwrap();
    let elsewhere =
        make(params("farm-webhook", &["webhook.elsewhere.example", "10.9.8.7"], IsCa::NoCa), key, Some(&root));
    add(
        "other-host-by-name",
        "localhost",
        serving(&[&elsewhere], &elsewhere.key),
        root.pem.clone(),
        Expect::Unverified("x509: certificate is valid for webhook.elsewhere.example, not localhost"),
    );
    add(
        "other-host-by-address",
        "127.0.0.1",
        serving(&[&elsewhere], &elsewhere.key),
        root.pem.clone(),
        Expect::Unverified("x509: certificate is valid for 10.9.8.7, not 127.0.0.1"),
    );

    // Expired.
    let mut old = params("farm-webhook", &["127.0.0.1"], IsCa::NoCa);
    old.not_before = rcgen::date_time_ymd(2020, 1, 1);
    old.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let expired = make(old, KeyPair::generate().unwrap(), Some(&root));
    add(
        "expired",
        "127.0.0.1",
        serving(&[&expired], &expired.key),
        root.pem.clone(),
        Expect::Unverified(
            "x509: certificate has expired or is not yet valid: current time <now> is after 2021-01-01T00:00:00Z",
        ),
    );

    // For clients only.
    let mut client_only = params("farm-webhook", &["127.0.0.1"], IsCa::NoCa);
    client_only.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_only = make(client_only, KeyPair::generate().unwrap(), Some(&root));
    add(
        "client-auth-only",
        "127.0.0.1",
        serving(&[&client_only], &client_only.key),
        root.pem.clone(),
        Expect::Unverified("x509: certificate specifies an incompatible key usage"),
    );

    // A caBundle that holds no certificate.
    add(
        "bundle-of-nothing",
        "127.0.0.1",
        serving(&[&p256], &p256.key),
        "not a certificate".into(),
        Expect::Refused(
            "could not get REST client: unable to load root certificates: unable to parse bytes as PEM block",
        ),
    );

    // A server that speaks TLS 1.2 only.
    let mut tls12 = serving(&[&p256], &p256.key);
    tls12.tls12_only = true;
    add("tls12-only", "127.0.0.1", tls12, root.pem.clone(), Expect::Called);
    cases
}

/// The body with Go's "current time <t> is" replaced: the two servers call
/// at different instants.
fn without_current_time(body: &Value) -> Value {
    let mut body = body.clone();
    if let Some(message) = body["message"].as_str() {
        let mut message = message.to_string();
        if let Some(start) = message.find("current time ") {
            let from = start + "current time ".len();
            if let Some(length) = message[from..].find(" is ") {
                message.replace_range(from..from + length, "<now>");
            }
        }
        body["message"] = json!(message);
    }
    body
}

#[tokio::test]
async fn webhook_certificates_are_trusted_and_refused_as_by_kube_apiserver() {
    let cmp = comparison("adm-tls").await;
    let cases = cases();
    let name = "adm-tls";
    let hooks: Vec<Hook> = cases
        .iter()
        .map(|case| Hook::new(Box::leak(format!("{}.tls.farm.test", case.name).into_boxed_str()), "/deny"))
        .zip(&cases)
        .map(|(hook, case)| hook.selecting(json!({"tls-case": case.name})))
        .collect();
    let probe = &cases[2];
    let mut yaml: Value =
        serde_json::from_str(&configuration("ValidatingWebhookConfiguration", name, &cmp.ns, &probe.server, &hooks))
            .unwrap();
    for (i, case) in cases.iter().enumerate() {
        let client = &mut yaml["webhooks"][i]["clientConfig"];
        client["url"] = json!(format!("https://{}:{}/deny", case.host, case.server.port));
        client["caBundle"] = json!(case.server.ca_bundle());
    }
    install(&cmp, &probe.server, &yaml.to_string(), "/deny", json!({"tls-case": probe.name})).await;

    let steps: Vec<Step> = cases
        .iter()
        .map(|case| Step::post("{llamas}").json(llama(case.name, json!({"tls-case": case.name}))))
        .collect();
    let outcome = cmp.run(&steps).await;
    let mut report = String::new();
    for (case, exchange) in cases.iter().zip(&outcome.exchanges) {
        let (crd, ours) = (without_current_time(&exchange.crd.body), without_current_time(&exchange.ours.body));
        let message = ours["message"].as_str().unwrap_or_default();
        let expected = match case.expect {
            Expect::Called => exchange.ours.code == 403 && message.contains("are not welcome"),
            Expect::Unverified(why) => {
                exchange.ours.code == 500 && message.contains(&format!("tls: failed to verify certificate: {why}"))
            }
            Expect::Refused(why) => exchange.ours.code == 500 && message.contains(why),
        };
        if !expected {
            report.push_str(&format!("{}: not as expected: {} {message}\n", case.name, exchange.ours.code));
        }
        if exchange.crd.code != exchange.ours.code || crd != ours {
            report.push_str(&format!(
                "{}: differs from kube-apiserver\n  crd:  {} {}\n  ours: {} {}\n",
                case.name, exchange.crd.code, crd, exchange.ours.code, ours
            ));
        }
    }
    uninstall(cmp.cp, "validatingwebhookconfiguration", name);
    assert!(report.is_empty(), "{report}");
}
