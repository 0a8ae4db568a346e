//! The short way for an agent's requests on a session-keeping connection (2025-11-25 and
//! older, which is how TypeScript SDK agents such as Claude Code, Cursor and VS Code speak).
//!
//! rmcp's session would hand such a POST from the connection to its session worker, to the
//! session's service loop, to a task of its own, and answer it as an SSE stream of one message:
//! those hand-offs between threads were the larger part of the gateway's cost per call (see
//! BENCHMARKS.md). Here the POST is read where it arrives and given to the very `Forwarder`
//! rmcp made for that session, and its answer goes back as plain JSON. The gate, the audit,
//! the upstream call, the person's answers and the agent's cancellation are the same code
//! either way; only the transport between agent and `Forwarder` is shorter.
//!
//! A call that asks for progress (as every rmcp client's does), or comes from an agent that
//! offers sampling, is answered on a stream of its own instead (`stream`): the progress as it
//! comes, the server's sampling requests during the call (which rmcp's session put on the
//! agent's own GET stream), then the result. The agent's answers to those requests come back
//! as POSTs, which the lane hands to the request that waits for them.
//!
//! The agent's other requests on a known session take this way too (`OTHER_METHODS`), read as
//! rmcp reads them and run through rmcp's own dispatch on the same `Forwarder`; the answer
//! carries the server's result as sent, so these need no swapping (`faithful`). What stays
//! rmcp's: `initialize` (which makes the session), notifications and answers to rmcp's own
//! requests, GET and DELETE, and a request whose headers or `_meta` rmcp would have to judge (a
//! protocol version other than the session's, the 2026 revision's headers and lifecycle keys).
//!
//! An agent's own 2025-11-25 tasks take this way too, sampling or not: a task-augmented call
//! and `tasks/*`. rmcp's server side models tasks only in their 2026 form and would drop the
//! call's `task` and refuse the rest (see `forward::task`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::model::{CallToolRequest, CallToolRequestParams, CallToolResult, GetMeta, RequestId};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Endpoint;
use super::forward::{Forwarder, ForwarderState, ProgressTo, task};

mod stream;
pub(crate) use stream::LaneStream;
use stream::{ASKED_PREFIX, AgentAnswer, Asked};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
/// rmcp's own default cap on a request body: a larger one is refused (413) either way.
const MAX_BODY: usize = 4 * 1024 * 1024;
/// Sessions kept before the ended ones are swept out of the map.
const SWEEP_ABOVE: usize = 256;

/// How long an agent's session may stay quiet before it ends, unless told otherwise: rmcp's own
/// default for the sessions it idles out.
const SESSION_IDLE: std::time::Duration = std::time::Duration::from_secs(300);

/// The sessions the lane knows, by server and session id.
pub(crate) struct Lanes {
    sessions: Mutex<HashMap<(String, String), Arc<Session>>>,
    /// Each server's rmcp session manager, which ends a session the agent left quiet: rmcp
    /// would only count the requests it sees itself, and the lane takes most of them.
    managers: Mutex<HashMap<String, Weak<LocalSessionManager>>>,
    idle_ms: AtomicU64,
}

impl Default for Lanes {
    fn default() -> Self {
        Lanes {
            sessions: Mutex::default(),
            managers: Mutex::default(),
            idle_ms: AtomicU64::new(SESSION_IDLE.as_millis() as u64),
        }
    }
}

struct Session {
    /// Weak: the session is rmcp's; when it ends, its `Forwarder` (and upstream) go with it.
    forwarder: Weak<ForwarderState>,
    /// The agent's side of the session, as rmcp made it at `initialize`.
    peer: Peer<RoleServer>,
    /// The lane's calls in flight, by the agent's request id, for its cancellations.
    in_flight: Mutex<HashMap<RequestId, CancellationToken>>,
    /// The gateway's requests on this session's lane streams, waiting for the agent's answers.
    asked: Arc<Asked>,
    /// When the agent last sent anything on this session (ms since the epoch).
    last_seen: AtomicU64,
}

/// Put in an `initialize` request's extensions; the `Forwarder` that answers it leaves its
/// handle here, and the session id rmcp gives the agent names it from then on.
#[derive(Clone, Default)]
pub(crate) struct Opening(Arc<OnceLock<(Weak<ForwarderState>, Peer<RoleServer>)>>);

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

