//! The gateway end to end: agents (rmcp clients of both protocol generations) reach the demo
//! ticket desk through Countersign over HTTP. The person's part is played through the broker,
//! as the desktop would; effects are checked in the desk's ticket store.

// The agent in the notification test reads `notifications/message`, which rmcp marks
// deprecated (SEP-2577) but 2025-11-25 servers still send.
#![allow(deprecated)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use countersign_core::ask::approval::{Covering, Lasting, Remember};
use countersign_core::config::{GatewayConfig, ProtocolChoice, ToolRule};
use countersign_core::gateway::Gateway;
use countersign_core::settings::SettingsStore;
use countersign_core::{
    Answer, Ask, AskEvent, AskKind, AuditLog, Broker, CancelReason, Outcome, ServerConfig,
};
use countersign_demo_server::{HttpServer, TicketStore, serve_http};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, RoleClient, RunningService, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

mod common;

const WAIT: Duration = Duration::from_secs(20);

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

/// A desk over HTTP that counts every desk it makes: one per upstream session (or request).
async fn counting_desk() -> (Desk, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let made = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let store = TicketStore::seeded();
    let server = countersign_demo_server::serve_http_with(SocketAddr::from(([127, 0, 0, 1], 0)), {
        let made = made.clone();
        move || {
            made.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            countersign_demo_server::TicketDesk::new(store.clone())
        }
    })
    .await
    .unwrap();
    let desk = Desk {
        store: TicketStore::seeded(),
        server,
    };
    (desk, made)
}

struct Rig {
    gateway: Gateway,
    addr: SocketAddr,
    broker: Broker,
    events: broadcast::Receiver<AskEvent>,
    settings: SettingsStore,
}

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cs-gateway-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn rig(test: &str, servers: Vec<ServerConfig>) -> Rig {
    rig_in(scratch(test), servers).await
}

/// A rig whose files (audit log, tokens, pending approvals) are in `dir`, as an app restarted
/// on the same data directory finds them.
async fn rig_in(dir: PathBuf, servers: Vec<ServerConfig>) -> Rig {
    let broker = Broker::new(AuditLog::open(dir.join("audit.jsonl")).unwrap());
    let events = broker.subscribe();
    let settings = SettingsStore::default();
    let gateway = Gateway::new(
        GatewayConfig::default(),
        servers,
        broker.clone(),
        settings.clone(),
        dir.join("gateway-token"),
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = gateway.serve(listener);
    Rig {
        gateway,
        addr,
        broker,
        events,
        settings,
    }
}

fn upstream(name: &str, desk: &Desk, protocol: ProtocolChoice) -> ServerConfig {
    let mut config = ServerConfig::http(name, &desk.server.url());
    config.protocol = protocol;
    config
}

type Agent = RunningService<RoleClient, ClientConfig>;

impl Rig {
    fn url(&self, server: &str) -> String {
        format!("http://{}/mcp/{server}", self.addr)
    }

    /// An agent that declares no elicitation capability at all, with the shared token.
    async fn agent(&self, server: &str, name: &str, modern: bool) -> Agent {
        self.agent_with(server, name, modern, self.gateway.token())
            .await
    }

    /// A 2025-11-25 agent holding `token`.
    async fn agent_holding(&self, server: &str, name: &str, token: &str) -> Agent {
        self.agent_with(server, name, false, token).await
    }

    /// An agent of `handler`'s own (it answers the server's requests), holding the gateway's
    /// token, after a 2025-11-25 handshake.
    async fn open_with<H: rmcp::ClientHandler>(
        &self,
        server: &str,
        handler: H,
    ) -> RunningService<RoleClient, H> {
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url(server));
        config.auth_header = Some(self.gateway.token().to_owned());
        serve_client_with_lifecycle(
            handler,
            StreamableHttpClientTransport::from_config(config),
            ClientLifecycleMode::Initialize,
        )
        .await
        .expect("agent handshake")
    }

    async fn agent_with(&self, server: &str, name: &str, modern: bool, token: &str) -> Agent {
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url(server));
        config.auth_header = Some(token.to_owned());
        let transport = StreamableHttpClientTransport::from_config(config);
        let mut info = Implementation::default();
        info.name = name.into();
        info.version = "1.0".into();
        let mut client = ClientConfig::default();
        client.client_info = info;
        let lifecycle = if modern {
            client.protocol_version = ProtocolVersion::V_2026_07_28;
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            }
        } else {
            client.protocol_version = ProtocolVersion::V_2025_11_25;
            ClientLifecycleMode::Initialize
        };
        tokio::time::timeout(
            WAIT,
            serve_client_with_lifecycle(client, transport, lifecycle),
        )
        .await
        .expect("agent handshake in time")
        .expect("agent handshake")
    }

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
                other => panic!("nothing resolved: {other:?}"),
            }
        }
    }
}

/// Starts a call in the background, for tests that answer its questions meanwhile.
fn spawn_call(
    agent: &Agent,
    tool: &str,
    args: Value,
) -> tokio::task::JoinHandle<Result<CallToolResult, rmcp::ServiceError>> {
    let peer = agent.peer().clone();
    let mut params = CallToolRequestParams::new(tool.to_owned());
    params.arguments = args.as_object().cloned();
    tokio::spawn(async move { peer.call_tool(params).await })
}

async fn call(agent: &Agent, tool: &str, args: Value) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    params.arguments = args.as_object().cloned();
    tokio::time::timeout(WAIT, agent.peer().call_tool(params))
        .await
        .expect("call answered in time")
        .expect("call answered")
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The person submits `content` (a JSON object) for ask `id`.
fn accept(rig: &Rig, id: u64, content: Value) {
    rig.broker
        .answer(
            id,
            Answer::Accept {
                content: content.as_object().cloned(),
            },
        )
        .unwrap();
}

fn confirm() -> Answer {
    let mut content = Map::new();
    content.insert("confirm".into(), json!(true));
    Answer::Accept {
        content: Some(content),
    }
}

/// Allow the next tool-call approval once, and return it.
async fn allow_next_call(rig: &mut Rig, tool: &str) -> Ask {
    let ask = rig.next_ask().await;
    assert!(
        matches!(&ask.kind, AskKind::ToolCall { tool: t, .. } if t == tool),
        "{ask:?}"
    );
    rig.broker
        .answer(ask.id, Answer::Accept { content: None })
        .unwrap();
    ask
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_lists_and_calls_through_the_gateway_and_the_person_answers_the_question() {
    for (modern_agent, upstream_protocol) in [
        (false, ProtocolChoice::Legacy),
        (false, ProtocolChoice::Auto),
        (true, ProtocolChoice::Legacy),
        (true, ProtocolChoice::Auto),
    ] {
        let desk = desk().await;
        let mut rig = rig(
            &format!("pairs-{modern_agent}-{upstream_protocol:?}"),
            vec![upstream("desk", &desk, upstream_protocol)],
        )
        .await;
        let pair = format!("agent 2026: {modern_agent}, upstream {upstream_protocol:?}");
        let agent = rig.agent("desk", "test-agent", modern_agent).await;
        let tools = agent.peer().list_all_tools().await.expect("tools/list");
        assert!(tools.iter().any(|t| t.name == "delete_ticket"), "{pair}");

        // The approval first (an untrusted server), then the desk's own question.
        let deleting = spawn_call(&agent, "delete_ticket", json!({"id": "t2"}));
        let approval = allow_next_call(&mut rig, "delete_ticket").await;
        assert_eq!(
            approval.asker.declared.as_deref(),
            Some("test-agent"),
            "{pair}"
        );
        assert_eq!(approval.asker.server, "desk");
        let question = rig.next_ask().await;
        assert!(
            matches!(question.kind, AskKind::Form { .. }),
            "{pair}: {question:?}"
        );
        assert_eq!(
            question.asker.declared.as_deref(),
            Some("test-agent"),
            "{pair}"
        );
        rig.broker.answer(question.id, confirm()).unwrap();
        let result = tokio::time::timeout(WAIT, deleting)
            .await
            .expect("in time")
            .unwrap()
            .expect("delete_ticket answered");
        assert_ne!(result.is_error, Some(true), "{pair}: {}", text(&result));
        assert!(!desk.store.contains("t2"), "{pair}: t2 was not deleted");
        // Both answers are on record as carried out: the approval as the call forwarded and
        // answered, the desk's question as the answer taken by the transport (or, on
        // 2026-07-28, as the retried call answered).
        let delivered = delivered(&rig);
        assert!(
            delivered.contains(&approval.id) && delivered.contains(&question.id),
            "{pair}: {delivered:?}"
        );
        rig.gateway.shutdown().await;
    }
}

/// The asks on record as delivered (see `AuditRecord::Delivered`).
fn delivered(rig: &Rig) -> Vec<u64> {
    rig.records()
        .iter()
        .filter_map(|r| match r {
            countersign_core::ask::audit::AuditRecord::Delivered { id, .. } => Some(*id),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_lying_tool_is_asked_about_unless_the_server_is_trusted_and_a_deny_is_an_error_result()
{
    let desk = desk().await;
    let untrusted = upstream("desk", &desk, ProtocolChoice::Legacy);
    let mut trusted = upstream("trusted-desk", &desk, ProtocolChoice::Legacy);
    trusted.trusted = true;
    let mut rig = rig("lying", vec![untrusted, trusted]).await;

    let agent = rig.agent("desk", "test-agent", false).await;
    let purging = spawn_call(&agent, "purge_spam", json!({}));
    let ask = rig.next_ask().await;
    match &ask.kind {
        AskKind::ToolCall {
            tool, annotations, ..
        } => {
            assert_eq!(tool, "purge_spam");
            // The claim is shown, but it did not let the call through.
            assert_eq!(annotations.as_ref().unwrap()["readOnlyHint"], true);
        }
        other => panic!("{other:?}"),
    }
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    let denied = purging.await.unwrap().expect("a result, not an error");
    assert_eq!(denied.is_error, Some(true));
    assert!(text(&denied).contains("denied"), "{}", text(&denied));
    assert!(
        desk.store.contains("t5"),
        "the spam ticket was purged despite the deny"
    );

    // Trusted: its read-only claim counts, so it runs without a question.
    let agent = rig.agent("trusted-desk", "test-agent", false).await;
    let result = call(&agent, "purge_spam", json!({})).await;
    assert_ne!(result.is_error, Some(true), "{}", text(&result));
    assert!(!desk.store.contains("t5"));
    assert!(rig.broker.pending().is_empty());
}

/// "Always allow": allow, always, for any arguments.
fn always_allow() -> Answer {
    Answer::Remember {
        decision: Remember {
            allow: true,
            lasting: Lasting::Always,
            covering: Covering::AnyArguments { also_sent: None },
        },
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn always_allow_belongs_to_the_agents_token_not_its_name_and_rules_come_first() {
    let desk = desk().await;
    let mut config = upstream("desk", &desk, ProtocolChoice::Legacy);
    config.tool_policy = BTreeMap::from([("book_meeting".to_owned(), ToolRule::Deny)]);
    let mut rig = rig("always", vec![config]).await;
    let a = rig.gateway.create_agent("Agent A", "bridge").unwrap();
    let (a_token, a_id) = (a.token, a.agent.id);
    let b = rig.gateway.create_agent("Agent B", "bridge").unwrap();
    let agent = rig.agent_holding("desk", "agent-a", &a_token).await;

    let listing = spawn_call(&agent, "list_tickets", json!({}));
    let ask = rig.next_ask().await;
    assert_eq!(ask.asker.agent.as_deref(), Some("Agent A"));
    assert_eq!(ask.asker.declared.as_deref(), Some("agent-a"));
    rig.broker.answer(ask.id, always_allow()).unwrap();
    assert_ne!(listing.await.unwrap().unwrap().is_error, Some(true));
    let remembered = rig.settings.get().remembered;
    assert_eq!(remembered.len(), 1);
    assert_eq!(
        (
            remembered[0].agent_name.as_str(),
            remembered[0].tool.as_str()
        ),
        ("Agent A", "list_tickets")
    );
    // Again: no question.
    let again = call(&agent, "list_tickets", json!({})).await;
    assert_ne!(again.is_error, Some(true));
    assert!(rig.broker.pending().is_empty());

    // Agent B, with its own token, is asked, even when it calls itself agent-a.
    let other = rig.agent_holding("desk", "agent-a", &b.token).await;
    let listing = spawn_call(&other, "list_tickets", json!({}));
    let ask = rig.next_ask().await;
    assert_eq!(ask.asker.agent.as_deref(), Some("Agent B"));
    rig.broker.answer(ask.id, Answer::Cancel).unwrap();
    let denied = listing.await.unwrap().unwrap();
    assert_eq!(denied.is_error, Some(true), "Escape denies");

    // A deny rule refuses without asking.
    let refused = call(&agent, "book_meeting", json!({})).await;
    assert_eq!(refused.is_error, Some(true));
    assert!(rig.broker.pending().is_empty());

    // A revoked token gets 401 at once, and no dialog; what was remembered for it goes.
    rig.gateway.revoke_agent(&a_id).unwrap();
    assert!(rig.settings.get().remembered.is_empty());
    rig.gateway.revoke_agent(&b.agent.id).unwrap();
    let refused = reqwest::Client::new()
        .post(rig.url("desk"))
        .header("authorization", format!("Bearer {}", b.token))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_tickets"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::UNAUTHORIZED);
    assert!(rig.broker.pending().is_empty());
}

/// Deleting the shared token's file replaces the token: whoever holds the new one is not given
/// what the person allowed the holder of the old one. Kept, the file keeps them.
#[tokio::test(flavor = "multi_thread")]
async fn a_replaced_shared_token_inherits_nothing_the_old_one_was_allowed() {
    let desk = desk().await;
    let dir = scratch("shared-replaced");
    let mut rig = rig_in(
        dir.clone(),
        vec![upstream("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let agent = rig.agent("desk", "old-holder", false).await;
    let listing = spawn_call(&agent, "list_tickets", json!({}));
    let ask = rig.next_ask().await;
    rig.broker.answer(ask.id, always_allow()).unwrap();
    listing.await.unwrap().unwrap();
    let settings = rig.settings.clone();
    assert_eq!(settings.get().remembered.len(), 1);
    rig.gateway.shutdown().await;
    let start = || {
        Gateway::new(
            GatewayConfig::default(),
            vec![],
            rig.broker.clone(),
            settings.clone(),
            dir.join("gateway-token"),
        )
        .unwrap()
    };
    drop(start());
    assert_eq!(settings.get().remembered.len(), 1, "the same token, kept");
    std::fs::remove_file(dir.join("gateway-token")).unwrap();
    drop(start());
    assert!(
        settings.get().remembered.is_empty(),
        "{:?}",
        settings.get().remembered
    );
}

/// A name the server did not list is asked about as such, and one a lax server would take for a
/// denied tool's is denied with it, asking nobody.
#[tokio::test(flavor = "multi_thread")]
async fn an_unlisted_tool_is_asked_about_as_unlisted_and_a_denied_tools_lookalike_is_denied() {
    let desk = desk().await;
    let mut config = upstream("desk", &desk, ProtocolChoice::Legacy);
    config.tool_policy = BTreeMap::from([("delete_ticket".to_owned(), ToolRule::Deny)]);
    let mut rig = rig("unlisted", vec![config]).await;
    let agent = rig.agent("desk", "agent", false).await;
    let refused = call(&agent, "Delete_Ticket", json!({"id": "T-1"})).await;
    assert_eq!(refused.is_error, Some(true));
    assert!(text(&refused).contains("rule: deny"), "{}", text(&refused));
    assert!(rig.broker.pending().is_empty());

    let listed = spawn_call(&agent, "list_tickets", json!({}));
    let ask = rig.next_ask().await;
    assert!(matches!(
        ask.kind,
        AskKind::ToolCall {
            unlisted: false,
            ..
        }
    ));
    rig.broker.answer(ask.id, Answer::Cancel).unwrap();
    listed.await.unwrap().unwrap();
    let unlisted = spawn_call(&agent, "purge_everything", json!({}));
    let ask = rig.next_ask().await;
    assert!(matches!(
        ask.kind,
        AskKind::ToolCall {
            unlisted: true,
            sessionless: false,
            ..
        }
    ));
    rig.broker.answer(ask.id, Answer::Cancel).unwrap();
    unlisted.await.unwrap().unwrap();

    // A 2026-07-28 agent keeps no session: "for this agent's session" is neither offered
    // nor taken (its calls share one pooled upstream with its other conversations).
    let modern = rig.agent("desk", "modern-agent", true).await;
    let listing = spawn_call(&modern, "list_tickets", json!({}));
    let ask = rig.next_ask().await;
    assert!(matches!(
        ask.kind,
        AskKind::ToolCall {
            sessionless: true,
            ..
        }
    ));
    let for_the_session = Answer::Remember {
        decision: countersign_core::ask::approval::Remember {
            allow: true,
            lasting: countersign_core::ask::approval::Lasting::Session,
            covering: countersign_core::ask::approval::Covering::AnyArguments { also_sent: None },
        },
    };
    assert!(matches!(
        rig.broker.answer(ask.id, for_the_session),
        Err(countersign_core::ask::AnswerError::Malformed { .. })
    ));
    rig.broker.answer(ask.id, Answer::Cancel).unwrap();
    listing.await.unwrap().unwrap();
    assert!(rig.settings.get().remembered.is_empty());
    rig.gateway.shutdown().await;
}

/// An agent holding a token that calls as fast as it can cannot push the person's questions
/// out of the audit log: past its budget, its calls are counted by the token it holds, not
/// by the name it gives, and written together; another agent's go on being written.
#[tokio::test(flavor = "multi_thread")]
async fn a_flooding_agents_calls_are_counted_past_its_budget_and_anothers_are_written() {
    use countersign_core::ask::audit::{AuditRecord, traffic};
    let desk = desk().await;
    let mut config = upstream("desk", &desk, ProtocolChoice::Legacy);
    config.tool_policy = BTreeMap::from([("list_tickets".to_owned(), ToolRule::Allow)]);
    let rig = rig("flood", vec![config]).await;
    let a = rig.gateway.create_agent("Agent A", "bridge").unwrap();
    let b = rig.gateway.create_agent("Agent B", "bridge").unwrap();
    let flooder = rig.agent_holding("desk", "agent-b", &a.token).await;
    let other = rig.agent_holding("desk", "agent-b", &b.token).await;
    let calls = traffic::BURST + 20;
    for _ in 0..calls {
        call(&flooder, "list_tickets", json!({})).await;
    }
    call(&other, "list_tickets", json!({})).await;
    rig.broker.audit().record_what_was_counted().unwrap();
    let records = rig.records();
    let gated = |who: &str| {
        records
            .iter()
            .filter(|r| {
                matches!(r, AuditRecord::Gated { agent: Some(a), tool, allowed: true, .. }
                if a == who && tool == "list_tickets")
            })
            .count() as u64
    };
    let counted: u64 = records
        .iter()
        .filter_map(|r| match r {
            AuditRecord::Counted {
                agent: Some(a),
                counts,
                ..
            } if a == "Agent A" => counts
                .iter()
                .find(|c| c.what == "list_tickets" && c.allowed == Some(true))
                .map(|c| c.n),
            _ => None,
        })
        .sum();
    assert!(
        gated("Agent A") < traffic::BURST + 2,
        "{}",
        gated("Agent A")
    );
    assert!(counted >= 18, "{counted}");
    assert_eq!(gated("Agent A") + counted, calls);
    assert_eq!(gated("Agent B"), 1);
    rig.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_cancelling_its_call_withdraws_the_question_and_nothing_is_deleted() {
    let desk = desk().await;
    let mut rig = rig(
        "cancel",
        vec![upstream("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let agent = rig.agent("desk", "test-agent", false).await;
    let mut params = CallToolRequestParams::new("delete_ticket");
    params.arguments = json!({"id": "t3"}).as_object().cloned();
    let handle = agent
        .peer()
        .send_cancellable_request(
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params)),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    allow_next_call(&mut rig, "delete_ticket").await;
    let question = rig.next_ask().await;
    assert!(matches!(question.kind, AskKind::Form { .. }));
    handle.cancel(Some("changed my mind".into())).await.unwrap();
    let (id, outcome) = rig.next_resolution().await;
    assert_eq!(id, question.id);
    // Withdrawn as the agent's, not answered. (The desk withdraws its question too, once the
    // gateway cancels its call; that echo must not be what is recorded.)
    assert_eq!(
        outcome,
        Outcome::Cancelled {
            reason: CancelReason::Agent
        }
    );
    // A late yes is refused, and the ticket stays.
    assert!(rig.broker.answer(question.id, confirm()).is_err());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(desk.store.contains("t3"));
}

/// An agent that posts on more than one connection (the bridge, a TypeScript SDK agent) can
/// have its cancellation arrive before the call it withdraws. The call then runs nothing and
/// asks nobody: it is answered as cancelled.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancellation_that_overtakes_its_call_still_withdraws_it() {
    let desk = desk().await;
    let rig = rig(
        "cancel-first",
        vec![upstream("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let mut agent = rig.raw_agent("desk", "two-connections").await;
    let cancel = agent
        .send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 77, "reason": "changed my mind"}}),
        )
        .await;
    assert_eq!(cancel.status(), 202);
    let answer = agent
        .post(
            77,
            "tools/call",
            json!({"name": "delete_ticket", "arguments": {"id": "t3"}}),
        )
        .await;
    assert_eq!(
        answer["error"]["message"], "the agent cancelled the request",
        "{answer}"
    );
    assert!(rig.broker.pending().is_empty(), "nobody is asked");
    assert!(desk.store.contains("t3"));
    // Only that call: the session goes on.
    let listed = agent.post(78, "tools/list", json!({})).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    rig.gateway.shutdown().await;
}

/// The agent ends its session (DELETE) while a call of its waits for the person: the call is
/// cancelled and its question withdrawn, and the session takes no more calls. Meanwhile a
/// second request with the id of the one in flight is refused: it would have taken the first's
/// cancellation.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_its_agent_ended_runs_nothing_more() {
    let desk = desk().await;
    let mut rig = rig(
        "delete-ends",
        vec![upstream("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let agent = std::sync::Arc::new(rig.raw_agent("desk", "deleter").await);
    let delete = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "delete_ticket", "arguments": {"id": "t3"}}})
    };
    let waiting = tokio::spawn({
        let agent = agent.clone();
        async move { answer_of(agent.send(delete(5)).await).await }
    });
    let asked = rig.next_ask().await;
    let (_, _, twice) = agent.exchange(delete(5)).await;
    assert!(twice.contains("already in flight"), "{twice}");
    assert!(agent.end().await.status().is_success());
    let (id, outcome) = rig.next_resolution().await;
    assert_eq!(id, asked.id);
    assert!(matches!(outcome, Outcome::Cancelled { .. }), "{outcome:?}");
    let (_, _, body) = waiting.await.unwrap();
    assert!(!body.contains("\"result\""), "{body}");
    let after = agent.send(delete(6)).await;
    assert_eq!(after.status(), 404);
    assert!(rig.broker.pending().is_empty());
    assert!(desk.store.contains("t3"));
    rig.gateway.shutdown().await;
}

/// What the gateway answers itself (here a denial) is in the agent's revision's shape, as
/// rmcp's server shapes every result: no 2026 `resultType` for a 2025-11-25 session.
#[tokio::test(flavor = "multi_thread")]
async fn a_denial_on_the_lane_has_the_shape_of_the_agents_revision() {
    let desk = desk().await;
    let mut config = upstream("desk", &desk, ProtocolChoice::Legacy);
    config.tool_policy = BTreeMap::from([("delete_ticket".to_owned(), ToolRule::Deny)]);
    let rig = rig("deny-shape", vec![config]).await;
    let mut agent = rig.raw_agent("desk", "legacy").await;
    let answer = agent
        .post(
            5,
            "tools/call",
            json!({"name": "delete_ticket", "arguments": {"id": "t3"}}),
        )
        .await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(answer["result"].get("resultType").is_none(), "{answer}");
    assert!(desk.store.contains("t3"));
    rig.gateway.shutdown().await;
}

/// The TypeScript server over Streamable HTTP (2025-11-25), `tools` allowed without asking.
fn ts_http_upstream(peer: &common::HttpPeer, tools: &[&str]) -> ServerConfig {
    let mut config = common::with_test_timeouts(ServerConfig::http("ts", &peer.url));
    config.protocol = ProtocolChoice::Legacy;
    for tool in tools {
        config.tool_policy.insert((*tool).into(), ToolRule::Allow);
    }
    config
}

/// Over Streamable HTTP a server's question comes on the response stream of the call it
/// belongs to, and it is that call's alone: with two calls in flight, the agent cancelling one
/// withdraws that one's question only; the other stays with the person and is answered.
#[tokio::test(flavor = "multi_thread")]
async fn an_agent_cancelling_one_of_two_calls_withdraws_only_that_calls_question() {
    let ts = common::HttpPeer::start_ts().await;
    let mut rig = rig(
        "cancel-one",
        vec![ts_http_upstream(&ts, &["confirm_action"])],
    )
    .await;
    let agent = rig.agent("ts", "test-agent", false).await;
    let send = |action: &str| {
        let mut params = CallToolRequestParams::new("confirm_action");
        params.arguments = json!({"action": action}).as_object().cloned();
        agent.peer().send_cancellable_request(
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params)),
            rmcp::service::PeerRequestOptions::no_options(),
        )
    };
    let first = send("first").await.unwrap();
    let first_question = rig.next_ask().await;
    let second = send("second").await.unwrap();
    let second_question = rig.next_ask().await;
    let message = |ask: &Ask| match &ask.kind {
        AskKind::Form { message, .. } => message.clone(),
        other => panic!("a form, got {other:?}"),
    };
    assert_eq!(message(&first_question), "Confirm: first");
    assert_eq!(message(&second_question), "Confirm: second");

    first.cancel(Some("not that one".into())).await.unwrap();
    let (id, outcome) = rig.next_resolution().await;
    assert_eq!(id, first_question.id);
    assert_eq!(
        outcome,
        Outcome::Cancelled {
            reason: CancelReason::Agent
        }
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        rig.broker
            .pending()
            .iter()
            .any(|ask| ask.id == second_question.id),
        "the other call's question is still the person's"
    );
    rig.broker.answer(second_question.id, confirm()).unwrap();
    let result = tokio::time::timeout(WAIT, second.await_response())
        .await
        .expect("the second call answered in time")
        .unwrap();
    let rmcp::model::ServerResult::CallToolResult(result) = result else {
        panic!("a call result, got {result:?}");
    };
    assert_eq!(
        text(&result),
        r#"{"action":"accept","content":{"confirm":true}}"#
    );
    ts.stop().await;
    rig.gateway.shutdown().await;
}

/// Posts `body` with `token` on a connection whose socket belongs to `uid` (made while the
/// thread's file-system uid is `uid`, which is whose Linux says the socket is), and returns the
/// answer's status line and body.
/// A connection to `addr` made as `uid` (its socket is that user's), from a thread of its own.
fn connect_as_uid(addr: SocketAddr, uid: u32) -> std::net::TcpStream {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // setfsuid is per thread, so the rest of the test runs as before.
                // SAFETY: plain system calls on this thread's own credentials.
                let before = unsafe { libc::setfsuid(uid) };
                let now = unsafe { libc::setfsuid(u32::MAX) };
                assert_eq!(
                    now as u32, uid,
                    "cannot act as uid {uid}: this test must run as root"
                );
                let stream = std::net::TcpStream::connect(addr);
                unsafe { libc::setfsuid(before as u32) };
                stream.unwrap()
            })
            .join()
            .unwrap()
    })
}

fn post_as_uid(addr: SocketAddr, uid: u32, token: &str, body: &str) -> (String, String) {
    use std::io::{Read, Write};
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut stream = connect_as_uid(addr, uid);
                write!(
                    stream,
                    "POST /mcp/desk HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
                     Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .unwrap();
                let mut answer = String::new();
                stream.read_to_string(&mut answer).unwrap();
                let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
                (head.lines().next().unwrap_or("").to_owned(), body.to_owned())
            })
            .join()
            .unwrap()
    })
}

/// Another user's connection is answered and closed at once, whether it sends a request or
/// nothing at all: served, it could idle with one of the app's descriptors for as long as it
/// liked, and enough of them would leave none for the person's agents. Needs root.
#[tokio::test(flavor = "multi_thread")]
async fn another_users_silent_connection_is_told_why_and_closed_at_once() {
    let (desk, _) = counting_desk().await;
    let rig = rig(
        "peer-silent",
        vec![upstream("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let addr = rig.addr;
    let answer = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut stream = connect_as_uid(addr, 65534);
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut answer = String::new();
        // Sends nothing, and is answered all the same, to the end.
        stream.read_to_string(&mut answer).map(|_| answer)
    })
    .await
    .unwrap()
    .expect("answered and closed, not left waiting");
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("another user (uid 65534)"), "{answer}");
    rig.gateway.shutdown().await;
}

