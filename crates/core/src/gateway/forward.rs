//! Forwarding: each agent session gets its own upstream session, and what passes between them
//! is the servers' own words.
//!
//! Results are taken raw off the upstream wire (`RawRequests::with_results`) and handed to the
//! agent as they were, so fields rmcp cannot model survive; only the shape the agent's protocol
//! revision needs is adjusted (`shape_result`). Progress, logging and list-changed
//! notifications are relayed; an agent's cancellation cancels the upstream request and
//! withdraws the questions asked during it. Questions from the server (legacy
//! `elicitation/create` or multi round-trip input) go to the desktop, never to the agent, and
//! `tools/call` and reads pass the approval gate first (`gate`).
//!
//! Agents that keep a session (2025-11-25 and older) get one [`Forwarder`] per session from
//! rmcp, which holds that session's upstream. 2026-07-28 agents have no sessions: each request
//! gets a fresh `Forwarder`, so their upstreams are pooled by the agent's name and version and
//! closed when idle.
#![allow(deprecated)] // logging/setLevel and resources/subscribe are forwarded for legacy agents.

mod gate;
mod relay;
mod replay;
pub(crate) mod task;
mod upstream;

use gate::Who;
pub(crate) use gate::{Decided, keep_decision};
pub(crate) use relay::ProgressTo;
use relay::{AgentRelay, Leaving, Outgoing};
pub(crate) use upstream::{OpenUpstreams, Pool, TaskOwners, Upstream, reap_idle};

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
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::faithful::shape_result;

/// rmcp's name for what a server says about itself in the handshake.
type ServerConfig_ = rmcp::model::ServerConfig;
use super::pending::{self, PendingApproval};
use super::policy::{self, Decision};
use crate::ask::approval::{self, Lasting, RememberedDecision};
use crate::ask::broker::NewAsk;
use crate::ask::{AskKind, CancelReason, Outcome, Withdrawal};
use crate::config::ServerConfig;
use crate::lock;
use crate::mcp::connect::{ConnectError, asker_for, lifecycle_for, open_client};
use crate::mcp::direct::Upstreamed;
use crate::mcp::handler::{Elicitor, Handler, client_config};
use crate::mcp::raw::{RawRequests, tree};
use crate::mcp::rounds::{Halt, Next, Rounds, Sent};
use crate::mcp::tap::{Relay, Tap};

/// What an agent is called when it gives no `clientInfo`.
const UNNAMED_AGENT: &str = "an unnamed agent";

/// One agent session's (or one session-less request's) view of one configured server. A
/// handle: rmcp owns one per session, and the lane (`super::lane`) reaches the same one.
#[derive(Clone)]
pub(crate) struct Forwarder(Arc<ForwarderState>);

impl std::ops::Deref for Forwarder {
    type Target = ForwarderState;
    fn deref(&self) -> &ForwarderState {
        &self.0
    }
}

pub(crate) struct ForwarderState {
    shared: Arc<Shared>,
    server: String,
    /// What the agent is told in the handshake: the upstream server's own, once reached.
    info: RwLock<ServerConfig_>,
    /// Set at `initialize` for agents that keep a session: who the agent is, and its
    /// upstream (replaced when the person changes the server: see `Gateway::set_servers`).
    session: std::sync::OnceLock<Who>,
    session_upstream: tokio::sync::Mutex<Option<Arc<Upstream>>>,
    /// When the session's server may next be started (or reached) again, after it failed to
    /// start or died soon after (any time, until it has).
    reopen: Mutex<Reopen>,
    /// The session's subscriptions and log level, made again on a server started again.
    replay: Mutex<replay::Replay>,
}

/// A server that keeps failing is started again less and less often, as the app's own
/// sessions back off: not once per agent request.
#[derive(Default)]
struct Reopen {
    /// Failures in a row.
    failures: u32,
    not_before: Option<std::time::Instant>,
    why: String,
}

/// An upstream that ends sooner than this after it opened counts as a failure to start.
const LIVED_TOO_SHORT: Duration = Duration::from_secs(10);

