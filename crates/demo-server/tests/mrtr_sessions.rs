//! The desk on 2026-07-28 sessions (opened with `server/discover`): it may not
//! send requests, so it asks with `InputRequiredResult` rounds (SEP-2322). The
//! rmcp client's `call_tool` drives the rounds through the scripted handler;
//! `call_tool_once` is used to look at and tamper with a single round.

mod common;

use std::time::Duration;

use common::{Reply, ScriptedClient, call, connect_mrtr, is_error, text};
use countersign_demo_server::{TicketStore, questions, replies, tools};
use rmcp::model::{CallToolRequestParams, CallToolResponse, InputResponses};
use serde_json::{Value, json};

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

#[tokio::test]
async fn session_info_reports_2026_07_28() {
    let store = TicketStore::seeded();
    let running = connect_mrtr(&store, ScriptedClient::new(Reply::Decline)).await;
    let result = running
        .call_tool(CallToolRequestParams::new(tools::SESSION_INFO))
        .await
        .expect("session_info");
    let info: Value = serde_json::from_str(&text(&result)).expect("JSON");
    assert_eq!(info["protocolVersion"], "2026-07-28");
}

#[tokio::test]
async fn delete_accept_true_deletes_through_an_mrtr_round() {
    let store = TicketStore::seeded();
    let client = ScriptedClient::new(Reply::Accept(json!({"confirm": true})));
    let running = connect_mrtr(&store, client.clone()).await;
    let result = running
        .call_tool(call(tools::DELETE_TICKET, json!({"id": "t3"})))
        .await
        .expect("delete_ticket");
    assert_eq!(text(&result), replies::deleted("t3"));
    assert_eq!(store.ids(), ["t1", "t2", "t4", "t5"]);
    let asked = client.asked();
    assert_eq!(asked.len(), 1);
    assert_eq!(
        asked[0]["message"],
        "Delete ticket t3, \"Printer on fire\"? This cannot be undone."
    );
    assert_eq!(asked[0]["requestedSchema"], questions::delete_schema());
}

#[tokio::test]
async fn delete_other_answers_keep_the_ticket() {
    for (reply, expected) in [
        (
            Reply::Accept(json!({"confirm": false})),
            replies::NOT_CONFIRMED,
        ),
        (Reply::Decline, replies::DECLINED),
        (Reply::Cancel, replies::CANCELLED),
    ] {
        let store = TicketStore::seeded();
        let running = connect_mrtr(&store, ScriptedClient::new(reply)).await;
        let result = running
            .call_tool(call(tools::DELETE_TICKET, json!({"id": "t3"})))
            .await
            .expect("delete_ticket");
        assert_eq!(text(&result), expected);
        assert!(store.contains("t3"));
    }
}

#[tokio::test]
async fn first_round_carries_the_question_and_a_sealed_state() {
    let store = TicketStore::seeded();
    let running = connect_mrtr(&store, ScriptedClient::new(Reply::Decline)).await;
    let first = running
        .call_tool_once(call(tools::DELETE_TICKET, json!({"id": "t3"})))
        .await
        .expect("first round");
    let CallToolResponse::InputRequired(round) = first else {
        panic!("expected input_required, got {first:?}");
    };
    let wire = serde_json::to_value(&round).expect("serializes");
    assert_eq!(wire["resultType"], "input_required");
    let question = &wire["inputRequests"]["confirm"];
    assert_eq!(question["method"], "elicitation/create");
    assert_eq!(question["params"]["mode"], "form");
    assert_eq!(
        question["params"]["message"],
        "Delete ticket t3, \"Printer on fire\"? This cannot be undone."
    );
    assert_eq!(
        question["params"]["requestedSchema"],
        questions::delete_schema()
    );
    let state = round.request_state.clone().expect("requestState");

    let mut answers = InputResponses::new();
    answers.insert("confirm".into(), accept(json!({"confirm": true})));

    // An answer nobody asked for (no state) is ignored: the desk asks again.
    let unsolicited = running
        .call_tool_once(
            call(tools::DELETE_TICKET, json!({"id": "t3"})).with_input_responses(answers.clone()),
        )
        .await
        .expect("unsolicited answer");
    assert!(matches!(unsolicited, CallToolResponse::InputRequired(_)));
    assert!(store.contains("t3"));

    // A state issued for t3 does not open for t4.
    let mut wrong_ticket =
        call(tools::DELETE_TICKET, json!({"id": "t4"})).with_input_responses(answers.clone());
    wrong_ticket.request_state = Some(state.clone());
    let CallToolResponse::Complete(result) = running
        .call_tool_once(wrong_ticket)
        .await
        .expect("replayed state")
    else {
        panic!("expected a final result");
    };
    assert!(is_error(&result));
    assert!(store.contains("t4"));

    // A tampered state is refused.
    let mut tampered =
        call(tools::DELETE_TICKET, json!({"id": "t3"})).with_input_responses(answers.clone());
    tampered.request_state = Some(format!("{state}x"));
    let CallToolResponse::Complete(result) = running
        .call_tool_once(tampered)
        .await
        .expect("tampered state")
    else {
        panic!("expected a final result");
    };
    assert!(is_error(&result));
    assert!(text(&result).starts_with("Not deleted: "));
    assert!(store.contains("t3"));

    // The real retry deletes.
    let mut retry = call(tools::DELETE_TICKET, json!({"id": "t3"})).with_input_responses(answers);
    retry.request_state = Some(state);
    let CallToolResponse::Complete(result) = running.call_tool_once(retry).await.expect("retry")
    else {
        panic!("expected a final result");
    };
    assert_eq!(text(&result), "Deleted ticket t3.");
    assert!(!store.contains("t3"));
}

