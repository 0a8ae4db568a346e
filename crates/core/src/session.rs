//! Sessions: one supervised MCP client session per configured server.
//!
//! Each server has an explicit state with change events, reconnects with capped exponential
//! backoff, keeps the tail of its stderr, and is watched for death: a stdio child that exits
//! closes its pipe, but rmcp's HTTP transport never closes by itself, so idle sessions are
//! pinged. Every request carries an explicit timeout (rmcp sets none). Asks opened through a
//! session are withdrawn as `disconnect` when it dies.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::Peer;
use rmcp::model::{ClientRequest, PingRequest, Tool};
use rmcp::service::{PeerRequestOptions, RoleClient, RunningService};
use serde::Serialize;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::ask::CancelReason;
use crate::ask::broker::Broker;
use crate::config::{ServerConfig, TransportConfig};
use crate::mcp::connect::{ConnectError, asker_for, lifecycle_for, open_client};
use crate::mcp::handler::{Elicitor, Handler, client_config};
use crate::mcp::oauth::Auth;
use crate::mcp::raw::RawRequests;
use crate::mcp::tap::Tap;

mod call;
mod sign_in;
mod task;

use crate::lock;
use sign_in::Challenge;

/// How often a session is pinged to notice a dead server, unless set otherwise.
pub const DEFAULT_PING_EVERY: Duration = Duration::from_secs(15);
/// Why a running session ended when a sign-in replaced its tokens.
const SIGNED_IN_AGAIN: &str = "signed in again";

/// Backoff between reconnect attempts: 0.5 s doubling to 30 s.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            first: Duration::from_millis(500),
            max: Duration::from_secs(30),
        }
    }
}

