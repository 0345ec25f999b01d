//! Side-by-side comparison with kube-apiserver: one sequence of HTTP requests
//! is replayed against two targets in the same test control plane, and the
//! answers are compared after an explicit normalization.
//!
//! - target **crd**: kube-apiserver serving the Llama CRD (`tests/common/crd.rs`)
//!   in group [`CRD_GROUP`];
//! - target **ours**: farm-apiserver's Llamas, reached through the real
//!   aggregator (`tests/common/cluster.rs`).
//!
//! Both are reached through kube-apiserver (`cp.server`) with the same admin
//! client certificate, so authentication, the aggregator proxy and the
//! response filters are the same; only the resource behind the path differs.
//!
//! # Writing a sequence
//!
//! ```ignore
//! let cmp = Comparison::new("compare-create").await;
//! cmp.run(&[
//!     Step::post("{llamas}").json(llama("dolly")).expect(201).capture("rv", "/metadata/resourceVersion"),
//!     Step::get("{llamas}/dolly").expect(200),
//!     Step::put("{llamas}/dolly").json(json!({..., "metadata": {"resourceVersion": "{$rv}"}})),
//! ])
//! .await
//! .assert_identical();
//! ```
//!
//! Path templates and every string of a JSON body (and raw bodies, as text)
//! have these placeholders substituted per target:
//! `{group}` (e.g. `crd.farm.example.com`), `{version}`, `{gv}` (`group/version`),
//! `{ns}` (the comparison's namespace), `{llamas}` (`/apis/{gv}/namespaces/{ns}/llamas`),
//! `{v1beta1}` and `{gv1beta1}` (the same in v1beta1, the preferred version),
//! and `{$name}`: a value captured on that same target by an earlier step's
//! [`Step::capture`] (resourceVersions and uids differ between targets, so a
//! step that sends one back must use its own target's value).
//!
//! # What is compared
//!
//! For each step, by default: the status code, the `Content-Type`, the
//! `Warning` headers (in order), and the JSON body after normalization. A step
//! can narrow this ([`Step::only`]); a sequence asserts with
//! [`Outcome::assert_identical`] or inspects [`Outcome::exchanges`].
//!
//! # Normalization (what is ignored, and why)
//!
//! Only what legitimately differs between two servers holding the same
//! objects is rewritten; everything else must be equal:
//!
//! - **The group name.** Every occurrence of the target's group in a string
//!   (apiVersion, `details.group`, messages, selfLink, CRD-style resource names
//!   `llamas.<group>`, Warning texts) becomes `GROUP`. The groups are the one
//!   intended difference between the targets.
//! - **resourceVersion** (`metadata.resourceVersion` of objects and lists):
//!   a non-empty value becomes `<resourceVersion>`. The two servers number
//!   their writes independently (etcd revisions shared with the whole control
//!   plane on one side, our own store on the other). An empty or absent one is
//!   kept as is: whether there is one is compared.
//! - **uid** (`metadata.uid`, `details.uid`, and any occurrence of a seen one
//!   in another string, e.g. a message): each distinct uid becomes `<uid-N>`, numbered in the
//!   order the sequence first saw it on that target. Uids are random, but
//!   "the same object" must still be the same object on both sides, and a
//!   message naming a uid must name the corresponding one.
//! - **Timestamps** (`metadata.creationTimestamp`, `metadata.deletionTimestamp`,
//!   `managedFields[].time`): a present value becomes `<time>` (wall clock).
//!   managedFields entries are sorted by operation, manager and subresource,
//!   as their order follows those times (an entry written a second later on
//!   one server sorts after a later manager there). Whether an entry has a
//!   time is still compared.
//! - **continue tokens** (`metadata.continue` of lists): a non-empty one
//!   becomes `<continue>`; each server encodes its own position. Whether a
//!   list has a continuation, and `remainingItemCount`, are compared.
//! - **generated names**: when the request's `metadata.generateName` is set,
//!   every `<generateName><5 random characters>` in the answer (the object's
//!   name, `details.name`, messages) becomes `<generateName><generated>`.
//! - **resourceVersions inside Conflict messages** ("... does not match the
//!   ResourceVersion in record (257)"): a number equal to a resourceVersion the
//!   sequence has seen on that target becomes `<resourceVersion>`. Only in
//!   Status messages of reason Conflict (but not server-side apply's, which
//!   count conflicts and name fields), where kube names the stored revision,
//!   so no other number can be taken for one.
//!
//! Beyond that, a comparison may drop named fields with
//! [`Comparison::ignoring`], giving the reason; the reasons are printed with
//! every mismatch report so a reader sees what was not compared.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;

