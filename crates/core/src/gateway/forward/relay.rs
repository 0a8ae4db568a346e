//! The agent side of an upstream session: where the server's notifications go (progress to
//! the request it belongs to), the agent's roots and sampling offered to the server, and how
//! an agent's request ends before its answer (cancelled, or the agent gone).

use super::*;

/// A notification on its way to the agent: to the peer of the request it belongs to (progress),
/// or to the agent's session.
pub(super) type Outgoing = (Option<Peer<RoleServer>>, ServerNotification);

/// The agent side of an upstream session: where its notifications go, and which of the
/// agent's calls are in flight (a question asked now belongs to them).
pub(crate) struct AgentRelay {
    tx: mpsc::UnboundedSender<Outgoing>,
    /// The agent's session, for notifications not tied to a request (session agents only).
    pub(super) agent: Mutex<Option<Peer<RoleServer>>>,
    progress: Mutex<HashMap<ProgressToken, (Peer<RoleServer>, ProgressToken)>>,
    /// In-flight calls: the withdraw tokens of the questions asked during each, with the
    /// reason each stands for.
    calls: Mutex<HashMap<u64, Withdrawal>>,
    next_call: AtomicU64,
}

impl AgentRelay {
    pub(super) fn new() -> (Arc<Self>, mpsc::UnboundedReceiver<Outgoing>) {
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

    pub(super) fn progress_routes(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<ProgressToken, (Peer<RoleServer>, ProgressToken)>> {
        lock(&self.progress)
    }

    pub(super) fn call_started(&self) -> u64 {
        let id = self.next_call.fetch_add(1, Ordering::Relaxed);
        lock(&self.calls).insert(id, Withdrawal::new());
        id
    }

    /// The call ended: cancelled (or abandoned) by the agent withdraws its questions with that
    /// reason; otherwise they are the server's to end.
    pub(super) fn call_ended(&self, id: u64, left: Option<CancelReason>) {
        let withdrawal = lock(&self.calls).remove(&id).unwrap_or_default();
        if let Some(left) = left {
            withdrawal.fire(left);
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

    #[allow(deprecated)]
    fn agent_roots(
        &self,
    ) -> Option<futures::future::BoxFuture<'static, Result<rmcp::model::ListRootsResult, String>>>
    {
        let agent = lock(&self.agent).clone()?;
        agent.peer_info()?.capabilities.roots.as_ref()?;
        Some(Box::pin(async move {
            agent.list_roots().await.map_err(|e| e.to_string())
        }))
    }

    fn agent_sampler(&self) -> Option<crate::mcp::sampling::Sampler> {
        let agent = lock(&self.agent).clone()?;
        agent.peer_info()?.capabilities.sampling.as_ref()?;
        Some(Box::new(move |params| {
            Box::pin(async move {
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

    fn agent_cancel(&self) -> Withdrawal {
        let mut calls = lock(&self.calls);
        if calls.is_empty() {
            return Withdrawal::new();
        }
        // Without a request id to tie it to, a question belongs to every call in flight;
        // cancelling any of them withdraws it (a no, which is the safe side).
        let withdrawal = Withdrawal::new()
            .when(CancellationToken::new(), CancelReason::Agent)
            .when(CancellationToken::new(), CancelReason::AgentGone);
        calls.values_mut().for_each(|w| w.join(&withdrawal));
        withdrawal
    }
}

/// How an agent's request ends before its answer: the agent cancels it, or goes away (its
/// HTTP response stream closed; see `gone`), which rmcp does not notice on session-keeping
/// connections until the session idles out.
pub(super) struct Leaving {
    cancelled: CancellationToken,
    gone: Option<CancellationToken>,
}

impl Leaving {
    pub(super) fn of(ctx: &RequestContext<RoleServer>) -> Self {
        Leaving {
            cancelled: ctx.ct.clone(),
            gone: crate::gateway::gone::token(ctx),
        }
    }

    /// How a question that belongs to this request is withdrawn.
    pub(super) fn withdraw(&self) -> Withdrawal {
        let withdrawal = Withdrawal::new().when(self.cancelled.clone(), CancelReason::Agent);
        match &self.gone {
            Some(gone) => withdrawal.when(gone.clone(), CancelReason::AgentGone),
            None => withdrawal,
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
