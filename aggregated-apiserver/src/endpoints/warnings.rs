//! The Warning headers of an answer (RFC 7234's `299 - "text"`), bounded
//! as kube-apiserver's warning recorder bounds them.

use http::HeaderValue;

/// The characters of warning text one response carries before its warnings
/// are cut, and what each is cut to: kube-apiserver's warning recorder
/// (k8s.io/apiserver `pkg/endpoints/filters/warning.go`). Without a bound, a
/// body of 60,000 unknown fields would be answered with 60,000 Warning
/// headers (~2.4 MB): 50 bytes of response header per 10 bytes of body, more
/// than HTTP clients accept (hyper's refuses the response, and over HTTP/2
/// the whole connection with it).
const WARNING_TOTAL_CHARS: usize = 4 * 1024;
const WARNING_ITEM_CHARS: usize = 256;

/// The Warning headers of a response, as kube's recorder adds them: each
/// text once; while the texts fit in [`WARNING_TOTAL_CHARS`] all of them
/// whole; once one does not, every warning so far and after is cut to
/// [`WARNING_ITEM_CHARS`], and none is added after the total is reached again.
pub fn warning_headers(warnings: &[String]) -> Vec<HeaderValue> {
    fn cut(text: &str) -> (&str, usize) {
        match text.char_indices().nth(WARNING_ITEM_CHARS) {
            Some((end, _)) => (&text[..end], WARNING_ITEM_CHARS),
            None => (text, text.chars().count()),
        }
    }
    let mut seen = std::collections::HashSet::new();
    let mut recorded: Vec<&str> = Vec::new();
    let mut headers = Vec::new();
    let (mut written, mut truncating) = (0, false);
    for text in warnings {
        if text.is_empty() || !seen.insert(text.as_str()) {
            continue;
        }
        if truncating && written >= WARNING_TOTAL_CHARS {
            break;
        }
        recorded.push(text);
        let (text, len) = if truncating { cut(text) } else { (text.as_str(), text.chars().count()) };
        let Some(header) = warning_header(text) else { continue };
        if truncating || written + len <= WARNING_TOTAL_CHARS {
            written += len;
            headers.push(header);
            continue;
        }
        // This one does not fit: start again with every warning cut.
        truncating = true;
        written = 0;
        headers.clear();
        for text in &recorded {
            let (text, len) = cut(text);
            if let Some(header) = warning_header(text) {
                written += len;
                headers.push(header);
            }
        }
    }
    headers
}

/// A `Warning` header value (RFC 7234 form, as kube-apiserver sends).
pub fn warning_header(text: &str) -> Option<HeaderValue> {
    let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
    HeaderValue::from_str(&format!("299 - \"{escaped}\"")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(headers: &[HeaderValue]) -> Vec<String> {
        headers.iter().map(|h| h.to_str().unwrap_or_default().to_string()).collect()
    }

    #[test]
    fn warnings_that_fit_are_sent_whole_and_once() {
        let w = vec!["unknown field \"spec.a\"".to_string(), String::new(), "unknown field \"spec.a\"".to_string()];
        assert_eq!(texts(&warning_headers(&w)), vec![r#"299 - "unknown field \"spec.a\"""#]);
    }

    #[test]
    fn warnings_past_four_kib_are_cut_as_kube_cuts_them() {
        // 60,000 unknown fields: kube-apiserver sends what fits in 4 KiB of text.
        let many: Vec<String> = (0..60_000).map(|i| format!("unknown field \"spec.u{i}\"")).collect();
        let sent = warning_headers(&many);
        let chars: usize = sent.len() * "unknown field \"spec.u0\"".len();
        assert!(sent.len() < 200 && chars < WARNING_TOTAL_CHARS + WARNING_ITEM_CHARS, "{} warnings", sent.len());
        assert_eq!(texts(&sent[..1]), vec![r#"299 - "unknown field \"spec.u0\"""#]);

        // A long warning that does not fit cuts every warning to 256 characters, earlier ones too.
        let long = vec!["a".repeat(300), "b".repeat(4000), "c".repeat(10)];
        let sent = texts(&warning_headers(&long));
        assert_eq!(
            sent,
            vec![
                format!("299 - \"{}\"", "a".repeat(256)),
                format!("299 - \"{}\"", "b".repeat(256)),
                "299 - \"cccccccccc\"".to_string()
            ]
        );

        // Once the cut warnings reach the total, later ones are dropped.
        let long: Vec<String> = (0..40).map(|i| format!("{i:02}{}", "x".repeat(298))).collect();
        let sent = warning_headers(&long);
        assert_eq!(sent.len(), WARNING_TOTAL_CHARS.div_ceil(WARNING_ITEM_CHARS));
    }
}
