//! The agent side of an upstream session: where the server's notifications go (progress to
//! the request it belongs to), the agent's roots and sampling offered to the server, and how
//! an agent's request ends before its answer (cancelled, or the agent gone).

use std::collections::VecDeque;

use rmcp::model::{ProgressNotification, RequestId};

use super::*;
use crate::gateway::lane::{Backlog, LaneStream};
use crate::mcp::origins::CallOrigins;

/// A notification on its way to the agent: to the request it belongs to (progress), or to the
/// agent's session; a progress notification's params also as the server sent them (under the
/// agent's token), where they were read off the wire.
pub(super) type Outgoing = (
    Option<ProgressTo>,
    ServerNotification,
    Option<Box<RawValue>>,
);

/// A progress notification, and its params as sent when they were read off the wire.
type Progress = (ProgressNotification, Option<Box<RawValue>>);

/// Where a request's progress goes: through the agent's peer (rmcp puts it on the request's
/// stream), or onto the stream the lane answers that request with (in the request's context).
#[derive(Clone)]
pub(crate) enum ProgressTo {
    Peer(Peer<RoleServer>),
    Lane(LaneStream),
}

impl ProgressTo {
    /// Where the progress of request `ctx` goes.
    pub(super) fn of(ctx: &RequestContext<RoleServer>) -> Self {
        ctx.extensions
            .get::<ProgressTo>()
            .cloned()
            .unwrap_or_else(|| ProgressTo::Peer(ctx.peer.clone()))
    }

    /// The lane stream request `ctx` is answered on, if it is.
    pub(super) fn lane(ctx: &RequestContext<RoleServer>) -> Option<LaneStream> {
        match ctx.extensions.get::<ProgressTo>() {
            Some(ProgressTo::Lane(stream)) => Some(stream.clone()),
            _ => None,
        }
    }
}

/// The agent side of an upstream session: where its notifications go, and which of the
/// agent's calls are in flight (a question asked now belongs to them).
pub(crate) struct AgentRelay {
    /// Each notification with its size, counted in [`Self::backlog`] until it is passed on.
    tx: mpsc::UnboundedSender<(Outgoing, usize)>,
    backlog: Backlog,
    /// The agent's session, for notifications not tied to a request (session agents only).
    pub(super) agent: Mutex<Option<Peer<RoleServer>>>,
    progress: Mutex<ProgressRoutes>,
    /// In-flight calls: each call's two withdraw tokens (the agent cancelled it, the agent
    /// went away), which every question asked during it holds a clone of. One pair a call,
    /// whatever the server asks: a token a question made the call's list grow with every
    /// question, for as long as the call lasts.
    calls: Mutex<HashMap<u64, Withdrawal>>,
    /// The in-flight calls answered on a lane stream, by call.
    lanes: Mutex<HashMap<u64, LaneStream>>,
    /// The calls in flight by their request upstream (a server's request that came on that
    /// request's response stream belongs to that call alone), and those the agent cancelled or
    /// abandoned, with the reason: a question the server sent on such a call's stream before
    /// it heard is withdrawn at once.
    origins: CallOrigins<CancelReason>,
    /// Fired when the agent's session ends (it said so, or it went quiet): its questions go
    /// with it, also those asked between its requests (a task's, while it polls).
    left: CancellationToken,
    next_call: AtomicU64,
    /// Notifications handed to the relaying task, and how many it has passed on: a result
    /// waits for the progress that came before it (see [`Self::caught_up`]).
    queued: AtomicU64,
    pub(super) passed: tokio::sync::watch::Sender<u64>,
}

/// Bytes of the server's notifications on their way to the agent, at most: an agent whose
/// session does not take them (its stream stalled) has the server's further ones dropped,
/// where they would pile up in the gateway's memory for as long as the server sends them.
const BACKLOG: usize = 16 * 1024 * 1024;

/// How long a result waits for the notifications before it to reach the agent's session.
const CATCH_UP: std::time::Duration = std::time::Duration::from_secs(1);

/// Progress notifications kept for a route not registered yet, per upstream session, at most.
const UNCLAIMED_PROGRESS: usize = 32;

/// Tasks whose progress is still routed, per upstream session, at most: past it the oldest
/// task's progress stops reaching the agent (a task the agent never followed to its end).
const TASK_ROUTES: usize = 64;

