//! The MCP client side of one session: what Countersign declares and how a server's
//! questions reach the broker.
//!
//! Legacy `elicitation/create` (2025-06-18, 2025-11-25), the same request parsed by rmcp as a
//! custom request (schemas outside rmcp's model), and multi round-trip input requests
//! (2026-07-28) all go through [`Elicitor::elicit`]. A server's `notifications/cancelled`
//! is caught by [`Tapped`], a transport wrapper, because rmcp drops cancellations on
//! sessions negotiated through `server/discover` and never tells the handler otherwise.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::ErrorData as McpError;
// Roots are deprecated by SEP-2577 (2026-07-28), but 2025-11-25 servers still ask for them.
#[allow(deprecated)]
use rmcp::model::ListRootsResult;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CustomRequest, CustomResult, ElicitRequestParams,
    ElicitResult, ElicitationCapability, FormElicitationCapability, Implementation, JsonRpcMessage,
    ProtocolVersion, RequestId, ServerNotification, ServerRequest, UrlElicitationCapability,
};
use rmcp::service::{RequestContext, RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::ask::broker::{Broker, NewAsk, OpenError};
use crate::ask::kill_point::{self, Step};
use crate::ask::schema;
use crate::ask::{AskId, AskKind, Asker, CancelReason, Withdrawal};
use crate::mcp::raw::RawRequests;

/// The method name of a server-to-client elicitation.
const ELICITATION_CREATE: &str = "elicitation/create";
/// A server saying the person finished what a URL question (or a URL-required error) sent
/// them to do (2025-11-25); rmcp does not model it.
const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";

/// What Countersign tells servers about itself.
pub fn client_config(protocol_version: ProtocolVersion) -> ClientConfig {
    let mut capabilities = ClientCapabilities::default();
    let mut elicitation = ElicitationCapability::default();
    // Countersign validates every answer against the schema before sending it.
    elicitation.form = Some(FormElicitationCapability::new().with_schema_validation(true));
    elicitation.url = Some(UrlElicitationCapability::new());
    capabilities.elicitation = Some(elicitation);
    let mut info = Implementation::default();
    info.name = "countersign".into();
    info.title = Some("Countersign".into());
    info.version = env!("CARGO_PKG_VERSION").into();
    let mut config = ClientConfig::default();
    config.protocol_version = protocol_version;
    config.capabilities = capabilities;
    config.client_info = info;
    config
}

/// Turns a server's question into an ask and the person's outcome into the reply.
#[derive(Clone)]
pub struct Elicitor {
    pub broker: Broker,
    pub asker: Asker,
    pub answer_timeout: Duration,
    pub session: u64,
}

impl Elicitor {
    /// Asks the person. `params` are the request's params as received (JSON);
    /// a `withdraw` token fires when the server (or the agent) no longer wants the answer,
    /// and the ask ends with its reason.
    /// Returns the `ElicitResult` as JSON, or -32602 for a request outside the supported
    /// schema subset, which is recorded and never shown.
    pub async fn elicit(
        &self,
        params: Value,
        withdraw: &Withdrawal,
        on_open: impl FnOnce(AskId),
    ) -> Result<Value, McpError> {
        let kind = match self.parse(&params) {
            Ok(kind) => kind,
            Err(reason) => {
                // Refused either way; a failure to record it is logged by the log.
                let _ = self
                    .broker
                    .audit()
                    .record_refused(&self.asker.server, &reason, &params);
                return Err(McpError::invalid_params(reason, None));
            }
        };
        let kind = match kind {
            AskKind::Url {
                message,
                url,
                elicitation_id,
                ..
            } => match crate::ask::url_policy::check(&url) {
                Ok(web) => AskKind::Url {
                    message,
                    url,
                    elicitation_id,
                    host: web.host,
                    warnings: web.warnings,
                },
                Err(reason) => {
                    // A well-formed request for an address we never open: a no, recorded,
                    // not shown.
                    let _ =
                        self.broker
                            .audit()
                            .record_refused(&self.asker.server, &reason, &params);
                    return Ok(serde_json::json!({"action": "decline"}));
                }
            },
            form => form,
        };
        let pending = self
            .broker
            .open(NewAsk {
                asker: self.asker.clone(),
                kind,
                request: params,
                timeout: Some(self.answer_timeout),
                session: self.session,
            })
            .map_err(too_many_open)?;
        on_open(pending.id());
        Ok(pending
            .outcome_or_withdraw(withdraw)
            .await
            .to_elicit_result())
    }

    /// Records that the answer to `ask` reached where it goes (see `AuditRecord::Delivered`).
    pub(crate) fn delivered(&self, ask: AskId) {
        kill_point::reached(Step::AfterSend);
        let _ = self.broker.audit().record_delivered(ask);
        kill_point::reached(Step::AfterDelivered);
    }

    fn parse(&self, params: &Value) -> Result<AskKind, String> {
        let Some(obj) = params.as_object() else {
            return Err("elicitation params must be an object".into());
        };
        let message = match obj.get("message") {
            Some(Value::String(m)) => m.clone(),
            _ => return Err("elicitation needs a string \"message\"".into()),
        };
        match obj.get("mode").and_then(Value::as_str).unwrap_or("form") {
            "form" => {
                let raw = obj
                    .get("requestedSchema")
                    .ok_or("form elicitation needs \"requestedSchema\"")?;
                let schema = schema::parse_form_schema(raw)
                    .map_err(|e| format!("unsupported requestedSchema: {e}"))?;
                Ok(AskKind::Form { message, schema })
            }
            "url" => {
                let url = match obj.get("url") {
                    Some(Value::String(u)) => u.clone(),
                    _ => return Err("URL elicitation needs a string \"url\"".into()),
                };
                let elicitation_id = obj
                    .get("elicitationId")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                // Host and warnings are filled in by the URL policy, in `elicit`.
                Ok(AskKind::Url {
                    message,
                    url,
                    elicitation_id,
                    host: String::new(),
                    warnings: Vec::new(),
                })
            }
            other => Err(format!("unknown elicitation mode \"{other}\"")),
        }
    }
}

/// A server over its limit of waiting questions gets -32603 (the client cannot take the request
/// now) with the limit in words and in `data.limit`; the broker has recorded the refusal.
pub(crate) fn too_many_open(error: OpenError) -> McpError {
    let data = match &error {
        OpenError::TooManyOpen { limit, .. } => serde_json::json!({"limit": limit}),
    };
    McpError::internal_error(error.to_string(), Some(data))
}

/// The rmcp client handler for one session.
pub struct Handler {
    pub elicitor: Elicitor,
    pub tap: Arc<Tap>,
    /// The requests as they were on the wire, where the transport can see them.
    pub raw: Arc<RawRequests>,
    pub config: ClientConfig,
}

impl Handler {
    async fn elicit_request(
        &self,
        params: Value,
        context: &RequestContext<RoleClient>,
    ) -> Result<Value, McpError> {
        // Withdrawn by rmcp's own token (initialize sessions) or by the tap (all sessions);
        // through the gateway also when the agent cancels the call it belongs to.
        let agent = match &self.tap.relay {
            Some(relay) => relay.agent_cancel(),
            // The app's own sessions: the calls in flight now (the person's runs).
            None => self.tap.app_calls(),
        };
        let mut withdraw = agent.clone();
        withdraw.add(context.ct.clone(), CancelReason::Server);
        let tap = self.tap.clone();
        let request_id = context.id.clone();
        // A URL question's completion is watched from before the person can open it.
        let completion = (params.get("mode").and_then(Value::as_str) == Some("url"))
            .then(|| params.get("elicitationId").and_then(Value::as_str))
            .flatten()
            .map(|id| (id.to_owned(), self.tap.completion(id)));
        let host = params
            .get("url")
            .and_then(Value::as_str)
            .and_then(|u| crate::ask::url_policy::check(u).ok())
            .map(|w| w.host);
        let mut opened = None;
        let result = self
            .elicitor
            .elicit(params, &withdraw, |ask| {
                opened = Some(ask);
                tap.link(&request_id, ask, agent)
            })
            .await;
        self.tap.unlink(&context.id);
        if let Some((id, done)) = completion {
            let accepted = result
                .as_ref()
                .is_ok_and(|r| r.get("action").and_then(Value::as_str) == Some("accept"));
            match (accepted, opened, host) {
                (true, Some(ask), Some(host)) => {
                    self.watch_completion(id, done, ask, host);
                }
                _ => self.tap.forget_completion(&id),
            }
        }
        result
    }

    /// Tells the person when the server reports finished what they opened, for as long as
    /// they had to answer (or until the session ends).
    fn watch_completion(&self, id: String, done: CancellationToken, ask: AskId, host: String) {
        let tap = self.tap.clone();
        let broker = self.elicitor.broker.clone();
        let server = self.elicitor.asker.server.clone();
        let wait = self.elicitor.answer_timeout;
        tokio::spawn(async move {
            tokio::select! {
                _ = done.cancelled() => broker.url_completed(ask, server, host),
                _ = tokio::time::sleep(wait) => {}
                _ = tap.closed.cancelled() => {}
            }
            tap.forget_completion(&id);
        });
    }
}

impl ClientHandler for Handler {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        // rmcp's typed model drops keywords it does not know; judge what was really sent.
        let params = match self.raw.take(&context.id) {
            Some(raw) => raw,
            None => serde_json::to_value(&request).map_err(|e| {
                McpError::internal_error(format!("cannot read the request: {e}"), None)
            })?,
        };
        let result = self.elicit_request(params, &context).await?;
        serde_json::from_value(result)
            .map_err(|e| McpError::internal_error(format!("cannot build the reply: {e}"), None))
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<CustomResult, McpError> {
        if request.method != ELICITATION_CREATE {
            return Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("Countersign does not handle {}", request.method),
                None,
            ));
        }
        // rmcp could not model this request (e.g. a schema outside the subset): it arrives raw.
        let params = self
            .raw
            .take(&context.id)
            .or(request.params)
            .unwrap_or(Value::Null);
        let result = self.elicit_request(params, &context).await?;
        Ok(CustomResult::new(result))
    }

    /// Through the gateway, to an agent that offers it, once the person allowed it; else
    /// refused with the reason (`crate::mcp::sampling`).
    #[allow(deprecated)]
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, McpError> {
        crate::mcp::sampling::create_message(self, params, context).await
    }

    /// Roots are a claim about the person's files: Countersign makes none of its own, and
    /// passes on only an agent's (gateway sessions of agents that declared roots).
    #[allow(deprecated)]
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, McpError> {
        match self.tap.relay.as_ref().and_then(|r| r.agent_roots()) {
            Some(roots) => roots.await.map_err(|e| {
                McpError::internal_error(format!("the agent did not give its roots: {e}"), None)
            }),
            None => Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "Countersign offers no roots",
                None,
            )),
        }
    }

    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }
}