impl Backoff {
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 1u32
            .checked_shl(attempt.saturating_sub(1).min(20))
            .unwrap_or(u32::MAX);
        self.first.saturating_mul(factor).min(self.max)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum SessionState {
    Connecting,
    #[serde(rename_all = "camelCase")]
    Ready {
        protocol_version: String,
        server_name: Option<String>,
        server_version: Option<String>,
    },
    Failed {
        reason: String,
    },
    #[serde(rename_all = "camelCase")]
    Reconnecting {
        attempt: u32,
        #[ts(type = "number")]
        next_in_ms: u64,
        reason: String,
    },
    /// The server wants the person to sign in (OAuth): nothing is retried until they do.
    SignInRequired {
        reason: String,
    },
    Stopped,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct SessionEvent {
    pub server: String,
    pub state: SessionState,
    /// Rises with every state change of any server: the page keeps the newest of an event
    /// and a listing, which travel on different channels and may arrive out of order.
    #[ts(type = "number")]
    pub revision: u64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum SessionError {
    #[error("no server named \"{server}\" is configured")]
    UnknownServer { server: String },
    #[error("server \"{server}\" is not connected ({state})")]
    NotReady { server: String, state: String },
    #[error("server \"{server}\" did not answer within {seconds} s")]
    Timeout {
        server: String,
        #[ts(type = "number")]
        seconds: u64,
    },
    #[error("the call was cancelled")]
    Cancelled,
    #[error("server \"{server}\": {message}")]
    Protocol { server: String, message: String },
    #[error("server \"{server}\" needs you to sign in: {message}")]
    SignIn { server: String, message: String },
}

struct Live {
    peer: Peer<RoleClient>,
    service: Arc<tokio::sync::Mutex<Option<RunningService<RoleClient, Handler>>>>,
    elicitor: Elicitor,
    tap: Arc<Tap>,
    /// Raw results that ask for input, read beside rmcp.
    raw: Arc<RawRequests>,
    /// Fires when the session is declared over, with why in `why_ended`: the calls in flight
    /// end then, not only once the transport has closed (rmcp waits up to 5 s for a hung HTTP
    /// server to take its session's DELETE).
    ended: CancellationToken,
    why_ended: Mutex<String>,
}

impl Live {
    fn end(&self, why: &str) {
        *lock(&self.why_ended) = crate::mcp::connect::in_words(why);
        self.ended.cancel();
    }

    /// What a call in flight is told when the session ended under it.
    fn ended_error(&self, entry: &Entry) -> SessionError {
        SessionError::Protocol {
            server: entry.config.name.clone(),
            message: format!(
                "the session ended during the call: {}",
                lock(&self.why_ended)
            ),
        }
    }
}

struct Entry {
    config: ServerConfig,
    state: Mutex<SessionState>,
    /// The state's revision (see `SessionEvent::revision`), written under `state`'s lock.
    revision: AtomicU64,
    stderr: Arc<Mutex<VecDeque<String>>>,
    live: Mutex<Option<Arc<Live>>>,
    stop: CancellationToken,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Set when the server wants a sign-in; the supervisor waits on `signed_in` then.
    challenge: Mutex<Option<Challenge>>,
    signed_in: tokio::sync::Notify,
    signing_in: std::sync::atomic::AtomicBool,
}

struct Inner {
    broker: Broker,
    auth: Auth,
    /// One HTTP client for every session's server (see `open_client`).
    http: crate::mcp::connect::SharedHttp,
    entries: Mutex<BTreeMap<String, Arc<Entry>>>,
    events: broadcast::Sender<SessionEvent>,
    revisions: AtomicU64,
    next_session: AtomicU64,
    backoff: Backoff,
    ping_every: Duration,
}

/// All sessions. Cheap to clone.
#[derive(Clone)]
pub struct SessionManager {
    inner: Arc<Inner>,
}

impl SessionManager {
    pub fn new(broker: Broker) -> Self {
        Self::with_backoff(broker, Backoff::default())
    }

    pub fn with_backoff(broker: Broker, backoff: Backoff) -> Self {
        Self::with_timing(broker, backoff, DEFAULT_PING_EVERY)
    }

    /// `ping_every`: how often each session is pinged to notice a server that stopped
    /// answering (rmcp's HTTP transport never notices by itself).
    pub fn with_timing(broker: Broker, backoff: Backoff, ping_every: Duration) -> Self {
        Self::with_auth(
            broker,
            backoff,
            ping_every,
            Auth::new(crate::mcp::oauth::vault::Vault::memory()),
        )
    }

    /// `auth`: where sign-ins to remote servers are kept (see `oauth`).
    pub fn with_auth(broker: Broker, backoff: Backoff, ping_every: Duration, auth: Auth) -> Self {
        let (events, _) = broadcast::channel(1024);
        SessionManager {
            inner: Arc::new(Inner {
                broker,
                auth,
                http: Default::default(),
                entries: Mutex::default(),
                events,
                revisions: AtomicU64::new(0),
                next_session: AtomicU64::new(1),
                backoff,
                ping_every,
            }),
        }
    }

    pub fn broker(&self) -> &Broker {
        &self.inner.broker
    }

    pub fn auth(&self) -> &Auth {
        &self.inner.auth
    }

    pub fn subscribe(&self) -> broadcast::Receiver<SessionEvent> {
        self.inner.events.subscribe()
    }

    /// Starts a session for each server, all connecting concurrently. A name already running
    /// is stopped and replaced.
    pub async fn start(&self, servers: Vec<ServerConfig>) {
        for config in servers {
            self.stop(&config.name).await;
            let entry = Arc::new(Entry {
                config: config.clone(),
                state: Mutex::new(SessionState::Connecting),
                revision: AtomicU64::new(self.inner.revisions.fetch_add(1, Ordering::Relaxed) + 1),
                stderr: Arc::default(),
                live: Mutex::default(),
                stop: CancellationToken::new(),
                task: Mutex::default(),
                challenge: Mutex::default(),
                signed_in: tokio::sync::Notify::new(),
                signing_in: std::sync::atomic::AtomicBool::new(false),
            });
            lock(&self.inner.entries).insert(config.name.clone(), entry.clone());
            let manager = self.clone();
            let task = tokio::spawn(manager.supervise(entry.clone()));
            *lock(&entry.task) = Some(task);
        }
    }

    /// The servers and their states, by name.
    pub fn states(&self) -> Vec<(String, SessionState)> {
        lock(&self.inner.entries)
            .iter()
            .map(|(name, e)| (name.clone(), lock(&e.state).clone()))
            .collect()
    }

    pub fn state(&self, server: &str) -> Option<SessionState> {
        self.entry(server).ok().map(|e| lock(&e.state).clone())
    }

    /// The server's state with its revision (see `SessionEvent::revision`).
    pub fn state_revision(&self, server: &str) -> Option<(SessionState, u64)> {
        self.entry(server).ok().map(|e| {
            let state = lock(&e.state);
            (state.clone(), e.revision.load(Ordering::Relaxed))
        })
    }

    pub fn config(&self, server: &str) -> Option<ServerConfig> {
        self.entry(server).ok().map(|e| e.config.clone())
    }

    /// The last lines the server wrote to stderr (stdio servers only).
    pub fn stderr_tail(&self, server: &str) -> Vec<String> {
        self.entry(server)
            .map(|e| lock(&e.stderr).iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Waits until the server is ready or `timeout` passes; returns the state then.
    pub async fn wait_ready(&self, server: &str, timeout: Duration) -> Option<SessionState> {
        let mut events = self.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let state = self.state(server)?;
            if matches!(state, SessionState::Ready { .. }) {
                return Some(state);
            }
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Err(_) => return self.state(server),
                Ok(Err(broadcast::error::RecvError::Closed)) => return self.state(server),
                Ok(_) => {}
            }
        }
    }

    /// Waits (at most the server's request timeout) until the session is ready, wants a
    /// sign-in, or failed; returns the state then.
    pub async fn wait_until_settled(&self, server: &str) -> Option<SessionState> {
        let timeout = self.entry(server).ok()?.config.request_timeout;
        let mut events = self.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let state = self.state(server)?;
            if matches!(
                state,
                SessionState::Ready { .. }
                    | SessionState::SignInRequired { .. }
                    | SessionState::Failed { .. }
            ) {
                return Some(state);
            }
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Err(_) => return self.state(server),
                Ok(Err(broadcast::error::RecvError::Closed)) => return self.state(server),
                Ok(_) => {}
            }
        }
    }

    pub async fn list_tools(&self, server: &str) -> Result<Vec<Tool>, SessionError> {
        let (entry, live) = self.live(server)?;
        let timeout = entry.config.request_timeout;
        let listing = crate::mcp::listing::all_tools(server, &live.peer, None);
        match tokio::time::timeout(timeout, listing).await {
            Err(_) => Err(timeout_error(&entry)),
            Ok(result) => {
                let tools = result.map_err(|e| self.request_error(&entry, e))?;
                self.succeeded(&entry);
                Ok(tools)
            }
        }
    }

    /// Stops one server's session (its asks are withdrawn as `disconnect`).
    pub async fn stop(&self, server: &str) {
        let entry = lock(&self.inner.entries).remove(server);
        if let Some(entry) = entry {
            entry.stop.cancel();
            let task = lock(&entry.task).take();
            if let Some(task) = task {
                let _ = task.await;
            }
        }
    }

    /// Closes every session and waits for child processes to exit. Open asks are answered
    /// `cancel` (shutdown) first.
    pub async fn shutdown(&self) {
        self.inner.broker.shutdown();
        let names: Vec<String> = lock(&self.inner.entries).keys().cloned().collect();
        futures::future::join_all(names.iter().map(|n| self.stop(n))).await;
    }

    fn entry(&self, server: &str) -> Result<Arc<Entry>, SessionError> {
        lock(&self.inner.entries)
            .get(server)
            .cloned()
            .ok_or_else(|| SessionError::UnknownServer {
                server: server.to_owned(),
            })
    }

    fn live(&self, server: &str) -> Result<(Arc<Entry>, Arc<Live>), SessionError> {
        let entry = self.entry(server)?;
        let live = lock(&entry.live).clone();
        match live {
            Some(live) => Ok((entry, live)),
            None => Err(SessionError::NotReady {
                server: server.to_owned(),
                state: describe(&lock(&entry.state)),
            }),
        }
    }

    fn set_state(&self, entry: &Entry, state: SessionState) {
        tracing::info!(server = %entry.config.name, ?state, "session");
        let mut current = lock(&entry.state);
        let revision = self.inner.revisions.fetch_add(1, Ordering::Relaxed) + 1;
        *current = state.clone();
        entry.revision.store(revision, Ordering::Relaxed);
        // Sent under the lock, so events leave in revision order.
        let _ = self.inner.events.send(SessionEvent {
            server: entry.config.name.clone(),
            state,
            revision,
        });
    }

    async fn supervise(self, entry: Arc<Entry>) {
        let mut attempt: u32 = 0;
        loop {
            if attempt == 0 {
                self.set_state(&entry, SessionState::Connecting);
            }
            let session = self.inner.next_session.fetch_add(1, Ordering::Relaxed);
            // Stopping (a reload, a sign-out, quitting) does not wait out a handshake.
            let connected = tokio::select! {
                connected = self.connect(&entry, session) => connected,
                _ = entry.stop.cancelled() => break,
            };
            let reason = match connected {
                Ok((live, tap)) => {
                    let began = tokio::time::Instant::now();
                    let why = self.run_until_closed(&entry, session, live, tap).await;
                    // Only a session that lasted starts the backoff afresh: a server that
                    // crashes on its first request would otherwise be restarted every first
                    // delay, for ever.
                    if began.elapsed() >= self.inner.backoff.max {
                        attempt = 0;
                    }
                    match why {
                        None => break,
                        Some(reason) => reason,
                    }
                }
                Err(ConnectError::Retry(reason)) => reason,
                Err(ConnectError::SignIn(header)) => {
                    *lock(&entry.challenge) = Some(self.challenged(&entry, &header));
                    "the server asks you to sign in".into()
                }
                Err(ConnectError::Fatal(reason)) => {
                    tracing::warn!(server = %entry.config.name, %reason, "session failed");
                    self.set_state(&entry, SessionState::Failed { reason });
                    entry.stop.cancelled().await;
                    break;
                }
            };
            if entry.stop.is_cancelled() {
                break;
            }
            if reason == SIGNED_IN_AGAIN && lock(&entry.challenge).is_none() {
                // New tokens: connect with them at once.
                attempt = 0;
                continue;
            }
            let challenge = lock(&entry.challenge).clone();
            if let Some(challenge) = challenge {
                // Nothing is retried until the person signs in (or the session is stopped).
                let signed_in = entry.signed_in.notified();
                self.set_state(
                    &entry,
                    SessionState::SignInRequired {
                        reason: challenge.reason(),
                    },
                );
                tokio::select! {
                    _ = signed_in => {}
                    _ = entry.stop.cancelled() => break,
                }
                attempt = 0;
                continue;
            }
            attempt += 1;
            let delay = self.inner.backoff.delay(attempt);
            tracing::warn!(server = %entry.config.name, %reason, attempt, ?delay, "session down");
            self.set_state(
                &entry,
                SessionState::Reconnecting {
                    attempt,
                    next_in_ms: delay.as_millis() as u64,
                    reason,
                },
            );
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = entry.stop.cancelled() => break,
            }
        }
        self.set_state(&entry, SessionState::Stopped);
    }