use super::cluster::{self, ControlPlane};

/// The group the Llama CRD is installed under for comparisons.
pub const CRD_GROUP: &str = "crd.farm.example.com";
/// Our group.
pub const OUR_GROUP: &str = "farm.example.com";
pub const VERSION: &str = "v1alpha";

/// One of the two targets of a comparison.
#[derive(Debug, Clone)]
pub struct Target {
    /// `crd` or `ours`, for reports.
    pub name: &'static str,
    pub group: &'static str,
}

/// A request body.
#[derive(Debug, Clone)]
pub enum Body {
    None,
    /// Sent as JSON text after placeholder substitution in every string.
    Json(Value),
    /// Sent as is, after placeholder substitution when it is UTF-8 text
    /// (for malformed JSON, duplicate fields and the like).
    Raw(Vec<u8>),
}

/// Which parts of the answers a step compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    pub code: bool,
    pub content_type: bool,
    pub warnings: bool,
    pub body: bool,
}

impl Parts {
    pub const ALL: Parts = Parts { code: true, content_type: true, warnings: true, body: true };
    pub const CODE: Parts = Parts { code: true, content_type: false, warnings: false, body: false };
}

/// One request of a sequence.
#[derive(Debug, Clone)]
pub struct Step {
    pub method: Method,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Body,
    parts: Parts,
    /// Only these JSON pointers of the body are compared (empty: all of it).
    pointers: Vec<String>,
    /// Both targets must answer this code (a sequence that goes wrong the same
    /// way on both sides is not a pass).
    expect: Option<u16>,
    captures: Vec<(String, String)>,
}

impl Step {
    pub fn new(method: Method, path: &str) -> Step {
        Step {
            method,
            path: path.to_string(),
            headers: Vec::new(),
            body: Body::None,
            parts: Parts::ALL,
            pointers: Vec::new(),
            expect: None,
            captures: Vec::new(),
        }
    }
    pub fn get(path: &str) -> Step {
        Self::new(Method::GET, path)
    }
    pub fn post(path: &str) -> Step {
        Self::new(Method::POST, path)
    }
    pub fn put(path: &str) -> Step {
        Self::new(Method::PUT, path)
    }
    pub fn patch(path: &str) -> Step {
        Self::new(Method::PATCH, path)
    }
    pub fn delete(path: &str) -> Step {
        Self::new(Method::DELETE, path)
    }

    pub fn header(mut self, name: &str, value: &str) -> Step {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// A JSON body; `Content-Type: application/json` unless a header says otherwise.
    pub fn json(mut self, body: Value) -> Step {
        self.body = Body::Json(body);
        self
    }

    /// A JSON body sent as a patch of the given type (`application/merge-patch+json`...).
    pub fn patch_body(self, content_type: &str, body: Value) -> Step {
        self.header("Content-Type", content_type).json(body)
    }

    /// A body sent byte for byte (placeholders substituted when it is text);
    /// `Content-Type: application/json` unless a header says otherwise.
    pub fn raw(mut self, body: impl Into<Vec<u8>>) -> Step {
        self.body = Body::Raw(body.into());
        self
    }

    /// Both targets must answer `code`.
    pub fn expect(mut self, code: u16) -> Step {
        self.expect = Some(code);
        self
    }

    /// Compare only these parts.
    pub fn only(mut self, parts: Parts) -> Step {
        self.parts = parts;
        self
    }

    /// Compare only these JSON pointers of the body (e.g. `/reason`, `/details`).
    pub fn body_at(mut self, pointers: &[&str]) -> Step {
        self.pointers = pointers.iter().map(|p| p.to_string()).collect();
        self
    }

    /// Remembers the raw (not normalized) string at `pointer` of the answer
    /// as `{$name}` for later steps on the same target.
    pub fn capture(mut self, name: &str, pointer: &str) -> Step {
        self.captures.push((name.to_string(), pointer.to_string()));
        self
    }

    fn describe(&self) -> String {
        let body = match &self.body {
            Body::None => String::new(),
            Body::Json(v) => format!(" {v}"),
            Body::Raw(b) => format!(" {:?}", String::from_utf8_lossy(b)),
        };
        let headers: String = self.headers.iter().map(|(k, v)| format!(" [{k}: {v}]")).collect();
        format!("{} {}{headers}{body}", self.method, self.path)
    }
}

/// One target's answer to a step.
#[derive(Debug, Clone)]
pub struct Answer {
    pub code: u16,
    pub content_type: String,
    pub warnings: Vec<String>,
    /// The body as received (JSON, or a JSON string holding the text).
    pub raw: Value,
    /// The body normalized (see the module documentation).
    pub body: Value,
}

/// A step and both answers.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub step: Step,
    pub crd: Answer,
    pub ours: Answer,
}

