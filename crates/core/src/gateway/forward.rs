//! Forwarding: each agent session gets its own upstream session, and what passes between them
//! is the servers' own words.
//!
//! Results are taken raw off the upstream wire (`RawRequests::with_results`) and handed to the
//! agent as they were, so fields rmcp cannot model survive; only the shape the agent's protocol
//! revision needs is adjusted (`shape_result`). Progress, logging and list-changed
//! notifications are relayed; an agent's cancellation cancels the upstream request and
//! withdraws the questions asked during it. Questions from the server (legacy
//! `elicitation/create` or multi round-trip input) go to the desktop, never to the agent, and
//! `tools/call` passes the approval gate first.
//!
//! Agents that keep a session (2025-11-25 and older) get one [`Forwarder`] per session from
//! rmcp, which holds that session's upstream. 2026-07-28 agents have no sessions: each request
//! gets a fresh `Forwarder`, so their upstreams are pooled by the agent's name and version and
//! closed when idle.
#![allow(deprecated)] // logging/setLevel and resources/subscribe are forwarded for legacy agents.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult,
    CancelledNotificationParam, ClientRequest, CompleteRequest, CompleteRequestParams,
    CompleteResult, ContentBlock, DiscoverResult, ErrorCode, GetMeta, GetPromptRequest,
    GetPromptRequestParams, GetPromptResponse, Implementation, InitializeRequestParams,
    InitializeResult, ListPromptsRequest, ListPromptsResult, ListResourceTemplatesRequest,
    ListResourceTemplatesResult, ListResourcesRequest, ListResourcesResult, ListToolsRequest,
    ListToolsResult, PaginatedRequestParams, ProgressToken, ProtocolVersion, ReadResourceRequest,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerNotification,
    ServerPeerInfo, ServerResult, SetLevelRequest, SetLevelRequestParams, SubscribeRequest,
    SubscribeRequestParams, Tool, UnsubscribeRequest, UnsubscribeRequestParams,
};
use rmcp::service::{
    Peer, PeerRequestOptions, RequestContext, RoleClient, RoleServer, RunningService,
};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::faithful::shape_result;

/// rmcp's name for what a server says about itself in the handshake.
type ServerConfig_ = rmcp::model::ServerConfig;
use super::pending::{self, PendingApproval};
use super::policy::{self, Decision};
use crate::approval::{self, Lasting, RememberedDecision};
use crate::ask::{AskKind, CancelReason, Outcome};
use crate::broker::NewAsk;
use crate::config::ServerConfig;
use crate::handler::{Elicitor, Handler, Relay, Tap, client_config};
use crate::raw::RawRequests;
use crate::session::{ConnectError, answer_input_request, asker_for, lifecycle_for, open_client};

/// A pooled upstream of a 2026-07-28 agent unused this long is closed.
const IDLE: Duration = Duration::from_secs(10 * 60);
/// Rounds of multi round-trip input one forwarded call may take.
const MAX_INPUT_ROUNDS: usize = 10;
/// Upstream sessions (for stdio servers, child processes) open at once per server, across
/// agents: each agent session gets its own, so without a cap one agent holding the token
/// could start processes without end.
pub(crate) const MAX_UPSTREAMS_PER_SERVER: usize = 32;
/// What an agent is called when it gives no `clientInfo`.
const UNNAMED_AGENT: &str = "an unnamed agent";

/// (server, the agent's token id, the name and version it gives itself).
type PoolKey = (String, String, String, String);

/// Upstreams of session-less (2026-07-28) agents, by server, token and agent name and version:
/// two agents never share one, whatever they call themselves.
#[derive(Default)]
pub(crate) struct Pool {
    entries: tokio::sync::Mutex<HashMap<PoolKey, Arc<tokio::sync::OnceCell<Arc<Upstream>>>>>,
    /// The last upstream `initialize`/`discover` answer per server, for `get_info` before a
    /// session-less agent's first request has reached the server.
    last_info: RwLock<HashMap<String, ServerConfig_>>,
}

impl Pool {
    pub(crate) async fn clear(&self) {
        let entries: Vec<_> = self.entries.lock().await.drain().collect();
        for (_, cell) in entries {
            if let Some(up) = cell.get() {
                up.close();
            }
        }
    }
}

/// Closes pooled upstreams that have been idle for [`IDLE`], until the gateway stops.
pub(crate) async fn reap_idle(shared: Arc<Shared>) {
    loop {
        tokio::select! {
            _ = shared.stop.cancelled() => return,
            _ = tokio::time::sleep(IDLE / 4) => {}
        }
        let now = crate::broker::unix_ms();
        let mut entries = shared.pool.entries.lock().await;
        entries.retain(|_, cell| match cell.get() {
            Some(up)
                if up.is_closed()
                    || now.saturating_sub(up.last_used()) > IDLE.as_millis() as u64 =>
            {
                up.close();
                false
            }
            _ => true,
        });
    }
}

/// One upstream session, owned by one agent session (or one pooled session-less agent).
pub(crate) struct Upstream {
    server: ServerConfig,
    service: RunningService<RoleClient, Handler>,
    /// The upstream's results as they were on the wire.
    raw: Arc<RawRequests>,
    elicitor: Elicitor,
    relay: Arc<AgentRelay>,
    closed: CancellationToken,
    session: u64,
    last_used: AtomicU64,
    /// The tools as last listed: (title, description, annotations) by name, for the gate.
    tools: Mutex<Option<HashMap<String, ToolFacts>>>,
    /// Counts this upstream against [`MAX_UPSTREAMS_PER_SERVER`] until it is dropped.
    _slot: Slot,
}

/// One of a server's [`MAX_UPSTREAMS_PER_SERVER`] places, given back when dropped.
struct Slot {
    shared: Arc<Shared>,
    server: String,
}

