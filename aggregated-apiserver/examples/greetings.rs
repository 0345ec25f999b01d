//! A kind of one's own, served in one file: Greetings, in two versions
//! (`example.com/v2`, stored and preferred, and `example.com/v1`), stored in
//! memory (or in etcd with `--storage etcd`), with every verb, watch,
//! server-side apply, Table output for `kubectl get`, discovery and OpenAPI
//! for `kubectl explain`, a CEL validation rule in its schema, and rules of
//! its own in Rust, and a subresource that streams (`greetings/{name}/say`).
//!
//! Each version is its Rust type: kube's `CustomResource` derive describes
//! it (names, schema, printer columns), as for a CRD, and kube-rs clients use
//! the same types (`Api<v2::Greeting>`). The conversions between them are
//! `From` each way: an object written in one version reads in the other.
//!
//! ```sh
//! cargo run -p aggregated-apiserver --example greetings -- --bind 127.0.0.1:8444
//! curl --cacert certs/ca.crt https://127.0.0.1:8444/apis/example.com/v1/greetings
//! ```
//!
//! In a cluster, register it with an APIService for each version
//! (`v2.example.com`, `v1.example.com`), as farm-apiserver's manifests do
//! for theirs.

use std::sync::Arc;

use aggregated_apiserver::prelude::*;
use aggregated_apiserver::{with_env_prefix, Streamed, Subresource};
use clap::{CommandFactory as _, FromArgMatches as _, Parser};
use futures::StreamExt as _;

/// `example.com/v2`, the version objects are stored in: what to say is its `text`.
pub mod v2 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// What to say, and how often.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[kube(group = "example.com", version = "v2", kind = "Greeting", namespaced, shortname = "gr")]
    #[kube(printcolumn(name = "Text", type_ = "string", description = "What to say.", json_path = ".spec.text"))]
    #[kube(printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"))]
    // A CEL rule across two fields, as a CRD author writes one.
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "!has(self.times) || self.times <= 10 || self.text.size() <= 20",
        "message": "a text longer than 20 characters may be said at most 10 times"
    }]))]
    pub struct GreetingSpec {
        /// What to say.
        pub text: String,
        /// How often to say it: once unless said otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub times: Option<i64>,
    }
}

/// `example.com/v1`, still served, and deprecated: what to say is its `message`.
pub mod v1 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// What to say, and how often.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[kube(group = "example.com", version = "v1", kind = "Greeting", namespaced, shortname = "gr", deprecated)]
    #[kube(printcolumn(name = "Message", type_ = "string", description = "What to say.", json_path = ".spec.message"))]
    #[kube(printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"))]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "!has(self.times) || self.times <= 10 || self.message.size() <= 20",
        "message": "a message longer than 20 characters may be said at most 10 times"
    }]))]
    pub struct GreetingSpec {
        /// What to say.
        pub message: String,
        /// How often to say it: once unless said otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub times: Option<i64>,
    }
}

// The conversions between the versions, written once each way; nothing is lost.
impl From<v1::Greeting> for v2::Greeting {
    fn from(old: v1::Greeting) -> Self {
        let spec = v2::GreetingSpec { text: old.spec.message, times: old.spec.times };
        v2::Greeting { metadata: old.metadata, spec }
    }
}

impl From<v2::Greeting> for v1::Greeting {
    fn from(new: v2::Greeting) -> Self {
        let spec = v1::GreetingSpec { message: new.spec.text, times: new.spec.times };
        v1::Greeting { metadata: new.metadata, spec }
    }
}

/// The kind: each version's derived description, the rules a schema cannot
/// say (on the typed object, in each version), and the conversions.
fn greetings() -> aggregated_apiserver::Result<CustomResourceKind> {
    let at_least_once = |times: Option<i64>| match times {
        Some(times) if times < 1 => vec![FieldError::invalid("spec.times", &times.into(), "must be at least 1")],
        _ => Vec::new(),
    };
    let v1 = CustomResourceKind::of::<v1::Greeting>()?
        .prepare_for_create(|greeting: &mut v1::Greeting| {
            greeting.spec.times.get_or_insert(1);
        })
        .validate(move |greeting: &v1::Greeting| at_least_once(greeting.spec.times));
    CustomResourceKind::of::<v2::Greeting>()?
        // A default, set before validation.
        .prepare_for_create(|greeting: &mut v2::Greeting| {
            greeting.spec.times.get_or_insert(1);
        })
        // A rule beyond the schema, reported as kube reports field errors (422).
        .validate(move |greeting: &v2::Greeting| at_least_once(greeting.spec.times))
        // `greetings/{name}/say`: the text, said `times` times, a line at a time.
        .with_subresource(Subresource::stream("say", |request| async move {
            let text = request.object["spec"]["text"].as_str().unwrap_or_default().to_string();
            let times = request.object["spec"]["times"].as_u64().unwrap_or(1);
            let lines = (0..times).map(move |_| Ok(format!("{text}\n").into()));
            Ok(Streamed { content_type: "text/plain".into(), body: futures::stream::iter(lines).boxed() })
        }))
        .with_version::<v2::Greeting, v1::Greeting>(v1)
}

/// The library's flags, and nothing else.
#[derive(Parser)]
#[command(name = "greetings")]
struct Cli {
    #[command(flatten)]
    server: ServerOptions,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let matches = with_env_prefix(Cli::command(), "GREETINGS").get_matches();
    let cli = Cli::from_arg_matches(&matches)?;
    cli.server.logging.init();
    let identity = Identity { name: "greetings", version: env!("CARGO_PKG_VERSION"), git_commit: "" };
    run(cli.server, identity, async |setup| {
        setup.stored(Arc::new(greetings()?))?;
        Ok(())
    })
    .await?;
    Ok(())
}
