//! The gateway: agents reach their configured servers through Countersign, so the person
//! answers every question on the desktop (whatever the agent supports) and approves the tool
//! calls policy marks.
//!
//! Streamable HTTP on 127.0.0.1 only, one path per server (`/mcp/<name>`) so agents see each
//! server's own tool names. Every request passes [`guard`] first: Host and Origin must be this
//! machine's gateway (DNS rebinding), the bearer token must be an agent's (`registry`), whose
//! [`TokenAgent`] then travels with the request; anything else is refused before it can reach
//! a server. Behind it, rmcp's Streamable HTTP server speaks both protocol
//! generations to the agent and `forward` gives each agent session its own upstream session.

mod faithful;
mod forward;
mod gone;
mod lane;
mod peer;
mod pending;
pub mod policy;
pub mod preview;
pub mod refusals;
pub mod registry;
mod sent;
mod status;
pub mod token;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::agents::connect;
pub use crate::agents::connect::ClientSetup;
use crate::ask::broker::Broker;
use crate::config::{GatewayConfig, ServerConfig};
use crate::lock;
use crate::settings::SettingsStore;
pub use registry::{AgentError, AgentView, CreatedAgent, TokenAgent};
pub use status::{GatewayInfo, GatewayServer};

/// Upstream session numbers for the broker start here, far from the app's own sessions'.
const FIRST_GATEWAY_SESSION: u64 = 1 << 40;

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The agents' tokens (or the shared token) cannot be read: no agent could be told apart.
    #[error(transparent)]
    Agents(#[from] AgentError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Written beside the audit log while the gateway listens, for `countersign-bridge`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discovery {
    pub url: String,
    pub pid: u32,
}

#[derive(Default)]
struct Status {
    addr: Option<SocketAddr>,
    error: Option<String>,
}

pub(crate) struct Shared {
    /// The configured servers, as the person last saved them (see [`Gateway::set_servers`]).
    servers: std::sync::RwLock<BTreeMap<String, ServerConfig>>,
    /// Fires, per server, when the person changes or removes it: its upstreams close, so the
    /// next request opens one with what the person saved (see [`Shared::retirement`]).
    retired: Mutex<std::collections::HashMap<String, CancellationToken>>,
    /// Fires, per agent, when the person revokes its token: its upstreams close, and the
    /// questions asked in its calls go with them (see [`Shared::revocation`]).
    revoked: Mutex<std::collections::HashMap<String, CancellationToken>>,
    pub(crate) broker: Broker,
    pub(crate) settings: SettingsStore,
    pub(crate) next_session: AtomicU64,
    pub(crate) pool: forward::Pool,
    /// One HTTP client for every upstream session to a remote server (see `open_client`).
    pub(crate) http: crate::mcp::connect::SharedHttp,
    /// Agent sessions whose tool calls take the short way (see `lane`).
    lanes: lane::Lanes,
    /// Approvals the person has not answered in time for the agent's call (see `pending`).
    pub(crate) pending: pending::PendingStore,
    /// The broker session of the questions behind pending approvals, tied to no upstream.
    pub(crate) pending_session: u64,
    /// The requests refused lately, for the Connect page.
    pub(crate) refusals: Arc<refusals::Refusals>,
    /// Calls waiting for the person that can be previewed with `dryRun: true`.
    pub(crate) previews: preview::Previews,
    /// What time it is for the gate (milliseconds since the Unix epoch); tests set their own.
    pub(crate) clock: std::sync::RwLock<Clock>,
    /// A test set `clock`: Denies end by it too.
    pub(crate) clock_set: std::sync::atomic::AtomicBool,
    /// Open upstream sessions by server, capped (`MAX_UPSTREAMS_PER_SERVER`, `forward::upstream`).
    pub(crate) open_upstreams: Mutex<forward::OpenUpstreams>,
    /// The tasks each agent's calls created, by server and agent: an agent's `tasks/*` reach
    /// only these, whichever of its upstream sessions (a task outlives the one it began in).
    pub(crate) own_tasks: Mutex<forward::TaskOwners>,
    /// The person's sign-ins to remote servers, shared with the app's sessions; the agent
    /// never sees the server's tokens.
    pub(crate) auth: std::sync::OnceLock<crate::mcp::oauth::Auth>,
    /// Tells the person that a server wants a (new) sign-in, with its `WWW-Authenticate`.
    pub(crate) sign_in_needed: std::sync::OnceLock<SignInNeeded>,
    config: GatewayConfig,
    agents: registry::AgentStore,
    paused: AtomicBool,
    /// Fired when the person pauses the gateway, and replaced when they resume: every agent
    /// request in flight holds it (`Paused`), and stops when it fires.
    halt: Mutex<CancellationToken>,
    /// How long an upstream session may sit idle before it is pinged (`forward::upstream`).
    ping_every_ms: AtomicU64,
    /// Tells whoever watches (the shell: the tray and the Connect page) that the gateway
    /// started listening, failed to, or was paused or resumed: a count of such changes.
    changes: tokio::sync::watch::Sender<u64>,
    status: Mutex<Status>,
    stop: CancellationToken,
    /// Ends the gateway's own thread (see [`Gateway::own_thread`]), and its runtime.
    thread: Mutex<Option<(CancellationToken, tokio::runtime::Handle)>>,
}