impl Lanes {
    fn open(
        &self,
        server: &str,
        session: &str,
        forwarder: Weak<ForwarderState>,
        peer: Peer<RoleServer>,
    ) {
        let mut sessions = lock(&self.sessions);
        if sessions.len() >= SWEEP_ABOVE {
            sessions.retain(|_, s| s.forwarder.strong_count() > 0);
        }
        sessions.insert(
            (server.to_owned(), session.to_owned()),
            Arc::new(Session {
                forwarder,
                peer,
                in_flight: Mutex::default(),
                asked: Arc::default(),
                last_seen: AtomicU64::new(crate::ask::unix_ms()),
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

    /// How long a session may stay quiet before it ends.
    pub(crate) fn set_session_idle(&self, idle: std::time::Duration) {
        self.idle_ms
            .store(idle.as_millis() as u64, Ordering::Relaxed);
    }

    fn idle(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.idle_ms.load(Ordering::Relaxed))
    }

    /// The agent sent something on this session.
    fn touch(&self, server: &str, session: &str) {
        let found = lock(&self.sessions)
            .get(&(server.to_owned(), session.to_owned()))
            .cloned();
        if let Some(found) = found {
            found
                .last_seen
                .store(crate::ask::unix_ms(), Ordering::Relaxed);
        }
    }

    /// Takes out the sessions that ended, and those quiet for longer than allowed with nothing
    /// of theirs in flight on the lane; the latter are returned, to be ended.
    fn take_quiet(&self) -> Vec<(Arc<LocalSessionManager>, String)> {
        let now = crate::ask::unix_ms();
        let idle = self.idle_ms.load(Ordering::Relaxed);
        let managers = lock(&self.managers).clone();
        let mut quiet = Vec::new();
        lock(&self.sessions).retain(|(server, id), session| {
            if session.forwarder.strong_count() == 0 {
                return false;
            }
            let busy = !lock(&session.in_flight).is_empty() || session.asked.is_waiting();
            if busy || now.saturating_sub(session.last_seen.load(Ordering::Relaxed)) <= idle {
                return true;
            }
            if let Some(manager) = managers.get(server).and_then(Weak::upgrade) {
                quiet.push((manager, id.clone()));
            }
            false
        });
        quiet
    }

    /// The session the agent sent something on, and its `Forwarder` while the session lives.
    fn find(&self, server: &str, session: &str) -> Option<(Arc<Session>, Forwarder)> {
        let mut sessions = lock(&self.sessions);
        let key = (server.to_owned(), session.to_owned());
        let found = sessions.get(&key)?.clone();
        found
            .last_seen
            .store(crate::ask::unix_ms(), Ordering::Relaxed);
        match Forwarder::upgrade(&found.forwarder) {
            Some(forwarder) => Some((found, forwarder)),
            None => {
                sessions.remove(&key);
                None
            }
        }
    }
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
        }
        for (manager, id) in lanes.take_quiet() {
            tracing::info!(session = %id, "gateway: an agent's session went quiet and ends");
            let _ = manager.close_session(&id.into()).await;
        }
    }
}

/// What the lane reads of a JSON-RPC message: no more than it needs, borrowed.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    method: Option<&'a str>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

/// The parts of `tools/call` params that send a call rmcp's way, or make it a task.
#[derive(Deserialize)]
struct CallShape<'a> {
    #[serde(rename = "_meta", borrow)]
    meta: Option<&'a RawValue>,
    #[serde(borrow)]
    task: Option<&'a RawValue>,
}

/// The keys of a call's `_meta`.
type MetaShape<'a> = HashMap<std::borrow::Cow<'a, str>, serde::de::IgnoredAny>;

/// Whether a call's `_meta` keeps it off the lane: the 2026 revision's per-request protocol
/// version, client info or capabilities (rmcp judges those against the headers, and may serve
/// the request without the session).
fn meta_is_rmcps(meta: &MetaShape) -> bool {
    meta.keys()
        .any(|key| key.starts_with("io.modelcontextprotocol/"))
}

fn asks_progress(meta: &MetaShape) -> bool {
    meta.contains_key("progressToken")
}

#[derive(Deserialize)]
struct CancelShape {
    #[serde(rename = "requestId")]
    request_id: Option<RequestId>,
}

