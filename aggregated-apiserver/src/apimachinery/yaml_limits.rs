//! What keeps the cost of parsing a YAML body bounded, checked before
//! serde_norway reads it: libyaml (go-yaml's model, the same in kube) does
//! work that grows faster than the body in two places a client controls.
//!
//! - **Nesting.** libyaml's scanner does work in proportion to the open flow
//!   collections for every token (it revisits each level's possible simple
//!   key), and serde_norway reads a document's every event before its
//!   recursion limit can act, so deep nesting costs minutes of CPU before it
//!   is refused (measured: docs/performance.md, "Inputs that grow the work
//!   faster than the request"). The depth is counted here on libyaml's own
//!   events and the count stops at the limit, which bounds the work to the
//!   tokens before it (plus libyaml's lookahead for a simple key, at most
//!   1,024 characters). Counted on the parser's events, the depth is the
//!   parser's, whatever the syntax: a lexical pre-scan guessing where
//!   libyaml sees a bracket is outwitted by a quote inside a plain scalar
//!   (`{k: a "b, x: {a: ...`).
//! - **`%TAG` directives.** libyaml checks each new directive against every
//!   earlier one, and each tag against them all, quadratic in a body's
//!   directives (docs/performance.md, as above). A document needs a few at
//!   most; `%TAG` is counted before parsing.

use std::marker::PhantomData;
use std::mem::MaybeUninit;

use unsafe_libyaml_norway as unsafe_libyaml;

/// The most `%TAG` directives a body may declare.
pub const MAX_TAG_DIRECTIVES: usize = 64;

/// Why a body is refused before it is parsed, in go-yaml's way of saying
/// where (`yaml: line 3: ...`).
pub fn check(body: &[u8], max_depth: usize) -> Result<(), String> {
    if let Some(line) = tag_directives_beyond(body, MAX_TAG_DIRECTIVES) {
        return Err(format!("yaml: line {line}: more than {MAX_TAG_DIRECTIVES} %TAG directives"));
    }
    match nesting_beyond(body, max_depth) {
        Some(line) => Err(format!("yaml: line {line}: exceeded max depth of {max_depth}")),
        None => Ok(()),
    }
}

/// The 1-based line of the `limit + 1`th `%TAG` in `body`. Counted
/// wherever it is, not only at a line's start: libyaml breaks lines at `\r`,
/// NEL and the Unicode separators too, and a body no YAML writer produces is
/// the only one refused for text that merely looks like directives.
fn tag_directives_beyond(body: &[u8], limit: usize) -> Option<usize> {
    let mut seen = 0;
    for (at, window) in body.windows(4).enumerate() {
        if window == b"%TAG" {
            seen += 1;
            if seen > limit {
                return Some(1 + body[..at].iter().filter(|b| **b == b'\n').count());
            }
        }
    }
    None
}

/// The 1-based line where the first document of `body` opens more than
/// `limit` nested collections, or None: within the limit, or not YAML (the
/// conversion then reports libyaml's error, having parsed no deeper than
/// `limit` to reach it).
fn nesting_beyond(body: &[u8], limit: usize) -> Option<usize> {
    // Every collection starts at an indicator of its own (`[`, `{`, a block
    // sequence's `-`, a mapping's `?` or `:`), so a body with no more of those
    // than the limit cannot nest past it, and is spared a second parse.
    if body.iter().filter(|b| matches!(b, b'[' | b'{' | b'-' | b'?' | b':')).count() <= limit {
        return None;
    }
    let mut events = Events::new(body)?;
    let mut depth = 0usize;
    while let Some((event, line)) = events.next_event() {
        match event {
            unsafe_libyaml::YAML_SEQUENCE_START_EVENT | unsafe_libyaml::YAML_MAPPING_START_EVENT => {
                depth += 1;
                if depth > limit {
                    return Some(line);
                }
            }
            unsafe_libyaml::YAML_SEQUENCE_END_EVENT | unsafe_libyaml::YAML_MAPPING_END_EVENT => {
                depth = depth.saturating_sub(1)
            }
            // Only the first document is converted.
            unsafe_libyaml::YAML_DOCUMENT_END_EVENT
            | unsafe_libyaml::YAML_STREAM_END_EVENT
            | unsafe_libyaml::YAML_NO_EVENT => return None,
            _ => {}
        }
    }
    None
}

/// libyaml's parser over a borrowed input, configured as serde_norway's
/// (UTF-8, the input as one string), freed when dropped.
struct Events<'input> {
    /// Boxed: libyaml keeps a pointer to the parser itself (its string
    /// reader's data), so it must not move once the input is set.
    parser: Box<MaybeUninit<unsafe_libyaml::yaml_parser_t>>,
    /// libyaml reads the input through raw pointers as it goes.
    input: PhantomData<&'input [u8]>,
}