#[tokio::test]
async fn a_retry_without_the_answer_is_a_tool_error() {
    let store = TicketStore::seeded();
    let running = connect_mrtr(&store, ScriptedClient::new(Reply::Decline)).await;
    let CallToolResponse::InputRequired(round) = running
        .call_tool_once(call(tools::DELETE_TICKET, json!({"id": "t3"})))
        .await
        .expect("first round")
    else {
        panic!("expected input_required");
    };
    let mut retry = call(tools::DELETE_TICKET, json!({"id": "t3"}));
    retry.request_state = round.request_state;
    let CallToolResponse::Complete(result) = running.call_tool_once(retry).await.expect("retry")
    else {
        panic!("expected a final result");
    };
    assert!(is_error(&result));
    assert!(store.contains("t3"));
}

#[tokio::test]
async fn book_meeting_echoes_the_answer() {
    let store = TicketStore::seeded();
    let answer = json!({
        "topic": "Retro", "attendee": "bob@example.com", "day": "2026-10-02",
        "start": "2026-10-02T09:30:00+02:00", "room": "Aurora", "priority": "low",
        "equipment": ["speakerphone"]
    });
    let client = ScriptedClient::new(Reply::Accept(answer.clone()));
    let running = connect_mrtr(&store, client.clone()).await;
    let result = running
        .call_tool(CallToolRequestParams::new(tools::BOOK_MEETING))
        .await
        .expect("book_meeting");
    let echoed: Value = serde_json::from_str(&text(&result)).expect("JSON");
    assert_eq!(echoed, answer);
    assert_eq!(
        client.asked()[0]["requestedSchema"],
        questions::book_meeting_schema()
    );
}

#[tokio::test]
async fn connect_account_uses_url_mode() {
    let store = TicketStore::seeded();
    let client = ScriptedClient::new(Reply::Cancel);
    let running = connect_mrtr(&store, client.clone()).await;
    let result = running
        .call_tool(CallToolRequestParams::new(tools::CONNECT_ACCOUNT))
        .await
        .expect("connect_account");
    let reply: Value = serde_json::from_str(&text(&result)).expect("JSON");
    assert_eq!(reply["action"], "cancel");
    assert_eq!(client.asked()[0]["mode"], "url");
}

#[tokio::test]
async fn slow_question_answer_after_the_ttl_is_refused() {
    let store = TicketStore::seeded();
    let running = connect_mrtr(&store, ScriptedClient::new(Reply::Decline)).await;
    let params = call(tools::SLOW_QUESTION, json!({"timeout_ms": 200}));
    let CallToolResponse::InputRequired(round) = running
        .call_tool_once(params.clone())
        .await
        .expect("first round")
    else {
        panic!("expected input_required");
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut answers = InputResponses::new();
    answers.insert("answer".into(), accept(json!({"answer": "late"})));
    let mut retry = params.with_input_responses(answers);
    retry.request_state = round.request_state;
    let CallToolResponse::Complete(result) = running.call_tool_once(retry).await.expect("retry")
    else {
        panic!("expected a final result");
    };
    assert_eq!(text(&result), replies::TIMED_OUT);

    // In time, the answer is used.
    let client_answer = running
        .call_tool(call(tools::SLOW_QUESTION, json!({"timeout_ms": 5000})))
        .await
        .expect("slow_question");
    assert_eq!(text(&client_answer), "No answer: you declined.");
}
