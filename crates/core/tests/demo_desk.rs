//! The reference behaviour, end to end through the core against the demo ticket desk: each
//! of the person's answers, the server withdrawing a question, the server dying mid-question,
//! multi round-trip requests, and legacy and MRTR servers in one manager. Effects are checked
//! in the desk's ticket store, not only in the reply text.

mod common;

use common::demo_server_binary;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use countersign_core::config::ProtocolChoice;
use countersign_core::session::Backoff;
use countersign_core::{
    Answer, AnswerError, Ask, AskEvent, AskKind, AuditLog, Broker, CancelReason, Endpoint, Outcome,
    ServerConfig, SessionManager, SessionState,
};
use countersign_demo_server::{HttpServer, TicketStore, replies, serve_http};
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

fn audit_path(test: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("cs-demo-{test}-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

struct Desk {
    store: TicketStore,
    server: HttpServer,
}

async fn desk() -> Desk {
    let store = TicketStore::seeded();
    let server = serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), store.clone())
        .await
        .expect("demo desk over HTTP");
    Desk { store, server }
}

struct Harness {
    broker: Broker,
    sessions: SessionManager,
    events: broadcast::Receiver<AskEvent>,
    audit: PathBuf,
}

async fn harness(test: &str, servers: Vec<ServerConfig>) -> Harness {
    let audit = audit_path(test);
    let broker = Broker::new(AuditLog::open(&audit).unwrap());
    let events = broker.subscribe();
    let sessions = SessionManager::with_backoff(
        broker.clone(),
        Backoff {
            first: Duration::from_millis(200),
            max: Duration::from_secs(2),
        },
    );
    let names: Vec<String> = servers.iter().map(|s| s.name.clone()).collect();
    sessions.start(servers).await;
    for name in names {
        let state = sessions.wait_ready(&name, WAIT).await;
        assert!(
            matches!(state, Some(SessionState::Ready { .. })),
            "{name}: {state:?}"
        );
    }
    Harness {
        broker,
        sessions,
        events,
        audit,
    }
}

fn http_server(name: &str, desk: &Desk, protocol: ProtocolChoice) -> ServerConfig {
    let mut config = ServerConfig::http(name, &desk.server.url());
    config.protocol = protocol;
    config
}

impl Harness {
    async fn next_ask(&mut self) -> Ask {
        loop {
            match tokio::time::timeout(WAIT, self.events.recv()).await {
                Ok(Ok(AskEvent::Added { ask })) => return *ask,
                Ok(Ok(_)) => continue,
                other => panic!("no ask arrived: {other:?}"),
            }
        }
    }

    async fn next_resolution(&mut self) -> (u64, Outcome) {
        loop {
            match tokio::time::timeout(WAIT, self.events.recv()).await {
                Ok(Ok(AskEvent::Resolved { id, outcome })) => return (id, outcome),
                Ok(Ok(_)) => continue,
                other => panic!("no resolution arrived: {other:?}"),
            }
        }
    }

    /// Starts a tool call in the background; the test answers its asks meanwhile.
    fn call(
        &self,
        server: &str,
        tool: &str,
        args: Value,
    ) -> tokio::task::JoinHandle<Result<String, String>> {
        let sessions = self.sessions.clone();
        let (server, tool) = (server.to_owned(), tool.to_owned());
        tokio::spawn(async move {
            let result = sessions
                .call_tool(
                    &server,
                    &tool,
                    args.as_object().cloned(),
                    CancellationToken::new(),
                )
                .await
                .map_err(|e| e.to_string())?;
            Ok(text_of(&serde_json::to_value(&result.content).unwrap()))
        })
    }
}

