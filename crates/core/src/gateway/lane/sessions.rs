//! The sessions the lane knows, and the end of those their agents left quiet.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use rmcp::model::{
    ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion, RequestId,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio_util::sync::CancellationToken;

use super::stream::Asked;
use crate::gateway::forward::{Forwarder, ForwarderState};
use crate::lock;

/// Sessions kept before the ended ones are swept out of the map.
const SWEEP_ABOVE: usize = 256;

/// How long an agent's session may stay quiet before it ends, unless told otherwise: rmcp's own
/// default for the sessions it idles out.
const SESSION_IDLE: std::time::Duration = std::time::Duration::from_secs(300);

/// How long an agent's open stream keeps its session without a request on it.
const LISTENING_KEEPS: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// The sessions the lane knows, by server and session id.
pub(crate) struct Lanes {
    sessions: Mutex<HashMap<(String, String), Arc<Session>>>,
    /// Each server's rmcp session manager, which ends a session the agent left quiet: rmcp
    /// would only count the requests it sees itself, and the lane takes most of them.
    managers: Mutex<HashMap<String, Weak<LocalSessionManager>>>,
    idle_ms: AtomicU64,
    /// Wakes [`end_quiet_sessions`] when the limit changes (it may be sleeping for a quarter
    /// of the old one), or when sessions are to end now.
    idle_changed: tokio::sync::Notify,
    /// The stand-in for the agent of every sessionless request (see [`Lanes::sessionless_peer`]).
    sessionless: OnceLock<Peer<RoleServer>>,
}

impl Default for Lanes {
    fn default() -> Self {
        Lanes {
            sessions: Mutex::default(),
            managers: Mutex::default(),
            idle_ms: AtomicU64::new(SESSION_IDLE.as_millis() as u64),
            idle_changed: tokio::sync::Notify::new(),
            sessionless: OnceLock::new(),
        }
    }
}

pub(super) struct Session {
    /// Weak: the session is rmcp's; when it ends, its `Forwarder` (and upstream) go with it.
    pub(super) forwarder: Weak<ForwarderState>,
    /// The session manager of the endpoint it was opened on, which alone can end it: a server
    /// removed and put back gets a new endpoint, and the new one's manager does not know it.
    manager: Weak<LocalSessionManager>,
    /// The agent's side of the session, as rmcp made it at `initialize`.
    pub(super) peer: Peer<RoleServer>,
    /// The lane's calls in flight, by the agent's request id, for its cancellations.
    pub(super) in_flight: Mutex<HashMap<RequestId, CancellationToken>>,
    /// The gateway's requests on this session's lane streams, waiting for the agent's answers.
    pub(super) asked: Arc<Asked>,
    /// Cancellations of requests not seen yet, with when they came: an agent that posts on
    /// more than one connection (the bridge, a TypeScript SDK agent) can have its
    /// `notifications/cancelled` arrive before the request it withdraws.
    early_cancels: Mutex<std::collections::VecDeque<(RequestId, std::time::Instant)>>,
    /// When the agent last sent anything on this session (`crate::ask::boot_ms`: a clock nobody
    /// sets, so one set back does not keep a quiet session, and its "for this session"
    /// decisions, longer).
    pub(super) last_seen: AtomicU64,
    /// The agent's streams open on this session (GET): while one is, the agent is there.
    listening: AtomicU64,
    /// The person revoked the agent's token: the session ends, busy or not.
    ending: AtomicBool,
    /// Its agent ended it (DELETE); set and read under `in_flight`'s lock, so a request
    /// still arriving then is refused rather than run.
    pub(super) closed: AtomicBool,
}

/// One of the agent's streams open on a session, counted while its response's body lives; when
/// it closes (the agent went away, or closed it), the session's quiet time starts then.
pub(super) struct Listening(Arc<Session>);