/// The token is a bearer credential that can leak to another user of the computer (a host's
/// config file readable by all, or an HTTP entry sending it to whoever holds the port while
/// the app is down). In another user's hands it opens nothing: the connection is refused for
/// whose process made it, before the token is read. Needs root, to make a socket as `nobody`.
#[tokio::test(flavor = "multi_thread")]
async fn another_users_process_is_refused_whatever_token_it_sends() {
    let (desk, made) = counting_desk().await;
    let rig = rig(
        "peer-uid",
        vec![upstream("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let token = rig.gateway.token().to_owned();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}})
    .to_string();
    let addr = rig.addr;
    let (status, body) = tokio::task::spawn_blocking({
        let (token, init) = (token.clone(), init.clone());
        move || post_as_uid(addr, 65534, &token, &init)
    })
    .await
    .unwrap();
    assert!(status.contains(" 403 "), "{status}: {body}");
    assert!(body.contains("another user (uid 65534)"), "{body}");
    assert_eq!(made.load(std::sync::atomic::Ordering::SeqCst), 0);
    let refusals = rig.gateway.info().refusals;
    assert!(
        refusals.iter().any(|r| r.reason.contains("uid 65534")),
        "kept for the Connect page: {refusals:?}"
    );
    // The same request from the person's own process, made the same way, is served.
    // SAFETY: geteuid touches nothing.
    let own = unsafe { libc::geteuid() };
    let (status, body) = tokio::task::spawn_blocking(move || post_as_uid(addr, own, &token, &init))
        .await
        .unwrap();
    assert!(status.contains(" 200 "), "{status}: {body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn no_token_or_a_foreign_host_or_origin_is_refused_before_any_server_is_reached() {
    let (desk, made) = counting_desk().await;
    let rig = rig(
        "guard",
        vec![upstream("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let sessions = || made.load(std::sync::atomic::Ordering::SeqCst);
    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}});
    let post = |token: Option<&str>| {
        let mut request = http
            .post(rig.url("desk"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(init.to_string());
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        request
    };
    let token = rig.gateway.token().to_owned();
    assert_eq!(post(None).send().await.unwrap().status(), 401);
    assert_eq!(post(Some("wrong")).send().await.unwrap().status(), 401);
    let foreign_host = post(Some(&token))
        .header("host", "evil.example:80")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign_host.status(), 403);
    let foreign_origin = post(Some(&token))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign_origin.status(), 403);
    // A page served from the gateway's own address (by a process that held the port before
    // the app started) is same-origin, and runs in the person's own browser: its browser's
    // Fetch Metadata gives it away.
    let own_origin = format!("http://{}", rig.addr);
    for site in ["same-origin", "cross-site", "none"] {
        let from_a_page = post(Some(&token))
            .header("origin", &own_origin)
            .header("sec-fetch-site", site)
            .header("sec-fetch-mode", "cors")
            .send()
            .await
            .unwrap();
        assert_eq!(from_a_page.status(), 403, "{site}");
    }
    // None of them opened an upstream session: the desk saw no session at all.
    assert_eq!(sessions(), 0);
    // An agent on Node's `fetch` (the TypeScript SDK's, so Claude Code's, Cursor's, VS Code's)
    // sends `Sec-Fetch-Mode` alone, and a local Origin is allowed.
    let node = post(Some(&token))
        .header("origin", &own_origin)
        .header("sec-fetch-mode", "cors")
        .send()
        .await
        .unwrap();
    assert_eq!(node.status(), 200);
    // The right token, our Host: accepted.
    let ok = post(Some(&token)).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    // The scheme's case does not matter; the token's does.
    let lower = http
        .post(rig.url("desk"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("authorization", format!("bearer {token}"))
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(lower.status(), 200);
    let upper_token = post(Some(&token.to_uppercase())).send().await.unwrap();
    assert_eq!(upper_token.status(), 401);
    assert!(sessions() >= 1);
    let unknown = http
        .post(format!("http://{}/mcp/nope", rig.addr))
        .header("authorization", format!("Bearer {token}"))
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_agents_at_once_get_separate_upstream_sessions() {
    let desk = desk().await;
    let mut config = upstream("desk", &desk, ProtocolChoice::Legacy);
    config.tool_policy = BTreeMap::from([("session_info".to_owned(), ToolRule::Allow)]);
    let rig = rig("two", vec![config]).await;
    let a = rig.agent("desk", "agent-a", false).await;
    let b = rig.agent("desk", "agent-b", false).await;
    let session = |r: CallToolResult| -> String {
        let info: Value = serde_json::from_str(&text(&r)).unwrap();
        info["sessionId"].as_str().unwrap().to_owned()
    };
    let (ra, rb) = tokio::join!(
        call(&a, "session_info", json!({})),
        call(&b, "session_info", json!({}))
    );
    let (sa, sb) = (session(ra), session(rb));
    assert_ne!(sa, sb);
    // And each agent keeps its own.
    assert_eq!(session(call(&a, "session_info", json!({})).await), sa);
    assert!(rig.broker.pending().is_empty());
}

/// Runs the TypeScript SDK agent to completion and returns its JSON lines.
async fn ts_agent(args: Vec<String>) -> Vec<Value> {
    let script = common::peer_path("ts-agent.mjs");
    let output = tokio::time::timeout(
        WAIT,
        tokio::process::Command::new(common::node())
            .arg(script)
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the agent finished in time")
    .expect("the agent ran");
    let lines: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        output.status.success(),
        "agent failed: {lines:?}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    lines
}

#[tokio::test(flavor = "multi_thread")]
async fn a_typescript_sdk_agent_over_http_deletes_a_ticket_once_the_person_confirms() {
    let desk = desk().await;
    let mut rig = rig(
        "ts-http",
        vec![upstream("desk", &desk, ProtocolChoice::Auto)],
    )
    .await;
    let agent = tokio::spawn(ts_agent(vec![
        "--url".into(),
        rig.url("desk"),
        "--token".into(),
        rig.gateway.token().to_owned(),
        "--name".into(),
        "ts-agent".into(),
        "--call".into(),
        "delete_ticket".into(),
        "--args".into(),
        json!({"id": "t4"}).to_string(),
    ]));
    let approval = allow_next_call(&mut rig, "delete_ticket").await;
    assert_eq!(approval.asker.declared.as_deref(), Some("ts-agent"));
    let question = rig.next_ask().await;
    rig.broker.answer(question.id, confirm()).unwrap();
    let lines = agent.await.unwrap();
    let names = lines[0]["names"].as_array().unwrap();
    assert!(names.iter().any(|n| n == "delete_ticket"), "{lines:?}");
    assert_eq!(lines[1]["step"], "call", "{lines:?}");
    assert_ne!(lines[1]["result"]["isError"], true, "{lines:?}");
    assert!(!desk.store.contains("t4"));
}

#[tokio::test(flavor = "multi_thread")]
async fn server_everythings_question_reaches_the_person_for_an_agent_that_cannot_elicit() {
    let script = common::everything_script();
    let mut everything = common::with_test_timeouts(ServerConfig::stdio(
        "everything",
        common::node(),
        &[script.as_str(), "stdio"],
    ));
    everything.trusted = false;
    everything.tool_policy =
        BTreeMap::from([("trigger-elicitation-request".to_owned(), ToolRule::Allow)]);
    let mut rig = rig("everything", vec![everything]).await;
    // An rmcp agent with no capabilities: server-everything would refuse to ask it directly.
    let agent = rig.agent("everything", "plain-agent", false).await;
    let asking = spawn_call(&agent, "trigger-elicitation-request", json!({}));
    let ask = rig.next_ask().await;
    assert_eq!(ask.asker.server, "everything");
    assert_eq!(ask.asker.declared.as_deref(), Some("plain-agent"));
    assert!(matches!(ask.kind, AskKind::Form { .. }), "{ask:?}");
    let content = json!({
        "name": "Ada Lovelace",
        "firstLine": "It was a dark and stormy night.",
        "integer": 42,
        "number": 2.5,
        "untitledSingleSelectEnum": "Monica",
        "untitledMultipleSelectEnum": ["Guitar"],
        "titledSingleSelectEnum": "hero-1",
        "titledMultipleSelectEnum": ["fish-1"],
        "legacyTitledEnum": "pet-1",
    });
    accept(&rig, ask.id, content);
    let result = tokio::time::timeout(WAIT, asking)
        .await
        .expect("in time")
        .unwrap()
        .expect("answered");
    let said = text(&result);
    assert!(
        said.contains("User provided the requested information"),
        "{said}"
    );
    assert!(said.contains("Ada Lovelace"), "{said}");
    rig.gateway.shutdown().await;
}

/// `tests/peers/raw-server.mjs` (an SDK-less stdio server) as the upstream `raw`, 2025-11-25.
fn raw_server() -> ServerConfig {
    let script = common::peer_path("raw-server.mjs");
    let mut raw = common::with_test_timeouts(ServerConfig::stdio(
        "raw",
        common::node(),
        &[script.as_str()],
    ));
    raw.protocol = ProtocolChoice::Legacy;
    raw
}

/// A raw JSON-RPC exchange with the gateway, as an agent that is not built on rmcp would.
#[derive(Clone)]
struct RawAgent {
    http: reqwest::Client,
    url: String,
    token: String,
    session: Option<String>,
}

impl RawAgent {
    /// A raw agent holding `token` that has opened a 2025-11-25 session as `name`, and the
    /// answer to its `initialize`.
    async fn open(url: String, token: &str, name: &str) -> (RawAgent, Value) {
        Self::open_offering(url, token, name, json!({})).await
    }

    /// The same, declaring `capabilities`.
    async fn open_offering(
        url: String,
        token: &str,
        name: &str,
        capabilities: Value,
    ) -> (RawAgent, Value) {
        let mut agent = RawAgent {
            http: reqwest::Client::new(),
            url,
            token: token.to_owned(),
            session: None,
        };
        let init = agent
            .post(
                1,
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
                "clientInfo": {"name": name, "version": "1"}}),
            )
            .await;
        (agent, init)
    }

    /// A POST on the session, with the headers of a 2025-11-25 agent.
    fn on_session(&self) -> reqwest::RequestBuilder {
        self.http
            .post(&self.url)
            .header("authorization", format!("Bearer {}", self.token))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-session-id", self.session.clone().expect("a session"))
            .header("mcp-protocol-version", "2025-11-25")
    }

    /// The session's own stream (GET), each JSON-RPC message on it as it arrives.
    async fn listen(&self) -> tokio::sync::mpsc::UnboundedReceiver<Value> {
        let response = self
            .http
            .get(&self.url)
            .header("authorization", format!("Bearer {}", self.token))
            .header("accept", "text/event-stream")
            .header(
                "mcp-session-id",
                self.session.as_deref().expect("a session"),
            )
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .expect("listening");
        assert!(response.status().is_success(), "{}", response.status());
        sse_messages(response)
    }

    async fn post(&mut self, id: u64, method: &str, params: Value) -> Value {
        let body = self.post_text(id, method, params).await;
        // Plain JSON, or the one `data:` line of an SSE answer.
        let json = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .find(|d| !d.trim().is_empty())
            .unwrap_or(&body)
            .to_owned();
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {body}"))
    }

    /// The answer's body as it came.
    async fn post_text(&mut self, id: u64, method: &str, params: Value) -> String {
        let mut request = self
            .http
            .post(&self.url)
            .header("authorization", format!("Bearer {}", self.token))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(
                json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
            );
        if let Some(session) = &self.session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        let response = request.send().await.expect("posted");
        if let Some(session) = response.headers().get("mcp-session-id") {
            self.session = Some(session.to_str().unwrap().to_owned());
        }
        response.text().await.expect("body")
    }
}

/// The next message on `stream`, within the tests' wait.
async fn next_on(stream: &mut tokio::sync::mpsc::UnboundedReceiver<Value>, what: &str) -> Value {
    tokio::time::timeout(WAIT, stream.recv())
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing in time"))
        .unwrap_or_else(|| panic!("{what}: the stream ended"))
}

/// The person allows the sampling request the next question is about.
async fn allow_sampling(rig: &mut Rig) {
    let ask = rig.next_ask().await;
    assert!(
        matches!(ask.kind, AskKind::Sampling { .. }),
        "{:?}",
        ask.kind
    );
    rig.broker
        .answer(ask.id, Answer::Accept { content: None })
        .unwrap();
}

/// Each JSON-RPC message of an SSE answer as it arrives.
fn sse_messages(mut response: reqwest::Response) -> tokio::sync::mpsc::UnboundedReceiver<Value> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut text = String::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = text.find("\n\n") {
                let event: String = text.drain(..end + 2).collect();
                for data in event.lines().filter_map(|l| l.strip_prefix("data:")) {
                    if let Ok(message) = serde_json::from_str(data.trim()) {
                        let _ = tx.send(message);
                    }
                }
            }
        }
    });
    rx
}

#[tokio::test(flavor = "multi_thread")]
async fn fields_rmcp_cannot_model_reach_the_agent_unchanged() {
    let mut raw = raw_server();
    raw.trusted = true; // its echo claims read-only: no approval in the way
    let rig = rig("faithful", vec![raw]).await;
    answers_keep_what_rmcp_cannot_model(&rig).await;
    rig.gateway.shutdown().await;
}

/// The same from an upstream that answers over Streamable HTTP in plain JSON bodies, which
/// rmcp's own client parsed before anything else could read them.
#[tokio::test(flavor = "multi_thread")]
async fn fields_rmcp_cannot_model_reach_the_agent_from_a_plain_json_http_upstream() {
    let (_server, url) = common::node_peer_at_url("raw-server.mjs", &["--http"], &[]).await;
    let mut raw = common::with_test_timeouts(ServerConfig::http("raw", &url));
    raw.protocol = ProtocolChoice::Legacy;
    raw.trusted = true;
    let rig = rig("faithful-json", vec![raw]).await;
    answers_keep_what_rmcp_cannot_model(&rig).await;
    rig.gateway.shutdown().await;
}

/// A call to an HTTP upstream on the 2025 lifecycle is posted by the gateway itself, in the
/// session rmcp's client opened (the server sees the gateway's own request id). When the
/// server ends that session, the call goes rmcp's way, which opens a new one, and the next
/// call is the gateway's again.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_to_an_http_upstream_is_posted_by_the_gateway_and_outlives_the_session_ending() {
    for mode in ["--http", "--sse"] {
        let (_server, url) = common::node_peer_at_url("raw-server.mjs", &[mode], &[]).await;
        let mut raw = raw_http(&url);
        raw.tool_policy = BTreeMap::from([
            ("id".to_owned(), ToolRule::Allow),
            ("forget".to_owned(), ToolRule::Allow),
        ]);
        let rig = rig(&format!("posted{mode}"), vec![raw]).await;
        let (mut agent, _) = RawAgent::open(rig.url("raw"), rig.gateway.token(), "raw-agent").await;
        let mut call = async |id: u64, tool: &str| -> String {
            let answer = agent
                .post(id, "tools/call", json!({"name": tool, "arguments": {}}))
                .await;
            answer["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_else(|| panic!("{mode} {tool}: {answer}"))
                .to_owned()
        };
        let ours = |seen: &str| seen.starts_with("\"countersign:");
        let first = call(2, "id").await;
        assert!(ours(&first), "{mode}: the server saw {first}");
        assert_eq!(call(3, "forget").await, "forgotten");
        // The session is gone: answered all the same, in a new one.
        let after = call(4, "id").await;
        assert!(
            serde_json::from_str::<Value>(&after).is_ok_and(|id| id.is_number() || id.is_string()),
            "{mode}: {after}"
        );
        let next = call(5, "id").await;
        assert!(ours(&next), "{mode}: the server saw {next}");
        assert_ne!(first, next, "{mode}");
        rig.gateway.shutdown().await;
    }
}

/// An answer the server sends on its standalone stream, while the call's own response stream
/// stays open and quiet, still answers the call the gateway posted.
#[tokio::test(flavor = "multi_thread")]
async fn an_answer_on_the_servers_standalone_stream_answers_the_posted_call() {
    let (_server, url) = common::node_peer_at_url("raw-server.mjs", &["--sse"], &[]).await;
    let mut raw = raw_http(&url);
    raw.tool_policy = BTreeMap::from([("elsewhere".to_owned(), ToolRule::Allow)]);
    let rig = rig("elsewhere", vec![raw]).await;
    let (mut agent, _) = RawAgent::open(rig.url("raw"), rig.gateway.token(), "raw-agent").await;
    let answer = tokio::time::timeout(
        WAIT,
        agent.post(
            2,
            "tools/call",
            json!({"name": "elsewhere", "arguments": {}}),
        ),
    )
    .await
    .expect("answered in time");
    assert_eq!(
        answer["result"]["content"][0]["text"], "answered elsewhere",
        "{answer}"
    );
    rig.gateway.shutdown().await;
}

/// A raw agent on the `raw` server gets its vendor fields in every kind of answer.
async fn answers_keep_what_rmcp_cannot_model(rig: &Rig) {
    let (mut agent, init) = RawAgent::open(rig.url("raw"), rig.gateway.token(), "raw-agent").await;
    assert_eq!(init["result"]["serverInfo"]["name"], "raw-server", "{init}");
    let vendor = json!({"kept": true, "n": 7});
    let tools = agent.post(2, "tools/list", json!({})).await;
    assert_eq!(tools["result"]["tools"][0]["x-vendor"], vendor, "{tools}");
    let called = agent
        .post(
            3,
            "tools/call",
            json!({"name": "echo", "arguments": {"a": 1}}),
        )
        .await;
    assert_eq!(called["result"]["x-vendor"], vendor, "{called}");
    assert_eq!(called["result"]["content"][0]["text"], "{\"a\":1}");
    let resources = agent.post(4, "resources/list", json!({})).await;
    assert_eq!(
        resources["result"]["resources"][0]["x-vendor"], vendor,
        "{resources}"
    );
    let read = agent
        .post(5, "resources/read", json!({"uri": "raw://a"}))
        .await;
    assert_eq!(read["result"]["contents"][0]["x-vendor"], vendor, "{read}");
    let prompts = agent.post(6, "prompts/list", json!({})).await;
    assert_eq!(
        prompts["result"]["prompts"][0]["x-vendor"], vendor,
        "{prompts}"
    );
    let prompt = agent.post(7, "prompts/get", json!({"name": "p"})).await;
    assert_eq!(prompt["result"]["x-vendor"], vendor, "{prompt}");
    // Our mark never leaks.
    assert!(!called.to_string().contains("countersign"), "{called}");
    // A result goes on as the bytes the server wrote: big and exponent numbers, escapes,
    // spacing and key order that a parse and a rewrite would change.
    let body = agent
        .post_text(
            8,
            "tools/call",
            json!({"name": "verbatim", "arguments": {}}),
        )
        .await;
    let verbatim = r#"{"content": [{"type":"text","text":"caf\u00e9 \ud83d\ude00"}], "x-exact": {"big": 123456789012345678901234567890, "e": 1E2, "neg0": -0.0, "order": {"z": 1, "a": 2}}}"#;
    assert_eq!(
        body,
        format!(r#"{{"jsonrpc":"2.0","id":8,"result":{verbatim}}}"#)
    );
}

/// The other way: what an agent sends with a call beyond rmcp's model (a vendor's field, a
/// newer revision's) reaches the upstream as sent, on the lane (answered in JSON, or on a
/// stream for a call with a progress token or from an agent that offers sampling).
/// The tool's name and arguments are the ones the gate judged, and `_meta` is the gateway's
/// own.
#[tokio::test(flavor = "multi_thread")]
async fn fields_rmcp_cannot_model_reach_the_upstream_as_the_agent_sent_them() {
    let mut raw = raw_server();
    raw.trusted = true; // `params` claims read-only: no approval in the way
    let rig = rig("sent", vec![raw]).await;
    let (mut agent, _) = RawAgent::open(rig.url("raw"), rig.gateway.token(), "raw-agent").await;
    let vendor = json!({"kept": true, "n": [1, 2.5, "x"]});
    let received = |answer: &Value| -> Value {
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"));
        serde_json::from_str(text).unwrap()
    };
    // On the lane.
    let answer = agent
        .post(
            2,
            "tools/call",
            json!({"name": "params", "arguments": {"a": 1}, "x-vendor": vendor, "future": "yes"}),
        )
        .await;
    let got = received(&answer);
    assert_eq!(got["x-vendor"], vendor, "{got}");
    assert_eq!(got["future"], "yes", "{got}");
    assert_eq!(got["name"], "params");
    assert_eq!(got["arguments"], json!({"a": 1}));
    // On the lane's stream, for either agent: the progress token upstream is the gateway's,
    // beside the agent's field.
    let (mut sampler, _) = RawAgent::open_offering(
        rig.url("raw"),
        rig.gateway.token(),
        "sampling-agent",
        json!({"sampling": {}}),
    )
    .await;
    for (id, agent) in [(3, &mut agent), (4, &mut sampler)] {
        let answer = agent
            .post(
                id,
                "tools/call",
                json!({"name": "params", "arguments": {"b": 2},
                    "_meta": {"progressToken": "mine"}, "x-vendor": vendor}),
            )
            .await;
        let got = received(&answer);
        assert_eq!(got["x-vendor"], vendor, "{got}");
        assert_eq!(got["arguments"], json!({"b": 2}));
        assert!(
            got["_meta"]["progressToken"].is_string() || got["_meta"]["progressToken"].is_number(),
            "{got}"
        );
        assert_ne!(got["_meta"]["progressToken"], "mine", "{got}");
    }
    // rmcp's way (the lane leaves a request with the 2026 revision's headers to rmcp, which
    // ignores them on a 2025-11-25 session): the same.
    let response = agent
        .on_session()
        .header("mcp-method", "tools/call")
        .body(
            json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                "params": {"name": "params", "arguments": {"c": 3}, "x-vendor": vendor}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    let body = response.text().await.unwrap();
    let json = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .find(|d| !d.trim().is_empty())
        .unwrap_or(&body);
    let got = received(&serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {body}")));
    assert_eq!(got["x-vendor"], vendor, "{got}");
    assert_eq!(got["arguments"], json!({"c": 3}));
    // A call with nothing beyond the model goes as before.
    let answer = agent
        .post(5, "tools/call", json!({"name": "params", "arguments": {}}))
        .await;
    let got = received(&answer);
    assert_eq!(
        got.as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "_meta")
            .count(),
        2,
        "{got}"
    );
    rig.gateway.shutdown().await;
}

/// A call to a stdio server is written on its wire by the gateway itself, beside rmcp's
/// session (`mcp::direct`): the server sees the gateway's own request id and progress token,
/// and its answer comes back as written. rmcp numbers its requests.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_to_a_stdio_server_goes_on_its_wire_beside_rmcps_session() {
    let mut raw = raw_server();
    raw.trusted = true; // `params` claims read-only: no approval in the way
    let rig = rig("direct", vec![raw]).await;
    let (mut agent, _) = RawAgent::open(rig.url("raw"), rig.gateway.token(), "raw-agent").await;
    for (id, params) in [
        (2, json!({"name": "params", "arguments": {"a": 1}})),
        (
            3,
            json!({"name": "params", "arguments": {"a": 2}, "_meta": {"progressToken": 9}}),
        ),
    ] {
        let answer = agent.post(id, "tools/call", params).await;
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"));
        let got: Value = serde_json::from_str(text).unwrap();
        let token = got["_meta"]["progressToken"].as_str().unwrap_or_default();
        assert!(token.starts_with("countersign:"), "{got}");
    }
    rig.gateway.shutdown().await;
}

/// A call's result of only a tool result's members reaches an agent on the lane as the server
/// wrote it, never read into rmcp's model on the way: a content block of a kind rmcp does not
/// know (a newer revision's, say) arrives, where reading it typed made the call an error.
#[tokio::test(flavor = "multi_thread")]
async fn a_plain_call_result_reaches_the_agent_unread() {
    let mut raw = raw_server();
    raw.tool_policy = BTreeMap::from([("newer".to_owned(), ToolRule::Allow)]);
    let rig = rig("direct-unread", vec![raw]).await;
    let (mut agent, _) = RawAgent::open(rig.url("raw"), rig.gateway.token(), "raw-agent").await;
    let body = agent
        .post_text(2, "tools/call", json!({"name": "newer", "arguments": {}}))
        .await;
    assert_eq!(
        body,
        r#"{"jsonrpc":"2.0","id":2,"result":{"content": [{"type":"hologram","frames":[1, 2.50]}], "isError": false}}"#
    );
    rig.gateway.shutdown().await;
}

/// A stdio server that exits in the middle of a call fails that call at once: the agent is
/// not left waiting out the request's timeout. Its next call starts the server again.
#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_that_exits_mid_call_fails_the_call_at_once_and_the_session_goes_on() {
    let mut raw = raw_server();
    raw.tool_policy = BTreeMap::from([
        ("exit".to_owned(), ToolRule::Allow),
        ("echo".to_owned(), ToolRule::Allow),
    ]);
    let rig = rig("direct-exit", vec![raw]).await;
    let (mut agent, _) = RawAgent::open(rig.url("raw"), rig.gateway.token(), "raw-agent").await;
    let started = std::time::Instant::now();
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        agent.post(2, "tools/call", json!({"name": "exit", "arguments": {}})),
    )
    .await
    .expect("the call failed at once");
    assert!(answer["error"]["message"].is_string(), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // The agent's session goes on with the server started again, as the app's own sessions
    // reconnect: many agents open their session once, at their start.
    let answer = agent
        .post(
            3,
            "tools/call",
            json!({"name": "echo", "arguments": {"x": 1}}),
        )
        .await;
    assert!(answer["result"].is_object(), "{answer}");
    rig.gateway.shutdown().await;
}

/// A session whose server was started again (it crashed) has its subscriptions and log level
/// made again on the server's new session, and its agent is told what may have changed: the
/// resource it watches and the server's tools. A subscription the person allowed only for the
/// server's former session is not made again, and nobody is asked. Without this, the agent
/// heard of no change to the resource until it restarted.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_started_again_is_given_the_sessions_subscriptions_and_log_level_again() {
    let log = scratch("replay-log").join("raw-server.log");
    let mut raw = raw_server();
    if let countersign_core::config::TransportConfig::Stdio { env, .. } = &mut raw.transport {
        env.insert("RAW_SERVER_LOG".into(), log.display().to_string());
    }
    raw.tool_policy = BTreeMap::from([
        ("exit".to_owned(), ToolRule::Allow),
        ("echo".to_owned(), ToolRule::Allow),
    ]);
    let mut rig = rig("replay", vec![raw]).await;
    let (agent, mut hearing) = listening_agent(&rig, "raw").await;
    for (uri, answer) in [
        ("raw://a", always_allow_exactly()),
        (
            "raw://b",
            remember(
                true,
                Lasting::Session,
                Covering::AnyArguments { also_sent: None },
            ),
        ),
    ] {
        let peer = agent.peer().clone();
        let subscribing = tokio::spawn(async move {
            peer.subscribe(rmcp::model::SubscribeRequestParams::new(uri))
                .await
        });
        let ask = rig.next_ask().await;
        rig.broker.answer(ask.id, answer).unwrap();
        subscribing.await.unwrap().expect("subscribed");
    }
    agent
        .peer()
        .set_level(rmcp::model::SetLevelRequestParams::new(
            rmcp::model::LoggingLevel::Debug,
        ))
        .await
        .expect("level set");
    let crashed = tokio::time::timeout(
        WAIT,
        agent.peer().call_tool(CallToolRequestParams::new("exit")),
    )
    .await
    .expect("failed at once");
    assert!(crashed.is_err(), "{crashed:?}");
    let echoed = tokio::time::timeout(
        WAIT,
        agent.peer().call_tool(CallToolRequestParams::new("echo")),
    )
    .await
    .expect("in time")
    .expect("answered by the server started again");
    assert_ne!(echoed.is_error, Some(true));
    while let Ok(event) = rig.events.try_recv() {
        assert!(
            !matches!(event, AskEvent::Added { .. }),
            "nobody is asked: {event:?}"
        );
    }
    let told = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        told.lines().collect::<Vec<_>>(),
        [
            "subscribe raw://a",
            "subscribe raw://b",
            "level debug",
            // The server's new session:
            "level debug",
            "subscribe raw://a",
        ]
    );
    let mut heard = Vec::new();
    while heard.len() < 2 {
        match tokio::time::timeout(WAIT, hearing.recv()).await {
            Ok(Some(line)) => heard.push(line),
            other => panic!("heard only {heard:?}: {other:?}"),
        }
    }
    heard.sort();
    assert_eq!(heard, ["tools changed", "updated raw://a"]);
    rig.gateway.shutdown().await;
}

/// A server that stops answering between calls (hung) is noticed by a ping while its session
/// is idle, and the agent's next request starts it again, rather than waiting out a timeout
/// on every call for as long as the agent keeps its session.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_stops_answering_between_calls_is_started_again() {
    let mut faulty = common::with_test_timeouts(ServerConfig::stdio(
        "faulty",
        common::node(),
        &[&common::peer_path("fault-server.mjs")],
    ));
    faulty.request_timeout = Duration::from_secs(2);
    faulty.tool_policy = BTreeMap::from([("fault".to_owned(), ToolRule::Allow)]);
    let mut rig = rig("ping-hung", vec![faulty]).await;
    rig.gateway.set_ping_every(Duration::from_millis(300));
    let agent = rig.agent("faulty", "test-agent", false).await;
    // It asks, then hangs; the agent gives up on the call.
    let mut params = CallToolRequestParams::new("fault");
    params.arguments = json!({"kind": "hang"}).as_object().cloned();
    let handle = agent
        .peer()
        .send_cancellable_request(
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params)),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    rig.next_ask().await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    handle.cancel(None).await.unwrap();
    rig.next_resolution().await;
    // Idle: a ping goes unanswered for its two seconds, and the session is closed.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let listed = tokio::time::timeout(Duration::from_secs(5), agent.peer().list_tools(None))
        .await
        .expect("answered")
        .expect("listed by the server started again");
    assert_eq!(listed.tools[0].name, "fault");
}

/// A stdio server that stops reading its stdin fills the pipe, and then writing a request to
/// it waits: that wait is part of the request's time, so the agent gets an answer (an error)
/// when the time is up, not never.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_stops_reading_cannot_hold_a_call_past_its_time() {
    let mut raw = raw_server();
    raw.tool_policy = BTreeMap::from([
        ("deaf".to_owned(), ToolRule::Allow),
        ("echo".to_owned(), ToolRule::Allow),
    ]);
    raw.request_timeout = Duration::from_secs(1);
    raw.answer_timeout = Duration::from_secs(1);
    let rig = rig("direct-deaf", vec![raw]).await;
    let (mut agent, _) = RawAgent::open(rig.url("raw"), rig.gateway.token(), "raw-agent").await;
    let deaf = agent
        .post(2, "tools/call", json!({"name": "deaf", "arguments": {}}))
        .await;
    assert!(deaf["error"].is_object(), "{deaf}");
    // Far more than a pipe and the server's own buffer hold.
    let big = "x".repeat(1024 * 1024);
    let started = std::time::Instant::now();
    let answer = tokio::time::timeout(
        Duration::from_secs(10),
        agent.post(
            3,
            "tools/call",
            json!({"name": "echo", "arguments": {"big": big}}),
        ),
    )
    .await
    .expect("the call ended when its time was up");
    assert!(answer["error"].is_object(), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(10));
    rig.gateway.shutdown().await;
}

