//! The upstream side of forwarding: one rmcp client session to the server per agent session
//! (pooled for session-less agents, closed when idle), capped per server, with what the gate
//! needs to know about its tools and the notifications it relays back to the agent.

use super::*;
use crate::mcp::direct::{Answer, Upstreamed, Waiting};

mod lifecycle;
mod posted;
use lifecycle::Lifecycle;

/// A pooled upstream of a 2026-07-28 agent unused this long is closed.
const IDLE: Duration = Duration::from_secs(10 * 60);
/// Upstream sessions (for stdio servers, child processes) open at once per server, across
/// agents: each agent session gets its own, so without a cap one agent holding the token
/// could start processes without end.
pub(crate) const MAX_UPSTREAMS_PER_SERVER: usize = 32;
/// Of those, one agent's at most: an agent holding its own token cannot take every place and
/// lock the others out (it could open sessions, or, without sessions, name itself anew in each
/// request to get a pooled upstream each time).
pub(crate) const MAX_UPSTREAMS_PER_AGENT: usize = 8;
/// The shared token's share: it stands for every older setup at once, so more than one
/// agent's, but only half the server's places, so agents holding their own tokens always get in.
pub(crate) const MAX_UPSTREAMS_SHARED: usize = MAX_UPSTREAMS_PER_SERVER / 2;
/// (server, the agent's token id, the name and version it gives itself).
type PoolKey = (String, String, String, String);

/// Upstreams of session-less (2026-07-28) agents, by server, token and agent name and version:
/// two agents never share one, whatever they call themselves.
#[derive(Default)]
pub(crate) struct Pool {
    pub(super) entries:
        tokio::sync::Mutex<HashMap<PoolKey, Arc<tokio::sync::OnceCell<Arc<Upstream>>>>>,
    /// The last upstream `initialize`/`discover` answer per server, for `get_info` before a
    /// session-less agent's first request has reached the server.
    pub(super) last_info: RwLock<HashMap<String, ServerConfig_>>,
    /// When a server may next be started (or reached) again for an agent, by server and the
    /// agent's token id (not the name it gives itself, which it could change at each request),
    /// after it failed to start or ended soon after; forgotten once one lives long enough.
    failing: Mutex<HashMap<(String, String), super::Reopen>>,
}

impl Pool {
    /// The places the pool holds: session-less agents' upstream sessions, and those connecting.
    pub(crate) async fn len(&self) -> usize {
        self.entries.lock().await.len()
    }

    /// Forgets what servers no longer configured said about themselves.
    pub(crate) fn keep_info_of(&self, configured: impl Fn(&str) -> bool) {
        self.last_info
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|name, _| configured(name));
    }

    /// Why `server` is not started again for `agent` yet, and for how long.
    pub(super) fn wait(&self, server: &str, agent: &str) -> Option<String> {
        lock(&self.failing)
            .get(&(server.to_owned(), agent.to_owned()))
            .and_then(super::Reopen::wait)
    }

    pub(super) fn failed(&self, server: &str, agent: &str, why: String) {
        lock(&self.failing)
            .entry((server.to_owned(), agent.to_owned()))
            .or_default()
            .failed(why);
    }

    /// A pooled upstream of `server`'s for `agent` ended: soon after it opened, a failure to
    /// start; later, a crash after a life, which starts the count afresh.
    pub(super) fn ended(&self, server: &str, agent: &str, dead: &Upstream) {
        if dead.is_retired() {
            return;
        }
        if dead.opened.elapsed() < super::LIVED_TOO_SHORT {
            self.failed(server, agent, "it ended soon after it started".into());
        } else {
            lock(&self.failing).remove(&(server.to_owned(), agent.to_owned()));
        }
    }

    pub(crate) async fn clear(&self) {
        lock(&self.failing).clear();
        let entries: Vec<_> = self.entries.lock().await.drain().collect();
        for (_, cell) in entries {
            if let Some(up) = cell.get() {
                up.close();
            }
        }
    }
}

/// Closes pooled upstreams that have been idle for [`IDLE`], until the gateway stops.
pub(crate) async fn reap_idle(shared: Arc<Shared>) {
    loop {
        tokio::select! {
            _ = shared.stop.cancelled() => return,
            _ = tokio::time::sleep(IDLE / 4) => {}
        }
        let now = crate::ask::boot_ms();
        let mut entries = shared.pool.entries.lock().await;
        entries.retain(|_, cell| match cell.get() {
            Some(up)
                if up.is_closed()
                    || now.saturating_sub(up.last_used()) > IDLE.as_millis() as u64 =>
            {
                up.close();
                false
            }
            _ => true,
        });
    }
}

/// Tells the server we no longer wait for request `id`, on the side: a server that stopped
/// reading its stdin would hold the telling (and with it the call) as long as it likes, so it
/// gets the request's own time at most.
fn tell_cancelled(
    peer: &Peer<RoleClient>,
    id: &rmcp::model::RequestId,
    reason: &str,
    within: Duration,
) {
    let peer = peer.clone();
    let params = CancelledNotificationParam::new(Some(id.clone()), Some(reason.to_owned()));
    tokio::spawn(async move {
        let _ = tokio::time::timeout(within, peer.notify_cancelled(params)).await;
    });
}

/// An upstream request's answer on its way.
type Awaited<'a> =
    std::pin::Pin<Box<dyn Future<Output = Result<Upstreamed, rmcp::ServiceError>> + Send + 'a>>;

