//! Tasks (2025-11-25) from the person's runner: a tool the server lists as requiring task
//! execution is created as a task, its status reaches the caller as progress, a question it
//! asks while it waits is put to the person, and its result comes back; Cancel withdraws the
//! question and the server receives `tasks/cancel`.

use countersign_core::ask::{AskKind, CancelReason};
use countersign_core::session::SessionError;
use countersign_core::{Answer, Outcome, ServerConfig};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

mod common;
use common::{Harness, Person, Reply, WAIT, with_test_timeouts};

fn args(value: Value) -> Option<Map<String, Value>> {
    value.as_object().cloned()
}

/// The progress messages that came, in order.
fn messages(
    progress: &mut tokio::sync::mpsc::UnboundedReceiver<rmcp::model::ProgressNotificationParam>,
) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(p) = progress.try_recv() {
        out.extend(p.message);
    }
    out
}

async fn task_server(label: &str) -> Harness {
    let h = Harness::new(label);
    let script = common::peer_path("task-server.mjs");
    h.start(with_test_timeouts(ServerConfig::stdio(
        "tasks",
        common::node(),
        &[script.as_str()],
    )))
    .await;
    h.wait_for_tool("tasks", "slow_report").await;
    h
}

#[tokio::test(flavor = "multi_thread")]
async fn server_everythings_task_tool_runs_asks_while_it_waits_and_reports() {
    let h = Harness::new("task-everything");
    let script = common::everything_script();
    h.start(with_test_timeouts(ServerConfig::stdio(
        "everything",
        common::node(),
        &[script.as_str(), "stdio"],
    )))
    .await;
    h.wait_for_tool("everything", "simulate-research-query")
        .await;
    let mut person = Person::new(&h.broker);
    let (sink, mut progress) = tokio::sync::mpsc::unbounded_channel();
    let sessions = h.sessions.clone();
    let call = tokio::spawn(async move {
        sessions
            .call_tool_with_progress(
                "everything",
                "simulate-research-query",
                args(json!({"topic": "python", "ambiguous": true})),
                CancellationToken::new(),
                Some(sink),
            )
            .await
    });
    let ask = person.next_ask().await;
    let AskKind::Form { message, .. } = &ask.kind else {
        panic!("a form, got {:?}", ask.kind);
    };
    assert!(message.contains("multiple interpretations"), "{message}");
    let choice =
        ask.request["requestedSchema"]["properties"]["interpretation"]["oneOf"][0]["const"]
            .as_str()
            .expect("the first interpretation")
            .to_owned();
    // The person answers once the run shows it waits for them, as a person looking at the
    // window would: the status is polled, so a quicker answer can end the wait unseen (CI saw
    // that under load).
    let mut seen = Vec::new();
    tokio::time::timeout(WAIT, async {
        while let Some(update) = progress.recv().await {
            let waiting = update
                .message
                .as_deref()
                .is_some_and(|m| m.starts_with("waiting for your answer"));
            seen.extend(update.message);
            if waiting {
                break;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the run never showed that it waits for an answer: {seen:?}"));
    let mut content = Map::new();
    content.insert("interpretation".into(), json!(choice));
    h.broker
        .answer(
            ask.id,
            Answer::Accept {
                content: Some(content),
            },
        )
        .unwrap();
    let result = tokio::time::timeout(WAIT, call)
        .await
        .expect("the task ends in time")
        .unwrap()
        .expect("the task's result");
    let text = Reply::from_result(&result).all_text();
    assert!(text.contains("# Research Report: python"), "{text}");
    assert!(text.contains(&choice), "{text}");
    seen.extend(messages(&mut progress));
    assert!(
        seen.iter().any(|m| m.starts_with("Gathering sources")),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|m| m.starts_with("waiting for your answer")),
        "{seen:?}"
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_is_created_followed_and_its_result_returned() {
    let h = task_server("task-result").await;
    let mut person = Person::new(&h.broker);
    let (sink, mut progress) = tokio::sync::mpsc::unbounded_channel();
    let sessions = h.sessions.clone();
    let call = tokio::spawn(async move {
        sessions
            .call_tool_with_progress(
                "tasks",
                "slow_report",
                args(json!({"topic": "rust"})),
                CancellationToken::new(),
                Some(sink),
            )
            .await
    });
    let ask = person.next_ask().await;
    let mut content = Map::new();
    content.insert("audience".into(), json!("engineers"));
    h.broker
        .answer(
            ask.id,
            Answer::Accept {
                content: Some(content),
            },
        )
        .unwrap();
    let result = tokio::time::timeout(WAIT, call)
        .await
        .unwrap()
        .unwrap()
        .expect("the task's result");
    assert_eq!(
        Reply::from_result(&result).all_text(),
        "report on rust for engineers"
    );
    // Called as a task from the first request (never plainly, to be refused).
    h.wait_stderr(
        "tasks",
        r#""name":"slow_report","arguments":{"topic":"rust"},"task":{"ttl":600000}}"#,
    )
    .await;
    h.wait_stderr("tasks", "got tasks/result").await;
    let seen = messages(&mut progress);
    assert_eq!(
        seen.first().map(String::as_str),
        Some("Gathering sources"),
        "{seen:?}"
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_task_withdraws_its_question_and_cancels_the_task() {
    let h = task_server("task-cancel").await;
    let mut person = Person::new(&h.broker);
    let cancel = CancellationToken::new();
    let sessions = h.sessions.clone();
    let token = cancel.clone();
    let call = tokio::spawn(async move {
        sessions
            .call_tool(
                "tasks",
                "slow_report",
                args(json!({"topic": "rust"})),
                token,
            )
            .await
    });
    let ask = person.next_ask().await;
    cancel.cancel();
    let ended = tokio::time::timeout(WAIT, call).await.unwrap().unwrap();
    assert!(matches!(ended, Err(SessionError::Cancelled)), "{ended:?}");
    assert_eq!(
        person.resolution(ask.id).await,
        Outcome::Cancelled {
            reason: CancelReason::Agent
        }
    );
    h.wait_stderr("tasks", "got tasks/cancel").await;
    h.shutdown().await;
}