/// Serves one request to `server`'s endpoint: on the lane when it is a plain tool call on a
/// session the lane knows, else through rmcp.
pub(crate) async fn serve(
    lanes: &Lanes,
    server: &str,
    mut request: Request,
    endpoint: Endpoint,
) -> Response {
    if request.method() != Method::POST {
        if let Some(session) = header_str(request.headers(), SESSION_HEADER) {
            lanes.touch(server, session);
        }
        return endpoint.handle(request).await.into_response();
    }
    let Some(session_id) = header_str(request.headers(), SESSION_HEADER).map(str::to_owned) else {
        // Perhaps an `initialize`: its Forwarder leaves its handle, and the answer names the
        // session it made.
        let opening = Opening::default();
        request.extensions_mut().insert(opening.clone());
        let response = endpoint.handle(request).await.into_response();
        // (rmcp ends by itself the session it made for an `initialize` that failed.)
        if let (Some(session), Some((forwarder, peer))) = (
            header_str(response.headers(), SESSION_HEADER),
            opening.0.get(),
        ) {
            lanes.open(server, session, forwarder.clone(), peer.clone());
        }
        return response;
    };
    let Some((session, forwarder)) = lanes.find(server, &session_id) else {
        return endpoint.handle(request).await.into_response();
    };
    let Some(samples) = plain_headers(request.headers(), &session.peer) else {
        return endpoint.handle(request).await.into_response();
    };
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return (StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large").into_response();
        }
    };
    match read(&bytes) {
        Some(Message::Run { id, raw_id, work }) => {
            // A sampling request during the call goes on the call's stream.
            let work = match work {
                Work::Call(params) if samples => Work::CallOnStream(params),
                work => work,
            };
            run(session, forwarder, parts, id, raw_id, work).await
        }
        // Another agent holding this session's id answers and cancels nothing of it.
        Some(Message::Answer(..) | Message::Cancelled(_)) if !forwarder.is_owners(&parts) => {
            pass_on(parts, bytes, endpoint).await
        }
        Some(Message::Answer(id, answer)) => {
            if session.asked.answer(&id, answer) {
                StatusCode::ACCEPTED.into_response()
            } else {
                pass_on(parts, bytes, endpoint).await
            }
        }
        Some(Message::Cancelled(request)) => {
            let token = lock(&session.in_flight).get(&request).cloned();
            match token {
                Some(token) => {
                    token.cancel();
                    StatusCode::ACCEPTED.into_response()
                }
                None => pass_on(parts, bytes, endpoint).await,
            }
        }
        _ => pass_on(parts, bytes, endpoint).await,
    }
}

async fn pass_on(parts: http::request::Parts, bytes: Bytes, endpoint: Endpoint) -> Response {
    let request = Request::from_parts(parts, Body::from(bytes));
    endpoint.handle(request).await.into_response()
}

/// What the lane may take of a message.
#[derive(Debug)]
enum Message {
    /// A request the lane runs: `id` as read, and as the agent wrote it for the answer.
    Run {
        id: RequestId,
        raw_id: Box<RawValue>,
        work: Work,
    },
    /// The agent cancels this request (the lane's, if it is in flight there).
    Cancelled(RequestId),
    /// The agent answers a request the gateway put on a lane stream (if one waits for it).
    Answer(String, AgentAnswer),
}

