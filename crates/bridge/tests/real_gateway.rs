//! The bridge against Countersign's own gateway (core's `Gateway`, as the app runs it) in this
//! process, with the demo desk over HTTP upstream. This checks the contract the fake front in
//! `bridge.rs` only imitates: the discovery file and token the gateway writes, its guard (token,
//! Host, Origin), its routes, and both protocol generations. The person's approval of each tool
//! call is played through the broker, as the desktop would.

use std::{net::SocketAddr, time::Duration};

use countersign_core::{
    Answer, AskEvent, AskKind, AuditLog, Broker, ServerConfig, config::GatewayConfig,
    gateway::Gateway, settings::SettingsStore,
};
use countersign_demo_server::{HttpServer, TicketStore, serve_http};
use serde_json::{Value, json};
use tokio::sync::broadcast;

mod common;

use common::{Bridge, Scratch, WAIT, error_message, first_text, initialize, meta_2026};

struct Rig {
    scratch: Scratch,
    gateway: Gateway,
    broker: Broker,
    events: broadcast::Receiver<AskEvent>,
    _desk: HttpServer,
}

impl Rig {
    /// The gateway serving the demo desk as `demo`, announced in the scratch home exactly where
    /// the app announces it.
    async fn start(name: &str) -> Self {
        let scratch = Scratch::new(name);
        let desk = serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), TicketStore::seeded())
            .await
            .expect("demo desk over HTTP");
        let broker =
            Broker::new(AuditLog::open(scratch.home().join("audit.jsonl")).expect("audit log"));
        let events = broker.subscribe();
        let gateway = Gateway::new(
            GatewayConfig::default(),
            vec![ServerConfig::http("demo", &desk.url())],
            broker.clone(),
            SettingsStore::default(),
            scratch.app_data().join("gateway-token"),
        )
        .expect("gateway");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        gateway.serve(listener);
        gateway
            .write_discovery(&scratch.app_data().join("gateway.json"))
            .expect("gateway.json");
        Self {
            scratch,
            gateway,
            broker,
            events,
            _desk: desk,
        }
    }

    /// Waits for the approval of a call to `tool` and allows it once.
    async fn allow_call(&mut self, tool: &str) {
        loop {
            match tokio::time::timeout(WAIT, self.events.recv()).await {
                Ok(Ok(AskEvent::Added { ask })) => {
                    assert!(
                        matches!(&ask.kind, AskKind::ToolCall { tool: t, .. } if t == tool),
                        "{ask:?}"
                    );
                    self.broker
                        .answer(ask.id, Answer::Accept { content: None })
                        .expect("answer");
                    return;
                }
                Ok(Ok(_)) => continue,
                other => panic!("no approval was asked: {other:?}"),
            }
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let gateway = self.gateway.clone();
        tokio::spawn(async move { gateway.shutdown().await });
    }
}

fn tool_names(tools: &Value) -> Vec<String> {
    tools["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {tools}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_legacy_agent_lists_and_calls_through_the_gateway() {
    let mut rig = Rig::start("real-legacy").await;
    let mut bridge = Bridge::spawn(&rig.scratch, "demo", &[]);
    let init = bridge
        .request(1, "initialize", initialize("2025-11-25")["params"].clone())
        .await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    bridge
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let tools = bridge.request(2, "tools/list", json!({})).await;
    assert!(
        tool_names(&tools).contains(&"list_tickets".to_owned()),
        "{tools}"
    );
    bridge
        .send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "list_tickets", "arguments": {}}}))
        .await;
    rig.allow_call("list_tickets").await;
    let (call, _) = bridge.answer(json!(3)).await;
    assert!(first_text(&call).contains("t1"), "{call}");
    let (status, stderr) = bridge.finish().await;
    assert!(status.success(), "{status}: {stderr}");
}

