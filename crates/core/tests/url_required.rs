//! `URLElicitationRequiredError` (-32042) from real servers, in the app's sessions: the
//! addresses become URL questions; once opened, the call is made again when the server reports
//! them complete (the TypeScript SDK's `createElicitationCompletionNotifier`) or when the person
//! says they are done (server-everything's error path, which sends no completion); a decline
//! ends the call in words, and nothing is retried.

use countersign_core::ask::AskKind;
use countersign_core::{Answer, AskEvent, Outcome, ServerConfig};
use serde_json::json;

mod common;
use common::{Harness, Person, finish, with_test_timeouts};

async fn ts(label: &str) -> Harness {
    let h = Harness::new(label);
    h.start(common::ts_stdio_config("ts")).await;
    h
}

#[tokio::test(flavor = "multi_thread")]
async fn the_address_is_asked_for_and_the_call_made_again_once_the_server_reports_it_complete() {
    let h = ts("url-required-complete").await;
    let mut person = Person::new(&h.broker);
    let call = h.spawn_call(
        "ts",
        "url_required",
        json!({"url": "https://calendar.example.com/connect", "complete_after_ms": 300}),
    );
    let ask = person.next_ask().await;
    let AskKind::Url { host, url, .. } = &ask.kind else {
        panic!("a URL question, got {:?}", ask.kind);
    };
    assert_eq!(host, "calendar.example.com");
    assert_eq!(url, "https://calendar.example.com/connect");
    h.broker
        .answer(ask.id, Answer::Accept { content: None })
        .unwrap();
    // The person never says they are done: the server's completion makes the call again.
    let reply = finish(call, "url_required").await;
    assert_eq!(reply.all_text(), "done after the URL");
    // No response carries this answer; it took effect in the call made again, and the log
    // says so (History would otherwise doubt that it reached the server).
    let (records, _) = h.broker.audit().history().unwrap();
    assert!(
        records.iter().any(
            |r| matches!(r, countersign_core::ask::audit::AuditRecord::Delivered { id, .. } if *id == ask.id)
        ),
        "{records:?}"
    );
    h.wait_stderr("ts", "sent elicitation complete").await;
    // If Countersign asked "done?", that question went away by itself.
    for event in person.drain() {
        if let AskEvent::Resolved { outcome, .. } = event {
            assert!(
                !matches!(outcome, Outcome::Declined),
                "nothing declined: {outcome:?}"
            );
        }
    }
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_declined_address_ends_the_call_in_words_and_it_is_not_made_again() {
    let h = ts("url-required-declined").await;
    let mut person = Person::new(&h.broker);
    let call = h.spawn_call(
        "ts",
        "url_required",
        json!({"url": "https://calendar.example.com/connect"}),
    );
    let ask = person.next_ask().await;
    assert!(matches!(ask.kind, AskKind::Url { .. }));
    h.broker.answer(ask.id, Answer::Decline).unwrap();
    let ended = tokio::time::timeout(common::WAIT, call)
        .await
        .unwrap()
        .unwrap()
        .expect_err("declined");
    assert!(ended.to_string().contains("declined"), "{ended}");
    // The tool ran once: a second run would have answered "done after the URL".
    let again = h
        .call("ts", "url_required", json!({"url": "https://x.example"}))
        .await;
    assert_eq!(again.all_text(), "done after the URL");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_address_that_is_never_opened_is_declined_unasked() {
    let h = ts("url-required-javascript").await;
    let call = h.spawn_call("ts", "url_required", json!({"url": "javascript:alert(1)"}));
    let ended = tokio::time::timeout(common::WAIT, call)
        .await
        .unwrap()
        .unwrap()
        .expect_err("never opened");
    assert!(ended.to_string().contains("declined"), "{ended}");
    assert!(h.broker.pending().is_empty(), "nothing was shown");
    h.shutdown().await;
}

/// server-everything's error path: the prerequisite address, then (no completion comes) the
/// person says they are done, then the retried call asks in URL mode as usual.
#[tokio::test(flavor = "multi_thread")]
async fn server_everything_error_path_retries_after_the_person_says_done() {
    let h = Harness::new("url-required-everything");
    let script = common::everything_script();
    h.start(with_test_timeouts(ServerConfig::stdio(
        "everything",
        common::node(),
        &[script.as_str(), "stdio"],
    )))
    .await;
    h.wait_for_tool("everything", "trigger-url-elicitation")
        .await;
    let mut person = Person::new(&h.broker);
    let call = h.spawn_call(
        "everything",
        "trigger-url-elicitation",
        json!({"url": "https://pay.example.com/checkout", "errorPath": true}),
    );
    // The prerequisite: a URL question.
    let prerequisite = person.next_ask().await;
    assert!(matches!(prerequisite.kind, AskKind::Url { .. }));
    h.broker
        .answer(prerequisite.id, Answer::Accept { content: None })
        .unwrap();
    // No completion comes: Countersign asks whether the person is done.
    let done = person.next_ask().await;
    let AskKind::Form { message, .. } = &done.kind else {
        panic!("a done question, got {:?}", done.kind);
    };
    assert!(message.contains("press Submit"), "{message}");
    h.broker
        .answer(
            done.id,
            Answer::Accept {
                content: Some(Default::default()),
            },
        )
        .unwrap();
    // The same call again, which now asks in URL mode.
    let retried = person.next_ask().await;
    let AskKind::Url { url, .. } = &retried.kind else {
        panic!("the retried call's URL question, got {:?}", retried.kind);
    };
    assert_eq!(url, "https://pay.example.com/checkout");
    h.broker
        .answer(retried.id, Answer::Accept { content: None })
        .unwrap();
    let reply = finish(call, "trigger-url-elicitation").await;
    assert!(!reply.is_error, "{reply:?}");
    assert!(reply.all_text().contains("accept"), "{reply:?}");
    h.shutdown().await;
}

/// A server's `roots/list` in the app's own sessions is refused (-32601), not answered with
/// an empty list: Countersign declared no roots and claims nothing about the person's files.
#[tokio::test(flavor = "multi_thread")]
async fn a_servers_roots_request_is_refused_not_answered_empty() {
    let h = Harness::new("roots-refused");
    let log = std::env::temp_dir().join(format!("cs-roots-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let script = common::peer_path("hostile-server.mjs");
    let mut config = with_test_timeouts(ServerConfig::stdio(
        "hostile",
        common::node(),
        &[script.as_str()],
    ));
    config.protocol = countersign_core::config::ProtocolChoice::Legacy;
    if let countersign_core::config::TransportConfig::Stdio { env, .. } = &mut config.transport {
        env.insert("HOSTILE_LOG".into(), log.display().to_string());
    }
    h.start(config).await;
    let reply = h.call("hostile", "ask_roots", json!({})).await;
    assert_eq!(reply.all_text(), "asked");
    let answer = tokio::time::timeout(common::WAIT, async {
        loop {
            let found = std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .find(|m| m["id"] == "roots-1" && m.get("method").is_none());
            if let Some(found) = found {
                return found;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the client answered roots/list");
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    assert!(answer.get("result").is_none(), "{answer}");
    h.shutdown().await;
}

/// A server's `sampling/createMessage` in the app's own sessions is refused (-32601) with the
/// reason, recorded, and nobody is asked: Countersign has no model of its own.
#[tokio::test(flavor = "multi_thread")]
async fn a_servers_sampling_request_is_refused_with_a_reason_in_the_apps_sessions() {
    let h = ts("sampling-refused").await;
    let mut person = Person::new(&h.broker);
    let reply = h
        .call("ts", "ask_model", json!({"prompt": "What is 2+2?"}))
        .await;
    let text = reply.all_text();
    assert!(text.contains("-32601"), "{text}");
    assert!(
        text.contains("Countersign's own sessions do not offer"),
        "{text}"
    );
    assert!(person.drain().is_empty(), "nobody was asked");
    let log = std::fs::read_to_string(&h.audit_path).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("refused") && l.contains("sampling") && l.contains("What is 2+2?")),
        "{log}"
    );
    h.shutdown().await;
}

/// A URL question the person opened: when the server reports it finished, the person is told
/// (an event for the window), naming the server and the host.
#[tokio::test(flavor = "multi_thread")]
async fn the_person_is_told_when_the_server_reports_an_opened_address_finished() {
    let h = ts("url-completed").await;
    let mut person = Person::new(&h.broker);
    let call = h.spawn_call(
        "ts",
        "open_url",
        json!({"url": "https://calendar.example.com/connect", "complete_after_ms": 200}),
    );
    let ask = person.next_ask().await;
    h.broker
        .answer(ask.id, Answer::Accept { content: None })
        .unwrap();
    finish(call, "open_url").await;
    let completed = tokio::time::timeout(common::WAIT, async {
        loop {
            for event in person.drain() {
                if let AskEvent::UrlCompleted { id, server, host } = event {
                    return (id, server, host);
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the completion reached the person");
    assert_eq!(
        completed,
        (ask.id, "ts".to_owned(), "calendar.example.com".to_owned())
    );
    h.shutdown().await;
}
