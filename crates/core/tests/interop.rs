//! The interop matrix: every peer × revision × transport, through the app's own sessions and
//! through the gateway with an agent that declares no elicitation, each asked a form, a URL
//! question and a cancellation, where the peer can put them. Prints the table (`make interop`
//! shows it; the README carries a copy) and fails when any cell differs from what is expected.
//!
//! What a peer cannot do is measured, not assumed: a 2026-07-28 cell whose peer negotiates
//! 2025-11-25 says so, and the few known gaps of the peers themselves are listed in `GAPS`
//! with the reason; a gap that starts passing fails the test too, so the list stays true.

use std::net::SocketAddr;
use std::time::Duration;

use countersign_core::ask::schema::{FieldKind, FormSchema, TextFormat};
use countersign_core::ask::{Ask, AskKind, CancelReason};
use countersign_core::config::{GatewayConfig, ProtocolChoice, ToolRule};
use countersign_core::gateway::Gateway;
use countersign_core::settings::SettingsStore;
use countersign_core::{Answer, AskEvent, AuditLog, Broker, Outcome, ServerConfig, SessionState};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

mod common;

const V2025: &str = "2025-11-25";
const V2026: &str = "2026-07-28";

#[derive(Clone, Copy, PartialEq)]
enum Peer {
    Ts,
    Python,
    Rmcp,
    Everything,
}

impl Peer {
    fn label(self) -> &'static str {
        match self {
            Peer::Ts => "TypeScript SDK 1.32",
            Peer::Python => "Python mcp 2.3",
            Peer::Rmcp => "rmcp 3.11 (demo desk)",
            Peer::Everything => "server-everything",
        }
    }

    /// The tool that asks a form, its arguments, and what its reply says on an accept.
    /// (The demo desk over HTTP keeps one store for every session: each caller deletes its own
    /// ticket.)
    fn form(self, agent: bool) -> (&'static str, Value, &'static str) {
        match self {
            Peer::Ts => ("confirm_action", json!({"action": "interop"}), "\"accept\""),
            Peer::Python => ("ask_profile", json!({}), "\"accept\""),
            Peer::Rmcp if agent => ("delete_ticket", json!({"id": "t2"}), "Deleted ticket t2"),
            Peer::Rmcp => ("delete_ticket", json!({"id": "t1"}), "Deleted ticket t1"),
            Peer::Everything => ("trigger-elicitation-request", json!({}), "\"accept\""),
        }
    }

    fn url(self) -> Option<(&'static str, Value, &'static str)> {
        let url = "https://auth.example.com/connect";
        match self {
            Peer::Ts => Some(("open_url", json!({"url": url}), "\"accept\"")),
            Peer::Python => None,
            Peer::Rmcp => Some(("connect_account", json!({}), "\"accept\"")),
            Peer::Everything => Some((
                "trigger-url-elicitation",
                json!({"url": url, "message": "Connect", "elicitationId": "interop-1"}),
                "\"accept\"",
            )),
        }
    }

    /// A tool whose question the server withdraws by itself (`notifications/cancelled`).
    fn cancel(self) -> Option<(&'static str, Value)> {
        match self {
            Peer::Ts => Some(("ask_with_timeout", json!({"timeout_ms": 400}))),
            Peer::Rmcp => Some(("slow_question", json!({"timeout_ms": 400}))),
            Peer::Python | Peer::Everything => None,
        }
    }

    fn tools(self) -> Vec<&'static str> {
        let mut tools = vec![self.form(false).0];
        tools.extend(self.url().map(|u| u.0));
        tools.extend(self.cancel().map(|c| c.0));
        tools
    }
}

/// Gaps of the peers themselves, measured: (peer, revision, probe, why).
const GAPS: &[(Peer, &str, &str, &str)] = &[
    (
        Peer::Python,
        V2026,
        "form",
        "the SDK's ctx.elicit refuses to ask on 2026-07-28 sessions",
    ),
    (
        Peer::Rmcp,
        V2026,
        "cancel",
        "2026-07-28 questions ride in the result: there is no request to withdraw",
    ),
];