impl Slot {
    fn take(shared: &Arc<Shared>, server: &str) -> Result<Slot, String> {
        let mut open = lock(&shared.open_upstreams);
        let count = open.entry(server.to_owned()).or_default();
        if *count >= MAX_UPSTREAMS_PER_SERVER {
            return Err(format!(
                "{server} already has {MAX_UPSTREAMS_PER_SERVER} agent sessions open through \
                 Countersign (the limit); close some agents' sessions first"
            ));
        }
        *count += 1;
        Ok(Slot {
            shared: shared.clone(),
            server: server.to_owned(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(count) = lock(&self.shared.open_upstreams).get_mut(&self.server) {
            *count = count.saturating_sub(1);
        }
    }
}

#[derive(Clone, Default)]
struct ToolFacts {
    title: Option<String>,
    description: Option<String>,
    annotations: Option<Value>,
    input_schema: Option<Value>,
}

impl Upstream {
    async fn connect(
        shared: &Arc<Shared>,
        server: &ServerConfig,
        who: &Who,
    ) -> Result<Arc<Self>, String> {
        let slot = Slot::take(shared, &server.name)?;
        let session = shared.next_session.fetch_add(1, Ordering::Relaxed);
        let (relay, notifications) = AgentRelay::new();
        let tap = Tap::with_relay(shared.broker.clone(), relay.clone());
        let raw = RawRequests::with_results();
        let mut asker = asker_for(server);
        asker.agent = Some(who.name.clone());
        asker.declared = who.declared.clone();
        let elicitor = Elicitor {
            broker: shared.broker.clone(),
            asker,
            answer_timeout: server.answer_timeout,
            session,
        };
        let handler = Handler {
            elicitor: elicitor.clone(),
            tap: tap.clone(),
            raw: raw.clone(),
            config: client_config(lifecycle_for(server).1),
        };
        let service = open_client(server, handler, tap.clone(), raw.clone(), Arc::default())
            .await
            .map_err(|e| match e {
                ConnectError::Retry(reason) | ConnectError::Fatal(reason) => reason,
            })?;
        let upstream = Arc::new(Upstream {
            server: server.clone(),
            service,
            raw,
            elicitor,
            relay: relay.clone(),
            closed: tap.closed.clone(),
            session,
            last_used: AtomicU64::new(crate::broker::unix_ms()),
            tools: Mutex::default(),
            _slot: slot,
        });
        if let Some(info) = upstream.info() {
            let mut last = shared
                .pool
                .last_info
                .write()
                .unwrap_or_else(|e| e.into_inner());
            last.insert(server.name.clone(), agent_facing(info));
        }
        tokio::spawn(relay_notifications(
            Arc::downgrade(&upstream),
            notifications,
        ));
        // A dead upstream takes its questions with it, at once, and the agent's session ends:
        // so do the decisions the person made for that session.
        let broker = shared.broker.clone();
        let settings = shared.settings.clone();
        let closed = upstream.closed.clone();
        tokio::spawn(async move {
            closed.cancelled().await;
            broker.withdraw_session(session, CancelReason::Disconnect);
            if let Err(e) = settings.end_session(session) {
                tracing::warn!(error = %e, "cannot forget a session's decisions");
            }
        });
        tracing::info!(server = %server.name, agent = %who.name, session, "gateway: upstream session open");
        Ok(upstream)
    }

    fn peer(&self) -> &Peer<RoleClient> {
        self.service.peer()
    }

    fn is_closed(&self) -> bool {
        self.closed.is_cancelled() || self.service.is_closed()
    }

    fn close(&self) {
        self.service.cancellation_token().cancel();
    }

    fn last_used(&self) -> u64 {
        self.last_used.load(Ordering::Relaxed)
    }

    /// What the server said about itself in the handshake.
    fn info(&self) -> Option<ServerPeerInfo> {
        self.peer().peer_info().map(|i| (*i).clone())
    }

    /// Sends one request upstream on behalf of the agent's request `ctx`: its progress is
    /// routed back, its cancellation cancels the upstream request.
    async fn send(
        &self,
        mut request: ClientRequest,
        ctx: &RequestContext<RoleServer>,
        timeout: Duration,
        call: Option<u64>,
    ) -> Result<(ServerResult, Option<Value>), McpError> {
        self.last_used
            .store(crate::broker::unix_ms(), Ordering::Relaxed);
        let agent_token = ctx.meta.get_progress_token();
        // The agent's lifecycle keys describe the agent's link to us, not ours upstream.
        request
            .get_meta_mut()
            .0
            .0
            .retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
        let mut options = PeerRequestOptions::no_options();
        options.timeout = Some(timeout);
        let peer = self.peer().clone();
        let handle = peer
            .send_request_with_option(request, options)
            .await
            .map_err(|e| upstream_error(&self.server, e))?;
        let id = handle.id.clone();
        let upstream_token = handle.progress_token.clone();
        if let Some(token) = agent_token {
            self.relay
                .progress_routes()
                .insert(upstream_token.clone(), (ctx.peer.clone(), token));
        }
        let leaving = Leaving::of(ctx);
        let response = tokio::select! {
            r = handle.await_response() => Ok(r),
            reason = leaving.left() => Err(reason),
        };
        self.relay.progress_routes().remove(&upstream_token);
        match response {
            Err(reason) => {
                // The questions first: the server's own withdrawal, prompted by ours, must not
                // be what ends them.
                if let Some(call) = call {
                    self.relay.call_ended(call, Some(reason));
                }
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(id.clone()),
                        Some("the agent cancelled the call".into()),
                    ))
                    .await;
                let _ = self.raw.take_result(&id);
                Err(agent_cancelled())
            }
            Ok(result) => {
                // Read beside rmcp before rmcp resolved the request, so it is here now (unless
                // the server answered in plain JSON over HTTP, which only rmcp sees).
                let raw = self.raw.take_result(&id);
                result
                    .map(|typed| (typed, raw))
                    .map_err(|e| upstream_error(&self.server, e))
            }
        }
    }

    /// Makes a preview's call (already with `dryRun: true`), recorded like any forwarded call.
    pub(crate) async fn dry_run(&self, request: CallToolRequest) -> Result<CallToolResult, String> {
        let agent = self.elicitor.asker.agent.clone();
        self.elicitor
            .broker
            .audit()
            .record_forwarded(
                &self.server.name,
                agent.as_deref(),
                "tools/call (preview, dryRun: true)",
            )
            .map_err(|e| e.to_string())?;
        let sent = tokio::time::timeout(
            self.server.request_timeout,
            self.peer().call_tool(request.params),
        )
        .await
        .map_err(|_| format!("{} did not answer in time", self.server.name))?;
        sent.map_err(|e| e.to_string())
    }

    /// What the gate needs to know about `tool`, listing the tools if they were not yet.
    async fn tool_facts(&self, tool: &str) -> ToolFacts {
        if let Some(facts) = lock(&self.tools)
            .as_ref()
            .and_then(|t| t.get(tool).cloned())
        {
            return facts;
        }
        let listed =
            tokio::time::timeout(self.server.request_timeout, self.peer().list_all_tools()).await;
        if let Ok(Ok(tools)) = listed {
            let facts: HashMap<String, ToolFacts> = tools
                .iter()
                .map(|t| (t.name.to_string(), ToolFacts::of(t)))
                .collect();
            let found = facts.get(tool).cloned();
            *lock(&self.tools) = Some(facts);
            if let Some(found) = found {
                return found;
            }
        }
        // Unknown to the list (or the list failed): no hints, so the gate asks.
        ToolFacts::default()
    }

    /// Keeps the gate's view current from a `tools/list` the agent made (one page).
    fn learn_tools(&self, listed: &ListToolsResult) {
        let mut cache = lock(&self.tools);
        let map = cache.get_or_insert_with(HashMap::new);
        for t in &listed.tools {
            map.insert(t.name.to_string(), ToolFacts::of(t));
        }
    }
}

impl ToolFacts {
    fn of(t: &Tool) -> Self {
        ToolFacts {
            title: t.title.clone(),
            description: t.description.as_ref().map(|d| d.to_string()),
            annotations: t
                .annotations
                .as_ref()
                .and_then(|a| serde_json::to_value(a).ok()),
            input_schema: Some(Value::Object((*t.input_schema).clone())),
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.close();
    }
}

/// A notification on its way to the agent: to the peer of the request it belongs to (progress),
/// or to the agent's session.
type Outgoing = (Option<Peer<RoleServer>>, ServerNotification);

/// Passes the upstream's notifications to the agent, in order, from one task.
async fn relay_notifications(
    upstream: std::sync::Weak<Upstream>,
    mut notifications: mpsc::UnboundedReceiver<Outgoing>,
) {
    while let Some((peer, notification)) = notifications.recv().await {
        let Some(up) = upstream.upgrade() else {
            return;
        };
        if matches!(
            notification,
            ServerNotification::ToolListChangedNotification(_)
        ) {
            *lock(&up.tools) = None;
        }
        let peer = peer.or_else(|| lock(&up.relay.agent).clone());
        if let Some(peer) = peer {
            let _ = peer.send_notification(notification).await;
        }
    }
}

/// The agent side of an upstream session: where its notifications go, and which of the
/// agent's calls are in flight (a question asked now belongs to them).
pub(crate) struct AgentRelay {
    tx: mpsc::UnboundedSender<Outgoing>,
    /// The agent's session, for notifications not tied to a request (session agents only).
    agent: Mutex<Option<Peer<RoleServer>>>,
    progress: Mutex<HashMap<ProgressToken, (Peer<RoleServer>, ProgressToken)>>,
    /// In-flight calls: the withdraw tokens of the questions asked during each, with the
    /// reason each stands for.
    calls: Mutex<HashMap<u64, Vec<(CancellationToken, CancelReason)>>>,
    next_call: AtomicU64,
}

impl AgentRelay {
    fn new() -> (Arc<Self>, mpsc::UnboundedReceiver<Outgoing>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let relay = Arc::new(AgentRelay {
            tx,
            agent: Mutex::default(),
            progress: Mutex::default(),
            calls: Mutex::default(),
            next_call: AtomicU64::new(1),
        });
        (relay, rx)
    }

