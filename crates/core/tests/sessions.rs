//! Session supervision against real processes and servers: states and their events, stderr
//! capture, backoff, dead HTTP servers, and shutdown leaving no process behind.

mod common;

use common::demo_server_binary;
use std::net::SocketAddr;
use std::time::Duration;

use countersign_core::config::ProtocolChoice;
use countersign_core::session::Backoff;
use countersign_core::{AuditLog, Broker, ServerConfig, SessionManager, SessionState};
use countersign_demo_server::{TicketStore, serve_http};

const WAIT: Duration = Duration::from_secs(20);

fn manager(test: &str, ping: Duration) -> SessionManager {
    let audit =
        std::env::temp_dir().join(format!("cs-sessions-{test}-{}.jsonl", std::process::id()));
    let broker = Broker::new(AuditLog::open(audit).unwrap());
    SessionManager::with_timing(
        broker,
        Backoff {
            first: Duration::from_millis(100),
            max: Duration::from_millis(400),
        },
        ping,
    )
}

/// Waits until `pred` holds for the server's state, returning it.
async fn wait_state(
    sessions: &SessionManager,
    server: &str,
    pred: impl Fn(&SessionState) -> bool,
) -> SessionState {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(state) = sessions.state(server)
            && pred(&state)
        {
            return state;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{server}: stuck in {:?}",
            sessions.state(server)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_dies_at_start_reconnects_with_backoff_and_shows_its_stderr() {
    let sessions = manager("dies", Duration::from_secs(15));
    let mut events = sessions.subscribe();
    sessions
        .start(vec![ServerConfig::stdio(
            "broken",
            "sh",
            &["-c", "echo 'missing API key' >&2; exit 1"],
        )])
        .await;
    let state = wait_state(
        &sessions,
        "broken",
        |s| matches!(s, SessionState::Reconnecting { attempt, .. } if *attempt >= 3),
    )
    .await;
    let SessionState::Reconnecting {
        next_in_ms, reason, ..
    } = state
    else {
        unreachable!()
    };
    assert!(next_in_ms <= 400, "capped: {next_in_ms}");
    assert!(
        reason.contains("handshake") || reason.contains("exited"),
        "{reason}"
    );
    assert!(
        sessions
            .stderr_tail("broken")
            .iter()
            .any(|l| l == "missing API key")
    );
    // The states came as events, in order, with growing attempts.
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        assert_eq!(event.server, "broken");
        seen.push(event.state);
    }
    assert_eq!(seen.first(), Some(&SessionState::Connecting));
    let attempts: Vec<u32> = seen
        .iter()
        .filter_map(|s| match s {
            SessionState::Reconnecting { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect();
    assert!(
        attempts.windows(2).all(|w| w[1] == w[0] + 1),
        "{attempts:?}"
    );
    sessions.shutdown().await;
    assert_eq!(sessions.state("broken"), None);
}

/// A server that completes its handshake and then dies (on its first request, say) backs off
/// like one that dies at start: its attempts grow instead of starting again at the first
/// delay after each handshake.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_dies_after_its_handshake_backs_off_all_the_same() {
    let sessions = manager("dies-after", Duration::from_secs(15));
    let script = r#"
        const rl = require('readline').createInterface({ input: process.stdin });
        rl.on('line', (line) => {
          const m = JSON.parse(line);
          if (m.method === 'initialize') process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: m.id,
            result: { protocolVersion: '2025-11-25', capabilities: {}, serverInfo: { name: 'brief', version: '1' } } }) + '\n');
          if (m.method === 'notifications/initialized') process.exit(1);
        });"#;
    let mut server = ServerConfig::stdio("brief", common::node(), &["-e", script]);
    server.protocol = ProtocolChoice::Legacy;
    sessions.start(vec![server]).await;
    wait_state(
        &sessions,
        "brief",
        |s| matches!(s, SessionState::Reconnecting { attempt, .. } if *attempt >= 3),
    )
    .await;
    sessions.shutdown().await;
}

