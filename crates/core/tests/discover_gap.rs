//! A server that speaks `server/discover` but lands on 2025-11-25 asks the old way
//! (`elicitation/create`) and withdraws with `notifications/cancelled`. rmcp 3.11 drops those
//! cancellations on discover-negotiated sessions (its `ctx.ct` never fires). Countersign's
//! transport tap must still withdraw the ask. The second test pins rmcp's gap, so the day rmcp
//! fixes it this file says so.

use std::time::Duration;

use countersign_core::mcp::handler::{Elicitor, Handler, client_config};
use countersign_core::mcp::raw::{RawRequests, TapRead};
use countersign_core::mcp::tap::{Tap, Tapped};
use countersign_core::{AskEvent, Asker, AuditLog, Broker, CancelReason, Endpoint, Outcome};
use countersign_demo_server::{TicketDesk, TicketStore, replies};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);

struct Setup {
    broker: Broker,
    client: rmcp::service::RunningService<rmcp::RoleClient, Handler>,
}

/// The demo desk in-process, reached with `server/discover` preferring 2025-11-25.
async fn discover_legacy_session(test: &str, with_tap: bool) -> Setup {
    let audit = std::env::temp_dir().join(format!("cs-gap-{test}-{}.jsonl", std::process::id()));
    let broker = Broker::new(AuditLog::open(&audit).unwrap());
    let (server_io, client_io) = tokio::io::duplex(256 * 1024);
    tokio::spawn(async move {
        if let Ok(server) = TicketDesk::new(TicketStore::seeded())
            .serve(server_io)
            .await
        {
            let _ = server.waiting().await;
        }
    });
    let (read, write) = tokio::io::split(client_io);
    let raw = RawRequests::new();
    let tap = Tap::new(broker.clone());
    let handler = Handler {
        elicitor: Elicitor {
            broker: broker.clone(),
            asker: Asker {
                server: "desk".into(),
                endpoint: Endpoint::Stdio {
                    command: "in-process".into(),
                },
                agent: None,
                declared: None,
                agent_id: None,
            },
            answer_timeout: Duration::from_secs(60),
            session: 1,
        },
        tap: tap.clone(),
        raw: raw.clone(),
        config: client_config(ProtocolVersion::V_2025_11_25),
    };
    let io = AsyncRwTransport::new_client(TapRead::new(read, raw), write);
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2025_11_25],
    };
    let client = if with_tap {
        serve_client_with_lifecycle(handler, Tapped { inner: io, tap }, lifecycle).await
    } else {
        serve_client_with_lifecycle(handler, io, lifecycle).await
    }
    .expect("discover handshake");
    let version = client
        .peer()
        .peer_info()
        .map(|i| i.protocol_version.clone());
    assert_eq!(version, Some(ProtocolVersion::V_2025_11_25));
    Setup { broker, client }
}

fn slow_question() -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new("slow_question");
    params.arguments = json!({"timeout_ms": 300}).as_object().cloned();
    params
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tap_withdraws_the_ask_on_a_discover_negotiated_legacy_session() {
    let setup = discover_legacy_session("tap", true).await;
    let mut events = setup.broker.subscribe();
    let peer = setup.client.peer().clone();
    let call = tokio::spawn(async move { peer.call_tool(slow_question()).await });
    let id = match tokio::time::timeout(WAIT, events.recv()).await {
        Ok(Ok(AskEvent::Added { ask })) => ask.id,
        other => panic!("no ask: {other:?}"),
    };
    match tokio::time::timeout(WAIT, events.recv()).await {
        Ok(Ok(AskEvent::Resolved {
            id: resolved,
            outcome,
        })) => {
            assert_eq!(resolved, id);
            assert_eq!(
                outcome,
                Outcome::Cancelled {
                    reason: CancelReason::Server
                }
            );
        }
        other => panic!("the ask was not withdrawn: {other:?}"),
    }
    let result = tokio::time::timeout(WAIT, call)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let text = serde_json::to_value(&result.content).unwrap()[0]["text"].clone();
    assert_eq!(text, json!(replies::TIMED_OUT));
    assert!(setup.broker.pending().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn rmcp_alone_does_not_see_the_cancellation() {
    let setup = discover_legacy_session("no-tap", false).await;
    let mut events = setup.broker.subscribe();
    let peer = setup.client.peer().clone();
    let _call = tokio::spawn(async move { peer.call_tool(slow_question()).await });
    assert!(matches!(
        tokio::time::timeout(WAIT, events.recv()).await,
        Ok(Ok(AskEvent::Added { .. }))
    ));
    // The server gave up after 300 ms and said so; without the tap nothing notices.
    let resolved = tokio::time::timeout(Duration::from_millis(1500), events.recv()).await;
    assert!(
        resolved.is_err(),
        "rmcp now delivers cancellations on discover-negotiated legacy sessions ({resolved:?}); \
         the tap in handler.rs may no longer be needed for them"
    );
    assert_eq!(setup.broker.pending().len(), 1);
    setup.broker.shutdown();
}
