//! How a benchmark's `main` runs its measurements: the process-wide crypto
//! provider, a multi-thread runtime, and the markdown report the run wrote,
//! printed whatever the run returned (a failure late in a run still shows
//! everything measured before it).

use std::io::Write;

use anyhow::Context as _;

/// A count from the environment variable `name`, `default` when it is unset;
/// an error naming the variable when it is not a number.
#[allow(dead_code)] // not every benchmark reads counts from its environment
pub fn env_usize(name: &str, default: usize) -> anyhow::Result<usize> {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().with_context(|| format!("{name}={v:?} is not a number")),
        Err(_) => Ok(default),
    }
}

/// Runs `body` with the report buffer it writes to, prints the report, and
/// returns what `body` returned. Exits with 2 if no runtime can be built.
pub fn run_and_print<T>(name: &str, body: impl AsyncFnOnce(&mut String) -> T) -> T {
    crate::common::install_crypto();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{name}: tokio runtime: {e}");
            std::process::exit(2);
        }
    };
    let mut out = String::new();
    let result = rt.block_on(body(&mut out));
    let mut stdout = std::io::stdout();
    let _ = stdout.write_all(out.as_bytes());
    let _ = stdout.flush();
    result
}
