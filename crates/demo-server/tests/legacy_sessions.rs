//! The desk on legacy sessions (`initialize`, protocol 2025-11-25): questions
//! go out as `elicitation/create` requests and the effects are checked on the
//! store directly.

mod common;

use std::time::Duration;

use common::{Reply, ScriptedClient, call, connect_legacy, is_error, text};
use countersign_demo_server::{TicketStore, questions, replies, tools};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

async fn delete_t3(reply: Reply) -> (TicketStore, ScriptedClient, rmcp::model::CallToolResult) {
    let store = TicketStore::seeded();
    let client = ScriptedClient::new(reply);
    let running = connect_legacy(&store, client.clone()).await;
    let result = running
        .call_tool(call(tools::DELETE_TICKET, json!({"id": "t3"})))
        .await
        .expect("delete_ticket answers");
    (store, client, result)
}

#[tokio::test]
async fn tools_are_listed_with_their_annotations() {
    let store = TicketStore::seeded();
    let running = connect_legacy(&store, ScriptedClient::new(Reply::Decline)).await;
    let tools = running.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "session_info",
            "list_tickets",
            "delete_ticket",
            "purge_spam",
            "book_meeting",
            "connect_account",
            "slow_question",
            "odd_question",
            "crash"
        ]
    );
    let annotations = |name: &str| {
        tools
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.annotations.clone())
            .expect("annotations")
    };
    assert_eq!(annotations("list_tickets").read_only_hint, Some(true));
    assert_eq!(annotations("delete_ticket").read_only_hint, Some(false));
    assert_eq!(annotations("delete_ticket").destructive_hint, Some(true));
    assert_eq!(annotations("purge_spam").read_only_hint, Some(true));
    let info = running.peer_info().expect("server info");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("countersign-demo")
    );
    assert!(
        info.instructions
            .as_deref()
            .is_some_and(|i| i.contains("ticket desk"))
    );
}

#[tokio::test]
async fn list_tickets_returns_ids_as_structured_content() {
    let store = TicketStore::seeded();
    let running = connect_legacy(&store, ScriptedClient::new(Reply::Decline)).await;
    let result = running
        .call_tool(CallToolRequestParams::new(tools::LIST_TICKETS))
        .await
        .expect("list_tickets");
    let structured = result
        .structured_content
        .clone()
        .expect("structured content");
    let ids: Vec<&str> = structured["tickets"]
        .as_array()
        .expect("tickets array")
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(ids, ["t1", "t2", "t3", "t4", "t5"]);
    let from_text: Value = serde_json::from_str(&text(&result)).expect("text is JSON");
    assert_eq!(from_text, structured);
}

#[tokio::test]
async fn accept_with_confirm_true_deletes() {
    let (store, client, result) = delete_t3(Reply::Accept(json!({"confirm": true}))).await;
    assert_eq!(text(&result), "Deleted ticket t3.");
    assert!(!is_error(&result));
    assert_eq!(store.ids(), ["t1", "t2", "t4", "t5"]);
    let asked = client.asked();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["mode"], "form");
    assert_eq!(
        asked[0]["message"],
        "Delete ticket t3, \"Printer on fire\"? This cannot be undone."
    );
    assert_eq!(asked[0]["requestedSchema"], questions::delete_schema());
    assert_eq!(
        asked[0]["requestedSchema"]["properties"]["confirm"]["title"],
        "Confirm deletion"
    );
}

#[tokio::test]
async fn accept_with_confirm_false_keeps_the_ticket() {
    let (store, _, result) = delete_t3(Reply::Accept(json!({"confirm": false}))).await;
    assert_eq!(text(&result), replies::NOT_CONFIRMED);
    assert!(store.contains("t3"));
}

#[tokio::test]
async fn accept_with_a_truthy_string_or_no_content_keeps_the_ticket() {
    let (store, _, result) = delete_t3(Reply::Accept(json!({"confirm": "true"}))).await;
    assert_eq!(text(&result), replies::NOT_CONFIRMED);
    assert!(store.contains("t3"));
    let (store, _, result) = delete_t3(Reply::AcceptEmpty).await;
    assert_eq!(text(&result), replies::NOT_CONFIRMED);
    assert!(store.contains("t3"));
}

#[tokio::test]
async fn decline_keeps_the_ticket() {
    let (store, _, result) = delete_t3(Reply::Decline).await;
    assert_eq!(text(&result), "Not deleted: you declined.");
    assert!(!is_error(&result));
    assert_eq!(store.ids().len(), 5);
}

#[tokio::test]
async fn cancel_keeps_the_ticket() {
    let (store, _, result) = delete_t3(Reply::Cancel).await;
    assert_eq!(text(&result), "Not deleted: the question was cancelled.");
    assert_eq!(store.ids().len(), 5);
}

