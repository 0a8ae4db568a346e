//! Fuzzing the bridge's reading of what an agent writes on stdin: any line, any message.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::{answers, line_text, request_of};
use crate::headers::{listed_param_headers, standard_headers};

/// Any JSON, objects keyed mostly by the words the bridge reads.
fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        3 => proptest::sample::select(vec![
            "jsonrpc", "id", "method", "params", "result", "error", "name", "uri", "taskId",
            "arguments", "tools", "inputSchema", "properties", "x-mcp-header", "_meta",
        ])
        .prop_map(str::to_owned),
        1 => "\\PC{0,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        proptest::sample::select(vec![
            "tools/call",
            "resources/read",
            "prompts/get",
            "tasks/get"
        ])
        .prop_map(Value::from),
        "\\PC{0,16}".prop_map(Value::from),
        "[\\x00-\\x7f]{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 64, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// Whatever an agent sends, and whatever a server listed, the headers the bridge derives for
/// the gateway come without a panic (they are header types, so no line break can smuggle
/// another one in), and `Mcp-Method` says the message's method.
fn headers_legal(message: &Value, listed: &Value) -> Result<(), TestCaseError> {
    let listed = listed_param_headers(listed);
    let params = listed.first().map(|(_, p)| p);
    for (name, value) in standard_headers(message.to_string().as_bytes(), params) {
        if name == "mcp-method" {
            prop_assert_eq!(
                Some(value.as_bytes()),
                message["method"].as_str().map(str::as_bytes)
            );
        }
    }
    if let Some(request) = request_of(message) {
        let _ = answers(
            &json!({"jsonrpc": "2.0", "id": message["id"], "result": {}}),
            &request,
        );
    }
    Ok(())
}

proptest! {
    /// Any line on stdin is text, a blank to skip, or an error in words.
    #[test]
    fn fuzz_any_line_is_read_without_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = line_text(&bytes);
    }

    #[test]
    fn fuzz_headers_derived_from_any_message_are_legal(
        method in prop_oneof![
            proptest::sample::select(vec!["tools/call", "resources/read", "prompts/get", "tasks/get"]).prop_map(str::to_owned),
            "\\PC{0,12}",
        ],
        params in json_value(),
        listed in json_value(),
        id in json_value(),
    ) {
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        headers_legal(&message, &json!({"tools": [listed]}))?;
    }
}

/// The committed cases: lines agents wrote, each checked against the tools listed in
/// `tools-list.json` of the same folder.
#[test]
fn fuzz_corpus_lines() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/lines");
    let listed: Value =
        serde_json::from_slice(&std::fs::read(dir.join("tools-list.json")).unwrap()).unwrap();
    let mut read = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        for line in std::fs::read(&path).unwrap().split(|b| *b == b'\n') {
            read += 1;
            if let Some(Ok(text)) = line_text(line)
                && let Ok(message) = serde_json::from_str::<Value>(text)
            {
                headers_legal(&message, &listed)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            }
        }
    }
    assert!(read > 0, "no corpus in {}", dir.display());
}