    fn progress_routes(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<ProgressToken, (Peer<RoleServer>, ProgressToken)>> {
        lock(&self.progress)
    }

    fn call_started(&self) -> u64 {
        let id = self.next_call.fetch_add(1, Ordering::Relaxed);
        lock(&self.calls).insert(id, Vec::new());
        id
    }

    /// The call ended: cancelled (or abandoned) by the agent withdraws its questions with that
    /// reason; otherwise they are the server's to end.
    fn call_ended(&self, id: u64, left: Option<CancelReason>) {
        let tokens = lock(&self.calls).remove(&id).unwrap_or_default();
        if let Some(left) = left {
            tokens
                .iter()
                .filter(|(_, reason)| *reason == left)
                .for_each(|(token, _)| token.cancel());
        }
    }
}

impl Relay for AgentRelay {
    fn notify(&self, notification: &ServerNotification) {
        // Progress is routed now, while the call is surely still in flight: the server sends
        // it before its result, and the route goes when the result is in.
        let outgoing = match notification {
            ServerNotification::ProgressNotification(n) => {
                let Some((peer, token)) = self
                    .progress_routes()
                    .get(&n.params.progress_token)
                    .cloned()
                else {
                    return;
                };
                let mut n = n.clone();
                n.params.progress_token = token;
                (Some(peer), ServerNotification::ProgressNotification(n))
            }
            other => (None, other.clone()),
        };
        let _ = self.tx.send(outgoing);
    }

    fn agent_cancel(&self) -> Vec<(CancellationToken, CancelReason)> {
        let mut calls = lock(&self.calls);
        if calls.is_empty() {
            return Vec::new();
        }
        // Without a request id to tie it to, a question belongs to every call in flight;
        // cancelling any of them withdraws it (a no, which is the safe side).
        let tokens = vec![
            (CancellationToken::new(), CancelReason::Agent),
            (CancellationToken::new(), CancelReason::AgentGone),
        ];
        calls
            .values_mut()
            .for_each(|t| t.extend(tokens.iter().cloned()));
        tokens
    }
}

/// How an agent's request ends before its answer: the agent cancels it, or goes away (its
/// HTTP response stream closed; see `gone`), which rmcp does not notice on session-keeping
/// connections until the session idles out.
struct Leaving {
    cancelled: CancellationToken,
    gone: Option<CancellationToken>,
}

impl Leaving {
    fn of(ctx: &RequestContext<RoleServer>) -> Self {
        Leaving {
            cancelled: ctx.ct.clone(),
            gone: super::gone::token(ctx),
        }
    }

