//! Fuzzing the gateway's shaping of a server's raw result for the agent: any result.

use proptest::prelude::*;
use serde_json::json;

use super::{shape_plain_call_result, shape_result, shape_tree};
use crate::fuzzing::{json, key};

proptest! {
    /// Shaping a result read only as far as it needs gives what shaping it whole gives: any
    /// result, written compact, pretty, or with every key escaped.
    #[test]
    fn fuzz_shaping_the_bytes_is_shaping_the_tree(
        result in prop_oneof![3 => result(), 1 => json()],
        modern in any::<bool>(),
        spelling in 0..3u8,
    ) {
        let mut tree = result.clone();
        shape_tree(&mut tree, modern);
        let text = match spelling {
            0 => result.to_string(),
            1 => serde_json::to_string_pretty(&result).unwrap(),
            _ => escape_keys(&result),
        };
        let raw = serde_json::value::RawValue::from_string(text).unwrap();
        let bytes: serde_json::Value = serde_json::from_str(shape_result(raw, modern).get()).unwrap();
        prop_assert_eq!(bytes, tree);
    }

    /// A call's result made only of a tool result's members, shaped without being read, comes
    /// out as the same bytes as shaped the whole way: compact, pretty, or every key escaped.
    #[test]
    fn fuzz_a_plain_call_result_is_shaped_as_any_result(
        members in proptest::collection::btree_map(
            proptest::sample::select(vec!["content", "structuredContent", "isError", "_meta", "resultType"]),
            prop_oneof![
                Just(json!("complete")),
                Just(json!({"a": 1})),
                Just(json!([1])),
                Just(json!("structuredContent")),
                Just(json!([{"structuredContent": 1}, {"structuredContent": {}}])),
                json(),
            ],
            0..5,
        ),
        modern in any::<bool>(),
        spelling in 0..3u8,
    ) {
        let result = serde_json::Value::Object(
            members.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        );
        let text = match spelling {
            0 => result.to_string(),
            1 => serde_json::to_string_pretty(&result).unwrap(),
            _ => escape_keys(&result),
        };
        let raw = || serde_json::value::RawValue::from_string(text.clone()).unwrap();
        let (plain, whole) = (shape_plain_call_result(raw(), modern), shape_result(raw(), modern));
        prop_assert_eq!(plain.get(), whole.get());
    }
}

/// A result made of the keys shaping looks at, with the values it tells apart.
fn result() -> impl Strategy<Value = serde_json::Value> {
    const SHAPED: &[&str] = &[
        "resultType",
        "structuredContent",
        "content",
        "tools",
        "prompts",
        "resources",
        "resourceTemplates",
        "contents",
        "ttlMs",
        "cacheScope",
    ];
    let key = prop_oneof![
        3 => proptest::sample::select(SHAPED).prop_map(str::to_owned),
        1 => key(),
    ];
    let value = prop_oneof![
        Just(json!("complete")),
        Just(json!("input_required")),
        Just(json!(null)),
        Just(json!({"a": 1})),
        Just(json!([{"name": "t", "outputSchema": {"type": "array"}}])),
        Just(json!([{"name": "t", "outputSchema": {"type": "object"}}])),
        Just(json!([{"type": "text", "text": "[1]"}])),
        Just(json!([1])),
        json(),
    ];
    proptest::collection::vec((key, value), 0..6)
        .prop_map(|pairs| serde_json::Value::Object(pairs.into_iter().collect()))
}

/// `value` as JSON text with the top-level keys written as `\\u` escapes.
fn escape_keys(value: &serde_json::Value) -> String {
    let Some(object) = value.as_object() else {
        return value.to_string();
    };
    let members: Vec<String> = object
        .iter()
        .map(|(k, v)| {
            let key: String = k.encode_utf16().map(|u| format!("\\u{u:04x}")).collect();
            format!("\"{key}\":{v}")
        })
        .collect();
    format!("{{{}}}", members.join(","))
}