/// Where the upstream's progress goes (to the agent's request, under its own token), and what came
/// before its route: rmcp hands over the request's token only once the request is sent, and
/// a quick server reports progress before that.
#[derive(Default)]
struct ProgressRoutes {
    routes: HashMap<ProgressToken, (ProgressTo, ProgressToken)>,
    unclaimed: VecDeque<Progress>,
    /// Routes that outlived their call, by the task the call created, oldest first.
    tasks: VecDeque<(String, ProgressToken)>,
}

impl AgentRelay {
    pub(super) fn new() -> (Arc<Self>, mpsc::UnboundedReceiver<(Outgoing, usize)>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let relay = Arc::new(AgentRelay {
            tx,
            backlog: Backlog::default(),
            agent: Mutex::default(),
            progress: Mutex::default(),
            calls: Mutex::default(),
            lanes: Mutex::default(),
            origins: CallOrigins::default(),
            left: CancellationToken::new(),
            next_call: AtomicU64::new(1),
            queued: AtomicU64::new(0),
            passed: tokio::sync::watch::Sender::new(0),
        });
        (relay, rx)
    }

    /// Sends the upstream's progress under `upstream` to `to` (the agent's request and token)
    /// until [`Self::forget_progress`]; what came before is handed over now. Without `to`
    /// (the agent asked for no progress), what came early is dropped.
    pub(super) fn route_progress(
        &self,
        upstream: &ProgressToken,
        to: Option<(ProgressTo, ProgressToken)>,
    ) {
        let mut progress = lock(&self.progress);
        let (early, rest): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut progress.unclaimed)
            .into_iter()
            .partition(|(n, _)| &n.params.progress_token == upstream);
        progress.unclaimed = rest;
        let Some((to, token)) = to else { return };
        for (n, sent) in early {
            self.queue(to_agent(n, sent, &to, &token));
        }
        progress.routes.insert(upstream.clone(), (to, token));
    }

    fn queue(&self, outgoing: Outgoing) {
        let size = match &outgoing.2 {
            Some(params) => params.get().len(),
            None => serde_json::to_vec(&outgoing.1).map_or(0, |v| v.len()),
        };
        if !self.backlog.admit(size, BACKLOG) {
            tracing::warn!(
                bytes = size,
                "gateway: a notification dropped: the agent is not taking its session's"
            );
            return;
        }
        if self.tx.send((outgoing, size)).is_ok() {
            self.queued.fetch_add(1, Ordering::AcqRel);
        } else {
            self.backlog.taken(size);
        }
    }

    /// A notification of `size` bytes was passed on (or could not be).
    pub(super) fn passed_on(&self, size: usize) {
        self.backlog.taken(size);
        self.passed.send_modify(|n| *n += 1);
    }

    /// Waits (a moment at most) until every notification queued so far has reached the
    /// agent's session. The server sends a request's progress before its result, and both go
    /// to the agent on that request's stream; the progress travels through the relaying task,
    /// so without this the result could overtake it and close the stream first.
    pub(super) async fn caught_up(&self) {
        let target = self.queued.load(Ordering::Acquire);
        let mut passed = self.passed.subscribe();
        let _ = tokio::time::timeout(CATCH_UP, passed.wait_for(|n| *n >= target)).await;
    }

    pub(super) fn forget_progress(&self, upstream: &ProgressToken) {
        lock(&self.progress).routes.remove(upstream);
    }

    /// Keeps the route of a call's progress for the task the call created: in 2025-11-25 a
    /// task's progress goes on under the call's token until the task ends, long after the
    /// call's answer.
    pub(super) fn keep_progress_for_task(&self, task: &str, upstream: &ProgressToken) {
        let mut progress = lock(&self.progress);
        let ProgressRoutes { routes, tasks, .. } = &mut *progress;
        if tasks.len() >= TASK_ROUTES
            && let Some((_, oldest)) = tasks.pop_front()
        {
            routes.remove(&oldest);
        }
        tasks.push_back((task.to_owned(), upstream.clone()));
    }

    /// Task `task` has ended: its progress is over.
    pub(super) fn task_ended(&self, task: &str) {
        let mut progress = lock(&self.progress);
        let ProgressRoutes { routes, tasks, .. } = &mut *progress;
        tasks.retain(|(t, upstream)| {
            let ended = t == task;
            if ended {
                routes.remove(upstream);
            }
            !ended
        });
    }

    /// A call of the agent's starts; `lane` is the stream it is answered on, if it is.
    pub(super) fn call_started(&self, lane: Option<LaneStream>) -> u64 {
        let id = self.next_call.fetch_add(1, Ordering::Relaxed);
        if let Some(stream) = lane {
            lock(&self.lanes).insert(id, stream);
        }
        let withdrawal = Withdrawal::new()
            .when(CancellationToken::new(), CancelReason::Agent)
            .when(CancellationToken::new(), CancelReason::AgentGone)
            .when(CancellationToken::new(), CancelReason::Paused);
        lock(&self.calls).insert(id, withdrawal);
        id
    }

    /// Whether any of the agent's calls is in flight.
    pub(super) fn calls_in_flight(&self) -> bool {
        !lock(&self.calls).is_empty()
    }

    /// Call `id` went upstream as our request `upstream`.
    pub(super) fn call_sent(&self, id: u64, upstream: &RequestId) {
        if lock(&self.calls).contains_key(&id) {
            self.origins.sent(id, upstream);
        }
    }

    /// The call ended: cancelled (or abandoned) by the agent withdraws its questions with that
    /// reason; otherwise they are the server's to end.
    pub(super) fn call_ended(&self, id: u64, left: Option<CancelReason>) {
        self.origins.ended(id, left);
        lock(&self.lanes).remove(&id);
        let withdrawal = lock(&self.calls).remove(&id).unwrap_or_default();
        if let Some(left) = left {
            withdrawal.fire(left);
        }
    }
}