enum Slot {
    /// The request is being handled; the ask once opened, and the agent's cancellations it
    /// belongs to (gateway sessions).
    Open(Option<(AskId, Withdrawal)>),
    /// The server cancelled it before an ask was opened.
    Cancelled,
}

/// Where a gateway session passes on what the server says to its agent.
pub trait Relay: Send + Sync + 'static {
    /// A notification from the server (progress, logging, list changes, ...); cancellations
    /// are not passed on, they are the tap's.
    fn notify(&self, notification: &ServerNotification);
    /// Tokens that fire when the agent cancels (or abandons) a call that is in flight now, with
    /// the reason each stands for: a question the server asks during a call belongs to it.
    fn agent_cancel(&self) -> Withdrawal;
    /// The agent's roots, when it declared that it offers them; `None` otherwise.
    #[allow(deprecated)]
    fn agent_roots(
        &self,
    ) -> Option<futures::future::BoxFuture<'static, Result<ListRootsResult, String>>> {
        None
    }
    /// Passes a sampling request to the agent, when it declared sampling; `None` otherwise.
    fn agent_sampler(&self) -> Option<crate::mcp::sampling::Sampler> {
        None
    }
}

/// URL questions whose completion a session watches at once, at most.
const MAX_WATCHED_COMPLETIONS: usize = 64;