impl Exchange {
    /// What differs between the two answers, within what the step compares.
    pub fn differences(&self) -> Vec<String> {
        let mut out = Vec::new();
        let p = self.step.parts;
        if let Some(code) = self.step.expect {
            for (name, a) in [("crd", &self.crd), ("ours", &self.ours)] {
                if a.code != code {
                    out.push(format!("expected {code} from both, {name} answered {}", a.code));
                }
            }
        }
        if p.code && self.crd.code != self.ours.code {
            out.push(format!("code: crd {} / ours {}", self.crd.code, self.ours.code));
        }
        if p.content_type && self.crd.content_type != self.ours.content_type {
            out.push(format!("Content-Type: crd {:?} / ours {:?}", self.crd.content_type, self.ours.content_type));
        }
        if p.warnings && self.crd.warnings != self.ours.warnings {
            out.push(format!("Warning: crd {:?} / ours {:?}", self.crd.warnings, self.ours.warnings));
        }
        if p.body {
            if self.step.pointers.is_empty() {
                json_diff("", &self.crd.body, &self.ours.body, &mut out);
            } else {
                for ptr in &self.step.pointers {
                    let (a, b) = (self.crd.body.pointer(ptr), self.ours.body.pointer(ptr));
                    match (a, b) {
                        (Some(a), Some(b)) => json_diff(ptr, a, b, &mut out),
                        (a, b) if a != b => out.push(format!("{ptr}: crd {} / ours {}", show(a), show(b))),
                        _ => {}
                    }
                }
            }
        }
        out
    }

    fn report(&self, index: usize, differences: &[String]) -> String {
        let mut s = format!("step {index}: {}\n", self.step.describe());
        for d in differences {
            let _ = writeln!(s, "  - {d}");
        }
        for (name, a) in [("crd (kube-apiserver)", &self.crd), ("ours (farm-apiserver)", &self.ours)] {
            let _ = writeln!(s, "  {name}: {} {}", a.code, a.content_type);
            for w in &a.warnings {
                let _ = writeln!(s, "    Warning: {w}");
            }
            let body = serde_json::to_string_pretty(&a.body).unwrap_or_default();
            for line in body.lines() {
                let _ = writeln!(s, "    {line}");
            }
        }
        s
    }
}

fn show(v: Option<&Value>) -> String {
    v.map_or_else(|| "(absent)".to_string(), Value::to_string)
}

/// Appends one line per JSON pointer where `a` and `b` differ.
fn json_diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))).collect();
            keys.dedup();
            for k in keys {
                let p = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
                match (x.get(k), y.get(k)) {
                    (Some(va), Some(vb)) => json_diff(&p, va, vb, out),
                    (va, vb) => out.push(format!("{p}: crd {} / ours {}", show(va), show(vb))),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                json_diff(&format!("{path}/{i}"), va, vb, out);
            }
        }
        _ if a != b => out.push(format!("{}: crd {a} / ours {b}", if path.is_empty() { "/" } else { path })),
        _ => {}
    }
}

/// The answers to a whole sequence.
pub struct Outcome {
    pub exchanges: Vec<Exchange>,
    ignored: Vec<(String, String)>,
}

