//! Signing in to remote servers from a session's point of view: the server's challenge kept,
//! the person asked (see `oauth`), the session reconnected; and a request the server refuses
//! for want of a (new) sign-in turned into words.

use std::sync::atomic::Ordering;

use super::{Entry, SessionError, SessionManager, SessionState, lock, protocol_error};
use crate::config::TransportConfig;
use crate::mcp::connect::asker_for;

/// Why a server wants a sign-in: its challenge, and whether it asks for more scope than the
/// last sign-in got.
#[derive(Debug, Clone)]
pub(super) struct Challenge {
    pub(super) header: String,
    pub(super) step_up: bool,
}

impl Challenge {
    pub(super) fn new(header: &str) -> Challenge {
        Challenge {
            header: header.to_owned(),
            step_up: header.contains("insufficient_scope"),
        }
    }

    pub(super) fn reason(&self) -> String {
        if self.step_up {
            "the server asks for more access than the last sign-in gave".into()
        } else {
            "the server asks you to sign in".into()
        }
    }
}

impl SessionManager {
    /// Signs the person in to an HTTP server: starts the OAuth flow from the server's last
    /// challenge, asks the person to open the authorization address (a URL question, through
    /// the same policy and dialog as a server's), waits for the browser to come back to the
    /// loopback redirect, keeps the tokens, and reconnects. Every way out but a completed
    /// sign-in is an error in words; nothing is retried behind the person's back.
    pub async fn sign_in(&self, server: &str) -> Result<(), SessionError> {
        let entry = self.entry(server)?;
        let failed = |message: String| SessionError::SignIn {
            server: server.to_owned(),
            message,
        };
        let TransportConfig::Http { url, .. } = &entry.config.transport else {
            return Err(failed("only remote (HTTP) servers are signed in to".into()));
        };
        if entry.signing_in.swap(true, Ordering::SeqCst) {
            return Err(failed("a sign-in is already waiting for you".into()));
        }
        let result = self.run_sign_in(&entry, url).await;
        entry.signing_in.store(false, Ordering::SeqCst);
        result.map_err(failed)?;
        *lock(&entry.challenge) = None;
        // Nobody waiting for the session should take the old state for the new one.
        if matches!(*lock(&entry.state), SessionState::SignInRequired { .. }) {
            self.set_state(&entry, SessionState::Connecting);
        }
        entry.signed_in.notify_one();
        Ok(())
    }

    async fn run_sign_in(&self, entry: &Entry, url: &str) -> Result<(), String> {
        let challenge = lock(&entry.challenge).clone();
        let pending = self
            .inner
            .auth
            .begin(
                &entry.config.name,
                url,
                &entry.config.oauth,
                challenge.as_ref().map(|c| c.header.as_str()),
            )
            .await?;
        let web = crate::ask::url_policy::check(&pending.authorization_url)
            .map_err(|e| format!("the authorization address is refused: {e}"))?;
        // What the sign-in would grant, as the server's challenge or metadata chose it: the
        // provider's page says it too, but that page is the provider's, not Countersign's.
        let scope = url::Url::parse(&pending.authorization_url)
            .ok()
            .and_then(|u| {
                u.query_pairs()
                    .find(|(k, _)| k == "scope")
                    .map(|(_, v)| v.into_owned())
            })
            .filter(|s| !s.trim().is_empty());
        let asks_for = match scope {
            Some(scope) => format!(
                " It asks for this access: {}.",
                scope.chars().take(300).collect::<String>()
            ),
            None => String::new(),
        };
        let message = format!(
            "Sign in to {} so Countersign can reach it for you. The sign-in page is at {}.{asks_for}",
            entry.config.name, web.host
        );
        let request = serde_json::json!({
            "mode": "url",
            "message": message,
            "url": pending.authorization_url,
            "elicitationId": "sign-in",
        });
        let ask = self
            .inner
            .broker
            .open(crate::ask::broker::NewAsk {
                asker: asker_for(&entry.config),
                kind: crate::ask::AskKind::Url {
                    message,
                    url: web.url.to_string(),
                    elicitation_id: "sign-in".into(),
                    host: web.host,
                    warnings: web.warnings,
                    sign_in: true,
                },
                request,
                timeout: Some(crate::mcp::oauth::SIGN_IN_WAIT),
                session: self.inner.next_session.fetch_add(1, Ordering::Relaxed),
            })
            .map_err(|e| e.to_string())?;
        match ask.outcome().await {
            crate::ask::Outcome::Accepted { .. } => {}
            crate::ask::Outcome::Declined => return Err("you declined to sign in".into()),
            _ => return Err("the sign-in was cancelled".into()),
        }
        pending.finish(crate::mcp::oauth::SIGN_IN_WAIT).await
    }

