//! The fault matrix: a server that breaks while a question to the person is open, on stdio
//! (`tests/peers/fault-server.mjs`) and over Streamable HTTP (`fault-http-server.mjs`). Each row says what the person sees, what the server
//! receives, what the audit log holds, and whether that is right: the question ends once,
//! as a no or the person's own answer, the call ends (never hangs), the session comes back,
//! and the log holds the outcome. The table is printed (`--no-capture`, or `make faults`)
//! before any row fails the test.

mod common;

use std::time::{Duration, Instant};

use common::{Person, node, peer_path};
use countersign_core::ask::audit::{AuditRecord, read_history};
use countersign_core::session::Backoff;
use countersign_core::{
    Answer, AuditLog, Broker, CancelReason, Outcome, ServerConfig, SessionManager, SessionState,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// How long the server has to answer a request (and a ping).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
const SURVIVABLE_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// A row whose call has not ended by now has hung.
const CALL_DEADLINE: Duration = Duration::from_secs(20);

/// How a server is reached, and what its row asks of the outcome.
#[derive(Clone, Copy)]
enum Peer {
    Stdio,
    Http,
}

struct Row {
    fault: &'static str,
    person: String,
    server: String,
    audit: String,
    pass: bool,
}

/// The HTTP fault server, running; killed when dropped.
struct HttpFaults {
    child: tokio::process::Child,
    url: String,
}

async fn http_faults(server_log: &std::path::Path) -> HttpFaults {
    let (child, url) = common::node_peer_at_url(
        "fault-http-server.mjs",
        &[],
        &[("FAULT_SERVER_LOG", server_log)],
    )
    .await;
    HttpFaults { child, url }
}

/// `survivable`: the server carries on after the fault, so the call must finish with the
/// person's answer. `comes_back`: the session must be ready again afterwards (a server that
/// stays broken leaves it reconnecting, which the row shows).
async fn row(fault: &'static str, peer: Peer, survivable: bool, comes_back: bool) -> Row {
    let dir =
        std::env::temp_dir().join(format!("countersign-faults-{fault}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let audit_path = dir.join("audit.jsonl");
    let server_log = dir.join("server.log");
    let broker = Broker::new(AuditLog::open(&audit_path).unwrap());
    let sessions = SessionManager::with_timing(
        broker.clone(),
        Backoff {
            first: Duration::from_millis(200),
            max: Duration::from_secs(1),
        },
        Duration::from_millis(300),
    );
    let mut person = Person::new(&broker);
    let mut http = None;
    let mut config = match peer {
        Peer::Stdio => {
            let mut config =
                ServerConfig::stdio("faulty", node(), &[&peer_path("fault-server.mjs")]);
            if let countersign_core::config::TransportConfig::Stdio { env, .. } =
                &mut config.transport
            {
                env.insert(
                    "FAULT_SERVER_LOG".into(),
                    server_log.to_string_lossy().into_owned(),
                );
            }
            config
        }
        Peer::Http => {
            let server = http_faults(&server_log).await;
            let config = ServerConfig::http("faulty", &server.url);
            http = Some(server);
            config
        }
    };
    config.protocol = countersign_core::config::ProtocolChoice::Legacy;
    // A server that carries on is given the ping deadline of a real session (10 s): draining
    // a 64 MiB line from it took 3 s of a debug build on a loaded CI machine, and the short
    // deadline the broken rows need called it dead.
    config.request_timeout = if survivable {
        SURVIVABLE_REQUEST_TIMEOUT
    } else {
        REQUEST_TIMEOUT
    };
    config.answer_timeout = Duration::from_secs(15);
    sessions.start(vec![config]).await;
    let ready = sessions.wait_ready("faulty", Duration::from_secs(10)).await;
    assert!(
        matches!(ready, Some(SessionState::Ready { .. })),
        "{fault}: {ready:?}"
    );

    let calling = sessions.clone();
    let started = Instant::now();
    let call = tokio::spawn(async move {
        calling
            .call_tool(
                "faulty",
                "fault",
                json!({"kind": fault.trim_start_matches("http ")})
                    .as_object()
                    .cloned(),
                CancellationToken::new(),
            )
            .await
    });
    let ask = person.next_ask().await;
    // The server breaks 200 ms after asking; the person answers after that.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let answered = broker.answer(ask.id, Answer::Decline);
    let outcome = tokio::time::timeout(CALL_DEADLINE, person.resolution(ask.id)).await;
    let result = tokio::time::timeout(CALL_DEADLINE, call).await;
    let call_took = started.elapsed();
    let back = if comes_back {
        sessions.wait_ready("faulty", Duration::from_secs(10)).await
    } else {
        sessions.state("faulty")
    };
    sessions.shutdown().await;
    if let Some(mut server) = http {
        let _ = server.child.kill().await;
    }

    let person_saw = match (&answered, &outcome) {
        (Ok(_), Ok(Outcome::Declined)) => "declined it".to_owned(),
        (Err(_), Ok(Outcome::Cancelled { reason })) => {
            format!(
                "the dialog withdrawn ({})",
                reason.why().trim_end_matches('.')
            )
        }
        (_, Ok(other)) => format!("{other:?}"),
        (_, Err(_)) => "the question never ended".to_owned(),
    };
    let call_said = match &result {
        Ok(Ok(Ok(r))) => format!(
            "result {}",
            serde_json::to_string(&r.content).unwrap_or_default()
        ),
        Ok(Ok(Err(e))) => format!("error: {e}"),
        Ok(Err(e)) => format!("the call panicked: {e}"),
        Err(_) => "the call hung".to_owned(),
    };
    let server_got = std::fs::read_to_string(&server_log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with("fault "))
        .collect::<Vec<_>>()
        .join(", ");
    let (records, _) = read_history(&audit_path).unwrap();
    let logged = records.iter().find_map(|r| match r {
        AuditRecord::Resolved { id, outcome, .. } if *id == ask.id => Some(outcome.clone()),
        _ => None,
    });
    let asked = records
        .iter()
        .any(|r| matches!(r, AuditRecord::Asked { ask: a, .. } if a.id == ask.id));

    // A no either way: the person's decline, or a withdrawal as the server's disconnection.
    let ended_as_no = matches!(
        (&outcome, &logged),
        (Ok(Outcome::Declined), Some(Outcome::Declined))
            | (
                Ok(Outcome::Cancelled {
                    reason: CancelReason::Disconnect
                }),
                Some(Outcome::Cancelled {
                    reason: CancelReason::Disconnect
                })
            )
    );
    let call_ended = matches!(result, Ok(Ok(_)));
    let came_back = matches!(back, Some(SessionState::Ready { .. }));
    let state_after = match &back {
        Some(SessionState::Ready { .. }) => "ready again".to_owned(),
        Some(other) => format!("{other:?}"),
        None => "gone".to_owned(),
    };
    // A server that carries on after a bad line gets the person's answer and finishes.
    let finished = !survivable
        || matches!(&result, Ok(Ok(Ok(r))) if serde_json::to_string(&r.content).unwrap_or_default().contains("answered: decline"));
    let pass = ended_as_no && asked && call_ended && (came_back || !comes_back) && finished;
    let _ = std::fs::remove_dir_all(&dir);
    Row {
        fault,
        person: format!(
            "{person_saw}; the call: {call_said} after {:.1} s; session {state_after}",
            call_took.as_secs_f64(),
        ),
        server: if server_got.is_empty() {
            "nothing more".into()
        } else {
            server_got
        },
        audit: format!(
            "{} then {}",
            if asked { "the question" } else { "NO question" },
            logged.map_or("NO outcome".into(), |o| format!("{o:?}"))
        ),
        pass,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_breaks_while_a_question_is_open() {
    // The rows share nothing (each its own server, session, broker and log), so they run at
    // once: the matrix takes as long as its slowest row.
    let rows = futures::future::join_all([
        row("exit", Peer::Stdio, false, true),
        row("hang", Peer::Stdio, false, true),
        row("stop-reading", Peer::Stdio, false, true),
        row("invalid-json", Peer::Stdio, true, true),
        row("binary", Peer::Stdio, true, true),
        row("huge-line", Peer::Stdio, true, true),
        row("http hang", Peer::Http, false, false),
        row("http reset", Peer::Http, false, true),
        row("http 500", Peer::Http, false, false),
        row("http endless-sse", Peer::Http, false, false),
    ])
    .await;
    println!("\n| fault | what the person sees | what the server receives | the audit log | |");
    println!("|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} |",
            r.fault,
            r.person,
            r.server,
            r.audit,
            if r.pass { "pass" } else { "FAIL" }
        );
    }
    // For the one table of every row, the real app's too (scripts/fault-table.mjs).
    if let Some(path) = std::env::var_os("COUNTERSIGN_FAULT_ROWS") {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        for r in &rows {
            let fault = match r.fault.strip_prefix("http ") {
                Some(kind) => format!("an HTTP server: {kind}"),
                None => format!("a stdio server: {}", r.fault),
            };
            let row = json!({"fault": fault, "person": r.person, "server": r.server,
                "audit": r.audit, "pass": r.pass});
            writeln!(file, "{row}").unwrap();
        }
    }
    let failed: Vec<&str> = rows.iter().filter(|r| !r.pass).map(|r| r.fault).collect();
    assert!(failed.is_empty(), "failed rows: {failed:?}");
}