/// Per-session bookkeeping of server requests, so a `notifications/cancelled` seen on the wire
/// withdraws the ask it names, whatever rmcp does with it.
pub struct Tap {
    slots: Mutex<HashMap<RequestId, Slot>>,
    broker: Broker,
    /// Fires when the transport stops delivering messages (process gone, stream closed).
    pub closed: CancellationToken,
    pub(crate) relay: Option<Arc<dyn Relay>>,
    /// Fires per `elicitationId` when the server reports that URL question complete.
    completions: Mutex<HashMap<String, CancellationToken>>,
    /// Where progress for the app's own calls goes, by progress token.
    progress: Mutex<ProgressRoutes>,
    /// The app's own calls in flight, by number: a question the server asks meanwhile
    /// belongs to them, and is withdrawn as the caller's when one is cancelled.
    calls: Mutex<HashMap<u64, CancellationToken>>,
    next_call: std::sync::atomic::AtomicU64,
    /// Answers on their way out, by the server's request id: the transport records each
    /// one delivered once it has taken it.
    answering: Mutex<HashMap<RequestId, AskId>>,
}

/// Answers awaiting their send, per session, at most. Past it the oldest are forgotten: their
/// outcome then reads "may not have reached the server", which is the cautious side.
const MAX_ANSWERING: usize = 1024;