impl Listening {
    pub(super) fn hold(
        session: Arc<Session>,
        response: axum::response::Response,
    ) -> axum::response::Response {
        use futures::StreamExt;
        session.listening.fetch_add(1, Ordering::Relaxed);
        let held = Listening(session);
        let (parts, body) = response.into_parts();
        let body = body.into_data_stream().map(move |chunk| {
            let _ = &held;
            chunk
        });
        axum::response::Response::from_parts(parts, axum::body::Body::from_stream(body))
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.0
            .last_seen
            .store(crate::ask::boot_ms(), Ordering::Relaxed);
        self.0.listening.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A lane request's place in its session's calls in flight, given up however the request
/// ends (a panic in the `Forwarder` included, which would leave the session busy for good).
pub(super) struct Registered(pub(super) Arc<Session>, pub(super) RequestId);

impl Drop for Registered {
    fn drop(&mut self) {
        lock(&self.0.in_flight).remove(&self.1);
    }
}

/// How long a cancellation waits for the request it names, and how many wait at most.
const EARLY_CANCEL_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
const EARLY_CANCELS_KEPT: usize = 64;

impl Session {
    /// The agent cancelled request `id`, which has not arrived (or has already been answered).
    pub(super) fn cancelled_early(&self, id: RequestId) {
        let mut early = lock(&self.early_cancels);
        if early.len() >= EARLY_CANCELS_KEPT {
            early.pop_front();
        }
        early.push_back((id, std::time::Instant::now()));
    }

    /// Whether request `id`, arriving now, was already cancelled (then forgotten).
    pub(super) fn was_cancelled(&self, id: &RequestId) -> bool {
        let mut early = lock(&self.early_cancels);
        early.retain(|(_, at)| at.elapsed() < EARLY_CANCEL_WAIT);
        match early.iter().position(|(cancelled, _)| cancelled == id) {
            Some(i) => {
                early.remove(i);
                true
            }
            None => false,
        }
    }
}

/// Put in an `initialize` request's extensions; the `Forwarder` that answers it leaves its
/// handle here, and the session id rmcp gives the agent names it from then on.
#[derive(Clone, Default)]
pub(crate) struct Opening(pub(super) Arc<OnceLock<(Weak<ForwarderState>, Peer<RoleServer>)>>);

impl Opening {
    /// Called by the `Forwarder` answering `initialize` over HTTP.
    pub(crate) fn opened(ctx: &RequestContext<RoleServer>, forwarder: &Forwarder) {
        if let Some(opening) = ctx
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Opening>())
        {
            let _ = opening.0.set((forwarder.downgrade(), ctx.peer.clone()));
        }
    }
}

/// The service behind the sessionless stand-in: it is never asked anything.
struct Nobody;

impl rmcp::ServerHandler for Nobody {}

impl Lanes {
    /// The agent's side of a sessionless (2026-07-28) request run on the lane: made once and
    /// shared, where rmcp makes one per request, with the handshake rmcp's stand-in carries
    /// (the revision, no capabilities, no name: such a request says who sent it in its own
    /// `_meta`, and what it leaves out reads the same either way). It reaches nobody: its
    /// service is ended at once, so anything sent through it fails rather than waits (nothing
    /// is: such a request's progress goes on its own stream, and no server request is put to
    /// a sessionless agent).
    pub(super) fn sessionless_peer(&self) -> Peer<RoleServer> {
        self.sessionless
            .get_or_init(|| {
                let nothing_comes = (
                    futures::sink::drain(),
                    futures::stream::pending::<rmcp::service::RxJsonRpcMessage<RoleServer>>(),
                );
                let handshake = InitializeRequestParams::new(
                    ClientCapabilities::default(),
                    Implementation::default(),
                )
                .with_protocol_version(ProtocolVersion::V_2026_07_28);
                let ended = CancellationToken::new();
                ended.cancel();
                rmcp::service::serve_directly_with_ct(Nobody, nothing_comes, Some(handshake), ended)
                    .peer()
                    .clone()
            })
            .clone()
    }

    pub(super) fn open(
        &self,
        server: &str,
        session: &str,
        forwarder: Weak<ForwarderState>,
        peer: Peer<RoleServer>,
    ) {
        let manager = lock(&self.managers)
            .get(server)
            .cloned()
            .unwrap_or_default();
        let mut sessions = lock(&self.sessions);
        if sessions.len() >= SWEEP_ABOVE {
            sessions.retain(|_, s| s.forwarder.strong_count() > 0);
        }
        sessions.insert(
            (server.to_owned(), session.to_owned()),
            Arc::new(Session {
                forwarder,
                manager,
                peer,
                in_flight: Mutex::default(),
                asked: Arc::default(),
                early_cancels: Mutex::default(),
                last_seen: AtomicU64::new(crate::ask::boot_ms()),
                listening: AtomicU64::new(0),
                ending: AtomicBool::new(false),
                closed: AtomicBool::new(false),
            }),
        );
    }

    /// The session manager of `server`'s endpoint, whose sessions never idle out on their own
    /// (see [`end_quiet_sessions`]).
    pub(crate) fn session_manager(&self, server: &str) -> Arc<LocalSessionManager> {
        let mut manager = LocalSessionManager::default();
        manager.session_config.keep_alive = None;
        let manager = Arc::new(manager);
        lock(&self.managers).insert(server.to_owned(), Arc::downgrade(&manager));
        manager
    }

    /// `server`'s session manager, while its endpoint stands.
    pub(super) fn manager(&self, server: &str) -> Option<Arc<LocalSessionManager>> {
        lock(&self.managers).get(server).and_then(Weak::upgrade)
    }