impl Reopen {
    /// The first failure is tried again at once (a crash, once); then 250 ms, doubling, at
    /// most 30 s.
    fn failed(&mut self, why: String) {
        self.failures = self.failures.saturating_add(1);
        let wait = match self.failures {
            1 => Duration::ZERO,
            n => Duration::from_millis(250)
                .saturating_mul(1 << (n - 2).min(7))
                .min(Duration::from_secs(30)),
        };
        self.not_before = Some(std::time::Instant::now() + wait);
        self.why = why;
    }

    /// Why it may not start again yet, and for how long.
    fn wait(&self) -> Option<String> {
        let left = self
            .not_before?
            .checked_duration_since(std::time::Instant::now())?;
        Some(format!(
            "{}; Countersign starts it again in {:.1} s",
            self.why,
            left.as_secs_f64()
        ))
    }
}

/// rmcp drops a session's `Forwarder` when the session ends: the agent said so (DELETE), or
/// it went quiet past the session's idle limit.
impl Drop for ForwarderState {
    fn drop(&mut self) {
        if let Some(up) = self.session_upstream.get_mut().as_ref() {
            up.relay.agent_left();
        }
    }
}

impl Forwarder {
    pub(crate) fn downgrade(&self) -> std::sync::Weak<ForwarderState> {
        Arc::downgrade(&self.0)
    }

    pub(crate) fn upgrade(state: &std::sync::Weak<ForwarderState>) -> Option<Forwarder> {
        state.upgrade().map(Forwarder)
    }