#[tokio::test]
async fn a_client_error_is_a_tool_error_and_deletes_nothing() {
    let (store, _, result) = delete_t3(Reply::Error).await;
    assert!(is_error(&result));
    assert!(
        text(&result).starts_with("Not deleted: "),
        "{}",
        text(&result)
    );
    assert!(
        text(&result).contains("scripted failure"),
        "{}",
        text(&result)
    );
    assert_eq!(store.ids().len(), 5);
}

#[tokio::test]
async fn unknown_id_and_bad_arguments_are_tool_errors_without_asking() {
    let store = TicketStore::seeded();
    let client = ScriptedClient::new(Reply::Accept(json!({"confirm": true})));
    let running = connect_legacy(&store, client.clone()).await;
    for arguments in [
        json!({"id": "t9"}),
        json!({"id": 3}),
        json!({}),
        json!({"id": "t3", "force": true}),
    ] {
        let result = running
            .call_tool(call(tools::DELETE_TICKET, arguments.clone()))
            .await
            .expect("tool result, not a protocol error");
        assert!(is_error(&result), "{arguments} should be a tool error");
    }
    let unknown = running
        .call_tool(call(tools::DELETE_TICKET, json!({"id": "t9"})))
        .await
        .expect("tool result");
    assert_eq!(text(&unknown), "No ticket with id \"t9\".");
    assert!(client.asked().is_empty());
    assert_eq!(store.ids().len(), 5);
}