/// Reads a message far enough to tell whether it is the lane's.
fn read(bytes: &[u8]) -> Option<Message> {
    let envelope: Envelope = serde_json::from_slice(bytes).ok()?;
    let Some(method) = envelope.method else {
        return read_answer(&envelope);
    };
    match method {
        "tools/call" => {
            let raw_id = envelope.id?;
            let params = envelope.params?;
            let shape: CallShape = serde_json::from_str(params.get()).ok()?;
            let meta = match shape.meta {
                Some(meta) => serde_json::from_str::<MetaShape>(meta.get()).ok()?,
                None => MetaShape::new(),
            };
            if meta_is_rmcps(&meta) {
                return None;
            }
            let progress = asks_progress(&meta);
            let id: RequestId = serde_json::from_str(raw_id.get()).ok()?;
            let task = shape
                .task
                .map(|t| serde_json::from_str::<Value>(t.get()))
                .transpose()
                .ok()?;
            let params: CallToolRequestParams = serde_json::from_str(params.get()).ok()?;
            let work = match task {
                Some(task) => Work::TaskCall(params, task),
                None if progress => Work::CallOnStream(params),
                None => Work::Call(params),
            };
            Some(Message::Run {
                id,
                raw_id: raw_id.to_owned(),
                work,
            })
        }
        method if envelope.id.is_some() && task::METHODS.contains(&method) => {
            let method = task::METHODS.iter().copied().find(|m| *m == method)?;
            let raw_id = envelope.id?;
            let id: RequestId = serde_json::from_str(raw_id.get()).ok()?;
            let params = envelope
                .params
                .map(|p| serde_json::from_str::<Value>(p.get()))
                .transpose()
                .ok()?;
            Some(Message::Run {
                id,
                raw_id: raw_id.to_owned(),
                work: Work::Task(method, params),
            })
        }
        "notifications/cancelled" if envelope.id.is_none() => {
            let cancel: CancelShape = serde_json::from_str(envelope.params?.get()).ok()?;
            Some(Message::Cancelled(cancel.request_id?))
        }
        method if envelope.id.is_some() && OTHER_METHODS.contains(&method) => {
            let raw_id = envelope.id?;
            if let Some(params) = envelope.params {
                let shape: ParamsShape = serde_json::from_str(params.get()).ok()?;
                if let Some(meta) = shape.meta {
                    if meta_is_rmcps(&serde_json::from_str::<MetaShape>(meta.get()).ok()?) {
                        return None;
                    }
                }
            }
            // Read as rmcp would, since the `Forwarder` answers these through rmcp's own
            // dispatch.
            let rmcp::model::JsonRpcMessage::Request(request) =
                serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(bytes).ok()?
            else {
                return None;
            };
            let streamed = request.request.get_meta().get_progress_token().is_some();
            Some(Message::Run {
                id: request.id,
                raw_id: raw_id.to_owned(),
                work: Work::Request {
                    request: request.request,
                    streamed,
                },
            })
        }
        _ => None,
    }
}

/// The other requests an agent's session makes that the lane runs: all but `initialize`
/// (which makes the session) and what only the 2026 revision has.
const OTHER_METHODS: &[&str] = &[
    "ping",
    "tools/list",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
];

/// The `_meta` of any request's params.
#[derive(Deserialize)]
struct ParamsShape<'a> {
    #[serde(rename = "_meta", borrow)]
    meta: Option<&'a RawValue>,
}

/// An agent's answer to one of the lane's own requests: a string id of the lane's, and a
/// result or a well-formed error.
fn read_answer(envelope: &Envelope) -> Option<Message> {
    let id: String = serde_json::from_str(envelope.id?.get()).ok()?;
    if !id.starts_with(ASKED_PREFIX) {
        return None;
    }
    let answer = match (envelope.result, envelope.error) {
        (Some(result), None) => Ok(serde_json::from_str(result.get()).ok()?),
        (None, Some(error)) => Err(serde_json::from_str(error.get()).ok()?),
        _ => return None,
    };
    Some(Message::Answer(id, answer))
}

/// Headers that need no judging beyond what rmcp already judged for the session: JSON in,
/// both answer kinds accepted (else rmcp says 406/415), the session's own protocol version or
/// none, and none of the 2026 revision's standard headers. If so, whether the agent offers
/// sampling.
fn plain_headers(headers: &HeaderMap, peer: &Peer<RoleServer>) -> Option<bool> {
    let json_in = header_str(headers, header::CONTENT_TYPE.as_str()).is_some_and(|v| {
        v.split(';')
            .next()
            .is_some_and(|e| e.trim().eq_ignore_ascii_case("application/json"))
    });
    let accept = header_str(headers, header::ACCEPT.as_str()).unwrap_or("");
    let accepts = |kind: &str| {
        accept.split(',').any(|a| {
            a.split(';')
                .next()
                .is_some_and(|e| e.trim().eq_ignore_ascii_case(kind))
        })
    };
    let info = peer.peer_info()?;
    let version_ok = match header_str(headers, VERSION_HEADER) {
        None => true,
        Some(v) => v == info.protocol_version.as_str(),
    };
    let plain = json_in
        && accepts("application/json")
        && accepts("text/event-stream")
        && version_ok
        && !headers.contains_key("mcp-method")
        && !headers.contains_key("mcp-name");
    plain.then_some(info.capabilities.sampling.is_some())
}