/// A yes means exactly the call that runs: fields beyond rmcp's model, which go upstream
/// too, are shown to the person with the arguments; a decision remembered for these exact
/// arguments does not cover the same call with more, nor one remembered with more a call
/// whose own arguments merely look like it.
#[tokio::test(flavor = "multi_thread")]
async fn fields_beyond_the_model_are_judged_with_the_arguments() {
    let mut rig = rig("sent-gate", vec![raw_server()]).await; // untrusted: every call asks
    let (mut agent, _) = RawAgent::open(rig.url("raw"), rig.gateway.token(), "raw-agent").await;
    let plain = json!({"name": "params", "arguments": {"a": 1}});
    let calling = tokio::spawn(async move {
        let answer = agent.post(2, "tools/call", plain).await;
        (agent, answer)
    });
    let ask = rig.next_ask().await;
    let AskKind::ToolCall {
        arguments_text,
        also_sent_text,
        ..
    } = &ask.kind
    else {
        panic!("{ask:?}")
    };
    assert_eq!(arguments_text, "{\n  \"a\": 1\n}");
    assert_eq!(also_sent_text, &None);
    rig.broker.answer(ask.id, always_allow_exactly()).unwrap();
    let (mut agent, answer) = calling.await.unwrap();
    assert!(
        answer["result"]["content"][0]["text"].is_string(),
        "{answer}"
    );
    // The same arguments: remembered, nobody asked.
    let again = agent
        .post(
            3,
            "tools/call",
            json!({"name": "params", "arguments": {"a": 1}}),
        )
        .await;
    assert!(again["result"]["content"][0]["text"].is_string(), "{again}");
    assert!(rig.broker.pending().is_empty());
    // The same arguments with a field beyond the model: asked, and shown.
    let more = json!({"name": "params", "arguments": {"a": 1}, "x-force": true});
    let calling = tokio::spawn(async move {
        let answer = agent.post(4, "tools/call", more).await;
        (agent, answer)
    });
    let ask = rig.next_ask().await;
    let AskKind::ToolCall {
        arguments_text,
        also_sent_text,
        ..
    } = &ask.kind
    else {
        panic!("{ask:?}")
    };
    assert_eq!(arguments_text, "{\n  \"a\": 1\n}");
    assert_eq!(
        also_sent_text.as_deref(),
        Some("{\n  \"x-force\": true\n}"),
        "shown apart"
    );
    rig.broker.answer(ask.id, always_allow_exactly()).unwrap();
    let (mut agent, allowed) = calling.await.unwrap();
    let got: Value =
        serde_json::from_str(allowed["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(got["x-force"], true, "{got}");
    // A call whose own arguments look like what the person saw is another call: asked.
    let lookalike = json!({"name": "params",
        "arguments": {"arguments": {"a": 1}, "alsoSent": {"x-force": true}}});
    let calling = tokio::spawn(async move { agent.post(5, "tools/call", lookalike).await });
    let ask = rig.next_ask().await;
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    let refused = calling.await.unwrap();
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    rig.gateway.shutdown().await;
}

/// "Any arguments" is any arguments, and no more: a yes remembered for a plain call does not
/// cover the same tool called with a field beyond the model (which goes upstream too, and the
/// person never saw); one remembered for a call with such a field covers other arguments with
/// that very field, and nothing else beside them. Before, either covered every field an agent
/// cared to add.
#[tokio::test(flavor = "multi_thread")]
async fn any_arguments_does_not_cover_fields_the_person_never_saw() {
    let mut rig = rig("sent-any", vec![raw_server()]).await; // untrusted: every call asks
    let (agent, _) = RawAgent::open(rig.url("raw"), rig.gateway.token(), "raw-agent").await;
    let agent = std::sync::Arc::new(tokio::sync::Mutex::new(agent));
    let call = |id: u64, params: Value| {
        let agent = agent.clone();
        tokio::spawn(async move { agent.lock().await.post(id, "tools/call", params).await })
    };
    let ran = |answer: &Value| {
        answer["result"]["content"][0]["text"].is_string() && answer["result"]["isError"] != true
    };
    let any = || {
        remember(
            true,
            Lasting::Always,
            Covering::AnyArguments { also_sent: None },
        )
    };
    // Always, any arguments, answered on a plain call.
    let first = call(2, json!({"name": "params", "arguments": {"a": 1}}));
    let ask = rig.next_ask().await;
    rig.broker.answer(ask.id, any()).unwrap();
    assert!(ran(&first.await.unwrap()));
    let other = call(3, json!({"name": "params", "arguments": {"b": 2}}))
        .await
        .unwrap();
    assert!(ran(&other), "{other}");
    assert!(
        rig.broker.pending().is_empty(),
        "other arguments: not asked"
    );
    // The same tool with a field beyond the model: asked.
    let more = call(
        4,
        json!({"name": "params", "arguments": {"a": 1}, "x-force": true}),
    );
    let ask = rig.next_ask().await;
    let AskKind::ToolCall { also_sent_text, .. } = &ask.kind else {
        panic!("{ask:?}")
    };
    assert_eq!(also_sent_text.as_deref(), Some("{\n  \"x-force\": true\n}"));
    // Always, any arguments, answered on that call: it covers its field with other arguments.
    rig.broker.answer(ask.id, any()).unwrap();
    assert!(ran(&more.await.unwrap()));
    let listed = rig.settings.get().remembered;
    assert!(
        listed.iter().any(|d| d.covering
            == Covering::AnyArguments {
                also_sent: Some(r#"{"x-force":true}"#.into())
            }),
        "{listed:?}"
    );
    let same_field = call(
        5,
        json!({"name": "params", "arguments": {"c": 3}, "x-force": true}),
    )
    .await
    .unwrap();
    assert!(ran(&same_field), "{same_field}");
    assert!(rig.broker.pending().is_empty(), "the field seen: not asked");
    // Another field, or the same with another value: asked.
    for (id, extra) in [
        (6, json!({"x-force": false})),
        (7, json!({"x-force": true, "x-also": 1})),
    ] {
        let mut params = json!({"name": "params", "arguments": {"a": 1}});
        for (k, v) in extra.as_object().unwrap() {
            params[k] = v.clone();
        }
        let calling = call(id, params);
        let ask = rig.next_ask().await;
        rig.broker.answer(ask.id, Answer::Decline).unwrap();
        let refused = calling.await.unwrap();
        assert_eq!(refused["result"]["isError"], true, "{extra}: {refused}");
    }
    rig.gateway.shutdown().await;
}

/// An agent that records the notifications it gets.
#[derive(Clone)]
struct Listening {
    info: ClientConfig,
    heard: tokio::sync::mpsc::UnboundedSender<String>,
}

impl rmcp::ClientHandler for Listening {
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _: rmcp::service::NotificationContext<RoleClient>,
    ) {
        let _ = self.heard.send(format!(
            "progress {} {}",
            params.progress,
            params.message.unwrap_or_default()
        ));
    }

    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _: rmcp::service::NotificationContext<RoleClient>,
    ) {
        let _ = self.heard.send(format!("log {}", params.data));
    }

    async fn on_tool_list_changed(&self, _: rmcp::service::NotificationContext<RoleClient>) {
        let _ = self.heard.send("tools changed".into());
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _: rmcp::service::NotificationContext<RoleClient>,
    ) {
        let _ = self.heard.send(format!("updated {}", params.uri));
    }

    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_logging_and_list_changes_reach_the_agent() {
    notifications_reach_the_agent("notifications", raw_server()).await;
}

/// The same from an HTTP upstream that sends them on the call's response stream, which the
/// gateway reads itself (the call is posted by it, not by rmcp's session).
#[tokio::test(flavor = "multi_thread")]
async fn progress_logging_and_list_changes_on_a_calls_http_stream_reach_the_agent() {
    let (_server, url) = common::node_peer_at_url("raw-server.mjs", &["--sse"], &[]).await;
    notifications_reach_the_agent("notifications-sse", raw_http(&url)).await;
}

/// The raw server over Streamable HTTP at `url`, on the 2025 lifecycle.
fn raw_http(url: &str) -> ServerConfig {
    let mut raw = common::with_test_timeouts(ServerConfig::http("raw", url));
    raw.protocol = ProtocolChoice::Legacy;
    raw
}

/// A 2025-11-25 agent on `server`, and what it hears.
async fn listening_agent(
    rig: &Rig,
    server: &str,
) -> (
    RunningService<RoleClient, Listening>,
    tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    let (heard, hearing) = tokio::sync::mpsc::unbounded_channel();
    let mut info = ClientConfig::default();
    info.client_info.name = "listener".into();
    info.protocol_version = ProtocolVersion::V_2025_11_25;
    let agent = rig.open_with(server, Listening { info, heard }).await;
    (agent, hearing)
}

async fn notifications_reach_the_agent(test: &str, mut raw: ServerConfig) {
    raw.tool_policy = BTreeMap::from([("chatty".to_owned(), ToolRule::Allow)]);
    let rig = rig(test, vec![raw]).await;
    let (agent, mut hearing) = listening_agent(&rig, "raw").await;
    let result = tokio::time::timeout(
        WAIT,
        agent.peer().call_tool(CallToolRequestParams::new("chatty")),
    )
    .await
    .expect("in time")
    .expect("answered");
    assert_ne!(result.is_error, Some(true));
    let mut got = Vec::new();
    while got.len() < 3 {
        match tokio::time::timeout(WAIT, hearing.recv()).await {
            Ok(Some(line)) => got.push(line),
            other => panic!("heard only {got:?}: {other:?}"),
        }
    }
    got.sort();
    assert_eq!(
        got,
        ["log \"chatty ran\"", "progress 1 half way", "tools changed"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_upstream_server_sees_the_agents_cancellation() {
    let dir = scratch("upstream-cancel-log");
    let log = dir.join("raw-server.log");
    let mut raw = raw_server();
    if let countersign_core::config::TransportConfig::Stdio { env, .. } = &mut raw.transport {
        env.insert("RAW_SERVER_LOG".into(), log.display().to_string());
    }
    upstream_sees_the_agents_cancellation("upstream-cancel", raw, &log).await;
}

/// The same where the server asks on the response stream of a call the gateway posted
/// itself: the question reaches the person as the call's, and goes with the call.
#[tokio::test(flavor = "multi_thread")]
async fn the_upstream_server_sees_the_agents_cancellation_of_a_call_it_asked_on_over_http() {
    let dir = scratch("upstream-cancel-log-sse");
    let log = dir.join("raw-server.log");
    let (_server, url) =
        common::node_peer_at_url("raw-server.mjs", &["--sse"], &[("RAW_SERVER_LOG", &log)]).await;
    upstream_sees_the_agents_cancellation("upstream-cancel-sse", raw_http(&url), &log).await;
}

/// A 2025-11-25 server that refuses the standalone stream (GET), with sessions or without: the
/// gateway posts the calls itself (until the server's own messages on a call's stream were
/// taken where they come, such a server's calls went rmcp's way, for want of a stream of
/// rmcp's to hand those to); the server's notifications on a call's stream reach the agent,
/// and its question on one reaches the person and goes with the call.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_without_a_standalone_stream_or_sessions_has_its_calls_posted_by_the_gateway() {
    for modes in [
        &["--sse", "--no-get"][..],
        &["--sse", "--no-get", "--no-sessions"],
    ] {
        let name = modes.join("");
        let (_server, url) = common::node_peer_at_url("raw-server.mjs", modes, &[]).await;
        let mut raw = raw_http(&url);
        raw.tool_policy = BTreeMap::from([("id".to_owned(), ToolRule::Allow)]);
        let rig = rig(&format!("no-stream-id{name}"), vec![raw]).await;
        let agent = rig.agent("raw", "test-agent", false).await;
        let said = text(&call(&agent, "id", json!({})).await);
        assert!(said.starts_with(r#""countersign:"#), "{modes:?}: {said}");
        let _ = agent.cancel().await;
        rig.gateway.shutdown().await;

        notifications_reach_the_agent(&format!("no-stream-notes{name}"), raw_http(&url)).await;

        let dir = scratch(&format!("no-stream-cancel{name}"));
        let log = dir.join("raw-server.log");
        let (_server, url) =
            common::node_peer_at_url("raw-server.mjs", modes, &[("RAW_SERVER_LOG", &log)]).await;
        upstream_sees_the_agents_cancellation(
            &format!("no-stream-cancel{name}"),
            raw_http(&url),
            &log,
        )
        .await;
    }
}

/// The agent calls `tool`, which asks the person, and cancels the call while the question is
/// open: the question goes as the agent's. Returns the question.
async fn cancelled_while_asking(rig: &mut Rig, agent: &Agent, tool: &str) -> Ask {
    let handle = agent
        .peer()
        .send_cancellable_request(
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
                CallToolRequestParams::new(tool.to_owned()),
            )),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let question = rig.next_ask().await;
    handle.cancel(None).await.unwrap();
    let (id, outcome) = rig.next_resolution().await;
    assert_eq!(id, question.id);
    assert_eq!(
        outcome,
        Outcome::Cancelled {
            reason: CancelReason::Agent
        }
    );
    question
}

async fn upstream_sees_the_agents_cancellation(
    test: &str,
    mut raw: ServerConfig,
    log: &std::path::Path,
) {
    raw.tool_policy = BTreeMap::from([("ask_and_wait".to_owned(), ToolRule::Allow)]);
    let mut rig = rig(test, vec![raw]).await;
    let agent = rig.agent("raw", "test-agent", false).await;
    let question = cancelled_while_asking(&mut rig, &agent, "ask_and_wait").await;
    assert_eq!(question.asker.declared.as_deref(), Some("test-agent"));
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let seen = std::fs::read_to_string(log).unwrap_or_default();
        if seen.starts_with("cancelled ") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server never saw the cancellation"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Pausing is the person's stop: a call in flight ends at once and its agent is told why, the
/// server is told to cancel it, and the question it asked is withdrawn as the pause's. The
/// agent's session stays, and goes on once the person resumes.
#[tokio::test(flavor = "multi_thread")]
async fn pausing_the_gateway_stops_the_calls_in_flight_and_withdraws_their_questions() {
    let dir = scratch("pause-stops");
    let log = dir.join("raw-server.log");
    let mut raw = raw_server();
    if let countersign_core::config::TransportConfig::Stdio { env, .. } = &mut raw.transport {
        env.insert("RAW_SERVER_LOG".into(), log.display().to_string());
    }
    raw.tool_policy = BTreeMap::from([("ask_and_wait".to_owned(), ToolRule::Allow)]);
    let mut rig = rig_in(dir, vec![raw]).await;
    let agent = rig.agent("raw", "test-agent", false).await;
    let peer = agent.peer().clone();
    let call = tokio::spawn(async move {
        peer.call_tool(CallToolRequestParams::new("ask_and_wait"))
            .await
    });
    let question = rig.next_ask().await;
    rig.gateway.set_paused(true);
    let (id, outcome) = rig.next_resolution().await;
    assert_eq!(id, question.id);
    assert_eq!(
        outcome,
        Outcome::Cancelled {
            reason: CancelReason::Paused
        }
    );
    let error = tokio::time::timeout(WAIT, call)
        .await
        .expect("the call ends at once")
        .unwrap()
        .expect_err("a stopped call is no result");
    assert!(
        error.to_string().contains("paused Countersign's gateway"),
        "{error}"
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .starts_with("cancelled ")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server never heard the call was cancelled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Resumed: the same session calls again.
    rig.gateway.set_paused(false);
    agent.peer().list_tools(None).await.unwrap();
}

/// An agent can hold its request between the headers the guard reads and the body the call is
/// read from: a pause in between still stops it, and nothing reaches the server, though a rule
/// allows the call.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_held_past_the_guard_runs_nothing_once_the_gateway_is_paused() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let desk = desk().await;
    let mut config = upstream("desk", &desk, ProtocolChoice::Legacy);
    config.tool_policy = BTreeMap::from([("delete_ticket".to_owned(), ToolRule::Allow)]);
    let rig = rig("pause-held", vec![config]).await;
    let (agent, _) = RawAgent::open(rig.url("desk"), rig.gateway.token(), "raw-agent").await;
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "delete_ticket", "arguments": {"id": "t3"}}})
    .to_string();
    let mut stream = tokio::net::TcpStream::connect(rig.addr).await.unwrap();
    let head = format!(
        "POST /mcp/desk HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {}\r\n\
         accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n\
         mcp-session-id: {}\r\nmcp-protocol-version: 2025-11-25\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        rig.addr,
        rig.gateway.token(),
        agent.session.as_deref().unwrap(),
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // The guard has let the headers through; then the person pauses.
    tokio::time::sleep(Duration::from_millis(300)).await;
    rig.gateway.set_paused(true);
    stream.write_all(body.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(WAIT, stream.read_to_string(&mut answer))
        .await
        .expect("answered")
        .unwrap();
    assert!(answer.contains("the person paused"), "{answer}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(desk.store.contains("t3"), "the call reached the server");
}

/// Completing a resource template's arguments reads what the server holds: a server whose
/// reads the person denies completes nothing for agents, nor does one for an agent the person
/// said "never" to reading that kind of thing; otherwise completions pass unasked. (A "never"
/// went unheeded before: the agent read the names under a template it was refused.)
#[tokio::test(flavor = "multi_thread")]
async fn a_read_policy_of_deny_refuses_completions_too() {
    let mut denied = raw_server();
    denied.read_policy = Some(ToolRule::Deny);
    let rig = rig("complete-denied", vec![denied]).await;
    let (mut agent, _) = RawAgent::open(rig.url("raw"), rig.gateway.token(), "raw-agent").await;
    let complete = json!({"ref": {"type": "ref/resource", "uri": "file:///{path}"},
        "argument": {"name": "path", "value": "/home/"}});
    let refused = |answer: &Value| {
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Countersign did not complete arguments"))
    };
    let answer = agent.post(2, "completion/complete", complete.clone()).await;
    assert!(refused(&answer), "{answer}");
    assert!(
        answer.to_string().contains("rule: deny reading"),
        "{answer}"
    );
    rig.gateway.shutdown().await;
    let mut rig = rig_in(scratch("complete-allowed"), vec![raw_server()]).await;
    let (agent, _) = RawAgent::open(rig.url("raw"), rig.gateway.token(), "raw-agent").await;
    let agent = std::sync::Arc::new(tokio::sync::Mutex::new(agent));
    let post = |id: u64, method: &'static str, params: Value| {
        let agent = agent.clone();
        tokio::spawn(async move { agent.lock().await.post(id, method, params).await })
    };
    let answer = post(2, "completion/complete", complete.clone())
        .await
        .unwrap();
    assert!(!refused(&answer), "reached the server: {answer}");
    // The person says "never" to this agent reading the server's resources.
    let reading = post(3, "resources/read", json!({"uri": "raw://a"}));
    let ask = rig.next_ask().await;
    rig.broker
        .answer(
            ask.id,
            remember(
                false,
                Lasting::Always,
                Covering::AnyArguments { also_sent: None },
            ),
        )
        .unwrap();
    assert!(reading.await.unwrap()["error"].is_object());
    let answer = post(4, "completion/complete", complete).await.unwrap();
    assert!(refused(&answer), "{answer}");
    // Its prompts it may still read, and complete.
    let prompt = json!({"ref": {"type": "ref/prompt", "name": "p"},
        "argument": {"name": "x", "value": "a"}});
    let answer = post(5, "completion/complete", prompt).await.unwrap();
    assert!(!refused(&answer), "reached the server: {answer}");
    rig.gateway.shutdown().await;
}

/// A call that waits for the person's approval when they pause is not run, then or later:
/// its question goes, and the agent is told why.
#[tokio::test(flavor = "multi_thread")]
async fn pausing_the_gateway_withdraws_an_approval_a_call_waits_for() {
    let desk = desk().await;
    let mut rig = rig(
        "pause-approval",
        vec![upstream("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let agent = rig.agent("desk", "test-agent", false).await;
    let peer = agent.peer().clone();
    let call = tokio::spawn(async move {
        let mut params = CallToolRequestParams::new("delete_ticket");
        params.arguments = json!({"id": "t3"}).as_object().cloned();
        peer.call_tool(params).await
    });
    let approval = rig.next_ask().await;
    assert!(matches!(approval.kind, AskKind::ToolCall { .. }));
    rig.gateway.set_paused(true);
    let (id, outcome) = rig.next_resolution().await;
    assert_eq!(id, approval.id);
    assert_eq!(
        outcome,
        Outcome::Cancelled {
            reason: CancelReason::Paused
        }
    );
    let result = tokio::time::timeout(WAIT, call)
        .await
        .expect("the call ends at once")
        .unwrap()
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    assert!(
        text(&result).contains("paused the gateway"),
        "{}",
        text(&result)
    );
    // A late yes runs nothing.
    assert!(rig.broker.answer(approval.id, confirm()).is_err());
    rig.gateway.set_paused(false);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(desk.store.contains("t3"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_goes_away_takes_its_open_approval_with_it() {
    agent_goes_away_during_approval("gone", json!({})).await;
}

/// The same for a call that asked for progress, which is answered on a stream from the start.
#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_goes_away_from_a_streamed_call_takes_its_open_approval_with_it() {
    agent_goes_away_during_approval("gone-streamed", json!({"progressToken": 1})).await;
}

async fn agent_goes_away_during_approval(test: &str, meta: Value) {
    let desk = desk().await;
    let mut rig = rig(test, vec![upstream("desk", &desk, ProtocolChoice::Legacy)]).await;
    let mut agent = RawAgent {
        http: reqwest::Client::new(),
        url: rig.url("desk"),
        token: rig.gateway.token().to_owned(),
        session: None,
    };
    agent
        .post(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "doomed-agent", "version": "1"}}),
        )
        .await;
    // The call's response stream opens, the approval is asked, and the agent vanishes
    // without a word (its connection closes).
    let call = agent
        .on_session()
        .body(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "delete_ticket", "arguments": {"id": "t1"}, "_meta": meta}})
            .to_string(),
        )
        .send();
    let streaming = tokio::spawn(call);
    let ask = rig.next_ask().await;
    assert!(matches!(ask.kind, AskKind::ToolCall { .. }));
    streaming.abort();
    let _ = streaming.await;
    drop(agent);
    let (id, outcome) = rig.next_resolution().await;
    assert_eq!(id, ask.id);
    assert_eq!(
        outcome,
        Outcome::Cancelled {
            reason: CancelReason::AgentGone
        }
    );
    assert!(desk.store.contains("t1"));
}

/// `tests/peers/hostile-server.mjs` as the upstream `name`, 2025-11-25, its calls allowed by
/// rule so no approval stands in the way; what it receives goes to `log`, if given.
fn hostile_server(name: &str, log: Option<&std::path::Path>) -> ServerConfig {
    let script = common::peer_path("hostile-server.mjs");
    let mut server = common::with_test_timeouts(ServerConfig::stdio(
        name,
        common::node(),
        &[script.as_str()],
    ));
    server.protocol = ProtocolChoice::Legacy;
    server.tool_policy = ["forge", "forge_long", "slow_secret", "rug_pull"]
        .into_iter()
        .map(|t| (t.to_owned(), ToolRule::Allow))
        .collect();
    server.read_policy = Some(ToolRule::Allow);
    if let (Some(log), countersign_core::config::TransportConfig::Stdio { env, .. }) =
        (log, &mut server.transport)
    {
        env.insert("HOSTILE_LOG".into(), log.display().to_string());
    }
    server
}

impl Rig {
    /// A raw agent with a 2025-11-25 session on `server`.
    async fn raw_agent(&self, server: &str, name: &str) -> RawAgent {
        self.raw_agent_holding(server, name, self.gateway.token())
            .await
    }

    /// A raw agent holding `token`, with a 2025-11-25 session on `server`.
    async fn raw_agent_holding(&self, server: &str, name: &str, token: &str) -> RawAgent {
        let (agent, init) = RawAgent::open(self.url(server), token, name).await;
        assert!(init.get("result").is_some(), "{init}");
        agent
    }

    fn records(&self) -> Vec<countersign_core::ask::audit::AuditRecord> {
        countersign_core::ask::audit::read_history(self.broker.audit().path())
            .unwrap()
            .0
    }
}

impl RawAgent {
    /// Sends a call and gives up on it after `patience`, leaving its answer unread.
    async fn abandon(&self, id: u64, method: &str, params: Value, patience: Duration) {
        let sent = self
            .http
            .post(&self.url)
            .timeout(patience)
            .header("authorization", format!("Bearer {}", self.token))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-session-id", self.session.clone().unwrap())
            .header("mcp-protocol-version", "2025-11-25")
            .body(
                json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
            )
            .send()
            .await;
        // Either it timed out, or the body is left unread.
        drop(sent);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn no_result_reaches_another_agent_whatever_a_server_forges() {
    let rig = rig(
        "forged",
        vec![
            hostile_server("victim", None),
            hostile_server("hostile", None),
        ],
    )
    .await;
    // Agent A leaves four calls before their answers are written (the answers still arrive
    // upstream 150 ms later): nothing may be kept for them.
    let a = rig.raw_agent("victim", "agent-a").await;
    for n in 0..4 {
        a.abandon(
            10 + n,
            "tools/call",
            json!({"name": "slow_secret", "arguments": {"n": n}}),
            Duration::from_millis(30),
        )
        .await;
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Agent C's calls are in flight while the hostile server's agent fishes.
    let mut c = rig.raw_agent("victim", "agent-c").await;
    let live = tokio::spawn(async move {
        let mut got = Vec::new();
        for n in 100..110u64 {
            let r = c
                .post(
                    n,
                    "tools/call",
                    json!({"name": "slow_secret", "arguments": {"n": n}}),
                )
                .await;
            got.push((n, r["result"]["content"][0]["text"].clone()));
        }
        got
    });
    let mut b = rig.raw_agent("hostile", "agent-b").await;
    let mut seen = Vec::new();
    seen.push(b.post(2, "tools/list", json!({})).await);
    for id in 3..40 {
        seen.push(
            b.post(id, "tools/call", json!({"name": "forge", "arguments": {}}))
                .await,
        );
    }
    seen.push(b.post(40, "resources/read", json!({"uri": "h://x"})).await);
    seen.push(
        b.post(
            41,
            "tools/call",
            json!({"name": "forge_long", "arguments": {}}),
        )
        .await,
    );
    for r in &seen {
        let text = r.to_string();
        assert!(
            !text.contains("SECRET-"),
            "another agent's result leaked: {text:.300}"
        );
    }
    assert_eq!(
        seen[0]["result"]["tools"][0]["name"], "forge",
        "{}",
        seen[0]
    );
    for r in &seen[1..38] {
        assert_eq!(
            r["result"]["content"][0]["text"], "hostile own words",
            "{r}"
        );
    }
    assert_eq!(
        seen[38]["result"]["contents"][0]["text"],
        "hostile contents"
    );
    assert!(
        seen[39]["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("hostile xxx")),
        "{:.300}",
        seen[39]
    );
    // Agent C got its own answers, each to its own call.
    for (n, text) in live.await.unwrap() {
        assert_eq!(text, json!(format!("SECRET-{n}")));
    }
    rig.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agents_own_input_responses_are_refused_and_never_reach_the_server() {
    let dir = scratch("injected-log");
    let log = dir.join("hostile.log");
    let rig = rig("injected", vec![hostile_server("hostile", Some(&log))]).await;
    let mut agent = rig.raw_agent("hostile", "sly-agent").await;
    let injected = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
    let attempts = [
        (
            "tools/call",
            json!({"name": "forge", "arguments": {}, "inputResponses": injected}),
        ),
        (
            "tools/call",
            json!({"name": "forge", "arguments": {}, "requestState": "opaque"}),
        ),
        (
            "prompts/get",
            json!({"name": "p", "inputResponses": injected}),
        ),
        (
            "resources/read",
            json!({"uri": "h://x", "requestState": "opaque"}),
        ),
    ];
    for (i, (method, params)) in attempts.into_iter().enumerate() {
        let answer = agent.post(10 + i as u64, method, params).await;
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("only the person answers"),
            "{method}: {answer}"
        );
    }
    // The same call without them goes through: the server was reachable all along.
    let plain = agent
        .post(20, "tools/call", json!({"name": "forge", "arguments": {}}))
        .await;
    assert_eq!(plain["result"]["content"][0]["text"], "hostile own words");
    let received = std::fs::read_to_string(&log).unwrap();
    assert!(!received.contains("inputResponses"), "{received}");
    assert!(!received.contains("requestState"), "{received}");
    let refused = rig
        .records()
        .into_iter()
        .filter(|r| matches!(r, countersign_core::ask::audit::AuditRecord::Refused { .. }))
        .count();
    assert_eq!(refused, 4);
    rig.gateway.shutdown().await;
}

/// An agent calls a tool the server does not list, named after a read method; the person
/// answers "always allow, any arguments". That decision is not kept: kept, it was the very
/// decision a read of any resource looks for (the same name, the same bare definition), and
/// every later read of the server's resources ran unasked.
#[tokio::test(flavor = "multi_thread")]
async fn a_decision_about_a_tool_named_after_a_read_decides_no_read() {
    let mut rig = rig("read-named-tool", vec![raw_server()]).await;
    let agent = rig.agent("raw", "reader", false).await;
    let calling = spawn_call(&agent, "resources/read", json!({"uri": "raw://a"}));
    let ask = rig.next_ask().await;
    rig.broker
        .answer(
            ask.id,
            remember(
                true,
                Lasting::Always,
                Covering::AnyArguments { also_sent: None },
            ),
        )
        .unwrap();
    let _ = calling.await;
    let remembered = rig.settings.get().remembered;
    assert!(remembered.is_empty(), "{remembered:?}");
    let peer = agent.peer().clone();
    let read = tokio::spawn(async move {
        peer.read_resource(rmcp::model::ReadResourceRequestParams::new("raw://a"))
            .await
    });
    let ask = tokio::time::timeout(WAIT, rig.next_ask())
        .await
        .expect("the read is asked about");
    assert!(
        matches!(&ask.kind, AskKind::ToolCall { tool, .. } if tool == "resources/read"),
        "{:?}",
        ask.kind
    );
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    assert!(
        tokio::time::timeout(WAIT, read)
            .await
            .unwrap()
            .unwrap()
            .is_err()
    );
    rig.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn reading_an_untrusted_servers_resources_and_prompts_is_asked_about_and_recorded() {
    use countersign_core::ask::audit::AuditRecord;
    let mut rig = rig("reads", vec![raw_server()]).await;
    let agent = rig.agent("raw", "reader", false).await;
    // Declined: the agent gets an error in words, nothing is read.
    let peer = agent.peer().clone();
    let read = tokio::spawn(async move {
        peer.read_resource(rmcp::model::ReadResourceRequestParams::new("raw://a"))
            .await
    });
    let ask = rig.next_ask().await;
    match &ask.kind {
        AskKind::ToolCall {
            tool,
            arguments_text,
            description,
            ..
        } => {
            assert_eq!(tool, "resources/read");
            assert!(arguments_text.contains("raw://a"), "{arguments_text}");
            assert!(
                description
                    .as_deref()
                    .unwrap_or_default()
                    .contains("raw://a")
            );
        }
        other => panic!("{other:?}"),
    }
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    let declined = ask.id;
    let refused = tokio::time::timeout(WAIT, read).await.unwrap().unwrap();
    let error = format!("{:?}", refused.expect_err("a declined read is an error"));
    assert!(
        error.contains("denied resources/read of raw://a"),
        "{error}"
    );
    // Allowed once: read.
    let peer = agent.peer().clone();
    let read = tokio::spawn(async move {
        peer.read_resource(rmcp::model::ReadResourceRequestParams::new("raw://a"))
            .await
    });
    let ask = rig.next_ask().await;
    rig.broker
        .answer(ask.id, Answer::Accept { content: None })
        .unwrap();
    let contents = tokio::time::timeout(WAIT, read)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(contents.contents.len(), 1);
    // The allowed read is on record as carried out; the declined one is not.
    assert!(delivered(&rig).contains(&ask.id));
    assert!(!delivered(&rig).contains(&declined));
    // prompts/get asks too.
    let peer = agent.peer().clone();
    let prompt = tokio::spawn(async move {
        peer.get_prompt(rmcp::model::GetPromptRequestParams::new("p"))
            .await
    });
    let ask = rig.next_ask().await;
    assert!(matches!(&ask.kind, AskKind::ToolCall { tool, .. } if tool == "prompts/get"));
    rig.broker.answer(ask.id, Answer::Cancel).unwrap();
    assert!(
        tokio::time::timeout(WAIT, prompt)
            .await
            .unwrap()
            .unwrap()
            .is_err()
    );
    // Listing passes no gate but is on record, like every forwarded request.
    agent.peer().list_all_tools().await.unwrap();
    let records = rig.records();
    let forwarded: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            AuditRecord::Forwarded { method, agent, .. } => Some((method.as_str(), agent.clone())),
            _ => None,
        })
        .collect();
    assert!(
        // On record as the token's agent, not as whatever the agent calls itself.
        forwarded.contains(&("tools/list", Some("Shared token (older setups)".into()))),
        "{forwarded:?}"
    );
    let asked = records
        .iter()
        .filter(|r| matches!(r, AuditRecord::Asked { .. }))
        .count();
    assert_eq!(asked, 3);
    rig.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_approval_shows_the_arguments_as_they_will_be_forwarded() {
    let desk = desk().await;
    let mut rig = rig(
        "exact",
        vec![upstream("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let mut agent = rig.raw_agent("desk", "precise-agent").await;
    // A number JavaScript cannot hold, keys out of alphabetical order.
    let body = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"delete_ticket","arguments":{"z":1,"n":9007199254740993,"id":"t1"}}}"#;
    let http = agent.http.clone();
    let request = http
        .post(&agent.url)
        .header("authorization", format!("Bearer {}", agent.token))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-session-id", agent.session.clone().unwrap())
        .header("mcp-protocol-version", "2025-11-25")
        .body(body)
        .send();
    let call = tokio::spawn(request);
    let ask = rig.next_ask().await;
    let AskKind::ToolCall { arguments_text, .. } = &ask.kind else {
        panic!("{ask:?}")
    };
    assert_eq!(
        arguments_text,
        "{\n  \"z\": 1,\n  \"n\": 9007199254740993,\n  \"id\": \"t1\"\n}"
    );
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    let _ = call.await;
    let _ = agent.post(6, "ping", json!({})).await;
    rig.gateway.shutdown().await;
}

/// One agent, holding its own token, cannot take every place a server has: past its own share
/// it is refused, and another agent still gets in.
#[tokio::test(flavor = "multi_thread")]
async fn one_agent_cannot_take_every_upstream_session_of_a_server() {
    let desk = desk().await;
    let rig = rig(
        "capped-per-agent",
        vec![upstream("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let greedy = rig.gateway.create_agent("Greedy", "bridge").unwrap();
    let mut kept = Vec::new();
    for n in 0..8 {
        kept.push(
            rig.raw_agent_holding("desk", &format!("greedy-{n}"), &greedy.token)
                .await,
        );
    }
    let (_, refused) = RawAgent::open(rig.url("desk"), &greedy.token, "greedy-9").await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("this agent already has 8 sessions"),
        "{refused}"
    );
    let other = rig.gateway.create_agent("Other", "bridge").unwrap();
    rig.raw_agent_holding("desk", "other", &other.token).await;
    // An agent that ends one of its sessions may open another.
    let ended = kept.pop().unwrap().end().await;
    assert!(ended.status().is_success(), "{}", ended.status());
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (_, again) = RawAgent::open(rig.url("desk"), &greedy.token, "greedy-again").await;
        if again.get("result").is_some() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{again}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rig.gateway.shutdown().await;
}

/// A server that crashed and cannot start again is not started at every one of the agent's
/// requests: the session backs off, and says when it tries again.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_cannot_start_again_is_not_started_at_every_request() {
    let dir = scratch("reopen-backoff");
    let starts = dir.join("starts");
    let mut raw = raw_server();
    if let countersign_core::config::TransportConfig::Stdio { env, .. } = &mut raw.transport {
        env.insert("RAW_SERVER_STARTS".into(), starts.display().to_string());
    }
    raw.tool_policy = BTreeMap::from([
        ("exit".to_owned(), ToolRule::Allow),
        ("echo".to_owned(), ToolRule::Allow),
    ]);
    let rig = rig_in(dir, vec![raw]).await;
    let (mut agent, _) = RawAgent::open(rig.url("raw"), rig.gateway.token(), "raw-agent").await;
    let crashed = agent
        .post(2, "tools/call", json!({"name": "exit", "arguments": {}}))
        .await;
    assert!(crashed["error"].is_object(), "{crashed}");
    let mut answers = Vec::new();
    for id in 3..8 {
        answers.push(
            agent
                .post(id, "tools/call", json!({"name": "echo", "arguments": {}}))
                .await,
        );
    }
    let started = std::fs::read_to_string(&starts).unwrap().lines().count();
    // The first start, and the one try after the crash; the requests after it wait (a third
    // start only if this machine took a quarter of a second over four requests). Without the
    // backoff, each of the five started it.
    assert!((2..=3).contains(&started), "{started} starts: {answers:?}");
    assert!(
        answers.iter().any(|a| a["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Countersign starts it again in"))),
        "{answers:?}"
    );
    rig.gateway.shutdown().await;
}

/// The same for a 2026-07-28 agent, which keeps no session: its requests share a pooled
/// upstream, and one that crashed and cannot start again is not started at each request.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_cannot_start_again_is_not_started_at_every_sessionless_request() {
    let dir = scratch("reopen-backoff-pooled");
    let starts = dir.join("starts");
    let mut raw = raw_server();
    if let countersign_core::config::TransportConfig::Stdio { env, .. } = &mut raw.transport {
        env.insert("RAW_SERVER_STARTS".into(), starts.display().to_string());
    }
    raw.tool_policy = BTreeMap::from([
        ("exit".to_owned(), ToolRule::Allow),
        ("echo".to_owned(), ToolRule::Allow),
    ]);
    let rig = rig_in(dir, vec![raw]).await;
    let call = |id: u32, tool: &'static str| {
        let request = sessionless_request(
            &rig,
            "raw",
            &id.to_string(),
            "tools/call",
            json!({"name": tool, "arguments": {}}),
            Some(tool),
            &[],
        );
        async move {
            let body = request.send().await.unwrap().text().await.unwrap();
            serde_json::from_str::<Value>(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
        }
    };
    let echoed = call(1, "echo").await;
    assert!(echoed["result"].is_object(), "{echoed}");
    let crashed = call(2, "exit").await;
    assert!(crashed["error"].is_object(), "{crashed}");
    let mut answers = Vec::new();
    for id in 3..8 {
        answers.push(call(id, "echo").await);
    }
    let started = std::fs::read_to_string(&starts).unwrap().lines().count();
    // As for a session: without the backoff, each of the five started it.
    assert!((2..=3).contains(&started), "{started} starts: {answers:?}");
    assert!(
        answers.iter().any(|a| a["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Countersign starts it again in"))),
        "{answers:?}"
    );
    rig.gateway.shutdown().await;
}

/// A session whose server crashed gives the dead upstream's place back before it opens
/// another: an agent at its cap of sessions would otherwise be refused for good.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_at_the_agents_cap_still_goes_on_after_its_server_crashed() {
    let mut raw = raw_server();
    raw.tool_policy = BTreeMap::from([
        ("exit".to_owned(), ToolRule::Allow),
        ("echo".to_owned(), ToolRule::Allow),
    ]);
    let rig = rig("crash-at-cap", vec![raw]).await;
    let busy = rig.gateway.create_agent("Busy", "bridge").unwrap();
    let mut sessions = Vec::new();
    for n in 0..8 {
        sessions.push(
            rig.raw_agent_holding("raw", &format!("busy-{n}"), &busy.token)
                .await,
        );
    }
    let agent = &mut sessions[0];
    let crashed = agent
        .post(2, "tools/call", json!({"name": "exit", "arguments": {}}))
        .await;
    assert!(crashed["error"].is_object(), "{crashed}");
    let answer = agent
        .post(
            3,
            "tools/call",
            json!({"name": "echo", "arguments": {"x": 1}}),
        )
        .await;
    assert!(answer["result"].is_object(), "{answer}");
    rig.gateway.shutdown().await;
}

/// An agent that holds its session's stream open is there, however long it sends nothing (a
/// stdio host behind the bridge, between calls): its session does not end quiet, which left the
/// bridge, and its agent, answered "no longer knows this session" after five idle minutes. Once
/// the stream closes, the quiet time starts.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_whose_agent_listens_does_not_end_quiet() {
    let desk = desk().await;
    let rig = rig(
        "listening-idle",
        vec![upstream("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let mut agent = rig.raw_agent("desk", "listening-agent").await;
    let stream = agent
        .http
        .get(&agent.url)
        .header("authorization", format!("Bearer {}", agent.token))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", agent.session.clone().unwrap())
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert!(stream.status().is_success(), "{}", stream.status());
    rig.gateway.set_session_idle(Duration::from_millis(200));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        rig.gateway.open_upstreams("desk"),
        1,
        "ended while listening"
    );
    let listed = agent.post(2, "tools/list", json!({})).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    // The agent goes away: its session ends quiet as any.
    drop(stream);
    let deadline = tokio::time::Instant::now() + WAIT;
    while rig.gateway.open_upstreams("desk") > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the session outlived its agent's stream"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rig.gateway.shutdown().await;
}

/// A server the person removes and puts back gets a new endpoint; a session opened on the old
/// one still ends when its agent leaves it quiet, and gives its place back (it was stranded,
/// holding one of the server's places and, for a stdio server, a process, until a restart).
#[tokio::test(flavor = "multi_thread")]
async fn a_session_on_a_server_removed_and_put_back_still_ends_when_left_quiet() {
    let desk = desk().await;
    let config = upstream("desk", &desk, ProtocolChoice::Legacy);
    let rig = rig("put-back", vec![config.clone()]).await;
    let _quiet = rig.raw_agent("desk", "quiet-agent").await;
    assert_eq!(rig.gateway.open_upstreams("desk"), 1);
    rig.gateway.set_servers(vec![]);
    rig.gateway.set_servers(vec![config]);
    rig.gateway.set_session_idle(Duration::from_millis(200));
    let deadline = tokio::time::Instant::now() + WAIT;
    while rig.gateway.open_upstreams("desk") > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the session was stranded with its place"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rig.gateway.shutdown().await;
}

/// A server's places are capped, and the shared token (every older setup at once) holds at
/// most half of them: it cannot lock out the agents holding their own tokens. A closed session
/// frees its place.
#[tokio::test(flavor = "multi_thread")]
async fn upstream_sessions_per_server_are_capped_and_a_closed_one_frees_its_place() {
    let desk = desk().await;
    let rig = rig(
        "capped",
        vec![upstream("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let shared = rig.gateway.token().to_owned();
    let mut agents = Vec::new();
    for n in 0..16 {
        agents.push(rig.raw_agent("desk", &format!("older-setup-{n}")).await);
    }
    let (_, refused) = RawAgent::open(rig.url("desk"), &shared, "older-setup-17").await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("the shared token (older setups) already has 16 sessions"),
        "{refused}"
    );
    // Agents holding their own tokens still get the other half.
    let mut others = Vec::new();
    for name in ["Claude Code", "Cursor"] {
        let agent = rig.gateway.create_agent(name, "bridge").unwrap();
        for n in 0..8 {
            others.push(
                rig.raw_agent_holding("desk", &format!("{name}-{n}"), &agent.token)
                    .await,
            );
        }
    }
    assert_eq!(rig.gateway.open_upstreams("desk"), 32);
    let third = rig.gateway.create_agent("Codex", "bridge").unwrap();
    let (_, refused) = RawAgent::open(rig.url("desk"), &third.token, "codex").await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("32 agent sessions open"), "{refused}");
    // An agent that ends its session gives its place back.
    let leaving = agents.pop().unwrap();
    let ended = leaving.end().await;
    assert!(ended.status().is_success(), "{}", ended.status());
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (_, again) = RawAgent::open(rig.url("desk"), &shared, "older-setup-again").await;
        if again.get("result").is_some() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the place was never freed: {again}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rig.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn each_agent_reaches_the_servers_with_its_own_token_and_a_revoked_one_is_refused_at_once() {
    let (desk, made) = counting_desk().await;
    let rig = rig(
        "agent-tokens",
        vec![upstream("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let sessions = || made.load(std::sync::atomic::Ordering::SeqCst);
    let code = rig
        .gateway
        .create_agent("Claude Code", "countersign-bridge")
        .unwrap();
    let cursor = rig
        .gateway
        .create_agent("Cursor", "countersign-bridge")
        .unwrap();
    assert_ne!(code.token, cursor.token);
    // The snippets made with an agent carry its token, and only its.
    for setup in &code.clients {
        assert!(setup.snippet.contains(&code.token), "{}", setup.client);
        assert!(!setup.snippet.contains(&cursor.token), "{}", setup.client);
    }
    let raw = |token: &str| RawAgent {
        http: reqwest::Client::new(),
        url: rig.url("desk"),
        token: token.to_owned(),
        session: None,
    };
    // Both declare the same clientInfo name; the token tells them apart.
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "Claude Code", "version": "1"}});
    let last_used = |id: &str| {
        rig.gateway
            .agents()
            .into_iter()
            .find(|a| a.id == id)
            .unwrap()
            .last_used_ms
    };

    let mut first = raw(&code.token);
    let hello = first.post(1, "initialize", init.clone()).await;
    assert!(hello.get("result").is_some(), "{hello}");
    // The guard took the request as Claude Code's, not Cursor's.
    assert!(last_used(&code.agent.id).is_some());
    assert_eq!(last_used(&cursor.agent.id), None);
    let tools = first.post(2, "tools/list", json!({})).await;
    assert!(tools["result"]["tools"].as_array().is_some(), "{tools}");

    let mut second = raw(&cursor.token);
    let hello = second.post(1, "initialize", init.clone()).await;
    assert!(hello.get("result").is_some(), "{hello}");
    assert!(last_used(&cursor.agent.id).is_some());
    let tools = second.post(2, "tools/list", json!({})).await;
    assert!(tools["result"]["tools"].as_array().is_some(), "{tools}");
    let before = sessions();
    assert!(
        before >= 2,
        "each agent has its own upstream session: {before}"
    );

    // Revoked: the very next request with that token is refused, with no restart, and
    // reaches no server: no new upstream session, no question for the person.
    rig.gateway.revoke_agent(&cursor.agent.id).unwrap();
    let post = |token: &str, session: Option<&str>| {
        let mut request = reqwest::Client::new()
            .post(rig.url("desk"))
            .header("authorization", format!("Bearer {token}"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        request.body(
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": {"name": "delete_ticket", "arguments": {"id": "t1"}}})
            .to_string(),
        )
    };
    let in_session = post(&cursor.token, second.session.as_deref())
        .send()
        .await
        .unwrap();
    assert_eq!(in_session.status(), 401);
    let fresh = reqwest::Client::new()
        .post(rig.url("desk"))
        .header("authorization", format!("Bearer {}", cursor.token))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}).to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(fresh.status(), 401);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        sessions(),
        before,
        "no upstream session for a revoked token"
    );
    assert!(
        rig.broker.pending().is_empty(),
        "no dialog for a revoked token"
    );
    // The other agent carries on.
    let listed = first.post(3, "tools/list", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");
    // The shared token keeps working until it is revoked too.
    let shared = rig.gateway.token().to_owned();
    let mut older = raw(&shared);
    let hello = older.post(1, "initialize", init.clone()).await;
    assert!(hello.get("result").is_some(), "{hello}");
    rig.gateway
        .revoke_agent(countersign_core::gateway::registry::SHARED_ID)
        .unwrap();
    let refused = post(&shared, older.session.as_deref())
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    rig.gateway.shutdown().await;
}

fn remember(allow: bool, lasting: Lasting, covering: Covering) -> Answer {
    Answer::Remember {
        decision: Remember {
            allow,
            lasting,
            covering,
        },
    }
}

/// "Always allow, these exact arguments" (the broker fills in the arguments on screen).
fn always_allow_exactly() -> Answer {
    remember(
        true,
        Lasting::Always,
        Covering::ExactArguments {
            arguments: String::new(),
        },
    )
}

/// A test clock: starts at the real time, moved by the test.
fn test_clock(rig: &Rig) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
    let now = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(now_ms()));
    let read = now.clone();
    rig.gateway.set_clock(std::sync::Arc::new(move || {
        read.load(std::sync::atomic::Ordering::Relaxed)
    }));
    now
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_tool_is_asked_about_again_and_the_dialog_says_what_changed() {
    let mut rig = rig("rug-pull", vec![hostile_server("shifty", None)]).await;
    let agent = rig.agent("shifty", "steady-agent", false).await;
    let deleting = spawn_call(&agent, "delete_ticket", json!({"id": "t1"}));
    let ask = rig.next_ask().await;
    rig.broker.answer(ask.id, always_allow()).unwrap();
    assert_ne!(deleting.await.unwrap().unwrap().is_error, Some(true));
    // Remembered: no question.
    call(&agent, "delete_ticket", json!({"id": "t2"})).await;
    assert!(rig.broker.pending().is_empty());
    // The server changes what delete_ticket says it is, and says its list changed.
    call(&agent, "rug_pull", json!({})).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let deleting = spawn_call(&agent, "delete_ticket", json!({"id": "t3"}));
    let ask = rig.next_ask().await;
    let AskKind::ToolCall {
        tool,
        changed,
        description,
        ..
    } = &ask.kind
    else {
        panic!("{ask:?}")
    };
    assert_eq!(tool, "delete_ticket");
    assert_eq!(
        description.as_deref(),
        Some("Deletes one ticket, then every other ticket too")
    );
    let fields: Vec<&str> = changed.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(fields, ["description", "annotations"], "{changed:?}");
    assert_eq!(changed[0].before, "\"Deletes one ticket\"");
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    assert_eq!(deleting.await.unwrap().unwrap().is_error, Some(true));
    rig.gateway.shutdown().await;
}

/// A "yes" is for the server the person saw. The same name, edited to run another server (here
/// another environment; a command, an argument, a URL or a header count the same), is asked
/// about again, and the dialog says the server changed; put back as it was, the decision holds.
#[tokio::test(flavor = "multi_thread")]
async fn a_remembered_yes_is_not_taken_for_another_server_under_the_same_name() {
    let original = hostile_server("shifty", None);
    let mut rig = rig("endpoint-bound", vec![original.clone()]).await;
    let agent = rig.agent("shifty", "bound-agent", false).await;
    let deleting = spawn_call(&agent, "delete_ticket", json!({"id": "t1"}));
    let ask = rig.next_ask().await;
    rig.broker.answer(ask.id, always_allow()).unwrap();
    assert_ne!(deleting.await.unwrap().unwrap().is_error, Some(true));
    call(&agent, "delete_ticket", json!({"id": "t2"})).await;
    assert!(rig.broker.pending().is_empty());

    let mut replaced = original.clone();
    let countersign_core::config::TransportConfig::Stdio { env, .. } = &mut replaced.transport
    else {
        unreachable!()
    };
    env.insert("DATA_DIR".into(), "/somewhere/else".into());
    rig.gateway.set_servers(vec![replaced]);
    let deleting = spawn_call(&agent, "delete_ticket", json!({"id": "t3"}));
    let ask = rig.next_ask().await;
    let AskKind::ToolCall {
        changed,
        server_changed,
        ..
    } = &ask.kind
    else {
        panic!("{ask:?}")
    };
    assert!(*server_changed, "{ask:?}");
    assert!(
        changed.is_empty(),
        "the tool itself did not change: {changed:?}"
    );
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    assert_eq!(deleting.await.unwrap().unwrap().is_error, Some(true));

    rig.gateway.set_servers(vec![original]);
    let deleted = call(&agent, "delete_ticket", json!({"id": "t4"})).await;
    assert_ne!(deleted.is_error, Some(true), "{}", text(&deleted));
    assert!(rig.broker.pending().is_empty());
    rig.gateway.shutdown().await;
}

/// A yes is for the agent holding the token: revoked while the person was asked, its call
/// does not run whatever they answer, and its approvals waiting in the app are withdrawn.
#[tokio::test(flavor = "multi_thread")]
async fn an_agent_revoked_while_asked_makes_no_call() {
    let dir = scratch("revoked-while-asked");
    let log = dir.join("hostile.log");
    let mut rig = rig_in(dir.clone(), vec![hostile_server("shifty", Some(&log))]).await;
    let created = rig.gateway.create_agent("Doomed", "bridge").unwrap();
    let agent = rig.agent_holding("shifty", "doomed", &created.token).await;
    let deleting = spawn_call(&agent, "delete_ticket", json!({"id": "t1"}));
    let ask = rig.next_ask().await;
    rig.gateway.revoke_agent(&created.agent.id).unwrap();
    // The question goes from the desktop at once, saying why; an Allow pressed as it goes
    // finds nothing to answer.
    assert_eq!(
        rig.next_resolution().await,
        (
            ask.id,
            Outcome::Cancelled {
                reason: CancelReason::Revoked
            }
        )
    );
    assert!(
        rig.broker
            .answer(ask.id, Answer::Accept { content: None })
            .is_err()
    );
    let refused = tokio::time::timeout(WAIT, deleting)
        .await
        .expect("the call ends in time")
        .unwrap();
    assert!(
        refused.is_err() || refused.as_ref().unwrap().is_error == Some(true),
        "{refused:?}"
    );
    let received = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !received.contains("delete_ticket"),
        "the call reached the server: {received}"
    );
    rig.gateway.shutdown().await;
}

/// Revoking an agent ends what it has open: a question the server asked during its call is
/// withdrawn at once (not left on the desktop, to be refused when the person answers it), and
/// the call ends without having run. For an agent keeping a session and a 2026-07-28 one.
#[tokio::test(flavor = "multi_thread")]
async fn revoking_an_agent_withdraws_the_questions_its_calls_are_waiting_on() {
    for (modern_agent, upstream_protocol) in [
        (false, ProtocolChoice::Legacy),
        (true, ProtocolChoice::Auto),
    ] {
        let pair = format!("agent 2026: {modern_agent}, upstream {upstream_protocol:?}");
        let desk = desk().await;
        let mut rig = rig(
            &format!("revoked-mid-call-{modern_agent}"),
            vec![upstream("desk", &desk, upstream_protocol)],
        )
        .await;
        let created = rig.gateway.create_agent("Doomed", "bridge").unwrap();
        let agent = rig
            .agent_with("desk", "doomed", modern_agent, &created.token)
            .await;
        let deleting = spawn_call(&agent, "delete_ticket", json!({"id": "t2"}));
        allow_next_call(&mut rig, "delete_ticket").await;
        let question = rig.next_ask().await;
        assert!(
            matches!(question.kind, AskKind::Form { .. }),
            "{pair}: {question:?}"
        );
        rig.gateway.revoke_agent(&created.agent.id).unwrap();
        let (id, outcome) = rig.next_resolution().await;
        assert_eq!(id, question.id, "{pair}");
        assert!(
            matches!(
                outcome,
                Outcome::Cancelled {
                    reason: CancelReason::Revoked
                }
            ),
            "{pair}: {outcome:?}"
        );
        let ended = tokio::time::timeout(WAIT, deleting)
            .await
            .expect("the call ends in time")
            .unwrap();
        assert!(
            ended.is_err() || ended.as_ref().unwrap().is_error == Some(true),
            "{pair}: {ended:?}"
        );
        assert!(desk.store.contains("t2"), "{pair}: the call ran");
        rig.gateway.shutdown().await;
    }
}

/// Revoking an agent ends its sessions: the stream on which the server's notifications would
/// reach it closes at once, rather than when the session goes quiet minutes later.
#[tokio::test(flavor = "multi_thread")]
async fn revoking_an_agent_ends_its_sessions_streams() {
    let desk = desk().await;
    let rig = rig(
        "revoked-stream",
        vec![upstream("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let doomed = rig.gateway.create_agent("Doomed", "bridge").unwrap();
    let kept = rig.gateway.create_agent("Kept", "bridge").unwrap();
    let (agent, _) = RawAgent::open(rig.url("desk"), &doomed.token, "doomed").await;
    let (other, _) = RawAgent::open(rig.url("desk"), &kept.token, "kept").await;
    let mut stream = agent.listen().await;
    let mut others = other.listen().await;
    rig.gateway.revoke_agent(&doomed.agent.id).unwrap();
    let ended = tokio::time::timeout(WAIT, stream.recv()).await;
    assert!(
        matches!(ended, Ok(None)),
        "the revoked agent's stream is still open: {ended:?}"
    );
    // Another agent's session goes on.
    assert!(
        tokio::time::timeout(Duration::from_millis(500), others.recv())
            .await
            .is_err(),
        "another agent's stream ended or got something"
    );
    rig.gateway.shutdown().await;
}

/// A pending approval is for the agent and the server it was asked about: revoking the agent
/// withdraws its question, and after a restart with the server's name running another server,
/// the question is not asked again (its answer could never be used).
#[tokio::test(flavor = "multi_thread")]
async fn a_pending_approval_goes_with_its_agent_and_its_server() {
    let dir = scratch("pending-bound");
    let mut files = hostile_server("files", None);
    files.approval_wait = Duration::from_millis(300);
    let mut rig = rig_in(dir.clone(), vec![files.clone()]).await;
    let doomed = rig.gateway.create_agent("Doomed", "bridge").unwrap();
    let agent = rig.agent_holding("files", "doomed", &doomed.token).await;
    let waited = spawn_call(&agent, "read_file", json!({"path": "/p/a"}));
    rig.next_ask().await;
    let told = waited.await.unwrap().unwrap();
    assert!(text(&told).contains("Approval pending"), "{}", text(&told));
    rig.gateway.revoke_agent(&doomed.agent.id).unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !rig.broker.pending().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the revoked agent's question is still open"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let agent = rig.agent("files", "patient-agent", false).await;
    let waited = spawn_call(&agent, "read_file", json!({"path": "/p/b"}));
    rig.next_ask().await;
    assert!(text(&waited.await.unwrap().unwrap()).contains("Approval pending"));
    rig.broker.shutdown();
    rig.gateway.shutdown().await;
    drop(agent);
    let mut replaced = files.clone();
    let countersign_core::config::TransportConfig::Stdio { env, .. } = &mut replaced.transport
    else {
        unreachable!()
    };
    env.insert("DATA_DIR".into(), "/somewhere/else".into());
    let rig = rig_in(dir.clone(), vec![replaced]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        rig.broker.pending().is_empty(),
        "asked again about another server: {:?}",
        rig.broker.pending()
    );
    rig.gateway.shutdown().await;
    // Gone for good: back under the server it was asked about, it is not asked again either.
    let rig = rig_in(dir, vec![files]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(rig.broker.pending().is_empty(), "removed for good");
    rig.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn remembered_scopes_last_as_chosen_and_cover_only_what_was_chosen() {
    let mut rig = rig("scopes", vec![hostile_server("files", None)]).await;
    let clock = test_clock(&rig);
    let agent = rig.agent("files", "scoped-agent", false).await;

    // Any path under /p, for an hour.
    let reading = spawn_call(&agent, "read_file", json!({"path": "/p/first.txt"}));
    let ask = rig.next_ask().await;
    let hour = now_ms() + 3_600_000;
    let under_p = Covering::PathUnder {
        argument: "path".into(),
        prefix: "/p".into(),
        also: Vec::new(),
    };
    rig.broker
        .answer(
            ask.id,
            remember(true, Lasting::Until { until_ms: hour }, under_p),
        )
        .unwrap();
    assert_ne!(reading.await.unwrap().unwrap().is_error, Some(true));
    let read = call(&agent, "read_file", json!({"path": "/p/a.txt"})).await;
    assert_eq!(text(&read), r#"read_file {"path":"/p/a.txt"}"#);
    assert!(rig.broker.pending().is_empty());
    // Climbing out, or another directory: asked.
    for outside in ["/p/../etc/passwd", "/q/x"] {
        let reading = spawn_call(&agent, "read_file", json!({"path": outside}));
        let ask = rig.next_ask().await;
        rig.broker.answer(ask.id, Answer::Decline).unwrap();
        assert_eq!(
            reading.await.unwrap().unwrap().is_error,
            Some(true),
            "{outside}"
        );
    }
    // The hour passes (on the test's clock): asked again.
    clock.store(hour, std::sync::atomic::Ordering::Relaxed);
    let reading = spawn_call(&agent, "read_file", json!({"path": "/p/a.txt"}));
    let ask = rig.next_ask().await;
    // A remembered no, for this session: answered at once from now on.
    rig.broker
        .answer(
            ask.id,
            remember(
                false,
                Lasting::Session,
                Covering::AnyArguments { also_sent: None },
            ),
        )
        .unwrap();
    assert_eq!(reading.await.unwrap().unwrap().is_error, Some(true));
    let refused = call(&agent, "read_file", json!({"path": "/z"})).await;
    assert_eq!(refused.is_error, Some(true));
    assert!(text(&refused).contains("denied"), "{}", text(&refused));
    assert!(rig.broker.pending().is_empty());
    // The session ends: so does the decision.
    agent.cancel().await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !rig.settings.get().remembered.iter().all(|d| d.allow) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the session decision outlived its session"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let again = rig.agent("files", "scoped-agent", false).await;
    let reading = spawn_call(&again, "read_file", json!({"path": "/z"}));
    let ask = rig.next_ask().await;
    rig.broker
        .answer(ask.id, Answer::Accept { content: None })
        .unwrap();
    assert_ne!(reading.await.unwrap().unwrap().is_error, Some(true));
    rig.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_choice_that_does_not_cover_the_call_on_screen_is_refused() {
    let mut rig = rig("bad-choice", vec![hostile_server("files", None)]).await;
    let agent = rig.agent("files", "agent", false).await;
    let reading = spawn_call(&agent, "read_file", json!({"path": "/home/me/x"}));
    let ask = rig.next_ask().await;
    let elsewhere = Covering::PathUnder {
        argument: "path".into(),
        prefix: "/etc".into(),
        also: Vec::new(),
    };
    assert!(
        rig.broker
            .answer(ask.id, remember(true, Lasting::Always, elsewhere))
            .is_err()
    );
    let past = Lasting::Until { until_ms: 1 };
    assert!(
        rig.broker
            .answer(
                ask.id,
                remember(true, past, Covering::AnyArguments { also_sent: None })
            )
            .is_err()
    );
    // Still open: the person answers properly.
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    assert_eq!(reading.await.unwrap().unwrap().is_error, Some(true));
    assert!(rig.settings.get().remembered.is_empty());
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `@modelcontextprotocol/server-filesystem` over stdio, allowed into `dir` only.
fn filesystem_server(name: &str, dir: &std::path::Path) -> ServerConfig {
    let script =
        common::peer_path("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    common::with_test_timeouts(ServerConfig::stdio(
        name,
        common::node(),
        &[script.as_str(), dir.to_str().unwrap()],
    ))
}

/// The preview of `ask`, asked for the moment its event arrives (the gateway's offer follows
/// the event by an instant, and a preview waits for it).
async fn preview_once_offered(
    rig: &Rig,
    ask: countersign_core::AskId,
) -> countersign_core::gateway::preview::PreviewResult {
    tokio::time::timeout(WAIT, rig.gateway.preview(ask))
        .await
        .expect("the preview in time")
        .expect("a preview")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_preview_shows_the_servers_diff_and_changes_nothing_until_the_person_allows_once() {
    use countersign_core::ask::audit::AuditRecord;
    use countersign_core::gateway::preview::PreviewError;
    // The server resolves symlinks in its allowed directories; so does the test.
    let files = scratch("preview-files").canonicalize().unwrap();
    let notes = files.join("notes.txt");
    std::fs::write(&notes, "hello world\n").unwrap();
    let mut rig = rig("preview", vec![filesystem_server("files", &files)]).await;

    let args = json!({
        "path": notes.to_str().unwrap(),
        "edits": [{"oldText": "world", "newText": "there"}],
    });
    let agent = tokio::spawn(ts_agent(vec![
        "--url".into(),
        rig.url("files"),
        "--token".into(),
        rig.gateway.token().to_owned(),
        "--name".into(),
        "ts-agent".into(),
        "--call".into(),
        "edit_file".into(),
        "--args".into(),
        args.to_string(),
    ]));
    let ask = rig.next_ask().await;
    match &ask.kind {
        AskKind::ToolCall { tool, preview, .. } => {
            assert_eq!(tool, "edit_file");
            assert!(preview, "edit_file takes a boolean dryRun: {ask:?}");
        }
        other => panic!("{other:?}"),
    }

    let shown = preview_once_offered(&rig, ask.id).await;
    assert!(!shown.is_error, "{shown:?}");
    assert!(!shown.clipped);
    assert!(shown.text.contains("-hello world"), "{}", shown.text);
    assert!(shown.text.contains("+hello there"), "{}", shown.text);
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "hello world\n",
        "the dry run changed the file"
    );
    // Pressed again (or sent again by a reloaded page): the first dry run's answer, the
    // server not asked again (counted below), since a server may ignore `dryRun`.
    assert_eq!(rig.gateway.preview(ask.id).await, Ok(shown.clone()));
    // The preview answered nothing: the question still waits.
    assert!(rig.broker.pending().iter().any(|a| a.id == ask.id));

    rig.broker
        .answer(ask.id, Answer::Accept { content: None })
        .unwrap();
    let lines = agent.await.unwrap();
    assert_eq!(lines[1]["step"], "call", "{lines:?}");
    // Had the preview written the edit, "world" would be gone and this call an error.
    assert_ne!(lines[1]["result"]["isError"], true, "{lines:?}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "hello there\n");

    // The question has ended: no preview any more.
    assert_eq!(
        rig.gateway.preview(ask.id).await,
        Err(PreviewError::NotOffered)
    );

    let records = rig.records();
    let previews = records
        .iter()
        .filter(|r| {
            matches!(r, AuditRecord::Forwarded { method, server, .. }
                if server == "files" && method.contains("preview"))
        })
        .count();
    assert_eq!(previews, 1, "{records:#?}");
    let asked: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            AuditRecord::Asked { ask, .. } => Some(ask.id),
            _ => None,
        })
        .collect();
    assert_eq!(asked, vec![ask.id], "{records:#?}");
    assert!(
        records.iter().any(|r| matches!(r,
            AuditRecord::Resolved { id, outcome: Outcome::Accepted { .. }, .. } if *id == ask.id)),
        "{records:#?}"
    );

    // A tool without a boolean dryRun offers no preview, even while its question waits.
    let agent = rig.agent("files", "rmcp-agent", false).await;
    let writing = spawn_call(
        &agent,
        "write_file",
        json!({"path": notes.to_str().unwrap(), "content": "gone\n"}),
    );
    let ask = rig.next_ask().await;
    assert!(
        matches!(&ask.kind, AskKind::ToolCall { tool, preview: false, .. } if tool == "write_file"),
        "{ask:?}"
    );
    assert_eq!(
        rig.gateway.preview(ask.id).await,
        Err(PreviewError::NotOffered)
    );
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    assert_eq!(writing.await.unwrap().unwrap().is_error, Some(true));
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "hello there\n");
    rig.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_outlives_the_call_and_a_restart_and_its_answer_is_used_once() {
    let dir = scratch("durable");
    let mut files = hostile_server("files", None);
    files.approval_wait = Duration::from_millis(500);
    let mut rig = rig_in(dir.clone(), vec![files.clone()]).await;
    let agent = rig.agent("files", "patient-agent", false).await;
    let args = json!({"path": "/p/report.txt"});
    // Nobody answers in time: a result (not an error) saying the approval is pending.
    let waited = spawn_call(&agent, "read_file", args.clone());
    let ask = rig.next_ask().await;
    let told = waited.await.unwrap().unwrap();
    assert_ne!(told.is_error, Some(true));
    let words = text(&told);
    assert!(
        words.contains("Approval pending in Countersign (id p-"),
        "{words}"
    );
    // The question stays in the app.
    assert_eq!(rig.broker.pending().len(), 1);
    assert_eq!(rig.broker.pending()[0].id, ask.id);

    // Countersign quits (every open question cancelled) and starts again on the same files.
    rig.broker.shutdown();
    rig.gateway.shutdown().await;
    drop(agent);
    let mut rig = rig_in(dir, vec![files]).await;
    let again = rig.next_ask().await;
    let AskKind::ToolCall {
        tool, arguments, ..
    } = &again.kind
    else {
        panic!("{again:?}")
    };
    assert_eq!((tool.as_str(), arguments), ("read_file", &args));
    rig.broker
        .answer(again.id, Answer::Accept { content: None })
        .unwrap();

    // The agent's retry runs once, unasked.
    let agent = rig.agent("files", "patient-agent", false).await;
    let retried = call(&agent, "read_file", args.clone()).await;
    assert_eq!(text(&retried), r#"read_file {"path":"/p/report.txt"}"#);
    assert!(rig.broker.pending().is_empty());
    // The allow given in this run is on record as carried out by the retry; the question of
    // the run before (cancelled when Countersign quit) is not.
    let run = rig.broker.audit().run().to_owned();
    let carried: Vec<(String, u64)> = rig
        .records()
        .into_iter()
        .filter_map(|r| match r {
            countersign_core::ask::audit::AuditRecord::Delivered { run, id, .. } => Some((run, id)),
            _ => None,
        })
        .collect();
    assert_eq!(carried, [(run, again.id)], "{carried:?}");
    // A second retry is a new call: asked again.
    let second = spawn_call(&agent, "read_file", args.clone());
    let ask = rig.next_ask().await;
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    assert_eq!(second.await.unwrap().unwrap().is_error, Some(true));
    rig.gateway.shutdown().await;
}

/// Calls `read_file` with `args` and leaves its question unanswered until the agent is told
/// the call is pending; the question.
async fn left_pending(rig: &mut Rig, agent: &Agent, args: Value) -> Ask {
    let waited = spawn_call(agent, "read_file", args);
    let ask = rig.next_ask().await;
    assert!(text(&waited.await.unwrap().unwrap()).contains("pending"));
    ask
}

/// The person answers a pending call with a decision to remember ("allow for a minute"); the
/// agent's retry runs by that decision, and uses up the answer to the pending call with it.
/// Left, that answer let the same call run once more after the decision had lapsed, asking
/// nobody.
#[tokio::test(flavor = "multi_thread")]
async fn a_retry_allowed_by_a_remembered_decision_uses_up_the_pending_answer() {
    let mut files = hostile_server("files", None);
    files.approval_wait = Duration::from_millis(300);
    let mut rig = rig("durable-remembered", vec![files]).await;
    let clock = test_clock(&rig);
    let agent = rig.agent("files", "patient-agent", false).await;
    let args = json!({"path": "/p/a"});
    let ask = left_pending(&mut rig, &agent, args.clone()).await;
    let minute = now_ms() + 60_000;
    rig.broker
        .answer(
            ask.id,
            remember(
                true,
                Lasting::Until { until_ms: minute },
                Covering::AnyArguments { also_sent: None },
            ),
        )
        .unwrap();
    // The retry runs, by the decision.
    let retried = call(&agent, "read_file", args.clone()).await;
    assert_eq!(text(&retried), r#"read_file {"path":"/p/a"}"#);
    // Two minutes on, the decision has lapsed: the same call is asked about again.
    clock.fetch_add(120_000, std::sync::atomic::Ordering::Relaxed);
    let again = spawn_call(&agent, "read_file", args.clone());
    let ask = tokio::time::timeout(WAIT, rig.next_ask())
        .await
        .expect("asked again, not run on the pending answer");
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    assert_eq!(again.await.unwrap().unwrap().is_error, Some(true));
    rig.gateway.shutdown().await;
}

/// The person answers a pending call "allow, for a minute", then revokes that decision in
/// Settings before the agent retries: the retry is asked about again. The answer went with
/// the decision; before, it stayed and ran the retry, unasked, with nothing in Settings left
/// to revoke short of the agent's whole token.
#[tokio::test(flavor = "multi_thread")]
async fn revoking_the_decision_a_pending_call_was_allowed_with_takes_the_allow_back() {
    let mut files = hostile_server("files", None);
    files.approval_wait = Duration::from_millis(300);
    let mut rig = rig("durable-revoked", vec![files]).await;
    let agent = rig.agent("files", "patient-agent", false).await;
    let args = json!({"path": "/p/a"});
    let ask = left_pending(&mut rig, &agent, args.clone()).await;
    let minute = now_ms() + 60_000;
    rig.broker
        .answer(
            ask.id,
            remember(
                true,
                Lasting::Until { until_ms: minute },
                Covering::AnyArguments { also_sent: None },
            ),
        )
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    let kept = loop {
        if let Some(kept) = rig.settings.get().remembered.first().map(|d| d.id) {
            break kept;
        }
        assert!(std::time::Instant::now() < deadline, "the decision kept");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    // The answer is kept the instant after the decision; revoked after both, as a person
    // would. (Revoked between the two, the answer goes as it is kept: `settle`.)
    tokio::time::sleep(Duration::from_millis(200)).await;
    // As Settings' Revoke does (`App::revoke_decision`).
    rig.gateway.revoke_decision(kept, now_ms()).unwrap();
    let again = spawn_call(&agent, "read_file", args.clone());
    let ask = tokio::time::timeout(WAIT, rig.next_ask())
        .await
        .expect("asked again, not run on the revoked answer");
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    assert_eq!(again.await.unwrap().unwrap().is_error, Some(true));
    rig.gateway.shutdown().await;
}

/// Revoking that decision when the pending answers cannot be saved without it: not revoked,
/// and the person is told why. Revoked regardless, a restart read the answer back from disk and
/// ran the retry unasked. And a decision revoked while no gateway ran (or before the answers'
/// forgetting was saved) takes its answers with it at the next start.
#[tokio::test(flavor = "multi_thread")]
async fn a_revoke_the_pending_answers_cannot_follow_is_not_made() {
    let mut files = hostile_server("files", None);
    files.approval_wait = Duration::from_millis(300);
    let dir = scratch("durable-revoke-unsaved");
    let mut rig = rig_in(dir.clone(), vec![files.clone()]).await;
    let agent = rig.agent("files", "patient-agent", false).await;
    let args = json!({"path": "/p/a"});
    let ask = left_pending(&mut rig, &agent, args.clone()).await;
    let hour = now_ms() + 3_600_000;
    rig.broker
        .answer(
            ask.id,
            remember(
                true,
                Lasting::Until { until_ms: hour },
                Covering::AnyArguments { also_sent: None },
            ),
        )
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    let pending_file = dir.join("pending-approvals.json");
    let kept = loop {
        let kept = rig.settings.get().remembered.first().map(|d| d.id);
        let tied = std::fs::read_to_string(&pending_file)
            .is_ok_and(|f| kept.is_some_and(|k| f.contains(&format!("\"decision\":{k}"))));
        if let (Some(kept), true) = (kept, tied) {
            break kept;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the decision kept and tied"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    // The pending file cannot be written now: a directory where its new copy would go.
    let saved = std::fs::read(&pending_file).unwrap();
    std::fs::remove_file(&pending_file).unwrap();
    std::fs::create_dir(&pending_file).unwrap();
    let refused = rig.gateway.revoke_decision(kept, now_ms()).unwrap_err();
    assert!(refused.contains("Not revoked"), "{refused}");
    assert!(
        rig.settings.get().remembered.iter().any(|d| d.id == kept),
        "the decision stays while its answers cannot go"
    );
    rig.broker.shutdown();
    rig.gateway.shutdown().await;
    drop(agent);
    // The file as it was; the next start's settings hold no such decision (revoked while no
    // gateway ran, as App does then): the answer is left out, and the retry is asked about.
    std::fs::remove_dir(&pending_file).unwrap();
    std::fs::write(&pending_file, &saved).unwrap();
    let mut rig = rig_in(dir, vec![files]).await;
    let agent = rig.agent("files", "patient-agent", false).await;
    let again = spawn_call(&agent, "read_file", args.clone());
    let ask = tokio::time::timeout(WAIT, rig.next_ask())
        .await
        .expect("asked again at the next start, not run on the revoked answer");
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    assert_eq!(again.await.unwrap().unwrap().is_error, Some(true));
    rig.gateway.shutdown().await;
}

/// A pending approvals file that cannot be read at a start may have held the person's denial
/// of a call that a remembered or trusted allow would run: it is moved aside, not written over,
/// and every such allow waits on the person until they forget it in Settings. (It started
/// empty, and the allow ran the call the person had denied.)
#[tokio::test(flavor = "multi_thread")]
async fn pending_approvals_that_cannot_be_read_hold_back_allows() {
    let dir = scratch("pending-unreadable");
    std::fs::write(
        dir.join("pending-approvals.json"),
        "[{\"id\": \"p-1\", cut short",
    )
    .unwrap();
    let mut rig = rig_in(dir.clone(), vec![hostile_server("files", None)]).await;
    assert!(rig.settings.holds_back("files"));
    assert!(
        std::fs::read_to_string(dir.join("pending-approvals.json.bad"))
            .unwrap()
            .contains("cut short")
    );
    // Always allowed by the person, which ran the call unasked before: asked now.
    let agent = rig.agent("files", "patient-agent", false).await;
    let first = spawn_call(&agent, "read_file", json!({"path": "/p/a"}));
    let ask = rig.next_ask().await;
    rig.broker
        .answer(
            ask.id,
            remember(
                true,
                Lasting::Always,
                Covering::AnyArguments { also_sent: None },
            ),
        )
        .unwrap();
    assert_ne!(first.await.unwrap().unwrap().is_error, Some(true));
    let reading = spawn_call(&agent, "read_file", json!({"path": "/p/a"}));
    let ask = tokio::time::timeout(WAIT, rig.next_ask())
        .await
        .expect("held back: asked");
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    assert_eq!(reading.await.unwrap().unwrap().is_error, Some(true));
    // Forgotten in Settings: it runs unasked again.
    rig.settings.forget_unread().unwrap();
    let read = call(&agent, "read_file", json!({"path": "/p/a"})).await;
    assert_eq!(text(&read), r#"read_file {"path":"/p/a"}"#);
    rig.gateway.shutdown().await;
}

/// A pending call's question went with the session it was asked in, and there was no place to
/// ask it again then (its agent held its share of the server's places): the agent's retry asks
/// it again once there is. (It was gone from the desktop until the next start, and every retry
/// was told "pending" meanwhile.)
#[tokio::test(flavor = "multi_thread")]
async fn a_pending_calls_question_gone_from_the_desktop_is_asked_again_at_the_retry() {
    let mut files = hostile_server("files", None);
    files.approval_wait = Duration::from_millis(300);
    let mut rig = rig("durable-unasked", vec![files]).await;
    let agent = rig.agent("files", "patient-agent", false).await;
    let args = json!({"path": "/p/a"});
    let ask = left_pending(&mut rig, &agent, args.clone()).await;
    // Its question leaves the desktop and is not asked again now, as when its session ended
    // and there was no place to ask it again (simulated here by the one end that keeps an
    // approval without asking: the app quitting).
    rig.broker.withdraw(ask.id, CancelReason::Shutdown);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        rig.broker.pending().is_empty(),
        "{:?}",
        rig.broker.pending()
    );
    // The retry finds it waiting with no question on the desktop: asked again.
    let retry = spawn_call(&agent, "read_file", args.clone());
    let deadline = tokio::time::Instant::now() + WAIT;
    let again = loop {
        let asks = rig.broker.pending();
        if let Some(again) = asks
            .into_iter()
            .find(|a| matches!(&a.kind, AskKind::ToolCall { tool, .. } if tool == "read_file"))
        {
            break again;
        }
        assert!(tokio::time::Instant::now() < deadline, "never asked again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    rig.broker
        .answer(again.id, Answer::Accept { content: None })
        .unwrap();
    let result = retry.await.unwrap().unwrap();
    assert!(!text(&result).contains("pending"), "{result:?}");
    assert_eq!(text(&result), r#"read_file {"path":"/p/a"}"#);
    rig.gateway.shutdown().await;
}

/// The person allows a pending call once, then, before the agent retries it, remembers a
/// denial of the tool for a minute: the retry is denied, and that uses up the allow. Left, the
/// allow ran the same call once the denial had lapsed, though the person's latest word on it
/// was no.
#[tokio::test(flavor = "multi_thread")]
async fn a_retry_denied_by_a_later_decision_uses_up_the_pending_allow() {
    let mut files = hostile_server("files", None);
    files.approval_wait = Duration::from_millis(300);
    let mut rig = rig("durable-later-deny", vec![files]).await;
    let clock = test_clock(&rig);
    let agent = rig.agent("files", "patient-agent", false).await;
    let args = json!({"path": "/p/a"});
    let ask = left_pending(&mut rig, &agent, args.clone()).await;
    rig.broker
        .answer(ask.id, Answer::Accept { content: None })
        .unwrap();
    // Another call of the tool, answered with a denial to remember for a minute.
    let other = spawn_call(&agent, "read_file", json!({"path": "/p/b"}));
    let ask = rig.next_ask().await;
    let minute = now_ms() + 60_000;
    rig.broker
        .answer(
            ask.id,
            remember(
                false,
                Lasting::Until { until_ms: minute },
                Covering::AnyArguments { also_sent: None },
            ),
        )
        .unwrap();
    let _ = other.await;
    let retried = call(&agent, "read_file", args.clone()).await;
    assert_eq!(retried.is_error, Some(true), "{}", text(&retried));
    // Two minutes on, the denial has lapsed: the same call is asked about again.
    clock.fetch_add(120_000, std::sync::atomic::Ordering::Relaxed);
    let again = spawn_call(&agent, "read_file", args.clone());
    let ask = tokio::time::timeout(WAIT, rig.next_ask())
        .await
        .expect("asked again, not run on the allow the denial overruled");
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    assert_eq!(again.await.unwrap().unwrap().is_error, Some(true));
    rig.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pending_denial_answers_the_retry_and_only_the_same_call() {
    let mut files = hostile_server("files", None);
    files.approval_wait = Duration::from_millis(300);
    let mut rig = rig("durable-deny", vec![files]).await;
    let agent = rig.agent("files", "patient-agent", false).await;
    let ask = left_pending(&mut rig, &agent, json!({"path": "/p/a"})).await;
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    // Other arguments: not this approval; asked.
    let other = spawn_call(&agent, "read_file", json!({"path": "/p/b"}));
    let ask = rig.next_ask().await;
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    assert_eq!(other.await.unwrap().unwrap().is_error, Some(true));
    // The same call: denied at once with the approval's id.
    let retried = call(&agent, "read_file", json!({"path": "/p/a"})).await;
    assert_eq!(retried.is_error, Some(true));
    assert!(
        text(&retried).contains("pending approval p-"),
        "{}",
        text(&retried)
    );
    assert!(rig.broker.pending().is_empty());
    rig.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn five_calls_waiting_three_allowed_exactly_those_three_reach_the_server() {
    let dir = scratch("batch-log");
    let log = dir.join("hostile.log");
    let mut rig = rig("batch", vec![hostile_server("files", Some(&log))]).await;
    let agent = rig.agent("files", "busy-agent", false).await;
    let calls: Vec<_> = (0..5)
        .map(|n| spawn_call(&agent, "read_file", json!({"path": format!("/p/{n}")})))
        .collect();
    let mut asks = Vec::new();
    for _ in 0..5 {
        asks.push(rig.next_ask().await);
    }
    // As the dialog's batch does: the ticked ones allowed, every other one denied.
    let path = |ask: &Ask| match &ask.kind {
        AskKind::ToolCall { arguments, .. } => arguments["path"].as_str().unwrap().to_owned(),
        other => panic!("{other:?}"),
    };
    let ticked = ["/p/0", "/p/2", "/p/4"];
    for ask in &asks {
        let answer = if ticked.contains(&path(ask).as_str()) {
            Answer::Accept { content: None }
        } else {
            Answer::Decline
        };
        rig.broker.answer(ask.id, answer).unwrap();
    }
    for (n, call) in calls.into_iter().enumerate() {
        let result = call.await.unwrap().unwrap();
        assert_eq!(result.is_error == Some(true), n % 2 == 1, "call {n}");
    }
    let mut received: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["method"] == "tools/call")
        .map(|m| {
            m["params"]["arguments"]["path"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    received.sort();
    assert_eq!(received, ticked);
    rig.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_connections_are_listed_for_the_connect_page_with_what_to_do() {
    let desk = desk().await;
    let rig = rig(
        "refusals",
        vec![upstream("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let http = reqwest::Client::new();
    let post = |url: String, token: Option<&str>| {
        let mut request = http
            .post(url)
            .header("user-agent", "claude-code/2.1 <b>hostile</b>")
            .header("content-type", "application/json")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        request.send()
    };
    assert_eq!(post(rig.url("desk"), None).await.unwrap().status(), 401);
    assert_eq!(
        post(rig.url("desk"), Some("not-the-token"))
            .await
            .unwrap()
            .status(),
        401
    );
    let token = rig.gateway.token().to_owned();
    assert_eq!(
        post(rig.url("no-such-server"), Some(&token))
            .await
            .unwrap()
            .status(),
        404
    );
    let refusals = rig.gateway.info().refusals;
    let seen: Vec<(u16, &str)> = refusals
        .iter()
        .map(|r| (r.status, r.path.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (404, "/mcp/no-such-server"),
            (401, "/mcp/desk"),
            (401, "/mcp/desk")
        ]
    );
    assert!(
        refusals[1].reason.contains("wrong or revoked"),
        "{refusals:?}"
    );
    assert!(
        refusals[2].reason.contains("no bearer token"),
        "{refusals:?}"
    );
    assert_eq!(
        refusals[2].client.as_deref(),
        Some("claude-code/2.1 <b>hostile</b>")
    );
    rig.gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_became_a_pending_approval_can_still_be_previewed() {
    let files = scratch("pending-preview-files").canonicalize().unwrap();
    let notes = files.join("notes.txt");
    std::fs::write(&notes, "hello world\n").unwrap();
    let mut server = filesystem_server("files", &files);
    server.approval_wait = Duration::from_millis(300);
    let mut rig = rig("pending-preview", vec![server]).await;
    let args = json!({
        "path": notes.to_str().unwrap(),
        "edits": [{"oldText": "world", "newText": "there"}],
    });
    let agent = tokio::spawn(ts_agent(vec![
        "--url".into(),
        rig.url("files"),
        "--token".into(),
        rig.gateway.token().to_owned(),
        "--name".into(),
        "ts-agent".into(),
        "--call".into(),
        "edit_file".into(),
        "--args".into(),
        args.to_string(),
    ]));
    let ask = rig.next_ask().await;
    // Nobody answers in time: the agent is told it is pending, and goes.
    let told = tokio::time::timeout(WAIT, agent).await.unwrap().unwrap();
    assert!(
        told.iter()
            .any(|v| v.to_string().contains("Approval pending")),
        "{told:?}"
    );
    // The question still waits, and its preview is still there.
    assert!(rig.broker.pending().iter().any(|a| a.id == ask.id));
    let shown = preview_once_offered(&rig, ask.id).await;
    assert!(shown.text.contains("+hello there"), "{}", shown.text);
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "hello world\n");
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    rig.gateway.shutdown().await;
}

/// A TypeScript SDK server answering with `URLElicitationRequiredError` (-32042), reached by an
/// agent that declared no elicitation at all: the address is asked on the desktop, and once the
/// server reports it complete the gateway makes the call again; the agent only sees the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_required_is_answered_on_the_desktop_and_the_agent_gets_the_result() {
    let mut ts = common::ts_stdio_config("ts");
    ts.tool_policy
        .insert("url_required".into(), ToolRule::Allow);
    let mut rig = rig("url-required", vec![ts]).await;
    let agent = rig.agent("ts", "plain-agent", false).await;
    let pending = spawn_call(
        &agent,
        "url_required",
        json!({"url": "https://calendar.example.com/connect", "complete_after_ms": 300}),
    );
    let ask = rig.next_ask().await;
    let AskKind::Url { host, .. } = &ask.kind else {
        panic!("a URL question, got {:?}", ask.kind);
    };
    assert_eq!(host, "calendar.example.com");
    assert_eq!(
        ask.asker.agent.as_deref(),
        Some("Shared token (older setups)")
    );
    rig.broker
        .answer(ask.id, Answer::Accept { content: None })
        .unwrap();
    let result = tokio::time::timeout(WAIT, pending)
        .await
        .expect("the call ends in time")
        .unwrap()
        .expect("the call succeeds after the address");
    assert_eq!(text(&result), "done after the URL");
    let _ = agent.cancel().await;
}

/// An agent that offers roots, to a server whose entry lets them through (`agentRoots`): its
/// upstream session declares them, and the server's `roots/list` gets the agent's own answer.
/// To a server whose entry does not, or from an agent that offers none: the server, which asks
/// anyway (the TypeScript SDK does unless told to be strict), is refused and learns no root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_roots_are_offered_to_its_upstream_and_nobody_elses() {
    #[derive(Clone)]
    struct RootedAgent;
    #[allow(deprecated)]
    impl rmcp::ClientHandler for RootedAgent {
        async fn list_roots(
            &self,
            _context: rmcp::service::RequestContext<RoleClient>,
        ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
            Ok(serde_json::from_value(
                json!({"roots": [{"uri": "file:///home/person/project", "name": "project"}]}),
            )
            .unwrap())
        }
        fn get_info(&self) -> ClientConfig {
            let mut config = ClientConfig::default();
            config.protocol_version = ProtocolVersion::V_2025_11_25;
            config.capabilities.roots = Some(Default::default());
            config
        }
    }
    let mut ts = common::ts_stdio_config("ts");
    ts.tool_policy.insert("list_roots".into(), ToolRule::Allow);
    ts.agent_roots = true;
    // The same server, as its entry stands unless the person says otherwise.
    let mut kept = common::ts_stdio_config("kept");
    kept.tool_policy
        .insert("list_roots".into(), ToolRule::Allow);
    let rig = rig("roots", vec![ts, kept]).await;
    let roots_through = async |server: &str| {
        let rooted = rig.open_with(server, RootedAgent).await;
        let mut params = CallToolRequestParams::new("list_roots");
        params.arguments = Some(Map::new());
        let result = tokio::time::timeout(WAIT, rooted.peer().call_tool(params))
            .await
            .unwrap()
            .unwrap();
        let _ = rooted.cancel().await;
        result
    };
    let result = roots_through("ts").await;
    assert!(
        text(&result).contains("file:///home/person/project"),
        "{}",
        text(&result)
    );
    let result = roots_through("kept").await;
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    assert!(!text(&result).contains("file://"), "{}", text(&result));

    let plain = rig.agent("ts", "plain-agent", false).await;
    let result = call(&plain, "list_roots", json!({})).await;
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    assert!(!text(&result).contains("file://"), "{}", text(&result));
    let _ = plain.cancel().await;
}

/// The reference filesystem server takes a client's roots in place of the directories it was
/// started with. An agent offering `/`-wide roots through the gateway leaves its reach as the
/// person started it, unless the entry lets agents' roots through (`agentRoots`); then it
/// takes the agent's, asked at the start and again when the agent says they changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_does_not_widen_the_filesystem_servers_reach_unless_let() {
    #[derive(Clone)]
    struct Rooted(std::sync::Arc<std::sync::Mutex<String>>);
    #[allow(deprecated)]
    impl rmcp::ClientHandler for Rooted {
        async fn list_roots(
            &self,
            _context: rmcp::service::RequestContext<RoleClient>,
        ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
            let uri = self.0.lock().unwrap().clone();
            Ok(serde_json::from_value(json!({"roots": [{"uri": uri}]})).unwrap())
        }
        fn get_info(&self) -> ClientConfig {
            let mut config = ClientConfig::default();
            config.protocol_version = ProtocolVersion::V_2025_11_25;
            let mut roots = rmcp::model::RootsCapabilities::default();
            roots.list_changed = Some(true);
            config.capabilities.roots = Some(roots);
            config
        }
    }
    let dir = scratch("fs-roots");
    let (started, wider, later) = (
        dir.join("project"),
        dir.join("elsewhere"),
        dir.join("later"),
    );
    for folder in [&started, &wider, &later] {
        std::fs::create_dir_all(folder).unwrap();
    }
    let script =
        common::peer_path("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    let files = |name: &str, let_through: bool| {
        let mut config = common::with_test_timeouts(ServerConfig::stdio(
            name,
            common::node(),
            &[script.as_str(), started.to_str().unwrap()],
        ));
        config
            .tool_policy
            .insert("list_allowed_directories".into(), ToolRule::Allow);
        config.agent_roots = let_through;
        config
    };
    let rig = rig_in(dir.clone(), vec![files("kept", false), files("let", true)]).await;
    let roots = std::sync::Arc::new(std::sync::Mutex::new(format!("file://{}", wider.display())));
    let open = async |server: &str| rig.open_with(server, Rooted(roots.clone())).await;
    let allowed = async |agent: &rmcp::service::RunningService<RoleClient, Rooted>| {
        let mut params = CallToolRequestParams::new("list_allowed_directories");
        params.arguments = Some(Map::new());
        let result = tokio::time::timeout(WAIT, agent.peer().call_tool(params))
            .await
            .unwrap()
            .unwrap();
        text(&result)
    };
    let started_name = started.file_name().unwrap().to_str().unwrap().to_owned();
    let wider_name = wider.file_name().unwrap().to_str().unwrap().to_owned();

    // Not let through: the server was never offered roots, so it keeps its own directory,
    // also after the agent says its roots changed.
    let kept = open("kept").await;
    let shown = allowed(&kept).await;
    assert!(
        shown.contains(&started_name) && !shown.contains(&wider_name),
        "{shown}"
    );
    kept.peer().notify_roots_list_changed().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let shown = allowed(&kept).await;
    assert!(
        shown.contains(&started_name) && !shown.contains(&wider_name),
        "{shown}"
    );
    let _ = kept.cancel().await;

    // Let through: the agent's roots are the server's reach, and when the agent says they
    // changed, the server asks again.
    let agent = open("let").await;
    let reaches = async |only: &str| {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let shown = allowed(&agent).await;
            if shown.contains(only) && !shown.contains(&started_name) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "never took the agent's roots ({only}): {shown}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    reaches(&wider_name).await;
    *roots.lock().unwrap() = format!("file://{}", later.display());
    agent.peer().notify_roots_list_changed().await.unwrap();
    reaches("later").await;
    let _ = agent.cancel().await;
    rig.gateway.shutdown().await;
}

/// A server's `roots/list` during a call answered on a stream (one asking for progress) goes on
/// that stream; during a call answered in JSON, on the agent's session stream (GET). Either
/// way the server gets the agent's own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roots_request_during_a_call_goes_on_its_stream_when_it_has_one() {
    let mut ts = common::ts_stdio_config("ts");
    ts.tool_policy.insert("list_roots".into(), ToolRule::Allow);
    ts.agent_roots = true;
    let rig = rig("roots-stream", vec![ts]).await;
    let (agent, _) = RawAgent::open_offering(
        rig.url("ts"),
        rig.gateway.token(),
        "rooted-agent",
        json!({"roots": {}}),
    )
    .await;
    let mut on_get = agent.listen().await;
    let roots = |id: &Value, uri: &str| json!({"jsonrpc": "2.0", "id": id, "result": {"roots": [{"uri": uri}]}});
    let mut on_call = sse_messages(
        agent
            .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "list_roots", "arguments": {},
                "_meta": {"progressToken": "r"}}}))
            .await,
    );
    let request = next_on(&mut on_call, "roots/list on the call's stream").await;
    assert_eq!(request["method"], "roots/list", "{request}");
    let (status, _, body) = agent
        .exchange(roots(&request["id"], "file:///on/the/stream"))
        .await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{body}");
    let result = tokio::time::timeout(WAIT, on_call.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        result.to_string().contains("file:///on/the/stream"),
        "{result}"
    );

    let same = agent.clone();
    let calling = tokio::spawn(async move {
        let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "list_roots", "arguments": {}}});
        same.send(call).await.text().await.unwrap()
    });
    let request = loop {
        let message = next_on(&mut on_get, "roots/list on the session's stream").await;
        if message["method"] == "roots/list" {
            break message;
        }
    };
    agent
        .exchange(roots(&request["id"], "file:///on/the/session"))
        .await;
    let body = tokio::time::timeout(WAIT, calling).await.unwrap().unwrap();
    assert!(body.contains("file:///on/the/session"), "{body}");
    rig.gateway.shutdown().await;
}

/// A rig with the TypeScript server over stdio, its `ask_model` (a sampling request during the
/// call) allowed without asking.
async fn sampling_rig(test: &str) -> Rig {
    let mut ts = common::ts_stdio_config("ts");
    ts.tool_policy.insert("ask_model".into(), ToolRule::Allow);
    rig(test, vec![ts]).await
}

/// A server's sampling request during an agent's call goes on that call's own stream (as the
/// transport has it; rmcp's session put it on the agent's GET stream), the agent's answer comes
/// back as a POST of its own, and the call's result follows on the same stream. Another
/// agent holding the session's id can neither answer for it nor cancel the call, and the same
/// answer again is nobody's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampling_request_during_a_call_goes_on_the_calls_own_stream() {
    let mut rig = sampling_rig("sampling-stream").await;
    let (agent, _) = RawAgent::open_offering(
        rig.url("ts"),
        rig.gateway.token(),
        "sampling-agent",
        json!({"sampling": {}}),
    )
    .await;
    let mut on_get = agent.listen().await;
    let calling = agent
        .send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "ask_model", "arguments": {"prompt": "What is 2+2?"}}}))
        .await;
    assert!(
        calling.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut on_call = sse_messages(calling);
    allow_sampling(&mut rig).await;
    let request = next_on(&mut on_call, "the sampling request on the call's stream").await;
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    assert_eq!(
        request["params"]["messages"][0]["content"]["text"], "What is 2+2?",
        "{request}"
    );
    // Another agent holding this session's id neither answers for it nor cancels its call.
    let other = rig.gateway.create_agent("Agent B", "bridge").unwrap();
    let intruder = RawAgent {
        http: reqwest::Client::new(),
        url: agent.url.clone(),
        token: other.token.clone(),
        session: agent.session.clone(),
    };
    let forged = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"role": "assistant",
        "content": {"type": "text", "text": "five"}, "model": "forged", "stopReason": "endTurn"}});
    // (rmcp's session takes any answer with 202; what counts is that the request still waits
    // for its own agent's answer, and the call is not cancelled.)
    intruder.exchange(forged).await;
    intruder
        .exchange(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 5}}),
        )
        .await;
    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"role": "assistant",
        "content": {"type": "text", "text": "four"}, "model": "agent-model",
        "stopReason": "endTurn"}});
    let (status, _, body) = agent.exchange(answer.clone()).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{body}");
    let result = next_on(&mut on_call, "the call's result after the answer").await;
    assert_eq!(result["id"], 5, "{result}");
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("four") && text.contains("agent-model"),
        "{result}"
    );
    assert!(
        tokio::time::timeout(Duration::from_secs(1), on_call.recv())
            .await
            .expect("the call's stream ends")
            .is_none()
    );
    // Answered: the same answer again waits nowhere (rmcp's session is not ours to judge it).
    let (status, _, body) = agent.exchange(answer).await;
    assert_ne!(status, reqwest::StatusCode::OK, "{body}");
    assert!(
        on_get.try_recv().is_err(),
        "nothing of the call went on the GET stream"
    );
    // The agent's own refusal reaches the server as the agent said it.
    let mut on_call = sse_messages(
        agent
            .send(json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                "params": {"name": "ask_model", "arguments": {"prompt": "Again?"}}}))
            .await,
    );
    let ask = rig.next_ask().await;
    rig.broker
        .answer(ask.id, Answer::Accept { content: None })
        .unwrap();
    let request = tokio::time::timeout(WAIT, on_call.recv())
        .await
        .unwrap()
        .unwrap();
    let refusal = json!({"jsonrpc": "2.0", "id": request["id"],
        "error": {"code": -1, "message": "User rejected sampling request"}});
    let (status, _, body) = agent.exchange(refusal).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{body}");
    let result = tokio::time::timeout(WAIT, on_call.recv())
        .await
        .unwrap()
        .unwrap();
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("\"code\":-1") && text.contains("User rejected sampling request"),
        "{result}"
    );
    rig.gateway.shutdown().await;
}

/// The same with the TypeScript SDK's own client (as VS Code is): the sampling request on its
/// call's stream is answered by the SDK, and the call gets the model's reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typescript_sdk_agent_answers_a_sampling_request_during_its_call() {
    let mut rig = sampling_rig("sampling-ts").await;
    let agent = tokio::spawn(ts_agent(vec![
        "--url".into(),
        rig.url("ts"),
        "--token".into(),
        rig.gateway.token().to_owned(),
        "--sampling".into(),
        "four".into(),
        "--call".into(),
        "ask_model".into(),
        "--args".into(),
        json!({"prompt": "What is 2+2?"}).to_string(),
    ]));
    allow_sampling(&mut rig).await;
    let lines = agent.await.unwrap();
    let sampled = lines
        .iter()
        .find(|l| l["step"] == "sampled")
        .expect("asked");
    assert_eq!(
        sampled["messages"][0]["content"]["text"], "What is 2+2?",
        "{lines:?}"
    );
    let call = lines
        .iter()
        .find(|l| l["step"] == "call")
        .expect("a result");
    let text = call["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("four") && text.contains("ts-agent-model"),
        "{lines:?}"
    );
    rig.gateway.shutdown().await;
}

/// Over Streamable HTTP the server says which call its sampling request belongs to (it comes on
/// that call's response stream), so it goes on that call's own stream to the agent even with
/// another call in flight, where the stdio wire would leave it to the session's stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampling_request_goes_on_the_stream_of_its_own_call_among_several() {
    let ts = common::HttpPeer::start_ts().await;
    let mut rig = rig(
        "sampling-among",
        vec![ts_http_upstream(&ts, &["confirm_action", "ask_model"])],
    )
    .await;
    let (agent, _) = RawAgent::open_offering(
        rig.url("ts"),
        rig.gateway.token(),
        "sampling-agent",
        json!({"sampling": {}}),
    )
    .await;
    let mut on_get = agent.listen().await;
    // The first call waits for the person's answer to its question meanwhile.
    let mut on_first = sse_messages(
        agent
            .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "confirm_action", "arguments": {"action": "wait"}}}))
            .await,
    );
    let question = rig.next_ask().await;
    assert!(
        matches!(question.kind, AskKind::Form { .. }),
        "{question:?}"
    );
    let mut on_second = sse_messages(
        agent
            .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "ask_model", "arguments": {"prompt": "What is 2+2?"}}}))
            .await,
    );
    allow_sampling(&mut rig).await;
    let request = next_on(
        &mut on_second,
        "the sampling request on its own call's stream",
    )
    .await;
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"role": "assistant",
        "content": {"type": "text", "text": "four"}, "model": "agent-model",
        "stopReason": "endTurn"}});
    let (status, _, body) = agent.exchange(answer).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{body}");
    let result = next_on(&mut on_second, "the second call's result").await;
    assert_eq!(result["id"], 2, "{result}");
    assert!(
        result["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("four")),
        "{result}"
    );
    rig.broker.answer(question.id, confirm()).unwrap();
    let first = next_on(&mut on_first, "the first call's result").await;
    assert_eq!(first["id"], 1, "{first}");
    assert!(
        on_get.try_recv().is_err(),
        "nothing went on the session's stream"
    );
    ts.stop().await;
    rig.gateway.shutdown().await;
}

