//! A kind of one's own, served in one file: Greetings (`example.com/v1`),
//! stored in memory (or in etcd with `--storage etcd`), with every verb,
//! watch, server-side apply, Table output for `kubectl get`, discovery and
//! OpenAPI for `kubectl explain`, a CEL validation rule in its schema, and
//! rules of its own in Rust.
//!
//! The kind is its Rust type: kube's `CustomResource` derive describes it
//! (names, schema, printer columns), as for a CRD, and kube-rs clients use
//! the same type (`Api<Greeting>`).
//!
//! ```sh
//! cargo run -p aggregated-apiserver --example greetings -- --bind 127.0.0.1:8444
//! curl --cacert certs/ca.crt https://127.0.0.1:8444/apis/example.com/v1/greetings
//! ```
//!
//! In a cluster, register it with an APIService for `v1.example.com`, as
//! farm-apiserver's manifests do for theirs.

use std::sync::Arc;

use aggregated_apiserver::prelude::*;
use aggregated_apiserver::with_env_prefix;
use clap::{CommandFactory as _, FromArgMatches as _, Parser};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What to say, and how often.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[kube(group = "example.com", version = "v1", kind = "Greeting", namespaced, shortname = "gr")]
#[kube(printcolumn(name = "Message", type_ = "string", description = "What to say.", json_path = ".spec.message"))]
#[kube(printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"))]
// A CEL rule across two fields, as a CRD author writes one.
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.times) || self.times <= 10 || self.message.size() <= 20",
    "message": "a message longer than 20 characters may be said at most 10 times"
}]))]
pub struct GreetingSpec {
    /// What to say.
    message: String,
    /// How often to say it: once unless said otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    times: Option<i64>,
}

/// The kind: the derived description, and the rules a schema cannot say,
/// on the typed object.
fn greetings() -> aggregated_apiserver::Result<CustomResourceKind> {
    Ok(CustomResourceKind::of::<Greeting>()?
        // A default, set before validation.
        .prepare_for_create(|greeting: &mut Greeting| {
            greeting.spec.times.get_or_insert(1);
        })
        // A rule beyond the schema, reported as kube reports field errors (422).
        .validate(|greeting: &Greeting| match greeting.spec.times {
            Some(times) if times < 1 => {
                vec![FieldError::invalid("spec.times", &times.into(), "must be at least 1")]
            }
            _ => Vec::new(),
        }))
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
