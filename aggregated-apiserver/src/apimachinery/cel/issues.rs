//! Compile errors worded and placed as cel-go reports them (its
//! `common.Errors.ToDisplayString`): `ERROR: <input>:<line>:<column>:
//! <message>`, then the source line and a caret under the place, one error
//! a line:
//!
//! ```text
//! ERROR: <input>:1:5: undefined field 'nope'
//!  | self.nope == 1
//!  | ....^
//! ```
//!
//! The `cel` crate keeps no source positions once an expression parsed, so
//! the place of an undeclared name is found again in the source's tokens:
//! where cel-go's parser puts the expression it reports (a variable's name;
//! the `.` selecting a field, or the `(` of the `has(...)` testing it).

/// cel-go's `maxSnippetLength`: longer lines are not shown.
const MAX_SNIPPET_LENGTH: usize = 16384;

/// One error at `offset` (a byte of `source`; the message alone without one).
pub(super) fn display(source: &str, offset: Option<usize>, message: &str) -> String {
    let Some(offset) = offset.filter(|o| *o <= source.len() && source.is_char_boundary(*o)) else {
        return format!("ERROR: <input>: {message}");
    };
    let line_start = source[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = source[..offset].matches('\n').count() + 1;
    let column = source[line_start..offset].chars().count();
    display_at(source, line, column, message)
}

/// One error at `line` (from 1) and `column` (characters from 0), as
/// cel-go's `Error.ToDisplayString` writes it.
pub(super) fn display_at(source: &str, line: usize, column: usize, message: &str) -> String {
    let mut out = format!("ERROR: <input>:{line}:{}: {message}", column + 1);
    let snippet = source.split('\n').nth(line.saturating_sub(1));
    if let Some(snippet) = snippet.filter(|s| s.len() <= MAX_SNIPPET_LENGTH) {
        let snippet = snippet.replace('\t', " ");
        out.push_str("\n | ");
        out.push_str(&snippet);
        out.push_str("\n | ");
        let mut chars = snippet.chars();
        for c in chars.by_ref().take(column) {
            out.push(if c.len_utf8() > 1 { '\u{ff0e}' } else { '.' });
        }
        out.push(if chars.next().is_some_and(|c| c.len_utf8() > 1) { '\u{ff3e}' } else { '^' });
    }
    out
}

/// The `cel` crate's syntax errors, each placed as it placed them.
pub(super) fn syntax(source: &str, errors: &super::cel::ParseErrors) -> String {
    let shown: Vec<String> = errors
        .errors
        .iter()
        .map(|e| match (usize::try_from(e.pos.0), usize::try_from(e.pos.1)) {
            (Ok(line @ 1..), Ok(column @ 1..)) => display_at(source, line, column - 1, &e.msg),
            _ => display(source, None, &e.msg),
        })
        .collect();
    if shown.is_empty() {
        format!("ERROR: <input>: Syntax error in {source:?}")
    } else {
        shown.join("\n")
    }
}

/// A token of CEL's grammar, by where it starts: what placing needs.
#[derive(Debug, PartialEq)]
enum Token<'a> {
    Ident(&'a str),
    /// Punctuation, one character (`.`, `(`, ...) or two (`.?` is `.` then `?`).
    Punct(char),
    /// A literal (string, bytes, number).
    Literal,
}

/// The tokens of `source` with their byte offsets (comments and blanks
/// left out; a string or number as one literal).
fn tokens(source: &str) -> Vec<(usize, Token<'_>)> {
    let bytes = source.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'/' && bytes.get(i + 1) == Some(&b'/') {
            i = source[i..].find('\n').map_or(bytes.len(), |n| i + n);
        } else if let Some(end) = string_end(bytes, i) {
            out.push((start, Token::Literal));
            i = end;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push((start, Token::Ident(&source[start..i])));
        } else if c.is_ascii_digit() {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                i += 1;
            }
            out.push((start, Token::Literal));
        } else {
            let c = source[i..].chars().next().unwrap_or(' ');
            out.push((start, Token::Punct(c)));
            i += c.len_utf8();
        }
    }
    out
}

