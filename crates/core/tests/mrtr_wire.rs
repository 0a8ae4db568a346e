//! Multi round-trip input requests (2026-07-28) judged as sent, against an SDK-less server
//! (`tests/peers/mrtr-server.mjs`): a `pattern` schema is refused and recorded (rmcp's typed
//! model would drop the keyword and show a form that accepts what the server rejects), two
//! questions in one result, two rounds, a state-only round, a sampling request that refuses
//! the round before the person is asked anything, and a server that never stops asking.

use countersign_core::ask::AskKind;
use countersign_core::ask::audit::AuditRecord;
use countersign_core::{Answer, ServerConfig};
use serde_json::{Value, json};

mod common;
use common::{Harness, Person, with_test_timeouts};

async fn mrtr(label: &str) -> (Harness, std::path::PathBuf) {
    let h = Harness::new(label);
    let log = std::env::temp_dir().join(format!("cs-mrtr-{label}-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let script = common::peer_path("mrtr-server.mjs");
    let mut config = with_test_timeouts(ServerConfig::stdio(
        "mrtr",
        common::node(),
        &[script.as_str()],
    ));
    if let countersign_core::config::TransportConfig::Stdio { env, .. } = &mut config.transport {
        env.insert("MRTR_LOG".into(), log.display().to_string());
    }
    h.start(config).await;
    (h, log)
}

fn calls(log: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn accept(h: &Harness, id: u64, content: Value) {
    h.broker
        .answer(
            id,
            Answer::Accept {
                content: content.as_object().cloned(),
            },
        )
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pattern_schema_is_refused_as_sent_recorded_and_never_shown() {
    let (h, log) = mrtr("pattern").await;
    let ended = tokio::time::timeout(
        common::WAIT,
        h.spawn_call("mrtr", "pattern_code", json!({})),
    )
    .await
    .unwrap()
    .unwrap()
    .expect_err("refused");
    assert!(ended.to_string().contains("pattern"), "{ended}");
    assert!(h.broker.pending().is_empty(), "nothing was shown");
    let audit = std::fs::read_to_string(&h.audit_path).unwrap();
    assert!(
        audit.contains("\"refused\"") && audit.contains("pattern"),
        "{audit}"
    );
    // The server got no answer to a question it never saw answered.
    assert!(
        calls(&log)
            .iter()
            .all(|c| c.get("inputResponses").is_none())
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_questions_in_one_result_are_answered_together() {
    let (h, _log) = mrtr("two").await;
    let mut person = Person::new(&h.broker);
    let call = h.spawn_call("mrtr", "two_at_once", json!({}));
    let first = person.next_ask().await;
    let second = person.next_ask().await;
    for ask in [&first, &second] {
        let AskKind::Form { message, .. } = &ask.kind else {
            panic!("{:?}", ask.kind)
        };
        if message.contains("name") {
            accept(&h, ask.id, json!({"name": "Ada"}));
        } else {
            accept(&h, ask.id, json!({"color": "blue"}));
        }
    }
    let reply = common::finish(call, "two_at_once").await;
    assert_eq!(
        reply.all_text(),
        r#"both [{"action":"accept","content":{"name":"Ada"}},{"action":"accept","content":{"color":"blue"}}]"#
    );
    // The retried call carried both answers and was answered: both are on record as
    // delivered, after their outcomes.
    let (records, _) = h.broker.audit().history().unwrap();
    let order: Vec<(u64, &str)> = records
        .iter()
        .filter_map(|r| match r {
            AuditRecord::Resolved { id, .. } => Some((*id, "resolved")),
            AuditRecord::Delivered { id, .. } => Some((*id, "delivered")),
            _ => None,
        })
        .collect();
    for ask in [&first, &second] {
        let resolved = order.iter().position(|e| *e == (ask.id, "resolved"));
        let delivered = order.iter().position(|e| *e == (ask.id, "delivered"));
        assert!(
            matches!((resolved, delivered), (Some(r), Some(d)) if r < d),
            "{order:?}"
        );
    }
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_rounds_and_a_state_only_round_reach_the_result() {
    let (h, log) = mrtr("rounds").await;
    let mut person = Person::new(&h.broker);
    let call = h.spawn_call("mrtr", "two_rounds", json!({}));
    let country = person.next_ask().await;
    accept(&h, country.id, json!({"country": "France"}));
    let city = person.next_ask().await;
    let AskKind::Form { message, .. } = &city.kind else {
        panic!("{:?}", city.kind)
    };
    assert_eq!(message, "Your city");
    accept(&h, city.id, json!({"city": "Paris"}));
    let reply = common::finish(call, "two_rounds").await;
    assert!(reply.all_text().starts_with("rounds "), "{reply:?}");
    assert!(
        reply.all_text().contains("France") && reply.all_text().contains("Paris"),
        "{reply:?}"
    );

    let reply = h.call("mrtr", "state_only", json!({})).await;
    assert_eq!(reply.all_text(), "state echoed");
    let state_calls: Vec<Value> = calls(&log)
        .into_iter()
        .filter(|c| c["name"] == "state_only")
        .collect();
    assert_eq!(state_calls.len(), 2, "{state_calls:?}");
    assert_eq!(state_calls[1]["requestState"], "warmed");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sampling_request_refuses_the_round_before_anyone_is_asked() {
    let (h, log) = mrtr("sampling").await;
    let ended = tokio::time::timeout(
        common::WAIT,
        h.spawn_call("mrtr", "with_sampling", json!({})),
    )
    .await
    .unwrap()
    .unwrap()
    .expect_err("refused");
    assert!(ended.to_string().contains("sampling"), "{ended}");
    assert!(
        h.broker.pending().is_empty(),
        "the form beside it was never shown"
    );
    let audit = std::fs::read_to_string(&h.audit_path).unwrap_or_default();
    assert!(!audit.contains("\"asked\""), "nobody was asked: {audit}");
    assert_eq!(calls(&log).len(), 1, "no second round was sent");
    h.shutdown().await;
}

/// A round whose one question cannot be asked (a `pattern` schema) is refused before the other
/// is shown: the person answered it before, was told "Sent.", and the answer was then thrown
/// away with the round.
#[tokio::test(flavor = "multi_thread")]
async fn a_round_with_a_question_that_cannot_be_asked_is_refused_before_any_is_shown() {
    let (h, log) = mrtr("pattern-beside").await;
    let call = h.spawn_call("mrtr", "pattern_beside", json!({}));
    let ended = tokio::time::timeout(common::WAIT, call)
        .await
        .expect("refused at once, nobody asked")
        .unwrap()
        .expect_err("refused");
    assert!(ended.to_string().contains("pattern"), "{ended}");
    assert!(
        h.broker.pending().is_empty(),
        "the form beside it was shown"
    );
    let audit = std::fs::read_to_string(&h.audit_path).unwrap_or_default();
    assert!(!audit.contains("\"asked\""), "nobody was asked: {audit}");
    assert_eq!(calls(&log).len(), 1, "no second round was sent");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_never_stops_asking_is_refused_before_a_round_the_call_could_not_use() {
    let (h, log) = mrtr("forever").await;
    let mut person = Person::new(&h.broker);
    let call = h.spawn_call("mrtr", "asks_forever", json!({}));
    // The call is made ten times at most: the person answers the first nine rounds, and the
    // tenth is refused unasked, since no call would carry its answer.
    for round in 1..=9 {
        let ask = person.next_ask().await;
        let AskKind::Form { message, .. } = &ask.kind else {
            panic!("{:?}", ask.kind)
        };
        assert_eq!(message, &format!("Round {round}: once more?"));
        accept(&h, ask.id, json!({"again": true}));
    }
    let ended = tokio::time::timeout(common::WAIT, call)
        .await
        .expect("the call ends without a tenth question")
        .unwrap()
        .expect_err("refused");
    assert!(ended.to_string().contains("after 10 rounds"), "{ended}");
    assert!(h.broker.pending().is_empty(), "{:?}", h.broker.pending());
    let made = calls(&log)
        .into_iter()
        .filter(|c| c["name"] == "asks_forever")
        .count();
    assert_eq!(made, 10);
    h.shutdown().await;
}
