//! A kind of one's own, served in one file: Greetings (`example.com/v1`),
//! stored in memory (or in etcd with `--storage etcd`), with every verb,
//! watch, server-side apply, Table output for `kubectl get`, discovery and
//! OpenAPI for `kubectl explain`, and a CEL validation rule in its schema.
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
use serde_json::{json, Value};

/// The kind: what it is called, what it holds, and how it reads in a table.
struct Greeting;

static NAMES: Names = Names {
    group: "example.com",
    version: "v1",
    kind: "Greeting",
    list_kind: "GreetingList",
    plural: "greetings",
    singular: "greeting",
    short_names: &["gr"],
    categories: &[],
};

impl Kind for Greeting {
    fn names(&self) -> &'static Names {
        &NAMES
    }

    /// A structural schema, as a CRD's `openAPIV3Schema`.
    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object",
                    "required": ["message"],
                    // A CEL rule across two fields, as a CRD author writes one.
                    "x-kubernetes-validations": [{
                        "rule": "!has(self.times) || self.times <= 10 || self.message.size() <= 20",
                        "message": "a message longer than 20 characters may be said at most 10 times"
                    }],
                    "properties": {
                        "message": {"type": "string", "description": "What to say."},
                        "times": {"type": "integer", "description": "How often to say it."}
                    }
                }
            }
        })
    }

    fn columns(&self) -> &'static [Column] {
        &[Column {
            name: "Message",
            type_: "string",
            format: "",
            description: "What to say.",
            priority: 0,
            cell: |greeting| greeting["spec"]["message"].clone(),
        }]
    }

    /// A default, set before validation as a CRD's schema default would be.
    fn prepare_for_create(&self, greeting: &mut Value) {
        if let Some(spec) = greeting.get_mut("spec").and_then(Value::as_object_mut) {
            spec.entry("times").or_insert(json!(1));
        }
    }

    /// Rules beyond the schema, reported as kube reports field errors (422).
    fn validate(&self, greeting: &Value) -> Vec<FieldError> {
        match greeting["spec"]["times"].as_i64() {
            Some(times) if times < 1 => vec![FieldError::invalid("spec.times", &json!(times), "must be at least 1")],
            _ => Vec::new(),
        }
    }
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
        setup.stored(Arc::new(Greeting))?;
        Ok(())
    })
    .await?;
    Ok(())
}
