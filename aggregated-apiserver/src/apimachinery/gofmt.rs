//! How Go prints and parses values, for answers worded exactly like
//! kube-apiserver's: the one home of every Go renderer in this crate.
//!
//! Mirrors the Go standard library pieces kube's messages go through:
//! `strconv` (`Quote`, `FormatFloat`, `ParseInt`, `ParseUint`), `fmt` (`%q`,
//! `%v`, `%#v` of a `[]string`, `%v` of a struct), `encoding/json` (`Marshal`
//! of strings and string slices), `time` (`Time.String`, `ParseDuration`,
//! RFC 3339 parsing) and `strings.EqualFold`.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::Value;
/// Approximates Go's `unicode.IsPrint` (letters, marks, numbers, punctuation,
/// symbols and the ASCII space). Without Unicode category tables this treats
/// every assigned-looking code point as printable except controls, non-ASCII
/// spaces, format characters, private use and noncharacters.
pub fn is_go_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    let u = c as u32;
    let non_printable = matches!(
        u,
        0x00AD
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x0890..=0x0891
            | 0x08E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xE000..=0xF8FF
            | 0xFDD0..=0xFDEF
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
            | 0xF0000..
    );
    // Noncharacters U+xFFFE / U+xFFFF in every plane.
    !non_printable && (u & 0xFFFE) != 0xFFFE
}

/// Quotes a string like Go's `strconv.Quote` / `%q`.
pub fn go_quote(s: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hex = |n: u32| char::from(HEX.get((n & 0xF) as usize).copied().unwrap_or(b'0'));
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if is_go_printable(c) => out.push(c),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c => {
                let u = c as u32;
                if u < 0x20 || u == 0x7F {
                    out.push_str("\\x");
                    out.push(hex(u >> 4));
                    out.push(hex(u));
                } else if u < 0x10000 {
                    out.push_str("\\u");
                    for shift in [12, 8, 4, 0] {
                        out.push(hex(u >> shift));
                    }
                } else {
                    out.push_str("\\U");
                    for shift in [28, 24, 20, 16, 12, 8, 4, 0] {
                        out.push(hex(u >> shift));
                    }
                }
            }
        }
    }
    out.push('"');
    out
}

/// Go's `%v` for a float64: `strconv.FormatFloat(f, 'g', -1, 64)`, the
/// shortest digits that round-trip, in exponent form when the exponent is
/// below -4 or at least 6 (`0.5`, `1e-05`, `123456`, `1e+06`, `1.5e+21`).
pub fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if digits.is_empty() {
        return sci;
    }
    let mut out = String::new();
    if f < 0.0 {
        out.push('-');
    }
    if !(-4..6).contains(&exp) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    } else if exp >= 0 {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', int_len - digits.len()));
        } else {
            out.push_str(&digits[..int_len]);
            out.push('.');
            out.push_str(&digits[int_len..]);
        }
    } else {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
        out.push_str(&digits);
    }
    out
}

/// Go's `quoteChar` in `encoding/json`'s scanner: how a syntax error shows the
/// offending byte (`'}'`, `'\x00'`, `'\''`).
pub fn go_quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".into(),
        b'"' => "'\"'".into(),
        c => {
            // Go converts the byte to the rune U+00XX and quotes it.
            let q = go_quote(&char::from(c).to_string());
            format!("'{}'", &q[1..q.len() - 1])
        }
    }
}

/// Renders a JSON value the way Go's `field.Error` prints values: strings
/// quoted, numbers and booleans bare, objects and arrays as JSON.
pub fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// A JSON value the way Go's `field.Error` shows a decoded value: strings
/// quoted (`%q`), numbers with `%v` (an integer as is, a float as
/// [`go_float`]), null as `null`, objects and arrays as JSON.
pub fn go_display(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => go_float(n.as_f64().unwrap_or(0.0)),
        },
        other => go_value(other),
    }
}

/// Go's `fmt.Sprintf("%#v", []string{...})`.
pub fn go_string_slice(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| go_quote(s)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// Go's `%v` of a struct whose fields are all strings: the values in field
/// order, separated by one space, in braces (an empty field still takes its
/// place: `{User  alice}` for `User`, ``, `alice`).
pub fn go_struct(fields: &[&str]) -> String {
    format!("{{{}}}", fields.join(" "))
}

/// Encodes a string like Go's `encoding/json` (HTML-safe escaping included).
fn go_json_string(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hex = |n: u32| char::from(HEX.get((n & 0xF) as usize).copied().unwrap_or(b'0'));
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}') => {
                let u = c as u32;
                out.push_str("\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(hex(u >> shift));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Go's `json.Marshal` of a `[]string`, as `field.Error` renders such a bad
/// value (an empty slice is rendered as the nil slice `null`, which is what
/// reaches it in practice).
pub fn go_json_string_list(values: &[String]) -> String {
    if values.is_empty() {
        return "null".to_string();
    }
    let mut out = String::from("[");
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        go_json_string(v, &mut out);
    }
    out.push(']');
    out
}

/// `time.Parse(time.RFC3339, s)`, the way `metav1.Time` reads a timestamp.
pub fn parse_rfc3339(s: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&chrono::Utc))
}

