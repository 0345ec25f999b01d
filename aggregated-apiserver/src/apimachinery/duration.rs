//! Durations as every concern's flags take them.

use std::time::Duration;

/// Seconds as an integer or a decimal ("0.5").
pub fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.trim_end_matches('s').parse().map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("{s:?} is not a number of seconds"));
    }
    Ok(Duration::from_secs_f64(secs))
}