    /// How long a session may stay quiet before it ends.
    pub(crate) fn set_session_idle(&self, idle: std::time::Duration) {
        self.idle_ms
            .store(idle.as_millis() as u64, Ordering::Relaxed);
        // Stored for the task if it is not sleeping yet, so the change is never missed.
        self.idle_changed.notify_one();
    }

    /// The agent ended session `session` (DELETE): the lane's calls on it are cancelled, and
    /// it takes no more requests (they go to rmcp, which no longer knows it).
    pub(super) fn close(&self, server: &str, session: &str) {
        let closed = lock(&self.sessions).remove(&(server.to_owned(), session.to_owned()));
        if let Some(closed) = closed {
            let in_flight = lock(&closed.in_flight);
            closed.closed.store(true, Ordering::Relaxed);
            for token in in_flight.values() {
                token.cancel();
            }
        }
    }

    /// Ends agent `agent`'s sessions now (the person revoked its token): its stream of the
    /// server's notifications closes with them, and whatever it was asked to wait for goes.
    pub(crate) fn end_agent(&self, agent: &str) {
        let mut found = false;
        for session in lock(&self.sessions).values() {
            if Forwarder::upgrade(&session.forwarder).is_some_and(|f| f.agent_id() == Some(agent)) {
                session.ending.store(true, Ordering::Relaxed);
                found = true;
            }
        }
        if found {
            self.idle_changed.notify_one();
        }
    }

    fn idle(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.idle_ms.load(Ordering::Relaxed))
    }

    /// Takes out the sessions that ended, those quiet for longer than allowed with nothing of
    /// theirs in flight on the lane, and those of revoked agents; the latter two are returned,
    /// to be ended.
    fn take_quiet(&self) -> Vec<(Arc<LocalSessionManager>, String)> {
        let now = crate::ask::boot_ms();
        let idle = self.idle_ms.load(Ordering::Relaxed);
        let mut quiet = Vec::new();
        lock(&self.sessions).retain(|(_, id), session| {
            if session.forwarder.strong_count() == 0 {
                return false;
            }
            let ending = session.ending.load(Ordering::Relaxed);
            let quiet_for = now.saturating_sub(session.last_seen.load(Ordering::Relaxed));
            // A stream open keeps the session, for a day at most without a word: a host
            // stopped (SIGSTOP) or one that opened another session and left this one's stream
            // open would keep its places for good.
            let listening = session.listening.load(Ordering::Relaxed) > 0
                && quiet_for < LISTENING_KEEPS.as_millis() as u64;
            let busy =
                !lock(&session.in_flight).is_empty() || session.asked.is_waiting() || listening;
            let left_quiet = quiet_for > idle;
            if !ending && (busy || !left_quiet) {
                return true;
            }
            if let Some(manager) = session.manager.upgrade() {
                quiet.push((manager, id.clone()));
            }
            false
        });
        quiet
    }

    /// The session the agent sent something on, and its `Forwarder` while the session lives;
    /// sending something keeps it from ending quiet. A session another agent opened is that
    /// agent's alone (its id is random, but it may leak): to an agent holding another token it
    /// is `NotYours`, and nothing of it is touched.
    pub(super) fn find(&self, server: &str, session: &str, from: &http::Extensions) -> Found {
        let mut sessions = lock(&self.sessions);
        let key = (server.to_owned(), session.to_owned());
        let Some(found) = sessions.get(&key).cloned() else {
            return Found::Unknown;
        };
        let Some(forwarder) = Forwarder::upgrade(&found.forwarder) else {
            sessions.remove(&key);
            return Found::Unknown;
        };
        if !forwarder.is_owners(from) {
            return Found::NotYours;
        }
        found
            .last_seen
            .store(crate::ask::boot_ms(), Ordering::Relaxed);
        Found::Mine(found, forwarder)
    }
}

/// What [`Lanes::find`] found of a session.
pub(crate) enum Found {
    Mine(Arc<Session>, Forwarder),
    /// Another agent's.
    NotYours,
    /// None the lane knows (ended, or never opened): rmcp answers as it does.
    Unknown,
}

/// Ends agents' sessions left quiet for longer than allowed, until the gateway stops. Ending one
/// drops its `Forwarder`: what the agent was asked to wait for is withdrawn as the agent's, and
/// its upstream session closes.
pub(crate) async fn end_quiet_sessions(lanes: &Lanes, stop: CancellationToken) {
    loop {
        let period = (lanes.idle() / 4).clamp(
            std::time::Duration::from_millis(100),
            std::time::Duration::from_secs(30),
        );
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(period) => {}
            () = lanes.idle_changed.notified() => {}
        }
        for (manager, id) in lanes.take_quiet() {
            tracing::info!(session = %id, "gateway: an agent's session ends (it went quiet, or its token was revoked)");
            let _ = manager.close_session(&id.into()).await;
        }
    }
}