/// How a request reaches the server (see [`Upstream::way`]).
enum Way {
    Rmcp,
    Stdin,
    Post,
}

/// One upstream session, owned by one agent session (or one pooled session-less agent).
pub(crate) struct Upstream {
    pub(super) server: ServerConfig,
    /// `server.transport.identity()`, which every decision about its tools is bound to.
    pub(super) identity: String,
    pub(super) service: RunningService<RoleClient, Handler>,
    /// The upstream's results as they were on the wire.
    pub(super) raw: Arc<RawRequests>,
    pub(super) elicitor: Elicitor,
    pub(super) relay: Arc<AgentRelay>,
    pub(super) closed: CancellationToken,
    /// Fires when the person changes or removes the server (see `Gateway::set_servers`).
    retired: CancellationToken,
    /// What the upstream's session sees on the wire (completions of URL questions).
    pub(super) tap: Arc<Tap>,
    pub(super) session: u64,
    pub(super) last_used: AtomicU64,
    /// The tools as last listed, by name: what the gate knows of each (`ToolFacts`).
    pub(super) tools: Mutex<Option<HashMap<String, Arc<ToolFacts>>>>,
    /// Asks the person for a new sign-in (see `Gateway::on_sign_in_needed`).
    pub(super) sign_in_needed: Option<super::super::SignInNeeded>,
    /// What each request of ours says in `_meta` of who asks (2026-07-28: the revision, our
    /// name and capabilities), made once; `None` for a server whose lifecycle has a handshake.
    lifecycle: Option<Lifecycle>,
    /// The agent's id (`TokenAgent::id`), whose tasks these are (`Shared::own_tasks`).
    agent: String,
    /// Requests of ours in flight (`send_as_sent`): while any is, the session is not idle.
    in_flight: std::sync::atomic::AtomicUsize,
    /// When it was opened: one that ends soon after failed to start (`Forwarder::upstream`).
    pub(super) opened: std::time::Instant,
    /// Counts this upstream against [`MAX_UPSTREAMS_PER_SERVER`] until it is dropped.
    _slot: Slot,
}

/// Pings the upstream session each time it has sat idle for `every`, as the app's own sessions
/// are pinged: a server that stopped answering (hung, or its host gone) is closed, its
/// questions withdrawn, and the agent's next request starts or reaches it again, rather than
/// waiting out a timeout on every call. Only while idle: a server busy with a request may not
/// answer a ping until it is done, and a slow request is not a dead server.
async fn ping_while_idle(upstream: std::sync::Weak<Upstream>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        let Some(up) = upstream.upgrade() else {
            return;
        };
        if up.is_closed() {
            return;
        }
        if !up.is_idle_for(every.as_millis() as u64) {
            continue;
        }
        let wait = up.server.request_timeout.min(Duration::from_secs(10));
        let sent = std::time::Instant::now();
        let peer = up.peer().clone();
        drop(up);
        let ping = async {
            peer.send_request_with_option(
                ClientRequest::PingRequest(rmcp::model::PingRequest::default()),
                PeerRequestOptions::no_options(),
            )
            .await?
            .await_response()
            .await
        };
        // Silence, or a transport that closed, means dead. Any reply proves it alive, an
        // error too (a server may not offer `ping`), and so does an HTTP answer that is no
        // JSON-RPC (a sign-in asked for, too many requests, a proxy's error): the next call
        // meets it, and says what it is.
        let alive = !matches!(
            tokio::time::timeout(wait, ping).await,
            Err(_) | Ok(Err(rmcp::ServiceError::TransportClosed))
        );
        let Some(up) = upstream.upgrade() else {
            return;
        };
        // A request begun meanwhile may be what kept the server from answering.
        let since = sent.elapsed().as_millis() as u64;
        if alive || up.is_closed() || !up.is_idle_for(since) {
            continue;
        }
        tracing::warn!(
            server = %up.server.name,
            session = up.session,
            "gateway: the server stopped answering; its session is closed, and opened again at \
             the agent's next request"
        );
        up.closed.cancel();
        up.service.cancellation_token().cancel();
        return;
    }
}

