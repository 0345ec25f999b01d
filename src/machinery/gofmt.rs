//! How Go prints values, for error messages worded exactly like kube-apiserver's
//! (`%q` quoting, `%v` floats).

use std::fmt::Write as _;
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