/// See [`Gateway::on_sign_in_needed`].
pub type SignInNeeded = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// Milliseconds since the Unix epoch.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

async fn end_quiet_sessions(shared: Arc<Shared>) {
    lane::end_quiet_sessions(&shared.lanes, shared.stop.clone()).await;
}

/// Writes what agents' audit budgets counted (`audit::traffic`) once it is due, so counts
/// are on disk soon after a flood stops, not only as the app quits.
async fn write_counts(shared: Arc<Shared>) {
    let every = std::time::Duration::from_millis(crate::ask::audit::traffic::REFILL_MS);
    loop {
        tokio::select! {
            () = shared.stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        if let Err(e) = shared
            .broker
            .audit()
            .record_counted(Some(crate::ask::unix_ms()))
        {
            tracing::error!(error = %e, "what agents did past their budget went unwritten");
        }
    }
}

/// One server's Streamable HTTP endpoint for agents.
type Endpoint = StreamableHttpService<forward::Forwarder, LocalSessionManager>;

/// The endpoints by server name, once the gateway serves (the origins it allows go with them).
#[derive(Default)]
struct Endpoints {
    origins: Vec<String>,
    by_server: std::collections::HashMap<String, Endpoint>,
}

/// The gateway. Cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    shared: Arc<Shared>,
    /// Kept apart from `Shared`: each endpoint holds the `Shared` its sessions use.
    endpoints: Arc<std::sync::RwLock<Endpoints>>,
}