/// Counts a request of ours in flight on an upstream while it lives.
struct InFlight<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> InFlight<'a> {
    fn of(up: &'a Upstream) -> Self {
        up.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(&up.in_flight)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How many task ids an agent is remembered to have created on a server; the oldest go first
/// (a server keeps a task for its `ttl`, and an agent that started this many has long
/// finished the first).
const MAX_OWN_TASKS: usize = 1024;

/// A task id longer than this is not kept (a server's ids are short; a hostile one's could
/// pin megabytes in each of [`MAX_OWN_TASKS`] places): the agent cannot follow that task
/// through the gateway.
const MAX_TASK_ID: usize = 256;

/// The ids of the tasks an agent's calls created on a server. A server ties its tasks to
/// whoever it sees, and every agent's session to an HTTP server signs in as the same person:
/// without this, one agent could list, read and cancel another's (or the person's own) tasks
/// there.
#[derive(Default)]
struct OwnTasks(std::collections::VecDeque<String>);

impl OwnTasks {
    fn insert(&mut self, task: &str) {
        if self.contains(task) {
            return;
        }
        if self.0.len() == MAX_OWN_TASKS {
            self.0.pop_front();
        }
        self.0.push_back(task.to_owned());
    }

    fn contains(&self, task: &str) -> bool {
        self.0.iter().any(|own| own == task)
    }

    fn remove(&mut self, task: &str) {
        self.0.retain(|own| own != task);
    }
}

/// Which agent created which task, by server as configured (its name and
/// `TransportConfig::identity`: the same name pointed at another server shares nothing with
/// it). A task outlives the upstream session it began in, so this is the gateway's.
#[derive(Default)]
pub(crate) struct TaskOwners(std::collections::HashMap<(String, String, String), OwnTasks>);

impl TaskOwners {
    /// Agent `agent`'s call created `task` on server `server` (`identity`). A server that
    /// gives an id anew (restarted, its count begun again) has no other task of that id left:
    /// whoever held it before holds it no more. `false` for an id too long to keep.
    fn created(&mut self, server: &str, identity: &str, agent: &str, task: &str) -> bool {
        if task.len() > MAX_TASK_ID {
            return false;
        }
        for ((s, i, a), own) in self.0.iter_mut() {
            if s == server && i == identity && a != agent {
                own.remove(task);
            }
        }
        self.0
            .entry((server.to_owned(), identity.to_owned(), agent.to_owned()))
            .or_default()
            .insert(task);
        true
    }

    fn owns(&self, server: &str, identity: &str, agent: &str, task: &str) -> bool {
        self.0
            .get(&(server.to_owned(), identity.to_owned(), agent.to_owned()))
            .is_some_and(|own| own.contains(task))
    }
}

/// One of a server's [`MAX_UPSTREAMS_PER_SERVER`] places, and of its agent's
/// [`MAX_UPSTREAMS_PER_AGENT`] (the shared token's [`MAX_UPSTREAMS_SHARED`]), given back when
/// dropped.
struct Slot {
    shared: Arc<Shared>,
    server: String,
    /// The token id it counts against.
    agent: String,
}

impl Slot {
    fn take(shared: &Arc<Shared>, server: &str, agent: &str) -> Result<Slot, String> {
        let mut open = lock(&shared.open_upstreams);
        let key = (server.to_owned(), agent.to_owned());
        let held = open.by_agent.get(&key).copied().unwrap_or(0);
        if agent == crate::gateway::registry::SHARED_ID {
            if held >= MAX_UPSTREAMS_SHARED {
                return Err(format!(
                    "the shared token (older setups) already has {MAX_UPSTREAMS_SHARED} sessions \
                     open with {server} through Countersign (its limit); give each agent its \
                     own token (Countersign's Connect agents page), or close some sessions first"
                ));
            }
        } else if held >= MAX_UPSTREAMS_PER_AGENT {
            return Err(format!(
                "this agent already has {MAX_UPSTREAMS_PER_AGENT} sessions open with {server} \
                 through Countersign (the limit for one agent); close some of them first"
            ));
        }
        let count = open.by_server.entry(server.to_owned()).or_default();
        if *count >= MAX_UPSTREAMS_PER_SERVER {
            return Err(format!(
                "{server} already has {MAX_UPSTREAMS_PER_SERVER} agent sessions open through \
                 Countersign (the limit); close some agents' sessions first"
            ));
        }
        *count += 1;
        *open.by_agent.entry(key.clone()).or_default() += 1;
        Ok(Slot {
            shared: shared.clone(),
            server: key.0,
            agent: key.1,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = lock(&self.shared.open_upstreams);
        if let Some(count) = open.by_server.get_mut(&self.server) {
            *count = count.saturating_sub(1);
        }
        let key = (
            std::mem::take(&mut self.server),
            std::mem::take(&mut self.agent),
        );
        if let Some(count) = open.by_agent.get_mut(&key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.by_agent.remove(&key);
            }
        }
    }
}

/// Upstream sessions open, by server and by (server, agent id).
#[derive(Default)]
pub(crate) struct OpenUpstreams {
    by_server: HashMap<String, usize>,
    by_agent: HashMap<(String, String), usize>,
}

impl OpenUpstreams {
    pub(crate) fn of_server(&self, server: &str) -> usize {
        self.by_server.get(server).copied().unwrap_or(0)
    }
}

/// What the gate knows of one tool, made once per listing: its definition as the person sees
/// it and that definition's digest (which remembered decisions are bound to) are the same for
/// every call until the server lists the tool again.
pub(super) struct ToolFacts {
    /// `approval::definition` of the tool: name, title, description, annotations, input schema.
    pub(super) definition: Value,
    pub(super) digest: String,
    /// The tool declares an output schema: a successful result must then carry structured
    /// content that fits it, which only the server can give.
    pub(super) has_output_schema: bool,
    /// The arguments a 2026-07-28 server asks to see as headers on each call (SEP-2243).
    pub(super) param_headers: crate::mcp::standard_headers::ParamHeaders,
}

impl Upstream {
    /// A task this agent's call created; `false` when it cannot be kept (see [`TaskOwners`]).
    fn note_own_task(&self, task: &str) -> bool {
        lock(&self._slot.shared.own_tasks).created(
            &self.server.name,
            &self.identity,
            &self.agent,
            task,
        )
    }

    /// Whether this agent's calls created `task` on this server.
    pub(super) fn is_own_task(&self, task: &str) -> bool {
        lock(&self._slot.shared.own_tasks).owns(
            &self.server.name,
            &self.identity,
            &self.agent,
            task,
        )
    }

    /// Whether the session is idle: no request of ours in flight, none begun in `for_ms`.
    fn is_idle_for(&self, for_ms: u64) -> bool {
        self.in_flight.load(Ordering::SeqCst) == 0
            && !self.relay.calls_in_flight()
            && crate::ask::boot_ms().saturating_sub(self.last_used.load(Ordering::Relaxed))
                >= for_ms
    }

    pub(super) async fn connect(
        shared: &Arc<Shared>,
        server: &ServerConfig,
        who: &Who,
    ) -> Result<Arc<Self>, String> {
        let retired = shared.retirement(&server.name);
        // Read again once its retirement is in hand: the person may have changed or removed the
        // server between the caller's read and now, and that change fired (and let go of) the
        // retirement of the server as it was, never this one.
        if shared.server(&server.name).as_ref() != Some(server) {
            return Err(format!(
                "{} was changed in Countersign's config just now; try again",
                server.name
            ));
        }
        let revoked = shared.revocation(&who.id);
        let slot = Slot::take(shared, &server.name, &who.id)?;
        let session = shared.next_session.fetch_add(1, Ordering::Relaxed);
        let (relay, notifications) = AgentRelay::new();
        let tap = Tap::with_relay(shared.broker.clone(), relay.clone());
        let raw = RawRequests::with_results();
        let mut asker = asker_for(server);
        asker.agent = Some(who.name.clone());
        asker.agent_id = Some(who.id.clone());
        asker.declared = who.declared.clone();
        let elicitor = Elicitor {
            broker: shared.broker.clone(),
            asker,
            answer_timeout: server.answer_timeout,
            session,
        };
        let handler = Handler {
            elicitor: elicitor.clone(),
            tap: tap.clone(),
            raw: raw.clone(),
            config: {
                let mut config = client_config(lifecycle_for(server).1);
                // Only where the person let agents' roots through (`agentRoots`).
                if who.roots && server.agent_roots {
                    // The agent's changes are told on (`Forwarder::on_roots_list_changed`).
                    let mut roots = rmcp::model::RootsCapabilities::default();
                    roots.list_changed = Some(true);
                    config.capabilities.roots = Some(roots);
                }
                config.capabilities.sampling = who.sampling.clone();
                config
            },
        };
        let service = open_client(
            server,
            handler,
            tap.clone(),
            raw.clone(),
            Arc::default(),
            shared.auth.get(),
            &shared.http,
        )
        .await
        .map_err(|e| match e {
            ConnectError::Retry(reason) | ConnectError::Fatal(reason) => reason,
            ConnectError::SignIn(header) => {
                if let Some(hook) = shared.sign_in_needed.get() {
                    hook(&server.name, &header);
                }
                format!(
                    "{} needs the person to sign in: Countersign asks them on the desktop; try again once they have",
                    server.name
                )
            }
        })?;
        let lifecycle = Lifecycle::of(&service);
        let upstream = Arc::new(Upstream {
            lifecycle,
            identity: server.transport.identity(),
            server: server.clone(),
            service,
            raw,
            elicitor,
            relay: relay.clone(),
            closed: tap.closed.clone(),
            retired: retired.clone(),
            tap: tap.clone(),
            session,
            last_used: AtomicU64::new(crate::ask::boot_ms()),
            tools: Mutex::default(),
            sign_in_needed: shared.sign_in_needed.get().cloned(),
            agent: who.id.clone(),
            in_flight: std::sync::atomic::AtomicUsize::new(0),
            opened: std::time::Instant::now(),
            _slot: slot,
        });
        if let Some(info) = upstream.info() {
            let mut last = shared
                .pool
                .last_info
                .write()
                .unwrap_or_else(|e| e.into_inner());
            last.insert(server.name.clone(), agent_facing(info));
        }
        tokio::spawn(relay_notifications(
            Arc::downgrade(&upstream),
            notifications,
        ));
        // The server's progress reaches the agent as sent (see `mcp::direct`).
        let relay = upstream.relay.clone();
        upstream
            .raw
            .direct
            .take_progress(Box::new(move |message| relay.progress_sent(message)));
        if upstream.raw.direct.http.is_enabled()
            || (upstream.raw.direct.is_open() && !upstream.has_handshake())
        {
            upstream.take_questions();
        }
        tokio::spawn(ping_while_idle(
            Arc::downgrade(&upstream),
            Duration::from_millis(shared.ping_every_ms.load(Ordering::Relaxed)),
        ));
        // A dead upstream takes its questions with it, at once, and the agent's session ends:
        // so do the decisions the person made for that session.
        let broker = shared.broker.clone();
        let settings = shared.settings.clone();
        let closed = upstream.closed.clone();
        tokio::spawn(async move {
            closed.cancelled().await;
            broker.withdraw_session(session, CancelReason::Disconnect);
            if let Err(e) = settings.end_session(session) {
                tracing::warn!(error = %e, "cannot forget a session's decisions");
            }
        });
        let end = upstream.service.cancellation_token();
        let closed = upstream.closed.clone();
        let relay = upstream.relay.clone();
        let broker = shared.broker.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = retired.cancelled() => end.cancel(),
                // A revoked agent's questions go at once, rather than wait on the desktop to
                // be refused when answered; then its calls end with its upstream session.
                _ = revoked.cancelled() => {
                    broker.withdraw_session(session, CancelReason::Revoked);
                    relay.agent_left();
                    end.cancel();
                }
                _ = closed.cancelled() => {}
            }
        });
        tracing::info!(server = %server.name, agent = %who.name, session, "gateway: upstream session open");
        Ok(upstream)
    }

    pub(super) fn peer(&self) -> &Peer<RoleClient> {
        self.service.peer()
    }

    pub(super) fn is_closed(&self) -> bool {
        self.closed.is_cancelled() || self.service.is_closed() || self.is_retired()
    }

    /// The person changed or removed the server since this was opened.
    pub(super) fn is_retired(&self) -> bool {
        self.retired.is_cancelled()
    }

    pub(super) fn close(&self) {
        self.service.cancellation_token().cancel();
    }

    pub(super) fn last_used(&self) -> u64 {
        self.last_used.load(Ordering::Relaxed)
    }

    /// What the server said about itself in the handshake.
    pub(super) fn info(&self) -> Option<ServerPeerInfo> {
        self.peer().peer_info().map(|i| (*i).clone())
    }

    /// Sends one request upstream on behalf of the agent's request `ctx`: its progress is
    /// routed back, its cancellation cancels the upstream request. The answer's typed result,
    /// and its bytes as sent when they were read.
    pub(super) async fn send(
        &self,
        request: ClientRequest,
        ctx: &RequestContext<RoleServer>,
        timeout: Duration,
        call: Option<u64>,
    ) -> Result<(ServerResult, Option<Box<RawValue>>), McpError> {
        self.send_as_sent(request, ctx, timeout, call)
            .await?
            .typed()
            .map_err(|e| self.error(e))
    }

    /// As [`Upstream::send`], where a plain call result need not be read into its typed form.
    pub(super) async fn send_as_sent(
        &self,
        mut request: ClientRequest,
        ctx: &RequestContext<RoleServer>,
        timeout: Duration,
        call: Option<u64>,
    ) -> Result<Upstreamed, McpError> {
        let leaving = Leaving::of(ctx);
        // Paused (or cancelled) since it was judged: nothing is sent. (A cancellation sent
        // after the request is only the server's to honour.)
        if leaving.reason().is_some() {
            return Err(leaving.error());
        }
        let _in_flight = InFlight::of(self);
        self.last_used
            .store(crate::ask::boot_ms(), Ordering::Relaxed);
        let agent_token = ctx.meta.get_progress_token();
        let wants_progress = agent_token.is_some();
        let step = crate::mcp::task::Step::of(&request);
        // The agent's lifecycle keys describe the agent's link to us, not ours upstream.
        request
            .get_meta_mut()
            .0
            .0
            .retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
        let peer = self.peer().clone();
        let progress_to = agent_token.map(|token| (ProgressTo::of(ctx), token));
        let (id, upstream_token, awaited) = match self.way() {
            Way::Stdin => self.send_direct(request, timeout).await,
            Way::Post => {
                self.send_posted(request, timeout, call, progress_to.clone())
                    .await
            }
            Way::Rmcp => self.send_through_rmcp(request, timeout).await,
        }
        .map_err(|e| self.error(e))?;
        if let Some(call) = call {
            self.relay.call_sent(call, &id);
        }
        self.relay.route_progress(&upstream_token, progress_to);
        // Pinned out here so that losing the race below does not drop it: dropping it tells
        // the server at once (rmcp's way) or forgets the request (ours), and the server's
        // withdrawal of its questions could then overtake the agent's (recorded as the
        // server's, under load).
        let mut awaited = awaited;
        let response = tokio::select! {
            r = &mut awaited => Ok(r),
            reason = leaving.left() => Err(reason),
        };
        match response {
            Err(reason) => {
                self.relay.forget_progress(&upstream_token);
                // The questions first: the server's own withdrawal, prompted by ours, must not
                // be what ends them. Only then is the request let go (and the server told).
                if let Some(call) = call {
                    self.relay.call_ended(call, Some(reason));
                }
                drop(awaited);
                let why = match reason {
                    CancelReason::Paused => "the person paused the gateway",
                    _ => "the agent cancelled the call",
                };
                tell_cancelled(&peer, &id, why, timeout);
                let _ = self.raw.take_result_bytes(&id);
                Err(leaving.error())
            }
            Ok(result) => {
                self.follow_task(step, &upstream_token, &result);
                if wants_progress {
                    self.relay.caught_up().await;
                }
                result.map_err(|e| self.error(e))
            }
        }
    }

    /// Whether requests go on the wire from here rather than through rmcp's session
    /// (`mcp::direct`): on a stdio server's stdin, or posted in rmcp's HTTP session. From
    /// 2026-07-28 on, rmcp's session refuses a server's question unless it holds a request of
    /// its own in flight for it to belong to (SEP-2260), and ours are not its own: the
    /// questions that belong to ours (over stdio, asked while ours are in flight; over HTTP,
    /// on the response stream of one of ours) are answered here ([`Upstream::take_questions`]).
    fn way(&self) -> Way {
        if self.raw.direct.is_open() {
            Way::Stdin
        } else if self.raw.direct.http.is_open() {
            Way::Post
        } else {
            Way::Rmcp
        }
    }

    /// Whether the server's lifecycle began with `initialize` (before 2026-07-28): without
    /// it, every request carries who is asking in its `_meta`.
    fn has_handshake(&self) -> bool {
        self.peer()
            .peer_info()
            .is_none_or(|info| info.protocol_version.has_initialize())
    }

    /// The server's questions that belong to requests of ours are answered here, by the
    /// session's own handler: over stdio those asked while ours are in flight, answered on the
    /// same stdin; over HTTP those on the response stream of one of ours, answered with a POST
    /// (see `mcp::direct`). Each is seen by the tap as it comes off the wire, so the server's
    /// withdrawal of it, which can only come later on the wire, finds it.
    fn take_questions(self: &Arc<Self>) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let tap = self.tap.clone();
        self.raw.direct.take_questions(Box::new(move |id, request| {
            // As `Tapped` does: only questions, which are untracked once answered.
            if crate::mcp::handler::is_elicitation(&request) {
                tap.request_seen(&id);
            }
            let _ = tx.send((id, request));
        }));
        // Holds the upstream only while a question is answered: the sender lives in its raw
        // tap, so this ends with it.
        let upstream = Arc::downgrade(self);
        tokio::spawn(async move {
            while let Some((id, request)) = rx.recv().await {
                let Some(up) = upstream.upgrade() else {
                    return;
                };
                tokio::spawn(async move { up.answer_question(id, request).await });
            }
        });
    }

    /// One question taken off the wire, answered as rmcp's session would have answered it.
    async fn answer_question(
        &self,
        id: rmcp::model::RequestId,
        mut request: rmcp::model::ServerRequest,
    ) {
        use rmcp::Service;
        let mut context = RequestContext::new(id.clone(), self.peer().clone());
        std::mem::swap(&mut context.meta, request.get_meta_mut());
        context.ct = self.closed.child_token();
        let answered = tokio::select! {
            answered = self.service.service().handle_request(request, context) => answered,
            // The session's end withdraws every question it asked (see `connect`).
            _ = self.closed.cancelled() => return,
        };
        let message = match answered {
            Ok(result) => rmcp::model::ClientJsonRpcMessage::response(result, id.clone()),
            Err(error) => rmcp::model::ClientJsonRpcMessage::error(error, Some(id.clone())),
        };
        let ask = self.tap.answer_to(&id);
        let Ok(mut line) = serde_json::to_vec(&message) else {
            return;
        };
        // Bounded like any request to the server, and ended with the session: a server that
        // never takes the answer must not hold this upstream (and its place) for ever.
        let writing = async {
            if self.raw.direct.is_open() {
                line.push(b'\n');
                self.raw.direct.write(line).await.is_ok()
            } else {
                let posted = self.raw.direct.http.answer(&self.raw, line.into()).await;
                if let Err(e) = &posted {
                    tracing::warn!(server = %self.server.name, error = %e, "an answer to the server's question was not taken");
                }
                posted.is_ok()
            }
        };
        let written = tokio::select! {
            written = tokio::time::timeout(self.server.request_timeout, writing) => {
                written.unwrap_or_else(|_| {
                    tracing::warn!(server = %self.server.name, "an answer to the server's question was not taken in time");
                    false
                })
            }
            _ = self.closed.cancelled() => false,
        };
        if written {
            self.tap.answer_written(ask);
        }
    }

    /// The request as it goes on the wire under an id of ours (and, as rmcp does, with that
    /// id as its progress token).
    fn as_ours(
        &self,
        mut request: ClientRequest,
    ) -> Result<(Waiting<'_>, ProgressToken, Vec<u8>), rmcp::ServiceError> {
        let waiting = self.raw.direct.open();
        let id = waiting.id.clone();
        let token = ProgressToken(id.clone());
        let meta = request.get_meta_mut();
        if let Some(lifecycle) = &self.lifecycle {
            lifecycle.mark(meta);
        }
        meta.set_progress_token(token.clone());
        let message = rmcp::model::ClientJsonRpcMessage::request(request, id);
        let mut bytes =
            serde_json::to_vec(&message).map_err(|_| rmcp::ServiceError::UnexpectedResponse)?;
        if let Some(lifecycle) = &self.lifecycle {
            lifecycle.fill(&mut bytes)?;
        }
        Ok((waiting, token, bytes))
    }

    /// An answer of ours, read; what it says of the server's tools is noted.
    fn read_ours(&self, answer: Answer, call: bool) -> Result<Upstreamed, rmcp::ServiceError> {
        let answer = crate::mcp::direct::read_answer(answer, call);
        if let Some(result) = answer.as_ref().ok().and_then(Upstreamed::raw) {
            self.raw.note(result);
        }
        answer
    }

    async fn send_through_rmcp(
        &self,
        request: ClientRequest,
        timeout: Duration,
    ) -> Result<(rmcp::model::RequestId, ProgressToken, Awaited<'_>), rmcp::ServiceError> {
        let mut options = PeerRequestOptions::no_options();
        options.timeout = Some(timeout);
        let handle = self
            .peer()
            .send_request_with_option(request, options)
            .await?;
        let id = handle.id.clone();
        let token = handle.progress_token.clone();
        let raw = self.raw.clone();
        let awaited = Box::pin(async move {
            let id = handle.id.clone();
            let typed = handle.await_response().await;
            // Read beside rmcp before rmcp resolved the request, so it is here now.
            let kept = raw.take_result_bytes(&id);
            typed.map(|typed| Upstreamed::Typed(typed, kept))
        });
        Ok((id, token, awaited))
    }

    /// The request written on the server's stdin as one line; its answer comes back as the
    /// line the server wrote.
    async fn send_direct(
        &self,
        request: ClientRequest,
        timeout: Duration,
    ) -> Result<(rmcp::model::RequestId, ProgressToken, Awaited<'_>), rmcp::ServiceError> {
        let call = matches!(request, ClientRequest::CallToolRequest(_));
        let (mut waiting, token, mut line) = self.as_ours(request)?;
        let id = waiting.id.clone();
        line.push(b'\n');
        let peer = self.peer().clone();
        let raw = &self.raw;
        let closed = &self.closed;
        let awaited = Box::pin(async move {
            let answer = async {
                // Written within the request's time and the agent's patience: a server that
                // stops reading its stdin fills the pipe, and the write then waits.
                raw.direct.write(line).await.ok()?;
                // The session closed without the server's stdout ending (we stopped it).
                tokio::select! {
                    answer = &mut waiting.answer => answer.ok(),
                    _ = closed.cancelled() => None,
                }
            };
            match tokio::time::timeout(timeout, answer).await {
                Ok(Some(answer)) => self.read_ours(answer, call),
                Ok(None) => Err(rmcp::ServiceError::TransportClosed),
                Err(_) => {
                    // As rmcp tells the server of a request it stopped waiting for.
                    tell_cancelled(&peer, &waiting.id, "request timeout", timeout);
                    Err(rmcp::ServiceError::Timeout { timeout })
                }
            }
        });
        Ok((id, token, awaited))
    }

    /// After an answer: the request's progress route goes, unless the request created a task,
    /// whose progress goes on until it ends; a task seen to end takes its route with it.
    fn follow_task(
        &self,
        step: Option<crate::mcp::task::Step>,
        upstream_token: &ProgressToken,
        result: &Result<Upstreamed, rmcp::ServiceError>,
    ) {
        use crate::mcp::task::{Step, has_ended};
        if step.is_none() {
            self.relay.forget_progress(upstream_token);
            return;
        }
        let answer = match result {
            Ok(Upstreamed::Typed(result, None)) => serde_json::to_value(result).ok(),
            Ok(answer) => answer
                .raw()
                .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok()),
            Err(_) => None,
        };
        let answer = answer.as_ref();
        let created = answer
            .and_then(|a| a.pointer("/task/taskId"))
            .and_then(Value::as_str);
        match (step, created) {
            (Some(Step::Creates), Some(task)) => {
                if self.note_own_task(task) {
                    self.relay.keep_progress_for_task(task, upstream_token);
                    return;
                }
                tracing::warn!(
                    server = %self.server.name,
                    length = task.len(),
                    "a task id too long to keep: its agent cannot follow it"
                );
            }
            (Some(Step::Ends(task)), _) => self.relay.task_ended(&task),
            (Some(Step::Follows(task)), _) if answer.is_some_and(has_ended) => {
                self.relay.task_ended(&task)
            }
            _ => {}
        }
        self.relay.forget_progress(upstream_token);
    }

    /// A failed request, in words for the agent; a refused sign-in also goes to the person.
    pub(super) fn error(&self, e: rmcp::ServiceError) -> McpError {
        if let Some(header) = e.auth_challenge() {
            if let Some(hook) = &self.sign_in_needed {
                hook(&self.server.name, header);
            }
            return McpError::internal_error(
                format!(
                    "{} refused the person's sign-in: Countersign asks them on the desktop to sign in again; try again once they have",
                    self.server.name
                ),
                None,
            );
        }
        upstream_error(&self.server, e)
    }

    /// Makes a preview's call (already with `dryRun: true`), recorded like any forwarded call.
    pub(crate) async fn dry_run(&self, request: CallToolRequest) -> Result<CallToolResult, String> {
        let agent = self.elicitor.asker.agent.clone();
        self.elicitor
            .broker
            .audit()
            .record_forwarded(
                &self.server.name,
                agent.as_deref(),
                // The person's own request: not within the agent's budget.
                None,
                "tools/call (preview, dryRun: true)",
            )
            .map_err(|e| e.to_string())?;
        let mut options = PeerRequestOptions::no_options();
        options.timeout = Some(self.server.request_timeout);
        let request = ClientRequest::CallToolRequest(request);
        match crate::mcp::listing::our_own(self.peer(), request, options, Some(&self.raw)).await {
            Ok(ServerResult::CallToolResult(result)) => Ok(result),
            Ok(_) => Err(format!(
                "{} answered the dry run with something else",
                self.server.name
            )),
            Err(rmcp::ServiceError::Timeout { .. }) => {
                Err(format!("{} did not answer in time", self.server.name))
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// What the gate needs to know about `tool`, listing the tools if they were not yet.
    pub(super) async fn tool_facts(&self, tool: &str) -> Arc<ToolFacts> {
        if let Some(facts) = lock(&self.tools)
            .as_ref()
            .and_then(|t| t.get(tool).cloned())
        {
            return facts;
        }
        let listing =
            crate::mcp::listing::all_tools(&self.server.name, self.peer(), Some(&self.raw));
        let listed = tokio::time::timeout(self.server.request_timeout, listing).await;
        if let Ok(Ok(tools)) = listed {
            let facts: HashMap<String, Arc<ToolFacts>> = tools
                .iter()
                .map(|t| (t.name.to_string(), Arc::new(ToolFacts::of(t))))
                .collect();
            let found = facts.get(tool).cloned();
            *lock(&self.tools) = Some(facts);
            if let Some(found) = found {
                return found;
            }
        }
        // Unknown to the list (or the list failed): no hints, so the gate asks.
        Arc::new(ToolFacts::new(tool, None, None, None, None, false))
    }

    /// Keeps the gate's view current from a `tools/list` the agent made (one page).
    pub(super) fn learn_tools(&self, listed: &ListToolsResult) {
        let mut cache = lock(&self.tools);
        let map = cache.get_or_insert_with(HashMap::new);
        for t in &listed.tools {
            map.insert(t.name.to_string(), Arc::new(ToolFacts::of(t)));
        }
    }
}

impl ToolFacts {
    fn of(t: &Tool) -> Self {
        let annotations = t
            .annotations
            .as_ref()
            .and_then(|a| serde_json::to_value(a).ok());
        ToolFacts::new(
            &t.name,
            t.title.as_deref(),
            t.description.as_deref(),
            annotations,
            Some(Value::Object((*t.input_schema).clone())),
            t.output_schema.is_some(),
        )
    }

    fn new(
        name: &str,
        title: Option<&str>,
        description: Option<&str>,
        annotations: Option<Value>,
        input_schema: Option<Value>,
        has_output_schema: bool,
    ) -> Self {
        let param_headers = input_schema
            .as_ref()
            .map(crate::mcp::standard_headers::ParamHeaders::of)
            .unwrap_or_default();
        let definition =
            crate::ask::approval::definition(name, title, description, annotations, input_schema);
        ToolFacts {
            digest: crate::ask::approval::digest(&definition),
            definition,
            has_output_schema,
            param_headers,
        }
    }

    /// The tool's annotations as listed (hints: the policy trusts them only for trusted
    /// servers).
    pub(super) fn annotations(&self) -> Option<&Value> {
        self.definition.get("annotations").filter(|a| !a.is_null())
    }

    pub(super) fn input_schema(&self) -> Option<&Value> {
        self.definition.get("inputSchema").filter(|s| !s.is_null())
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.close();
    }
}

/// Passes the upstream's notifications to the agent, in order, from one task.
async fn relay_notifications(
    upstream: std::sync::Weak<Upstream>,
    mut notifications: mpsc::UnboundedReceiver<(Outgoing, usize)>,
) {
    while let Some(((to, notification, sent), size)) = notifications.recv().await {
        let Some(up) = upstream.upgrade() else {
            return;
        };
        if matches!(
            notification,
            ServerNotification::ToolListChangedNotification(_)
        ) {
            *lock(&up.tools) = None;
        }
        match to.or_else(|| lock(&up.relay.agent).clone().map(ProgressTo::Peer)) {
            Some(ProgressTo::Peer(peer)) => {
                let _ = peer.send_notification(notification).await;
            }
            Some(ProgressTo::Lane(stream)) => match sent {
                Some(params) => stream.notify_progress(&params),
                None => stream.notify(&notification),
            },
            None => {}
        }
        up.relay.passed_on(size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_its_creators_alone_on_that_very_server() {
        let mut owners = TaskOwners::default();
        assert!(owners.created("tasks", "https://a/mcp", "agent-a", "task-1"));
        assert!(owners.owns("tasks", "https://a/mcp", "agent-a", "task-1"));
        assert!(!owners.owns("tasks", "https://a/mcp", "agent-b", "task-1"));
        // The same name pointed at another server: nothing of the first is there.
        assert!(!owners.owns("tasks", "https://b/mcp", "agent-a", "task-1"));
        // The server, restarted, gives task-1 to agent B: A's task-1 is gone with the old
        // server, and A reaches B's no more.
        assert!(owners.created("tasks", "https://a/mcp", "agent-b", "task-1"));
        assert!(owners.owns("tasks", "https://a/mcp", "agent-b", "task-1"));
        assert!(!owners.owns("tasks", "https://a/mcp", "agent-a", "task-1"));
        // Another server's task-1 is its own matter.
        assert!(owners.created("tasks", "https://b/mcp", "agent-a", "task-1"));
        assert!(owners.owns("tasks", "https://a/mcp", "agent-b", "task-1"));
    }

    /// An upstream for a server as it was read a moment before the person changed it is not
    /// opened: the change retired the server as it was, before this one could be counted in.
    #[tokio::test]
    async fn no_upstream_opens_for_a_server_as_it_was_before_a_change() {
        let dir = std::env::temp_dir().join(format!("cs-stale-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let was = crate::ServerConfig::stdio("desk", "desk-server-as-it-was", &[]);
        let gateway = crate::gateway::Gateway::new(
            crate::config::GatewayConfig {
                enabled: true,
                port: 0,
            },
            vec![was.clone()],
            crate::ask::broker::Broker::new(
                crate::AuditLog::open(dir.join("audit.jsonl")).unwrap(),
            ),
            crate::settings::SettingsStore::default(),
            dir.join("gateway-token"),
        )
        .unwrap();
        gateway.set_servers(vec![crate::ServerConfig::stdio(
            "desk",
            "desk-server-now",
            &[],
        )]);
        let who = super::super::gate::Who {
            id: "a".into(),
            name: "A".into(),
            declared: None,
            roots: false,
            sampling: None,
        };
        let refused = Upstream::connect(&gateway.shared, &was, &who)
            .await
            .err()
            .expect("refused");
        assert!(refused.contains("changed"), "{refused}");
        assert_eq!(gateway.open_upstreams("desk"), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_task_id_too_long_to_keep_is_not_kept() {
        let mut owners = TaskOwners::default();
        let long = "x".repeat(MAX_TASK_ID + 1);
        assert!(!owners.created("tasks", "e", "agent-a", &long));
        assert!(!owners.owns("tasks", "e", "agent-a", &long));
        let longest = "x".repeat(MAX_TASK_ID);
        assert!(owners.created("tasks", "e", "agent-a", &longest));
    }
}
