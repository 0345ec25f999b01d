//! Field selectors with the semantics and error texts of k8s.io/apimachinery
//! `pkg/fields` (`fields.ParseSelector`, `EscapeValue`, `UnescapeValue`,
//! `Selector.Matches`, `Selector.String`). Which fields a kind lets clients
//! select on is the kind's business ([`crate::registry::kind`]); this module only
//! parses and matches. Like the label parser, it never panics on any input.

use std::fmt;

/// One term of a field selector: `field=value` or `field!=value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    field: String,
    value: String,
    not_equals: bool,
}

impl FieldTerm {
    #[cfg(test)]
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The unescaped value.
    #[cfg(test)]
    pub fn value(&self) -> &str {
        &self.value
    }

    /// True for `!=`, false for `=` / `==`.
    #[cfg(test)]
    pub fn is_not_equals(&self) -> bool {
        self.not_equals
    }

    fn matches(&self, actual: &str) -> bool {
        (actual == self.value) != self.not_equals
    }
}

impl fmt::Display for FieldTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = if self.not_equals { "!=" } else { "=" };
        write!(f, "{}{}{}", self.field, op, escape_field_value(&self.value))
    }
}

/// A parsed field selector: the AND of its terms (in the sorted order of
/// their source text, like apimachinery). The default selects everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

/// `fields.EscapeValue`: backslash-escapes `\`, `,` and `=`.
pub fn escape_field_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `fields.UnescapeValue`: resolves `\\`, `\,` and `\=`; any other escape,
/// a trailing backslash or an unescaped `,`/`=` is an error (the unescaped
/// character is reported by its code point, as Go's `%v` of a rune does).
pub fn unescape_field_value(s: &str) -> Result<String, String> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                _ => return Err(format!("invalid field selector: invalid escape sequence: \\{c}")),
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => return Err(format!("invalid field selector: unescaped character in value: {}", c as u32)),
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".to_string());
    }
    Ok(out)
}

/// Splits on commas not preceded by an escaping backslash (escapes kept).
fn split_field_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(s.get(start..i).unwrap_or(""));
            start = i + 1;
        }
    }
    terms.push(s.get(start..).unwrap_or(""));
    terms
}

/// Splits a term at the first position where `!=`, `==` or `=` starts
/// (checked in that order): (lhs, is_not_equals, raw rhs).
fn split_field_term(term: &str) -> Option<(&str, bool, &str)> {
    for (i, _) in term.char_indices() {
        let rest = term.get(i..)?;
        for (op, not_equals) in [("!=", true), ("==", false), ("=", false)] {
            if let Some(rhs) = rest.strip_prefix(op) {
                return Some((term.get(..i)?, not_equals, rhs));
            }
        }
    }
    None
}

impl FieldSelector {
    /// `fields.ParseSelector`: `a=b,c==d,e!=f` with `\,` `\=` `\\` escapes
    /// in values. Fields are taken literally (no trimming, no escapes).
    /// Terms whose field and value are both empty (`=`, `!=`) are dropped,
    /// as apimachinery's identity transform does.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = split_field_terms(s);
        parts.sort_unstable();
        let mut terms = Vec::with_capacity(parts.len());
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((lhs, not_equals, rhs)) = split_field_term(part) else {
                return Err(format!("invalid selector: '{s}'; can't understand '{part}'"));
            };
            let value = unescape_field_value(rhs)?;
            if lhs.is_empty() && value.is_empty() {
                continue;
            }
            terms.push(FieldTerm { field: lhs.to_string(), value, not_equals });
        }
        Ok(FieldSelector { terms })
    }

    /// `Selector.Matches`; `get` returns an object's value for a field path.
    /// A missing field (`None`) compares as the empty string, like a lookup
    /// of an absent key in Go's `fields.Set`.
    pub fn matches<'v>(&self, get: impl Fn(&str) -> Option<&'v str>) -> bool {
        self.terms.iter().all(|t| t.matches(get(&t.field).unwrap_or("")))
    }

    /// `Selector.Empty`.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    #[cfg(test)]
    pub fn terms(&self) -> &[FieldTerm] {
        &self.terms
    }

    /// The distinct field paths the selector mentions, in term order.
    pub fn fields(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::with_capacity(self.terms.len());
        for t in &self.terms {
            if !out.contains(&t.field.as_str()) {
                out.push(&t.field);
            }
        }
        out
    }
}