fn gap(peer: Peer, revision: &str, probe: &str) -> Option<&'static str> {
    GAPS.iter()
        .find(|(p, r, what, _)| *p == peer && *r == revision && *what == probe)
        .map(|g| g.3)
}

/// A peer running for one cell: its config, and over HTTP the process or server behind it.
struct Running {
    config: ServerConfig,
    _child: Option<tokio::process::Child>,
    _desk: Option<countersign_demo_server::HttpServer>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn wait_listening(port: u16) {
    let up = tokio::time::timeout(common::WAIT, async {
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(up.is_ok(), "nothing listens on port {port}");
}

async fn start(peer: Peer, http: bool, revision: &str) -> Running {
    let name = "peer";
    let (python, py_script) = if peer == Peer::Python {
        common::py_server()
    } else {
        (String::new(), String::new())
    };
    let everything = common::everything_script();
    let ts = common::peer_path("ts-elicit-server.mjs");
    let mut running = if !http {
        let config = match peer {
            Peer::Ts => ServerConfig::stdio(name, common::node(), &[ts.as_str()]),
            Peer::Python => ServerConfig::stdio(name, &python, &[py_script.as_str()]),
            Peer::Rmcp => {
                ServerConfig::stdio(name, common::demo_server_binary().to_str().unwrap(), &[])
            }
            Peer::Everything => {
                ServerConfig::stdio(name, common::node(), &[everything.as_str(), "stdio"])
            }
        };
        Running {
            config,
            _child: None,
            _desk: None,
        }
    } else if peer == Peer::Rmcp {
        let desk = countersign_demo_server::serve_http(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            countersign_demo_server::TicketStore::seeded(),
        )
        .await
        .unwrap();
        Running {
            config: ServerConfig::http(name, &desk.url()),
            _child: None,
            _desk: Some(desk),
        }
    } else {
        let port = free_port();
        let mut command = match peer {
            Peer::Ts => {
                let mut c = tokio::process::Command::new(common::node());
                c.arg(&ts).args(["--http", &port.to_string()]);
                c
            }
            Peer::Python => {
                let mut c = tokio::process::Command::new(&python);
                c.arg(&py_script).args(["--http", &port.to_string()]);
                c
            }
            _ => {
                let mut c = tokio::process::Command::new(common::node());
                c.arg(&everything)
                    .arg("streamableHttp")
                    .env("PORT", port.to_string());
                c
            }
        };
        let child = command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start the HTTP peer");
        wait_listening(port).await;
        Running {
            config: ServerConfig::http(name, &format!("http://127.0.0.1:{port}/mcp")),
            _child: Some(child),
            _desk: None,
        }
    };
    let config = &mut running.config;
    *config = common::with_test_timeouts(config.clone());
    config.protocol = if revision == V2026 {
        ProtocolChoice::Auto
    } else {
        ProtocolChoice::Legacy
    };
    for tool in peer.tools() {
        config.tool_policy.insert(tool.into(), ToolRule::Allow);
    }
    running
}

/// An answer to a form that every field accepts: its defaults, and for a required field
/// without one, a value of its kind.
fn fill(schema: &FormSchema) -> Map<String, Value> {
    let mut content = countersign_core::ask::schema::defaults(schema);
    for field in &schema.fields {
        if content.contains_key(&field.name) || !field.required {
            continue;
        }
        let value = match &field.kind {
            FieldKind::Boolean => json!(true),
            FieldKind::Number { minimum, .. } => json!(minimum.unwrap_or(1.0).max(1.0) as i64),
            FieldKind::SingleSelect { options } => json!(options[0].value),
            FieldKind::MultiSelect { options, .. } => json!([options[0].value]),
            FieldKind::Text { format, .. } => match format {
                Some(TextFormat::Email) => json!("ada@example.com"),
                Some(TextFormat::Uri) => json!("https://example.com/"),
                Some(TextFormat::Date) => json!("2026-11-30"),
                Some(TextFormat::DateTime) => json!("2026-11-30T12:00:00Z"),
                None => json!("Ada"),
            },
        };
        content.insert(field.name.clone(), value);
    }
    content
}

/// Who makes the calls: the app's session manager, or an agent through the gateway.
enum Caller {
    App(countersign_core::session::SessionManager),
    Agent(rmcp::service::RunningService<rmcp::service::RoleClient, ClientConfig>),
}

impl Caller {
    fn call(&self, tool: &str, args: Value) -> tokio::task::JoinHandle<Result<String, String>> {
        let args = args.as_object().cloned();
        let tool = tool.to_owned();
        let text = |r: rmcp::model::CallToolResult| {
            let text: Vec<String> = r
                .content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                .collect();
            match r.is_error {
                Some(true) => Err(text.join("")),
                _ => Ok(text.join("")),
            }
        };
        match self {
            Caller::App(sessions) => {
                let sessions = sessions.clone();
                tokio::spawn(async move {
                    let r = sessions
                        .call_tool("peer", &tool, args, CancellationToken::new())
                        .await
                        .map_err(|e| e.to_string())?;
                    text(r)
                })
            }
            Caller::Agent(agent) => {
                let peer = agent.peer().clone();
                tokio::spawn(async move {
                    let mut params = CallToolRequestParams::new(tool);
                    params.arguments = args;
                    text(peer.call_tool(params).await.map_err(|e| e.to_string())?)
                })
            }
        }
    }
}

/// One probe's outcome: passed, or what went wrong.
type Probe = Result<(), String>;

async fn next_ask(
    events: &mut broadcast::Receiver<AskEvent>,
    call: &mut tokio::task::JoinHandle<Result<String, String>>,
) -> Result<Ask, String> {
    let wait = async {
        loop {
            match events.recv().await {
                Ok(AskEvent::Added { ask }) => return Ok(*ask),
                Ok(_) => continue,
                Err(e) => return Err(format!("ask events: {e}")),
            }
        }
    };
    tokio::select! {
        ask = tokio::time::timeout(common::WAIT, wait) => ask.map_err(|_| "nothing was asked".to_owned())?,
        ended = call => Err(format!("the call ended without asking: {:?}", ended.map_err(|e| e.to_string()))),
    }
}

async fn finish(call: tokio::task::JoinHandle<Result<String, String>>) -> Result<String, String> {
    tokio::time::timeout(common::WAIT, call)
        .await
        .map_err(|_| "the call did not end".to_owned())?
        .map_err(|e| e.to_string())?
}

async fn probe_form(peer: Peer, caller: &Caller, broker: &Broker) -> Probe {
    let (tool, args, expect) = peer.form(matches!(caller, Caller::Agent(_)));
    let mut events = broker.subscribe();
    let mut call = caller.call(tool, args);
    let ask = next_ask(&mut events, &mut call).await?;
    let AskKind::Form { schema, .. } = &ask.kind else {
        return Err(format!("not a form: {:?}", ask.kind));
    };
    broker
        .answer(
            ask.id,
            Answer::Accept {
                content: Some(fill(schema)),
            },
        )
        .map_err(|e| format!("the answer was refused: {e}"))?;
    let reply = finish(call).await?;
    reply
        .contains(expect)
        .then_some(())
        .ok_or_else(|| format!("the reply lacks {expect}: {reply}"))
}

async fn probe_url(peer: Peer, caller: &Caller, broker: &Broker) -> Probe {
    let (tool, args, expect) = peer.url().expect("a URL probe");
    let mut events = broker.subscribe();
    let mut call = caller.call(tool, args);
    let ask = next_ask(&mut events, &mut call).await?;
    if !matches!(ask.kind, AskKind::Url { .. }) {
        return Err(format!("not a URL question: {:?}", ask.kind));
    }
    broker
        .answer(ask.id, Answer::Accept { content: None })
        .map_err(|e| format!("the consent was refused: {e}"))?;
    let reply = finish(call).await?;
    reply
        .contains(expect)
        .then_some(())
        .ok_or_else(|| format!("the reply lacks {expect}: {reply}"))
}

async fn probe_cancel(peer: Peer, caller: &Caller, broker: &Broker) -> Probe {
    let (tool, args) = peer.cancel().expect("a cancellation probe");
    let mut events = broker.subscribe();
    let mut call = caller.call(tool, args);
    let ask = next_ask(&mut events, &mut call).await?;
    // The server gives up after 400 ms; a withdrawal that has not come in 5 s is not coming.
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match events.recv().await {
                Ok(AskEvent::Resolved { id, outcome }) if id == ask.id => return outcome,
                Ok(_) => continue,
                Err(_) => return Outcome::Declined,
            }
        }
    })
    .await
    .map_err(|_| "the question was never withdrawn".to_owned())?;
    let _ = finish(call).await;
    match ended {
        Outcome::Cancelled {
            reason: CancelReason::Server,
        } => Ok(()),
        other => Err(format!("ended as {other:?}, not withdrawn by the server")),
    }
}