/// Go's `time.Time.String()` for a `metav1.Time` JSON value (kube runs with
/// UTC as local time); `None` is Go's zero time. A value that is not an RFC
/// 3339 string is shown as [`go_display`] shows it.
pub fn go_time_string(v: Option<&Value>) -> String {
    let Some(v) = v else { return "0001-01-01 00:00:00 +0000 UTC".into() };
    match v.as_str().and_then(parse_rfc3339) {
        Some(t) => {
            let mut s = t.format("%Y-%m-%d %H:%M:%S").to_string();
            let nanos = t.timestamp_subsec_nanos();
            if nanos != 0 {
                let frac = format!("{nanos:09}");
                s.push('.');
                s.push_str(frac.trim_end_matches('0'));
            }
            s.push_str(" +0000 UTC");
            s
        }
        None => go_display(v),
    }
}

/// Go's `strings.EqualFold` against an ASCII word: ASCII case folding plus
/// the two non-ASCII letters Unicode folds onto ASCII ones (the long s and
/// the Kelvin sign), so `falſe` is false in Go and must be here too.
pub fn go_equal_fold(value: &str, ascii_word: &str) -> bool {
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
    fn go_float_matches_fmt_v() {
        let cases = [
            (0.0, "0"),
            (0.5, "0.5"),
            (-2.5, "-2.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (123456.0, "123456"),
            (1e6, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (1e21, "1e+21"),
            (1.5e300, "1.5e+300"),
            (0.1 + 0.2, "0.30000000000000004"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
        ];
        for (f, want) in cases {
            assert_eq!(go_float(f), want, "{f}");
        }
    }

    #[test]
    fn go_quote_matches_strconv_quote() {
        assert_eq!(go_quote(""), "\"\"");
        assert_eq!(go_quote("abc"), "\"abc\"");
        assert_eq!(go_quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(go_quote("\n\t\r\u{7}\u{8}\u{c}\u{b}"), "\"\\n\\t\\r\\a\\b\\f\\v\"");
        assert_eq!(go_quote("\u{0}\u{1f}\u{7f}"), "\"\\x00\\x1f\\x7f\"");
        assert_eq!(go_quote("\u{1}\u{7f}\n"), r#""\x01\x7f\n""#);
        assert_eq!(go_quote("\u{85}\u{a0}\u{200b}\u{feff}"), "\"\\u0085\\u00a0\\u200b\\ufeff\"");
        assert_eq!(go_quote("ünï 日本 🦙"), "\"ünï 日本 🦙\"");
        assert_eq!(go_quote("llamá 🦙"), "\"llamá 🦙\"");
        assert_eq!(go_quote("\u{10ffff}"), "\"\\U0010ffff\"");
        assert_eq!(go_quote("\u{f0000}"), r#""\U000f0000""#);
        assert_eq!(go_quote("\u{e000}"), "\"\\ue000\"");
    }

    #[test]
    fn go_string_slice_matches_sharp_v() {
        assert_eq!(go_string_slice(&["a", "b\""]), r#"[]string{"a", "b\""}"#);
    }

    #[test]
    fn go_struct_matches_v_of_a_struct() {
        assert_eq!(go_struct(&["User", "", "alice"]), "{User  alice}");
        assert_eq!(
            go_struct(&["UserExtra", "", "v", "", "authentication.k8s.io/v1", "", "k"]),
            "{UserExtra  v  authentication.k8s.io/v1  k}"
        );
        assert_eq!(go_struct(&[]), "{}");
    }

    #[test]
    fn go_json_list_format() {
        assert_eq!(go_json_string_list(&[]), "null");
        assert_eq!(go_json_string_list(&["a".into(), "b".into()]), "[\"a\",\"b\"]");
        assert_eq!(
            go_json_string_list(&["<&>\"\\\n\u{1}\u{2028}ü".into()]),
            "[\"\\u003c\\u0026\\u003e\\\"\\\\\\n\\u0001\\u2028ü\"]"
        );
    }

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