    /// Runs a ready session until it dies (returns the reason) or is stopped (`None`).
    async fn run_until_closed(
        &self,
        entry: &Entry,
        session: u64,
        live: Arc<Live>,
        tap: Arc<Tap>,
    ) -> Option<String> {
        let info = live.peer.peer_info();
        // Usable before anyone is told it is ready.
        *lock(&entry.live) = Some(live.clone());
        self.set_state(
            entry,
            SessionState::Ready {
                protocol_version: info
                    .as_ref()
                    .map(|i| i.protocol_version.to_string())
                    .unwrap_or_default(),
                server_name: info
                    .as_ref()
                    .and_then(|i| i.server_info.as_ref())
                    .map(|s| s.name.clone()),
                server_version: info
                    .as_ref()
                    .and_then(|i| i.server_info.as_ref())
                    .map(|s| s.version.clone()),
            },
        );
        let reason = loop {
            tokio::select! {
                _ = entry.stop.cancelled() => break None,
                _ = tap.closed.cancelled() => break Some(self.closed_reason(entry)),
                _ = entry.signed_in.notified() => break Some(SIGNED_IN_AGAIN.into()),
                _ = tokio::time::sleep(self.inner.ping_every) => {
                    // Our own deadline, not rmcp's: on its timeout rmcp awaits sending the
                    // server `notifications/cancelled`, which a hung HTTP server never takes,
                    // and the dead session went unnoticed for 8 s more (the fault matrix's
                    // "HTTP hang" row, 10.7 s before).
                    let wait = entry.config.request_timeout.min(Duration::from_secs(10));
                    let ping = async {
                        live.peer
                            .send_request_with_option(
                                ClientRequest::PingRequest(PingRequest::default()),
                                PeerRequestOptions::no_options(),
                            )
                            .await?
                            .await_response()
                            .await
                    };
                    let Ok(answered) = tokio::time::timeout(wait, ping).await else {
                        break Some(format!(
                            "the server stopped answering: no reply to a ping within {} s",
                            wait.as_secs_f64()
                        ));
                    };
                    // Any reply proves the server alive; an error reply too (2026-07-28 servers
                    // may not offer `ping`). Only silence or a broken transport means dead.
                    match answered {
                        Ok(_) | Err(rmcp::ServiceError::McpError(_)) => {}
                        Err(e) => {
                            if let Some(header) = e.auth_challenge() {
                                *lock(&entry.challenge) = Some(self.challenged(entry, header));
                                break Some("the server asks you to sign in".into());
                            }
                            break Some(format!("the server stopped answering: {e}"));
                        }
                    }
                }
            }
        };
        *lock(&entry.live) = None;
        live.end(reason.as_deref().unwrap_or("it was stopped"));
        // Before closing: rmcp waits for its in-flight handlers (up to 5 s) when the transport
        // ends, and the person should not stare at a question from a dead server meanwhile.
        self.inner
            .broker
            .withdraw_session(session, CancelReason::Disconnect);
        let service = live.service.lock().await.take();
        if let Some(mut service) = service {
            // Closes the transport: for a child, stdin is closed, then SIGTERM, then kill.
            let _ = service.close_with_timeout(Duration::from_secs(5)).await;
        }
        reason
    }

