//! The `countersign-demo-server` program itself, over stdio and over
//! Streamable HTTP on a port chosen by the OS.

mod common;

use std::{process::Stdio, time::Duration};

use common::{Reply, ScriptedClient, call, is_error, text};
use countersign_demo_server::tools;
use rmcp::{
    ClientLifecycleMode, ClientServiceExt, ServiceExt,
    model::{CallToolRequestParams, ProtocolVersion},
    transport::StreamableHttpClientTransport,
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

const BIN: &str = env!("CARGO_BIN_EXE_countersign-demo-server");

fn ticket_ids(result: &rmcp::model::CallToolResult) -> Vec<String> {
    let value: Value = serde_json::from_str(&text(result)).expect("JSON text");
    value["tickets"]
        .as_array()
        .expect("tickets")
        .iter()
        .filter_map(|t| t["id"].as_str().map(str::to_owned))
        .collect()
}

fn spawn_stdio() -> Child {
    Command::new(BIN)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("binary starts")
}

#[tokio::test]
async fn stdio_lists_tickets() {
    let mut child = spawn_stdio();
    let stdout = child.stdout.take().expect("stdout");
    let stdin = child.stdin.take().expect("stdin");
    let client = ScriptedClient::new(Reply::Decline)
        .serve((stdout, stdin))
        .await
        .expect("initialize over stdio");
    let result = client
        .call_tool(CallToolRequestParams::new(tools::LIST_TICKETS))
        .await
        .expect("list_tickets");
    assert_eq!(ticket_ids(&result), ["t1", "t2", "t3", "t4", "t5"]);
    client.cancel().await.expect("close");
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits when stdin closes")
        .expect("status");
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn crash_after_ask_exits_with_status_3_while_the_question_is_open() {
    let mut child = spawn_stdio();
    let stdout = child.stdout.take().expect("stdout");
    let stdin = child.stdin.take().expect("stdin");
    let scripted = ScriptedClient::new(Reply::AfterCancel(json!({"confirm": true})));
    let client = scripted
        .clone()
        .serve((stdout, stdin))
        .await
        .expect("initialize over stdio");
    // rmcp's client fails the pending call only after draining its own
    // in-flight handlers for up to 5 s, and the scripted handler is still
    // waiting on the open question; hence the generous timeout.
    let outcome = tokio::time::timeout(
        Duration::from_secs(15),
        client.call_tool(call(tools::CRASH, json!({"after_ask": true}))),
    )
    .await
    .expect("the call ends when the server dies");
    assert!(outcome.is_err(), "no reply from a dead server: {outcome:?}");
    let asked = scripted.asked();
    assert_eq!(asked.len(), 1);
    assert_eq!(
        asked[0]["message"],
        "Delete ticket t1, \"Laptop will not boot\"? This cannot be undone."
    );
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits")
        .expect("status");
    assert_eq!(status.code(), Some(3));
}

/// Starts `--http 127.0.0.1:0` and returns the child and the URL it printed.
async fn spawn_http() -> (Child, String) {
    let mut child = Command::new(BIN)
        .args(["--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("binary starts");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let url = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(line) = lines.next_line().await.expect("stderr readable") {
            if let Some(url) = line.strip_prefix("listening on ") {
                return url.to_owned();
            }
        }
        panic!("the server exited without printing its address");
    })
    .await
    .expect("address printed in time");
    // Keep draining stderr so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

#[tokio::test]
async fn http_lists_tickets_and_elicits_on_a_legacy_session() {
    let (_child, url) = spawn_http().await;
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    let scripted = ScriptedClient::new(Reply::Accept(json!({"confirm": true})));
    let client = scripted
        .clone()
        .serve(StreamableHttpClientTransport::from_uri(url))
        .await
        .expect("initialize over HTTP");
    let result = client
        .call_tool(CallToolRequestParams::new(tools::LIST_TICKETS))
        .await
        .expect("list_tickets");
    assert_eq!(ticket_ids(&result), ["t1", "t2", "t3", "t4", "t5"]);
    let result = client
        .call_tool(call(tools::DELETE_TICKET, json!({"id": "t3"})))
        .await
        .expect("delete_ticket");
    assert_eq!(text(&result), "Deleted ticket t3.");
    assert_eq!(scripted.asked().len(), 1);
    let result = client
        .call_tool(CallToolRequestParams::new(tools::LIST_TICKETS))
        .await
        .expect("list_tickets");
    assert_eq!(ticket_ids(&result), ["t1", "t2", "t4", "t5"]);
    let _ = client.cancel().await;
}

#[tokio::test]
async fn http_serves_mrtr_to_a_2026_07_28_client() {
    let (_child, url) = spawn_http().await;
    let scripted = ScriptedClient::new(Reply::Accept(json!({"confirm": true})));
    let client = scripted
        .clone()
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(url),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover over HTTP");
    let info = client
        .call_tool(CallToolRequestParams::new(tools::SESSION_INFO))
        .await
        .expect("session_info");
    let info: Value = serde_json::from_str(&text(&info)).expect("JSON");
    assert_eq!(info["protocolVersion"], "2026-07-28");
    // 2026-07-28 has no HTTP sessions: every request gets a fresh desk.
    let again = client
        .call_tool(CallToolRequestParams::new(tools::SESSION_INFO))
        .await
        .expect("session_info");
    let again: Value = serde_json::from_str(&text(&again)).expect("JSON");
    assert_ne!(info["sessionId"], again["sessionId"]);
    // Each 2026-07-28 request reaches a fresh desk; the sealed state still opens.
    let result = client
        .call_tool(call(tools::DELETE_TICKET, json!({"id": "t2"})))
        .await
        .expect("delete_ticket");
    assert_eq!(text(&result), "Deleted ticket t2.", "{result:?}");
    assert!(!is_error(&result));
    assert_eq!(scripted.asked().len(), 1);
    let result = client
        .call_tool(CallToolRequestParams::new(tools::LIST_TICKETS))
        .await
        .expect("list_tickets");
    assert_eq!(ticket_ids(&result), ["t1", "t3", "t4", "t5"]);
    let _ = client.cancel().await;
}