/// Stopping a server that has not answered its handshake does not wait for the handshake's
/// timeout (a reload or a sign-out would wait that long for each such server).
#[tokio::test(flavor = "multi_thread")]
async fn stopping_a_server_does_not_wait_out_its_handshake() {
    let sessions = manager("mute", Duration::from_secs(15));
    let mut server = ServerConfig::stdio("mute", "sleep", &["600"]);
    server.request_timeout = Duration::from_secs(120);
    server.protocol = ProtocolChoice::Legacy;
    sessions.start(vec![server]).await;
    wait_state(&sessions, "mute", |s| matches!(s, SessionState::Connecting)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stopped = tokio::time::timeout(Duration::from_secs(10), sessions.stop("mute")).await;
    assert!(stopped.is_ok(), "stopping waited for the handshake");
    assert_eq!(sessions.state("mute"), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_program_fails_without_retrying() {
    let sessions = manager("missing", Duration::from_secs(15));
    sessions
        .start(vec![ServerConfig::stdio(
            "ghost",
            "/nonexistent/countersign-nothing",
            &[],
        )])
        .await;
    let state = wait_state(&sessions, "ghost", |s| {
        matches!(s, SessionState::Failed { .. })
    })
    .await;
    assert!(
        matches!(&state, SessionState::Failed { reason } if reason.contains("cannot start")),
        "{state:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sessions.state("ghost"), Some(state));
    sessions.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_http_server_is_noticed_and_reconnected_when_it_returns() {
    let store = TicketStore::seeded();
    let server = serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), store.clone())
        .await
        .unwrap();
    let addr = server.local_addr();
    let mut config = ServerConfig::http("remote", &server.url());
    config.protocol = ProtocolChoice::Legacy;
    config.request_timeout = Duration::from_secs(2);
    let sessions = manager("dead-http", Duration::from_millis(300));
    sessions.start(vec![config]).await;
    wait_state(&sessions, "remote", |s| {
        matches!(s, SessionState::Ready { .. })
    })
    .await;

    server.shutdown().await.unwrap();
    let state = wait_state(&sessions, "remote", |s| {
        matches!(s, SessionState::Reconnecting { .. })
    })
    .await;
    assert!(matches!(&state, SessionState::Reconnecting { reason, .. } if !reason.is_empty()));

    // Back on the same port: the session recovers by itself.
    let _again = serve_http(addr, store).await.unwrap();
    wait_state(&sessions, "remote", |s| {
        matches!(s, SessionState::Ready { .. })
    })
    .await;
    assert!(
        sessions
            .list_tools("remote")
            .await
            .unwrap()
            .iter()
            .any(|t| t.name == "list_tickets")
    );
    sessions.shutdown().await;
}

/// A server's redirect is followed within its own origin, and not to another: there it would
/// carry the person's configured headers (an API key) and what is sent, and a remote server
/// could have this machine post to its local services. The other origin receives nothing, and
/// the session says why it cannot connect.
#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_is_followed_only_within_the_servers_origin() {
    use axum::http::{HeaderMap, StatusCode, header::LOCATION};
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    use std::sync::{Arc, Mutex};

    async fn serve(router: axum::Router) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });
        addr
    }
    // Another origin (another port), which records whatever reaches it.
    let reached: Arc<Mutex<Vec<HeaderMap>>> = Arc::default();
    let recorded = reached.clone();
    let elsewhere = serve(axum::Router::new().fallback(move |headers: HeaderMap| {
        recorded.lock().unwrap().push(headers);
        async { StatusCode::OK }
    }))
    .await;
    // The desk, with two old addresses: one moved within its origin, one sent elsewhere.
    let store = TicketStore::seeded();
    let desk: StreamableHttpService<countersign_demo_server::TicketDesk, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(countersign_demo_server::TicketDesk::new(store.clone())),
            Default::default(),
            StreamableHttpServerConfig::default(),
        );
    let redirect = |to: String| {
        move || {
            let to = to.clone();
            async move { (StatusCode::TEMPORARY_REDIRECT, [(LOCATION, to)]) }
        }
    };
    let origin = serve(
        axum::Router::new()
            .nest_service("/mcp", desk)
            .route("/moved", axum::routing::any(redirect("/mcp".to_owned())))
            .route(
                "/elsewhere",
                axum::routing::any(redirect(format!("http://{elsewhere}/mcp"))),
            ),
    )
    .await;

    let config = |name: &str, path: &str| {
        let mut config = ServerConfig::http(name, &format!("http://{origin}{path}"));
        config.protocol = ProtocolChoice::Legacy;
        config.request_timeout = Duration::from_secs(3);
        if let countersign_core::config::TransportConfig::Http { headers, .. } =
            &mut config.transport
        {
            headers.insert("X-Api-Key".into(), "the-persons-key".into());
        }
        config
    };
    let sessions = manager("redirects", Duration::from_secs(15));
    sessions
        .start(vec![
            config("moved", "/moved"),
            config("sent", "/elsewhere"),
        ])
        .await;
    wait_state(&sessions, "moved", |s| {
        matches!(s, SessionState::Ready { .. })
    })
    .await;
    let refused = wait_state(&sessions, "sent", |s| {
        matches!(
            s,
            SessionState::Failed { .. } | SessionState::Reconnecting { .. }
        )
    })
    .await;
    let (SessionState::Failed { reason } | SessionState::Reconnecting { reason, .. }) = &refused
    else {
        unreachable!()
    };
    assert!(
        reason.contains("error following redirect")
            && reason.contains("only within its own origin"),
        "{reason}"
    );
    assert!(
        reached.lock().unwrap().is_empty(),
        "the other origin was reached: {:?}",
        reached.lock().unwrap()
    );
    sessions.shutdown().await;
}