/// What the lane does for a request.
#[derive(Debug)]
enum Work {
    Call(CallToolRequestParams),
    /// A call answered on a stream: its `_meta` carries a progress token, or the agent offers
    /// sampling.
    CallOnStream(CallToolRequestParams),
    TaskCall(CallToolRequestParams, Value),
    Task(&'static str, Option<Value>),
    /// Any of [`OTHER_METHODS`], answered on a stream when it asks for progress.
    Request {
        request: rmcp::model::ClientRequest,
        streamed: bool,
    },
}

/// An answer: the typed result of a plain call or another request (unless the server's own
/// was kept), or one as the server sent it.
enum Answered {
    Typed(CallToolResult),
    Other(rmcp::model::ServerResult),
    AsSent(Value),
}

/// Runs the request as rmcp would (in a task of its own, so an agent that goes away does not
/// cut it off mid-way: it learns of that through `gone`, as on rmcp's way) and answers in JSON,
/// or on a stream when the call asked for progress.
async fn run(
    session: Arc<Session>,
    forwarder: Forwarder,
    parts: http::request::Parts,
    id: RequestId,
    raw_id: Box<RawValue>,
    work: Work,
) -> Response {
    let abandoned = super::gone::on_drop(&parts);
    let ct = CancellationToken::new();
    lock(&session.in_flight).insert(id.clone(), ct.clone());
    let mut ctx = RequestContext::new(id.clone(), session.peer.clone());
    ctx.ct = ct;
    let streamed = matches!(
        work,
        Work::CallOnStream(_) | Work::Request { streamed: true, .. }
    );
    let progress = streamed.then(|| {
        let (stream, rx) = LaneStream::new(session.asked.clone());
        ctx.extensions.insert(ProgressTo::Lane(stream));
        rx
    });
    // The HTTP request's parts travel with the call, as rmcp hands them on: the agent's token
    // mark, `gone`, and where the faithful result is kept.
    let kept = parts.extensions.get::<super::faithful::Kept>().cloned();
    ctx.extensions.insert(parts);
    let running = tokio::spawn({
        let id = id.clone();
        async move {
            let result = match work {
                Work::Call(mut params) | Work::CallOnStream(mut params) => {
                    if let Some(meta) = params.meta.take() {
                        ctx.meta = meta;
                    }
                    forwarder
                        .gate_and_call(CallToolRequest::new(params), ctx)
                        .await
                        .map(Answered::Typed)
                }
                Work::TaskCall(mut params, task) => {
                    if let Some(meta) = params.meta.take() {
                        ctx.meta = meta;
                    }
                    forwarder
                        .gate_and_start_task(CallToolRequest::new(params), task, ctx)
                        .await
                        .map(Answered::AsSent)
                }
                Work::Task(method, params) => forwarder
                    .forward_task(method, params, ctx)
                    .await
                    .map(Answered::AsSent),
                Work::Request { mut request, .. } => {
                    // As rmcp's service loop hands a request to its handler.
                    std::mem::swap(&mut ctx.meta, request.get_meta_mut());
                    rmcp::Service::handle_request(&forwarder, request, ctx)
                        .await
                        .map(Answered::Other)
                }
            };
            lock(&session.in_flight).remove(&id);
            result
        }
    });
    let Some(progress) = progress else {
        let result = running.await;
        abandoned.answered();
        return match answer(&raw_id, result, kept.and_then(|kept| kept.take_for(&id))) {
            Ok(body) => (
                [(header::CONTENT_TYPE, "application/json")],
                Body::from(body),
            )
                .into_response(),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        };
    };
    // From here the body is the request's: `gone` watches it as it does rmcp's streams.
    abandoned.answered();
    let stream = Streamed {
        progress,
        running,
        kept,
        id,
        raw_id,
        keep_alive: tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE),
        done: false,
    };
    let body = futures::stream::unfold(stream, Streamed::next);
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

/// As rmcp's own streams: a comment this often, so a write to an agent that went away fails
/// and `gone` notices.
const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(5);

/// A call answered on a stream: its progress and the server's requests as they come, then its
/// answer.
struct Streamed {
    progress: mpsc::UnboundedReceiver<Bytes>,
    running: tokio::task::JoinHandle<Result<Answered, rmcp::ErrorData>>,
    kept: Option<super::faithful::Kept>,
    id: RequestId,
    raw_id: Box<RawValue>,
    keep_alive: tokio::time::Interval,
    done: bool,
}

impl Streamed {
    async fn next(mut self) -> Option<(Result<Bytes, std::convert::Infallible>, Self)> {
        if self.done {
            return None;
        }
        let event = tokio::select! {
            biased;
            Some(event) = self.progress.recv() => event.to_vec(),
            result = &mut self.running => {
                // The answer waited for the progress before it (`caught_up`), so that is all
                // queued here now, and goes first.
                let mut events = Vec::new();
                while let Ok(event) = self.progress.try_recv() {
                    events.extend_from_slice(&event);
                }
                let raw = self.kept.as_ref().and_then(|kept| kept.take_for(&self.id));
                match answer(&self.raw_id, result, raw) {
                    Ok(body) => {
                        events.extend_from_slice(b"event: message\ndata: ");
                        events.extend(body);
                        events.extend_from_slice(b"\n\n");
                    }
                    Err(e) => tracing::warn!(error = %e, "gateway: an answer that cannot be written"),
                }
                self.done = true;
                events
            }
            _ = self.keep_alive.tick() => b":\n\n".to_vec(),
        };
        Some((Ok(Bytes::from(event)), self))
    }
}

/// The JSON-RPC answer to `raw_id`: the server's own result (`raw`, kept for this request)
/// where there is one, so it goes out as it came and the faithful layer finds nothing left to
/// swap.
fn answer(
    raw_id: &RawValue,
    result: Result<Result<Answered, rmcp::ErrorData>, tokio::task::JoinError>,
    raw: Option<Value>,
) -> serde_json::Result<Vec<u8>> {
    match result {
        Ok(Ok(Answered::Typed(result))) => match raw {
            Some(raw) => reply(raw_id, "result", &raw),
            None => reply(raw_id, "result", &result),
        },
        Ok(Ok(Answered::Other(result))) => match raw {
            Some(raw) => reply(raw_id, "result", &raw),
            None => reply(raw_id, "result", &result),
        },
        Ok(Ok(Answered::AsSent(result))) => reply(raw_id, "result", &result),
        Ok(Err(error)) => reply(raw_id, "error", &error),
        Err(e) => reply(
            raw_id,
            "error",
            &rmcp::ErrorData::internal_error(format!("the call failed: {e}"), None),
        ),
    }
}

/// A JSON-RPC response to `id` carrying `value` as its `result` or `error`.
fn reply(id: &RawValue, key: &str, value: &impl serde::Serialize) -> serde_json::Result<Vec<u8>> {
    let mut body = Vec::with_capacity(256);
    body.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    body.extend_from_slice(id.get().as_bytes());
    body.extend_from_slice(b",\"");
    body.extend_from_slice(key.as_bytes());
    body.extend_from_slice(b"\":");
    serde_json::to_writer(&mut body, value)?;
    body.push(b'}');
    Ok(body)
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read_json(message: serde_json::Value) -> Option<Message> {
        read(message.to_string().as_bytes())
    }

    #[test]
    fn an_agents_other_requests_are_the_lanes_read_as_rmcp_reads_them() {
        let listed = read_json(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}));
        let Some(Message::Run {
            id,
            work:
                Work::Request {
                    request: rmcp::model::ClientRequest::ListToolsRequest(_),
                    streamed: false,
                },
            ..
        }) = listed
        else {
            panic!("{listed:?}")
        };
        assert_eq!(id, RequestId::Number(4));
        let read = read_json(
            json!({"jsonrpc": "2.0", "id": "r", "method": "resources/read",
            "params": {"uri": "file:///a", "_meta": {"progressToken": 1}}}),
        );
        assert!(
            matches!(
                read,
                Some(Message::Run {
                    work: Work::Request {
                        request: rmcp::model::ClientRequest::ReadResourceRequest(_),
                        streamed: true,
                    },
                    ..
                })
            ),
            "a request asking for progress is answered on a stream: {read:?}"
        );
        for method in OTHER_METHODS {
            assert!(
                !matches!(*method, "initialize" | "tools/call" | "server/discover"),
                "{method}"
            );
        }
    }

    #[test]
    fn only_a_plain_tool_call_or_a_cancellation_is_the_lanes() {
        let call = read_json(
            json!({"jsonrpc": "2.0", "id": "a-1", "method": "tools/call",
            "params": {"name": "echo", "arguments": {"x": 1}, "_meta": {"vendor": 2}}}),
        );
        let Some(Message::Run {
            id,
            raw_id,
            work: Work::Call(params),
        }) = call
        else {
            panic!("{call:?}")
        };
        assert_eq!(id, RequestId::String("a-1".into()));
        assert_eq!(raw_id.get(), "\"a-1\"");
        assert_eq!(params.name, "echo");
        assert!(params.meta.is_some(), "the call's _meta goes with it");

        for not_ours in [
            // 2026 metadata and other methods are rmcp's.
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "echo", "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}),
            json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "echo"}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}),
            json!({"jsonrpc": "2.0", "method": "tools/list", "params": {}}),
            json!([{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}}]),
            json!({"jsonrpc": "2.0", "id": {"no": 1}, "method": "tools/call",
                "params": {"name": "echo"}}),
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"reason": "no id"}}),
            json!({"jsonrpc": "2.0", "method": "tasks/get", "params": {"taskId": "t"}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/update", "params": {}}),
        ] {
            assert!(read_json(not_ours.clone()).is_none(), "{not_ours}");
        }
        assert!(read(b"{not json").is_none());
        let with_progress = read_json(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo", "_meta": {"progressToken": 0}}}));
        assert!(
            matches!(
                with_progress,
                Some(Message::Run {
                    work: Work::CallOnStream(_),
                    ..
                })
            ),
            "{with_progress:?}"
        );
        // A task call is the lane's whether or not it asks for progress (rmcp's server side
        // would drop its `task`).
        for meta in [json!({}), json!({"progressToken": 1})] {
            let task_call = read_json(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "report", "task": {"ttl": 1000}, "_meta": meta}}));
            let Some(Message::Run {
                work: Work::TaskCall(params, task),
                ..
            }) = task_call
            else {
                panic!("{task_call:?}")
            };
            assert_eq!(
                (params.name.as_ref(), task),
                ("report", json!({"ttl": 1000}))
            );
        }
        let about = read_json(json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/result",
            "params": {"taskId": "t-1"}}));
        let Some(Message::Run {
            work: Work::Task(method, params),
            ..
        }) = about
        else {
            panic!("{about:?}")
        };
        assert_eq!(
            (method, params),
            ("tasks/result", Some(json!({"taskId": "t-1"})))
        );
        // An answer to one of the lane's own requests, and nothing else that looks like one.
        let answer = read_json(json!({"jsonrpc": "2.0", "id": "countersign-lane-3",
            "result": {"model": "m"}}));
        assert!(
            matches!(&answer, Some(Message::Answer(id, Ok(result)))
                if id == "countersign-lane-3" && result["model"] == "m"),
            "{answer:?}"
        );
        let refused = read_json(json!({"jsonrpc": "2.0", "id": "countersign-lane-4",
            "error": {"code": -1, "message": "no"}}));
        assert!(
            matches!(&refused, Some(Message::Answer(_, Err(e))) if e.message == "no"),
            "{refused:?}"
        );
        for not_an_answer in [
            json!({"jsonrpc": "2.0", "id": 0, "result": {}}),
            json!({"jsonrpc": "2.0", "id": "other-1", "result": {}}),
            json!({"jsonrpc": "2.0", "id": "countersign-lane-5"}),
            json!({"jsonrpc": "2.0", "id": "countersign-lane-5", "result": {},
                "error": {"code": -1, "message": "both"}}),
            json!({"jsonrpc": "2.0", "id": "countersign-lane-5", "error": {"message": "no code"}}),
        ] {
            assert!(
                read_json(not_an_answer.clone()).is_none(),
                "{not_an_answer}"
            );
        }
        let cancel = read_json(json!({"jsonrpc": "2.0",
            "method": "notifications/cancelled", "params": {"requestId": 7}}));
        assert!(
            matches!(cancel, Some(Message::Cancelled(RequestId::Number(7)))),
            "{cancel:?}"
        );
    }

    #[test]
    fn a_reply_carries_the_agents_id_as_it_was_sent() {
        let id: Box<RawValue> = serde_json::from_str(r#""x\u0041""#).unwrap();
        let body = reply(&id, "result", &json!({"ok": true})).unwrap();
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            r#"{"jsonrpc":"2.0","id":"x\u0041","result":{"ok":true}}"#
        );
        let parsed: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(parsed["id"], "xA");
    }
}