/// A stdio host sends nothing between its calls, maybe for hours; the bridge holds the
/// session's stream open meanwhile, and the gateway keeps the session while it does. (It ended
/// it after five quiet minutes, and the bridge, whose agent cannot open a session again, was
/// answered "no longer knows this session" from then on.)
#[tokio::test(flavor = "multi_thread")]
async fn an_agent_quiet_between_its_calls_keeps_its_session() {
    let rig = Rig::start("real-quiet").await;
    let mut bridge = Bridge::spawn(&rig.scratch, "demo", &[]);
    let init = bridge
        .request(1, "initialize", initialize("2025-11-25")["params"].clone())
        .await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    bridge
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    // The bridge's stream is open by the time a request is answered.
    let tools = bridge.request(2, "tools/list", json!({})).await;
    assert!(!tool_names(&tools).is_empty(), "{tools}");
    rig.gateway.set_session_idle(Duration::from_millis(300));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let again = bridge.request(3, "tools/list", json!({})).await;
    assert!(
        tool_names(&again).contains(&"list_tickets".to_owned()),
        "{again}"
    );
    let (status, stderr) = bridge.finish().await;
    assert!(status.success(), "{status}: {stderr}");
    // The same session all along: not one the bridge had to open again.
    assert!(!stderr.contains("opened a new one"), "{stderr}");
}

/// Countersign restarts while the agent runs: the new gateway knows nothing of the session the
/// bridge holds, and the bridge opens a new one with the agent's own `initialize` and carries
/// on, the agent none the wiser. (It answered "no longer knows this session ... restart the
/// agent's connection" to every request until the host restarted the bridge.)
#[tokio::test(flavor = "multi_thread")]
async fn after_countersign_restarts_the_bridge_carries_on_in_a_new_session() {
    let mut rig = Rig::start("real-restart").await;
    let mut bridge = Bridge::spawn(&rig.scratch, "demo", &[]);
    let init = bridge
        .request(1, "initialize", initialize("2025-11-25")["params"].clone())
        .await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    bridge
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let tools = bridge.request(2, "tools/list", json!({})).await;
    assert!(!tool_names(&tools).is_empty(), "{tools}");

    // The app restarts: the same token and port, no sessions.
    let addr = rig.gateway.addr().expect("listening");
    rig.gateway.shutdown().await;
    let gateway = Gateway::new(
        GatewayConfig::default(),
        vec![ServerConfig::http("demo", &rig._desk.url())],
        rig.broker.clone(),
        SettingsStore::default(),
        rig.scratch.app_data().join("gateway-token"),
    )
    .expect("gateway");
    let listener = loop {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => break listener,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    gateway.serve(listener);
    rig.gateway = gateway;
    // The bridge's stream for server messages finds the session gone and opens a new one by
    // itself, before the agent sends anything (an agent that only listens hears again).
    let deadline = tokio::time::Instant::now() + WAIT;
    while rig.gateway.open_upstreams("demo") == 0 {
        assert!(tokio::time::Instant::now() < deadline, "no new session");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let again = bridge.request(3, "tools/list", json!({})).await;
    assert!(
        tool_names(&again).contains(&"list_tickets".to_owned()),
        "{again}"
    );
    bridge
        .send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "list_tickets", "arguments": {}}}))
        .await;
    rig.allow_call("list_tickets").await;
    let (call, _) = bridge.answer(json!(4)).await;
    assert!(first_text(&call).contains("t1"), "{call}");
    let (status, stderr) = bridge.finish().await;
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("opened a new one"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_2026_07_28_agent_lists_and_calls_through_the_gateway() {
    let mut rig = Rig::start("real-modern").await;
    let mut bridge = Bridge::spawn(&rig.scratch, "demo", &[]);
    let tools = bridge
        .request(1, "tools/list", json!({"_meta": meta_2026()}))
        .await;
    assert!(
        tool_names(&tools).contains(&"list_tickets".to_owned()),
        "{tools}"
    );
    bridge
        .send(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "list_tickets", "arguments": {}, "_meta": meta_2026()}}),
        )
        .await;
    rig.allow_call("list_tickets").await;
    let (call, _) = bridge.answer(json!(2)).await;
    assert!(first_text(&call).contains("t1"), "{call}");
    let (status, stderr) = bridge.finish().await;
    assert!(status.success(), "{status}: {stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_gateway_refusals_reach_the_agent_in_words() {
    let rig = Rig::start("real-refusals").await;

    let mut unknown = Bridge::spawn(&rig.scratch, "nosuch", &[]);
    unknown.send(initialize("2025-11-25")).await;
    let (reply, _) = unknown.answer(json!(1)).await;
    assert!(
        error_message(&reply).contains("no server named \"nosuch\" (404)"),
        "{reply}"
    );
    let (_, stderr) = unknown.finish().await;
    assert!(stderr.contains("nosuch"), "{stderr}");

    let wrong = rig.scratch.token_file("not-the-token");
    let env = [(
        "COUNTERSIGN_GATEWAY_TOKEN_FILE",
        wrong.to_str().expect("utf-8 path"),
    )];
    let mut refused = Bridge::spawn(&rig.scratch, "demo", &env);
    refused.send(initialize("2025-11-25")).await;
    let (reply, _) = refused.answer(json!(1)).await;
    assert!(
        error_message(&reply).contains("refused the token (401)"),
        "{reply}"
    );
    let (_, stderr) = refused.finish().await;
    assert!(stderr.contains("refused the token"), "{stderr}");

    // Once the gateway stops (the app quit), a new bridge says so at once.
    rig.gateway.shutdown().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut gone = Bridge::spawn(&rig.scratch, "demo", &[]);
    gone.send(initialize("2025-11-25")).await;
    let (reply, _) = gone.answer(json!(1)).await;
    assert!(
        error_message(&reply).contains("Countersign is not running"),
        "{reply}"
    );
    let (status, _) = gone.wait().await;
    assert_eq!(status.code(), Some(1));
}