/// Progress notifications kept for a route not registered yet, per session, at most.
const UNCLAIMED_PROGRESS: usize = 32;

/// Where progress goes, and what came before its route.
#[derive(Default)]
struct ProgressRoutes {
    sinks: HashMap<rmcp::model::ProgressToken, ProgressSink>,
    unclaimed: VecDeque<rmcp::model::ProgressNotificationParam>,
}

/// Receives a call's progress notifications (the server's numbers and message, as sent).
pub type ProgressSink = tokio::sync::mpsc::UnboundedSender<rmcp::model::ProgressNotificationParam>;

impl Tap {
    pub fn new(broker: Broker) -> Arc<Self> {
        Self::build(broker, None)
    }

    /// A tap that also hands the server's notifications to `relay`.
    pub fn with_relay(broker: Broker, relay: Arc<dyn Relay>) -> Arc<Self> {
        Self::build(broker, Some(relay))
    }

    fn build(broker: Broker, relay: Option<Arc<dyn Relay>>) -> Arc<Self> {
        Arc::new(Tap {
            slots: Mutex::default(),
            broker,
            closed: CancellationToken::new(),
            relay,
            completions: Mutex::default(),
            progress: Mutex::default(),
            calls: Mutex::default(),
            next_call: std::sync::atomic::AtomicU64::new(0),
            answering: Mutex::default(),
        })
    }

    /// Registers one of the app's own calls in flight; `cancel` fires when it is cancelled.
    pub fn call_started(&self, cancel: CancellationToken) -> u64 {
        let n = self
            .next_call
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(n, cancel);
        n
    }

