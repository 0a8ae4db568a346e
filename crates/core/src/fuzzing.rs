//! Strategies for the property-based fuzz tests (`fuzz_*`, run by `make fuzz` with many more
//! cases): JSON values built from the words the parsers look for, so the generated inputs
//! reach deep into them instead of failing at the first key.

use proptest::prelude::*;
use serde_json::Value;

/// Keys a hostile schema, message or config might use: the keywords the parsers read, and
/// anything else.
const KEYS: &[&str] = &[
    "type",
    "properties",
    "required",
    "enum",
    "oneOf",
    "anyOf",
    "const",
    "title",
    "description",
    "format",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "default",
    "items",
    "$ref",
    "$schema",
    "additionalProperties",
    "enumNames",
    "writeOnly",
    "minItems",
    "maxItems",
    "uniqueItems",
    "jsonrpc",
    "id",
    "method",
    "params",
    "result",
    "error",
    "message",
    "requestedSchema",
    "mode",
    "url",
    "elicitationId",
    "inputRequests",
    "requestState",
    "taskId",
    "execution",
    "taskSupport",
    "tools",
    "name",
    "command",
    "args",
    "env",
    "headers",
    "mcpServers",
    "servers",
    "http_headers",
    "_meta",
    "resultType",
    "structuredContent",
    "outputSchema",
    "ttlMs",
    "cacheScope",
    "contents",
    "prompts",
];

/// String values the parsers compare against, and anything else.
const WORDS: &[&str] = &[
    "object",
    "string",
    "number",
    "integer",
    "boolean",
    "array",
    "email",
    "uri",
    "date",
    "date-time",
    "password",
    "elicitation/create",
    "tools/call",
    "form",
    "url",
    "required",
    "2.0",
    "https://example.com/",
    "javascript:alert(1)",
    "complete",
    "",
];

pub fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(KEYS).prop_map(str::to_owned),
        1 => "\\PC{0,10}",
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        prop_oneof![Just(0.5), Just(-1e300), Just(1e-300), any::<f64>()]
            .prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
                .map(Value::Number)),
        proptest::sample::select(WORDS).prop_map(Value::from),
        "\\PC{0,16}".prop_map(Value::from),
    ]
}

/// Any JSON value, nested a few levels, objects keyed mostly by [`KEYS`].
pub fn json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 96, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((key(), inner), 0..8)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// A JSON object (what a schema, a message or a config must be), with the same values.
pub fn json_object() -> impl Strategy<Value = Value> {
    proptest::collection::vec((key(), json()), 0..8)
        .prop_map(|pairs| Value::Object(pairs.into_iter().collect()))
}

/// Bytes cut into pieces at arbitrary places, as a pipe or a network delivers them.
pub fn chunked(bytes: Vec<u8>) -> impl Strategy<Value = Vec<Vec<u8>>> {
    let len = bytes.len();
    proptest::collection::vec(0..=len, 0..8).prop_map(move |mut cuts| {
        cuts.sort_unstable();
        let mut pieces = Vec::new();
        let mut at = 0;
        for cut in cuts.into_iter().chain([len]) {
            pieces.push(bytes[at..cut].to_vec());
            at = cut;
        }
        pieces
    })
}

/// The committed corpus of one target: every file in `crates/core/fuzz/<target>/`, by name.
/// Each fuzz target runs its property over these too, on every test run; a case `make fuzz`
/// finds is added here (and proptest keeps its seed in `proptest-regressions/`).
pub fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join(target);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus in {}", dir.display());
    files
}
