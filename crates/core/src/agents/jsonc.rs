//! JSON with comments, as VS Code (and people editing Claude Code's or Cursor's files by hand)
//! write it: `//` and `/* */` comments and trailing commas.
//!
//! [`strip`] blanks those out and keeps every other byte where it was, so the result parses
//! with serde_json, an error's line and column point into the person's own file, and a span
//! found in the stripped text can be replaced in the original (comments and all kept). No
//! crate for this is in the dependency tree, and the job is one small state machine.

/// `text` with comments and trailing commas replaced by spaces (line breaks inside block
/// comments kept), and a leading byte-order mark blanked. Same length, same offsets. An
/// unterminated block comment is left as it is, so the parser reports it where it starts.
pub fn strip(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    if bytes.starts_with("\u{feff}".as_bytes()) {
        out[..3].fill(b' ');
        i = 3;
    }
    // Where the last comma outside strings was, while only blanks and comments follow it.
    let mut pending_comma: Option<usize> = None;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                pending_comma = None;
                i += 1;
                while i < bytes.len() {
                    match bytes[i] {
                        b'\\' => i += 2,
                        b'"' => {
                            i += 1;
                            break;
                        }
                        _ => i += 1,
                    }
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' && bytes[i] != b'\r' {
                    out[i] = b' ';
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let Some(len) = find(&bytes[i + 2..], b"*/") else {
                    // Unterminated: leave it for the parser to point at.
                    break;
                };
                let end = i + 2 + len + 2;
                for b in &mut out[i..end] {
                    if *b != b'\n' && *b != b'\r' {
                        *b = b' ';
                    }
                }
                i = end;
            }
            b',' => {
                pending_comma = Some(i);
                i += 1;
            }
            b'}' | b']' => {
                if let Some(comma) = pending_comma.take() {
                    out[comma] = b' ';
                }
                i += 1;
            }
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            _ => {
                pending_comma = None;
                i += 1;
            }
        }
    }
    // Only ASCII bytes outside strings were replaced by ASCII spaces, and whole comments
    // (which may hold multi-byte characters) were blanked byte by byte: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn parse(text: &str) -> Value {
        let stripped = strip(text);
        assert_eq!(stripped.len(), text.len(), "offsets kept");
        serde_json::from_str(&stripped).unwrap_or_else(|e| panic!("{e}\n{stripped}"))
    }

    #[test]
    fn strips_line_and_block_comments_and_trailing_commas() {
        let text = "{\n  // servers\n  \"servers\": {\n    /* the desk */ \"desk\": {\"command\": \"d\", \"args\": [\"a\", \"b\",],},\n  },\n}\n";
        assert_eq!(
            parse(text),
            json!({"servers": {"desk": {"command": "d", "args": ["a", "b"]}}})
        );
    }

    #[test]
    fn leaves_comment_markers_and_commas_inside_strings_alone() {
        let text = r#"{"url": "https://x.example/a//b", "c": "/* no */", "q": "say \"//\", ok,}", "e": "\\"}"#;
        assert_eq!(
            parse(text),
            json!({"url": "https://x.example/a//b", "c": "/* no */", "q": "say \"//\", ok,}", "e": "\\"})
        );
    }

    #[test]
    fn keeps_lines_so_errors_point_into_the_original() {
        let text = "{\n  /* a\n     multi-line comment ✓ */\n  \"a\": 1,\n  \"b\": nope,\n}";
        let stripped = strip(text);
        assert_eq!(stripped.lines().count(), text.lines().count());
        let err = serde_json::from_str::<Value>(&stripped).unwrap_err();
        assert_eq!(err.line(), 5);
    }

    #[test]
    fn a_comma_before_a_comment_and_a_closing_brace_is_trailing() {
        let text = "{\"a\": [1, 2, // two\n], \"b\": 3, /* end */ }";
        assert_eq!(parse(text), json!({"a": [1, 2], "b": 3}));
    }

    #[test]
    fn byte_order_mark_and_crlf() {
        let text = "\u{feff}{\r\n  \"a\": 1, // x\r\n}\r\n";
        assert_eq!(parse(text), json!({"a": 1}));
    }

    #[test]
    fn an_unterminated_comment_is_reported_where_it_starts() {
        let stripped = strip("{\"a\": 1 /* never closed\n}");
        let err = serde_json::from_str::<Value>(&stripped).unwrap_err();
        assert_eq!((err.line(), err.column()), (1, 9));
    }

    #[test]
    fn plain_json_is_unchanged_and_odd_input_does_not_panic() {
        let text = r#"{"a": [1, {"b": null}], "c": "d"}"#;
        assert_eq!(strip(text), text);
        for odd in [
            "", "/", "/*", "\"", "\"\\", ",", "}", "//", "\u{feff}", "\"é\\",
        ] {
            let _ = strip(odd);
        }
    }
}
