//! Who may withdraw a question before the person answers it, and which reason is recorded.

use tokio_util::sync::CancellationToken;

use super::CancelReason;

/// The ways one question can be withdrawn before the person answers: tokens that fire, each
/// standing for a reason. When more than one has fired by the time anyone looks, the truest
/// is recorded: the agent's own cancellation, then the agent going away, then the server's
/// connection ending, then the server's withdrawal (an agent's cancellation prompts the
/// server's, and rmcp cancels each question of a session whose transport closed, so those only
/// echo what came first), then anything else. That order lives here and nowhere else.
#[derive(Clone, Debug, Default)]
pub struct Withdrawal {
    /// Kept in that order; in the order added within one reason.
    triggers: Vec<(CancellationToken, CancelReason)>,
}

impl Withdrawal {
    pub fn new() -> Self {
        Self::default()
    }

    /// This withdrawal, also ended when `token` fires, for `reason`.
    pub fn when(mut self, token: CancellationToken, reason: CancelReason) -> Self {
        self.add(token, reason);
        self
    }

    pub fn add(&mut self, token: CancellationToken, reason: CancelReason) {
        let at = self
            .triggers
            .partition_point(|(_, r)| rank(*r) <= rank(reason));
        self.triggers.insert(at, (token, reason));
    }

    /// The server's triggers: `request` fires when it withdraws the question (or its session
    /// withdraws it for it), `transport_closed` when its connection ends, which fires first.
    pub fn add_server(&mut self, request: CancellationToken, transport_closed: CancellationToken) {
        self.add(transport_closed, CancelReason::Disconnect);
        self.add(request, CancelReason::Server);
    }

    /// Adds every trigger of `other`.
    pub fn join(&mut self, other: &Withdrawal) {
        for (token, reason) in &other.triggers {
            self.add(token.clone(), *reason);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.triggers.is_empty()
    }

    /// How many triggers it holds.
    pub fn len(&self) -> usize {
        self.triggers.len()
    }

    /// The truest reason among the triggers fired so far, if any has fired.
    pub fn fired(&self) -> Option<CancelReason> {
        self.triggers
            .iter()
            .find(|(token, _)| token.is_cancelled())
            .map(|(_, reason)| *reason)
    }

    /// Waits until a trigger fires, then names the truest of those fired by then. With no
    /// triggers, it never returns.
    pub async fn fires(&self) -> CancelReason {
        if self.triggers.is_empty() {
            return std::future::pending().await;
        }
        let ((), _, _) = futures::future::select_all(
            self.triggers
                .iter()
                .map(|(token, _)| Box::pin(token.cancelled())),
        )
        .await;
        self.fired().unwrap_or(CancelReason::Shutdown)
    }

    /// Fires the triggers that stand for `reason`: the call the question belongs to ended
    /// that way.
    pub fn fire(&self, reason: CancelReason) {
        self.triggers
            .iter()
            .filter(|(_, r)| *r == reason)
            .for_each(|(token, _)| token.cancel());
    }

    /// The reason to record when the server withdraws the question and these are its
    /// callers' triggers: a caller's that fired first (the server then only echoes it),
    /// otherwise the server's own.
    pub fn server_withdrew(&self) -> CancelReason {
        self.fired().unwrap_or(CancelReason::Server)
    }
}

fn rank(reason: CancelReason) -> u8 {
    match reason {
        // The person's pause, like the agent's cancel, comes first: the server only echoes it.
        CancelReason::Agent | CancelReason::Paused => 0,
        CancelReason::AgentGone => 1,
        CancelReason::Disconnect => 2,
        CancelReason::Server => 3,
        _ => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agents_cancellation_wins_whatever_order_they_were_added_or_fired_in() {
        let (server, gone, agent) = (
            CancellationToken::new(),
            CancellationToken::new(),
            CancellationToken::new(),
        );
        let w = Withdrawal::new()
            .when(server.clone(), CancelReason::Server)
            .when(gone.clone(), CancelReason::AgentGone)
            .when(agent.clone(), CancelReason::Agent);
        assert_eq!(w.fired(), None);
        server.cancel();
        assert_eq!(w.fired(), Some(CancelReason::Server));
        gone.cancel();
        assert_eq!(w.fired(), Some(CancelReason::AgentGone));
        agent.cancel();
        assert_eq!(w.fired(), Some(CancelReason::Agent));
    }

    #[tokio::test]
    async fn fires_names_the_truest_of_those_fired_by_then() {
        let (server, agent) = (CancellationToken::new(), CancellationToken::new());
        let w = Withdrawal::new()
            .when(server.clone(), CancelReason::Server)
            .when(agent.clone(), CancelReason::Agent);
        server.cancel();
        agent.cancel();
        assert_eq!(w.fires().await, CancelReason::Agent);
    }

    #[tokio::test]
    async fn fire_ends_only_the_triggers_of_that_reason() {
        let (agent, gone) = (CancellationToken::new(), CancellationToken::new());
        let w = Withdrawal::new()
            .when(agent.clone(), CancelReason::Agent)
            .when(gone.clone(), CancelReason::AgentGone);
        w.fire(CancelReason::AgentGone);
        assert!(gone.is_cancelled() && !agent.is_cancelled());
        assert_eq!(w.server_withdrew(), CancelReason::AgentGone);
        assert_eq!(Withdrawal::new().server_withdrew(), CancelReason::Server);
    }

    /// A server process that exits closes the transport, and rmcp then cancels each of its
    /// questions: whichever wakes first, the person is told the server disconnected (the fault
    /// matrix's "exit" row read "The server withdrew this question" when the question's task
    /// woke before the session's).
    #[tokio::test]
    async fn a_closed_transport_is_a_disconnection_not_the_servers_withdrawal() {
        let (request, closed) = (CancellationToken::new(), CancellationToken::new());
        let mut w = Withdrawal::new();
        w.add_server(request.clone(), closed.clone());
        closed.cancel();
        request.cancel();
        assert_eq!(w.fires().await, CancelReason::Disconnect);
        assert_eq!(w.server_withdrew(), CancelReason::Disconnect);
        let request = CancellationToken::new();
        let mut w = Withdrawal::new();
        w.add_server(request.clone(), CancellationToken::new());
        request.cancel();
        assert_eq!(w.fires().await, CancelReason::Server);
    }

    #[tokio::test]
    async fn with_nothing_to_fire_it_waits_for_ever() {
        let waited = tokio::time::timeout(
            std::time::Duration::from_millis(20),
            Withdrawal::new().fires(),
        )
        .await;
        assert!(waited.is_err());
    }
}