impl AgentRelay {
    /// A progress notification `message` as the server wrote it (one JSON-RPC message), read
    /// off the wire by the gateway rather than by rmcp: it reaches the agent as sent but for
    /// the token. False when `message` is not a progress notification (nothing was done).
    pub(super) fn progress_sent(&self, message: &[u8]) -> bool {
        #[derive(serde::Deserialize)]
        struct Sent<'a> {
            #[serde(borrow)]
            method: std::borrow::Cow<'a, str>,
            #[serde(borrow)]
            params: Option<&'a RawValue>,
            id: Option<serde::de::IgnoredAny>,
        }
        let Ok(Sent {
            method,
            params: Some(params),
            id: None,
        }) = serde_json::from_slice::<Sent>(message)
        else {
            return false;
        };
        if method != "notifications/progress" {
            return false;
        }
        // Read as rmcp reads it, which drops what does not read.
        if let Ok(typed) = serde_json::from_str(params.get()) {
            self.progress(ProgressNotification::new(typed), Some(params.to_owned()));
        }
        true
    }

    /// Progress is routed now, while the call is surely still in flight: the server sends it
    /// before its result, and the route goes when the result is in.
    fn progress(&self, n: ProgressNotification, sent: Option<Box<RawValue>>) {
        let mut progress = lock(&self.progress);
        let outgoing = match progress.routes.get(&n.params.progress_token) {
            Some((to, token)) => to_agent(n, sent, to, token),
            None => {
                // Kept for a route about to be made; a large one is for none (progress is a
                // number and a line of text), and 32 of them would be held twice over.
                let size = sent.as_ref().map_or_else(
                    || n.params.message.as_ref().map_or(0, String::len),
                    |sent| sent.get().len(),
                );
                if size > crate::mcp::tap::MAX_UNCLAIMED_PROGRESS_BYTES {
                    return;
                }
                if progress.unclaimed.len() >= UNCLAIMED_PROGRESS {
                    progress.unclaimed.pop_front();
                }
                progress.unclaimed.push_back((n, sent));
                return;
            }
        };
        drop(progress);
        self.queue(outgoing);
    }
}

/// How long a server's question of an agent's roots waits for the agent: roots need no person,
/// so an agent that has not answered by then will not (its session stream closed, say).
const AGENT_ROOTS_WAIT: Duration = Duration::from_secs(60);

impl Relay for AgentRelay {
    fn notify(&self, notification: &ServerNotification) {
        match notification {
            ServerNotification::ProgressNotification(n) => self.progress(n.clone(), None),
            other => self.queue((None, other.clone(), None)),
        }
    }