    pub(crate) fn new(shared: Arc<Shared>, server: String) -> Self {
        let info = shared
            .pool
            .last_info
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&server)
            .cloned()
            .unwrap_or_else(|| placeholder_info(&server));
        Forwarder(Arc::new(ForwarderState {
            shared,
            server,
            info: RwLock::new(info),
            session: std::sync::OnceLock::new(),
            session_upstream: tokio::sync::Mutex::default(),
            reopen: Mutex::default(),
            replay: Mutex::default(),
        }))
    }

    /// The server as the person last saved it; an error once they removed it.
    fn config(&self) -> Result<ServerConfig, McpError> {
        self.shared.server(&self.server).ok_or_else(|| {
            McpError::internal_error(
                format!("{} is no longer configured in Countersign", self.server),
                None,
            )
        })
    }

    fn set_info(&self, upstream: &Upstream) {
        if let Some(info) = upstream.info() {
            *self.info.write().unwrap_or_else(|e| e.into_inner()) = agent_facing(info);
        }
    }

    /// The id of the agent that opened this session, once it has.
    pub(crate) fn agent_id(&self) -> Option<&str> {
        self.session.get().map(|who| who.id.as_str())
    }

    /// A request that waited for the person goes no further once they revoked the agent's
    /// token meanwhile: its retry with their answers is a request of the agent's too.
    fn still_held(&self, ctx: &RequestContext<RoleServer>) -> Result<(), McpError> {
        match crate::gateway::registry::token_agent(ctx) {
            Some(agent) if !self.shared.agents.holds(&agent.id) => Err(McpError::invalid_request(
                format!(
                    "Countersign did not go on with this request to {}: the agent's token \
                         was revoked.",
                    self.server
                ),
                None,
            )),
            _ => Ok(()),
        }
    }

    /// Whether an HTTP request on this session comes from the agent that opened it (never
    /// before the session has one).
    pub(crate) fn is_owners(&self, from: &http::Extensions) -> bool {
        let agent = from
            .get::<crate::gateway::registry::TokenAgent>()
            .map(|a| a.id.as_str());
        self.session
            .get()
            .is_some_and(|who| agent == Some(who.id.as_str()))
    }

    async fn upstream(&self, ctx: &RequestContext<RoleServer>) -> Result<Arc<Upstream>, McpError> {
        // Paused (or left) already: no server is started or reached for it.
        let leaving = Leaving::of(ctx);
        if leaving.reason().is_some() {
            return Err(leaving.error());
        }
        if let Some(who) = self.session.get() {
            // A session is the agent's that opened it: another agent's token with its id (the
            // id is random, but may leak) would judge the call by one agent and run it in the
            // other's upstream session.
            if crate::gateway::registry::token_agent(ctx)
                .map(|a| a.id)
                .unwrap_or_default()
                != who.id
            {
                return Err(McpError::invalid_request("Session not found", None));
            }
            let mut held = self.session_upstream.lock().await;
            if let Some(up) = held.as_ref().filter(|up| !up.is_closed()) {
                return Ok(up.clone());
            }
            // Let go of the dead one first: it holds one of the agent's and the server's places
            // until dropped, and an agent at its cap could otherwise never open another.
            if let Some(dead) = held.take()
                && !dead.is_retired()
            {
                let mut reopen = lock(&self.reopen);
                if dead.opened.elapsed() < LIVED_TOO_SHORT {
                    reopen.failed("it ended soon after it started".into());
                } else {
                    *reopen = Reopen::default();
                }
            }
            if let Some(why) = lock(&self.reopen).wait() {
                return Err(unreachable_error(&self.server, &why));
            }
            // The person changed the server since, or it ended (a crash, a broken connection):
            // the session goes on with the server as saved, started or reached again, as the
            // app's own sessions reconnect. Many agents open their session once, at their
            // start, and would otherwise be told "closed" until restarted.
            let up = match Upstream::connect(&self.shared, &self.config()?, who).await {
                Ok(up) => up,
                Err(reason) => {
                    lock(&self.reopen).failed(reason.clone());
                    return Err(unreachable_error(&self.server, &reason));
                }
            };
            *lock(&up.relay.agent) = Some(ctx.peer.clone());
            self.set_info(&up);
            *held = Some(up.clone());
            self.set_up_again(&up, ctx).await;
            return Ok(up);
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
            let pool = &self.shared.pool;
            let cell = {
                let mut entries = pool.entries.lock().await;
                if let Some(dead) = entries
                    .get(&key)
                    .and_then(|cell| cell.get())
                    .filter(|up| up.is_closed())
                {
                    pool.ended(&self.server, &who.id, dead);
                    entries.remove(&key);
                }
                // A server that keeps failing is not started at every request (the backoff of
                // a session's, `Reopen`); and no place is made for a request refused so.
                if entries.get(&key).is_none_or(|cell| cell.get().is_none())
                    && let Some(why) = pool.wait(&self.server, &who.id)
                {
                    return Err(unreachable_error(&self.server, &why));
                }
                entries.entry(key.clone()).or_default().clone()
            };
            let config = self.config()?;
            let shared = self.shared.clone();
            let connecting = who.clone();
            let connected = cell
                .get_or_try_init(|| async move {
                    Upstream::connect(&shared, &config, &connecting).await
                })
                .await
                .cloned();
            let up = match connected {
                Ok(up) => up,
                Err(reason) => {
                    pool.failed(&self.server, &who.id, reason.clone());
                    // No empty place is kept for a key that failed: the key is the agent's to
                    // choose (its name and version), and a server at its cap of upstream
                    // sessions fails every new one, so the pool would grow with each request.
                    let mut entries = pool.entries.lock().await;
                    if entries
                        .get(&key)
                        .is_some_and(|c| Arc::ptr_eq(c, &cell) && c.get().is_none())
                    {
                        entries.remove(&key);
                    }
                    return Err(unreachable_error(&self.server, &reason));
                }
            };
            if !up.is_closed() {
                return Ok(up);
            }
        }
    }

    /// Forwards an approved call, answering multi round-trip input on the desktop. With
    /// `as_sent`, a result that is only a tool result's members is kept for the agent as the
    /// bytes it came in and not read into its typed form: the lane answers with those bytes,
    /// and a byte relay passes on what the server wrote, well-formed or not, as the server's.
    async fn forward_call(
        &self,
        up: &Upstream,
        mut request: CallToolRequest,
        ctx: &RequestContext<RoleServer>,
        as_sent: bool,
    ) -> Result<CallAnswer, McpError> {
        let call = up.relay.call_started(ProgressTo::lane(ctx));
        let leaving = Leaving::of(ctx);
        let timeout = up.server.request_timeout + up.server.answer_timeout;
        if up.raw.requires_task(&request.params.name) {
            let result = task::run_task(up, request.params, ctx, call, timeout).await;
            up.relay.call_ended(call, leaving.reason());
            return result.map(CallAnswer::Typed);
        }
        let result = async {
            let mut rounds = Rounds::new(&up.elicitor, &up.tap, leaving.withdraw());
            loop {
                if let Some(answers) = rounds.answers() {
                    request.params.input_responses = Some(answers.responses.clone());
                    request.params.request_state = answers.request_state.clone();
                }
                let sent = up
                    .send_as_sent(
                        super::sent::upstream_call(&request, super::sent::Unmodeled::of(ctx)),
                        ctx,
                        timeout,
                        Some(call),
                    )
                    .await;
                let sent = match sent {
                    // Addresses to open first: the person opens them on the desktop (the agent
                    // need not know URL mode), then the same call is made again.
                    Err(error) => Sent::from_error(error),
                    Ok(Upstreamed::PlainCall(plain)) if as_sent => {
                        super::faithful::Kept::keep(
                            ctx,
                            super::faithful::shape_plain_call_result(plain, modern_agent(ctx)),
                        );
                        Ok(Sent::Answered(CallAnswer::Kept))
                    }
                    Ok(answer) => match answer.typed().map_err(|e| up.error(e))? {
                        (ServerResult::CallToolResult(result), raw) => {
                            keep_raw(ctx, raw);
                            Ok(Sent::Answered(CallAnswer::Typed(result)))
                        }
                        (ServerResult::InputRequiredResult(required), raw) => {
                            Ok(Sent::Input(required, raw.as_deref().and_then(tree)))
                        }
                        (ServerResult::EmptyResult(_), _) => Ok(Sent::Answered(CallAnswer::Typed(
                            CallToolResult::success(vec![]),
                        ))),
                        _ => Err(McpError::internal_error(
                            format!("{} answered tools/call with something else", up.server.name),
                            None,
                        )),
                    },
                };
                match rounds.after(sent, || self.still_held(ctx)).await {
                    Next::Answered(answer) => return Ok(answer),
                    Next::Again => {}
                    Next::Halted(halt) => return Err(halted_error(halt, &leaving)),
                }
            }
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
        self.relay_on(up, request, ctx, pick).await
    }

    /// [`Self::relay`] on `up`: the upstream a read was judged for, so what runs is what was
    /// judged (looked up again, a server changed meanwhile would be connected afresh and sent
    /// the read under its new config).
    async fn relay_on<T>(
        &self,
        up: Arc<Upstream>,
        request: ClientRequest,
        ctx: RequestContext<RoleServer>,
        pick: impl FnOnce(ServerResult) -> Option<T>,
    ) -> Result<T, McpError> {
        let method = request.method().to_owned();
        // Reads were recorded at their gate.
        if !policy::READ_METHODS.contains(&method.as_str()) {
            self.record_forwarded(&ctx, &method)?;
        }
        let mut request = request;
        let leaving = Leaving::of(&ctx);
        let mut rounds = Rounds::new(&up.elicitor, &up.tap, leaving.withdraw());
        let (result, raw) = loop {
            // A prompt or resource that needs the person first (multi round-trip requests, or
            // addresses to open): asked on the desktop, then the same request again.
            if let Some(answers) = rounds.answers() {
                let (responses, state) = match &mut request {
                    ClientRequest::GetPromptRequest(r) => {
                        (&mut r.params.input_responses, &mut r.params.request_state)
                    }
                    ClientRequest::ReadResourceRequest(r) => {
                        (&mut r.params.input_responses, &mut r.params.request_state)
                    }
                    _ => {
                        return Err(McpError::internal_error(
                            format!("{} asked for input on {method}", up.server.name),
                            None,
                        ));
                    }
                };
                *responses = Some(answers.responses.clone());
                *state = answers.request_state.clone();
            }
            let sent = match up
                .send(request.clone(), &ctx, up.server.request_timeout, None)
                .await
            {
                Ok((ServerResult::InputRequiredResult(required), raw)) => {
                    Ok(Sent::Input(required, raw.as_deref().and_then(tree)))
                }
                Ok(answered) => Ok(Sent::Answered(answered)),
                Err(error) => Sent::from_error(error),
            };
            match rounds.after(sent, || self.still_held(&ctx)).await {
                Next::Answered(answered) => break answered,
                Next::Again => {}
                Next::Halted(halt) => return Err(halted_error(halt, &leaving)),
            }
        };
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
        let config = self.config()?;
        let mut who = Who::of(&ctx);
        // rmcp learns the client's info from this very request, after this handler.
        who.declared = Some(request.client_info.name.clone());
        who.roots = request.capabilities.roots.is_some();
        who.sampling = request.capabilities.sampling.clone();
        let up = Upstream::connect(&self.shared, &config, &who)
            .await
            .map_err(|reason| unreachable_error(&self.server, &reason))?;
        *lock(&up.relay.agent) = Some(ctx.peer.clone());
        self.set_info(&up);
        let server_tasks = up.raw.server_tasks();
        *self.session_upstream.lock().await = Some(up);
        let _ = self.session.set(who);
        ctx.peer.set_peer_info(request.clone());
        super::lane::Opening::opened(&ctx, self);
        let result = self.negotiate_initialize(&request)?;
        // rmcp's typed capabilities have no place for 2025-11-25 tasks: the agent is told of
        // them in the raw answer, and its task requests take the lane (`task::pass`).
        if result.protocol_version == ProtocolVersion::V_2025_11_25
            && let Some(tasks) = server_tasks.as_ref().and_then(task::offered)
            && let Ok(mut raw) = serde_json::to_value(&result)
        {
            raw["capabilities"]["tasks"] = tasks;
            if let Ok(raw) = serde_json::value::to_raw_value(&raw) {
                super::faithful::Kept::keep(&ctx, raw);
            }
        }
        Ok(result)
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
        match self
            .gate_and_call(CallToolRequest::new(request), ctx, false)
            .await?
        {
            CallAnswer::Typed(result) => Ok(CallToolResponse::Complete(result)),
            CallAnswer::Kept => Err(CallAnswer::lost()),
        }
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
        let asked = self
            .gate_read(&up, &ctx, "prompts/get", &request.name, params, true)
            .await?;
        let result = self
            .relay_on(
                up.clone(),
                ClientRequest::GetPromptRequest(GetPromptRequest::new(request)),
                ctx,
                |r| match r {
                    ServerResult::GetPromptResult(r) => Some(GetPromptResponse::Complete(r)),
                    _ => None,
                },
            )
            .await;
        if result.is_ok() {
            self.carried_out(asked);
        }
        result
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
        let asked = self
            .gate_read(&up, &ctx, "resources/read", &request.uri, params, true)
            .await?;
        let result = self
            .relay_on(
                up.clone(),
                ClientRequest::ReadResourceRequest(ReadResourceRequest::new(request)),
                ctx,
                |r| match r {
                    ServerResult::ReadResourceResult(r) => Some(ReadResourceResponse::Complete(r)),
                    _ => None,
                },
            )
            .await;
        if result.is_ok() {
            self.carried_out(asked);
        }
        result
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        // Refused by the server's rule alone: no server is started for it.
        if self.config()?.read_policy == Some(crate::config::ToolRule::Deny) {
            return Err(McpError::invalid_request(
                format!(
                    "Countersign did not complete arguments on {}: reading it is refused (rule: \
                     deny reading).",
                    self.server
                ),
                None,
            ));
        }
        let up = self.upstream(&ctx).await?;
        let (method, target, params) = match &request.r#ref {
            rmcp::model::Reference::Prompt(prompt) => {
                ("prompts/get", &prompt.name, json!({"name": prompt.name}))
            }
            rmcp::model::Reference::Resource(resource) => (
                "resources/read",
                &resource.uri,
                json!({"uri": resource.uri}),
            ),
            _ => {
                return Err(McpError::invalid_request(
                    "Countersign does not know what this completion reads, so it is not made",
                    None,
                ));
            }
        };
        self.refuse_completion(&up, &ctx, method, target, params)?;
        self.relay_on(
            up,
            ClientRequest::CompleteRequest(CompleteRequest::new(request)),
            ctx,
            |r| match r {
                ServerResult::CompleteResult(r) => Some(r),
                _ => None,
            },
        )
        .await
    }

    /// The agent's roots changed: told to its server where they reach it (this session's
    /// upstream declared roots, `agentRoots`), which then asks for them again. Elsewhere the
    /// server was offered none, so there is nothing to tell.
    async fn on_roots_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<RoleServer>,
    ) {
        let up = self.session_upstream.lock().await.clone();
        if let Some(up) = up
            && up.service.service().config.capabilities.roots.is_some()
            && let Err(e) = up.service.peer().notify_roots_list_changed().await
        {
            tracing::debug!(server = self.server, error = %e, "the agent's roots change was not told");
        }
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let level = request.level;
        self.relay(
            ClientRequest::SetLevelRequest(SetLevelRequest::new(request)),
            ctx,
            |_| Some(()),
        )
        .await?;
        self.level_set(level);
        Ok(())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let up = self.upstream(&ctx).await?;
        let params = json!({"uri": request.uri});
        let asked = self
            .gate_read(&up, &ctx, "resources/subscribe", &request.uri, params, true)
            .await?;
        let uri = request.uri.clone();
        let result = self
            .relay_on(
                up.clone(),
                ClientRequest::SubscribeRequest(SubscribeRequest::new(request)),
                ctx,
                |_| Some(()),
            )
            .await;
        if result.is_ok() {
            self.carried_out(asked);
            self.subscribed(&uri);
        }
        result
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let uri = request.uri.clone();
        self.relay(
            ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(request)),
            ctx,
            |_| Some(()),
        )
        .await?;
        self.unsubscribed(&uri);
        Ok(())
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