impl Shared {
    /// The server's config as the person last saved it.
    pub(crate) fn server(&self, name: &str) -> Option<ServerConfig> {
        self.servers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    fn server_names(&self) -> Vec<String> {
        self.servers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// Fires when the person changes or removes `server` from now on.
    pub(crate) fn retirement(&self, server: &str) -> CancellationToken {
        lock(&self.retired)
            .entry(server.to_owned())
            .or_default()
            .clone()
    }

    /// Fires when the person revokes agent `agent` (at once if they already have). Nobody
    /// in particular (`""`, a request that did not come through the guard) is never revoked.
    pub(crate) fn revocation(&self, agent: &str) -> CancellationToken {
        if agent.is_empty() {
            return CancellationToken::new();
        }
        let mut revoked = lock(&self.revoked);
        let token = revoked.entry(agent.to_owned()).or_default().clone();
        // Looked at once the token is in place: a revoke after this finds it and fires it.
        if !self.agents.holds(agent) {
            revoked.remove(agent);
            token.cancel();
        }
        token
    }
}

impl Gateway {
    /// Upstream sessions with remote servers use the person's sign-ins from `auth`.
    pub fn set_auth(&self, auth: crate::mcp::oauth::Auth) {
        let _ = self.shared.auth.set(auth);
    }

    /// Called with (server, `WWW-Authenticate`) when a remote server refuses the person's
    /// sign-in for an agent's request, so the person is asked to sign in again.
    pub fn on_sign_in_needed(&self, hook: SignInNeeded) {
        let _ = self.shared.sign_in_needed.set(hook);
    }

    /// Reads the agents' tokens (`agents.json` beside `token_path`) and the shared token at
    /// `token_path` (creating it, unless the person revoked it); does not listen yet.
    pub fn new(
        config: GatewayConfig,
        servers: Vec<ServerConfig>,
        broker: Broker,
        settings: SettingsStore,
        token_path: PathBuf,
    ) -> Result<Self, GatewayError> {
        let pending_path = token_path.with_file_name("pending-approvals.json");
        let agents =
            registry::AgentStore::open(token_path.with_file_name("agents.json"), token_path)?;
        // The person's denial of a pending call may be among what could not be read, and a
        // remembered allow would run the call unasked: every such allow waits on the person.
        let pending = pending::PendingStore::load(
            Some(pending_path),
            crate::ask::decision_ms(),
            |lost| {
                settings
                    .hold_back_for(lost)
                    .map_err(|e| tracing::error!(error = %e, "cannot save the hold-back for the pending approvals lost"))
                    .is_ok()
            },
        );
        let decisions: std::collections::HashSet<u64> =
            settings.get().remembered.iter().map(|d| d.id).collect();
        pending.forget_decisions_but(&decisions);
        // A new shared token (its file deleted to replace it) is a new holder: what the person
        // allowed the old one, and its answered calls, are not the new holder's.
        let mut forgotten = true;
        if agents.shared_token_is_new() {
            pending.forget_agent(registry::SHARED_ID);
            if let Err(e) = settings.update(|s| {
                s.remembered.retain(|d| d.agent != registry::SHARED_ID);
            }) {
                tracing::error!(error = %e, "cannot forget the replaced shared token's decisions");
                forgotten = false;
            }
        }
        // Noted only once forgotten: else the next start sees the token as known, and the old
        // holder's decisions would stay the new holder's for good.
        if forgotten && let Err(e) = agents.note_shared_token() {
            tracing::warn!(error = %e, "cannot note the shared token");
        }
        Ok(Gateway {
            shared: Arc::new(Shared {
                servers: std::sync::RwLock::new(
                    servers.into_iter().map(|s| (s.name.clone(), s)).collect(),
                ),
                retired: Mutex::default(),
                revoked: Mutex::default(),
                broker,
                settings,
                next_session: AtomicU64::new(FIRST_GATEWAY_SESSION),
                pool: forward::Pool::default(),
                http: Default::default(),
                lanes: lane::Lanes::default(),
                pending,
                pending_session: FIRST_GATEWAY_SESSION - 1,
                previews: preview::Previews::default(),
                refusals: Arc::default(),
                clock: std::sync::RwLock::new(Arc::new(crate::ask::decision_ms)),
                clock_set: std::sync::atomic::AtomicBool::new(false),
                open_upstreams: Mutex::default(),
                own_tasks: Mutex::default(),
                auth: std::sync::OnceLock::new(),
                sign_in_needed: std::sync::OnceLock::new(),
                config,
                agents,
                paused: AtomicBool::new(false),
                halt: Mutex::default(),
                ping_every_ms: AtomicU64::new(crate::session::DEFAULT_PING_EVERY.as_millis() as u64),
                changes: tokio::sync::watch::Sender::new(0),
                status: Mutex::default(),
                stop: CancellationToken::new(),
                thread: Mutex::default(),
            }),
            endpoints: Arc::default(),
        })
    }

    /// Serves `servers` from now on, as the person saved them: new ones get an endpoint; a
    /// changed one keeps its endpoint, and its upstream sessions close, so each agent's next
    /// request reaches the server as now configured (its policy included); a removed one's
    /// endpoint goes (404) and its upstream sessions close. Unchanged servers are untouched.
    pub fn set_servers(&self, servers: Vec<ServerConfig>) {
        let new: BTreeMap<String, ServerConfig> =
            servers.into_iter().map(|s| (s.name.clone(), s)).collect();
        let old = std::mem::replace(
            &mut *self
                .shared
                .servers
                .write()
                .unwrap_or_else(|e| e.into_inner()),
            new.clone(),
        );
        let gone: Vec<&String> = old
            .iter()
            .filter(|(name, config)| new.get(*name) != Some(config))
            .map(|(name, _)| name)
            .collect();
        for name in &gone {
            if let Some(retire) = lock(&self.shared.retired).remove(*name) {
                retire.cancel();
            }
        }
        {
            let mut endpoints = self.endpoints.write().unwrap_or_else(|e| e.into_inner());
            if !endpoints.origins.is_empty() {
                endpoints.by_server.retain(|name, _| new.contains_key(name));
                for name in new.keys() {
                    if !endpoints.by_server.contains_key(name) {
                        let endpoint = self.endpoint(name, endpoints.origins.clone());
                        endpoints.by_server.insert(name.clone(), endpoint);
                    }
                }
            }
        }
        self.shared.pool.keep_info_of(|name| new.contains_key(name));
        if !gone.is_empty() || old.len() != new.len() {
            tracing::info!(servers = new.len(), "gateway: servers changed");
            self.changed();
        }
    }

    /// The shared token (the built-in agent `shared`) as read at start; empty when the person
    /// had revoked it.
    pub fn token(&self) -> &str {
        self.shared.agents.shared_token()
    }

    /// Makes an agent named `name` with its own token, with the snippets that carry it
    /// (`bridge_command` is how this install runs the bridge). The token is not kept.
    pub fn create_agent(
        &self,
        name: &str,
        bridge_command: &str,
    ) -> Result<CreatedAgent, AgentError> {
        let (agent, token) = self.shared.agents.create(name)?;
        let clients = connect::client_setups(
            &self.base_url(),
            &token,
            bridge_command,
            &self.shared.server_names(),
        );
        Ok(CreatedAgent {
            agent,
            token,
            clients,
        })
    }

    /// Registers a token made elsewhere (a config rewrite writes it into the agent's file).
    pub fn adopt_agent(&self, name: &str, token: &str) -> Result<AgentView, AgentError> {
        self.shared.agents.adopt(name, token)
    }

    pub fn agents(&self) -> Vec<AgentView> {
        self.shared.agents.list()
    }

    /// Revokes remembered decision `id` (Settings' Revoke): the answers to pending calls given
    /// with it go first, so their retries are asked about again. Should their going not be
    /// saved, the decision stays, and the error says why: revoked with them still on disk, a
    /// restart would bring the answers back, and with them a yes the person took back.
    pub fn revoke_decision(
        &self,
        id: u64,
        now_ms: u64,
    ) -> Result<crate::settings::Settings, String> {
        self.shared.pending.forget_decision(id).map_err(|e| {
            format!(
                "Not revoked: the calls allowed with it that wait for their agents could not \
                 be saved without it ({e})"
            )
        })?;
        let revoked = self
            .shared
            .settings
            .revoke(id, now_ms)
            .map_err(|e| e.to_string())?;
        // An answer tied to it in the instant between the two (its keeping had just been
        // saved) goes now; one not saved as gone is left out at the next start.
        let _ = self.shared.pending.forget_decision(id);
        Ok(revoked)
    }

    /// From the next request on, agent `id`'s token is refused.
    /// Cuts the agent off, and forgets what the person decided for it: nothing it was allowed
    /// is left in Settings to mislead.
    /// Its approvals waiting in the app are withdrawn (the agent can make no call to use
    /// them), and so is every question its calls wait on: those calls end without running
    /// (a call the person allowed as the token went is refused), its upstream sessions close,
    /// and so do its sessions with the gateway.
    pub fn revoke_agent(&self, id: &str) -> Result<(), AgentError> {
        self.shared.agents.revoke(id)?;
        if let Some(revoked) = lock(&self.shared.revoked).remove(id) {
            revoked.cancel();
        }
        self.shared.lanes.end_agent(id);
        let run = self.shared.broker.audit().run().to_owned();
        for asked in self.shared.pending.forget_agent(id) {
            if asked.run == run {
                self.shared
                    .broker
                    .withdraw(asked.id, crate::ask::CancelReason::Revoked);
            }
        }
        if let Err(e) = self
            .shared
            .settings
            .update(|s| s.remembered.retain(|d| d.agent != id))
        {
            tracing::warn!(error = %e, "cannot forget a revoked agent's decisions");
        }
        Ok(())
    }

    fn base_url(&self) -> String {
        let port = self
            .addr()
            .map(|a| a.port())
            .unwrap_or(self.shared.config.port);
        format!("http://127.0.0.1:{port}")
    }

    /// Where it listens, once it does.
    pub fn addr(&self) -> Option<SocketAddr> {
        lock(&self.shared.status).addr
    }

    /// Binds 127.0.0.1 on the configured port and serves until [`Self::shutdown`]. A failure
    /// is also kept for [`Self::info`], so the app can say why agents cannot connect.
    pub async fn listen(&self) -> Result<SocketAddr, GatewayError> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.shared.config.port));
        match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => Ok(self.serve(listener)),
            Err(source) => {
                let error = GatewayError::Bind { addr, source };
                lock(&self.shared.status).error = Some(error.to_string());
                self.changed();
                Err(error)
            }
        }
    }

    /// The gateway's chores while it serves: idle upstreams closed, quiet sessions ended,
    /// counts written; and approvals left pending by an earlier run asked about again.
    fn keep_house(&self) {
        tokio::spawn(forward::reap_idle(self.shared.clone()));
        tokio::spawn(end_quiet_sessions(self.shared.clone()));
        tokio::spawn(write_counts(self.shared.clone()));
        pending::ask_again(&self.shared);
    }

    /// Serves on a bound listener (tests bind port 0).
    pub fn serve(&self, listener: tokio::net::TcpListener) -> SocketAddr {
        let addr = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], self.shared.config.port)));
        *lock(&self.shared.status) = Status {
            addr: Some(addr),
            error: None,
        };
        self.changed();
        let router = self.router(addr);
        let stop = self.shared.stop.clone();
        let refusals = self.shared.refusals.clone();
        let serving = move |listener: tokio::net::TcpListener| async move {
            let listener = peer::AgentListener::new(listener, refusals);
            // Served as a made service: axum's own way with a `Router` turns every route into
            // its service again for each connection (`Router::with_state`, about a tenth of a
            // forwarded call for agents that connect per request, as rmcp's do); here that is
            // done once, and a connection costs a clone of one `Arc` and the question of whose
            // process connected (`peer`), which `guard` reads.
            let served = axum::serve(
                listener,
                router
                    .with_state(())
                    .into_make_service_with_connect_info::<peer::Peer>(),
            )
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "gateway stopped");
            }
        };
        match self.own_thread() {
            Some(runtime) => {
                // The listener moves to the gateway's thread, so connections are accepted (and
                // served) there.
                let _inside = runtime.enter();
                match listener
                    .into_std()
                    .and_then(tokio::net::TcpListener::from_std)
                {
                    Ok(listener) => {
                        tokio::spawn(serving(listener));
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "gateway: cannot hand its listener over");
                        lock(&self.shared.status).error =
                            Some(format!("cannot listen on {addr}: {e}"));
                    }
                }
                self.keep_house();
            }
            None => {
                tokio::spawn(serving(listener));
                self.keep_house();
            }
        }
        tracing::info!(%addr, servers = self.shared.server_names().len(), "gateway listening");
        addr
    }

    /// The upstream sessions the gateway holds for session-less (2026-07-28) agents, and those
    /// connecting (for tests: a connection that failed leaves no place behind).
    pub async fn pooled_upstreams(&self) -> usize {
        self.shared.pool.len().await
    }

    /// Upstream sessions of `server` open now, across agents (for tests: a session that ended
    /// must give its place back).
    pub fn open_upstreams(&self, server: &str) -> usize {
        lock(&self.shared.open_upstreams).of_server(server)
    }

    /// Tasks alive on the gateway's own thread (for tests and the soak: a session that ended
    /// must leave none behind); `None` when it runs on the caller's runtime.
    pub fn tasks_alive(&self) -> Option<usize> {
        lock(&self.shared.thread)
            .as_ref()
            .map(|(_, runtime)| runtime.metrics().num_alive_tasks())
    }

    /// Starts the thread the gateway's work runs on: one thread with a runtime of its own.
    /// With the lane, what is left of a forwarded call is a few hand-offs between tasks, and on
    /// a multi-threaded runtime each can wake another worker thread; on one thread they cost
    /// no wake-up (BENCHMARKS.md, "Gateway"). It also keeps a busy gateway from slowing the
    /// app's own work. `None` (and the caller's runtime) if no thread can be started.
    fn own_thread(&self) -> Option<tokio::runtime::Handle> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .inspect_err(|e| tracing::warn!(error = %e, "gateway: no runtime of its own"))
            .ok()?;
        let handle = runtime.handle().clone();
        let stop = CancellationToken::new();
        let ended = stop.clone();
        std::thread::Builder::new()
            .name("countersign-gateway".into())
            .spawn(move || runtime.block_on(ended.cancelled_owned()))
            .inspect_err(|e| tracing::warn!(error = %e, "gateway: no thread of its own"))
            .ok()?;
        *lock(&self.shared.thread) = Some((stop, handle.clone()));
        Some(handle)
    }

    fn router(&self, addr: SocketAddr) -> axum::Router {
        // The origins `guard` lets through, so rmcp's own check agrees with it.
        let origins = vec![
            format!("http://127.0.0.1:{}", addr.port()),
            format!("http://localhost:{}", addr.port()),
            format!("http://[::1]:{}", addr.port()),
        ];
        {
            let mut endpoints = self.endpoints.write().unwrap_or_else(|e| e.into_inner());
            endpoints.by_server = self
                .shared
                .server_names()
                .into_iter()
                .map(|name| {
                    let endpoint = self.endpoint(&name, origins.clone());
                    (name, endpoint)
                })
                .collect();
            endpoints.origins = origins;
        }
        let endpoints = self.endpoints.clone();
        let shared = self.shared.clone();
        let router = axum::Router::new().route(
            "/mcp/{server}",
            axum::routing::any(
                move |axum::extract::Path(server): axum::extract::Path<String>,
                      request: Request| {
                    // Looked up per request: the person may add or remove servers while
                    // agents are connected (`set_servers`).
                    let endpoint = endpoints
                        .read()
                        .unwrap_or_else(|e| e.into_inner())
                        .by_server
                        .get(&server)
                        .cloned();
                    let shared = shared.clone();
                    async move {
                        match endpoint {
                            Some(endpoint) => {
                                lane::serve(&shared, &server, request, endpoint).await
                            }
                            None => no_such_server(&shared, &request),
                        }
                    }
                },
            ),
        );
        router
            .fallback({
                let shared = self.shared.clone();
                move |request: Request| async move { no_such_server(&shared, &request) }
            })
            .layer(axum::middleware::from_fn(gone::watch))
            // Outermost: nothing runs for a request that fails the guard.
            .layer(axum::middleware::from_fn_with_state(
                (self.shared.clone(), addr.port()),
                guard,
            ))
    }

    fn endpoint(&self, server: &str, origins: Vec<String>) -> Endpoint {
        let config = StreamableHttpServerConfig::default()
            .with_cancellation_token(self.shared.stop.child_token())
            .with_allowed_origins(origins)
            // Plain JSON for a plain answer; rmcp switches to SSE when progress or logging
            // comes first.
            .with_json_response(true)
            .with_legacy_session_mode(true)
            // The keep-alive write is what reveals an agent that went away (see `gone`).
            .with_sse_keep_alive(Some(std::time::Duration::from_secs(5)));
        let shared = self.shared.clone();
        let server = server.to_owned();
        let sessions = self.shared.lanes.session_manager(&server);
        StreamableHttpService::new(
            move || Ok(forward::Forwarder::new(shared.clone(), server.clone())),
            sessions,
            config,
        )
    }

    /// The call approval `ask` waits for, made with `dryRun: true` (see `preview`).
    pub async fn preview(
        &self,
        ask: crate::ask::AskId,
    ) -> Result<preview::PreviewResult, preview::PreviewError> {
        self.shared.previews.run(ask).await
    }

    /// How long an agent's session may stay quiet (no request, nothing of its in flight)
    /// before it ends; 5 minutes unless told otherwise.
    pub fn set_session_idle(&self, idle: std::time::Duration) {
        self.shared.lanes.set_session_idle(idle);
    }

    /// Pings upstream sessions idle this long (15 s unless set): for tests. Sessions opened
    /// from here on take it.
    pub fn set_ping_every(&self, every: std::time::Duration) {
        self.shared
            .ping_every_ms
            .store(every.as_millis() as u64, Ordering::Relaxed);
    }

    /// Has the gate tell time by `clock` (remembered decisions expire by it): for tests.
    pub fn set_clock(&self, clock: Clock) {
        self.shared.clock_set.store(true, Ordering::Relaxed);
        *self.shared.clock.write().unwrap_or_else(|e| e.into_inner()) = clock;
    }

    pub(crate) fn now_ms(shared: &Shared) -> u64 {
        (shared.clock.read().unwrap_or_else(|e| e.into_inner()))()
    }

    /// The clock a Deny ends by (`crate::ask::patient_ms`); a test's clock is both.
    pub(crate) fn patient_ms(shared: &Shared) -> u64 {
        if shared.clock_set.load(Ordering::Relaxed) {
            Self::now_ms(shared)
        } else {
            crate::ask::patient_ms()
        }
    }

    pub fn is_paused(&self) -> bool {
        self.shared.paused.load(Ordering::Relaxed)
    }

    /// While paused every agent request is refused (503), and the ones in flight stop: the
    /// servers are told to cancel them, the questions they asked are withdrawn, and their
    /// agents told why. Open sessions stay, and go on once resumed.
    pub fn set_paused(&self, paused: bool) {
        // The flag and the token change together, under the lock the guard reads both under:
        // a pause and a resume at once leave them agreeing.
        let mut halt = lock(&self.shared.halt);
        if paused {
            halt.cancel();
        } else if halt.is_cancelled() {
            *halt = CancellationToken::new();
        }
        self.shared.paused.store(paused, Ordering::SeqCst);
        drop(halt);
        self.changed();
        tracing::info!(paused, "gateway");
    }

    /// Changes as [`Self::info`] would show them: listening (or failing to), paused, resumed,
    /// whoever made them.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    fn changed(&self) {
        self.shared.changes.send_modify(|n| *n += 1);
    }

    /// The page the person reads to connect agents.
    pub fn info(&self) -> GatewayInfo {
        let url = self.base_url();
        let names = self.shared.server_names();
        let status = lock(&self.shared.status);
        GatewayInfo {
            enabled: self.shared.config.enabled,
            listening: status.addr.is_some() && !self.is_paused(),
            paused: self.is_paused(),
            error: status.error.clone(),
            servers: names
                .iter()
                .map(|n| GatewayServer {
                    name: n.clone(),
                    url: format!("{url}{}", connect::server_path(n)),
                })
                .collect(),
            agents: self.agents(),
            refusals: self.shared.refusals.list(),
            token_path: self.shared.agents.shared_token_path().display().to_string(),
            url,
        }
    }

    /// Tells `countersign-bridge` where to find the gateway (`path` is removed at shutdown).
    pub fn write_discovery(&self, path: &Path) -> std::io::Result<()> {
        let Some(addr) = self.addr() else {
            return Ok(());
        };
        let discovery = Discovery {
            url: format!("http://{addr}"),
            pid: std::process::id(),
        };
        let bytes = serde_json::to_vec(&discovery).map_err(std::io::Error::other)?;
        // 0600: which port and process the gateway is, for the user's own bridge only.
        crate::private_fs::write_atomic(path, &bytes)
    }

    /// Stops accepting agents and closes every upstream session.
    pub async fn shutdown(&self) {
        self.shared.stop.cancel();
        // The upstream sessions close on the gateway's thread, which ends after them.
        self.shared.pool.clear().await;
        if let Some((thread, _)) = lock(&self.shared.thread).take() {
            thread.cancel();
        }
    }
}