    #[allow(deprecated)]
    fn agent_roots(
        &self,
        origin: Option<&RequestId>,
    ) -> Option<futures::future::BoxFuture<'static, Result<rmcp::model::ListRootsResult, String>>>
    {
        let agent = lock(&self.agent).clone()?;
        agent.peer_info()?.capabilities.roots.as_ref()?;
        let lane = self.lane_for(origin);
        let asked = async move {
            // The call may end before the agent answers (`StreamEnded`): a server's question of
            // the agent's roots (taken for the call's over stdio, where the wire does not say,
            // but maybe asked after a change of them) is then asked again on the session. Left
            // unanswered, the server would keep the roots it had, maybe wider than the agent's.
            if let Some(lane) = lane
                && let Ok(answer) = lane.request("roots/list", json!({})).await
            {
                let answer = answer.map_err(|e| e.to_string())?;
                return serde_json::from_value(answer)
                    .map_err(|e| format!("the agent's answer is not a list of roots: {e}"));
            }
            agent.list_roots().await.map_err(|e| e.to_string())
        };
        Some(Box::pin(async move {
            tokio::time::timeout(AGENT_ROOTS_WAIT, asked)
                .await
                .unwrap_or_else(|_| Err("the agent did not answer in time".into()))
        }))
    }

    fn agent_sampler(&self, origin: Option<&RequestId>) -> Option<crate::mcp::sampling::Sampler> {
        let agent = lock(&self.agent).clone()?;
        agent.peer_info()?.capabilities.sampling.as_ref()?;
        let lane = self.lane_for(origin);
        Some(Box::new(move |params| {
            Box::pin(async move {
                if let Some(lane) = lane {
                    return sample_on(&lane, params).await;
                }
                agent.create_message(params).await.map_err(|e| match e {
                    rmcp::ServiceError::McpError(e) => e,
                    other => McpError::internal_error(
                        format!("the agent did not answer the sampling request: {other}"),
                        None,
                    ),
                })
            })
        }))
    }

    fn agent_cancel(&self, origin: Option<&RequestId>) -> Withdrawal {
        if let Some(reason) = self.origins.ended_early(origin) {
            // Sent before the server heard that the agent cancelled the call it belongs to.
            let ended = CancellationToken::new();
            ended.cancel();
            return Withdrawal::new().when(ended, reason);
        }
        let own_call = self.origins.call_of(origin);
        let calls = lock(&self.calls);
        let mut withdrawal = if let Some(call) = own_call.and_then(|call| calls.get(&call)) {
            // Asked on that call's own stream: the question is that call's alone.
            call.clone()
        } else {
            // Without a call to tie it to, a question belongs to every call in flight;
            // cancelling any of them withdraws it (a no, which is the safe side).
            let mut shared = Withdrawal::new();
            calls.values().for_each(|w| shared.join(w));
            shared
        };
        drop(calls);
        // Not joined to the calls: one call ending must not end the session's.
        withdrawal.add(self.left.clone(), CancelReason::AgentGone);
        withdrawal
    }
}

impl AgentRelay {
    /// The agent's session has ended: what it was asked to wait for is withdrawn as the
    /// agent's, before its upstream session closes (which the server would end them for).
    pub(super) fn agent_left(&self) {
        self.left.cancel();
    }

    /// Where a server's request goes to the agent: on the lane stream of the call it belongs to
    /// (the transport's SHOULD), when that call is answered on one. That is the call on whose
    /// upstream stream it came (`origin`), else the one call in flight: over stdio the 2025
    /// wire does not say which call a server's request belongs to. With none (or several and
    /// no origin) it goes to the agent's session, which puts it on its own stream.
    fn lane_for(&self, origin: Option<&RequestId>) -> Option<LaneStream> {
        if origin.is_some() {
            // Never another call's stream: a call that has ended leaves it to the session.
            let call = self.origins.call_of(origin)?;
            return lock(&self.lanes).get(&call).cloned();
        }
        self.sole_call_on_a_lane()
    }

    fn sole_call_on_a_lane(&self) -> Option<LaneStream> {
        let calls = lock(&self.calls);
        let mut ids = calls.keys();
        let (Some(only), None) = (ids.next(), ids.next()) else {
            return None;
        };
        lock(&self.lanes).get(only).cloned()
    }
}

/// A sampling request put to the agent on its call's lane stream.
async fn sample_on(
    lane: &LaneStream,
    params: rmcp::model::CreateMessageRequestParams,
) -> Result<rmcp::model::CreateMessageResult, McpError> {
    let params = serde_json::to_value(&params)
        .map_err(|e| McpError::internal_error(format!("Countersign: {e}"), None))?;
    // The agent's own error (its person declined, say) goes to the server as the agent said it,
    // as through rmcp's peer.
    let answer = lane
        .request("sampling/createMessage", params)
        .await
        .map_err(|ended| {
            McpError::internal_error(
                format!("the agent did not answer the sampling request: {ended}"),
                None,
            )
        })??;
    serde_json::from_value(answer).map_err(|e| {
        McpError::internal_error(
            format!("the agent's answer to the sampling request is not a sampling result: {e}"),
            None,
        )
    })
}