    /// The withdraw tokens for a question that belongs to this request.
    fn withdraw(&self) -> Vec<(CancellationToken, CancelReason)> {
        let mut tokens = vec![(self.cancelled.clone(), CancelReason::Agent)];
        if let Some(gone) = &self.gone {
            tokens.push((gone.clone(), CancelReason::AgentGone));
        }
        tokens
    }

    fn reason(&self) -> Option<CancelReason> {
        if self.cancelled.is_cancelled() {
            Some(CancelReason::Agent)
        } else if self.gone.as_ref().is_some_and(|g| g.is_cancelled()) {
            Some(CancelReason::AgentGone)
        } else {
            None
        }
    }

    async fn left(&self) -> CancelReason {
        match &self.gone {
            Some(gone) => tokio::select! {
                biased;
                _ = self.cancelled.cancelled() => CancelReason::Agent,
                _ = gone.cancelled() => CancelReason::AgentGone,
            },
            None => {
                self.cancelled.cancelled().await;
                CancelReason::Agent
            }
        }
    }
}

/// One agent session's (or one session-less request's) view of one configured server.
pub(crate) struct Forwarder {
    shared: Arc<Shared>,
    server: String,
    /// What the agent is told in the handshake: the upstream server's own, once reached.
    info: RwLock<ServerConfig_>,
    /// Set at `initialize` for agents that keep a session.
    session_upstream: tokio::sync::OnceCell<Arc<Upstream>>,
}

impl Forwarder {
    pub(crate) fn new(shared: Arc<Shared>, server: String) -> Self {
        let info = shared
            .pool
            .last_info
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&server)
            .cloned()
            .unwrap_or_else(|| placeholder_info(&server));
        Forwarder {
            shared,
            server,
            info: RwLock::new(info),
            session_upstream: tokio::sync::OnceCell::new(),
        }
    }

    fn config(&self) -> Result<&ServerConfig, McpError> {
        self.shared.servers.get(&self.server).ok_or_else(|| {
            McpError::internal_error(format!("no server named {}", self.server), None)
        })
    }

    fn set_info(&self, upstream: &Upstream) {
        if let Some(info) = upstream.info() {
            *self.info.write().unwrap_or_else(|e| e.into_inner()) = agent_facing(info);
        }
    }

    async fn upstream(&self, ctx: &RequestContext<RoleServer>) -> Result<Arc<Upstream>, McpError> {
        if let Some(up) = self.session_upstream.get() {
            return Ok(up.clone());
        }
        let who = Arc::new(Who::of(ctx));
        let version = ctx.client_info().map(|i| i.version).unwrap_or_default();
        let key = (
            self.server.clone(),
            who.id.clone(),
            who.declared.clone().unwrap_or_default(),
            version,
        );
        loop {
            let cell = {
                let mut entries = self.shared.pool.entries.lock().await;
                let cell = entries.entry(key.clone()).or_default();
                if cell.get().is_some_and(|up| up.is_closed()) {
                    *cell = Arc::default();
                }
                cell.clone()
            };
            let config = self.config()?.clone();
            let shared = self.shared.clone();
            let who = who.clone();
            let up = cell
                .get_or_try_init(|| async move { Upstream::connect(&shared, &config, &who).await })
                .await
                .map_err(|reason| unreachable_error(&self.server, &reason))?
                .clone();
            if !up.is_closed() {
                return Ok(up);
            }
        }
    }

    async fn gate_and_call(
        &self,
        request: CallToolRequest,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let up = self.upstream(&ctx).await?;
        let tool = request.params.name.to_string();
        self.refuse_agent_input(
            "tools/call",
            &ctx,
            &request.params.input_responses,
            &request.params.request_state,
        )?;
        let facts = up.tool_facts(&tool).await;
        let arguments = request
            .params
            .arguments
            .clone()
            .map(Value::Object)
            .unwrap_or_else(|| json!({}));
        let gated = Gated {
            key: &tool,
            what: format!("this call to {tool}"),
            request: json!({"name": tool, "arguments": arguments}),
            definition: approval::definition(
                &tool,
                facts.title.as_deref(),
                facts.description.as_deref(),
                facts.annotations.as_ref(),
                facts.input_schema.as_ref(),
            ),
            arguments,
            annotations: facts.annotations.clone(),
            read: false,
            previewable: super::preview::takes_dry_run(facts.input_schema.as_ref())
                .then(|| request.clone()),
        };
        match self.gate(&up, &ctx, gated).await {
            Ok(()) => self.forward_call(&up, request, &ctx).await,
            Err(Refusal::Denied(words)) => Ok(denied(words)),
            Err(Refusal::AgentLeft) => Err(agent_cancelled()),
            Err(Refusal::Pending { id }) => Ok(pending_result(&id, &tool, &self.server)),
        }
    }

    /// The gate for a read (`resources/read`, `resources/subscribe`, `prompts/get`) of
    /// `target` (a URI or a prompt's name); `params` are what will be forwarded.
    async fn gate_read(
        &self,
        up: &Arc<Upstream>,
        ctx: &RequestContext<RoleServer>,
        method: &str,
        target: &str,
        params: Value,
    ) -> Result<(), McpError> {
        let gated = Gated {
            key: method,
            what: format!("{method} of {target}"),
            request: json!({"method": method, "params": params}),
            definition: approval::definition(method, None, None, None, None),
            arguments: params,
            annotations: None,
            read: true,
            previewable: None,
        };
        match self.gate(up, ctx, gated).await {
            Ok(()) => Ok(()),
            Err(Refusal::Denied(words)) => Err(McpError::invalid_request(words, None)),
            Err(Refusal::AgentLeft) => Err(agent_cancelled()),
            // Reads are never left pending; should one be, it is a no for now.
            Err(Refusal::Pending { id }) => Err(McpError::invalid_request(
                format!("approval {id} is pending in Countersign"),
                None,
            )),
        }
    }