/// Refuses what is not a local agent holding the token, before anything reaches a server.
async fn guard(
    State((shared, port)): State<(Arc<Shared>, u16)>,
    mut request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    // Every refusal is also kept for the Connect page: the agent's host shows only "Failed".
    let refuse = |status: StatusCode, reason: &str| {
        shared
            .refusals
            .record(status, reason, headers, request.uri().path());
        refusal(status, reason)
    };
    // Before the token is read: a token in another user's hands opens nothing.
    let peer = request
        .extensions()
        .get::<axum::extract::ConnectInfo<peer::Peer>>()
        .map(|info| info.0.refusal());
    match peer {
        Some(None) => {}
        Some(Some(reason)) => return refuse(StatusCode::FORBIDDEN, &reason),
        None => {
            return refuse(
                StatusCode::FORBIDDEN,
                "whose process connected is not known",
            );
        }
    }
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    if !host.is_some_and(|h| is_local_authority(h, port)) {
        return refuse(
            StatusCode::FORBIDDEN,
            "Host is not this machine's gateway (DNS rebinding is refused)",
        );
    }
    // A page served from this very address (by whoever held the port while the app was not
    // running) would pass the Origin check below, and it runs in the person's own browser, so
    // the owner check too. Browsers mark every request they make to this machine with
    // `Sec-Fetch-Site` (Fetch Metadata); agents are not browsers (Node's `fetch` sends only
    // `Sec-Fetch-Mode`).
    if headers.contains_key("sec-fetch-site") {
        return refuse(StatusCode::FORBIDDEN, "requests from web pages are refused");
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ok = origin.to_str().ok().is_some_and(|o| {
            o.strip_prefix("http://")
                .is_some_and(|authority| is_local_authority(authority, port))
        });
        if !ok {
            return refuse(StatusCode::FORBIDDEN, "requests from web pages are refused");
        }
    }
    // The scheme name is case-insensitive (RFC 9110); the token is not.
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    let agent = given.and_then(|t| shared.agents.identify(t));
    let Some(agent) = agent else {
        let reason = if given.is_none() {
            "no bearer token was sent: paste the snippet from Countersign's Connect agents page, \
             which carries the agent's token"
        } else {
            "wrong or revoked bearer token: create a token for this agent on Countersign's \
             Connect agents page and paste its snippet"
        };
        let mut response = refuse(StatusCode::UNAUTHORIZED, reason);
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"countersign\""),
        );
        return response;
    };
    let halt = {
        let halt = lock(&shared.halt);
        (!shared.paused.load(Ordering::SeqCst)).then(|| halt.clone())
    };
    let Some(halt) = halt else {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "Countersign's gateway is paused; resume it from the app or its tray menu",
        );
    };
    // Handlers read it from the request's parts (`registry::token_agent`).
    request.extensions_mut().insert(agent);
    request.extensions_mut().insert(Paused(halt));
    next.run(request).await
}