/// Where the string or bytes literal starting at `i` ends (its prefixes
/// `r`, `b` in either case and order, its quotes single, double or tripled),
/// or None if none starts there.
fn string_end(bytes: &[u8], mut i: usize) -> Option<usize> {
    let mut raw = false;
    for _ in 0..2 {
        match bytes.get(i) {
            Some(b'r' | b'R') if !raw => {
                raw = true;
                i += 1;
            }
            Some(b'b' | b'B') => i += 1,
            _ => break,
        }
    }
    let quote = *bytes.get(i).filter(|q| **q == b'\'' || **q == b'"')?;
    let triple = bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote);
    i += if triple { 3 } else { 1 };
    while i < bytes.len() {
        if bytes[i] == b'\\' && !raw {
            i += 2;
        } else if bytes[i] == quote
            && (!triple || (bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote)))
        {
            return Some(i + if triple { 3 } else { 1 });
        } else {
            i += 1;
        }
    }
    Some(bytes.len())
}

/// Where cel-go places an undeclared reference to variable `name`: its
/// first use not selected from something nor called.
pub(super) fn variable(source: &str, name: &str) -> Option<usize> {
    let tokens = tokens(source);
    (0..tokens.len()).find_map(|i| {
        let selected = i > 0 && tokens[i - 1].1 == Token::Punct('.');
        let called = tokens.get(i + 1).is_some_and(|t| t.1 == Token::Punct('('));
        (tokens[i].1 == Token::Ident(name) && !selected && !called).then_some(tokens[i].0)
    })
}

/// Where cel-go places the selection of `field` from the value `path`
/// names (`["self", "spec"]`; empty where the operand is no plain path):
/// the `.` before the field, or for a `has()` test, the `(` after `has`.
pub(super) fn selection(source: &str, path: &[String], field: &str, test: bool) -> Option<usize> {
    let tokens = tokens(source);
    let mut wanted: Vec<Token<'_>> = Vec::new();
    if test {
        wanted.extend([Token::Ident("has"), Token::Punct('(')]);
    }
    for part in path {
        wanted.extend([Token::Ident(part), Token::Punct('.')]);
    }
    if path.is_empty() {
        wanted.push(Token::Punct('.'));
    }
    wanted.push(Token::Ident(field));
    let at = (0..tokens.len()).find(|&i| {
        tokens.len() - i >= wanted.len() && tokens[i..i + wanted.len()].iter().map(|t| &t.1).eq(wanted.iter())
    })?;
    Some(if test { tokens[at + 1].0 } else { tokens[at + wanted.len() - 2].0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_show_the_line_and_a_caret_under_the_place() {
        assert_eq!(
            display("self.nope == 1", Some(4), "undefined field 'nope'"),
            "ERROR: <input>:1:5: undefined field 'nope'\n | self.nope == 1\n | ....^"
        );
        assert_eq!(display("a &&\n\tb.x", Some(7), "m"), "ERROR: <input>:2:3: m\n |  b.x\n | ..^");
        assert_eq!(display("'é' + x", Some(7), "m"), "ERROR: <input>:1:7: m\n | 'é' + x\n | .\u{ff0e}....^");
        assert_eq!(display("x", None, "m"), "ERROR: <input>: m");
    }

    #[test]
    fn undeclared_names_are_found_where_cel_go_places_them() {
        assert_eq!(variable("'nope' + nope.x + y.nope", "nope"), Some(9));
        assert_eq!(variable("nope(1) || x.nope || nope", "nope"), Some(21));
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(selection("a.b.c == self.b.c", &path(&["self", "b"]), "c", false), Some(15));
        assert_eq!(selection("self.x || has(self.y)", &path(&["self"]), "y", true), Some(13));
        assert_eq!(selection("r'self.y' + self[0].y", &[], "y", false), Some(19));
        assert_eq!(selection("x // self.y\n+ self.y", &path(&["self"]), "y", false), Some(18));
    }
}
