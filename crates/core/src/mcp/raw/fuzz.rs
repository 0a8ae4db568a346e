//! Fuzzing the raw reading beside rmcp: any bytes from a server, cut anywhere.

use proptest::prelude::*;
use rmcp::model::NumberOrString;
use serde_json::json;

use super::{KEEP_BYTES, RawRequests, TapRead};
use crate::fuzzing::{chunked, corpus, json};

/// One line a server might write: an elicitation with anything as params, any JSON, or bytes.
fn wire_line() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0i64..50, json()).prop_map(|(id, params)| serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create", "params": params})
        )
        .unwrap()),
        (0i64..50, json()).prop_map(|(id, result)| serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "result": {"inputRequests": result, "taskId": "t"}})
        )
        .unwrap()),
        json().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        proptest::collection::vec(any::<u8>(), 0..64),
    ]
    .prop_map(|line| line.into_iter().filter(|b| *b != b'\n').collect())
}

/// Lines, and the same lines on the wire cut into pieces.
fn lines_and_pieces() -> impl Strategy<Value = (Vec<Vec<u8>>, Vec<Vec<u8>>)> {
    proptest::collection::vec(wire_line(), 0..6).prop_flat_map(|lines| {
        let wire: Vec<u8> = lines
            .iter()
            .flat_map(|l| l.iter().copied().chain([b'\n']))
            .collect();
        (Just(lines), chunked(wire))
    })
}

/// Whatever a server writes, reading it never panics and what is kept stays in budget.
fn read_within_budget(lines: &[Vec<u8>]) -> Result<(), TestCaseError> {
    let raw = RawRequests::with_input_results();
    for line in lines {
        raw.observe(line);
    }
    let held = raw.results.as_ref().unwrap().0.lock().unwrap().bytes;
    prop_assert!(held <= KEEP_BYTES);
    for id in 0..50 {
        let _ = raw.take(&NumberOrString::Number(id));
        let _ = raw.take_result(&NumberOrString::Number(id));
    }
    Ok(())
}

/// The stdout tap keeps the same requests however the pipe cuts the bytes of `wire`.
fn tap_same_however_cut(wire: &[u8], pieces: &[Vec<u8>]) -> Result<(), TestCaseError> {
    let whole = RawRequests::new();
    for line in wire.split_inclusive(|b| *b == b'\n') {
        if line.ends_with(b"\n") {
            whole.observe(line);
        }
    }
    let cut = RawRequests::new();
    let mut tap = TapRead::new(tokio::io::empty(), cut.clone());
    for piece in pieces {
        tap.scan(piece);
    }
    for id in 0..50 {
        let id = NumberOrString::Number(id);
        prop_assert_eq!(cut.take(&id), whole.take(&id));
    }
    // And rmcp is handed every whole line, byte for byte (a last one without its newline
    // waits for the rest).
    let passed: Vec<u8> = tap
        .ready
        .iter()
        .flat_map(|r| match r {
            super::Ready::Lines(lines, _) => lines.clone(),
            // No questions are taken here: nobody takes this tap's.
            super::Ready::Answer(..) | super::Ready::Progress(_) | super::Ready::Question(_) => {
                Vec::new()
            }
        })
        .collect();
    let whole_lines = match wire.iter().rposition(|b| *b == b'\n') {
        Some(end) => &wire[..=end],
        None => &[][..],
    };
    prop_assert_eq!(passed, whole_lines.to_vec());
    Ok(())
}

proptest! {
    #[test]
    fn fuzz_raw_reading_never_panics_and_keeps_within_budget(lines in proptest::collection::vec(wire_line(), 0..8)) {
        read_within_budget(&lines)?;
    }

    #[test]
    fn fuzz_the_stdout_tap_keeps_the_same_however_the_bytes_are_cut((lines, pieces) in lines_and_pieces()) {
        let wire: Vec<u8> = lines.iter().flat_map(|l| l.iter().copied().chain([b'\n'])).collect();
        tap_same_however_cut(&wire, &pieces)?;
    }
}

/// The committed cases: what servers wrote on stdout, cut every 1, 3 and 64 bytes.
#[test]
fn fuzz_corpus_wire() {
    for (name, wire) in corpus("wire") {
        let lines: Vec<Vec<u8>> = wire.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
        read_within_budget(&lines).unwrap_or_else(|e| panic!("{name}: {e}"));
        for size in [1, 3, 64] {
            let pieces: Vec<Vec<u8>> = wire.chunks(size).map(<[u8]>::to_vec).collect();
            tap_same_however_cut(&wire, &pieces).unwrap_or_else(|e| panic!("{name}/{size}: {e}"));
        }
    }
}