    /// Decides one request by policy and carries the decision out: recorded when decided
    /// without asking, else put to the person, and what they chose to remember kept.
    async fn gate(
        &self,
        up: &Arc<Upstream>,
        ctx: &RequestContext<RoleServer>,
        gated: Gated<'_>,
    ) -> Result<(), Refusal> {
        let config = &up.server;
        let who = Who::of(ctx);
        let audit = self.shared.broker.audit();
        let what = &gated.what;
        let digest = approval::digest(&gated.definition);
        let now_ms = super::Gateway::now_ms(&self.shared);
        let call = approval::Call {
            agent: &who.id,
            server: &config.name,
            tool: gated.key,
            arguments: &gated.arguments,
            session: up.session,
            digest: &digest,
            now_ms,
        };
        let settings = &self.shared.settings;
        let decision = if gated.read {
            policy::decide_read(config, &call, settings)
        } else {
            policy::decide(config, &call, gated.annotations.as_ref(), settings)
        };
        match decision {
            Decision::Allow { why, remembered } => {
                if let Some(id) = remembered {
                    settings.touch(id, now_ms);
                }
                // Unrecorded, it does not run.
                audit
                    .record_gated(&config.name, Some(&who.name), gated.key, true, &why)
                    .map_err(|e| {
                        Refusal::Denied(format!(
                            "Countersign did not allow {what} on {}: {e}.",
                            config.name
                        ))
                    })
            }
            Decision::Deny { why, remembered } => {
                if let Some(id) = remembered {
                    settings.touch(id, now_ms);
                }
                if let Err(e) =
                    audit.record_gated(&config.name, Some(&who.name), gated.key, false, &why)
                {
                    tracing::error!(error = %e, "a denial went unrecorded");
                }
                Err(Refusal::Denied(match remembered {
                    Some(_) => format!(
                        "The person using Countersign denied {what} on {} ({why}).",
                        config.name
                    ),
                    None => format!(
                        "Countersign's rules do not allow {what} on {} ({why}).",
                        config.name
                    ),
                }))
            }
            Decision::Ask => {
                let arguments = serde_json::to_string(&gated.arguments).unwrap_or_default();
                if !gated.read {
                    // The person may have answered this very call while it was pending.
                    if let Some(answered) = self
                        .pending_answer(up, &who, &gated, &arguments, &digest, now_ms)
                        .await?
                    {
                        return answered;
                    }
                }
                let changed = settings.changed_since(&call, &gated.definition);
                let mut asker = asker_for(config);
                asker.agent = Some(who.name.clone());
                asker.declared = who.declared.clone();
                let kind = gated.ask_kind(changed);
                let pending = self
                    .shared
                    .broker
                    .open(NewAsk {
                        asker,
                        kind,
                        request: gated.request.clone(),
                        // A tool call's question may outlive the call (see `pending`).
                        timeout: Some(if gated.read {
                            config.answer_timeout
                        } else {
                            config.pending_expiry
                        }),
                        session: up.session,
                    })
                    // The server has its limit of questions waiting (recorded by the broker).
                    .map_err(|full| Refusal::Denied(full.to_string()))?;
                let _previewable = gated.previewable.clone().map(|request| {
                    self.shared
                        .previews
                        .offer(pending.id(), Arc::downgrade(up), request)
                });
                let waiting = WhileWaiting::link(ctx);
                let tokens = waiting.tokens();
                let mut outcome =
                    Box::pin(async move { pending.outcome_or_withdraw(&tokens).await });
                let outcome = if gated.read {
                    outcome.await
                } else {
                    tokio::select! {
                        o = &mut outcome => o,
                        _ = tokio::time::sleep(config.approval_wait) => {
                            // Detached from the agent's call: the question stays for the person.
                            waiting.detach();
                            let approval = PendingApproval {
                                id: pending::fresh_id(),
                                agent: who.id.clone(),
                                agent_name: who.name.clone(),
                                declared: who.declared.clone(),
                                server: config.name.clone(),
                                tool: gated.key.to_owned(),
                                arguments,
                                arguments_value: gated.arguments.clone(),
                                definition: gated.definition.clone(),
                                digest: digest.clone(),
                                created_ms: now_ms,
                                expires_ms: now_ms
                                    .saturating_add(config.pending_expiry.as_millis() as u64),
                                state: pending::PendingState::Waiting,
                            };
                            return pending::keep_waiting(&self.shared, approval, outcome)
                                .map(|id| Err(Refusal::Pending { id }))
                                .unwrap_or_else(|| {
                                    Err(Refusal::Denied(format!(
                                        "Countersign did not allow {what} on {}: nobody \
                                         answered in time, and {} approvals are already \
                                         pending.",
                                        config.name,
                                        pending::MAX_PENDING
                                    )))
                                });
                        }
                    }
                };
                waiting.detach();
                let denied_by_person = || {
                    Refusal::Denied(format!(
                        "The person using Countersign denied {what} on {}.",
                        config.name
                    ))
                };
                match outcome {
                    Outcome::Accepted { .. } | Outcome::AlwaysAllowed => Ok(()),
                    Outcome::Remembered { decision } => {
                        let allow = decision.allow;
                        let session = (decision.lasting == Lasting::Session).then_some(up.session);
                        keep_decision(
                            settings,
                            Decided {
                                agent: &who.id,
                                agent_name: &who.name,
                                server: &config.name,
                                tool: gated.key,
                                definition: &gated.definition,
                                digest: &digest,
                            },
                            decision,
                            session,
                            now_ms,
                        );
                        if allow {
                            Ok(())
                        } else {
                            Err(denied_by_person())
                        }
                    }
                    Outcome::Declined
                    | Outcome::Cancelled {
                        reason: CancelReason::Person,
                    } => Err(denied_by_person()),
                    Outcome::Cancelled {
                        reason: CancelReason::Agent | CancelReason::AgentGone,
                    } => Err(Refusal::AgentLeft),
                    Outcome::Cancelled { reason } => Err(Refusal::Denied(format!(
                        "Countersign did not allow {what} on {}: nobody approved it ({}).",
                        config.name,
                        reason.notice()
                    ))),
                }
            }
        }
    }