impl Outcome {
    /// A readable report of every step whose answers differ (empty: none).
    pub fn mismatch_report(&self) -> String {
        let mut s = String::new();
        for (i, e) in self.exchanges.iter().enumerate() {
            let d = e.differences();
            if !d.is_empty() {
                s.push_str(&e.report(i, &d));
            }
        }
        if !s.is_empty() {
            s.push_str("the whole sequence (code crd / ours):\n");
            for (i, e) in self.exchanges.iter().enumerate() {
                let _ = writeln!(s, "  {i:>2}: {} / {}  {}", e.crd.code, e.ours.code, e.step.describe());
            }
        }
        if !s.is_empty() && !self.ignored.is_empty() {
            s.push_str("not compared in this sequence:\n");
            for (field, why) in &self.ignored {
                let _ = writeln!(s, "  {field}: {why}");
            }
        }
        s
    }

    /// Panics with the mismatch report unless every step's answers are
    /// identical after normalization.
    pub fn assert_identical(&self) {
        let report = self.mismatch_report();
        assert!(report.is_empty(), "kube-apiserver's CRD and farm-apiserver answered differently:\n{report}");
    }

    /// The exchange of step `i`.
    pub fn step(&self, i: usize) -> &Exchange {
        &self.exchanges[i]
    }
}

/// The two targets in one namespace, and what each has captured so far.
pub struct Comparison {
    pub cp: &'static ControlPlane,
    pub ns: String,
    client: reqwest::Client,
    /// JSON pointer patterns (`*` matches any one segment) dropped before
    /// comparing, with the reason.
    ignored: Vec<(String, String)>,
}

/// Per-target state of one run: captured values and the uid numbering.
#[derive(Default)]
struct TargetState {
    captured: HashMap<String, String>,
    uids: Vec<String>,
    resource_versions: Vec<String>,
}

pub const CRD: Target = Target { name: "crd", group: CRD_GROUP };
pub const OURS: Target = Target { name: "ours", group: OUR_GROUP };

/// The admin client of the control plane (client certificate of cluster-admin).
pub fn admin_client(cp: &ControlPlane) -> reqwest::Client {
    admin_client_builder(cp).build().expect("admin client")
}

/// The admin client's settings, to add to.
pub fn admin_client_builder(cp: &ControlPlane) -> reqwest::ClientBuilder {
    let file = |k: &str| {
        let path = cp.info[k].as_str().unwrap_or_else(|| panic!("{k} in {}", cp.info));
        std::fs::read(path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
    };
    let mut identity = file("adminCertFile");
    identity.push(b'\n');
    identity.extend_from_slice(&file("adminKeyFile"));
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&file("caFile")).expect("control plane CA"))
        .identity(reqwest::Identity::from_pem(&identity).expect("admin identity"))
        .timeout(Duration::from_secs(30))
}

/// Installs the CRD once per test binary and waits until kube-apiserver
/// serves it (Established comes slightly before the handler answers).
pub async fn crd_served(cp: &'static ControlPlane, client: &reqwest::Client) {
    static INSTALLED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    INSTALLED
        .get_or_init(|| async {
            super::crd::install_llama_crd(cp, CRD_GROUP).unwrap_or_else(|e| panic!("{e}"));
            wait_crd_served(cp, client).await;
        })
        .await;
}