/// Fires when the person pauses the gateway while the request it travels with is in flight
/// (in the HTTP request's extensions, which rmcp hands the handler).
#[derive(Clone)]
pub(crate) struct Paused(pub(crate) CancellationToken);

impl Paused {
    /// The token of request `ctx`, when it came through the guard.
    pub(crate) fn of(
        ctx: &rmcp::service::RequestContext<rmcp::service::RoleServer>,
    ) -> Option<CancellationToken> {
        ctx.extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Paused>())
            .map(|p| p.0.clone())
    }
}

/// What an agent's request stopped by a pause ends with.
pub(crate) fn paused_error() -> rmcp::ErrorData {
    rmcp::ErrorData::internal_error(
        "the person paused Countersign's gateway, which stopped this request; it was not \
         finished (resume it from the app or its tray menu)",
        None,
    )
}

/// `127.0.0.1:PORT`, `localhost:PORT` or `[::1]:PORT`, with exactly our port.
fn is_local_authority(authority: &str, port: u16) -> bool {
    let Some((host, p)) = authority.rsplit_once(':') else {
        return false;
    };
    p.parse::<u16>() == Ok(port)
        && matches!(
            host.to_ascii_lowercase().as_str(),
            "127.0.0.1" | "localhost" | "[::1]"
        )
}