    /// The person's answer to this very call, given while it was pending: used once. A call
    /// still pending waits a while more for it, then is told it is still pending. `None`:
    /// nothing pending for this call.
    async fn pending_answer(
        &self,
        up: &Upstream,
        who: &Who,
        gated: &Gated<'_>,
        arguments: &str,
        digest: &str,
        now_ms: u64,
    ) -> Result<Option<Result<(), Refusal>>, Refusal> {
        let store = &self.shared.pending;
        let config = &up.server;
        let find = || store.find(&who.id, &config.name, gated.key, arguments, digest, now_ms);
        let deadline = tokio::time::Instant::now() + config.approval_wait;
        loop {
            let changed = store.changed();
            match find() {
                pending::Found::None => return Ok(None),
                pending::Found::Answered { id, allow } => {
                    let why = format!("pending approval {id}, answered by the person");
                    self.shared
                        .broker
                        .audit()
                        .record_gated(&config.name, Some(&who.name), gated.key, allow, &why)
                        .map_err(|e| {
                            Refusal::Denied(format!(
                                "Countersign did not allow {}: {e}.",
                                gated.what
                            ))
                        })?;
                    return Ok(Some(if allow {
                        Ok(())
                    } else {
                        Err(Refusal::Denied(format!(
                            "The person using Countersign denied {} on {} (pending approval {id}).",
                            gated.what, config.name
                        )))
                    }));
                }
                pending::Found::Waiting { id } => {
                    if tokio::time::timeout_at(deadline, changed).await.is_err() {
                        return Ok(Some(Err(Refusal::Pending { id })));
                    }
                }
            }
        }
    }

    /// Every request that reaches a server is on record; one that cannot be is not sent.
    fn record_forwarded(
        &self,
        ctx: &RequestContext<RoleServer>,
        method: &str,
    ) -> Result<(), McpError> {
        let agent = ctx.client_info().map(|i| i.name);
        self.shared
            .broker
            .audit()
            .record_forwarded(&self.server, agent.as_deref(), method)
            .map_err(|e| McpError::internal_error(format!("Countersign: {e}"), None))
    }

    /// Input responses answer the server's questions, and only the person answers those, in
    /// Countersign's dialogs: an agent's own (and the request state they go with) are refused,
    /// and the refusal recorded.
    fn refuse_agent_input(
        &self,
        method: &str,
        ctx: &RequestContext<RoleServer>,
        input_responses: &Option<rmcp::model::InputResponses>,
        request_state: &Option<String>,
    ) -> Result<(), McpError> {
        if input_responses.is_none() && request_state.is_none() {
            return Ok(());
        }
        let reason = format!(
            "Countersign: the agent sent its own inputResponses or requestState with {method}; \
             only the person answers the server's questions, in Countersign. Send the request \
             without them."
        );
        let refused = self.shared.broker.audit().record_refused(
            &self.server,
            &reason,
            &json!({
                "method": method,
                "agent": Who::of(ctx).name,
                "inputResponses": input_responses,
                "requestState": request_state,
            }),
        );
        if let Err(e) = refused {
            tracing::error!(error = %e, "a refusal went unrecorded");
        }
        Err(McpError::invalid_params(reason, None))
    }

    /// Forwards an approved call, answering multi round-trip input on the desktop.
    async fn forward_call(
        &self,
        up: &Upstream,
        mut request: CallToolRequest,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let call = up.relay.call_started();
        let leaving = Leaving::of(ctx);
        let timeout = up.server.request_timeout + up.server.answer_timeout;
        let result = async {
            for _round in 0..MAX_INPUT_ROUNDS {
                let required = match up
                    .send(
                        ClientRequest::CallToolRequest(request.clone()),
                        ctx,
                        timeout,
                        Some(call),
                    )
                    .await?
                {
                    (ServerResult::CallToolResult(result), raw) => {
                        keep_raw(ctx, raw);
                        return Ok(result);
                    }
                    (ServerResult::InputRequiredResult(required), _) => required,
                    (ServerResult::EmptyResult(_), _) => {
                        return Ok(CallToolResult::success(vec![]));
                    }
                    _ => {
                        return Err(McpError::internal_error(
                            format!("{} answered tools/call with something else", up.server.name),
                            None,
                        ));
                    }
                };
                let inputs = required.input_requests.unwrap_or_default();
                let answers = futures::future::join_all(inputs.into_iter().map(|(key, input)| {
                    let elicitor = up.elicitor.clone();
                    let withdraw = leaving.withdraw();
                    async move { (key, answer_input_request(&elicitor, input, &withdraw).await) }
                }))
                .await;
                if leaving.reason().is_some() {
                    return Err(agent_cancelled());
                }
                let mut responses = std::collections::BTreeMap::new();
                for (key, answer) in answers {
                    responses.insert(
                        key,
                        answer.map_err(|m| {
                            McpError::internal_error(format!("{}: {m}", up.server.name), None)
                        })?,
                    );
                }
                request.params.input_responses = Some(responses);
                request.params.request_state = required.request_state;
            }
            Err(McpError::internal_error(
                format!(
                    "{} still asked for input after {MAX_INPUT_ROUNDS} rounds",
                    up.server.name
                ),
                None,
            ))
        }
        .await;
        up.relay.call_ended(call, leaving.reason());
        result
    }