/// Waits until `cp` serves the Llama CRD (installed).
async fn wait_crd_served(cp: &ControlPlane, client: &reqwest::Client) {
    let url = format!("{}/apis/{CRD_GROUP}/{VERSION}/llamas", cp.server);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let code = client.get(&url).send().await.map(|r| r.status().as_u16()).unwrap_or(0);
        if code == 200 {
            return;
        }
        assert!(Instant::now() < deadline, "the Llama CRD is not served: GET {url} answers {code}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl Comparison {
    /// Both targets ready, in a namespace of this name (created if missing).
    /// A comparison on a control plane of the test's own, where
    /// farm-apiserver is registered (e.g. one that authenticates and
    /// authorizes its requests); the Llama CRD is installed there.
    /// ([`crd_served`] is the shared control plane's: it installs once a
    /// process.)
    pub async fn on(cp: &'static ControlPlane, ns: &str) -> Comparison {
        let client = admin_client(cp);
        super::crd::install_llama_crd(cp, CRD_GROUP).unwrap_or_else(|e| panic!("{e}"));
        wait_crd_served(cp, &client).await;
        let ns = cluster::namespace(cp, ns);
        Comparison { cp, ns, client, ignored: Vec::new() }
    }

    pub async fn new(ns: &str) -> Comparison {
        let reg = cluster::shared().await;
        let cp = reg.cp;
        let client = admin_client(cp);
        crd_served(cp, &client).await;
        let ns = cluster::namespace(cp, ns);
        Comparison { cp, ns, client, ignored: Vec::new() }
    }

    /// Drops the fields matching `pattern` (a JSON pointer; `*` matches any
    /// one segment) from both bodies before comparing; `why` is printed with
    /// every mismatch report.
    pub fn ignoring(mut self, pattern: &str, why: &str) -> Comparison {
        self.ignored.push((pattern.to_string(), why.to_string()));
        self
    }

    /// Runs `steps` in order, each on the CRD first and then on ours.
    pub async fn run(&self, steps: &[Step]) -> Outcome {
        let mut crd_state = TargetState::default();
        let mut our_state = TargetState::default();
        let mut exchanges = Vec::new();
        for step in steps {
            let crd = self.send(&CRD, step, &mut crd_state).await;
            let ours = self.send(&OURS, step, &mut our_state).await;
            exchanges.push(Exchange { step: step.clone(), crd, ours });
        }
        Outcome { exchanges, ignored: self.ignored.clone() }
    }

    /// Runs one step on one target (for setup that needs no comparison).
    pub async fn send_one(&self, target: &Target, step: &Step) -> Answer {
        self.send(target, step, &mut TargetState::default()).await
    }

    fn substitute(&self, target: &Target, state: &TargetState, text: &str) -> String {
        let gv = format!("{}/{VERSION}", target.group);
        let mut s = text
            .replace("{llamas}", &format!("/apis/{gv}/namespaces/{}/llamas", self.ns))
            .replace("{v1beta1}", &format!("/apis/{}/v1beta1/namespaces/{}/llamas", target.group, self.ns))
            .replace("{gv1beta1}", &format!("{}/v1beta1", target.group))
            .replace("{gv}", &gv)
            .replace("{group}", target.group)
            .replace("{version}", VERSION)
            .replace("{ns}", &self.ns);
        for (name, value) in &state.captured {
            s = s.replace(&format!("{{${name}}}"), value);
        }
        s
    }

    fn substitute_json(&self, target: &Target, state: &TargetState, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.substitute(target, state, s)),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.substitute_json(target, state, x)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, x)| (self.substitute(target, state, k), self.substitute_json(target, state, x)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    async fn send(&self, target: &Target, step: &Step, state: &mut TargetState) -> Answer {
        let url = format!("{}{}", self.cp.server, self.substitute(target, state, &step.path));
        let mut req = self.client.request(step.method.clone(), &url);
        let has_content_type = step.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
        for (k, v) in &step.headers {
            req = req.header(k, self.substitute(target, state, v));
        }
        let body = match &step.body {
            Body::None => None,
            Body::Json(v) => Some(self.substitute_json(target, state, v).to_string().into_bytes()),
            Body::Raw(b) => Some(match std::str::from_utf8(b) {
                Ok(text) => self.substitute(target, state, text).into_bytes(),
                Err(_) => b.clone(),
            }),
        };
        if let Some(body) = body {
            if !has_content_type {
                req = req.header("Content-Type", "application/json");
            }
            req = req.body(body);
        }
        let resp = req.send().await.unwrap_or_else(|e| panic!("{} {url} on {}: {e}", step.method, target.name));
        let code = resp.status().as_u16();
        let header = |name: &str| -> Vec<String> {
            resp.headers().get_all(name).iter().map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()).collect()
        };
        let content_type = header("content-type").join(", ");
        let warnings = header("warning").iter().map(|w| w.replace(target.group, "GROUP")).collect();
        let bytes = resp.bytes().await.unwrap_or_else(|e| panic!("body of {url} on {}: {e}", target.name));
        let raw: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        for (name, pointer) in &step.captures {
            let value = raw.pointer(pointer).and_then(Value::as_str).unwrap_or_else(|| {
                panic!(
                    "capture {name}: no string at {pointer} in the answer of {} to {}: {raw}",
                    target.name,
                    step.describe()
                )
            });
            state.captured.insert(name.clone(), value.to_string());
        }
        let mut body = raw.clone();
        normalize(&mut body, target, state);
        if let Some(prefix) = match &step.body {
            Body::Json(v) => v.pointer("/metadata/generateName").and_then(Value::as_str),
            _ => None,
        } {
            if !prefix.is_empty() {
                replace_generated_names(&mut body, prefix);
            }
        }
        for (pattern, _) in &self.ignored {
            remove_matching(&mut body, &pattern.split('/').skip(1).collect::<Vec<_>>());
        }
        Answer { code, content_type, warnings, raw, body }
    }
}

