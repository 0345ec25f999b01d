//! The raw query of a request and the conversions kube-apiserver's parameter
//! codec applies to it (apimachinery `pkg/runtime/conversion.go`,
//! `Convert_Slice_string_To_*`): every typed option reads its parameters
//! through these, so a boolean or an integer means the same on every verb.

use std::time::Duration;

use crate::machinery::gofmt::go_quote;
use crate::machinery::status::ApiError;

/// The raw query as (name, value) pairs, in order (names may repeat: `dryRun`).
#[derive(Debug, Default, Clone)]
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(raw: Option<&str>) -> Result<Self, ApiError> {
        let raw = raw.unwrap_or("");
        serde_urlencoded::from_str::<Vec<(String, String)>>(raw)
            .map(Query)
            .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))
    }

    /// The first value of a parameter: kube's conversions of a single-valued
    /// option read `values[0]` and ignore the rest.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Every value of a parameter, in order (for list-valued options: `dryRun`).
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0.iter().filter(move |(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// A boolean option, `None` when absent. Never an error: see [`go_param_bool`].
    pub fn bool(&self, name: &str) -> Option<bool> {
        self.get(name).map(go_param_bool)
    }

    /// An int64 option, `None` when absent. A present value must parse as
    /// Go's `strconv.ParseInt(v, 10, 64)` does; an empty value is an error too
    /// (`limit=` is a 400 in kube, not "no limit").
    pub fn int(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.get(name).map(go_parse_int64).transpose().map_err(ApiError::bad_request)
    }
}

/// `Convert_Slice_string_To_bool`: only "0" and any case of "false" are false;
/// anything else, the empty string, `yes`, `T` and `TRUE` included, is true.
/// This is also how the request-info step decides whether a GET is a watch,
/// so authorization and the handler always agree on the verb.
pub fn go_param_bool(value: &str) -> bool {
    !(value == "0" || go_equal_fold(value, "false"))
}

/// Go's `strings.EqualFold` against an ASCII word: ASCII case folding plus
/// the two non-ASCII letters Unicode folds onto ASCII ones (the long s and
/// the Kelvin sign), so `falſe` is false in Go and must be here too.
fn go_equal_fold(value: &str, ascii_word: &str) -> bool {
    let fold = |c: char| match c {
        '\u{17F}' => 's',
        '\u{212A}' => 'k',
        c => c.to_ascii_lowercase(),
    };
    value.chars().map(fold).eq(ascii_word.chars().map(fold))
}

/// `strconv.ParseInt(v, 10, 64)` with Go's error text, which kube-apiserver
/// returns verbatim in a 400: `strconv.ParseInt: parsing "x": invalid syntax`
/// or `... value out of range`. Rust's `i64::from_str` accepts exactly Go's
/// base-10 syntax (optional sign, ASCII digits, no underscores).
pub fn go_parse_int64(value: &str) -> Result<i64, String> {
    value.parse::<i64>().map_err(|e| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => "value out of range",
            _ => "invalid syntax",
        };
        format!("strconv.ParseInt: parsing {}: {why}", go_quote(value))
    })
}

/// `strconv.ParseUint(v, 10, 64)` with Go's error text. Unlike Rust's
/// `u64::from_str`, Go accepts no sign at all (`+5` is invalid syntax).
pub fn go_parse_uint64(value: &str) -> Result<u64, String> {
    let parsed = if value.starts_with('+') { None } else { Some(value.parse::<u64>()) };
    match parsed {
        Some(Ok(n)) => Ok(n),
        Some(Err(e)) if *e.kind() == std::num::IntErrorKind::PosOverflow => {
            Err(format!("strconv.ParseUint: parsing {}: value out of range", go_quote(value)))
        }
        _ => Err(format!("strconv.ParseUint: parsing {}: invalid syntax", go_quote(value))),
    }
}