/// A server's sampling request reaches an agent that offers sampling only once the person has
/// allowed it, in a dialog that shows the message, the system prompt, the token limit and the
/// context asked for; denied, the server is told so (-1) and the agent is never asked. To an
/// agent that offers none the request is refused in words, recorded, and nobody is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampling_request_reaches_the_agent_only_when_the_person_allows_it() {
    #[derive(Clone, Default)]
    struct ModelAgent {
        asked: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    }
    #[allow(deprecated)]
    impl rmcp::ClientHandler for ModelAgent {
        async fn create_message(
            &self,
            params: rmcp::model::CreateMessageRequestParams,
            _context: rmcp::service::RequestContext<RoleClient>,
        ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
            self.asked
                .lock()
                .unwrap()
                .push(serde_json::to_value(&params).unwrap());
            Ok(serde_json::from_value(json!({
                "role": "assistant",
                "content": {"type": "text", "text": "four"},
                "model": "agent-model",
                "stopReason": "endTurn"
            }))
            .unwrap())
        }
        fn get_info(&self) -> ClientConfig {
            let mut config = ClientConfig::default();
            config.protocol_version = ProtocolVersion::V_2025_11_25;
            config.capabilities.sampling = Some(Default::default());
            config
        }
    }
    let mut ts = common::ts_stdio_config("ts");
    ts.tool_policy.insert("ask_model".into(), ToolRule::Allow);
    let dir = scratch("sampling");
    let mut rig = rig_in(dir.clone(), vec![ts]).await;
    let agent = ModelAgent::default();
    let asked = agent.asked.clone();
    let modelled = rig.open_with("ts", agent).await;
    let ask_model = |prompt: &str| {
        let peer = modelled.peer().clone();
        let mut params = CallToolRequestParams::new("ask_model");
        params.arguments = json!({"prompt": prompt}).as_object().cloned();
        tokio::spawn(async move { peer.call_tool(params).await })
    };

    // Allowed: the agent's model answers the server.
    let pending = ask_model("What is 2+2?");
    let ask = rig.next_ask().await;
    let AskKind::Sampling {
        messages,
        system_prompt,
        max_tokens,
        include_context,
        ..
    } = &ask.kind
    else {
        panic!("a sampling question, got {:?}", ask.kind);
    };
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].role, "user");
    assert_eq!(messages[0].text, "What is 2+2?");
    assert_eq!(system_prompt.as_deref(), Some("You are a terse assistant."));
    assert_eq!(*max_tokens, 64);
    assert_eq!(include_context.as_deref(), Some("thisServer"));
    assert_eq!(ask.asker.server, "ts");
    assert!(
        asked.lock().unwrap().is_empty(),
        "the agent is not asked before the person allows"
    );
    rig.broker
        .answer(ask.id, Answer::Accept { content: None })
        .unwrap();
    let result = tokio::time::timeout(WAIT, pending)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_ne!(result.is_error, Some(true), "{}", text(&result));
    assert!(text(&result).contains("four"), "{}", text(&result));
    assert!(text(&result).contains("agent-model"), "{}", text(&result));
    {
        let asked = asked.lock().unwrap();
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0]["messages"][0]["content"]["text"], "What is 2+2?");
        assert_eq!(asked[0]["maxTokens"], 64);
    }

    // Denied: the server hears the person's no, and the agent hears nothing.
    let pending = ask_model("Delete everything?");
    let ask = rig.next_ask().await;
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    let result = tokio::time::timeout(WAIT, pending)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    assert!(text(&result).contains("\"code\":-1"), "{}", text(&result));
    assert!(
        text(&result).contains("the person declined the sampling request"),
        "{}",
        text(&result)
    );
    assert_eq!(asked.lock().unwrap().len(), 1, "the agent was not asked");
    let _ = modelled.cancel().await;

    // An agent without sampling: refused with the reason, nobody asked.
    let plain = rig.agent("ts", "plain-agent", false).await;
    let result = call(&plain, "ask_model", json!({"prompt": "Anyone there?"})).await;
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    assert!(text(&result).contains("-32601"), "{}", text(&result));
    assert!(
        text(&result).contains("the agent it serves offers none"),
        "{}",
        text(&result)
    );
    assert!(rig.broker.pending().is_empty());
    let log = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("offers none") && l.contains("Anyone there?")),
        "{log}"
    );
    let _ = plain.cancel().await;
    rig.gateway.shutdown().await;
}

