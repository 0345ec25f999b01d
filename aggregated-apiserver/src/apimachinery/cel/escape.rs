//! Field names as CEL identifiers: k8s.io/apiserver `pkg/cel/escaping.go`.
//! A property `x-y` of a schema is `self.x__dash__y` in a rule, `namespace`
//! is `self.__namespace__` (or, since kube 1.31, `self.namespace`); a name
//! that cannot be escaped is not visible.

/// CEL's reserved words (`namespace` is common in Kubernetes).
const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// Whether a field name is a CEL reserved word: kube (1.31+) selects it by
/// its own name as well as by its escaped one (`self.namespace`, `self.__namespace__`).
pub fn is_reserved(name: &str) -> bool {
    RESERVED.contains(&name)
}

/// The CEL identifier of a field name, or `None` when kube cannot escape it
/// (empty, a leading digit, a character outside `[a-zA-Z0-9_.\-/]`).
pub fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn as_kube_escapes() {
        for (name, want) in [
            ("weight", Some("weight")),
            ("namespace", Some("__namespace__")),
            ("x-y", Some("x__dash__y")),
            ("a.b/c", Some("a__dot__b__slash__c")),
            ("a__b", Some("a__underscores__b")),
            ("a___b", Some("a__underscores___b")),
            ("_x", Some("_x")),
            ("1x", None),
            ("a b", None),
            ("", None),
        ] {
            assert_eq!(escape(name).as_deref(), want, "{name}");
        }
    }
}