/// A refusal agents can show: a JSON-RPC error body with the reason.
fn no_such_server(shared: &Shared, request: &Request) -> Response {
    let reason = "no server by that name on this gateway; the path is /mcp/<server>";
    shared.refusals.record(
        StatusCode::NOT_FOUND,
        reason,
        request.headers(),
        request.uri().path(),
    );
    refusal(StatusCode::NOT_FOUND, reason)
}

fn refusal(status: StatusCode, message: &str) -> Response {
    let mut response = (status, Body::from(refusal_body(message))).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// What a refused request is answered with: a JSON-RPC error saying why.
fn refusal_body(message: &str) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32001, "message": format!("Countersign: {message}")},
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_machine_on_our_port_is_local() {
        assert!(is_local_authority("127.0.0.1:47717", 47717));
        assert!(is_local_authority("localhost:47717", 47717));
        assert!(is_local_authority("LOCALHOST:47717", 47717));
        assert!(is_local_authority("[::1]:47717", 47717));
        assert!(!is_local_authority("127.0.0.1:80", 47717));
        assert!(!is_local_authority("127.0.0.1", 47717));
        assert!(!is_local_authority("evil.example:47717", 47717));
        assert!(!is_local_authority("localhost.evil.example:47717", 47717));
        assert!(!is_local_authority("127.0.0.2:47717", 47717));
    }
}