/// A tool that must run as a task (2025-11-25), called plainly by an agent: the gateway runs
/// the task on its behalf, the task's question is asked on the desktop, and the agent gets the
/// task's result as the call's, without the mark that ties it to a task it never asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_tool_is_run_to_its_end_for_an_agent_that_called_it_plainly() {
    let mut tasks = task_server();
    tasks
        .tool_policy
        .insert("slow_report".into(), ToolRule::Allow);
    let mut rig = rig("tasks", vec![tasks]).await;
    let agent = rig.agent("tasks", "plain-agent", false).await;
    let listed = agent.peer().list_all_tools().await.unwrap();
    assert!(listed.iter().any(|t| t.name == "slow_report"));
    let pending = spawn_call(&agent, "slow_report", json!({"topic": "rust"}));
    answer_the_tasks_question(&mut rig, "engineers").await;
    let result = tokio::time::timeout(WAIT, pending)
        .await
        .expect("the task ends in time")
        .unwrap()
        .expect("the task's result");
    assert_eq!(text(&result), "report on rust for engineers");
    assert!(
        result.meta.is_none(),
        "no task mark reaches the agent: {:?}",
        result.meta
    );
    let _ = agent.cancel().await;
    rig.gateway.shutdown().await;
}

/// Open file descriptors of this process.
fn open_files() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// A thousand agent sessions, each opened, used (a tool call, on the lane) and closed, four at a
/// time, against a stdio server that gets a child process per session: afterwards the gateway
/// holds no more tasks, file descriptors or child processes than after the first. Each call goes
/// on the wire beside rmcp's session (`mcp::direct`, with its stdin writer task); every other
/// session's server speaks 2025-11-25, the rest 2026-07-28, whose sessions also hold the task
/// that answers the server's own questions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_agent_sessions_leave_no_task_descriptor_or_child_behind() {
    const SESSIONS: usize = 1_000;
    let binary = common::demo_server_binary();
    let mut desk = ServerConfig::stdio("desk", binary.to_str().unwrap(), &[]);
    desk.tool_policy = BTreeMap::from([("list_tickets".to_owned(), ToolRule::Allow)]);
    let mut legacy = desk.clone();
    legacy.name = "desk-legacy".into();
    legacy.protocol = ProtocolChoice::Legacy;
    let rig = rig("thousand", vec![desk, legacy]).await;
    let session = |n: usize| {
        let rig = &rig;
        async move {
            let server = if n.is_multiple_of(2) {
                "desk"
            } else {
                "desk-legacy"
            };
            let agent = rig.agent(server, &format!("agent-{n}"), false).await;
            let listed = call(&agent, "list_tickets", json!({})).await;
            assert_ne!(listed.is_error, Some(true), "{}", text(&listed));
            agent.cancel().await.expect("closed");
        }
    };
    let held = || {
        (
            rig.gateway.tasks_alive().expect("the gateway's own thread"),
            open_files(),
            common::procs::descendants(std::process::id()).len(),
        )
    };
    // Until what was let go is gone (an upstream child exits once its session closes).
    let settled = |baseline: (usize, usize, usize)| async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let now = held();
            if (now.0 <= baseline.0 && now.1 <= baseline.1 && now.2 <= baseline.2)
                || tokio::time::Instant::now() > deadline
            {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    // The first session to each server makes what lives as long as the gateway (its HTTP
    // client, say).
    session(0).await;
    session(1).await;
    let baseline = settled((usize::MAX, usize::MAX, 0)).await;
    assert_eq!(baseline.2, 0, "the first sessions' servers are gone");
    let started = std::time::Instant::now();
    // Four at a time, as agents come and go together.
    futures::StreamExt::for_each_concurrent(futures::stream::iter(2..SESSIONS), 4, session).await;
    let elapsed = started.elapsed();
    let after = settled(baseline).await;
    println!(
        "{SESSIONS} sessions in {:.1} s; (tasks, open files, children) after the first: {baseline:?}, after all: {after:?}",
        elapsed.as_secs_f64()
    );
    assert!(
        after.0 <= baseline.0 && after.1 <= baseline.1 && after.2 == 0,
        "left behind: {baseline:?} after the first session, {after:?} after {SESSIONS}"
    );
    rig.gateway.shutdown().await;
}