    pub fn call_ended(&self, call: u64) {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&call);
    }

    /// The cancellations of the app's own calls in flight, as the caller's.
    fn app_calls(&self) -> Withdrawal {
        let mut withdrawal = Withdrawal::new();
        for t in self
            .calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            withdrawal.add(t.clone(), CancelReason::Agent);
        }
        withdrawal
    }

    /// Sends the progress the server reports under `token` to `sink`, until
    /// [`Self::forget_progress`]. Progress that came before the route (a quick server can
    /// report before the request's sender has its token) is handed over at once.
    pub fn route_progress(&self, token: rmcp::model::ProgressToken, sink: ProgressSink) {
        let mut routes = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        let (early, rest): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut routes.unclaimed)
            .into_iter()
            .partition(|p: &rmcp::model::ProgressNotificationParam| p.progress_token == token);
        routes.unclaimed = rest;
        for params in early {
            let _ = sink.send(params);
        }
        routes.sinks.insert(token, sink);
    }

    pub fn forget_progress(&self, token: &rmcp::model::ProgressToken) {
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .sinks
            .remove(token);
    }

    fn progressed(&self, params: &rmcp::model::ProgressNotificationParam) {
        let mut routes = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        match routes.sinks.get(&params.progress_token) {
            Some(sink) => {
                let _ = sink.send(params.clone());
            }
            None => {
                if routes.unclaimed.len() >= UNCLAIMED_PROGRESS {
                    routes.unclaimed.pop_front();
                }
                routes.unclaimed.push_back(params.clone());
            }
        }
    }

    /// Fires when the server sends `notifications/elicitation/complete` for `elicitation_id`
    /// (from now on; ask before the person can finish). Capped: a server cannot make the
    /// session keep unbounded ids.
    pub fn completion(&self, elicitation_id: &str) -> CancellationToken {
        let mut completions = self.completions.lock().unwrap_or_else(|e| e.into_inner());
        if completions.len() >= MAX_WATCHED_COMPLETIONS {
            completions.retain(|_, token| !token.is_cancelled());
        }
        completions
            .entry(elicitation_id.to_owned())
            .or_default()
            .clone()
    }

    /// Stops watching for `elicitation_id`.
    pub fn forget_completion(&self, elicitation_id: &str) {
        self.completions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(elicitation_id);
    }

    fn completed(&self, params: Option<&Value>) {
        let Some(id) = params
            .and_then(|p| p.get("elicitationId"))
            .and_then(Value::as_str)
        else {
            return;
        };
        let token = self
            .completions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned();
        if let Some(token) = token {
            token.cancel();
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn request_seen(&self, id: &RequestId) {
        self.slots().insert(id.clone(), Slot::Open(None));
    }

    fn server_cancelled(&self, id: &RequestId) {
        let ask = {
            let mut slots = self.slots();
            match slots.get_mut(id) {
                Some(Slot::Open(Some((ask, agent)))) => Some((*ask, agent.clone())),
                Some(slot) => {
                    *slot = Slot::Cancelled;
                    None
                }
                None => None,
            }
        };
        if let Some((ask, agent)) = ask {
            // A server that withdraws because the agent cancelled the call is only echoing the
            // agent: say who really ended it.
            self.broker.withdraw(ask, agent.server_withdrew());
        }
    }

    pub(crate) fn link(&self, id: &RequestId, ask: AskId, agent: Withdrawal) {
        let cancelled_already = {
            let mut slots = self.slots();
            match slots.get(id) {
                Some(Slot::Cancelled) => true,
                _ => {
                    slots.insert(id.clone(), Slot::Open(Some((ask, agent.clone()))));
                    false
                }
            }
        };
        if cancelled_already {
            // The server's withdrawal overtook the ask's opening. If it only echoes the
            // caller's cancellation (which prompted it), the caller's is the true reason.
            self.broker.withdraw(ask, agent.server_withdrew());
        }
    }

    /// The question `id` is answered: its answer is what goes out next under that id.
    pub(crate) fn unlink(&self, id: &RequestId) {
        let Some(Slot::Open(Some((ask, _)))) = self.slots().remove(id) else {
            return;
        };
        let mut answering = self.answering.lock().unwrap_or_else(|e| e.into_inner());
        if answering.len() >= MAX_ANSWERING {
            answering.clear();
        }
        answering.insert(id.clone(), ask);
    }

    /// The ask whose answer this outgoing response carries, if any.
    fn answer_leaving(&self, message: &TxJsonRpcMessage<RoleClient>) -> Option<AskId> {
        let id = match message {
            JsonRpcMessage::Response(response) => &response.id,
            JsonRpcMessage::Error(error) => error.id.as_ref()?,
            _ => return None,
        };
        self.answering
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id)
    }
}

