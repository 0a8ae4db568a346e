//! Fuzzing the gateway's reading of its own responses to an agent: SSE cut anywhere, any
//! message, any result.

use proptest::prelude::*;
use rmcp::model::RequestId;
use serde_json::json;

use super::{Kept, SseEvents, shape_plain_call_result, shape_result, shape_tree};
use crate::fuzzing::{chunked, corpus, json, key};

/// An SSE body: events with `data:` lines holding messages (or anything), comments, blanks,
/// CRLF and LF.
fn sse_body() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        json().prop_map(|v| format!("data: {v}")),
        (0i64..5, json()).prop_map(|(id, r)| format!(
            "data: {}",
            json!({"jsonrpc": "2.0", "id": id, "result": r})
        )),
        "(id|event|retry): [a-z0-9]{0,6}",
        ": [^\r\n]{0,10}",
        "[^\r\n]{0,12}",
        Just(String::new()),
    ];
    (proptest::collection::vec(line, 0..12), any::<bool>()).prop_map(|(lines, crlf)| {
        let end = if crlf { "\r\n" } else { "\n" };
        lines
            .iter()
            .flat_map(|l| [l.as_str(), end])
            .collect::<String>()
            .into_bytes()
    })
}

/// With a result kept for a request this stream does not answer, every byte of `body`
/// passes as it came, however it is cut: nothing is swapped into another request's response.
fn sse_unchanged(body: &[u8], pieces: &[Vec<u8>]) -> Result<(), TestCaseError> {
    let kept = Kept::default();
    kept.insert(
        &RequestId::Number(1_000_000),
        serde_json::value::to_raw_value(&json!({"kept": true})).unwrap(),
    );
    let mut events = SseEvents::default();
    let mut out = Vec::new();
    for piece in pieces {
        out.extend_from_slice(&events.push(piece, &kept));
    }
    out.extend_from_slice(&events.pending);
    prop_assert_eq!(out, body.to_vec());
    Ok(())
}

proptest! {
    #[test]
    fn fuzz_sse_passes_unchanged_unless_it_answers_the_kept_request(
        (body, pieces) in sse_body().prop_flat_map(|b| (Just(b.clone()), chunked(b)))
    ) {
        sse_unchanged(&body, &pieces)?;
    }

    /// Any bytes as a message, with a result kept to swap in.
    #[test]
    fn fuzz_messages_and_results_are_read_without_a_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..128),
        message in json(),
    ) {
        let kept = Kept::default();
        kept.insert(&RequestId::Number(0), serde_json::value::to_raw_value(&json!({})).unwrap());
        let _ = kept.swap_message(&bytes);
        let _ = kept.swap_message(message.to_string().as_bytes());
    }

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

proptest! {
    /// Swapping a kept result into a message read only at its top level gives what swapping
    /// it into the message read whole gives, for any message (or bytes).
    #[test]
    fn fuzz_swapping_into_the_bytes_is_swapping_into_the_tree(
        message in prop_oneof![
            (prop_oneof![Just(json!(0)), Just(json!(1)), Just(json!("0")), json()], json())
                .prop_map(|(id, result)| json!({"jsonrpc": "2.0", "id": id, "result": result})),
            json(),
        ],
        kept_result in json(),
    ) {
        let text = message.to_string();
        let swap = |whole: bool| {
            let kept = Kept::default();
            kept.insert(&RequestId::Number(0), serde_json::value::to_raw_value(&kept_result).unwrap());
            let out = if whole { kept.swap_whole(text.as_bytes()) } else { kept.swap_message(text.as_bytes()) };
            out.map(|out| serde_json::from_slice::<serde_json::Value>(&out).unwrap())
        };
        prop_assert_eq!(swap(false), swap(true));
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

/// The committed cases: SSE bodies as servers stream them, cut every 1, 2 and 5 bytes.
#[test]
fn fuzz_corpus_sse() {
    for (name, body) in corpus("sse") {
        for size in [1, 2, 5] {
            let pieces: Vec<Vec<u8>> = body.chunks(size).map(<[u8]>::to_vec).collect();
            sse_unchanged(&body, &pieces).unwrap_or_else(|e| panic!("{name}/{size}: {e}"));
        }
    }
}