/// The person answers the task server's question (about a report on rust) with `audience`.
async fn answer_the_tasks_question(rig: &mut Rig, audience: &str) -> Ask {
    let ask = rig.next_ask().await;
    let AskKind::Form { message, .. } = &ask.kind else {
        panic!("the task's question, got {:?}", ask.kind);
    };
    assert_eq!(message, "Who is the report on rust for?");
    let mut content = Map::new();
    content.insert("audience".into(), json!(audience));
    rig.broker
        .answer(
            ask.id,
            Answer::Accept {
                content: Some(content),
            },
        )
        .unwrap();
    ask
}

fn task_server() -> ServerConfig {
    let script = common::peer_path("task-server.mjs");
    common::with_test_timeouts(ServerConfig::stdio(
        "tasks",
        common::node(),
        &[script.as_str()],
    ))
}

/// An agent that uses tasks itself (the TypeScript SDK's task client) gets them passed
/// through: it is told the server takes task-augmented calls, its call passes the gate first,
/// the task is created with its own `task`, the task's question is asked on the desktop, and
/// the agent polls the task to its result, which keeps the mark of the task it asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_uses_tasks_gets_its_own_task_through_the_gate() {
    let mut rig = rig("own-task", vec![task_server()]).await;
    let agent = tokio::spawn(ts_agent(vec![
        "--url".into(),
        rig.url("tasks"),
        "--token".into(),
        rig.gateway.token().to_owned(),
        "--name".into(),
        "ts-task-agent".into(),
        "--call".into(),
        "slow_report".into(),
        "--args".into(),
        json!({"topic": "rust"}).to_string(),
        "--task".into(),
    ]));
    let approval = allow_next_call(&mut rig, "slow_report").await;
    assert_eq!(approval.asker.declared.as_deref(), Some("ts-task-agent"));
    let ask = answer_the_tasks_question(&mut rig, "engineers").await;
    assert_eq!(ask.asker.declared.as_deref(), Some("ts-task-agent"));
    let lines = agent.await.unwrap();
    let steps: Vec<_> = lines.iter().filter(|l| l["step"] == "task").collect();
    assert_eq!(steps[0]["type"], "taskCreated", "{lines:?}");
    assert_eq!(
        steps[0]["taskId"], "task-1",
        "the server's own task: {lines:?}"
    );
    let last = steps.last().unwrap();
    assert_eq!(last["type"], "result", "{lines:?}");
    assert_eq!(
        last["result"]["content"][0]["text"], "report on rust for engineers",
        "{lines:?}"
    );
    assert_eq!(
        last["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], "task-1",
        "the agent asked for a task, so the result keeps its mark: {lines:?}"
    );
    let methods: Vec<String> = rig
        .records()
        .iter()
        .filter_map(|r| match r {
            countersign_core::ask::audit::AuditRecord::Forwarded { method, .. } => {
                Some(method.clone())
            }
            _ => None,
        })
        .collect();
    assert!(methods.iter().any(|m| m == "tasks/result"), "{methods:?}");
    assert!(
        !methods.iter().any(|m| m == "tasks/get"),
        "status polls are not recorded: {methods:?}"
    );
    rig.gateway.shutdown().await;
}

/// A call to a tool that must run as a task, which the gateway makes one for the agent, carries
/// the fields beyond the model the person was shown, as a call on any other way does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_run_as_a_task_carries_what_the_person_saw_beyond_the_arguments() {
    let mut rig = rig("task-sent", vec![task_server()]).await;
    let (mut agent, _) = RawAgent::open(rig.url("tasks"), rig.gateway.token(), "raw-agent").await;
    let call = json!({"name": "slow_report", "arguments": {"topic": "rust"}, "x-force": true});
    let calling = tokio::spawn(async move { agent.post(2, "tools/call", call).await });
    let ask = rig.next_ask().await;
    assert!(
        matches!(&ask.kind, AskKind::ToolCall { also_sent_text: Some(t), .. } if t.contains("x-force")),
        "{ask:?}"
    );
    rig.broker
        .answer(ask.id, Answer::Accept { content: None })
        .unwrap();
    answer_the_tasks_question(&mut rig, "engineers").await;
    let answer = calling.await.unwrap();
    assert_eq!(
        answer["result"]["content"][0]["text"],
        r#"report on rust (also sent: {"x-force":true}) for engineers"#,
        "{answer}"
    );
    rig.gateway.shutdown().await;
}

/// The raw exchange of an agent using tasks: the handshake offers task-augmented calls; a call
/// the person declines is an error in words (a tool result would not be the task the agent
/// waits for) and creates nothing; an allowed one creates a task that only this agent's
/// session knows, and its cancellation reaches the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_task_is_declined_or_created_cancelled_as_asked_and_its_own_alone() {
    let mut seeded = task_server();
    if let countersign_core::config::TransportConfig::Stdio { env, .. } = &mut seeded.transport {
        env.insert("TASK_SERVER_SEED".into(), "1".into());
    }
    let mut rig = rig("task-raw", vec![seeded]).await;
    let (agent, init) =
        RawAgent::open(rig.url("tasks"), rig.gateway.token(), "raw-task-agent").await;
    assert_eq!(
        init["result"]["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        "{init}"
    );
    let report = json!({"name": "slow_report", "arguments": {"topic": "q3"},
        "task": {"ttl": 60000}});
    let post = |mut agent: RawAgent, id: u64| {
        let report = report.clone();
        tokio::spawn(async move {
            let answer = agent.post(id, "tools/call", report).await;
            (agent, answer)
        })
    };
    let declining = post(agent, 2);
    let ask = rig.next_ask().await;
    assert!(matches!(&ask.kind, AskKind::ToolCall { tool, .. } if tool == "slow_report"));
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    let (agent, denied) = declining.await.unwrap();
    assert!(
        denied["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("slow_report")),
        "{denied}"
    );
    let creating = post(agent, 3);
    allow_next_call(&mut rig, "slow_report").await;
    let (mut agent, created) = creating.await.unwrap();
    // The server's first task: the declined call created none.
    assert_eq!(created["result"]["task"]["taskId"], "task-1", "{created}");
    assert_eq!(created["result"]["task"]["status"], "working", "{created}");
    let status = agent
        .post(4, "tasks/get", json!({"taskId": "task-1"}))
        .await;
    assert_eq!(status["result"]["status"], "working", "{status}");

    // Only its own tasks: another's on the same server (as on an HTTP server every session of
    // one sign-in shares) is neither listed, read nor cancelled, and the server never hears
    // of the attempt.
    let listed = agent.post(40, "tasks/list", json!({})).await;
    assert_eq!(
        listed["result"]["tasks"]
            .as_array()
            .map(|t| t.iter().map(|t| t["taskId"].clone()).collect::<Vec<_>>()),
        Some(vec![json!("task-1")]),
        "{listed}"
    );
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let foreign = agent
            .post(41, method, json!({"taskId": "someone-elses"}))
            .await;
        assert!(
            foreign["error"]["message"].as_str().is_some_and(
                |m| m.contains("no task of that id was created by this agent on this server")
            ),
            "{method}: {foreign}"
        );
    }
    // Another agent's session has its own upstream: the task is not there.
    let mut other = rig.raw_agent("tasks", "other-agent").await;
    let foreign = other
        .post(2, "tasks/get", json!({"taskId": "task-1"}))
        .await;
    assert!(foreign.get("error").is_some(), "{foreign}");

    let cancelled = agent
        .post(5, "tasks/cancel", json!({"taskId": "task-1"}))
        .await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let after = agent
        .post(6, "tasks/get", json!({"taskId": "task-1"}))
        .await;
    assert_eq!(after["result"]["status"], "cancelled", "{after}");
    assert!(
        rig.records().iter().any(|r| matches!(r,
            countersign_core::ask::audit::AuditRecord::Forwarded { method, .. } if method == "tasks/cancel")),
        "the cancellation is on record"
    );
    rig.gateway.shutdown().await;
}

/// A task call that asks for progress, as every rmcp client's does, is the agent's task too:
/// created as asked (rmcp's server side would drop `task` and run it as a plain call), and the
/// task's progress reaches the agent under its own token after the call has been answered, on
/// the session's stream, until the task ends; what the server sends about it after the end is
/// not passed on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_task_call_asking_progress_creates_its_task_and_hears_it_to_the_end() {
    let mut rig = rig("task-progress", vec![task_server()]).await;
    let (agent, _) = RawAgent::open(rig.url("tasks"), rig.gateway.token(), "progress-agent").await;
    let mut heard = agent.listen().await;
    let call = json!({"name": "slow_report", "arguments": {"topic": "rust"},
        "task": {"ttl": 60000}, "_meta": {"progressToken": "mine-7"}});
    let creating = tokio::spawn(async move {
        let mut agent = agent;
        let created = agent.post(2, "tools/call", call).await;
        (agent, created)
    });
    allow_next_call(&mut rig, "slow_report").await;
    let (mut agent, created) = creating.await.unwrap();
    assert_eq!(created["result"]["task"]["taskId"], "task-1", "{created}");
    answer_the_tasks_question(&mut rig, "analysts").await;
    let result = agent
        .post(3, "tasks/result", json!({"taskId": "task-1"}))
        .await;
    assert_eq!(
        result["result"]["content"][0]["text"], "report on rust for analysts",
        "{result}"
    );
    // The server says the task is over in a log line after its stray progress: by then
    // everything it sent about the task has been passed on, or dropped.
    let mut progress = Vec::new();
    loop {
        let message = tokio::time::timeout(WAIT, heard.recv())
            .await
            .expect("the server's log line after the end")
            .expect("the stream stays open");
        match message["method"].as_str() {
            Some("notifications/progress") => progress.push(message["params"].clone()),
            Some("notifications/message") if message["params"]["data"] == "task-1 is over" => {
                break;
            }
            _ => {}
        }
    }
    let seen: Vec<_> = progress
        .iter()
        .map(|p| {
            (
                p["progressToken"].clone(),
                p["progress"].as_f64(),
                p["message"].clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (json!("mine-7"), Some(1.0), json!("Gathering sources")),
            (json!("mine-7"), Some(2.0), json!("Writing the report")),
            (json!("mine-7"), Some(3.0), json!("Done")),
        ],
        "the task's progress under the agent's token, and nothing after its end"
    );
    rig.gateway.shutdown().await;
}

/// An agent's session ends only once the agent has left it quiet for the idle limit: requests
/// the lane answers (which rmcp's session never sees) keep it, as does a call waiting for the
/// person past the limit; left quiet, it ends (404, so the agent knows to start again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ends_when_its_agent_leaves_it_quiet_not_while_it_works() {
    let desk = desk().await;
    let mut rig = rig(
        "session-idle",
        vec![upstream("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    // Set once the reaper is asleep for a quarter of the default (as a loaded machine once
    // had it): the new limit must wake it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    rig.gateway.set_session_idle(Duration::from_secs(2));
    let agent = rig.raw_agent("desk", "busy-agent").await;
    let list = |id: u64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
    for id in 2..16 {
        let (status, _, body) = agent.exchange(list(id)).await;
        assert_eq!(status, reqwest::StatusCode::OK, "request {id}: {body}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // A call waiting for the person twice the limit.
    let same = agent.clone();
    let calling = tokio::spawn(async move {
        same.exchange(json!({"jsonrpc": "2.0", "id": 20, "method": "tools/call",
            "params": {"name": "delete_ticket", "arguments": {"id": "t1"}}}))
            .await
    });
    let ask = rig.next_ask().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    rig.broker.answer(ask.id, Answer::Decline).unwrap();
    let (status, _, body) = calling.await.unwrap();
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    assert!(body.contains("\"id\":20"), "{body}");
    // Quiet past the limit: the session is gone.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (status, _, body) = agent.exchange(list(30)).await;
    assert_eq!(status, reqwest::StatusCode::NOT_FOUND, "{body}");
    rig.gateway.shutdown().await;
}

/// An `initialize` that fails (here, the server cannot be reached) leaves no session behind.
/// rmcp makes one before the handshake and names it in the failed answer; no agent will use
/// or end it, and rmcp no longer idles sessions out (the lane does, for the sessions it knows),
/// so it must end with the failed handshake, as rmcp's worker does.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_initialize_leaves_no_session_behind() {
    let dead = common::with_test_timeouts(ServerConfig::http("dead", "http://127.0.0.1:9/mcp"));
    let rig = rig("failed-init", vec![dead]).await;
    let tasks = || rig.gateway.tasks_alive().expect("the gateway's own thread");
    let initialize = || async {
        let mut agent = RawAgent {
            http: reqwest::Client::new(),
            url: rig.url("dead"),
            token: rig.gateway.token().to_owned(),
            session: None,
        };
        let init = json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "hopeful", "version": "1"}});
        let answer = agent.post(1, "initialize", init).await;
        assert!(answer.get("error").is_some(), "{answer}");
        assert!(agent.session.is_some(), "rmcp named a session");
        agent
    };
    let first = initialize().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let baseline = tasks();
    for _ in 0..20 {
        initialize().await;
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    while tasks() > baseline && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(tasks() <= baseline, "{} tasks, {baseline} before", tasks());
    let (status, _, body) = first
        .exchange(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .await;
    assert_eq!(status, reqwest::StatusCode::NOT_FOUND, "{body}");
    rig.gateway.shutdown().await;
}

/// A question a task asks while its agent polls (no request of the agent's in flight) goes
/// with the agent's session when the agent ends it, withdrawn as the agent's, not left open
/// for the person; a call that ends meanwhile does not end the session's questions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_question_is_withdrawn_when_its_agent_ends_the_session() {
    let mut rig = rig("task-leave", vec![task_server()]).await;
    let (agent, _) = RawAgent::open(rig.url("tasks"), rig.gateway.token(), "leaving-agent").await;
    let call = json!({"name": "slow_report", "arguments": {"topic": "rust"},
        "task": {"ttl": 60000}});
    let creating = tokio::spawn(async move {
        let mut agent = agent;
        let created = agent.post(2, "tools/call", call).await;
        (agent, created)
    });
    allow_next_call(&mut rig, "slow_report").await;
    let (mut agent, created) = creating.await.unwrap();
    assert_eq!(created["result"]["task"]["taskId"], "task-1", "{created}");
    let ask = rig.next_ask().await;
    assert!(matches!(ask.kind, AskKind::Form { .. }), "{:?}", ask.kind);
    // A poll that comes and goes ends nothing.
    let status = agent
        .post(3, "tasks/get", json!({"taskId": "task-1"}))
        .await;
    assert_eq!(status["result"]["status"], "input_required", "{status}");
    assert_eq!(rig.broker.pending().len(), 1, "still asked");
    let ended = agent.end().await;
    assert!(ended.status().is_success(), "{}", ended.status());
    let (id, outcome) = rig.next_resolution().await;
    assert_eq!(id, ask.id);
    assert_eq!(
        outcome,
        Outcome::Cancelled {
            reason: CancelReason::AgentGone
        }
    );
    rig.gateway.shutdown().await;
}

/// Through the gateway too, a multi round-trip question is judged as the server sent it: a
/// `pattern` schema (which rmcp's typed model drops) ends the agent's call in words, recorded,
/// with nothing shown to the person.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mrtr_pattern_schema_is_refused_as_sent_for_an_agent() {
    let script = common::peer_path("mrtr-server.mjs");
    let mut mrtr = common::with_test_timeouts(ServerConfig::stdio(
        "mrtr",
        common::node(),
        &[script.as_str()],
    ));
    mrtr.tool_policy
        .insert("pattern_code".into(), ToolRule::Allow);
    let rig = rig("mrtr-pattern", vec![mrtr]).await;
    let agent = rig.agent("mrtr", "plain-agent", false).await;
    let mut params = CallToolRequestParams::new("pattern_code");
    params.arguments = Some(Map::new());
    let ended = tokio::time::timeout(WAIT, agent.peer().call_tool(params))
        .await
        .expect("the call ends in time")
        .expect_err("refused");
    assert!(ended.to_string().contains("pattern"), "{ended}");
    assert!(rig.broker.pending().is_empty(), "nothing was shown");
    let _ = agent.cancel().await;
}