impl fmt::Display for FieldSelector {
    /// `Selector.String()`: terms joined by ',' with escaped values.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{t}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn fparse_ok(s: &str) -> FieldSelector {
        match FieldSelector::parse(s) {
            Ok(sel) => sel,
            Err(e) => panic!("{s:?} should parse, got {e}"),
        }
    }

    /// The value of the first `field=value` term on `field` (what Go's
    /// `RequiresExactMatch` reports), to check what the parser kept.
    fn required_value<'a>(sel: &'a FieldSelector, field: &str) -> Option<&'a str> {
        sel.terms().iter().find(|t| !t.is_not_equals() && t.field() == field).map(FieldTerm::value)
    }

    fn fparse_err(s: &str) -> String {
        match FieldSelector::parse(s) {
            Ok(sel) => panic!("{s:?} should fail, got {sel:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn field_parse_basic() {
        let sel = fparse_ok("metadata.name=foo,spec.x==bar,status.phase!=Running");
        assert_eq!(sel.fields(), ["metadata.name", "spec.x", "status.phase"]);
        assert_eq!(sel.to_string(), "metadata.name=foo,spec.x=bar,status.phase!=Running");
        assert_eq!(required_value(&sel, "metadata.name"), Some("foo"));
        assert_eq!(required_value(&sel, "spec.x"), Some("bar"));
        assert_eq!(required_value(&sel, "status.phase"), None);
        assert_eq!(required_value(&sel, "nope"), None);
        assert!(!sel.is_empty());
        assert!(sel.terms()[2].is_not_equals());

        assert!(fparse_ok("").is_empty());
        assert!(fparse_ok(",").is_empty());
        assert!(fparse_ok(",,,").is_empty());
        assert!(fparse_ok("=").is_empty());
        assert!(fparse_ok("==").is_empty());
        assert!(fparse_ok("!=").is_empty());
        assert!(fparse_ok("=,!=,").is_empty());
        assert_eq!(fparse_ok("=x").fields(), [""]);
        assert_eq!(required_value(&fparse_ok("x="), "x"), Some(""));

        // Terms are sorted by their source text.
        assert_eq!(fparse_ok("b=1,a=2").to_string(), "a=2,b=1");
        // Whitespace is not trimmed.
        assert_eq!(fparse_ok(" a = b ").fields(), [" a "]);
        assert_eq!(required_value(&fparse_ok(" a = b "), " a "), Some(" b "));
        // Duplicate fields listed once.
        assert_eq!(fparse_ok("a=1,a!=2,b=3").fields(), ["a", "b"]);
        // The first = term wins for required_value.
        assert_eq!(required_value(&fparse_ok("a!=1,a=2,a=3"), "a"), Some("2"));
        // Operator precedence at the first operator position.
        let t = fparse_ok("a!b=c");
        assert_eq!((t.terms()[0].field(), t.terms()[0].value()), ("a!b", "c"));
        let t = fparse_ok("a=!b");
        assert_eq!((t.terms()[0].field(), t.terms()[0].value(), t.terms()[0].is_not_equals()), ("a", "!b", false));
        let t = fparse_ok("a==!b");
        assert_eq!((t.terms()[0].field(), t.terms()[0].value()), ("a", "!b"));
        // Unicode is fine anywhere.
        let t = fparse_ok("métadata.näme=日本🦙");
        assert_eq!(required_value(&t, "métadata.näme"), Some("日本🦙"));
    }

    #[test]
    fn field_parse_escapes() {
        let t = fparse_ok(r"a=b\,c");
        assert_eq!(required_value(&t, "a"), Some("b,c"));
        assert_eq!(t.to_string(), r"a=b\,c");
        let t = fparse_ok(r"a=b\=c\\d");
        assert_eq!(required_value(&t, "a"), Some(r"b=c\d"));
        assert_eq!(t.to_string(), r"a=b\=c\\d");
        let t = fparse_ok(r"a=x\\,b=y");
        assert_eq!(required_value(&t, "a"), Some(r"x\"));
        assert_eq!(required_value(&t, "b"), Some("y"));
        let t = fparse_ok(r"a!=\,\=\\");
        assert_eq!(t.terms()[0].value(), r",=\");
        // Field names are not unescaped; the first '=' splits even if escaped.
        let t = fparse_ok(r"a\,b=c");
        assert_eq!(t.fields(), [r"a\,b"]);
        let t = fparse_ok(r"a\=b");
        assert_eq!((t.terms()[0].field(), t.terms()[0].value()), (r"a\", "b"));
        assert_eq!(escape_field_value(r"a\b,c=d!e"), r"a\\b\,c\=d!e");
        assert_eq!(unescape_field_value("plain"), Ok("plain".to_string()));
    }

    #[test]
    fn field_parse_errors() {
        assert_eq!(fparse_err("a"), "invalid selector: 'a'; can't understand 'a'");
        assert_eq!(fparse_err("x=1,a"), "invalid selector: 'x=1,a'; can't understand 'a'");
        assert_eq!(fparse_err("b,a"), "invalid selector: 'b,a'; can't understand 'a'");
        assert_eq!(fparse_err("a!b"), "invalid selector: 'a!b'; can't understand 'a!b'");
        assert_eq!(fparse_err(" "), "invalid selector: ' '; can't understand ' '");
        assert_eq!(fparse_err("a=b=c"), "invalid field selector: unescaped character in value: 61");
        assert_eq!(fparse_err("a==b=c"), "invalid field selector: unescaped character in value: 61");
        assert_eq!(fparse_err("a=!=b"), "invalid field selector: unescaped character in value: 61");
        assert_eq!(fparse_err("a!==b"), "invalid field selector: unescaped character in value: 61");
        assert_eq!(fparse_err("a==="), "invalid field selector: unescaped character in value: 61");
        assert_eq!(fparse_err(r"a=b\"), r"invalid field selector: invalid escape sequence: \");
        assert_eq!(fparse_err(r"a=\n"), r"invalid field selector: invalid escape sequence: \n");
        assert_eq!(fparse_err(r"a=\!"), r"invalid field selector: invalid escape sequence: \!");
        assert_eq!(fparse_err("a=\\ü"), "invalid field selector: invalid escape sequence: \\ü");
        assert_eq!(unescape_field_value("a,b"), Err("invalid field selector: unescaped character in value: 44".into()));
        // An escaped comma does not split terms, so the '=' after it is unescaped.
        assert_eq!(fparse_err(r"a=b\,c=d"), "invalid field selector: unescaped character in value: 61");
    }

    #[test]
    fn field_matching() {
        let obj: BTreeMap<&str, &str> = [("metadata.name", "foo"), ("metadata.namespace", "ns"), ("spec.x", "")].into();
        let get = |f: &str| obj.get(f).copied();
        let m = |s: &str| fparse_ok(s).matches(get);
        assert!(m(""));
        assert!(m("metadata.name=foo"));
        assert!(m("metadata.name==foo"));
        assert!(!m("metadata.name=bar"));
        assert!(m("metadata.name!=bar"));
        assert!(!m("metadata.name!=foo"));
        assert!(m("metadata.name=foo,metadata.namespace=ns"));
        assert!(!m("metadata.name=foo,metadata.namespace=other"));
        // Missing fields read as "".
        assert!(m("missing="));
        assert!(!m("missing=x"));
        assert!(m("missing!=x"));
        assert!(!m("missing!="));
        assert!(m("spec.x="));
        assert!(FieldSelector::default().matches(|_| None));
        assert_eq!(fparse_ok(r"a=x\,y").to_string(), r"a=x\,y");
    }
}