/// A denial, as the agent sees it: a tool result with `isError: true` that says why.
fn denied(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// What a cancelled request ends with (the agent no longer waits for it).
pub(crate) fn agent_cancelled() -> McpError {
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

/// What a forwarded call gives the agent.
pub(crate) enum CallAnswer {
    Typed(CallToolResult),
    /// The server's result, kept for the agent as the bytes it came in (`faithful::Kept`) and
    /// not read further; only the lane, which answers with those bytes, asks for this.
    Kept,
}

impl CallAnswer {
    /// A kept result that is no longer there: an error, never an answer made up in its place.
    pub(crate) fn lost() -> McpError {
        McpError::internal_error("the server's result was lost on its way to the agent", None)
    }
}

/// Has the agent get `raw` (shaped for its revision) in place of the typed result of its
/// request `ctx` (see `faithful`).
fn keep_raw(ctx: &RequestContext<RoleServer>, raw: Option<Box<RawValue>>) {
    if let Some(raw) = raw {
        super::faithful::Kept::keep(ctx, shape_result(raw, modern_agent(ctx)));
    }
}

/// What the agent is told when a request's rounds end without the server's answer.
fn halted_error(halt: Halt<McpError>, leaving: &Leaving) -> McpError {
    match halt {
        Halt::Failed(error) => error,
        Halt::Withdrawn => leaving.error(),
        Halt::Refused(why) => McpError::internal_error(why, None),
    }
}

/// The agent of request `ctx` speaks 2026-07-28 or later.
fn modern_agent(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}