/// A 2026-07-28 server that asks with a request of its own while a call is in flight
/// (SEP-2260), where the gateway sends its calls beside rmcp's session (`mcp::direct`: on the
/// server's stdin, or POSTed to a server with no sessions and no standalone stream), which
/// holds no request of its own then and would refuse the question: the question reaches the
/// person and their answer the server, on record as delivered; another that the server
/// withdraws is torn down as the server's, and its `roots/list` gets the session's answer. On
/// the wire, the calls were the gateway's own and carried the 2026-07-28 lifecycle keys (the
/// server refuses a request without them) and, over HTTP, SEP-2243's headers (likewise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_servers_own_questions_during_a_call_reach_the_person() {
    for http in [false, true] {
        own_questions_during_a_call_reach_the_person(http).await;
    }
}

async fn own_questions_during_a_call_reach_the_person(http: bool) {
    let script = common::peer_path("mrtr-server.mjs");
    let wire =
        std::env::temp_dir().join(format!("cs-mrtr-wire-{}-{http}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&wire);
    let (_server, mut mrtr) = if http {
        let (server, url) =
            common::node_peer_at_url("mrtr-server.mjs", &["--http"], &[("MRTR_WIRE", &wire)]).await;
        (Some(server), ServerConfig::http("mrtr", &url))
    } else {
        let mut config = ServerConfig::stdio("mrtr", common::node(), &[script.as_str()]);
        if let countersign_core::config::TransportConfig::Stdio { env, .. } = &mut config.transport
        {
            env.insert("MRTR_WIRE".into(), wire.display().to_string());
        }
        (None, config)
    };
    mrtr = common::with_test_timeouts(mrtr);
    for tool in [
        "asks_by_request",
        "asks_then_withdraws",
        "asks_roots",
        "regional",
    ] {
        mrtr.tool_policy.insert(tool.into(), ToolRule::Allow);
    }
    let mut rig = rig(&format!("mrtr-by-request-{http}"), vec![mrtr]).await;
    let agent = rig.agent("mrtr", "plain-agent", false).await;

    let asking = spawn_call(&agent, "asks_by_request", json!({}));
    let question = rig.next_ask().await;
    assert!(
        matches!(question.kind, AskKind::Form { .. }),
        "{question:?}"
    );
    assert_eq!(question.asker.server, "mrtr");
    accept(&rig, question.id, json!({"name": "Ada"}));
    let answered = tokio::time::timeout(WAIT, asking)
        .await
        .expect("in time")
        .unwrap()
        .expect("answered");
    assert_eq!(
        text(&answered),
        r#"by request {"action":"accept","content":{"name":"Ada"}}"#
    );
    assert!(
        delivered(&rig).contains(&question.id),
        "{:?}",
        rig.records()
    );

    let withdrawing = spawn_call(&agent, "asks_then_withdraws", json!({}));
    let question = rig.next_ask().await;
    let (id, outcome) = rig.next_resolution().await;
    assert_eq!(id, question.id);
    assert_eq!(
        outcome,
        Outcome::Cancelled {
            reason: CancelReason::Server
        }
    );
    let withdrawn = tokio::time::timeout(WAIT, withdrawing)
        .await
        .expect("in time")
        .unwrap()
        .expect("answered");
    assert_eq!(text(&withdrawn), "withdrawn");

    // Not only questions for the person: the server's `roots/list` gets the session's own
    // answer (this agent offers no roots), not rmcp's refusal for want of a request of its own.
    let roots = call(&agent, "asks_roots", json!({})).await;
    assert!(
        text(&roots).contains("Countersign offers no roots"),
        "{}",
        text(&roots)
    );

    // An argument the tool's schema marks for a header travels in it too (over HTTP the
    // server refuses the call otherwise), wrapped where it cannot travel bare.
    for region in ["eu-west", " Zürich\r\nX: 1"] {
        let regional = call(&agent, "regional", json!({ "region": region })).await;
        assert_eq!(text(&regional), format!("region {region}"), "http: {http}");
    }
    // So does one of a call that carries fields beyond rmcp's model (sent as its own request).
    let (mut raw, _) = RawAgent::open(rig.url("mrtr"), rig.gateway.token(), "raw-agent").await;
    let more = json!({"name": "regional", "arguments": {"region": "eu-west"}, "x-vendor": 1});
    let answer = raw.post(2, "tools/call", more).await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "region eu-west",
        "http: {http}: {answer}"
    );

    let read: Vec<Value> = std::fs::read_to_string(&wire)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let calls: Vec<&Value> = read
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .collect();
    assert_eq!(calls.len(), 6, "{read:?}");
    for call in calls {
        assert!(
            call["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("countersign:")),
            "not the gateway's own: {call}"
        );
        let meta = &call["params"]["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientInfo"]["name"],
            "countersign"
        );
        assert!(meta["io.modelcontextprotocol/clientCapabilities"]["elicitation"].is_object());
    }
    let _ = agent.cancel().await;
    let _ = std::fs::remove_file(&wire);
}

/// An agent's cancellation of a call to a 2026-07-28 server over HTTP, where a request is
/// cancelled by closing its response stream (the revision has no session to post a
/// `notifications/cancelled` in): the question the server asked on that stream goes as the
/// agent's, and the server sees the call's stream closed before its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_http_server_sees_the_agents_cancellation_as_the_calls_stream_closing() {
    let wire =
        std::env::temp_dir().join(format!("cs-mrtr-cancel-wire-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&wire);
    let (_server, url) =
        common::node_peer_at_url("mrtr-server.mjs", &["--http"], &[("MRTR_WIRE", &wire)]).await;
    let mut mrtr = common::with_test_timeouts(ServerConfig::http("mrtr", &url));
    mrtr.tool_policy
        .insert("asks_and_waits".into(), ToolRule::Allow);
    let mut rig = rig("mrtr-http-cancel", vec![mrtr]).await;
    let agent = rig.agent("mrtr", "plain-agent", false).await;
    cancelled_while_asking(&mut rig, &agent, "asks_and_waits").await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let read = std::fs::read_to_string(&wire).unwrap_or_default();
        let call = read
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|m| m["method"] == "tools/call");
        if let Some(call) = call
            && read
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .any(|m| m["closed"] == call["id"])
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server never saw the call's stream closed: {read}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = agent.cancel().await;
    let _ = std::fs::remove_file(&wire);
}

/// `prompts/get` and `resources/read` that need the person first (multi round-trip requests, or
/// an address to open): asked on the desktop, and the agent gets the prompt and the resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_and_resources_that_ask_first_reach_the_agent() {
    let script = common::peer_path("mrtr-server.mjs");
    let mut mrtr = common::with_test_timeouts(ServerConfig::stdio(
        "mrtr",
        common::node(),
        &[script.as_str()],
    ));
    mrtr.read_policy = Some(ToolRule::Allow);
    let mut rig = rig("mrtr-beyond-tools", vec![mrtr]).await;
    let agent = rig.agent("mrtr", "plain-agent", false).await;

    let peer = agent.peer().clone();
    let prompt = tokio::spawn(async move {
        let mut params = rmcp::model::GetPromptRequestParams::new("greeting");
        params.arguments = Some(Map::new());
        peer.get_prompt(params).await
    });
    let ask = rig.next_ask().await;
    accept(&rig, ask.id, json!({"name": "Ada"}));
    let prompt = tokio::time::timeout(WAIT, prompt)
        .await
        .unwrap()
        .unwrap()
        .expect("the prompt");
    assert!(
        serde_json::to_string(&prompt)
            .unwrap()
            .contains("Hello, Ada"),
        "{prompt:?}"
    );

    let peer = agent.peer().clone();
    let read = tokio::spawn(async move {
        peer.read_resource(rmcp::model::ReadResourceRequestParams::new(
            "note://private",
        ))
        .await
    });
    let ask = rig.next_ask().await;
    accept(&rig, ask.id, json!({"sure": true}));
    let read = tokio::time::timeout(WAIT, read)
        .await
        .unwrap()
        .unwrap()
        .expect("the resource");
    assert!(
        serde_json::to_string(&read)
            .unwrap()
            .contains("the private note"),
        "{read:?}"
    );

    // A resource behind an address to open (-32042): the person opens it on the desktop, and
    // the read is made again; the agent, which never offered URL mode, sees only the note.
    let peer = agent.peer().clone();
    let read = tokio::spawn(async move {
        peer.read_resource(rmcp::model::ReadResourceRequestParams::new("note://linked"))
            .await
    });
    let ask = rig.next_ask().await;
    let AskKind::Url { host, .. } = &ask.kind else {
        panic!("a URL question, got {:?}", ask.kind);
    };
    assert_eq!(host, "consent.example.com");
    rig.broker
        .answer(ask.id, Answer::Accept { content: None })
        .unwrap();
    // The server reports no completion: the person says they are done.
    let done = rig.next_ask().await;
    assert!(matches!(done.kind, AskKind::Form { .. }), "{:?}", done.kind);
    accept(&rig, done.id, json!({}));
    let read = tokio::time::timeout(WAIT, read)
        .await
        .unwrap()
        .unwrap()
        .expect("the linked resource");
    assert!(
        serde_json::to_string(&read)
            .unwrap()
            .contains("the linked note"),
        "{read:?}"
    );

    // An "address to open" that is a form (a password) is no address: refused, and nobody
    // is shown a form whose answers would go nowhere.
    let refused = tokio::time::timeout(
        WAIT,
        agent
            .peer()
            .read_resource(rmcp::model::ReadResourceRequestParams::new("note://formed")),
    )
    .await
    .unwrap()
    .expect_err("refused");
    assert!(refused.to_string().contains("address"), "{refused}");
    assert!(
        rig.broker.pending().is_empty(),
        "{:?}",
        rig.broker.pending()
    );
    let _ = agent.cancel().await;
}

/// The person edits the config while agents are connected: a rule they tighten applies to
/// the very next call of every agent (with or without a session), a server they add is
/// reachable, and one they remove is gone for the agents that were using it.
#[tokio::test(flavor = "multi_thread")]
async fn the_persons_edits_apply_to_connected_agents_at_once() {
    let desk = desk().await;
    let rule = |r: ToolRule| BTreeMap::from([("session_info".to_owned(), r)]);
    let mut allowed = upstream("desk", &desk, ProtocolChoice::Legacy);
    allowed.tool_policy = rule(ToolRule::Allow);
    let mut denied = allowed.clone();
    denied.tool_policy = rule(ToolRule::Deny);
    let mut second = upstream("desk2", &desk, ProtocolChoice::Legacy);
    second.tool_policy = rule(ToolRule::Allow);
    let rig = rig("edits", vec![allowed.clone()]).await;
    let session = |r: CallToolResult| -> String {
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
        let info: Value = serde_json::from_str(&text(&r)).unwrap();
        info["sessionId"].as_str().unwrap().to_owned()
    };
    let legacy = rig.agent("desk", "legacy-agent", false).await;
    let modern = rig.agent("desk", "modern-agent", true).await;
    let before = session(call(&legacy, "session_info", json!({})).await);
    call(&modern, "session_info", json!({})).await;

    rig.gateway.set_servers(vec![denied, second.clone()]);
    for agent in [&legacy, &modern] {
        let refused = call(agent, "session_info", json!({})).await;
        assert_eq!(refused.is_error, Some(true), "{}", text(&refused));
        assert!(text(&refused).contains("rule: deny"), "{}", text(&refused));
    }
    let other = rig.agent("desk2", "other-agent", false).await;
    session(call(&other, "session_info", json!({})).await);

    // Allowed again: the agent's session goes on, through a new upstream session opened with
    // what the person saved.
    rig.gateway.set_servers(vec![allowed, second.clone()]);
    let after = session(call(&legacy, "session_info", json!({})).await);
    assert_ne!(
        after, before,
        "the upstream opened before the edits is still in use"
    );

    rig.gateway.set_servers(vec![second]);
    let mut params = CallToolRequestParams::new("session_info");
    params.arguments = Some(Map::new());
    let gone = tokio::time::timeout(WAIT, legacy.peer().call_tool(params))
        .await
        .expect("an answer in time");
    assert!(
        gone.as_ref().map_or(true, |r| r.is_error == Some(true)),
        "a removed server still answered: {gone:?}"
    );
    let refused = reqwest::Client::new()
        .post(rig.url("desk"))
        .header("authorization", format!("Bearer {}", rig.gateway.token()))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 404);
    session(call(&other, "session_info", json!({})).await);
    assert!(rig.broker.pending().is_empty());
}

impl RawAgent {
    /// Posts one message on the session and returns the answer's status, content type and
    /// body as sent.
    async fn exchange(&self, message: Value) -> (reqwest::StatusCode, String, String) {
        answer_of(self.send(message).await).await
    }

    /// Ends the session (DELETE).
    async fn end(&self) -> reqwest::Response {
        self.http
            .delete(&self.url)
            .header("authorization", format!("Bearer {}", self.token))
            .header("mcp-session-id", self.session.clone().unwrap())
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .unwrap()
    }

    /// Posts one message on the session; the answer as it starts.
    async fn send(&self, message: Value) -> reqwest::Response {
        self.send_text(message.to_string()).await
    }

    /// Posts a message written out as `text`.
    async fn send_text(&self, text: String) -> reqwest::Response {
        self.on_session().body(text).send().await.expect("posted")
    }
}

/// An answer's status, content type and body as sent.
async fn answer_of(response: reqwest::Response) -> (reqwest::StatusCode, String, String) {
    let status = response.status();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, kind, response.text().await.expect("body"))
}

/// A plain tool call on a 2025-11-25 session takes the lane: one JSON answer with the
/// server's own fields; a call that asks for progress gets a stream, with the progress as the
/// server sent it but for the token, ahead of the result (it travels through the relaying
/// task; the result waits), as does any call of an agent that offers sampling.
#[tokio::test(flavor = "multi_thread")]
async fn a_plain_call_on_a_session_is_answered_in_json_and_one_asking_for_progress_on_its_stream() {
    // The server on stdio, and over Streamable HTTP answering on SSE streams.
    let (_sse, url) = common::node_peer_at_url("raw-server.mjs", &["--sse"], &[]).await;
    for (label, raw) in [("stdio", raw_server()), ("sse", raw_http(&url))] {
        answered_on_the_lane(label, raw).await;
    }
}

async fn answered_on_the_lane(label: &str, mut raw: ServerConfig) {
    raw.tool_policy = BTreeMap::from([("chatty".to_owned(), ToolRule::Allow)]);
    let rig = rig(&format!("lane-json-{label}"), vec![raw]).await;
    let agent = rig.raw_agent("raw", "lane-agent").await;
    let (status, kind, body) = agent
        .exchange(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "chatty", "arguments": {"n": 1}}}))
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    assert!(kind.starts_with("application/json"), "{kind}: {body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["id"], 2);
    assert_eq!(
        answer["result"]["x-vendor"],
        json!({"kept": true, "n": 7}),
        "{answer}"
    );
    assert_eq!(answer["result"]["content"][0]["text"], "{\"n\":1}");

    let (sampler, _) = RawAgent::open_offering(
        rig.url("raw"),
        rig.gateway.token(),
        "sampling-agent",
        json!({"sampling": {}}),
    )
    .await;
    for agent in [&agent, &sampler] {
        let (_, kind, body) = agent
            .exchange(
                json!({"jsonrpc": "2.0", "id": "three", "method": "tools/call",
                "params": {"name": "chatty", "_meta": {"progressToken": "p3"}}}),
            )
            .await;
        assert!(kind.starts_with("text/event-stream"), "{kind}: {body}");
        let progress = body.find("notifications/progress").expect(&body);
        let result = body.rfind("\"x-vendor\"").expect(&body);
        assert!(progress < result, "{body}");
        // The progress as the server sent it (a vendor key, the number as written), under
        // the agent's own token.
        let params = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .find(|d| d.contains("notifications/progress"))
            .and_then(|d| d.split_once(r#""params":"#))
            .map(|(_, params)| params)
            .expect(&body);
        assert_eq!(
            params,
            r#"{"progressToken":"p3","progress":1,"total":2,"message":"half way","x-vendor":{"kept":true}}}"#,
            "{body}"
        );
        let answer: Value = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .find(|m| m.get("result").is_some())
            .expect(&body);
        assert_eq!(answer["id"], "three", "{body}");
        assert_eq!(answer["result"]["content"][0]["text"], "{}", "{body}");
    }
}

/// The messages of an SSE body as an agent's reader takes them: each event's `data:` lines
/// joined with `\n`.
fn sse_data(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            (!data.is_empty()).then(|| {
                serde_json::from_str(&data.join("\n"))
                    .unwrap_or_else(|e| panic!("{e}: {event:?} in {body}"))
            })
        })
        .collect()
}

/// A server that writes its messages indented over several lines (a plain JSON body; over SSE,
/// a `data:` line each): a call answered on a stream (an agent that offers sampling) gets each
/// message whole, its result with the server's own fields and its progress as sent. The lane
/// wrote the bytes it kept after a single `data: `, and the agent's reader took their first
/// line alone: the answer to a call that ran was lost.
#[tokio::test(flavor = "multi_thread")]
async fn a_result_written_over_several_lines_reaches_a_streamed_call_whole() {
    for mode in ["--http", "--sse"] {
        let (_server, url) = common::node_peer_at_url("raw-server.mjs", &[mode], &[]).await;
        let mut raw = raw_http(&url);
        raw.tool_policy = BTreeMap::from([("pretty".to_owned(), ToolRule::Allow)]);
        let rig = rig(&format!("pretty{mode}"), vec![raw]).await;
        let (sampler, _) = RawAgent::open_offering(
            rig.url("raw"),
            rig.gateway.token(),
            "sampling-agent",
            json!({"sampling": {}}),
        )
        .await;
        let (_, kind, body) = sampler
            .exchange(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                "params": {"name": "pretty", "arguments": {}, "_meta": {"progressToken": "p4"}}}))
            .await;
        assert!(
            kind.starts_with("text/event-stream"),
            "{mode} {kind}: {body}"
        );
        let messages = sse_data(&body);
        let answer = messages
            .iter()
            .find(|m| m["id"] == 4)
            .unwrap_or_else(|| panic!("{mode}: {body}"));
        assert_eq!(
            answer["result"]["content"][0]["text"], "indented",
            "{mode}: {body}"
        );
        assert_eq!(
            answer["result"]["x-vendor"],
            json!({"kept": true, "n": 7}),
            "{mode}: {body}"
        );
        if mode == "--sse" {
            let progress = messages
                .iter()
                .find(|m| m["method"] == "notifications/progress")
                .unwrap_or_else(|| panic!("{body}"));
            assert_eq!(
                progress["params"],
                json!({"progressToken": "p4", "progress": 1, "x-vendor": {"kept": true}}),
                "{body}"
            );
        }
        rig.gateway.shutdown().await;
    }
}

/// A call that asks for progress but whose answer comes first is answered in JSON, as rmcp's
/// own server answers (one write; an agent that opens a connection per call, as rmcp's do, reads
/// no stream). One that takes longer gets its stream after the first keep-alive interval, with
/// the keep-alive on it, so an agent that went away is still noticed.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_asking_for_progress_is_answered_in_json_when_its_answer_comes_first() {
    let mut raw = raw_server();
    raw.tool_policy = BTreeMap::from([
        ("echo".to_owned(), ToolRule::Allow),
        ("ask_and_wait".to_owned(), ToolRule::Allow),
    ]);
    let rig = rig("lane-json-first", vec![raw]).await;
    let agent = rig.raw_agent("raw", "lane-agent").await;
    let (status, kind, body) = agent
        .exchange(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"n": 1}, "_meta": {"progressToken": "p2"}}}))
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    assert!(kind.starts_with("application/json"), "{kind}: {body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(answer["result"]["x-vendor"]["n"], 7, "{answer}");

    // The server asks the person and waits: nothing for the agent, and no answer yet.
    let started = std::time::Instant::now();
    let waiting = tokio::time::timeout(
        Duration::from_secs(15),
        agent.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "ask_and_wait", "_meta": {"progressToken": "p3"}}})),
    )
    .await
    .expect("the stream starts without the answer");
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert!(
        waiting.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut body = waiting.bytes_stream();
    let first = tokio::time::timeout(Duration::from_secs(8), futures::StreamExt::next(&mut body))
        .await
        .expect("a keep-alive")
        .unwrap()
        .unwrap();
    assert_eq!(&first[..], b":\n\n");
    rig.gateway.shutdown().await;
}

/// An agent's other requests on its session take the lane too: each is answered in JSON with
/// the server's result as sent and the agent's id as the agent wrote it (rmcp's session wrote
/// back its own reading of the id), and one asking for progress on a stream of its own.
#[tokio::test(flavor = "multi_thread")]
async fn an_agents_other_requests_take_the_lane_and_come_back_as_sent() {
    let mut raw = raw_server();
    raw.trusted = true;
    let rig = rig("lane-other", vec![raw]).await;
    let agent = rig.raw_agent("raw", "lane-agent").await;
    let vendor = json!({"kept": true, "n": 7});
    for (method, params, pointer) in [
        ("tools/list", "{}", "/result/tools/0/x-vendor"),
        ("resources/list", "{}", "/result/resources/0/x-vendor"),
        (
            "resources/read",
            r#"{"uri": "raw://a"}"#,
            "/result/contents/0/x-vendor",
        ),
        ("prompts/list", "{}", "/result/prompts/0/x-vendor"),
        ("prompts/get", r#"{"name": "p"}"#, "/result/x-vendor"),
    ] {
        let (_, kind, body) = answer_of(
            agent
                .send_text(format!(
                    r#"{{"jsonrpc": "2.0", "id": "xA-{method}", "method": "{method}", "params": {params}}}"#
                ))
                .await,
        )
        .await;
        assert!(
            kind.starts_with("application/json"),
            "{method}: {kind}: {body}"
        );
        assert!(
            body.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":"xA-{method}","#)),
            "{method}: the id as the agent wrote it: {body}"
        );
        let answer: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(answer.pointer(pointer), Some(&vendor), "{method}: {body}");
    }
    let (_, kind, body) = agent
        .exchange(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list",
            "params": {"_meta": {"progressToken": "p9"}}}))
        .await;
    assert!(kind.starts_with("text/event-stream"), "{kind}: {body}");
    assert!(body.contains("\"x-vendor\""), "{body}");
    let (_, _, body) = agent
        .exchange(json!({"jsonrpc": "2.0", "id": 10, "method": "ping"}))
        .await;
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"jsonrpc": "2.0", "id": 10, "result": {}})
    );
    rig.gateway.shutdown().await;
}

/// A session's request whose version header names another revision with the handshake is run
/// as the session's, as rmcp runs it, and on the lane: answered in JSON (rmcp's session answers
/// on a stream) with the server's own fields. One naming 2026-07-28 without that revision's
/// `_meta`, or a version rmcp does not know, stays rmcp's, which refuses it.
#[tokio::test(flavor = "multi_thread")]
async fn a_sessions_request_naming_an_older_revision_takes_the_lane_and_a_later_one_is_refused() {
    let mut raw = raw_server();
    raw.trusted = true;
    let rig = rig("lane-version", vec![raw]).await;
    let agent = rig.raw_agent("raw", "version-agent").await;
    let list_naming = |version: &[u8]| {
        agent
            .http
            .post(&agent.url)
            .header("authorization", format!("Bearer {}", agent.token))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-session-id", agent.session.clone().unwrap())
            .header(
                "mcp-protocol-version",
                reqwest::header::HeaderValue::from_bytes(version).unwrap(),
            )
            .body(r#"{"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}"#)
            .send()
    };
    for version in ["2025-06-18", "2024-11-05"] {
        let (status, kind, body) = answer_of(list_naming(version.as_bytes()).await.unwrap()).await;
        assert_eq!(status, reqwest::StatusCode::OK, "{version}: {body}");
        assert!(
            kind.starts_with("application/json"),
            "{version}: answered on the lane: {kind}: {body}"
        );
        let answer: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            answer.pointer("/result/tools/0/x-vendor"),
            Some(&json!({"kept": true, "n": 7})),
            "{version}: {body}"
        );
    }
    // A header that is not text at all is no version rmcp knows either (the lane took it for
    // no header, and ran the request).
    for version in [&b"2026-07-28"[..], b"1999-01-01", b"2025-11-25\xff"] {
        let (status, _, body) = answer_of(list_naming(version).await.unwrap()).await;
        let version = String::from_utf8_lossy(version);
        assert_eq!(
            status,
            reqwest::StatusCode::BAD_REQUEST,
            "{version}: {body}"
        );
    }
    rig.gateway.shutdown().await;
}

/// A session's request that carries another revision's headers or lifecycle keys, which rmcp
/// would run all the same, gets the server's own fields: rmcp's typed answer drops them, and
/// nothing puts them back now (the swap that did is gone), so each must take the lane. Under
/// a handshake version `Mcp-Method` and `Mcp-Name` are no matter to rmcp; a 2026-07-28
/// agent's self-contained request is served without the session whatever session header it
/// carries; and a version named in `_meta` with the same header runs on the session.
#[tokio::test(flavor = "multi_thread")]
async fn a_sessions_request_in_another_revisions_dress_gets_the_servers_own_fields() {
    let mut raw = raw_server();
    raw.trusted = true;
    let rig = rig("lane-dress", vec![raw]).await;
    let agent = rig.raw_agent("raw", "dressed-agent").await;
    let vendor = json!({"kept": true, "n": 7});
    let session = agent.session.clone().unwrap();
    let on_session = |headers: &[(&str, &str)], body: String| {
        let mut request = agent
            .http
            .post(&agent.url)
            .header("authorization", format!("Bearer {}", agent.token))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-session-id", &session);
        for (header, value) in headers {
            request = request.header(*header, *value);
        }
        request.body(body).send()
    };
    let call = r#"{"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"a": 1}}}"#;
    let (status, _, body) = answer_of(
        on_session(
            &[
                ("mcp-protocol-version", "2025-11-25"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "echo"),
            ],
            call.to_owned(),
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["result"]["x-vendor"], vendor, "standard headers: {body}");

    let partial = r#"{"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta":
        {"io.modelcontextprotocol/protocolVersion": "2025-11-25"}}}"#;
    let (status, _, body) = answer_of(
        on_session(
            &[("mcp-protocol-version", "2025-11-25")],
            partial.to_owned(),
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        answer.pointer("/result/tools/0/x-vendor"),
        Some(&vendor),
        "a version named in _meta: {body}"
    );

    let response = sessionless_request(&rig, "raw", "6", "tools/list", json!({}), None, &[])
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    let (status, _, body) = answer_of(response).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        answer.pointer("/result/tools/0/x-vendor"),
        Some(&vendor),
        "a 2026-07-28 request with a session header: {body}"
    );
    rig.gateway.shutdown().await;
}

/// The agent cancels a call that waits for the person, on the lane: the question is
/// withdrawn as the agent's, nothing runs, and the call's answer still comes.
#[tokio::test(flavor = "multi_thread")]
async fn an_agent_cancelling_a_waiting_call_withdraws_its_approval_as_the_agents() {
    let desk = desk().await;
    let mut rig = rig(
        "lane-cancel",
        vec![upstream("desk", &desk, ProtocolChoice::Legacy)],
    )
    .await;
    let agent = rig.raw_agent("desk", "cancelling-agent").await;
    let call = {
        let agent = agent.clone();
        tokio::spawn(async move {
            agent
                .exchange(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                    "params": {"name": "delete_ticket", "arguments": {"id": "t1"}}}))
                .await
        })
    };
    let ask = rig.next_ask().await;
    assert!(matches!(ask.kind, AskKind::ToolCall { .. }));
    let (status, _, body) = agent
        .exchange(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 7, "reason": "changed my mind"}}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{body}");
    let (id, outcome) = rig.next_resolution().await;
    assert_eq!(id, ask.id);
    assert_eq!(
        outcome,
        Outcome::Cancelled {
            reason: CancelReason::Agent
        }
    );
    let (status, _, _) = tokio::time::timeout(WAIT, call)
        .await
        .expect("the cancelled call ends")
        .unwrap();
    assert_eq!(status, reqwest::StatusCode::OK);
    assert!(desk.store.contains("t1"), "nothing was deleted");
}

/// A session belongs to the server it was opened on and ends when the agent ends it: its id
/// on another server's path, or after DELETE, reaches nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_id_reaches_only_its_own_server_and_only_while_it_lasts() {
    let desk = desk().await;
    let mut trusted = upstream("desk", &desk, ProtocolChoice::Legacy);
    trusted.trusted = true;
    let mut other = upstream("other", &desk, ProtocolChoice::Legacy);
    other.trusted = true;
    let rig = rig("lane-scope", vec![trusted, other]).await;
    let mut agent = rig.raw_agent("desk", "scoped-agent").await;
    let delete = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "delete_ticket", "arguments": {"id": "t1"}}});
    let elsewhere = RawAgent {
        http: agent.http.clone(),
        url: rig.url("other"),
        token: agent.token.clone(),
        session: agent.session.clone(),
    };
    let (status, _, body) = elsewhere.exchange(delete.clone()).await;
    assert_eq!(status, reqwest::StatusCode::NOT_FOUND, "{body}");
    let ended = agent.end().await;
    assert!(ended.status().is_success());
    let (status, _, body) = agent.exchange(delete).await;
    assert_eq!(status, reqwest::StatusCode::NOT_FOUND, "{body}");
    assert!(desk.store.contains("t1"), "nothing was deleted");
    agent.session = None;
}

/// The gateway's own threads in this process (a test is a process of its own under nextest).
fn gateway_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        // The kernel keeps 15 bytes of a thread's name.
        .filter(|name| name.trim_end() == &"countersign-gateway"[..15])
        .count()
}

/// The gateway serves from a thread of its own, and shutting it down ends that thread once its
/// upstream sessions are closed.
#[tokio::test(flavor = "multi_thread")]
async fn the_gateway_runs_on_its_own_thread_until_it_shuts_down() {
    let desk = desk().await;
    let mut config = upstream("desk", &desk, ProtocolChoice::Legacy);
    config.trusted = true;
    let rig = rig("own-thread", vec![config]).await;
    // A thread takes its name once it runs, a moment after it was started.
    wait_for_gateway_threads(1).await;
    let agent = rig.agent("desk", "threaded-agent", false).await;
    let listed = call(&agent, "list_tickets", json!({})).await;
    assert_ne!(listed.is_error, Some(true));
    let _ = agent.cancel().await;
    rig.gateway.shutdown().await;
    wait_for_gateway_threads(0).await;
}

async fn wait_for_gateway_threads(count: usize) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while gateway_threads() != count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} gateway threads, not {count}",
            gateway_threads()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Another agent's token with this agent's session id reaches nothing: the call is refused