    /// Forwards any other request and picks the expected result out of the answer; the
    /// agent gets the raw one in its place.
    async fn relay<T>(
        &self,
        request: ClientRequest,
        ctx: RequestContext<RoleServer>,
        pick: impl FnOnce(ServerResult) -> Option<T>,
    ) -> Result<T, McpError> {
        let up = self.upstream(&ctx).await?;
        let method = request.method().to_owned();
        // Reads were recorded at their gate.
        if !policy::READ_METHODS.contains(&method.as_str()) {
            self.record_forwarded(&ctx, &method)?;
        }
        let (result, raw) = up
            .send(request, &ctx, up.server.request_timeout, None)
            .await?;
        let picked = pick(result).ok_or_else(|| {
            McpError::internal_error(
                format!("{} answered {method} with something else", up.server.name),
                None,
            )
        })?;
        keep_raw(&ctx, raw);
        Ok(picked)
    }
}

impl ServerHandler for Forwarder {
    fn get_info(&self) -> ServerConfig_ {
        self.info.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        let config = self.config()?.clone();
        let mut who = Who::of(&ctx);
        // rmcp learns the client's info from this very request, after this handler.
        who.declared = Some(request.client_info.name.clone());
        let up = Upstream::connect(&self.shared, &config, &who)
            .await
            .map_err(|reason| unreachable_error(&self.server, &reason))?;
        *lock(&up.relay.agent) = Some(ctx.peer.clone());
        self.set_info(&up);
        let _ = self.session_upstream.set(up);
        ctx.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn discover(&self, ctx: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        let up = self.upstream(&ctx).await?;
        self.set_info(&up);
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.gate_and_call(CallToolRequest::new(request), ctx)
            .await
            .map(CallToolResponse::Complete)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let up = self.upstream(&ctx).await?;
        self.record_forwarded(&ctx, "tools/list")?;
        let list = ListToolsRequest {
            params: request,
            ..Default::default()
        };
        match up
            .send(
                ClientRequest::ListToolsRequest(list),
                &ctx,
                up.server.request_timeout,
                None,
            )
            .await?
        {
            (ServerResult::ListToolsResult(listed), raw) => {
                up.learn_tools(&listed);
                keep_raw(&ctx, raw);
                Ok(listed)
            }
            _ => Err(McpError::internal_error(
                format!("{} answered tools/list with something else", up.server.name),
                None,
            )),
        }
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let list = ListPromptsRequest {
            params: request,
            ..Default::default()
        };
        self.relay(ClientRequest::ListPromptsRequest(list), ctx, |r| match r {
            ServerResult::ListPromptsResult(r) => Some(r),
            _ => None,
        })
        .await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        self.refuse_agent_input(
            "prompts/get",
            &ctx,
            &request.input_responses,
            &request.request_state,
        )?;
        let up = self.upstream(&ctx).await?;
        let params = json!({"name": request.name, "arguments": request.arguments});
        self.gate_read(&up, &ctx, "prompts/get", &request.name, params)
            .await?;
        self.relay(
            ClientRequest::GetPromptRequest(GetPromptRequest::new(request)),
            ctx,
            |r| match r {
                ServerResult::GetPromptResult(r) => Some(GetPromptResponse::Complete(r)),
                _ => None,
            },
        )
        .await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let list = ListResourcesRequest {
            params: request,
            ..Default::default()
        };
        self.relay(
            ClientRequest::ListResourcesRequest(list),
            ctx,
            |r| match r {
                ServerResult::ListResourcesResult(r) => Some(r),
                _ => None,
            },
        )
        .await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let list = ListResourceTemplatesRequest {
            params: request,
            ..Default::default()
        };
        self.relay(
            ClientRequest::ListResourceTemplatesRequest(list),
            ctx,
            |r| match r {
                ServerResult::ListResourceTemplatesResult(r) => Some(r),
                _ => None,
            },
        )
        .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.refuse_agent_input(
            "resources/read",
            &ctx,
            &request.input_responses,
            &request.request_state,
        )?;
        let up = self.upstream(&ctx).await?;
        let params = json!({"uri": request.uri});
        self.gate_read(&up, &ctx, "resources/read", &request.uri, params)
            .await?;
        self.relay(
            ClientRequest::ReadResourceRequest(ReadResourceRequest::new(request)),
            ctx,
            |r| match r {
                ServerResult::ReadResourceResult(r) => Some(ReadResourceResponse::Complete(r)),
                _ => None,
            },
        )
        .await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        self.relay(
            ClientRequest::CompleteRequest(CompleteRequest::new(request)),
            ctx,
            |r| match r {
                ServerResult::CompleteResult(r) => Some(r),
                _ => None,
            },
        )
        .await
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.relay(
            ClientRequest::SetLevelRequest(SetLevelRequest::new(request)),
            ctx,
            |_| Some(()),
        )
        .await
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let up = self.upstream(&ctx).await?;
        let params = json!({"uri": request.uri});
        self.gate_read(&up, &ctx, "resources/subscribe", &request.uri, params)
            .await?;
        self.relay(
            ClientRequest::SubscribeRequest(SubscribeRequest::new(request)),
            ctx,
            |_| Some(()),
        )
        .await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.relay(
            ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(request)),
            ctx,
            |_| Some(()),
        )
        .await
    }
}

/// What the agent is told about the server: the upstream's own capabilities and identity,
/// without what the gateway does not forward (tasks, extensions it cannot vouch for).
fn agent_facing(upstream: ServerPeerInfo) -> ServerConfig_ {
    let mut capabilities = upstream.capabilities;
    capabilities.experimental = None;
    capabilities.extensions = None;
    let mut info = InitializeResult::new(capabilities);
    if let Some(server_info) = upstream.server_info {
        info.server_info = server_info;
    }
    info.instructions = upstream.instructions;
    info
}

fn placeholder_info(server: &str) -> ServerConfig_ {
    let mut capabilities = ServerCapabilities::default();
    capabilities.tools = Some(Default::default());
    let mut info = InitializeResult::new(capabilities);
    let mut implementation = Implementation::default();
    implementation.name = server.to_owned();
    implementation.version = String::new();
    info.server_info = implementation;
    info
}

/// One request at the gate: the key rules and remembered decisions use (a tool's name or
/// a read method), how the person's answer words it, and the request for the record.
struct Gated<'a> {
    key: &'a str,
    what: String,
    request: Value,
    /// The tool's definition as the person sees it (a read's is just its method).
    definition: Value,
    /// What will be forwarded, for the decisions that cover some arguments only.
    arguments: Value,
    annotations: Option<Value>,
    read: bool,
    /// The call itself, when its tool takes a boolean `dryRun` (see `preview`).
    previewable: Option<CallToolRequest>,
}

impl Gated<'_> {
    /// The question the person is asked about it.
    fn ask_kind(&self, changed: Vec<approval::DefinitionChange>) -> AskKind {
        let text = |field: &str| {
            self.definition
                .get(field)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let (title, description) = if self.read {
            let (title, verb) = match self.key {
                "prompts/get" => ("Get a prompt", "get"),
                "resources/subscribe" => ("Watch a resource", "be told of changes to"),
                _ => ("Read a resource", "read"),
            };
            (
                Some(title.to_owned()),
                Some(format!(
                    "The agent asks to {verb} {}. What the server answers goes to the agent.",
                    self.what
                )),
            )
        } else {
            (text("title"), text("description"))
        };
        AskKind::ToolCall {
            tool: self.key.to_owned(),
            title,
            description,
            annotations: self.annotations.clone(),
            // rmcp forwards the serialization of this same value (key order kept, integers
            // exact), so this text is what will run.
            arguments_text: serde_json::to_string_pretty(&self.arguments).unwrap_or_default(),
            arguments: self.arguments.clone(),
            changed,
            preview: self.previewable.is_some(),
        }
    }
}

/// Who an agent is: the token it holds (its id keys every remembered decision; its name is
/// the person's), and the name it gives itself, which is only shown.
struct Who {
    id: String,
    name: String,
    declared: Option<String>,
}

impl Who {
    fn of(ctx: &RequestContext<RoleServer>) -> Who {
        let declared = ctx.client_info().map(|i| i.name);
        match super::agents::token_agent(ctx) {
            Some(agent) => Who {
                id: agent.id,
                name: agent.name,
                declared,
            },
            // Only requests through the guard reach the forwarder; without its mark, the
            // agent is nobody in particular and nothing remembered applies to it.
            None => Who {
                id: String::new(),
                name: UNNAMED_AGENT.to_owned(),
                declared,
            },
        }
    }
}

/// Why the gate did not let a request through.
enum Refusal {
    /// In words the agent (and its model) can act on.
    Denied(String),
    /// The agent cancelled or went away while the person was asked.
    AgentLeft,
    /// The person has not answered yet: the approval waits in Countersign under `id`.
    Pending { id: String },
}

/// What the agent is told when the person has not answered yet: a result, not an error, in
/// words its model can act on.
fn pending_result(id: &str, tool: &str, server: &str) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(format!(
        "Approval pending in Countersign (id {id}): the person has not yet decided whether \
         {tool} on {server} may run, and it has not run. Make the same call again later, with \
         the same arguments, to get their decision."
    ))])
}