/// One cell's three probes, in order; `None` where the peer has no such question.
async fn probes(peer: Peer, caller: &Caller, broker: &Broker) -> [Option<Probe>; 3] {
    let form = Some(probe_form(peer, caller, broker).await);
    let url = match peer.url() {
        Some(_) => Some(probe_url(peer, caller, broker).await),
        None => None,
    };
    let cancel = match peer.cancel() {
        Some(_) => Some(probe_cancel(peer, caller, broker).await),
        None => None,
    };
    [form, url, cancel]
}

fn broker(label: &str) -> Broker {
    let dir = std::env::temp_dir().join(format!("cs-interop-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Broker::new(AuditLog::open(dir.join("audit.jsonl")).unwrap())
}

/// The app's own session: the revision it negotiated, and the probes.
async fn through_the_app(
    peer: Peer,
    config: ServerConfig,
    label: &str,
) -> (String, [Option<Probe>; 3]) {
    let broker = broker(label);
    let sessions = countersign_core::session::SessionManager::new(broker.clone());
    sessions.start(vec![config]).await;
    let negotiated = tokio::time::timeout(common::WAIT, async {
        loop {
            match sessions.state("peer") {
                Some(SessionState::Ready {
                    protocol_version, ..
                }) => return protocol_version,
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
    .await
    .unwrap_or_else(|_| format!("not ready: {:?}", sessions.state("peer")));
    // Some servers list their tools only once initialized.
    let _ = tokio::time::timeout(common::WAIT, async {
        while !sessions
            .list_tools("peer")
            .await
            .is_ok_and(|t| t.iter().any(|t| t.name == peer.form(false).0))
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    let caller = Caller::App(sessions.clone());
    let results = probes(peer, &caller, &broker).await;
    sessions.shutdown().await;
    (negotiated, results)
}

/// An agent that declares no elicitation, through the gateway.
async fn through_the_gateway(
    peer: Peer,
    config: ServerConfig,
    revision: &str,
    label: &str,
) -> [Option<Probe>; 3] {
    let broker = broker(label);
    let dir = std::env::temp_dir().join(format!("cs-interop-{label}-gw-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let gateway = Gateway::new(
        GatewayConfig::default(),
        vec![config],
        broker.clone(),
        SettingsStore::default(),
        dir.join("gateway-token"),
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = gateway.serve(listener);
    let mut transport =
        StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp/peer"));
    transport.auth_header = Some(gateway.token().to_owned());
    let mut client = ClientConfig::default();
    let mut info = Implementation::default();
    info.name = "interop-agent".into();
    info.version = "1.0".into();
    client.client_info = info;
    client.capabilities = ClientCapabilities::default();
    let lifecycle = if revision == V2026 {
        client.protocol_version = ProtocolVersion::V_2026_07_28;
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        }
    } else {
        client.protocol_version = ProtocolVersion::V_2025_11_25;
        ClientLifecycleMode::Initialize
    };
    let agent = tokio::time::timeout(
        common::WAIT,
        serve_client_with_lifecycle(
            client,
            StreamableHttpClientTransport::from_config(transport),
            lifecycle,
        ),
    )
    .await;
    let results = match agent {
        Ok(Ok(agent)) => {
            let _ = agent.peer().list_all_tools().await;
            let caller = Caller::Agent(agent);
            let results = probes(peer, &caller, &broker).await;
            if let Caller::Agent(agent) = caller {
                let _ = agent.cancel().await;
            }
            results
        }
        other => {
            let why = format!("the agent could not connect: {:?}", other.map(|r| r.err()));
            [Some(Err(why)), None, None]
        }
    };
    gateway.shutdown().await;
    results
}

/// A cell's text, and whether it is what was expected.
fn judge(peer: Peer, revision: &str, results: &[Option<Probe>; 3]) -> (String, Vec<String>) {
    let mut marks = Vec::new();
    let mut wrong = Vec::new();
    for (probe, result) in ["form", "url", "cancel"].iter().zip(results) {
        let expected_gap = gap(peer, revision, probe);
        let mark = match (result, expected_gap) {
            (None, _) => "—".to_owned(),
            (Some(Ok(())), None) => "✓".to_owned(),
            (Some(Err(_)), Some(_)) => "✗ (known)".to_owned(),
            (Some(Ok(())), Some(why)) => {
                wrong.push(format!("{probe} passed, but is listed as a gap ({why})"));
                "✓?".to_owned()
            }
            (Some(Err(e)), None) => {
                wrong.push(format!("{probe}: {e}"));
                "✗".to_owned()
            }
        };
        marks.push(format!("{probe} {mark}"));
    }
    (marks.join(", "), wrong)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_interop_matrix() {
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for peer in [Peer::Ts, Peer::Python, Peer::Rmcp, Peer::Everything] {
        for revision in [V2025, V2026] {
            for http in [false, true] {
                let transport = if http { "Streamable HTTP" } else { "stdio" };
                let label = format!(
                    "{}-{revision}-{transport}",
                    peer.label().split(' ').next().unwrap()
                );
                let running = start(peer, http, revision).await;
                let (negotiated, app) = through_the_app(peer, running.config.clone(), &label).await;
                if negotiated != revision {
                    rows.push(format!(
                        "| {} | {revision} | {transport} | peer speaks {negotiated} | peer speaks {negotiated} |",
                        peer.label()
                    ));
                    continue;
                }
                let gateway =
                    through_the_gateway(peer, running.config.clone(), revision, &label).await;
                let (app_text, app_wrong) = judge(peer, revision, &app);
                let (gw_text, gw_wrong) = judge(peer, revision, &gateway);
                for w in app_wrong {
                    failures.push(format!("{label} app: {w}"));
                }
                for w in gw_wrong {
                    failures.push(format!("{label} gateway: {w}"));
                }
                rows.push(format!(
                    "| {} | {revision} | {transport} | {app_text} | {gw_text} |",
                    peer.label()
                ));
            }
        }
    }
    println!(
        "\n| Peer | Revision | Transport | App's session | Gateway (agent without elicitation) |"
    );
    println!("|---|---|---|---|---|");
    for row in &rows {
        println!("{row}");
    }
    println!("\n✓ passed · — the peer has no such question · ✗ (known) a known gap, measured:");
    for (peer, revision, probe, why) in GAPS {
        println!("- {} on {revision}, {probe}: {why}", peer.label());
    }
    assert!(
        failures.is_empty(),
        "cells not as expected:\n{}",
        failures.join("\n")
    );
}