/// before the gate, on the lane and on rmcp's way alike, and the session's owner goes on.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_answers_only_the_agent_that_opened_it() {
    let desk = desk().await;
    let mut config = upstream("desk", &desk, ProtocolChoice::Legacy);
    config.trusted = true;
    let rig = rig("session-owner", vec![config]).await;
    let a = rig.gateway.create_agent("Agent A", "bridge").unwrap();
    let b = rig.gateway.create_agent("Agent B", "bridge").unwrap();
    let mut owner = rig.raw_agent_holding("desk", "agent-a", &a.token).await;
    let intruder = RawAgent {
        http: reqwest::Client::new(),
        url: rig.url("desk"),
        token: b.token.clone(),
        session: owner.session.clone(),
    };
    let delete = |id: u64, progress: bool| {
        let mut params = json!({"name": "delete_ticket", "arguments": {"id": "t1"}});
        if progress {
            params["_meta"] = json!({"progressToken": id});
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
    };
    // To the intruder the session is not there: the very answer a made-up id gets, so it does
    // not learn that the id it holds is someone's.
    let nobodys = RawAgent {
        session: Some("0123456789abcdef0123456789abcdef".into()),
        ..intruder.clone()
    };
    // The lane, answered in JSON and on a stream; rmcp's way is `tools/list` below.
    for (id, progress) in [(2, false), (3, true)] {
        let (status, _, body) = intruder.exchange(delete(id, progress)).await;
        assert!(body.contains("Session not found"), "{body}");
        assert_eq!((status, body), {
            let (status, _, body) = nobodys.exchange(delete(id, progress)).await;
            (status, body)
        });
    }
    let (_, _, body) = intruder
        .exchange(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}}))
        .await;
    assert!(body.contains("Session not found"), "{body}");
    // Nor the answers the session owes its server, its stream, or its end: rmcp's session
    // takes any answer on a session it is given, hands its stream to whoever asks while the
    // owner has none open, and ends a session on any DELETE that names it. Each was the
    // intruder's to do before.
    for message in [
        json!({"jsonrpc": "2.0", "id": 0, "result": {"roots": [{"uri": "file:///"}]}}),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}),
    ] {
        let (status, _, body) = intruder.exchange(message.clone()).await;
        assert_eq!(status, reqwest::StatusCode::NOT_FOUND, "{body}");
        let (_, _, made_up) = nobodys.exchange(message).await;
        assert_eq!(body, made_up);
    }
    let stream = intruder
        .http
        .get(&intruder.url)
        .header("authorization", format!("Bearer {}", intruder.token))
        .header("mcp-session-id", intruder.session.clone().unwrap())
        .header("mcp-protocol-version", "2025-11-25")
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), reqwest::StatusCode::NOT_FOUND);
    assert_eq!(
        intruder.end().await.status(),
        reqwest::StatusCode::NOT_FOUND
    );
    assert!(desk.store.contains("t1"), "nothing was deleted");
    assert!(rig.broker.pending().is_empty(), "nobody was asked");
    let listed = owner.post(5, "tools/list", json!({})).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    assert!(owner.end().await.status().is_success(), "the owner ends it");
}

/// A 2026-07-28 agent's self-contained `tools/call` (no session; the revision's headers and
/// `_meta` lifecycle keys), as its SDK sends it, with `params` added to the call's params and
/// `headers` over the SDK's own (a name given as empty removes that header).
fn sessionless_call(
    rig: &Rig,
    server: &str,
    id: Value,
    tool: &str,
    params: Value,
    headers: &[(&str, &str)],
) -> reqwest::RequestBuilder {
    let mut all = json!({"name": tool});
    for (key, value) in params.as_object().cloned().unwrap_or_default() {
        all[key] = value;
    }
    sessionless_request(
        rig,
        server,
        &id.to_string(),
        "tools/call",
        all,
        Some(tool),
        headers,
    )
}

/// The one JSON-RPC answer in a body: plain JSON, or the last `data:` line of an SSE answer.
fn the_answer(body: &str) -> Value {
    let json = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .rfind(|d| !d.trim().is_empty())
        .unwrap_or(body);
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// A 2026-07-28 agent's call, made without a session, is run by the gateway where it arrives
/// (the lane): answered in JSON under the agent's own id as it wrote it, with the fields rmcp
/// does not model reaching the upstream as sent and the call's progress token the gateway's
/// own upstream. A call whose headers contradict it, or whose `_meta` lacks a key the revision
/// requires, is refused as rmcp refuses it, before anything reaches the server.
#[tokio::test(flavor = "multi_thread")]
async fn a_2026_agents_self_contained_call_runs_as_sent_and_a_malformed_one_is_refused() {
    let mut raw = raw_server();
    raw.trusted = true; // `params` claims read-only: no approval in the way
    let rig = rig("sessionless", vec![raw]).await;
    let vendor = json!({"kept": true, "n": [1, 2.5, "x"]});
    let received = |answer: &Value| -> Value {
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"));
        serde_json::from_str(text).unwrap()
    };
    for (id, meta) in [
        (json!("x-1"), json!({})),
        (json!(2), json!({"progressToken": "mine"})),
    ] {
        let response = sessionless_call(
            &rig,
            "raw",
            id.clone(),
            "params",
            json!({"arguments": {"a": 1}, "x-vendor": vendor, "_meta": meta}),
            &[],
        )
        .send()
        .await
        .unwrap();
        assert_eq!(response.status(), reqwest::StatusCode::OK);
        assert!(
            response.headers().get("mcp-session-id").is_none(),
            "no session"
        );
        // Answered at once: in JSON, whether or not it asked for progress (none came).
        assert_eq!(
            response.headers()["content-type"],
            "application/json",
            "{meta}"
        );
        let answer = the_answer(&response.text().await.unwrap());
        assert_eq!(answer["id"], id, "{answer}");
        let got = received(&answer);
        assert_eq!(got["x-vendor"], vendor, "{got}");
        assert_eq!(got["arguments"], json!({"a": 1}), "{got}");
        assert_ne!(got["_meta"]["progressToken"], "mine", "{got}");
    }
    let seen = || rig.records().len();
    let before = seen();
    for (headers, meta, status, code) in [
        // The tool named in the header is not the one called.
        (
            vec![("mcp-name", "other")],
            json!({}),
            reqwest::StatusCode::BAD_REQUEST,
            -32020,
        ),
        // No method header, which the revision requires.
        (
            vec![("mcp-method", "")],
            json!({}),
            reqwest::StatusCode::BAD_REQUEST,
            -32020,
        ),
        // The body names a version the header does not.
        (
            vec![],
            json!({"io.modelcontextprotocol/protocolVersion": "2025-11-25"}),
            reqwest::StatusCode::BAD_REQUEST,
            -32020,
        ),
        // No client capabilities, which the revision requires.
        (
            vec![],
            json!({"io.modelcontextprotocol/clientCapabilities": null}),
            reqwest::StatusCode::BAD_REQUEST,
            -32602,
        ),
    ] {
        let response = sessionless_call(
            &rig,
            "raw",
            json!(9),
            "params",
            json!({"arguments": {}, "_meta": meta}),
            &headers,
        )
        .send()
        .await
        .unwrap();
        assert_eq!(response.status(), status, "{headers:?} {meta}");
        let answer = the_answer(&response.text().await.unwrap());
        assert_eq!(
            answer["error"]["code"], code,
            "{headers:?} {meta}: {answer}"
        );
    }
    assert_eq!(seen(), before, "nothing refused was forwarded");
    rig.gateway.shutdown().await;
}

/// A 2026-07-28 agent's self-contained request, as its SDK sends it: the revision's `_meta`
/// keys added to `params` (under those `params` gives in its own `_meta`), its headers (`Mcp-Name` where the request
/// names something) with `headers` over them (a name given as empty removes that header), and
/// `id` written into the body as given.
fn sessionless_request(
    rig: &Rig,
    server: &str,
    id: &str,
    method: &str,
    mut params: Value,
    name: Option<&str>,
    headers: &[(&str, &str)],
) -> reqwest::RequestBuilder {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "sessionless-agent", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}});
    for (key, value) in params["_meta"].as_object().cloned().unwrap_or_default() {
        meta[key] = value;
    }
    params["_meta"] = meta;
    let mut sent = BTreeMap::from([
        ("accept", "application/json, text/event-stream".to_owned()),
        ("content-type", "application/json".to_owned()),
        ("mcp-protocol-version", "2026-07-28".to_owned()),
        ("mcp-method", method.to_owned()),
    ]);
    if let Some(name) = name {
        sent.insert("mcp-name", name.to_owned());
    }
    for (header, value) in headers {
        sent.insert(header, value.to_string());
    }
    let mut request = reqwest::Client::new()
        .post(rig.url(server))
        .header("authorization", format!("Bearer {}", rig.gateway.token()));
    for (header, value) in sent.into_iter().filter(|(_, v)| !v.is_empty()) {
        request = request.header(header, value);
    }
    request.body(format!(
        r#"{{"jsonrpc": "2.0", "id": {id}, "method": "{method}", "params": {params}}}"#
    ))
}

/// A field beside the call's own that a server reading names without regard to case (Go's
/// `encoding/json`, as mcp-go servers do) would take for one of them is refused, recorded, and
/// never reaches the server: with `NAME` read last, the gate judged `params` (trusted and
/// read-only, so nobody was asked) and the server ran another tool; with `InputResponses`, the
/// agent answered the server's questions for the person. Both reached the server before.
/// So does what a Python SDK server reads as one of them: `input_responses`, `meta`.
#[tokio::test(flavor = "multi_thread")]
async fn a_field_a_lax_server_would_read_as_the_calls_own_is_refused_before_the_gate() {
    let mut raw = raw_server();
    raw.trusted = true; // `params` claims read-only: no approval in the way
    let dir = scratch("lax-keys");
    let rig = rig_in(dir.clone(), vec![raw]).await;
    let (mut agent, _) = RawAgent::open(rig.url("raw"), rig.gateway.token(), "raw-agent").await;
    for (n, (key, value)) in [
        ("NAME", json!("delete_everything")),
        ("Arguments", json!({"path": "/"})),
        ("InputResponses", json!({"q": {"action": "accept"}})),
        ("taſk", json!({"ttl": 1})),
        // The Python SDK's models take a field's Python name beside its alias
        // (`populate_by_name`): `input_responses` is `inputResponses` there, `meta` is `_meta`.
        ("input_responses", json!({"q": {"action": "accept"}})),
        ("Request_State", json!("s")),
        ("meta", json!({"progressToken": 1})),
    ]
    .into_iter()
    .enumerate()
    {
        let mut params = json!({"name": "params", "arguments": {"a": 1}});
        params[key] = value;
        let answer = agent.post(2 + n as u64, "tools/call", params).await;
        let message = answer["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"));
        assert!(message.contains(&format!("`{key}`")), "{answer}");
        assert!(answer.get("result").is_none(), "nothing ran: {answer}");
    }
    // A field of its own name stays the agent's to send.
    let answer = agent
        .post(
            19,
            "tools/call",
            json!({"name": "params", "arguments": {}, "names": "x"}),
        )
        .await;
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("\"names\"")),
        "{answer}"
    );
    assert!(rig.broker.pending().is_empty(), "nobody was asked");
    let log = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    assert!(log.contains("\"field\":\"NAME\""), "recorded: {log}");
    rig.gateway.shutdown().await;
}

/// A session-less agent names itself in each request (`clientInfo`), and the gateway keeps an
/// upstream session per name it meets. A name whose upstream could not be reached leaves no
/// place behind: an agent could otherwise grow the gateway's memory with a new name per
/// request, as every request does once a server is at its cap of upstream sessions (a place
/// was kept for each before).
#[tokio::test(flavor = "multi_thread")]
async fn a_session_less_agent_that_cannot_reach_its_server_leaves_no_place_in_the_pool_and_no_key()
{
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    // With its key in the address, as many services have it: an agent told why the server
    // cannot be reached is not told the key (reqwest's errors name the URL).
    let url = format!("http://{}/mcp?api_key=SEKRIT", closed.local_addr().unwrap());
    drop(closed);
    let mut gone = common::with_test_timeouts(ServerConfig::http("gone", &url));
    gone.protocol = ProtocolChoice::Legacy;
    gone.trusted = true;
    let rig = rig("pool-failed", vec![gone]).await;
    for n in 0..20 {
        let meta = json!({"io.modelcontextprotocol/clientInfo": {"name": "agent", "version": format!("{n}")}});
        let response =
            sessionless_call(&rig, "gone", json!(n), "echo", json!({"_meta": meta}), &[])
                .send()
                .await
                .unwrap();
        let answer = the_answer(&response.text().await.unwrap());
        assert!(
            answer["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("cannot reach") && !m.contains("SEKRIT")),
            "{answer}"
        );
    }
    assert_eq!(rig.gateway.pooled_upstreams().await, 0);
    rig.gateway.shutdown().await;
}

/// A 2026-07-28 agent's other requests, made without a session, run where they arrive too:
/// each is answered in JSON with the server's result as sent (its vendor fields) under the
/// agent's id as the agent wrote it (rmcp's answer writes back its own reading of the id).
/// One whose headers contradict it is refused as rmcp refuses it, before anything reaches the
/// server; one whose resource is named in SEP-2243's Base64 wrapping is rmcp's to read, and
/// answered as faithfully.
#[tokio::test(flavor = "multi_thread")]
async fn a_2026_agents_other_requests_run_as_sent_and_a_malformed_one_is_refused() {
    let mut raw = raw_server();
    raw.trusted = true; // reads: no approval in the way
    let rig = rig("sessionless-other", vec![raw]).await;
    let vendor = json!({"kept": true, "n": 7});
    for (method, params, name, pointer) in [
        ("tools/list", json!({}), None, "/result/tools/0/x-vendor"),
        (
            "resources/list",
            json!({}),
            None,
            "/result/resources/0/x-vendor",
        ),
        (
            "resources/read",
            json!({"uri": "raw://a"}),
            Some("raw://a"),
            "/result/contents/0/x-vendor",
        ),
        (
            "prompts/list",
            json!({}),
            None,
            "/result/prompts/0/x-vendor",
        ),
        (
            "prompts/get",
            json!({"name": "p"}),
            Some("p"),
            "/result/x-vendor",
        ),
    ] {
        let id = format!(r#""x\u0041-{method}""#);
        let response = sessionless_request(&rig, "raw", &id, method, params, name, &[])
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), reqwest::StatusCode::OK, "{method}");
        assert!(
            response.headers().get("mcp-session-id").is_none(),
            "{method}: no session"
        );
        assert_eq!(
            response.headers()["content-type"],
            "application/json",
            "{method}"
        );
        let body = response.text().await.unwrap();
        assert!(
            body.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{id},"#)),
            "{method}: the id as the agent wrote it: {body}"
        );
        let answer: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(answer.pointer(pointer), Some(&vendor), "{method}: {body}");
        if method.ends_with("/list") {
            // Shaped for the agent's revision, which has every list say how long it keeps.
            assert_eq!(answer["result"]["ttlMs"], 0, "{method}: {body}");
        }
    }
    // The revision has no `ping`: refused as rmcp refuses it.
    let response = sessionless_request(&rig, "raw", "7", "ping", json!({}), None, &[])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::NOT_FOUND);
    let answer = the_answer(&response.text().await.unwrap());
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    // The resource's name wrapped in Base64, as an SDK wraps one that cannot travel bare:
    // read as rmcp reads it, on the lane all the same.
    let wrapped = sessionless_request(
        &rig,
        "raw",
        r#""\u0038""#,
        "resources/read",
        json!({"uri": "raw://a"}),
        Some("=?base64?cmF3Oi8vYQ==?="),
        &[],
    )
    .send()
    .await
    .unwrap();
    assert_eq!(wrapped.status(), reqwest::StatusCode::OK);
    let body = wrapped.text().await.unwrap();
    assert!(
        body.starts_with(r#"{"jsonrpc":"2.0","id":"\u0038","#),
        "{body}"
    );
    let answer = the_answer(&body);
    assert_eq!(
        answer.pointer("/result/contents/0/x-vendor"),
        Some(&vendor),
        "{answer}"
    );

    let seen = || rig.records().len();
    let before = seen();
    for (method, params, name, headers) in [
        // The prompt named in the header is not the one asked for, bare or wrapped.
        ("prompts/get", json!({"name": "p"}), Some("q"), vec![]),
        (
            "prompts/get",
            json!({"name": "p"}),
            Some("=?base64?cQ==?="),
            vec![],
        ),
        // The resource read is not named at all.
        ("resources/read", json!({"uri": "raw://a"}), None, vec![]),
        // The method header names another method.
        (
            "resources/list",
            json!({}),
            None,
            vec![("mcp-method", "tools/list")],
        ),
        // No method header, which the revision requires.
        ("tools/list", json!({}), None, vec![("mcp-method", "")]),
    ] {
        let response = sessionless_request(&rig, "raw", "9", method, params, name, &headers)
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            reqwest::StatusCode::BAD_REQUEST,
            "{method} {headers:?}"
        );
        let answer = the_answer(&response.text().await.unwrap());
        assert_eq!(answer["error"]["code"], -32020, "{method}: {answer}");
    }
    assert_eq!(seen(), before, "nothing refused was forwarded");
    rig.gateway.shutdown().await;
}

/// A 2026-07-28 agent cancels a call by going away (its connection closes; the revision has
/// no session to send a cancellation on): the approval open for its call is withdrawn as the
/// agent's, and nothing is deleted.
#[tokio::test(flavor = "multi_thread")]
async fn a_2026_agent_that_goes_away_cancels_its_call_and_its_open_approval() {
    let desk = desk().await;
    let mut rig = rig(
        "sessionless-gone",
        vec![upstream("desk", &desk, ProtocolChoice::Auto)],
    )
    .await;
    let call = sessionless_call(
        &rig,
        "desk",
        json!(1),
        "delete_ticket",
        json!({"arguments": {"id": "t1"}}),
        &[],
    )
    .send();
    let calling = tokio::spawn(call);
    let ask = rig.next_ask().await;
    assert!(
        matches!(ask.kind, AskKind::ToolCall { .. }),
        "{:?}",
        ask.kind
    );
    assert_eq!(ask.asker.declared.as_deref(), Some("sessionless-agent"));
    calling.abort();
    let _ = calling.await;
    let (id, outcome) = rig.next_resolution().await;
    assert_eq!(id, ask.id);
    assert_eq!(
        outcome,
        Outcome::Cancelled {
            reason: CancelReason::Agent
        }
    );
    assert!(desk.store.contains("t1"));
    rig.gateway.shutdown().await;
}

/// A front for `to` that counts the TCP connections made through it.
async fn counting_front(
    to: SocketAddr,
) -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counted = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(to).await {
                    let _ = inbound.set_nodelay(true);
                    let _ = outbound.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    (addr, accepted)
}

/// The demo desk over HTTP, but answering a POSTed answer to its question with a short stream
/// (a comment, then its end a moment later) instead of 202 Accepted, as some servers do.
async fn desk_answering_answers_with_a_stream() -> (SocketAddr, tokio_util::sync::CancellationToken)
{
    use axum::body::{Body, Bytes};
    use futures::StreamExt;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    async fn with_a_stream(
        request: axum::extract::Request,
        next: axum::middleware::Next,
    ) -> axum::response::Response {
        let (parts, body) = request.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX)
            .await
            .unwrap_or_default();
        let answer = serde_json::from_slice::<Value>(&bytes)
            .is_ok_and(|m| m.get("method").is_none() && m.get("id").is_some());
        let response = next
            .run(axum::extract::Request::from_parts(parts, Body::from(bytes)))
            .await;
        if !answer || response.status() != axum::http::StatusCode::ACCEPTED {
            return response;
        }
        let end_later = futures::stream::once(async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Err::<Bytes, std::io::Error>(std::io::ErrorKind::UnexpectedEof.into())
        })
        .filter(|_| std::future::ready(false));
        let events =
            futures::stream::iter([Ok(Bytes::from_static(b": taken\n\n"))]).chain(end_later);
        axum::response::Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from_stream(events))
            .unwrap()
    }
    let stop = tokio_util::sync::CancellationToken::new();
    let store = TicketStore::seeded();
    let service: StreamableHttpService<countersign_demo_server::TicketDesk, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(countersign_demo_server::TicketDesk::new(store.clone())),
            Default::default(),
            StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token()),
        );
    let router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(with_a_stream));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let until = stop.clone();
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(until.cancelled_owned())
            .await
    });
    (addr, stop)
}

/// The gateway's answers to an upstream's questions keep their connection too, when the server
/// answers such a POST with a stream rather than 202 Accepted: the stream is read to its end
/// (`mcp::http_post::read_to_end`), not dropped with the connection under it.
#[tokio::test(flavor = "multi_thread")]
async fn answers_to_an_http_servers_questions_keep_the_gateways_connection() {
    const CALLS: usize = 10;
    let (desk, stop) = desk_answering_answers_with_a_stream().await;
    let (front, accepted) = counting_front(desk).await;
    let mut config = ServerConfig::http("desk", &format!("http://{front}/mcp"));
    // On 2025-11-25 the desk's question comes as a request on the call's stream, and the
    // person's answer goes back as a POST of its own.
    config.protocol = ProtocolChoice::Legacy;
    config.tool_policy = BTreeMap::from([("delete_ticket".to_owned(), ToolRule::Allow)]);
    let mut rig = rig("keep-connection-answers", vec![config]).await;
    let agent = rig.agent("desk", "answering-agent", false).await;
    let mut opened = 0;
    for n in 0..=CALLS {
        // Declined, so the ticket stays for the next call.
        let deleting = spawn_call(&agent, "delete_ticket", json!({"id": "t1"}));
        let question = rig.next_ask().await;
        rig.broker.answer(question.id, Answer::Decline).unwrap();
        let result = tokio::time::timeout(WAIT, deleting)
            .await
            .expect("in time")
            .unwrap()
            .expect("delete_ticket answered");
        assert!(text(&result).contains("you declined"), "{}", text(&result));
        if n == 0 {
            // The first call opens what the rest reuse: one connection for the call's stream,
            // one for the answer beside it.
            tokio::time::sleep(Duration::from_millis(200)).await;
            opened = accepted.load(std::sync::atomic::Ordering::SeqCst);
        }
    }
    let more = accepted.load(std::sync::atomic::Ordering::SeqCst) - opened;
    // (With the stream dropped unread: 10 new connections for 10 answers.)
    assert!(
        more <= 1,
        "{more} new connections to the server for {CALLS} answers"
    );
    let _ = agent.cancel().await;
    rig.gateway.shutdown().await;
    stop.cancel();
}

/// A server that answers each call on a stream of its own (as rmcp's does by default) ends the
/// stream right after the answer: the gateway reads it to that end, so the connection goes
/// back to its pool and the next call takes it, instead of a TCP handshake for each call (seen:
/// a new connection for a quarter of the calls one at a time, most of them with 16 agents).
#[tokio::test(flavor = "multi_thread")]
async fn calls_to_an_http_server_keep_the_gateways_connection() {
    const CALLS: usize = 100;
    let desk = desk().await;
    let (front, accepted) = counting_front(desk.server.local_addr()).await;
    let mut config = ServerConfig::http("desk", &format!("http://{front}/mcp"));
    for protocol in [ProtocolChoice::Legacy, ProtocolChoice::Auto] {
        config.protocol = protocol;
        config.tool_policy = BTreeMap::from([("list_tickets".to_owned(), ToolRule::Allow)]);
        let rig = rig("keep-connection", vec![config.clone()]).await;
        let agent = rig.agent("desk", "steady-agent", false).await;
        call(&agent, "list_tickets", json!({})).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let opened = accepted.load(std::sync::atomic::Ordering::SeqCst);
        for _ in 0..CALLS {
            let listed = call(&agent, "list_tickets", json!({})).await;
            assert_ne!(listed.is_error, Some(true), "{}", text(&listed));
        }
        let more = accepted.load(std::sync::atomic::Ordering::SeqCst) - opened;
        // (Without the reading to the end: 2 to 5 in 40 calls here, through the front.)
        assert!(
            more <= 1,
            "{protocol:?}: {more} new connections to the server for {CALLS} calls"
        );
        let _ = agent.cancel().await;
        rig.gateway.shutdown().await;
    }
}

/// The tool calls the hostile server received, by their `path` argument (`log`).
fn paths_received(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["method"] == "tools/call")
        .filter_map(|m| m["params"]["arguments"]["path"].as_str().map(str::to_owned))
        .collect()
}

/// Gives the gateway a moment to keep the person's answer to a pending call (it is kept in the
/// background), for a retry decided without asking, which does not wait for one.
async fn answer_kept() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// A call goes pending; the person allows another call of the tool for ten minutes, any
/// arguments; then denies the pending call. The retry is refused, and the server never sees
/// it: the denial is the person's latest word on that call. (It was used up unseen by the
/// earlier allow, and the call ran.)
#[tokio::test(flavor = "multi_thread")]
async fn a_pending_denial_given_after_a_remembered_allow_refuses_the_retry() {
    let dir = scratch("pending-deny-after-allow-log");
    let log = dir.join("hostile.log");
    let mut files = hostile_server("files", Some(&log));
    files.approval_wait = Duration::from_millis(300);
    let mut rig = rig("pending-deny-after-allow", vec![files]).await;
    let clock = test_clock(&rig);
    let agent = rig.agent("files", "patient-agent", false).await;
    let pending = left_pending(&mut rig, &agent, json!({"path": "/p/a"})).await;
    let other = spawn_call(&agent, "read_file", json!({"path": "/p/b"}));
    let ask = rig.next_ask().await;
    let later = now_ms() + 600_000;
    rig.broker
        .answer(
            ask.id,
            remember(
                true,
                Lasting::Until { until_ms: later },
                Covering::AnyArguments { also_sent: None },
            ),
        )
        .unwrap();
    assert_eq!(
        text(&other.await.unwrap().unwrap()),
        r#"read_file {"path":"/p/b"}"#
    );
    clock.fetch_add(1_000, std::sync::atomic::Ordering::Relaxed);
    rig.broker.answer(pending.id, Answer::Decline).unwrap();
    answer_kept().await;
    let retried = call(&agent, "read_file", json!({"path": "/p/a"})).await;
    assert_eq!(retried.is_error, Some(true), "{}", text(&retried));
    assert!(
        text(&retried).contains("denied") && text(&retried).contains("pending approval p-"),
        "{}",
        text(&retried)
    );
    assert_eq!(paths_received(&log), ["/p/b"]);
    // Used once: the call after that runs by the remembered allow.
    let again = call(&agent, "read_file", json!({"path": "/p/a"})).await;
    assert_eq!(text(&again), r#"read_file {"path":"/p/a"}"#);
    assert!(rig.broker.pending().is_empty());
    rig.gateway.shutdown().await;
}

/// The other way round: the person denies a pending call, then allows the tool for ten
/// minutes, any arguments: the later decision wins, and the retry runs.
#[tokio::test(flavor = "multi_thread")]
async fn an_allow_remembered_after_a_pending_denial_runs_the_retry() {
    let mut files = hostile_server("files", None);
    files.approval_wait = Duration::from_millis(300);
    let mut rig = rig("pending-allow-after-deny", vec![files]).await;
    let clock = test_clock(&rig);
    let agent = rig.agent("files", "patient-agent", false).await;
    let pending = left_pending(&mut rig, &agent, json!({"path": "/p/a"})).await;
    rig.broker.answer(pending.id, Answer::Decline).unwrap();
    answer_kept().await;
    clock.fetch_add(1_000, std::sync::atomic::Ordering::Relaxed);
    let other = spawn_call(&agent, "read_file", json!({"path": "/p/b"}));
    let ask = rig.next_ask().await;
    let later = now_ms() + 600_000;
    rig.broker
        .answer(
            ask.id,
            remember(
                true,
                Lasting::Until { until_ms: later },
                Covering::AnyArguments { also_sent: None },
            ),
        )
        .unwrap();
    let _ = other.await;
    let retried = call(&agent, "read_file", json!({"path": "/p/a"})).await;
    assert_eq!(text(&retried), r#"read_file {"path":"/p/a"}"#);
    rig.gateway.shutdown().await;
}

/// "Deny, for this session", chosen on a call that had gone pending: the session's next call
/// of the tool is refused at once, nobody asked. (It was kept for no session, and so decided
/// nothing, while Settings listed it.)
#[tokio::test(flavor = "multi_thread")]
async fn a_pending_call_denied_for_this_session_refuses_the_sessions_next_calls() {
    let mut files = hostile_server("files", None);
    files.approval_wait = Duration::from_millis(300);
    let mut rig = rig("pending-session-deny", vec![files]).await;
    let agent = rig.agent("files", "patient-agent", false).await;
    let pending = left_pending(&mut rig, &agent, json!({"path": "/p/a"})).await;
    rig.broker
        .answer(
            pending.id,
            remember(
                false,
                Lasting::Session,
                Covering::AnyArguments { also_sent: None },
            ),
        )
        .unwrap();
    answer_kept().await;
    let next = tokio::time::timeout(
        Duration::from_secs(5),
        call(&agent, "read_file", json!({"path": "/p/b"})),
    )
    .await
    .expect("answered at once");
    assert_eq!(next.is_error, Some(true), "{}", text(&next));
    assert!(text(&next).contains("denied"), "{}", text(&next));
    assert!(rig.broker.pending().is_empty(), "nobody is asked");
    let listed = rig.settings.get().remembered;
    assert!(
        listed
            .iter()
            .any(|d| d.lasting == Lasting::Session && d.session.is_some()),
        "{listed:?}"
    );
    // The session ends: so does the decision.
    agent.cancel().await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !rig.settings.get().remembered.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "outlived its session"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rig.gateway.shutdown().await;
}

/// A pending call whose session has already ended is asked again with no session to offer:
/// "for this session" is refused (it would decide nothing, yet be listed in Settings), and the
/// person's answer goes to the retry.
#[tokio::test(flavor = "multi_thread")]
async fn a_pending_call_answered_for_a_session_already_ended_remembers_nothing() {
    let mut files = hostile_server("files", None);
    files.approval_wait = Duration::from_millis(300);
    let mut rig = rig("pending-session-gone", vec![files]).await;
    let agent = rig.agent("files", "patient-agent", false).await;
    let pending = left_pending(&mut rig, &agent, json!({"path": "/p/a"})).await;
    // The session ends: the question outlives it, asked again apart from any session.
    agent.cancel().await.unwrap();
    let again = tokio::time::timeout(WAIT, rig.next_ask())
        .await
        .expect("asked again");
    assert_ne!(again.id, pending.id);
    assert!(matches!(
        again.kind,
        AskKind::ToolCall {
            sessionless: true,
            ..
        }
    ));
    assert!(matches!(
        rig.broker.answer(
            again.id,
            remember(
                true,
                Lasting::Session,
                Covering::AnyArguments { also_sent: None }
            ),
        ),
        Err(countersign_core::ask::AnswerError::Malformed { .. })
    ));
    rig.broker
        .answer(again.id, Answer::Accept { content: None })
        .unwrap();
    answer_kept().await;
    assert!(
        rig.settings.get().remembered.is_empty(),
        "{:?}",
        rig.settings.get().remembered
    );
    // The retry, in a new session, runs on the answer.
    let agent = rig.agent("files", "patient-agent", false).await;
    let retried = call(&agent, "read_file", json!({"path": "/p/a"})).await;
    assert_eq!(text(&retried), r#"read_file {"path":"/p/a"}"#);
    rig.gateway.shutdown().await;
}
