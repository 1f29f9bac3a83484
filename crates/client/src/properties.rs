//! Java's `java.util.Properties.load` format, the one reader of every properties file Gregor
//! takes: `server.properties`, `--command-config`, `--add-config-file`.
//!
//! What Java does, and so what this does:
//! - A natural line ends at `\n`, `\r` or `\r\n`. Leading spaces, tabs and form feeds are
//!   dropped. A line that is then empty is skipped, and so is one starting with `#` or `!`.
//! - An odd number of backslashes at the end of a line continues the logical line on the next
//!   one; the backslash goes, and so does the next line's leading whitespace (a `#` there is
//!   content, not a comment). A blank line after a continuation ends the logical line. A
//!   backslash at the very end of the file is dropped.
//! - The key ends at the first unescaped `=`, `:`, space, tab or form feed. After it, any
//!   whitespace, at most one `=` or `:`, and more whitespace are skipped; the rest of the
//!   line, trailing whitespace included, is the value.
//! - In keys and values `\t`, `\n`, `\r`, `\f` and `\uXXXX` are those characters, and `\`
//!   before any other character is that character (`\=`, `\:`, `\ `, `\\`, `\#`).
//!
//! Two deliberate differences: the text is UTF-8 (Java's `load(InputStream)` reads
//! ISO-8859-1, so a UTF-8 file's non-ASCII characters come out garbled there), and a malformed
//! `\uXXXX` is an error naming its line (Java throws `Malformed \uxxxx encoding.`).
//! Values are not trimmed here, as in Java; Kafka's `ConfigDef` trims them when it parses a
//! setting, which is the caller's part.

use std::fmt;

/// A properties file that Java's `Properties.load` would refuse too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertiesError {
    /// The 1-based line where the offending logical line starts.
    pub line: usize,
    /// What is wrong, in words.
    pub reason: String,
}

impl fmt::Display for PropertiesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for PropertiesError {}

/// Reads Java-properties text into `(key, value)` pairs in file order (a later pair for the
/// same key wins, as in a `Properties` map).
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, PropertiesError> {
    let mut pairs = Vec::new();
    for (line, logical) in logical_lines(text) {
        let (key, value) = split(&logical);
        let key = unescape(key).map_err(|reason| PropertiesError { line, reason })?;
        let value = unescape(value).map_err(|reason| PropertiesError { line, reason })?;
        pairs.push((key, value));
    }
    Ok(pairs)
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

/// The logical lines (continuations joined, comments and blank lines gone) with the number of
/// the line each starts on; escapes are still in them.
fn logical_lines(text: &str) -> Vec<(usize, Vec<char>)> {
    let mut out = Vec::new();
    let mut buf: Vec<char> = Vec::new();
    let mut start_line = 1;
    let mut line_no = 1;
    // At the start of a natural line: dropping leading whitespace.
    let mut skip_blank = true;
    // The natural line began a logical line (so `#`/`!` starts a comment).
    let mut new_logical = true;
    // This natural line continues one ended by a backslash.
    let mut continued = false;
    let mut comment = false;
    let mut backslash = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let eol = c == '\n' || c == '\r';
        if eol && c == '\r' && chars.peek() == Some(&'\n') {
            chars.next();
        }
        if comment {
            if eol {
                comment = false;
                skip_blank = true;
                new_logical = true;
                line_no += 1;
            }
            continue;
        }
        if skip_blank {
            if is_blank(c) {
                continue;
            }
            if eol && !continued {
                line_no += 1;
                continue;
            }
            skip_blank = false;
            continued = false;
        }
        if new_logical && !eol {
            new_logical = false;
            start_line = line_no;
            if c == '#' || c == '!' {
                comment = true;
                continue;
            }
        }
        if !eol {
            buf.push(c);
            backslash = c == '\\' && !backslash;
            continue;
        }
        line_no += 1;
        if backslash {
            buf.pop();
            backslash = false;
            skip_blank = true;
            continued = true;
            continue;
        }
        if !buf.is_empty() {
            out.push((start_line, std::mem::take(&mut buf)));
        }
        skip_blank = true;
        new_logical = true;
        continued = false;
    }
    if !comment && !buf.is_empty() {
        if backslash {
            buf.pop();
        }
        out.push((start_line, buf));
    }
    out
}

