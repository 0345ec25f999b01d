//! Name validators with Kubernetes' rules and error texts: qualified names
//! (label keys, annotation keys, finalizers), label values, DNS-1123 labels
//! and subdomains. Mirrors k8s.io/apimachinery `pkg/util/validation`
//! (`IsQualifiedName`, `IsValidLabelValue`, `IsDNS1123Label`,
//! `IsDNS1123Subdomain` and their message helpers). Each validator returns
//! the error details, empty when the value is valid.

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
/// Maximum length of the name part of a qualified name (label key).
pub const QUALIFIED_NAME_MAX_LENGTH: usize = 63;

const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR_MSG: &str =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' \
     or '.', and must start and end with an alphanumeric character";
/// Maximum length of a label value.
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \
     '-', and must start and end with an alphanumeric character";
/// Maximum length of a DNS-1123 label.
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;

const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
     characters, '-' or '.', and must start and end with an alphanumeric character";
/// Maximum length of a DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

/// `validation.MaxLenError`: "must be no more than N characters".
pub fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// `validation.EmptyError`: "must be non-empty".
pub fn empty_error() -> &'static str {
    "must be non-empty"
}

/// `validation.RegexError`: the message, then the examples and the regex in
/// parentheses (with apimachinery's odd `',  or '` spacing between examples).
pub fn regex_error(msg: &str, regex: &str, examples: &[&str]) -> String {
    let mut out = String::from(msg);
    if examples.is_empty() {
        out.push_str(" (regex used for validation is '");
        out.push_str(regex);
        out.push_str("')");
        return out;
    }
    out.push_str(" (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(example);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(regex);
    out.push_str("')");
    out
}

/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

fn is_dns_lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
fn is_dns1123_label_fmt(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) => {
            is_dns_lower_alnum(first)
                && is_dns_lower_alnum(last)
                && b.iter().all(|&c| is_dns_lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

/// `^label(\.label)*$` (no per-label length limit, like the Go regex).
fn is_dns1123_subdomain_fmt(s: &str) -> bool {
    s.split('.').all(is_dns1123_label_fmt)
}

/// `validation.IsQualifiedName`: a label key / annotation key, an optional
/// DNS-1123 subdomain prefix and '/' followed by a name of at most 63
/// characters. Returns the apimachinery error strings (empty when valid).
pub fn validate_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {}", empty_error()));
            } else {
                for msg in validate_dns1123_subdomain(prefix) {
                    errs.push(format!("prefix part {msg}"));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_ERR_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {}", empty_error()));
    } else if name.len() > QUALIFIED_NAME_MAX_LENGTH {
        errs.push(format!("name part {}", max_len_error(QUALIFIED_NAME_MAX_LENGTH)));
    }
    if !is_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(QUALIFIED_NAME_ERR_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

/// `validation.IsValidLabelValue`: empty, or at most 63 characters of
/// `[-A-Za-z0-9_.]` starting and ending with an alphanumeric character.
pub fn validate_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(regex_error(LABEL_VALUE_ERR_MSG, LABEL_VALUE_FMT, &["MyValue", "my_value", "12345"]));
    }
    errs
}

/// `validation.IsDNS1123Subdomain`: at most 253 characters, dot-separated
/// lowercase RFC 1123 labels.
pub fn validate_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !is_dns1123_subdomain_fmt(value) {
        errs.push(regex_error(DNS1123_SUBDOMAIN_ERR_MSG, DNS1123_SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

/// `validation.IsDNS1123Label`: at most 63 characters of `[-a-z0-9]`,
/// starting and ending with an alphanumeric character.
pub fn validate_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !is_dns1123_label_fmt(value) {
        if is_dns1123_subdomain_fmt(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(DNS1123_LABEL_ERR_MSG, DNS1123_LABEL_FMT, &["my-name", "123-abc"]));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::test_fixtures::{
        LABEL_REGEX_ERR, LABEL_VALUE_REGEX_ERR, NAME_PART_REGEX_ERR, SUBDOMAIN_REGEX_ERR,
    };

    #[test]
    fn qualified_name_valid() {
        for ok in [
            "simple",
            "now-with-dashes",
            "1-starts-with-num",
            "1234",
            "simple/simple",
            "now-with-dashes/simple",
            "now-with-dashes/now-with-dashes",
            "now.with.dots/simple",
            "now-with.dashes-and.dots/simple",
            "1-num.2-num/3-num",
            "1234/5678",
            "1.2.3.4/5678",
            "Uppercase_Is_OK_123",
            "example.com/Uppercase_Is_OK_123",
            "requests.storage-foo",
            &"a".repeat(63),
            &format!("{}/b", "a".repeat(253)),
        ] {
            assert_eq!(validate_qualified_name(ok), Vec::<String>::new(), "{ok}");
        }
    }

    #[test]
    fn qualified_name_invalid() {
        for bad in [
            "nospecialchars%^=@",
            "cantendwithadash-",
            "-cantstartwithadash-",
            "only/one/slash",
            "Example.com/abc",
            "example_com/abc",
            "example.com/",
            "/simple",
            &"a".repeat(64),
            &format!("{}/b", "a".repeat(254)),
            "",
            "ünïcode",
        ] {
            assert!(!validate_qualified_name(bad).is_empty(), "{bad}");
        }
        assert_eq!(validate_qualified_name("*bar"), vec![NAME_PART_REGEX_ERR.to_string()]);
        assert_eq!(
            validate_qualified_name(""),
            vec!["name part must be non-empty".to_string(), NAME_PART_REGEX_ERR.to_string()]
        );
        assert_eq!(validate_qualified_name("/a"), vec!["prefix part must be non-empty".to_string()]);
        assert_eq!(
            validate_qualified_name("a/"),
            vec!["name part must be non-empty".to_string(), NAME_PART_REGEX_ERR.to_string()]
        );
        assert_eq!(
            validate_qualified_name(&"a".repeat(64)),
            vec!["name part must be no more than 63 characters".to_string()]
        );
        assert_eq!(validate_qualified_name("Foo/bar"), vec![format!("prefix part {SUBDOMAIN_REGEX_ERR}")]);
        assert_eq!(
            validate_qualified_name(&format!("{}/bar", "a".repeat(254))),
            vec!["prefix part must be no more than 253 characters".to_string()]
        );
        assert_eq!(
            validate_qualified_name("a/b/c"),
            vec!["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
                 with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for \
                 validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix \
                 and '/' (e.g. 'example.com/MyName')"
                .to_string()]
        );
        // Both prefix and name errors are reported, prefix first.
        assert_eq!(
            validate_qualified_name("A/-"),
            vec![format!("prefix part {SUBDOMAIN_REGEX_ERR}"), NAME_PART_REGEX_ERR.to_string()]
        );
    }

    #[test]
    fn label_value_validation() {
        for ok in ["", "simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "1234", "a", "A_b.C-9"] {
            assert_eq!(validate_label_value(ok), Vec::<String>::new(), "{ok}");
        }
        assert!(validate_label_value(&"a".repeat(63)).is_empty());
        assert_eq!(validate_label_value(&"a".repeat(64)), vec!["must be no more than 63 characters".to_string()]);
        assert_eq!(validate_label_value("-a"), vec![LABEL_VALUE_REGEX_ERR.to_string()]);
        assert_eq!(
            validate_label_value(&format!("-{}", "a".repeat(64))),
            vec!["must be no more than 63 characters".to_string(), LABEL_VALUE_REGEX_ERR.to_string()]
        );
        for bad in ["nospecialchars%^=@", "Tama-nui-te-rā.is.Māori.sun", "\\backslashes\\are\\bad", "-starts", "ends-"]
        {
            assert!(!validate_label_value(bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn dns1123_subdomain_validation() {
        for ok in ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "a.a", "ab.a", "a.b.c"] {
            assert!(validate_dns1123_subdomain(ok).is_empty(), "{ok}");
        }
        assert!(validate_dns1123_subdomain(&"a".repeat(253)).is_empty());
        // Per-label length is not checked, as in apimachinery.
        assert!(validate_dns1123_subdomain(&format!("{}.com", "a".repeat(70))).is_empty());
        for bad in ["", "A", "ABC", "aBc", "A1", "a_", "a.", ".a", "a..b", "-a", "a-", "a.-a", "a@b", "a,b", "ü"] {
            assert_eq!(validate_dns1123_subdomain(bad), vec![SUBDOMAIN_REGEX_ERR.to_string()], "{bad}");
        }
        assert_eq!(validate_dns1123_subdomain(&"a".repeat(254)), vec!["must be no more than 253 characters"]);
        assert_eq!(
            validate_dns1123_subdomain(&"A".repeat(254)),
            vec!["must be no more than 253 characters".to_string(), SUBDOMAIN_REGEX_ERR.to_string()]
        );
    }

    #[test]
    fn dns1123_label_validation() {
        for ok in ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "1--a--b--2"] {
            assert!(validate_dns1123_label(ok).is_empty(), "{ok}");
        }
        assert!(validate_dns1123_label(&"a".repeat(63)).is_empty());
        assert_eq!(validate_dns1123_label("a.b"), vec!["must not contain dots"]);
        assert_eq!(validate_dns1123_label("A"), vec![LABEL_REGEX_ERR.to_string()]);
        assert_eq!(validate_dns1123_label(""), vec![LABEL_REGEX_ERR.to_string()]);
        assert_eq!(validate_dns1123_label(&"a".repeat(64)), vec!["must be no more than 63 characters"]);
        assert_eq!(
            validate_dns1123_label(&format!("{}.b", "a".repeat(63))),
            vec!["must be no more than 63 characters".to_string(), "must not contain dots".to_string()]
        );
        for bad in ["", "A", "ABC", "aBc", "A1", "a_", "a.", ".a", "-a", "a-", "a b", "_", "ü"] {
            assert!(!validate_dns1123_label(bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn regex_error_format() {
        assert_eq!(regex_error("m", "r", &[]), "m (regex used for validation is 'r')");
        assert_eq!(regex_error("m", "r", &["x"]), "m (e.g. 'x', regex used for validation is 'r')");
        assert_eq!(regex_error("m", "r", &["x", "y"]), "m (e.g. 'x',  or 'y', regex used for validation is 'r')");
    }
}