#[tokio::test]
async fn unknown_tool_is_a_protocol_error() {
    let store = TicketStore::seeded();
    let running = connect_legacy(&store, ScriptedClient::new(Reply::Decline)).await;
    assert!(
        running
            .call_tool(CallToolRequestParams::new("no_such_tool"))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn purge_spam_deletes_spam_without_asking() {
    let store = TicketStore::seeded();
    let client = ScriptedClient::new(Reply::Decline);
    let running = connect_legacy(&store, client.clone()).await;
    let result = running
        .call_tool(CallToolRequestParams::new(tools::PURGE_SPAM))
        .await
        .expect("purge_spam");
    let structured = result.structured_content.expect("structured");
    assert_eq!(structured["deleted"][0]["id"], "t5");
    assert_eq!(structured["deleted"].as_array().map(Vec::len), Some(1));
    assert_eq!(store.ids(), ["t1", "t2", "t3", "t4"]);
    assert!(client.asked().is_empty());
}

fn meeting_answer() -> Value {
    json!({
        "topic": "Quarterly review",
        "attendee": "ada@example.com",
        "agenda": "https://wiki.example.com/q3",
        "day": "2026-09-01",
        "start": "2026-09-01T10:00:00Z",
        "durationHours": 1.5,
        "attendeeCount": 4,
        "sendInvites": false,
        "room": "Cosmos",
        "priority": "high",
        "timezone": "Europe/Paris",
        "equipment": ["projector", "whiteboard"],
        "catering": ["coffee", "snacks"]
    })
}

#[tokio::test]
async fn book_meeting_sends_every_field_kind_and_echoes_the_answer() {
    let store = TicketStore::seeded();
    let client = ScriptedClient::new(Reply::Accept(meeting_answer()));
    let running = connect_legacy(&store, client.clone()).await;
    let result = running
        .call_tool(CallToolRequestParams::new(tools::BOOK_MEETING))
        .await
        .expect("book_meeting");
    assert!(!is_error(&result));
    let echoed: Value = serde_json::from_str(&text(&result)).expect("reply is JSON");
    assert_eq!(echoed, meeting_answer());

    // What the client received, after rmcp parsed it into its typed model and
    // this test serialized it back: every keyword made it through.
    let asked = client.asked();
    assert_eq!(
        asked[0]["requestedSchema"],
        questions::book_meeting_schema()
    );
    let props = &asked[0]["requestedSchema"]["properties"];
    assert_eq!(
        props["timezone"]["enumNames"],
        json!(["UTC", "Paris", "New York"])
    );
    assert_eq!(props["catering"]["items"]["anyOf"][2]["const"], "snacks");
    assert_eq!(props["priority"]["oneOf"][0]["title"], "Low");
}

#[tokio::test]
async fn book_meeting_decline_and_cancel_reply_with_the_action() {
    let store = TicketStore::seeded();
    let client = ScriptedClient::new(Reply::Decline);
    let running = connect_legacy(&store, client.clone()).await;
    let result = running
        .call_tool(CallToolRequestParams::new(tools::BOOK_MEETING))
        .await
        .expect("book_meeting");
    assert_eq!(text(&result), "No meeting booked (action: decline).");
    client.set_reply(Reply::Cancel);
    let result = running
        .call_tool(CallToolRequestParams::new(tools::BOOK_MEETING))
        .await
        .expect("book_meeting");
    assert_eq!(text(&result), "No meeting booked (action: cancel).");
}

#[tokio::test]
async fn connect_account_asks_in_url_mode() {
    let store = TicketStore::seeded();
    let client = ScriptedClient::new(Reply::Accept(json!({})));
    let running = connect_legacy(&store, client.clone()).await;
    let info = running
        .call_tool(CallToolRequestParams::new(tools::SESSION_INFO))
        .await
        .expect("session_info");
    let session: Value = serde_json::from_str(&text(&info)).expect("JSON");
    let result = running
        .call_tool(call(tools::CONNECT_ACCOUNT, json!({"service": "mail"})))
        .await
        .expect("connect_account");
    let reply: Value = serde_json::from_str(&text(&result)).expect("JSON");
    assert_eq!(reply, json!({"service": "mail", "action": "accept"}));
    let asked = client.asked();
    assert_eq!(asked[0]["mode"], "url");
    let url = asked[0]["url"].as_str().expect("url");
    let session_id = session["sessionId"].as_str().expect("session id");
    assert_eq!(
        url,
        format!("https://auth.example.com/connect?session={session_id}&service=mail")
    );
    assert!(
        asked[0]["elicitationId"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );
    assert!(
        asked[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("mail"))
    );

    client.set_reply(Reply::Decline);
    let result = running
        .call_tool(CallToolRequestParams::new(tools::CONNECT_ACCOUNT))
        .await
        .expect("connect_account");
    let reply: Value = serde_json::from_str(&text(&result)).expect("JSON");
    assert_eq!(reply, json!({"service": "calendar", "action": "decline"}));
}

#[tokio::test]
async fn slow_question_cancels_and_ignores_a_late_answer() {
    let store = TicketStore::seeded();
    let client = ScriptedClient::new(Reply::AfterCancel(json!({"answer": "too late"})));
    let running = connect_legacy(&store, client.clone()).await;
    let started = std::time::Instant::now();
    let result = running
        .call_tool(call(tools::SLOW_QUESTION, json!({"timeout_ms": 300})))
        .await
        .expect("slow_question");
    assert_eq!(text(&result), "Timed out waiting for an answer.");
    assert!(!is_error(&result));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        client.wait_cancelled(1, Duration::from_secs(5)).await,
        "the client saw notifications/cancelled for the question"
    );
    // The late answer went out after the cancellation; the desk still says it
    // timed out and a later call works normally.
    client.set_reply(Reply::Accept(json!({"answer": "42"})));
    let result = running
        .call_tool(CallToolRequestParams::new(tools::SLOW_QUESTION))
        .await
        .expect("slow_question");
    assert_eq!(text(&result), "You answered: 42");
}

#[tokio::test]
async fn slow_question_rejects_a_bad_timeout() {
    let store = TicketStore::seeded();
    let client = ScriptedClient::new(Reply::Decline);
    let running = connect_legacy(&store, client.clone()).await;
    for bad in [json!(0), json!(-5), json!("2000"), json!(1.5)] {
        let result = running
            .call_tool(call(tools::SLOW_QUESTION, json!({"timeout_ms": bad})))
            .await
            .expect("tool result");
        assert!(is_error(&result), "timeout_ms {bad} should be rejected");
    }
    assert!(client.asked().is_empty());
}

#[tokio::test]
async fn each_connection_has_its_own_session_id() {
    let store = TicketStore::seeded();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let running = connect_legacy(&store, ScriptedClient::new(Reply::Decline)).await;
        let result = running
            .call_tool(CallToolRequestParams::new(tools::SESSION_INFO))
            .await
            .expect("session_info");
        let info: Value = serde_json::from_str(&text(&result)).expect("JSON");
        assert_eq!(info["protocolVersion"], "2025-11-25");
        ids.push(info["sessionId"].as_str().expect("id").to_owned());
    }
    assert_ne!(ids[0], ids[1]);
}

#[tokio::test]
async fn crash_is_disabled_in_process() {
    let store = TicketStore::seeded();
    let client = ScriptedClient::new(Reply::Decline);
    let running = connect_legacy(&store, client.clone()).await;
    let result = running
        .call_tool(call(tools::CRASH, json!({"after_ask": true})))
        .await
        .expect("crash answers with an error");
    assert!(is_error(&result));
    assert_eq!(text(&result), replies::CRASH_DISABLED);
    assert!(client.asked().is_empty());
}

#[tokio::test]
async fn cancelling_the_call_withdraws_the_question() {
    use rmcp::model::{CallToolRequest, ClientRequest};
    use rmcp::service::PeerRequestOptions;

    let store = TicketStore::seeded();
    let client = ScriptedClient::new(Reply::AfterCancel(json!({"confirm": true})));
    let running = connect_legacy(&store, client.clone()).await;
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(call(
        tools::DELETE_TICKET,
        json!({"id": "t3"}),
    )));
    let handle = running
        .peer()
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .expect("call sent");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while client.asked().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "question never arrived"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    handle
        .cancel(Some("agent gave up".into()))
        .await
        .expect("cancel sent");
    assert!(
        client.wait_cancelled(1, Duration::from_secs(5)).await,
        "the desk withdrew its question"
    );
    // The late accept that follows the withdrawal must not delete anything.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(store.contains("t3"));
}