/// The upstream's progress as the agent's: under the token the agent chose, to its request.
/// Its params as sent keep every other member as the bytes they came in; params whose members
/// do not read one by one go as rmcp read them.
fn to_agent(
    mut n: ProgressNotification,
    sent: Option<Box<RawValue>>,
    to: &ProgressTo,
    token: &ProgressToken,
) -> Outgoing {
    let sent = sent.and_then(|params| {
        let token = serde_json::value::to_raw_value(token).ok()?;
        crate::gateway::faithful::with_member(&params, "progressToken", token)
    });
    n.params.progress_token = token.clone();
    (
        Some(to.clone()),
        ServerNotification::ProgressNotification(n),
        sent,
    )
}

/// How an agent's request ends before its answer: the agent cancels it, or goes away (its
/// HTTP response stream closed; see `gone`), which rmcp does not notice on session-keeping
/// connections until the session idles out.
pub(super) struct Leaving {
    cancelled: CancellationToken,
    gone: Option<CancellationToken>,
    /// The person paused the gateway (`gateway::Paused`).
    paused: Option<CancellationToken>,
}

impl Leaving {
    pub(super) fn of(ctx: &RequestContext<RoleServer>) -> Self {
        Leaving {
            cancelled: ctx.ct.clone(),
            gone: crate::gateway::gone::token(ctx),
            paused: crate::gateway::Paused::of(ctx),
        }
    }

    /// How a question that belongs to this request is withdrawn.
    pub(super) fn withdraw(&self) -> Withdrawal {
        let withdrawal = Withdrawal::new().when(self.cancelled.clone(), CancelReason::Agent);
        let withdrawal = match &self.gone {
            Some(gone) => withdrawal.when(gone.clone(), CancelReason::AgentGone),
            None => withdrawal,
        };
        match &self.paused {
            Some(paused) => withdrawal.when(paused.clone(), CancelReason::Paused),
            None => withdrawal,
        }
    }

    /// What the agent is told of its request ended this way: a pause is the person's, and
    /// the agent still waits to hear it.
    pub(super) fn error(&self) -> McpError {
        match self.reason() {
            Some(CancelReason::Paused) => crate::gateway::paused_error(),
            _ => super::agent_cancelled(),
        }
    }

    /// How the request ended, if it has.
    pub(super) fn reason(&self) -> Option<CancelReason> {
        self.withdraw().fired()
    }

