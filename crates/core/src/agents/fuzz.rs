//! Fuzzing the readers of other programs' config files: JSON with comments, and Codex's TOML.

use proptest::prelude::*;

use super::{codex, jsonc};
use crate::fuzzing::{corpus, json};

/// Lines of a Codex config: its MCP tables and keys, and junk between them.
fn codex_like() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        "\\[mcp_servers\\.[a-z\". ]{0,8}\\]",
        "\\[\\[?[a-z_.]{0,12}\\]\\]?",
        "(command|url|args|env|http_headers|enabled) = (\"[^\"\n]{0,8}\"|\\[\"a\", 1\\]|\\{ a = \"b\" \\}|true|[0-9]{1,3})",
        "\\PC{0,20}",
        "# [^\n]{0,10}",
    ];
    proptest::collection::vec(line, 0..12).prop_map(|lines| lines.join("\n"))
}

/// Stripping keeps the text's length and every line break where it was (so an error points
/// into the person's own file), and never panics.
fn strip_keeps_offsets(text: &str) -> Result<(), TestCaseError> {
    let stripped = jsonc::strip(text);
    prop_assert_eq!(stripped.len(), text.len());
    let breaks = |s: &str| {
        s.bytes()
            .enumerate()
            .filter(|(_, b)| *b == b'\n')
            .map(|(i, _)| i)
            .collect::<Vec<_>>()
    };
    prop_assert_eq!(breaks(&stripped), breaks(text));
    Ok(())
}

/// Codex's config, whatever it holds: its MCP entries, or an error at an offset inside it.
fn codex_read_or_refused(text: &str) -> Result<(), TestCaseError> {
    if let Err((offset, _)) = codex::entries(text) {
        prop_assert!(offset <= text.len());
    }
    Ok(())
}

proptest! {
    #[test]
    fn fuzz_jsonc_strip_keeps_every_offset(text in "(\\PC|[/*\"\\\\,{}\\[\\]\n\r]){0,200}") {
        strip_keeps_offsets(&text)?;
    }

    /// JSON a person commented (line and block comments, quotes and slashes inside them) and
    /// left trailing commas in reads as the JSON it was.
    #[test]
    fn fuzz_jsonc_reads_commented_json_as_the_json(
        value in json(),
        line in "[a-zA-Z0-9 /*\"',{}]{0,12}",
        block in "[a-zA-Z0-9 /\"',{}]{0,12}",
    ) {
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        // Strings hold no raw line breaks, so every `\n` here is between tokens.
        let text = pretty
            .replace("\n}", ",\n}")
            .replace("\n]", ",\n]")
            .replace('\n', &format!(" // {line}\n/* {block} */ "));
        let read: serde_json::Value = serde_json::from_str(&jsonc::strip(&text))
            .map_err(|e| TestCaseError::fail(format!("{e} in {text}")))?;
        prop_assert_eq!(read, value);
    }

    #[test]
    fn fuzz_codex_toml_is_read_or_refused(text in codex_like()) {
        codex_read_or_refused(&text)?;
    }
}

/// The committed cases: agents' files as people and programs left them.
#[test]
fn fuzz_corpus_agent_files() {
    for (name, bytes) in corpus("jsonc") {
        strip_keeps_offsets(&String::from_utf8_lossy(&bytes))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    for (name, bytes) in corpus("codex") {
        codex_read_or_refused(&String::from_utf8_lossy(&bytes))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}