fn text_of(content: &Value) -> String {
    content
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

fn obj(v: Value) -> Option<Map<String, Value>> {
    v.as_object().cloned()
}

async fn finish(call: tokio::task::JoinHandle<Result<String, String>>) -> String {
    tokio::time::timeout(WAIT, call)
        .await
        .expect("the call finished")
        .expect("the call task")
        .expect("the call succeeded")
}

/// One delete round against a fresh desk: returns the reply and the ask as shown.
async fn delete_with(answer: Answer, protocol: ProtocolChoice) -> (String, Ask, TicketStore) {
    let desk = desk().await;
    let mut h = harness("delete", vec![http_server("desk", &desk, protocol)]).await;
    let call = h.call("desk", "delete_ticket", json!({"id": "t3"}));
    let ask = h.next_ask().await;
    h.broker.answer(ask.id, answer).expect("answer taken");
    let reply = finish(call).await;
    h.sessions.shutdown().await;
    (reply, ask, desk.store)
}

#[tokio::test(flavor = "multi_thread")]
async fn accept_with_confirm_true_deletes() {
    let (reply, ask, store) = delete_with(
        Answer::Accept {
            content: obj(json!({"confirm": true})),
        },
        ProtocolChoice::Legacy,
    )
    .await;
    assert_eq!(reply, replies::deleted("t3"));
    assert!(!store.contains("t3"));
    assert_eq!(store.ids().len(), 4);
    // The ask says who asks and what.
    assert_eq!(ask.asker.server, "desk");
    assert!(
        matches!(&ask.asker.endpoint, Endpoint::Http { host, .. } if host.starts_with("127.0.0.1:"))
    );
    match &ask.kind {
        AskKind::Form { message, schema } => {
            assert!(message.contains("Delete ticket t3"), "{message}");
            assert_eq!(schema.fields.len(), 1);
            assert_eq!(schema.fields[0].name, "confirm");
            assert!(schema.fields[0].required);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn accept_with_confirm_false_does_not_delete() {
    let (reply, _, store) = delete_with(
        Answer::Accept {
            content: obj(json!({"confirm": false})),
        },
        ProtocolChoice::Legacy,
    )
    .await;
    assert_eq!(reply, replies::NOT_CONFIRMED);
    assert!(store.contains("t3"));
    assert_eq!(store.ids().len(), 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn decline_does_not_delete() {
    let (reply, _, store) = delete_with(Answer::Decline, ProtocolChoice::Legacy).await;
    assert_eq!(reply, replies::DECLINED);
    assert_eq!(store.ids().len(), 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_does_not_delete() {
    let (reply, _, store) = delete_with(Answer::Cancel, ProtocolChoice::Legacy).await;
    assert_eq!(reply, replies::CANCELLED);
    assert_eq!(store.ids().len(), 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_string_where_a_boolean_was_asked_is_never_sent() {
    let desk = desk().await;
    let mut h = harness(
        "string-bool",
        vec![http_server("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let call = h.call("desk", "delete_ticket", json!({"id": "t3"}));
    let ask = h.next_ask().await;
    let refused = h.broker.answer(
        ask.id,
        Answer::Accept {
            content: obj(json!({"confirm": "true"})),
        },
    );
    match refused {
        Err(AnswerError::Invalid { errors }) => {
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert_eq!(errors[0].field, "confirm");
            assert!(!errors[0].message.is_empty());
        }
        other => panic!("expected a field error, got {other:?}"),
    }
    // Nothing went out: the call is still waiting and the ask still open.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!call.is_finished());
    assert_eq!(h.broker.pending().len(), 1);
    assert_eq!(desk.store.ids().len(), 5);
    // The person corrects it by declining; that is what the server gets.
    h.broker.answer(ask.id, Answer::Decline).unwrap();
    assert_eq!(finish(call).await, replies::DECLINED);
    assert_eq!(desk.store.ids().len(), 5);
    h.sessions.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_servers_cancellation_withdraws_the_ask_and_nothing_is_sent_after() {
    let desk = desk().await;
    let mut h = harness(
        "server-timeout",
        vec![http_server("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let call = h.call("desk", "slow_question", json!({"timeout_ms": 500}));
    let ask = h.next_ask().await;
    // The person does not answer; the server gives up and says so.
    let (id, outcome) = h.next_resolution().await;
    assert_eq!(id, ask.id);
    assert_eq!(
        outcome,
        Outcome::Cancelled {
            reason: CancelReason::Server
        }
    );
    assert!(h.broker.pending().is_empty());
    assert_eq!(finish(call).await, replies::TIMED_OUT);
    // A late answer is refused, not sent.
    assert_eq!(
        h.broker.answer(ask.id, Answer::Decline),
        Err(AnswerError::NotPending)
    );
    h.sessions.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_crashing_mid_ask_withdraws_it_as_disconnect() {
    let demo = demo_server_binary();
    let config = ServerConfig::stdio("desk", demo.to_str().unwrap(), &[]);
    let mut h = harness("crash", vec![config]).await;
    let call = h.call("desk", "crash", json!({"after_ask": true}));
    let ask = h.next_ask().await;
    let started = std::time::Instant::now();
    let (id, outcome) = h.next_resolution().await;
    assert_eq!(id, ask.id);
    assert_eq!(
        outcome,
        Outcome::Cancelled {
            reason: CancelReason::Disconnect
        }
    );
    // Withdrawn when the pipe closed, not after rmcp's drain of in-flight handlers (5 s).
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(
        tokio::time::timeout(WAIT, call)
            .await
            .unwrap()
            .unwrap()
            .is_err()
    );
    // The session reconnects to a fresh process.
    let state = h.sessions.wait_ready("desk", WAIT).await;
    assert!(
        matches!(state, Some(SessionState::Ready { .. })),
        "{state:?}"
    );
    h.sessions.shutdown().await;
    // The audit log has the question and its end.
    let (records, _) = countersign_core::ask::audit::read_history(&h.audit).unwrap();
    assert_eq!(records.len(), 2, "{records:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn mrtr_delete_on_a_2026_07_28_session() {
    let desk = desk().await;
    let mut h = harness(
        "mrtr",
        vec![http_server("desk", &desk, ProtocolChoice::Auto)],
    )
    .await;
    match h.sessions.state("desk") {
        Some(SessionState::Ready {
            protocol_version, ..
        }) => assert_eq!(protocol_version, "2026-07-28"),
        other => panic!("{other:?}"),
    }
    let call = h.call("desk", "delete_ticket", json!({"id": "t2"}));
    let ask = h.next_ask().await;
    assert!(matches!(&ask.kind, AskKind::Form { message, .. } if message.contains("t2")));
    h.broker
        .answer(
            ask.id,
            Answer::Accept {
                content: obj(json!({"confirm": true})),
            },
        )
        .unwrap();
    assert_eq!(finish(call).await, replies::deleted("t2"));
    assert!(!desk.store.contains("t2"));

    // Decline on MRTR too.
    let call = h.call("desk", "delete_ticket", json!({"id": "t4"}));
    let ask = h.next_ask().await;
    h.broker.answer(ask.id, Answer::Decline).unwrap();
    assert_eq!(finish(call).await, replies::DECLINED);
    assert!(desk.store.contains("t4"));
    h.sessions.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mrtr_call_cancelled_while_asking_withdraws_as_agent() {
    let desk = desk().await;
    let mut h = harness(
        "mrtr-cancel",
        vec![http_server("desk", &desk, ProtocolChoice::Auto)],
    )
    .await;
    let cancel = CancellationToken::new();
    let sessions = h.sessions.clone();
    let token = cancel.clone();
    let call = tokio::spawn(async move {
        sessions
            .call_tool("desk", "delete_ticket", obj(json!({"id": "t3"})), token)
            .await
    });
    let ask = h.next_ask().await;
    cancel.cancel();
    let (id, outcome) = h.next_resolution().await;
    assert_eq!(id, ask.id);
    assert_eq!(
        outcome,
        Outcome::Cancelled {
            reason: CancelReason::Agent
        }
    );
    assert!(call.await.unwrap().is_err());
    assert!(desk.store.contains("t3"));
    h.sessions.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_legacy_and_an_mrtr_server_in_one_manager() {
    let legacy_desk = desk().await;
    let mrtr_desk = desk().await;
    let mut h = harness(
        "mixed",
        vec![
            http_server("legacy", &legacy_desk, ProtocolChoice::Legacy),
            http_server("modern", &mrtr_desk, ProtocolChoice::Auto),
        ],
    )
    .await;
    let versions: Vec<String> = ["legacy", "modern"]
        .iter()
        .map(|n| match h.sessions.state(n) {
            Some(SessionState::Ready {
                protocol_version, ..
            }) => protocol_version,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(versions, ["2025-11-25", "2026-07-28"]);
    // Both ask at once; the person answers them out of order.
    let legacy_call = h.call("legacy", "delete_ticket", json!({"id": "t1"}));
    let modern_call = h.call("modern", "delete_ticket", json!({"id": "t1"}));
    let first = h.next_ask().await;
    let second = h.next_ask().await;
    let (legacy_ask, modern_ask) = if first.asker.server == "legacy" {
        (first, second)
    } else {
        (second, first)
    };
    assert_eq!(modern_ask.asker.server, "modern");
    h.broker.answer(modern_ask.id, Answer::Decline).unwrap();
    h.broker
        .answer(
            legacy_ask.id,
            Answer::Accept {
                content: obj(json!({"confirm": true})),
            },
        )
        .unwrap();
    assert_eq!(finish(legacy_call).await, replies::deleted("t1"));
    assert_eq!(finish(modern_call).await, replies::DECLINED);
    assert!(!legacy_desk.store.contains("t1"));
    assert!(mrtr_desk.store.contains("t1"));
    h.sessions.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_answers_every_open_ask_cancel() {
    let desk = desk().await;
    let mut h = harness(
        "shutdown",
        vec![http_server("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let call = h.call("desk", "delete_ticket", json!({"id": "t3"}));
    let ask = h.next_ask().await;
    let sessions = h.sessions.clone();
    let shutdown = tokio::spawn(async move { sessions.shutdown().await });
    let (id, outcome) = h.next_resolution().await;
    assert_eq!(id, ask.id);
    assert_eq!(
        outcome,
        Outcome::Cancelled {
            reason: CancelReason::Shutdown
        }
    );
    shutdown.await.unwrap();
    let _ = tokio::time::timeout(WAIT, call).await;
    assert!(desk.store.contains("t3"));
    assert!(matches!(
        h.sessions.state("desk"),
        None | Some(SessionState::Stopped)
    ));
}

/// Schemas outside the subset are refused with -32602 and the reason, never shown, and
/// recorded. `pattern` and integer `enum` are the ones rmcp's typed model would silently
/// drop, so this proves the schema is judged as it was on the wire.
async fn odd_questions_are_refused(mut h: Harness) {
    for (kind, reason) in [
        ("pattern", "pattern"),
        ("nested", "object"),
        ("integer_enum", "enum"),
        ("ipv4", "ipv4"),
    ] {
        let reply = finish(h.call("desk", "odd_question", json!({"kind": kind}))).await;
        let reply: Value =
            serde_json::from_str(&reply).unwrap_or_else(|_| panic!("{kind}: {reply}"));
        assert_eq!(reply["refused"]["code"], json!(-32602), "{kind}: {reply}");
        let message = reply["refused"]["message"].as_str().unwrap();
        assert!(message.contains(reason), "{kind}: {message}");
    }
    // None of them reached the person.
    assert!(h.broker.pending().is_empty());
    assert!(!matches!(h.events.try_recv(), Ok(AskEvent::Added { .. })));
    h.sessions.shutdown().await;
    let (records, _) = countersign_core::ask::audit::read_history(&h.audit).unwrap();
    let refused = records
        .iter()
        .filter(|r| matches!(r, countersign_core::ask::audit::AuditRecord::Refused { .. }))
        .count();
    assert_eq!(refused, 4, "{records:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn out_of_subset_schemas_are_refused_over_http() {
    let desk = desk().await;
    let h = harness(
        "odd-http",
        vec![http_server("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    odd_questions_are_refused(h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn out_of_subset_schemas_are_refused_over_stdio() {
    let demo = demo_server_binary();
    let mut config = ServerConfig::stdio("desk", demo.to_str().unwrap(), &[]);
    config.protocol = ProtocolChoice::Legacy;
    let h = harness("odd-stdio", vec![config]).await;
    odd_questions_are_refused(h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repeated_run_id_runs_the_tool_once() {
    let desk = desk().await;
    let audit = audit_path("run-id");
    let config = countersign_core::LoadedConfig {
        path: PathBuf::from("config.json"),
        servers: vec![http_server("desk", &desk, ProtocolChoice::Legacy)],
        errors: vec![],
        gateway: Default::default(),
    };
    let app = countersign_core::App::start(config, AuditLog::open(&audit).unwrap()).await;
    app.sessions().wait_ready("desk", WAIT).await;
    let first = app
        .run_tool("run-1", "desk", "purge_spam", json!({}))
        .await
        .unwrap();
    assert!(!first.is_error);
    assert!(!desk.store.contains("t5"));
    // The same run re-sent (a webview reload re-invokes in-flight commands) is refused.
    let again = app.run_tool("run-1", "desk", "purge_spam", json!({})).await;
    assert!(
        matches!(again, Err(countersign_core::AppError::Session { .. })),
        "{again:?}"
    );
    assert!(
        app.run_tool("run-2", "desk", "list_tickets", json!({}))
            .await
            .is_ok()
    );
    // Arguments that do not fit the input schema never reach the server.
    let bad = app
        .run_tool("run-3", "desk", "delete_ticket", json!({"id": 3}))
        .await;
    assert!(
        matches!(
            bad,
            Err(countersign_core::AppError::InvalidArguments { .. })
        ),
        "{bad:?}"
    );
    app.shutdown().await;
}

/// The person's own run, cancelled while its server asks: the question is withdrawn (as the
/// caller's), the run ends as cancelled, and the ticket stays.
#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_run_withdraws_its_question_and_keeps_the_ticket() {
    let desk = desk().await;
    let audit = audit_path("cancel-run");
    let config = countersign_core::LoadedConfig {
        path: PathBuf::from("config.json"),
        servers: vec![http_server("desk", &desk, ProtocolChoice::Legacy)],
        errors: vec![],
        gateway: Default::default(),
    };
    let app = countersign_core::App::start(config, AuditLog::open(&audit).unwrap()).await;
    app.sessions().wait_ready("desk", WAIT).await;
    let mut events = app.broker().subscribe();
    let running = {
        let app = app.clone();
        tokio::spawn(async move {
            app.run_tool("run-c", "desk", "delete_ticket", json!({"id": "t1"}))
                .await
        })
    };
    let asked = loop {
        match tokio::time::timeout(WAIT, events.recv()).await {
            Ok(Ok(AskEvent::Added { ask })) => break *ask,
            Ok(Ok(_)) => continue,
            other => panic!("no question: {other:?}"),
        }
    };
    assert!(app.cancel_run("run-c"), "the run was in flight");
    let ended = tokio::time::timeout(WAIT, running).await.unwrap().unwrap();
    assert!(ended.is_err(), "{ended:?}");
    let outcome = loop {
        match tokio::time::timeout(WAIT, events.recv()).await {
            Ok(Ok(AskEvent::Resolved { id, outcome })) if id == asked.id => break outcome,
            Ok(Ok(_)) => continue,
            other => panic!("the question stayed: {other:?}"),
        }
    };
    assert!(
        matches!(
            outcome,
            Outcome::Cancelled {
                reason: CancelReason::Agent
            }
        ),
        "{outcome:?}"
    );
    assert!(desk.store.contains("t1"), "nothing was deleted");
    assert!(!app.cancel_run("run-c"), "an ended run cannot be cancelled");
    app.shutdown().await;
}

/// The config file edited while the app runs: a server added runs at once, a broken edit is
/// not applied (the app says where the error is and runs on as it was), and a server removed
/// stops.
#[tokio::test(flavor = "multi_thread")]
async fn edits_to_the_config_file_apply_while_the_app_runs_and_a_broken_one_changes_nothing() {
    let desk = desk().await;
    let dir = std::env::temp_dir().join(format!("cs-demo-reload-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config.json");
    let config_with = |names: &[&str]| {
        let servers: Map<String, Value> = names
            .iter()
            .map(|n| (n.to_string(), json!({"url": desk.server.url()})))
            .collect();
        serde_json::to_string_pretty(&json!({"mcpServers": servers})).unwrap()
    };
    std::fs::write(&path, config_with(&["desk"])).unwrap();
    let app = countersign_core::App::start(
        countersign_core::config::load(&path),
        AuditLog::open(dir.join("audit.jsonl")).unwrap(),
    )
    .await;
    let mut changes = app.config_changes();
    let watcher = app.clone();
    tokio::spawn(async move { watcher.watch_config(Duration::from_millis(50)).await });
    let names = |app: &countersign_core::App| -> Vec<String> {
        app.servers().into_iter().map(|s| s.name).collect()
    };
    let next_change = async |changes: &mut tokio::sync::watch::Receiver<u64>| {
        tokio::time::timeout(WAIT, changes.changed())
            .await
            .expect("the edit seen in time")
            .unwrap();
    };
    assert!(app.sessions().wait_ready("desk", WAIT).await.is_some());

    std::fs::write(&path, config_with(&["desk", "desk two"])).unwrap();
    next_change(&mut changes).await;
    assert_eq!(names(&app), ["desk", "desk two"]);
    assert!(matches!(
        app.sessions().wait_ready("desk two", WAIT).await,
        Some(countersign_core::SessionState::Ready { .. })
    ));

    // A trailing comma on line 3: nothing changes, and the person is told where.
    std::fs::write(
        &path,
        "{\n  \"mcpServers\": {\n    \"desk\": {\"url\": \"x\"},\n  }\n}\n",
    )
    .unwrap();
    next_change(&mut changes).await;
    let info = app.config_info();
    assert!(info.edit_rejected);
    assert_eq!(info.errors[0].line, 4, "{:?}", info.errors);
    assert_eq!(names(&app), ["desk", "desk two"]);
    assert!(matches!(
        app.sessions().state("desk two"),
        Some(countersign_core::SessionState::Ready { .. })
    ));

    std::fs::write(&path, config_with(&["desk two"])).unwrap();
    next_change(&mut changes).await;
    assert!(!app.config_info().edit_rejected);
    assert!(app.config_info().errors.is_empty());
    assert_eq!(names(&app), ["desk two"]);
    assert_eq!(app.sessions().state("desk"), None);
    app.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