    /// Someone else (the gateway, for an agent) found that an HTTP server wants a sign-in: its
    /// page says so and the person is notified, as when the app's own session finds it.
    pub fn needs_sign_in(&self, server: &str, header: &str) {
        let Ok(entry) = self.entry(server) else {
            return;
        };
        if !matches!(entry.config.transport, TransportConfig::Http { .. }) {
            return;
        }
        let challenge = self.challenged(&entry, header);
        let reason = challenge.reason();
        *lock(&entry.challenge) = Some(challenge);
        if !matches!(*lock(&entry.state), SessionState::SignInRequired { .. }) {
            self.set_state(&entry, SessionState::SignInRequired { reason });
            entry.signed_in.notify_one();
        }
    }

    /// Forgets the sign-in to an HTTP server (its tokens leave the secret store), reconnects,
    /// so the server asks for a new one, and says whether its authorization server revoked
    /// the tokens.
    pub async fn sign_out(
        &self,
        server: &str,
    ) -> Result<crate::mcp::oauth::Revocation, SessionError> {
        let entry = self.entry(server)?;
        let TransportConfig::Http { url, .. } = &entry.config.transport else {
            return Err(SessionError::SignIn {
                server: server.to_owned(),
                message: "only remote (HTTP) servers are signed in to".into(),
            });
        };
        let revocation = self
            .inner
            .auth
            .sign_out(&entry.config.name, url, &entry.config.oauth)
            .await
            .map_err(|message| SessionError::SignIn {
                server: server.to_owned(),
                message,
            })?;
        let config = entry.config.clone();
        self.start(vec![config]).await;
        Ok(revocation)
    }

    /// A failed request: when the server wants a (new) sign-in, the session waits for one
    /// and the caller is told so.
    pub(super) fn request_error(&self, entry: &Entry, e: rmcp::ServiceError) -> SessionError {
        match e.auth_challenge() {
            Some(header) => {
                let challenge = self.challenged(entry, header);
                let message = challenge.reason();
                *lock(&entry.challenge) = Some(challenge);
                // Said at once; the running session ends and its supervisor then waits for
                // the sign-in.
                self.set_state(
                    entry,
                    SessionState::SignInRequired {
                        reason: message.clone(),
                    },
                );
                entry.signed_in.notify_one();
                SessionError::SignIn {
                    server: entry.config.name.clone(),
                    message,
                }
            }
            None => protocol_error(entry, e),
        }
    }

    /// The server refused a request with `header`: after a sign-in and before any request
    /// with it went through, that counts against the sign-ins it may ask for in a row, whatever
    /// the challenge says (`invalid_token` as much as `insufficient_scope`): a server that
    /// refuses every sign-in cannot send the person round again and again.
    pub(super) fn challenged(&self, entry: &Entry, header: &str) -> Challenge {
        if let TransportConfig::Http { url, .. } = &entry.config.transport {
            self.inner
                .auth
                .refused_after_sign_in(&entry.config.name, url);
        }
        Challenge::new(header)
    }

    pub(super) fn succeeded(&self, entry: &Entry) {
        if let TransportConfig::Http { url, .. } = &entry.config.transport {
            self.inner.auth.succeeded(&entry.config.name, url);
        }
    }
}