/// Applies the documented normalization to a body received from `target`.
fn normalize(v: &mut Value, target: &Target, state: &mut TargetState) {
    // Uids first, so occurrences in messages are numbered the same way.
    collect_uids(v, state);
    rewrite(v, target, state);
}

/// Collects the uids servers assign: `metadata.uid` of objects and
/// `details.uid` of Statuses (not, say, an ownerReference's, which the test wrote).
fn collect_uids(v: &Value, state: &mut TargetState) {
    match v {
        Value::Object(o) => {
            for holder in ["metadata", "details"] {
                if let Some(u) = o.get(holder).and_then(|m| m.get("uid")).and_then(Value::as_str) {
                    if !u.is_empty() && !state.uids.iter().any(|seen| seen == u) {
                        state.uids.push(u.to_string());
                    }
                }
            }
            if let Some(rv) = o.get("metadata").and_then(|m| m.get("resourceVersion")).and_then(Value::as_str) {
                if !rv.is_empty() && !state.resource_versions.iter().any(|seen| seen == rv) {
                    state.resource_versions.push(rv.to_string());
                }
            }
            for x in o.values() {
                collect_uids(x, state);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_uids(x, state)),
        _ => {}
    }
}

fn rewrite(v: &mut Value, target: &Target, state: &TargetState) {
    rewrite_fields(v, target, state);
    // After uids are replaced, so no digits inside a uid are taken for a revision.
    if v.get("kind").and_then(Value::as_str) == Some("Status")
        && v.get("reason").and_then(Value::as_str) == Some("Conflict")
    {
        if let Some(Value::String(message)) = v.get_mut("message") {
            // Apply conflicts name fields and counts, never a revision.
            if !message.starts_with("Apply failed with") {
                *message = replace_numbers(message, &state.resource_versions, "<resourceVersion>");
            }
        }
    }
}

fn rewrite_fields(v: &mut Value, target: &Target, state: &TargetState) {
    match v {
        Value::String(s) => {
            let mut t = s.replace(target.group, "GROUP");
            for (i, uid) in state.uids.iter().enumerate() {
                t = t.replace(uid.as_str(), &format!("<uid-{}>", i + 1));
            }
            *s = t;
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rewrite_fields(x, target, state)),
        Value::Object(o) => {
            if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                for (field, placeholder) in [
                    ("resourceVersion", "<resourceVersion>"),
                    ("continue", "<continue>"),
                    ("creationTimestamp", "<time>"),
                    ("deletionTimestamp", "<time>"),
                ] {
                    if let Some(x) = meta.get_mut(field) {
                        if x.as_str().is_some_and(|s| !s.is_empty()) {
                            *x = Value::String(placeholder.into());
                        }
                    }
                }
                if let Some(entries) = meta.get_mut("managedFields").and_then(Value::as_array_mut) {
                    for entry in entries.iter_mut() {
                        if let Some(t) = entry.get_mut("time") {
                            *t = Value::String("<time>".into());
                        }
                    }
                    // Entries are ordered by their times (seconds), which two
                    // servers need not share: compare them in a fixed order.
                    let key = |e: &Value| {
                        ["operation", "manager", "subresource"]
                            .map(|k| e.get(k).and_then(Value::as_str).unwrap_or("").to_string())
                    };
                    entries.sort_by_key(key);
                }
            }
            for x in o.values_mut() {
                rewrite_fields(x, target, state);
            }
        }
        _ => {}
    }
}

/// Replaces every whole number in `text` that is one of `numbers`.
fn replace_numbers(text: &str, numbers: &[String], placeholder: &str) -> String {
    // Tokens are runs of letters, digits and '-' (so a uid's digits are not
    // a number); only a token made of digits alone can be a revision.
    let mut out = String::with_capacity(text.len());
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        let is_number = !token.is_empty() && token.chars().all(|c| c.is_ascii_digit());
        if is_number && numbers.iter().any(|n| n == token) {
            out.push_str(placeholder);
        } else {
            out.push_str(token);
        }
        token.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '-' {
            token.push(c);
        } else {
            flush(&mut token, &mut out);
            out.push(c);
        }
    }
    flush(&mut token, &mut out);
    out
}

