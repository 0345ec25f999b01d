//! The farm-apiserver command line: `serve` (default) and `certs`.

use aggregated_apiserver::options::{Cli, Command, LogFormat};
use anyhow::Context as _;
use clap::Parser;
use tracing_subscriber::EnvFilter;

fn init_logging(format: LogFormat, filter: &str) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour only for a person at a terminal: escape codes in a log file or
    // a container log are noise to every reader after.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}

fn main() -> anyhow::Result<()> {
    // Before the runtime starts its threads (see the module).
    aggregated_apiserver::server::allocator::configure();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(run())
}

async fn run() -> anyhow::Result<()> {
    // One crypto provider for the whole process (kube and rustls both use ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Certs(args)) => {
            init_logging(LogFormat::Text, "info");
            let paths = aggregated_apiserver::server::tls::write_cert_bundle(
                &args.out,
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
        Some(Command::Serve(args)) => {
            init_logging(args.log_format, &args.log);
            aggregated_apiserver::server::run(args, farm_apiserver::serve_kinds).await
        }
        None => {
            init_logging(cli.serve.log_format, &cli.serve.log);
            aggregated_apiserver::server::run(cli.serve, farm_apiserver::serve_kinds).await
        }
    }
}