impl<'input> Events<'input> {
    /// None when libyaml cannot allocate its buffers.
    fn new(input: &'input [u8]) -> Option<Self> {
        let mut parser = Box::new(MaybeUninit::<unsafe_libyaml::yaml_parser_t>::uninit());
        let raw = parser.as_mut_ptr();
        // SAFETY: `yaml_parser_initialize` writes the whole struct before
        // anything reads it and, when it fails, frees what it allocated; the
        // struct is boxed, so the pointer to itself libyaml keeps stays valid;
        // `input` outlives the parser (the lifetime on `Events`).
        unsafe {
            if unsafe_libyaml::yaml_parser_initialize(raw).fail {
                return None;
            }
            unsafe_libyaml::yaml_parser_set_encoding(raw, unsafe_libyaml::YAML_UTF8_ENCODING);
            unsafe_libyaml::yaml_parser_set_input_string(raw, input.as_ptr(), input.len() as u64);
        }
        Some(Self { parser, input: PhantomData })
    }

    /// The next event's type and 1-based line; None when libyaml fails.
    fn next_event(&mut self) -> Option<(unsafe_libyaml::yaml_event_type_t, usize)> {
        let raw = self.parser.as_mut_ptr();
        let mut event = MaybeUninit::<unsafe_libyaml::yaml_event_t>::uninit();
        // SAFETY: the parser was initialized in `new` (and, past an error or
        // the stream's end, libyaml answers an empty event); the event is
        // read only after `yaml_parser_parse` succeeded, which wrote it, and
        // deleted once read.
        unsafe {
            if unsafe_libyaml::yaml_parser_parse(raw, event.as_mut_ptr()).fail {
                return None;
            }
            let event = event.as_mut_ptr();
            let (kind, mark) = ((*event).type_, (*event).start_mark);
            let read = (kind, mark.line as usize + 1);
            unsafe_libyaml::yaml_event_delete(event);
            Some(read)
        }
    }
}

impl Drop for Events<'_> {
    fn drop(&mut self) {
        // SAFETY: initialized in `new` (an `Events` exists only then), freed once.
        unsafe { unsafe_libyaml::yaml_parser_delete(self.parser.as_mut_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    fn beyond(doc: &str) -> Option<usize> {
        nesting_beyond(doc.as_bytes(), 128)
    }

    #[test]
    fn counts_collections_as_libyaml_opens_them() {
        // The mapping is one level, each sequence one more.
        assert_eq!(beyond(&format!("a: {}{}\n", "[".repeat(127), "]".repeat(127))), None);
        assert_eq!(beyond(&format!("a: {}{}\n", "[".repeat(128), "]".repeat(128))), Some(1));
        let block: String = (0..200).map(|i| format!("{}k:\n", "  ".repeat(i))).collect();
        assert_eq!(beyond(&block), Some(129), "the 129th key opens the 129th mapping");
        // Brackets in quotes, comments and plain words open nothing.
        let text = format!("a: \"{0}\"\nb: '{0}'\nc: x{0}\n# {0}\nd: 'it''s' # {0}\n", "[".repeat(300));
        assert_eq!(beyond(&text), None);
        // Only the first document counts; a syntax error is the parser's to report.
        assert_eq!(beyond(&format!("a: 1\n---\n{}", "[".repeat(300))), None);
        assert_eq!(beyond(&format!("a: ]\n{}", "[".repeat(300))), None);
    }

    #[test]
    fn tag_directives_are_counted_before_parsing() {
        let directives =
            |n: usize| -> String { (0..n).map(|i| format!("%TAG !t{i}! tag:example.com,{i}:\n")).collect() };
        let doc = |n: usize| format!("{}---\n!t0!x {{a: 1}}\n", directives(n));
        assert_eq!(check(doc(MAX_TAG_DIRECTIVES).as_bytes(), 128), Ok(()));
        assert_eq!(
            check(doc(MAX_TAG_DIRECTIVES + 1).as_bytes(), 128),
            Err(format!("yaml: line {}: more than {MAX_TAG_DIRECTIVES} %TAG directives", MAX_TAG_DIRECTIVES + 1))
        );
        let on_carriage_returns = doc(MAX_TAG_DIRECTIVES + 1).replace('\n', "\r");
        assert!(check(on_carriage_returns.as_bytes(), 128).is_err());
        let started = Instant::now();
        assert!(check(doc(100_000).as_bytes(), 128).is_err());
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    }

    #[test]
    fn deep_documents_are_refused_at_once_however_written() {
        for level in [
            "[",
            "{\"a\":",
            "{\"k\":\"}}}\",\"a\":",
            "{\"k\" :\"}}}\", \"a\" :",
            "{\"a\":[\"]]\",",
            // A quote inside a plain scalar is text, not the start of a string.
            "{k: a \"b, x: ",
            "[a 'b, ",
            "- ",
            "? ",
            "!t &a [",
        ] {
            let started = Instant::now();
            let doc = format!("{}1", level.repeat(100_000));
            assert_eq!(beyond(&doc), Some(1), "{level}");
            assert!(started.elapsed() < Duration::from_secs(2), "{level}: {:?}", started.elapsed());
        }
        // Not YAML past its first levels: libyaml stops there, as cheaply.
        for level in ["{a: x{", "[{:\"}}}\"},"] {
            let started = Instant::now();
            assert_eq!(beyond(&format!("{}1", level.repeat(100_000))), None, "{level}");
            assert!(started.elapsed() < Duration::from_secs(2), "{level}: {:?}", started.elapsed());
        }
    }
}