/// Go's `time.ParseDuration`: a signed sequence of decimal numbers, each with
/// a unit (ns, us, µs, ms, s, m, h); "0" alone needs no unit. Negative
/// durations parse (and are then ignored by the caller, as kube ignores them)
/// and come back as zero. Errors are worded as Go's.
pub fn go_parse_duration(text: &str) -> Result<Duration, String> {
    let invalid = || format!("time: invalid duration {}", go_quote(text));
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest.bytes().take_while(|b| b.is_ascii_digit() || *b == b'.').count();
        let number = &rest[..number_len];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(invalid());
        }
        let value: f64 = number.parse().map_err(|_| invalid())?;
        rest = &rest[number_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let nanos_per_unit = match unit {
            "" => return Err(format!("time: missing unit in duration {}", go_quote(text))),
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            other => return Err(format!("time: unknown unit {} in duration {}", go_quote(other), go_quote(text))),
        };
        total += value * nanos_per_unit;
        // Go's limit: durations are int64 nanoseconds.
        if total > i64::MAX as f64 {
            return Err(invalid());
        }
    }
    if negative {
        return Ok(Duration::ZERO);
    }
    Ok(Duration::from_nanos(total as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_and_fail_as_go_does() {
        assert_eq!(go_parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(go_parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(go_parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(go_parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(go_parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(go_parse_duration("-5s"), Ok(Duration::ZERO));
        assert_eq!(go_parse_duration("abc"), Err("time: invalid duration \"abc\"".to_string()));
        assert_eq!(go_parse_duration("10"), Err("time: missing unit in duration \"10\"".to_string()));
        assert_eq!(go_parse_duration("10x"), Err("time: unknown unit \"x\" in duration \"10x\"".to_string()));
        assert_eq!(go_parse_duration(""), Err("time: invalid duration \"\"".to_string()));
        assert_eq!(go_parse_duration("99999999999h"), Err("time: invalid duration \"99999999999h\"".to_string()));
    }

    #[test]
    fn booleans_follow_convert_slice_string_to_bool() {
        for v in ["true", "TRUE", "T", "t", "1", "yes", "", "on", "2", " false"] {
            assert!(go_param_bool(v), "{v:?} is true in kube");
        }
        for v in ["false", "FALSE", "False", "fAlSe", "0", "fal\u{17F}e"] {
            assert!(!go_param_bool(v), "{v:?} is false in kube");
        }
    }

    #[test]
    fn the_first_value_of_a_repeated_parameter_wins() {
        let q = Query::parse(Some("watch=false&watch=true&limit=x&limit=1")).unwrap();
        assert_eq!(q.bool("watch"), Some(false));
        assert_eq!(q.int("limit").unwrap_err().message, "strconv.ParseInt: parsing \"x\": invalid syntax");
        assert_eq!(q.bool("absent"), None);
    }

    #[test]
    fn unsigned_integers_parse_like_strconv() {
        assert_eq!(go_parse_uint64("5"), Ok(5));
        assert_eq!(go_parse_uint64("+5"), Err("strconv.ParseUint: parsing \"+5\": invalid syntax".into()));
        assert_eq!(go_parse_uint64("-1"), Err("strconv.ParseUint: parsing \"-1\": invalid syntax".into()));
        assert_eq!(
            go_parse_uint64("18446744073709551616"),
            Err("strconv.ParseUint: parsing \"18446744073709551616\": value out of range".into())
        );
    }

    #[test]
    fn integers_parse_like_strconv() {
        assert_eq!(go_parse_int64("+5"), Ok(5));
        assert_eq!(go_parse_int64("-5"), Ok(-5));
        assert_eq!(go_parse_int64(""), Err("strconv.ParseInt: parsing \"\": invalid syntax".into()));
        assert_eq!(go_parse_int64("1.5"), Err("strconv.ParseInt: parsing \"1.5\": invalid syntax".into()));
        assert_eq!(go_parse_int64("1_000"), Err("strconv.ParseInt: parsing \"1_000\": invalid syntax".into()));
        assert_eq!(
            go_parse_int64("99999999999999999999"),
            Err("strconv.ParseInt: parsing \"99999999999999999999\": value out of range".into())
        );
    }
}