/// Splits a logical line into its raw key and raw value (Java's `load0`).
fn split(line: &[char]) -> (&[char], &[char]) {
    let mut key_len = 0;
    let mut value_start = line.len();
    let mut has_separator = false;
    let mut backslash = false;
    while key_len < line.len() {
        let c = line[key_len];
        if !backslash && (c == '=' || c == ':') {
            value_start = key_len + 1;
            has_separator = true;
            break;
        }
        if !backslash && is_blank(c) {
            value_start = key_len + 1;
            break;
        }
        backslash = c == '\\' && !backslash;
        key_len += 1;
    }
    while value_start < line.len() {
        let c = line[value_start];
        if !is_blank(c) {
            if !has_separator && (c == '=' || c == ':') {
                has_separator = true;
            } else {
                break;
            }
        }
        value_start += 1;
    }
    (&line[..key_len], &line[value_start..])
}

/// Java's `loadConvert`: resolves the escapes of a key or value.
fn unescape(raw: &[char]) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        i += 1;
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(&next) = raw.get(i) else {
            // Only reachable through a lone backslash ending the file's last line, which
            // logical_lines already dropped; keep it rather than lose a character.
            out.push('\\');
            break;
        };
        i += 1;
        match next {
            't' => out.push('\t'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            'f' => out.push('\u{c}'),
            'u' => {
                let hex: String = raw.iter().skip(i).take(4).collect();
                let unit = (hex.len() == 4)
                    .then(|| u16::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .filter(|_| hex.chars().all(|h| h.is_ascii_hexdigit()))
                    .ok_or_else(|| {
                        format!("malformed \\uxxxx escape: \\u{hex} (expected four hex digits)")
                    })?;
                i += 4;
                push_utf16_unit(&mut out, unit, raw, &mut i)?;
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

/// Appends one UTF-16 code unit; a high surrogate takes the `\uXXXX` low surrogate after it
/// (Java strings are UTF-16, so `\uD83D\uDE00` is one character). A surrogate without its
/// pair, which a Java string can hold but a Rust one cannot, becomes U+FFFD.
fn push_utf16_unit(out: &mut String, unit: u16, raw: &[char], i: &mut usize) -> Result<(), String> {
    if (0xD800..0xDC00).contains(&unit) {
        let low: String = raw.iter().skip(*i).take(6).collect();
        if let Some(hex) = low.strip_prefix("\\u") {
            if let Ok(low_unit) = u16::from_str_radix(hex, 16) {
                if hex.len() == 4 && (0xDC00..0xE000).contains(&low_unit) {
                    *i += 6;
                    out.extend(
                        char::decode_utf16([unit, low_unit]).map(|r| r.unwrap_or('\u{FFFD}')),
                    );
                    return Ok(());
                }
            }
        }
    }
    out.push(char::from_u32(u32::from(unit)).unwrap_or('\u{FFFD}'));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Vec<(String, String)> {
        parse_properties(text).expect("valid properties")
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Each row: the file's text and what `java.util.Properties.load` reads from it (checked
    /// against Java 17's `Properties.load(Reader)`, in file order).
    #[test]
    fn reads_what_java_properties_load_reads() {
        let table: &[(&str, &[(&str, &str)])] = &[
            // Separators: '=', ':', whitespace, whitespace around them, only the first counts.
            ("a=b", &[("a", "b")]),
            ("a:b", &[("a", "b")]),
            ("a b", &[("a", "b")]),
            ("a\tb", &[("a", "b")]),
            ("a\u{c}b", &[("a", "b")]),
            ("a = b", &[("a", "b")]),
            ("a : b", &[("a", "b")]),
            ("a  =  = b", &[("a", "= b")]),
            ("a==b", &[("a", "=b")]),
            ("a=b=c", &[("a", "b=c")]),
            ("a b=c", &[("a", "b=c")]),
            ("a = :b", &[("a", ":b")]),
            ("a:=b", &[("a", "=b")]),
            // No value; no key.
            ("a", &[("a", "")]),
            ("a=", &[("a", "")]),
            ("a   ", &[("a", "")]),
            ("=b", &[("", "b")]),
            (":", &[("", "")]),
            // Leading whitespace dropped, trailing whitespace of a value kept.
            ("   a=b", &[("a", "b")]),
            ("\t\u{c} a=b  ", &[("a", "b  ")]),
            // Comments and blank lines.
            ("# c\n! c\na=b", &[("a", "b")]),
            ("  # indented comment\na=b", &[("a", "b")]),
            ("a=b # not a comment", &[("a", "b # not a comment")]),
            ("a=#b", &[("a", "#b")]),
            ("\n\n   \n\t\na=b\n\n", &[("a", "b")]),
            ("# comment ending in a backslash \\\na=b", &[("a", "b")]),
            // Line endings.
            ("a=1\r\nb=2\rc=3\n", &[("a", "1"), ("b", "2"), ("c", "3")]),
            // Continuations: leading whitespace of the next line dropped, '#' there is content.
            ("a=b\\\n   c", &[("a", "bc")]),
            ("a=b \\\n   c \\\n d", &[("a", "b c d")]),
            ("a=b\\\n#c", &[("a", "b#c")]),
            ("a=b\\\r\n  c", &[("a", "bc")]),
            ("a=b\\\rc", &[("a", "bc")]),
            ("a\\\n  b=c", &[("ab", "c")]),
            ("a=\\\n  b", &[("a", "b")]),
            // A blank line after a continuation ends the logical line.
            ("a=b\\\n\nc=d", &[("a", "b"), ("c", "d")]),
            ("a=b\\\n   \nc=d", &[("a", "b"), ("c", "d")]),
            // Even backslashes do not continue: an escaped backslash.
            ("a=b\\\\\nc=d", &[("a", "b\\"), ("c", "d")]),
            ("a=b\\\\\\\nc", &[("a", "b\\c")]),
            // A backslash at the end of the file is dropped.
            ("a=b\\", &[("a", "b")]),
            ("a=b\\\n", &[("a", "b")]),
            // Escapes.
            ("a=x\\ty\\nz\\rw\\fv", &[("a", "x\ty\nz\rw\u{c}v")]),
            ("a=\\u0041\\u00e9\\u20AC", &[("a", "Aé€")]),
            ("a=\\uD83D\\uDE00", &[("a", "😀")]),
            ("a=\\q\\\\\\#\\!\\=\\:", &[("a", "q\\#!=:")]),
            ("a=C:\\\\dir", &[("a", "C:\\dir")]),
            ("a=C:\\dir", &[("a", "C:dir")]),
            ("a=\\ b", &[("a", " b")]),
            // Escaped separators belong to the key.
            ("a\\=b=c", &[("a=b", "c")]),
            ("a\\:b:c", &[("a:b", "c")]),
            ("a\\ b c", &[("a b", "c")]),
            ("a\\\\=b", &[("a\\", "b")]),
            ("\\#a=b", &[("#a", "b")]),
            ("\\u0061\\u003d=b", &[("a=", "b")]),
            // Later entries for the same key come later.
            ("a=1\na=2", &[("a", "1"), ("a", "2")]),
            // KIP-651's inline PEM, as continuation lines and as \n escapes.
            (
                "k=-----BEGIN X----- \\\n    QUJD \\\n    -----END X-----",
                &[("k", "-----BEGIN X----- QUJD -----END X-----")],
            ),
            (
                "k=-----BEGIN X-----\\nQUJD\\n-----END X-----",
                &[("k", "-----BEGIN X-----\nQUJD\n-----END X-----")],
            ),
            ("", &[]),
            ("# only\n! comments", &[]),
        ];
        for (text, expected) in table {
            assert_eq!(parse(text), pairs(expected), "{text:?}");
        }
    }

    #[test]
    fn a_malformed_unicode_escape_names_its_line() {
        for text in ["a=\\u12", "a=\\u12G4", "a=\\u"] {
            let err = parse_properties(&format!("# c\nok=1\n{text}")).expect_err(text);
            assert_eq!(err.line, 3, "{text}");
            assert!(err.reason.contains("malformed \\uxxxx"), "{err}");
        }
        let err = parse_properties("a=b\\\n  c\\u00").expect_err("malformed");
        assert_eq!(err.line, 1);
    }
}
