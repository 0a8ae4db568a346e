//! What an agent's session set up on its upstream that a server started again (after a crash,
//! or once the person changed it) must be told anew: the agent's resource subscriptions and
//! its log level. The agent opened its session once and is not told its server's session
//! ended; without this, it would hear of no change to a resource it watches, and get the
//! server's default log level, until it restarted.

use std::collections::BTreeSet;

use rmcp::model::{
    LoggingLevel, PromptListChangedNotification, ResourceListChangedNotification,
    ResourceUpdatedNotification, ResourceUpdatedNotificationParam, ToolListChangedNotification,
};

use super::*;
use crate::mcp::tap::Relay;

/// Subscriptions remembered for one session at most; more are forwarded but not made again.
const MAX_SUBSCRIPTIONS: usize = 256;

#[derive(Default)]
pub(super) struct Replay {
    subscriptions: BTreeSet<String>,
    level: Option<LoggingLevel>,
}

impl Forwarder {
    /// The agent's session subscribed to `uri` (a request-less agent has nothing to replay).
    pub(super) fn subscribed(&self, uri: &str) {
        if self.session.get().is_none() {
            return;
        }
        let mut replay = lock(&self.replay);
        if replay.subscriptions.len() < MAX_SUBSCRIPTIONS {
            replay.subscriptions.insert(uri.to_owned());
        } else if !replay.subscriptions.contains(uri) {
            tracing::warn!(
                server = %self.server,
                "gateway: an agent's subscription past {MAX_SUBSCRIPTIONS} is not made again \
                 if its server starts again"
            );
        }
    }

    pub(super) fn unsubscribed(&self, uri: &str) {
        lock(&self.replay).subscriptions.remove(uri);
    }

    pub(super) fn level_set(&self, level: LoggingLevel) {
        if self.session.get().is_some() {
            lock(&self.replay).level = Some(level);
        }
    }

    /// Makes the session's subscriptions and log level again on `up`, its server's new session,
    /// and tells the agent what may have changed: the resources it watches, and the server's
    /// lists. A subscription goes through the gate again but asks nobody: it is made again
    /// only when the rules or a remembered decision allow it now (a yes "for this session"
    /// ended with the server's session), and is otherwise dropped, as the server dropped it.
    pub(super) async fn set_up_again(&self, up: &Arc<Upstream>, ctx: &RequestContext<RoleServer>) {
        let (subscriptions, level) = {
            let replay = lock(&self.replay);
            (
                replay.subscriptions.iter().cloned().collect::<Vec<_>>(),
                replay.level,
            )
        };
        let timeout = up.server.request_timeout;
        if let Some(level) = level {
            let set = match self.record_forwarded(ctx, "logging/setLevel") {
                Ok(()) => up
                    .send(
                        ClientRequest::SetLevelRequest(SetLevelRequest::new(
                            SetLevelRequestParams::new(level),
                        )),
                        ctx,
                        timeout,
                        None,
                    )
                    .await
                    .map(drop),
                Err(e) => Err(e),
            };
            if let Err(e) = set {
                tracing::warn!(server = %self.server, error = %e.message,
                    "gateway: the agent's log level was not set again on its server");
            }
        }
        for uri in subscriptions {
            let made = match self
                .gate_read(
                    up,
                    ctx,
                    "resources/subscribe",
                    &uri,
                    json!({"uri": uri}),
                    false,
                )
                .await
            {
                Ok(asked) => up
                    .send(
                        ClientRequest::SubscribeRequest(SubscribeRequest::new(
                            SubscribeRequestParams::new(uri.clone()),
                        )),
                        ctx,
                        timeout,
                        None,
                    )
                    .await
                    .map(|_| self.carried_out(asked)),
                Err(e) => Err(e),
            };
            match made {
                // It may have changed while its server was away, and nobody heard.
                Ok(()) => up
                    .relay
                    .notify(&ServerNotification::ResourceUpdatedNotification(
                        ResourceUpdatedNotification::new(ResourceUpdatedNotificationParam::new(
                            uri,
                        )),
                    )),
                Err(e) => {
                    tracing::warn!(server = %self.server, error = %e.message,
                        "gateway: an agent's subscription was not made again on its server");
                    lock(&self.replay).subscriptions.remove(&uri);
                }
            }
        }
        // What the agent listed came from the server's former session.
        let Some(capabilities) = up.info().map(|info| info.capabilities) else {
            return;
        };
        let announced = [
            (
                capabilities.tools.and_then(|c| c.list_changed),
                ServerNotification::ToolListChangedNotification(
                    ToolListChangedNotification::default(),
                ),
            ),
            (
                capabilities.prompts.and_then(|c| c.list_changed),
                ServerNotification::PromptListChangedNotification(
                    PromptListChangedNotification::default(),
                ),
            ),
            (
                capabilities.resources.and_then(|c| c.list_changed),
                ServerNotification::ResourceListChangedNotification(
                    ResourceListChangedNotification::default(),
                ),
            ),
        ];
        for (announces, changed) in announced {
            if announces == Some(true) {
                up.relay.notify(&changed);
            }
        }
    }
}
