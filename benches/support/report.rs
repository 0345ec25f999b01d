//! How a benchmark's `main` runs its measurements: the process-wide crypto
//! provider, a multi-thread runtime, and the markdown report the run wrote,
//! printed whatever the run returned (a failure late in a run still shows
//! everything measured before it).

use std::io::Write;

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