/// A transport that reports to a [`Tap`] what it receives.
pub struct Tapped<T> {
    pub inner: T,
    pub tap: Arc<Tap>,
}

impl<T> Transport<RoleClient> for Tapped<T>
where
    T: Transport<RoleClient>,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answer = self
            .tap
            .answer_leaving(&item)
            .map(|ask| (ask, self.tap.broker.audit().clone()));
        let sending = self.inner.send(item);
        async move {
            let sent = sending.await;
            // Taken by the transport: written to the server's stdin, or accepted by its
            // endpoint. The log now says the answer reached the server.
            if let (Ok(()), Some((ask, audit))) = (&sent, answer) {
                kill_point::reached(Step::AfterSend);
                let _ = audit.record_delivered(ask);
                kill_point::reached(Step::AfterDelivered);
            }
            sent
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        let tap = self.tap.clone();
        let next = self.inner.receive();
        async move {
            let message = next.await;
            match &message {
                None => tap.closed.cancel(),
                // Only questions are tracked (and untracked when answered); a slot per ping
                // would grow for the life of the session.
                Some(JsonRpcMessage::Request(request)) => match &request.request {
                    ServerRequest::ElicitRequest(_) => tap.request_seen(&request.id),
                    ServerRequest::CustomRequest(custom) if custom.method == ELICITATION_CREATE => {
                        tap.request_seen(&request.id)
                    }
                    _ => {}
                },
                Some(JsonRpcMessage::Notification(n)) => match &n.notification {
                    ServerNotification::CancelledNotification(c) => {
                        if let Some(id) = &c.params.request_id {
                            tap.server_cancelled(id);
                        }
                    }
                    ServerNotification::CustomNotification(c)
                        if c.method == ELICITATION_COMPLETE =>
                    {
                        tap.completed(c.params.as_ref());
                    }
                    ServerNotification::ProgressNotification(p) if tap.relay.is_none() => {
                        tap.progressed(&p.params);
                    }
                    other => {
                        if let Some(relay) = &tap.relay {
                            relay.notify(other);
                        }
                    }
                },
                Some(_) => {}
            }
            message
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.tap.closed.cancel();
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_that_beats_its_route_is_handed_over_when_the_route_comes() {
        let tap = Tap::new(Broker::new(
            crate::ask::audit::AuditLog::open(
                std::env::temp_dir().join(format!("cs-progress-{}.jsonl", std::process::id())),
            )
            .unwrap(),
        ));
        let early: rmcp::model::ProgressNotificationParam = serde_json::from_value(
            serde_json::json!({"progressToken": 7, "progress": 1, "total": 2}),
        )
        .unwrap();
        let other: rmcp::model::ProgressNotificationParam =
            serde_json::from_value(serde_json::json!({"progressToken": 8, "progress": 5})).unwrap();
        tap.progressed(&early);
        tap.progressed(&other);
        let (sink, mut got) = tokio::sync::mpsc::unbounded_channel();
        tap.route_progress(early.progress_token.clone(), sink);
        assert_eq!(got.try_recv().unwrap(), early);
        assert!(
            got.try_recv().is_err(),
            "another call's progress is not this one's"
        );
        let later: rmcp::model::ProgressNotificationParam = serde_json::from_value(
            serde_json::json!({"progressToken": 7, "progress": 2, "total": 2}),
        )
        .unwrap();
        tap.progressed(&later);
        assert_eq!(got.try_recv().unwrap(), later);
        // The unclaimed are capped: a server reporting for nobody holds nothing more.
        for n in 0..100 {
            let p: rmcp::model::ProgressNotificationParam = serde_json::from_value(
                serde_json::json!({"progressToken": 1000 + n, "progress": 1}),
            )
            .unwrap();
            tap.progressed(&p);
        }
        assert!(tap.progress.lock().unwrap().unclaimed.len() <= UNCLAIMED_PROGRESS);
    }
    use crate::ask::Endpoint;
    use crate::ask::audit::{AuditLog, AuditRecord};
    use serde_json::json;

    fn elicitor(test: &str) -> (Elicitor, std::path::PathBuf) {
        let path =
            std::env::temp_dir().join(format!("cs-handler-{test}-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let elicitor = Elicitor {
            broker: Broker::new(AuditLog::open(&path).unwrap()),
            asker: Asker {
                server: "s".into(),
                endpoint: Endpoint::Stdio {
                    command: "s".into(),
                },
                agent: None,
                declared: None,
            },
            answer_timeout: Duration::from_secs(5),
            session: 1,
        };
        (elicitor, path)
    }

    #[tokio::test]
    async fn urls_that_are_never_opened_are_declined_without_asking() {
        let (elicitor, path) = elicitor("bad-url");
        let never = CancellationToken::new();
        for url in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "data:text/html,hi",
        ] {
            let params =
                json!({"mode": "url", "message": "Sign in", "url": url, "elicitationId": "e1"});
            let reply = elicitor
                .elicit(
                    params,
                    &Withdrawal::new().when(never.clone(), CancelReason::Server),
                    |_| panic!("{url} was shown"),
                )
                .await
                .unwrap();
            assert_eq!(reply, json!({"action": "decline"}));
        }
        assert!(elicitor.broker.pending().is_empty());
        let (records, _) = crate::ask::audit::read_history(&path).unwrap();
        assert_eq!(records.len(), 3);
        assert!(records.iter().all(
            |r| matches!(r, AuditRecord::Refused { reason, .. } if reason.contains("never opened"))
        ));
    }

    #[tokio::test]
    async fn a_malformed_request_is_invalid_params_with_the_reason() {
        let (elicitor, _) = elicitor("malformed");
        let never = CancellationToken::new();
        for (params, reason) in [
            (json!({"mode": "form"}), "message"),
            (json!({"message": "m", "mode": "telepathy"}), "telepathy"),
            (
                json!({"message": "m", "requestedSchema": {"type": "object", "properties": {"a": {"type": "object"}}}}),
                "properties.a",
            ),
        ] {
            let err = elicitor
                .elicit(
                    params,
                    &Withdrawal::new().when(never.clone(), CancelReason::Server),
                    |_| panic!("shown"),
                )
                .await
                .unwrap_err();
            assert_eq!(err.code, rmcp::model::ErrorCode::INVALID_PARAMS);
            assert!(err.message.contains(reason), "{}", err.message);
        }
    }

    #[tokio::test]
    async fn a_question_past_the_servers_limit_is_an_error_naming_it() {
        let (mut elicitor, path) = elicitor("limit");
        elicitor.broker = Broker::with_max_open_per_server(AuditLog::open(&path).unwrap(), 1);
        let never = CancellationToken::new();
        let params = json!({"message": "Name?", "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}}});
        let first = {
            let elicitor = elicitor.clone();
            let params = params.clone();
            let never = never.clone();
            tokio::spawn(async move {
                elicitor
                    .elicit(
                        params,
                        &Withdrawal::new().when(never, CancelReason::Server),
                        |_| {},
                    )
                    .await
            })
        };
        while elicitor.broker.pending().is_empty() {
            tokio::task::yield_now().await;
        }
        let err = elicitor
            .elicit(
                params,
                &Withdrawal::new().when(never.clone(), CancelReason::Server),
                |_| panic!("shown past the limit"),
            )
            .await
            .unwrap_err();
        assert_eq!(err.code, rmcp::model::ErrorCode::INTERNAL_ERROR);
        assert_eq!(
            err.message,
            "Countersign: s already has 1 question waiting; answer or decline some first"
        );
        assert_eq!(err.data, Some(json!({"limit": 1})));
        assert_eq!(elicitor.broker.pending().len(), 1);
        first.abort();
    }
}
