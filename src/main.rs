//! The farm-apiserver command line: `serve` (default) and `certs`.

use aggregated_apiserver::Identity;
use anyhow::Context as _;
use farm_apiserver::options::{Cli, Command, ServeArgs, SOURCE_REVISION};
use farm_apiserver::process::{allocator, resident};

const IDENTITY: Identity =
    Identity { name: "farm-apiserver", version: env!("CARGO_PKG_VERSION"), git_commit: SOURCE_REVISION };

/// The allocator chosen in `farm_apiserver::process::allocator`.
#[global_allocator]
static GLOBAL: allocator::Global = allocator::GLOBAL;

fn main() -> anyhow::Result<()> {
    // Before the runtime starts its threads (see the module).
    allocator::configure();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(run())
}

async fn run() -> anyhow::Result<()> {
    // One crypto provider for the whole process (kube and rustls both use ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse_args();
    match cli.command {
        Some(Command::Certs(args)) => {
            aggregated_apiserver::LoggingOptions::default().init();
            let paths = aggregated_apiserver::write_cert_bundle(
                &args.out,
                &IDENTITY,
                &args.service_name,
                &args.service_namespace,
            )?;
            println!(
                "wrote {} (CA), {} and {} (serving pair for {}.{}.svc) and cabundle.b64 (the APIService caBundle) in {}",
                paths.ca_cert.display(),
                paths.cert.display(),
                paths.key.display(),
                args.service_name,
                args.service_namespace,
                args.out.display()
            );
            Ok(())
        }
        Some(Command::Serve(args)) => serve(args).await,
        None => serve(cli.serve).await,
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    args.server.logging.init();
    let pod_namespaces = args.pod_namespaces;
    aggregated_apiserver::run(args.server, IDENTITY, async move |setup| {
        setup.on_first_ready(resident::startup_over);
        farm_apiserver::serve_kinds(setup, pod_namespaces).await
    })
    .await?;
    Ok(())
}
