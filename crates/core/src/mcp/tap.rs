//! What a session's transport sees beside rmcp (`Tapped`), and what the session keeps from it
//! (`Tap`): a server's cancellations and completions, progress for the app's own calls,
//! notifications for a gateway agent, and the answers on their way out, recorded `delivered`
//! once the transport has taken them.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

// Roots are deprecated by SEP-2577 (2026-07-28), but 2025-11-25 servers still ask for them.
#[allow(deprecated)]
use rmcp::model::ListRootsResult;
use rmcp::model::{JsonRpcMessage, RequestId, ServerNotification};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::handler::ELICITATION_COMPLETE;
use super::origins::CallOrigins;
use crate::ask::broker::Broker;
use crate::ask::kill_point::{self, Step};
use crate::ask::{AskId, CancelReason, Withdrawal};
use crate::lock;

enum Slot {
    /// The request is being handled; the ask once opened, and the agent's cancellations it
    /// belongs to (gateway sessions).
    Open(Option<(AskId, Withdrawal)>),
    /// The server cancelled it before an ask was opened.
    Cancelled,
}

/// Where a gateway session passes on what the server says to its agent.
///
/// `origin`, where a method takes it, is our request on whose response stream the server's
/// request came (Streamable HTTP; see `RawRequests::origin_of`): the request it belongs to.
pub trait Relay: Send + Sync + 'static {
    /// A notification from the server (progress, logging, list changes, ...); cancellations
    /// are not passed on, they are the tap's.
    fn notify(&self, notification: &ServerNotification);
    /// Tokens that fire when the agent cancels (or abandons) the call a question belongs to,
    /// with the reason each stands for: the call `origin` names, else every call in flight.
    fn agent_cancel(&self, origin: Option<&RequestId>) -> Withdrawal;
    /// The agent's roots, when it declared that it offers them; `None` otherwise.
    #[allow(deprecated)]
    fn agent_roots(
        &self,
        _origin: Option<&RequestId>,
    ) -> Option<futures::future::BoxFuture<'static, Result<ListRootsResult, String>>> {
        None
    }
    /// Passes a sampling request to the agent, when it declared sampling; `None` otherwise.
    fn agent_sampler(&self, _origin: Option<&RequestId>) -> Option<crate::mcp::sampling::Sampler> {
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
    /// Fires per `elicitationId` when the server reports that URL question complete; with
    /// how many questions watch it (a server may reuse an id while the first is open).
    completions: Mutex<HashMap<String, (CancellationToken, usize)>>,
    /// Where progress for the app's own calls goes, by progress token.
    progress: Mutex<ProgressRoutes>,
    /// The app's own calls in flight, by number: a question the server asks meanwhile
    /// belongs to them, and is withdrawn as the caller's when one is cancelled.
    calls: Mutex<HashMap<u64, CancellationToken>>,
    /// The app's calls in flight by their request to the server (a question that came on that
    /// request's response stream belongs to that call alone), and those that were cancelled: a
    /// question the server sent on such a call's stream before it heard is withdrawn at once.
    origins: CallOrigins<CancellationToken>,
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
/// The largest progress notification kept before its route is made: progress is a number and
/// a line of text, and a server's megabytes would otherwise be held `UNCLAIMED_PROGRESS` times.
pub(crate) const MAX_UNCLAIMED_PROGRESS_BYTES: usize = 64 * 1024;

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
            origins: CallOrigins::default(),
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

    /// Call `call` went to the server as our request `upstream`.
    pub fn call_sent(&self, call: u64, upstream: &RequestId) {
        if lock(&self.calls).contains_key(&call) {
            self.origins.sent(call, upstream);
        }
    }

    pub fn call_ended(&self, call: u64) {
        let token = lock(&self.calls).remove(&call);
        self.origins
            .ended(call, token.filter(CancellationToken::is_cancelled));
    }

    /// The cancellations, as the caller's, of the app's own call a question belongs to: the
    /// one `origin` names (our request on whose response stream it came), else every call in
    /// flight (a question with nothing to tie it to goes when any is cancelled: the safe side).
    pub(super) fn app_calls(&self, origin: Option<&RequestId>) -> Withdrawal {
        if let Some(token) = self.origins.ended_early(origin) {
            // Sent before the server heard that the call it belongs to was cancelled.
            return Withdrawal::new().when(token, CancelReason::Agent);
        }
        let own_call = self.origins.call_of(origin);
        let calls = lock(&self.calls);
        if let Some(token) = own_call.and_then(|call| calls.get(&call)) {
            return Withdrawal::new().when(token.clone(), CancelReason::Agent);
        }
        let mut withdrawal = Withdrawal::new();
        for t in calls.values() {
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
                // Kept for a route about to be made; a large one is for none.
                if params.message.as_ref().map_or(0, String::len) > MAX_UNCLAIMED_PROGRESS_BYTES {
                    return;
                }
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
            completions.retain(|_, (token, _)| !token.is_cancelled());
        }
        let (token, watching) = completions.entry(elicitation_id.to_owned()).or_default();
        *watching += 1;
        token.clone()
    }

    /// One question stops watching for `elicitation_id`; the last to stop forgets it.
    pub fn forget_completion(&self, elicitation_id: &str) {
        let mut completions = self.completions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, watching)) = completions.get_mut(elicitation_id) {
            *watching = watching.saturating_sub(1);
            if *watching == 0 {
                completions.remove(elicitation_id);
            }
        }
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
            .map(|(token, _)| token.clone());
        if let Some(token) = token {
            token.cancel();
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A notification from the server: a withdrawal or a completion is the tap's, the rest
    /// goes to the agent (or, for the app's own calls, progress to the call).
    pub(crate) fn notified(&self, notification: &ServerNotification) {
        match notification {
            ServerNotification::CancelledNotification(c) => {
                if let Some(id) = &c.params.request_id {
                    self.server_cancelled(id);
                }
            }
            ServerNotification::CustomNotification(c) if c.method == ELICITATION_COMPLETE => {
                self.completed(c.params.as_ref());
            }
            ServerNotification::ProgressNotification(p) if self.relay.is_none() => {
                self.progressed(&p.params);
            }
            other => {
                if let Some(relay) = &self.relay {
                    relay.notify(other);
                }
            }
        }
    }

    /// A server's question `id` came: a cancellation of it from now on is seen.
    pub(crate) fn request_seen(&self, id: &RequestId) {
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
        // The question is over, however it was answered: also when rmcp refused it before any
        // handler saw it (a question tied to no request on a 2026-07-28 session), which leaves
        // its slot behind, one per question a server sends.
        self.slots().remove(id);
        self.answer_to(id)
    }

    /// The ask whose answer goes out under `id` now, if any.
    pub(crate) fn answer_to(&self, id: &RequestId) -> Option<AskId> {
        self.answering
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id)
    }

    /// The answer to question `id` was written to the server by other means than rmcp's
    /// transport (`mcp::direct`): its ask, if it had one, is on record as delivered.
    pub(crate) fn answer_written(&self, ask: Option<AskId>) {
        if let Some(ask) = ask {
            Tap::delivered(self.broker.audit(), ask);
        }
    }

    /// The answer to `ask` was taken by the transport: written to the server's stdin, or
    /// accepted by its endpoint. The log now says the answer reached the server.
    pub(crate) fn delivered(audit: &crate::ask::audit::AuditLog, ask: AskId) {
        kill_point::reached(Step::AfterSend);
        let _ = audit.record_delivered(ask);
        kill_point::reached(Step::AfterDelivered);
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
            if let (Ok(()), Some((ask, audit))) = (&sent, answer) {
                Tap::delivered(&audit, ask);
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
                Some(JsonRpcMessage::Request(request)) => {
                    if super::handler::is_elicitation(&request.request) {
                        tap.request_seen(&request.id);
                    }
                }
                Some(JsonRpcMessage::Notification(n)) => tap.notified(&n.notification),
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

    /// A question answered without reaching a handler (rmcp refusing it) leaves nothing behind.
    #[test]
    fn a_question_answered_by_a_refusal_leaves_no_slot() {
        let path = std::env::temp_dir().join(format!("cs-slots-{}.jsonl", std::process::id()));
        let tap = Tap::new(Broker::new(
            crate::ask::audit::AuditLog::open(&path).unwrap(),
        ));
        let _ = std::fs::remove_file(&path);
        for n in 0..100 {
            let id = RequestId::String(format!("q{n}").into());
            tap.request_seen(&id);
            let refusal = JsonRpcMessage::Error(rmcp::model::JsonRpcError::new(
                Some(id),
                rmcp::ErrorData::invalid_request("not tied to a request", None),
            ));
            assert_eq!(tap.answer_leaving(&refusal), None);
        }
        assert!(tap.slots().is_empty());
    }

    /// Two open URL questions of one server with the same `elicitationId`: the first to end
    /// does not stop the other's watch, so the server's "finished" still reaches the person.
    #[test]
    fn a_reused_elicitation_id_is_watched_until_its_last_question_ends() {
        let path = std::env::temp_dir().join(format!("cs-reused-{}.jsonl", std::process::id()));
        let tap = Tap::new(Broker::new(
            crate::ask::audit::AuditLog::open(&path).unwrap(),
        ));
        let _ = std::fs::remove_file(&path);
        let first = tap.completion("e1");
        let second = tap.completion("e1");
        tap.forget_completion("e1");
        tap.completed(Some(&serde_json::json!({"elicitationId": "e1"})));
        assert!(first.is_cancelled() && second.is_cancelled());
        tap.forget_completion("e1");
        assert!(
            !tap.completion("e1").is_cancelled(),
            "forgotten once both ended"
        );
    }

    #[test]
    fn a_question_is_the_run_whose_stream_carried_it_also_when_it_comes_after_the_cancel() {
        let path = std::env::temp_dir().join(format!("cs-runs-{}.jsonl", std::process::id()));
        let tap = Tap::new(Broker::new(
            crate::ask::audit::AuditLog::open(&path).unwrap(),
        ));
        let _ = std::fs::remove_file(&path);
        let upstream = |n: i64| RequestId::Number(n);
        let (cancel_first, cancel_second) = (CancellationToken::new(), CancellationToken::new());
        let first = tap.call_started(cancel_first.clone());
        tap.call_sent(first, &upstream(1));
        let second = tap.call_started(cancel_second.clone());
        tap.call_sent(second, &upstream(2));
        let seconds = tap.app_calls(Some(&upstream(2)));
        let unknown = tap.app_calls(None);

        cancel_first.cancel();
        tap.call_ended(first);
        assert_eq!(seconds.fired(), None, "the other run's question stays");
        assert_eq!(
            unknown.fired(),
            Some(CancelReason::Agent),
            "no origin: any run"
        );
        let late = tap.app_calls(Some(&upstream(1)));
        assert_eq!(late.fired(), Some(CancelReason::Agent), "withdrawn at once");

        tap.call_ended(second);
        assert_eq!(
            tap.app_calls(Some(&upstream(2))).fired(),
            None,
            "it was answered"
        );
    }

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
        // And a large one is kept for no route at all.
        let before = tap.progress.lock().unwrap().unclaimed.len();
        let large: rmcp::model::ProgressNotificationParam =
            serde_json::from_value(serde_json::json!({"progressToken": 9, "progress": 1,
                "message": "x".repeat(MAX_UNCLAIMED_PROGRESS_BYTES + 1)}))
            .unwrap();
        tap.progressed(&large);
        let unclaimed = &tap.progress.lock().unwrap().unclaimed;
        assert_eq!(unclaimed.len(), before);
        assert!(
            unclaimed
                .iter()
                .all(|p| p.progress_token != large.progress_token)
        );
    }
}