/// An agent written with the TypeScript SDK's client, launching the bridge as Claude Desktop
/// would: it lists the desk's tools and deletes a ticket; the person approves the call and
/// confirms the desk's own question; the ticket store shows the effect.
#[tokio::test(flavor = "multi_thread")]
async fn a_typescript_sdk_agent_deletes_a_ticket_through_the_bridge() {
    let scratch = Scratch::new("ts-agent");
    let store = TicketStore::seeded();
    let desk = serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), store.clone())
        .await
        .expect("demo desk over HTTP");
    let broker = Broker::new(AuditLog::open(scratch.home().join("audit.jsonl")).expect("audit"));
    let mut events = broker.subscribe();
    let gateway = Gateway::new(
        GatewayConfig::default(),
        vec![ServerConfig::http("demo", &desk.url())],
        broker.clone(),
        SettingsStore::default(),
        scratch.app_data().join("gateway-token"),
    )
    .expect("gateway");
    gateway.serve(
        tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind"),
    );
    gateway
        .write_discovery(&scratch.app_data().join("gateway.json"))
        .expect("gateway.json");

    let peers = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers");
    // The SDK hands the bridge only a safe subset of the environment (HOME among it), which
    // is all the bridge needs to find the app.
    let agent = tokio::process::Command::new("node")
        .arg(peers.join("ts-agent.mjs"))
        .args([
            "--name",
            "ts-bridge-agent",
            "--call",
            "delete_ticket",
            "--args",
        ])
        .arg(json!({"id": "t2"}).to_string())
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_countersign-bridge"))
        .arg("demo")
        .env("HOME", scratch.home())
        .kill_on_drop(true)
        .output();
    let agent = tokio::spawn(agent);

    let mut answered = 0;
    while answered < 2 {
        let ask = match tokio::time::timeout(WAIT, events.recv()).await {
            Ok(Ok(AskEvent::Added { ask })) => *ask,
            Ok(Ok(_)) => continue,
            other => panic!("no question arrived: {other:?}"),
        };
        assert_eq!(ask.asker.declared.as_deref(), Some("ts-bridge-agent"));
        let answer = match &ask.kind {
            AskKind::ToolCall { tool, .. } => {
                assert_eq!(tool, "delete_ticket");
                Answer::Accept { content: None }
            }
            AskKind::Form { .. } => Answer::Accept {
                content: json!({"confirm": true}).as_object().cloned(),
            },
            other => panic!("{other:?}"),
        };
        broker.answer(ask.id, answer).expect("answer");
        answered += 1;
    }
    let output = tokio::time::timeout(WAIT, agent)
        .await
        .expect("the agent finished in time")
        .expect("join")
        .expect("node ran");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        lines[0]["names"]
            .as_array()
            .is_some_and(|n| n.iter().any(|n| n == "delete_ticket")),
        "{lines:?}"
    );
    assert_eq!(lines[1]["step"], "call", "{lines:?}");
    assert_ne!(lines[1]["result"]["isError"], true, "{lines:?}");
    assert!(!store.contains("t2"), "the ticket is still there");
    gateway.shutdown().await;
}