fn alive(pid: i32) -> bool {
    // A reaped process has no /proc entry; a zombie would still show as state Z.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.split_whitespace().nth(2).is_none_or(|s| s != "Z"),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_leaves_no_child_or_grandchild_behind() {
    let dir = std::env::temp_dir().join(format!("cs-pids-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let demo = demo_server_binary();
    // A wrapper script, as `npx` would be: it starts a helper and then the server.
    let script = format!(
        "sleep 600 & echo $! > {dir}/helper; echo $$ > {dir}/server; exec {demo}",
        dir = dir.display(),
        demo = demo.display()
    );
    let sessions = manager("no-orphans", Duration::from_secs(15));
    sessions
        .start(vec![ServerConfig::stdio("desk", "sh", &["-c", &script])])
        .await;
    wait_state(&sessions, "desk", |s| {
        matches!(s, SessionState::Ready { .. })
    })
    .await;
    let pid = |name: &str| -> i32 {
        std::fs::read_to_string(dir.join(name))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let (server, helper) = (pid("server"), pid("helper"));
    assert!(alive(server) && alive(helper));

    sessions.shutdown().await;
    // The server is reaped by the time shutdown returns; the helper gets SIGKILL with its group
    // and is reaped by init shortly after.
    assert!(!alive(server), "server {server} still running");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while alive(helper) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(helper), "helper {helper} still running");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_live_2026_07_28_session_survives_its_pings() {
    // 2026-07-28 servers may answer `ping` with "method not found": that is an answer.
    let store = TicketStore::seeded();
    let server = serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), store)
        .await
        .unwrap();
    let sessions = manager("pings", Duration::from_millis(100));
    sessions
        .start(vec![ServerConfig::http("modern", &server.url())])
        .await;
    let state = wait_state(&sessions, "modern", |s| {
        matches!(s, SessionState::Ready { .. })
    })
    .await;
    assert!(
        matches!(&state, SessionState::Ready { protocol_version, .. } if protocol_version == "2026-07-28")
    );
    let mut events = sessions.subscribe();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(
        events.try_recv().is_err(),
        "the session changed state while idle: {:?}",
        sessions.state("modern")
    );
    sessions.shutdown().await;
}