    fn closed_reason(&self, entry: &Entry) -> String {
        match &entry.config.transport {
            TransportConfig::Stdio { .. } => {
                let tail = lock(&entry.stderr).back().cloned();
                match tail {
                    Some(line) => format!("the server process exited (last stderr: {line})"),
                    None => "the server process exited".into(),
                }
            }
            TransportConfig::Http { .. } => "the connection closed".into(),
        }
    }

    async fn connect(
        &self,
        entry: &Arc<Entry>,
        session: u64,
    ) -> Result<(Arc<Live>, Arc<Tap>), ConnectError> {
        let config = &entry.config;
        let tap = Tap::new(self.inner.broker.clone());
        let raw = RawRequests::with_input_results();
        let raw_kept = raw.clone();
        let elicitor = Elicitor {
            broker: self.inner.broker.clone(),
            asker: asker_for(config),
            answer_timeout: config.answer_timeout,
            session,
        };
        let handler = Handler {
            elicitor: elicitor.clone(),
            tap: tap.clone(),
            raw: raw.clone(),
            config: client_config(lifecycle_for(config).1),
        };
        let service = open_client(
            config,
            handler,
            tap.clone(),
            raw,
            entry.stderr.clone(),
            Some(&self.inner.auth),
            &self.inner.http,
        )
        .await?;
        let live = Arc::new(Live {
            peer: service.peer().clone(),
            service: Arc::new(tokio::sync::Mutex::new(Some(service))),
            elicitor,
            tap: tap.clone(),
            raw: raw_kept,
            ended: CancellationToken::new(),
            why_ended: Mutex::default(),
        });
        Ok((live, tap))
    }
}

fn describe(state: &SessionState) -> String {
    match state {
        SessionState::Connecting => "connecting".into(),
        SessionState::Ready { .. } => "ready".into(),
        SessionState::Failed { reason } => format!("failed: {reason}"),
        SessionState::Reconnecting {
            attempt, reason, ..
        } => {
            format!("reconnecting, attempt {attempt}: {reason}")
        }
        SessionState::SignInRequired { reason } => format!("sign-in required: {reason}"),
        SessionState::Stopped => "stopped".into(),
    }
}

fn timeout_error(entry: &Entry) -> SessionError {
    SessionError::Timeout {
        server: entry.config.name.clone(),
        seconds: entry.config.request_timeout.as_secs(),
    }
}

fn protocol_error(entry: &Entry, e: rmcp::ServiceError) -> SessionError {
    SessionError::Protocol {
        server: entry.config.name.clone(),
        message: crate::mcp::connect::in_words(&e.to_string()),
    }
}