/// Who decided about what, for a decision to remember.
pub(crate) struct Decided<'a> {
    pub agent: &'a str,
    pub agent_name: &'a str,
    pub server: &'a str,
    pub tool: &'a str,
    pub definition: &'a Value,
    pub digest: &'a str,
}

/// Keeps what the person chose to remember (a failure to save is logged: the decision was
/// taken for this call all the same).
pub(crate) fn keep_decision(
    settings: &crate::settings::SettingsStore,
    decided: Decided,
    decision: approval::Remember,
    session: Option<u64>,
    now_ms: u64,
) {
    let kept = RememberedDecision {
        id: 0,
        agent: decided.agent.to_owned(),
        agent_name: decided.agent_name.to_owned(),
        server: decided.server.to_owned(),
        tool: decided.tool.to_owned(),
        allow: decision.allow,
        session,
        lasting: decision.lasting,
        covering: decision.covering,
        definition: decided.definition.clone(),
        digest: decided.digest.to_owned(),
        created_ms: now_ms,
        last_used_ms: Some(now_ms),
        uses: 1,
    };
    if let Err(e) = settings.remember(kept, now_ms) {
        tracing::warn!(error = %e, "cannot remember a decision");
    }
}

/// Ties a question to the agent's call while the call waits for it, and lets go when the
/// call stops waiting (the question then outlives it, see `pending`).
struct WhileWaiting {
    detached: CancellationToken,
    cancelled: CancellationToken,
    gone: CancellationToken,
}

impl WhileWaiting {
    fn link(ctx: &RequestContext<RoleServer>) -> Self {
        let leaving = Leaving::of(ctx);
        let link = WhileWaiting {
            detached: CancellationToken::new(),
            cancelled: CancellationToken::new(),
            gone: CancellationToken::new(),
        };
        let (detached, cancelled, gone) = (
            link.detached.clone(),
            link.cancelled.clone(),
            link.gone.clone(),
        );
        tokio::spawn(async move {
            tokio::select! {
                biased;
                _ = detached.cancelled() => {}
                reason = leaving.left() => match reason {
                    CancelReason::AgentGone => gone.cancel(),
                    _ => cancelled.cancel(),
                },
            }
        });
        link
    }

    /// The withdraw tokens for the question; the agent's cancellation listed first.
    fn tokens(&self) -> Vec<(CancellationToken, CancelReason)> {
        vec![
            (self.cancelled.clone(), CancelReason::Agent),
            (self.gone.clone(), CancelReason::AgentGone),
        ]
    }

    fn detach(&self) {
        self.detached.cancel();
    }
}

/// A denial, as the agent sees it: a tool result with `isError: true` that says why.
fn denied(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// What a cancelled request ends with (the agent no longer waits for it).
fn agent_cancelled() -> McpError {
    McpError::new(
        ErrorCode::INTERNAL_ERROR,
        "the agent cancelled the request",
        None,
    )
}

fn upstream_error(server: &ServerConfig, e: rmcp::ServiceError) -> McpError {
    match e {
        // The server's own error, as it sent it.
        rmcp::ServiceError::McpError(error) => error,
        other => McpError::internal_error(format!("{}: {other}", server.name), None),
    }
}

fn unreachable_error(server: &str, reason: &str) -> McpError {
    McpError::internal_error(format!("Countersign cannot reach {server}: {reason}"), None)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Has the agent get `raw` (shaped for its revision) in place of the typed result of its
/// request `ctx` (see `faithful`).
fn keep_raw(ctx: &RequestContext<RoleServer>, raw: Option<Value>) {
    if let Some(mut raw) = raw {
        let modern = ctx
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        shape_result(&mut raw, modern);
        super::faithful::Kept::keep(ctx, raw);
    }
}