/// kube-apiserver's generateName suffix alphabet (5 characters are appended).
const GENERATED_ALPHABET: &str = "bcdfghjklmnpqrstvwxz2456789";

/// Rewrites `<prefix><5 generated characters>` to `<prefix><generated>` in every string.
fn replace_generated_names(v: &mut Value, prefix: &str) {
    match v {
        Value::String(s) => {
            let mut out = String::new();
            let mut rest = s.as_str();
            while let Some(at) = rest.find(prefix) {
                let after = &rest[at + prefix.len()..];
                let suffix: String = after.chars().take(5).collect();
                out.push_str(&rest[..at + prefix.len()]);
                if suffix.len() == 5 && suffix.chars().all(|c| GENERATED_ALPHABET.contains(c)) {
                    out.push_str("<generated>");
                    rest = &after[5..];
                } else {
                    rest = after;
                }
            }
            out.push_str(rest);
            *s = out;
        }
        Value::Array(a) => a.iter_mut().for_each(|x| replace_generated_names(x, prefix)),
        Value::Object(o) => o.values_mut().for_each(|x| replace_generated_names(x, prefix)),
        _ => {}
    }
}

/// Removes what `pattern` (pointer segments, `*` for any) designates.
fn remove_matching(v: &mut Value, pattern: &[&str]) {
    let Some((first, rest)) = pattern.split_first() else { return };
    match v {
        Value::Object(o) => {
            if rest.is_empty() {
                if *first == "*" {
                    o.clear();
                } else {
                    o.remove(*first);
                }
            } else if *first == "*" {
                o.values_mut().for_each(|x| remove_matching(x, rest));
            } else if let Some(x) = o.get_mut(*first) {
                remove_matching(x, rest);
            }
        }
        // An array's element is blanked, not removed, so the elements after it keep their indices.
        Value::Array(a) if rest.is_empty() => {
            if *first == "*" {
                a.iter_mut().for_each(|x| *x = Value::Null);
            } else if let Some(x) = first.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                *x = Value::Null;
            }
        }
        Value::Array(a) => {
            if *first == "*" {
                a.iter_mut().for_each(|x| remove_matching(x, rest));
            } else if let Some(x) = first.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                remove_matching(x, rest);
            }
        }
        _ => {}
    }
}

/// A Llama body whose apiVersion is the target's (`{gv}`).
pub fn llama(name: &str) -> Value {
    serde_json::json!({
        "apiVersion": "{gv}", "kind": "Llama",
        "metadata": {"name": name},
        "spec": {"weight": 31.5, "height": 1.75}
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn normalization_rewrites_only_what_differs_by_nature() {
        // Imported here: a bench harness compiles this module without its tests.
        use super::*;
        let mut state = TargetState::default();
        let mut v = serde_json::json!({
            "apiVersion": "crd.farm.example.com/v1alpha",
            "metadata": {"name": "a-x7k2p", "generateName": "a-", "uid": "1234-abcd", "resourceVersion": "77",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "managedFields": [{"manager": "m", "time": "2026-01-01T00:00:00Z"}]},
            "message": "Precondition failed: UID in precondition: 1234-abcd",
        });

        normalize(&mut v, &CRD, &mut state);
        replace_generated_names(&mut v, "a-");
        assert_eq!(
            v,
            serde_json::json!({
                "apiVersion": "GROUP/v1alpha",
                "metadata": {"name": "a-<generated>", "generateName": "a-", "uid": "<uid-1>",
                             "resourceVersion": "<resourceVersion>", "creationTimestamp": "<time>",
                             "managedFields": [{"manager": "m", "time": "<time>"}]},
                "message": "Precondition failed: UID in precondition: <uid-1>",
            })
        );
        let mut conflict = serde_json::json!({"kind": "Status", "reason": "Conflict",
            "message": "the ResourceVersion in the precondition (7) does not match the ResourceVersion in record (77)"});
        normalize(&mut conflict, &CRD, &mut state);
        assert_eq!(
            conflict["message"],
            "the ResourceVersion in the precondition (7) does not match the ResourceVersion in record (<resourceVersion>)"
        );
    }
}