    /// Waits until the request ends before its answer, and says how.
    pub(super) async fn left(&self) -> CancelReason {
        self.withdraw().fires().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that floods an agent that takes nothing (its session's stream stalled) has its
    /// notifications dropped past the backlog, where they piled up for as long as it sent:
    /// 64 log lines of 1 MiB leave 16 MiB queued, and one taken makes room for one more.
    #[test]
    fn notifications_an_agent_does_not_take_pile_up_no_further_than_the_backlog() {
        use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
        let (relay, mut rx) = AgentRelay::new();
        let line = || {
            ServerNotification::LoggingMessageNotification(rmcp::model::Notification::new(
                LoggingMessageNotificationParam::new(
                    LoggingLevel::Info,
                    json!("x".repeat(1 << 20)),
                ),
            ))
        };
        for _ in 0..64 {
            relay.notify(&line());
        }
        let mut queued = Vec::new();
        while let Ok(item) = rx.try_recv() {
            queued.push(item);
        }
        let bytes: usize = queued.iter().map(|(_, size)| size).sum();
        assert!(bytes <= BACKLOG, "{bytes}");
        assert!(queued.len() >= 15 && queued.len() < 64, "{}", queued.len());
        for (_, size) in queued {
            relay.passed_on(size);
        }
        relay.notify(&line());
        assert!(rx.try_recv().is_ok(), "taken: there is room again");
    }

    fn routed(relay: &AgentRelay, upstream: &ProgressToken) -> bool {
        lock(&relay.progress).routes.contains_key(upstream)
    }

    #[test]
    fn a_question_is_the_call_whose_stream_carried_it_also_when_it_comes_after_the_cancel() {
        let (relay, _rx) = AgentRelay::new();
        let upstream = |n: i64| RequestId::Number(n);
        let (stream, _lane) = LaneStream::new(Default::default());
        let first = relay.call_started(None);
        relay.call_sent(first, &upstream(1));
        let second = relay.call_started(Some(stream));
        relay.call_sent(second, &upstream(2));

        let firsts = relay.agent_cancel(Some(&upstream(1)));
        let seconds = relay.agent_cancel(Some(&upstream(2)));
        let unknown = relay.agent_cancel(None);
        assert!(
            relay.lane_for(Some(&upstream(1))).is_none(),
            "not on a lane"
        );
        assert!(relay.lane_for(Some(&upstream(2))).is_some(), "its own lane");
        assert!(relay.lane_for(None).is_none(), "two calls: the session's");

        relay.call_ended(first, Some(CancelReason::Agent));
        assert_eq!(firsts.fired(), Some(CancelReason::Agent));
        assert_eq!(seconds.fired(), None, "the other call's question stays");
        assert_eq!(
            unknown.fired(),
            Some(CancelReason::Agent),
            "no origin: any call"
        );
        // The server asked on the first call's stream before it heard of the cancel.
        let late = relay.agent_cancel(Some(&upstream(1)));
        assert_eq!(late.fired(), Some(CancelReason::Agent));
        assert!(relay.lane_for(Some(&upstream(1))).is_none());
        // Now the second is the one call in flight.
        assert!(relay.lane_for(None).is_some());

        relay.call_ended(second, None);
        assert_eq!(seconds.fired(), None, "answered: the server's to end");
        let after = relay.agent_cancel(Some(&upstream(2)));
        assert_eq!(after.fired(), None);
    }

    /// Progress for no route yet is kept for one about to be made, but not a large one: 32
    /// of a server's megabytes, each held twice, would be a gigabyte an agent and server.
    #[test]
    fn progress_for_nobody_is_kept_only_when_small() {
        let (relay, _rx) = AgentRelay::new();
        let sent = |token: u32, message: &str| {
            let message = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": token, "progress": 1, "message": message}});
            assert!(relay.progress_sent(message.to_string().as_bytes()));
        };
        sent(1, "a line");
        sent(
            2,
            &"x".repeat(crate::mcp::tap::MAX_UNCLAIMED_PROGRESS_BYTES + 1),
        );
        let progress = lock(&relay.progress);
        let kept: Vec<_> = progress
            .unclaimed
            .iter()
            .map(|(n, _)| n.params.progress_token.clone())
            .collect();
        assert_eq!(
            kept,
            [ProgressToken(rmcp::model::NumberOrString::Number(1))]
        );
    }

    /// A server may ask during a call for as long as it lasts (eleven minutes by default):
    /// what the call keeps does not grow with each question, and each is still withdrawn
    /// with the call.
    #[test]
    fn questions_asked_during_a_call_grow_nothing_it_keeps() {
        let (relay, _rx) = AgentRelay::new();
        let call = relay.call_started(None);
        let questions: Vec<Withdrawal> = (0..10_000).map(|_| relay.agent_cancel(None)).collect();
        assert_eq!(lock(&relay.calls)[&call].len(), 3);
        relay.call_ended(call, Some(CancelReason::AgentGone));
        assert!(
            questions
                .iter()
                .all(|q| q.fired() == Some(CancelReason::AgentGone))
        );
    }

    #[test]
    fn a_tasks_progress_route_lasts_until_the_task_ends_and_their_number_is_capped() {
        let (relay, _rx) = AgentRelay::new();
        let (stream, _lane) = LaneStream::new(Default::default());
        let token = |n: i64| ProgressToken(rmcp::model::NumberOrString::Number(n));
        let route = |n: i64| {
            relay.route_progress(
                &token(n),
                Some((ProgressTo::Lane(stream.clone()), token(-n))),
            );
        };
        route(1);
        relay.keep_progress_for_task("t-1", &token(1));
        route(2);
        relay.keep_progress_for_task("t-2", &token(2));
        relay.task_ended("t-1");
        assert!(!routed(&relay, &token(1)), "an ended task's route goes");
        assert!(routed(&relay, &token(2)), "another task's stays");
        for n in 3..=(TASK_ROUTES as i64 + 2) {
            route(n);
            relay.keep_progress_for_task(&format!("t-{n}"), &token(n));
        }
        assert!(!routed(&relay, &token(2)), "past the cap the oldest goes");
        assert!(routed(&relay, &token(3)));
        assert_eq!(lock(&relay.progress).tasks.len(), TASK_ROUTES);
    }
}
