//! A scripted MCP client for driving the desk in tests: it answers every
//! elicitation the way the test says, records what it was asked, and notes
//! when the server withdraws a question (`ctx.ct` cancelled).

#![allow(dead_code)]

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use countersign_demo_server::{TicketDesk, TicketStore};
use rmcp::{
    ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
        ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
        FormElicitationCapability, Implementation, JsonObject, ProtocolVersion,
        UrlElicitationCapability,
    },
    service::{RequestContext, RunningService},
};
use serde_json::Value;
use tokio::sync::watch;

/// How the scripted person answers.
#[derive(Clone, Debug)]
pub enum Reply {
    Accept(Value),
    /// Accept with no content at all.
    AcceptEmpty,
    Decline,
    Cancel,
    /// Answer with a JSON-RPC error instead of a result.
    Error,
    /// Do not answer until the server cancels the question (or 10 s pass),
    /// then answer accept with this content anyway: a late answer.
    AfterCancel(Value),
}

#[derive(Clone)]
pub struct ScriptedClient {
    reply: Arc<Mutex<Reply>>,
    asked: Arc<Mutex<Vec<Value>>>,
    cancelled: watch::Sender<u32>,
}

impl ScriptedClient {
    pub fn new(reply: Reply) -> Self {
        Self {
            reply: Arc::new(Mutex::new(reply)),
            asked: Arc::default(),
            cancelled: watch::channel(0).0,
        }
    }

    pub fn set_reply(&self, reply: Reply) {
        *self.reply.lock().unwrap_or_else(PoisonError::into_inner) = reply;
    }

    /// Every elicitation request received so far, as JSON params.
    pub fn asked(&self) -> Vec<Value> {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits until the server has cancelled `n` questions; false on timeout.
    pub async fn wait_cancelled(&self, n: u32, within: Duration) -> bool {
        let mut rx = self.cancelled.subscribe();
        tokio::time::timeout(within, rx.wait_for(|count| *count >= n))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    pub fn cancellations(&self) -> u32 {
        *self.cancelled.borrow()
    }
}

impl ClientHandler for ScriptedClient {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(
            ElicitationCapability::new()
                .with_form(FormElicitationCapability::default())
                .with_url(UrlElicitationCapability::new()),
        );
        ClientConfig::new(
            capabilities,
            Implementation::new("scripted-test-client", "0.0.0"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let params = serde_json::to_value(&request).unwrap_or(Value::Null);
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(params);
        let reply = self
            .reply
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match reply {
            Reply::Accept(content) => {
                Ok(ElicitResult::new(ElicitationAction::Accept).with_content(content))
            }
            Reply::AcceptEmpty => Ok(ElicitResult::new(ElicitationAction::Accept)),
            Reply::Decline => Ok(ElicitResult::new(ElicitationAction::Decline)),
            Reply::Cancel => Ok(ElicitResult::new(ElicitationAction::Cancel)),
            Reply::Error => Err(ErrorData::internal_error("scripted failure", None)),
            Reply::AfterCancel(content) => {
                let cancelled = tokio::select! {
                    () = context.ct.cancelled() => true,
                    () = tokio::time::sleep(Duration::from_secs(10)) => false,
                };
                if cancelled {
                    self.cancelled.send_modify(|count| *count += 1);
                }
                Ok(ElicitResult::new(ElicitationAction::Accept).with_content(content))
            }
        }
    }
}

pub type Client = RunningService<RoleClient, ScriptedClient>;

/// A desk on `store` and a client connected to it over an in-memory pipe with
/// the legacy `initialize` handshake (protocol 2025-11-25).
pub async fn connect_legacy(store: &TicketStore, client: ScriptedClient) -> Client {
    let (server_io, client_io) = tokio::io::duplex(256 * 1024);
    spawn_desk(TicketDesk::new(store.clone()), server_io);
    client
        .serve(client_io)
        .await
        .expect("legacy client connects")
}

/// Same, but through `server/discover` on protocol 2026-07-28, where the desk
/// must ask with MRTR rounds.
pub async fn connect_mrtr(store: &TicketStore, client: ScriptedClient) -> Client {
    let (server_io, client_io) = tokio::io::duplex(256 * 1024);
    spawn_desk(TicketDesk::new(store.clone()), server_io);
    client
        .serve_with_lifecycle(
            client_io,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover client connects")
}

fn spawn_desk(desk: TicketDesk, io: tokio::io::DuplexStream) {
    tokio::spawn(async move {
        if let Ok(running) = desk.serve(io).await {
            let _ = running.waiting().await;
        }
    });
}

pub fn args(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("arguments must be an object, got {other}"),
    }
}

pub fn call(name: &'static str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name).with_arguments(args(arguments))
}

/// The first text block of a tool result.
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

pub fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}
