//! Fuzzing the gateway's reading of its own responses to an agent: SSE cut anywhere, any
//! message, any result.

use proptest::prelude::*;
use rmcp::model::RequestId;
use serde_json::json;

use super::{Kept, SseEvents, shape_result};
use crate::fuzzing::{chunked, corpus, json};

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
    kept.insert(&RequestId::Number(1_000_000), json!({"kept": true}));
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

    /// Any bytes as a message, and any value as a result, for either kind of agent.
    #[test]
    fn fuzz_messages_and_results_are_read_without_a_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..128),
        message in json(),
        mut result in json(),
        modern in any::<bool>(),
    ) {
        let kept = Kept::default();
        kept.insert(&RequestId::Number(0), json!({}));
        let _ = kept.swap_message(&bytes);
        let _ = kept.swap_message(message.to_string().as_bytes());
        shape_result(&mut result, modern);
    }
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
