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
//! agent's own GET stream), then the result. (A call that asks for progress is still answered
//! in JSON when its answer comes before anything for the stream, as rmcp's own server does.)
//! The agent's answers to those requests come back as POSTs, which the lane hands to the
//! request that waits for them.
//!
//! The agent's other requests on a known session take this way too (`OTHER_METHODS`), read as
//! rmcp reads them and run through rmcp's own dispatch on the same `Forwarder`; the answer
//! carries the server's result as sent (`faithful`). So does `initialize`, which makes the
//! session in the endpoint's own rmcp session manager (`open`). What stays rmcp's carries no
//! result of a server's: notifications and answers to rmcp's own requests, GET and DELETE,
//! the 2026 revision's `server/discover` (the gateway's own answer), subscriptions and tasks,
//! and a request the lane cannot judge as rmcp would, which rmcp refuses (a body, content
//! type or `Accept` it refuses, a version header unknown or contradicting the request, a
//! session it does not know). A request of the latter kind that rmcp would run after all gets
//! rmcp's typed answer: a version header given twice with the same value (which rmcp reads
//! once), or a request whose `_meta` carries the 2026 revision's lifecycle keys in full but
//! names an older revision (which rmcp serves without a session, in that revision).
//!
//! An agent's own 2025-11-25 tasks take this way too, sampling or not: a task-augmented call
//! and `tasks/*`. rmcp's server side models tasks only in their 2026 form and would drop the
//! call's `task` and refuse the rest (see `forward::task`).
//!
//! A 2026-07-28 agent's `tools/call` and reads (lists, `prompts/get`, `resources/read`,
//! `completion/complete`) take it too, though such an agent has no session: each of its
//! requests is self-contained, and rmcp would make a server session for each one (a
//! `Forwarder`, a peer, a service loop and its tasks) only to run it and end it, which cost a
//! 2026-07-28 agent's call 61 % more of the gateway's instructions than a legacy one's
//! (BENCHMARKS.md), and would answer with its own writing of the agent's id. Here the request
//! gets its own `Forwarder` as from rmcp, and is answered as rmcp's server answers it: in
//! JSON, or on a stream once something comes for it first, with the revision's error
//! statuses; the agent going away cancels it. Only a request whose headers and lifecycle keys
//! need no judging beyond agreeing with each other takes this way (`sessionless_headers`,
//! `read::read_sessionless`); rmcp refuses the rest as before, and runs the revision's other
//! requests (`server/discover`, subscriptions, tasks).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::model::{CallToolRequest, CallToolRequestParams, GetMeta, ProtocolVersion, RequestId};
use rmcp::service::{Peer, RequestContext, RoleServer};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use super::forward::{CallAnswer, Forwarder, ProgressTo};
use super::{Endpoint, Shared, sent};

mod open;
mod read;
mod sessions;
mod stream;
use crate::lock;
use read::{Message, read};
use sessions::Found;
use sessions::Session;
pub(crate) use sessions::{Lanes, Opening, end_quiet_sessions};
use stream::LaneEvents;
pub(crate) use stream::{Backlog, LaneStream};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
use sent::MAX_BODY;

/// Serves one request to `server`'s endpoint: on the lane when it is a request on a session
/// the lane knows, a 2026-07-28 agent's self-contained call or read, or an `initialize`, each
/// with headers the lane judges as rmcp would; else through rmcp.
pub(crate) async fn serve(
    shared: &Arc<Shared>,
    server: &str,
    request: Request,
    endpoint: Endpoint,
) -> Response {
    let lanes = &shared.lanes;
    // A session's requests, its stream (GET) and its end (DELETE) are its owner's alone.
    let session_id = header_str(request.headers(), SESSION_HEADER).map(str::to_owned);
    let found = session_id
        .as_ref()
        .map(|session| lanes.find(server, session, request.extensions()));
    if let Some(Found::NotYours) = found {
        return not_yours();
    }
    if request.method() != Method::POST {
        let deleting = request.method() == Method::DELETE;
        let listening = request.method() == Method::GET;
        let response = endpoint.handle(request).await.into_response();
        // The agent's stream open is the agent there: the session is not left quiet while it
        // listens (a stdio host behind the bridge sends nothing between calls, maybe for hours,
        // and could not open a session again).
        if listening
            && response.status().is_success()
            && let Some(Found::Mine(session, _)) = found
        {
            return sessions::Listening::hold(session, response);
        }
        // Ended by its agent: the lane's calls on it end too, and it takes no more.
        if deleting
            && response.status().is_success()
            && let Some(session) = session_id
        {
            lanes.close(server, &session);
        }
        return response;
    }
    let samples = match &found {
        Some(Found::Mine(session, _)) => plain_headers(request.headers(), &session.peer),
        _ => None,
    };
    let (mut parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return (StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large").into_response();
        }
    };
    let (session, forwarder, samples) = match (found, samples) {
        (Some(Found::Mine(session, forwarder)), Some(samples)) => (session, forwarder, samples),
        // Not a plain request on a session the lane knows: a 2026-07-28 agent's
        // self-contained request (which rmcp serves without a session, whatever session
        // header it carries), an `initialize`, or rmcp's to judge.
        (found, _) => {
            let (parts, bytes) = match self_contained(shared, server, parts, bytes).await {
                Ok(answered) => return answered,
                Err(back) => back,
            };
            if found.is_none()
                && let Some(initialize) = open::initialize(&parts.headers, &bytes)
            {
                return open::open(shared, server, parts, &bytes, initialize).await;
            }
            return pass_on(parts, bytes, endpoint).await;
        }
    };
    match read(&bytes, header_str(&parts.headers, VERSION_HEADER)) {
        Some(Message::Run {
            id,
            raw_id,
            work,
            unmodeled,
        }) => {
            if let Some(unmodeled) = unmodeled {
                parts.extensions.insert(unmodeled);
            }
            // A call that asks for progress is answered in JSON if its answer comes first, as
            // rmcp's own server answers; a sampling request during the call goes on the call's
            // stream, which such an agent gets at once.
            let json_first = !samples && matches!(work, Work::CallOnStream(_));
            let work = match work {
                Work::Call(params) if samples => Work::CallOnStream(params),
                work => work,
            };
            run(
                Caller::Session(session),
                forwarder,
                parts,
                id,
                raw_id,
                work,
                json_first,
            )
            .await
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
                None => {
                    // Perhaps it is on its way on another connection; else rmcp may hold it.
                    session.cancelled_early(request.clone());
                    // Registered since it was looked for: `run` registers, then looks for an
                    // early cancellation, so one of the two sees the other.
                    if let Some(token) = lock(&session.in_flight).get(&request).cloned() {
                        token.cancel();
                    }
                    pass_on(parts, bytes, endpoint).await
                }
            }
        }
        _ => pass_on(parts, bytes, endpoint).await,
    }
}

/// A 2026-07-28 agent's self-contained request, run here with a `Forwarder` of its own as
/// rmcp would make for it; else the request back.
async fn self_contained(
    shared: &Arc<Shared>,
    server: &str,
    mut parts: http::request::Parts,
    bytes: Bytes,
) -> Result<Response, (http::request::Parts, Bytes)> {
    let Some(Message::Run {
        id,
        raw_id,
        work: work @ (Work::Call(_) | Work::CallOnStream(_) | Work::Request { .. }),
        unmodeled,
    }) = read::read_sessionless(&bytes)
    else {
        return Err((parts, bytes));
    };
    if !sessionless_headers(&parts.headers, work.method(), work.name()) {
        return Err((parts, bytes));
    }
    if let Some(unmodeled) = unmodeled {
        parts.extensions.insert(unmodeled);
    }
    let forwarder = Forwarder::new(shared.clone(), server.to_owned());
    let caller = Caller::Sessionless(shared.lanes.sessionless_peer());
    Ok(run(caller, forwarder, parts, id, raw_id, work, true).await)
}

/// Another agent's token with a session's id (random, but it may leak) reaches nothing of that
/// session: not its calls, its stream, its end, nor the answers and cancellations it owes or
/// sends its server. To that agent the session does not exist, in rmcp's very words for a
/// session there is not, so it does not learn that the id it holds is someone's.
fn not_yours() -> Response {
    (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response()
}

/// rmcp's way for a POST read here: what it carries beyond rmcp's model is noted first.
async fn pass_on(mut parts: http::request::Parts, bytes: Bytes, endpoint: Endpoint) -> Response {
    sent::mark(&mut parts, &bytes);
    let request = Request::from_parts(parts, Body::from(bytes));
    endpoint.handle(request).await.into_response()
}

/// Headers that need no judging beyond what rmcp already judged for the session: JSON in,
/// both answer kinds accepted (else rmcp says 406/415), and no protocol version or one of the
/// handshake's. If so, whether the agent offers sampling.
fn plain_headers(headers: &HeaderMap, peer: &Peer<RoleServer>) -> Option<bool> {
    let info = peer.peer_info()?;
    // rmcp checks a session's version header only for being a version it knows and runs the
    // request as the session's (whose own version is one of these); one naming 2026-07-28 or
    // later asks for the revision's `_meta`, which rmcp judges.
    let version_ok = headers.get(VERSION_HEADER).is_none_or(|v| {
        ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .any(|known| known.as_str().as_bytes() == v.as_bytes() && known.has_initialize())
    });
    // (rmcp reads the revision's `Mcp-Method` and `Mcp-Name` only under a version header
    // naming 2026-07-28 or later, so they are no matter here.)
    let plain = json_in(headers) && accepts_both(headers) && version_ok;
    plain.then_some(info.capabilities.sampling.is_some())
}

/// A 2026-07-28 request's headers, when they need no judging beyond the lane's: JSON in, both
/// answer kinds accepted, and the revision's headers each given once, as plain text, agreeing
/// with the request (the version its `_meta` names, the method, and for a request that names
/// what it reads, `name`: a tool, a prompt or a resource's URI). Anything else (a header
/// missing, repeated, encoded or contradicting the body, or a name given where the request has
/// none) is rmcp's to refuse or judge as it does. `Mcp-Param-*` headers are judged against
/// nothing, as rmcp judges them for the gateway, which names no tool schema of its own.
fn sessionless_headers(headers: &HeaderMap, method: &str, name: Option<&str>) -> bool {
    let once = |header: &str| {
        let mut values = headers.get_all(header).iter();
        match (values.next(), values.next()) {
            (Some(value), None) => value.to_str().ok(),
            _ => None,
        }
    };
    let json_in = once(header::CONTENT_TYPE.as_str()).is_some_and(|v| {
        v.split(';')
            .next()
            .is_some_and(|e| e.trim().eq_ignore_ascii_case("application/json"))
    });
    let name_agrees = match name {
        // Read as rmcp reads it: unwrapped first when in SEP-2243's Base64 wrapping.
        Some(name) => once("mcp-name")
            .and_then(crate::mcp::standard_headers::decoded)
            .is_some_and(|given| given == name),
        None => !headers.contains_key("mcp-name"),
    };
    json_in
        && accepts_both(headers)
        && once(VERSION_HEADER) == Some(ProtocolVersion::V_2026_07_28.as_str())
        && once("mcp-method") == Some(method)
        && name_agrees
}

/// Whether the body is said to be JSON (else rmcp says 415).
fn json_in(headers: &HeaderMap) -> bool {
    header_str(headers, header::CONTENT_TYPE.as_str()).is_some_and(|v| {
        v.split(';')
            .next()
            .is_some_and(|e| e.trim().eq_ignore_ascii_case("application/json"))
    })
}

/// Whether the agent accepts both answer kinds (else rmcp says 406), read as rmcp 3.11 reads
/// `Accept` (its `accepted_media_types`, private there): every `Accept` header, lists split
/// outside quoted strings, and a kind given an explicit quality of zero is not accepted.
fn accepts_both(headers: &HeaderMap) -> bool {
    // What the SDKs send, by far the commonest: no need to read it as a list (2,000 of the
    // gateway's instructions a call under callgrind).
    let mut given = headers.get_all(header::ACCEPT).iter();
    if let (Some(only), None) = (given.next(), given.next())
        && matches!(
            only.as_bytes(),
            b"application/json, text/event-stream" | b"text/event-stream, application/json"
        )
    {
        return true;
    }
    let (mut json, mut sse) = (false, false);
    let values = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok());
    for entry in values.flat_map(|value| split_unquoted(value, ',')) {
        let mut parts = split_unquoted(entry, ';');
        let Some(essence) = parts.next().map(str::trim) else {
            continue;
        };
        let acceptable = parts.all(|parameter| match parameter.split_once('=') {
            Some((name, value)) if name.trim().eq_ignore_ascii_case("q") => {
                quality_is_acceptable(value.trim())
            }
            _ => true,
        });
        json |= acceptable && essence.eq_ignore_ascii_case("application/json");
        sse |= acceptable && essence.eq_ignore_ascii_case("text/event-stream");
    }
    json && sse
}

/// `value` split at `delimiter` outside quoted strings (a quoted-pair keeps an escaped quote).
fn split_unquoted(value: &str, delimiter: char) -> impl Iterator<Item = &str> {
    let (mut quoted, mut escaped) = (false, false);
    value.split(move |c| {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if !quoted && c == delimiter {
            return true;
        }
        false
    })
}

/// A weight that fails RFC 9110's grammar is ignored; only an explicit zero excludes.
fn quality_is_acceptable(quality: &str) -> bool {
    let (whole, fraction) = quality.split_once('.').unwrap_or((quality, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|d| d.is_ascii_digit()) {
        return true;
    }
    whole != "0" || fraction.bytes().any(|d| d != b'0')
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

impl Work {
    /// The request's method.
    fn method(&self) -> &str {
        match self {
            Work::Call(_) | Work::CallOnStream(_) | Work::TaskCall(..) => "tools/call",
            Work::Task(method, _) => method,
            Work::Request { request, .. } => request.method(),
        }
    }

    /// What the request names, as the revision's `Mcp-Name` header gives it: the tool called,
    /// the prompt got or the resource read (SEP-2243).
    fn name(&self) -> Option<&str> {
        use rmcp::model::ClientRequest;
        match self {
            Work::Call(params) | Work::CallOnStream(params) | Work::TaskCall(params, _) => {
                Some(&params.name)
            }
            Work::Request {
                request: ClientRequest::GetPromptRequest(request),
                ..
            } => Some(&request.params.name),
            Work::Request {
                request: ClientRequest::ReadResourceRequest(request),
                ..
            } => Some(&request.params.uri),
            Work::Task(..) | Work::Request { .. } => None,
        }
    }
}

/// Whom the lane runs a request for.
enum Caller {
    /// An agent's session (2025-11-25 and older): the lane knows its requests in flight, for
    /// the agent's cancellations, and its answers to the gateway's requests.
    Session(Arc<Session>),
    /// A 2026-07-28 agent's request, self-contained; the peer stands in for the agent, as
    /// rmcp's own stand-in for such a request does (nothing goes through it: the request's
    /// progress goes on its own stream). Such an agent cancels by going away: the request is
    /// cancelled when its answer is dropped unsent, as rmcp cancels it.
    Sessionless(Peer<RoleServer>),
}

/// An answer: a call's result kept as the server sent it, a typed result (a call's the
/// gateway made or read, or another request's; unless the server's own was kept), or one as
/// the server sent it. Made once per request and moved once: boxing the larger variant would
/// only add an allocation to every call.
#[allow(clippy::large_enum_variant)]
enum Answered {
    Kept,
    Other(rmcp::model::ServerResult),
    AsSent(Value),
}

/// Runs the request as rmcp would (in a task of its own, so an agent that goes away does not
/// cut it off mid-way: it learns of that through `gone`, as on rmcp's way) and answers in JSON,
/// or on a stream when the call asked for progress. With `json_first`, a stream is started only
/// when something comes for it before the answer, or the answer takes longer than
/// [`KEEP_ALIVE`]: a call answered at once is answered in JSON (one write, and an answer any
/// agent reads without SSE), as rmcp's server answers with JSON responses on.
async fn run(
    caller: Caller,
    forwarder: Forwarder,
    mut parts: http::request::Parts,
    id: RequestId,
    raw_id: Box<RawValue>,
    work: Work,
    json_first: bool,
) -> Response {
    let abandoned = super::gone::on_drop(&parts);
    let ct = CancellationToken::new();
    let (peer, asked, session, as_2026) = match caller {
        Caller::Session(session) => {
            {
                let mut in_flight = lock(&session.in_flight);
                if session.closed.load(std::sync::atomic::Ordering::Relaxed) {
                    // Its agent ended the session while this request was arriving.
                    return (StatusCode::NOT_FOUND, "Not Found: the session has ended")
                        .into_response();
                }
                if in_flight.contains_key(&id) {
                    // Ids are unique among a session's requests in flight (JSON-RPC): a
                    // second would take the first's cancellation.
                    let refused = rmcp::ErrorData::invalid_request(
                        "a request with this id is already in flight on this session",
                        None,
                    );
                    return in_json(&raw_id, Ok(Err(refused)), None, None);
                }
                in_flight.insert(id.clone(), ct.clone());
            }
            if session.was_cancelled(&id) {
                // Withdrawn before it came: nothing runs, and nobody is asked.
                lock(&session.in_flight).remove(&id);
                return in_json(
                    &raw_id,
                    Ok(Err(super::forward::agent_cancelled())),
                    None,
                    None,
                );
            }
            (
                session.peer.clone(),
                session.asked.clone(),
                Some(session),
                None,
            )
        }
        Caller::Sessionless(peer) => (
            peer,
            Arc::default(),
            None,
            Some(Cancels(Some(ct.clone().drop_guard()))),
        ),
    };
    let mut ctx = RequestContext::new(id.clone(), peer);
    ctx.ct = ct;
    // A sessionless request has no session to send anything on: whatever comes for it before
    // its answer goes on a stream of its own, as rmcp's answer would switch to one.
    let streamed = as_2026.is_some()
        || matches!(
            work,
            Work::CallOnStream(_) | Work::Request { streamed: true, .. }
        );
    let progress = streamed.then(|| {
        let (stream, rx) = LaneStream::new(asked);
        ctx.extensions.insert(ProgressTo::Lane(stream));
        rx
    });
    // The HTTP request's parts travel with the call, as rmcp hands them on: the agent's token
    // mark, `gone`, and where the server's result is kept for the answer.
    let kept = super::faithful::Kept::default();
    parts.extensions.insert(kept.clone());
    ctx.extensions.insert(parts);
    let mut running = tokio::spawn({
        let registered = session.map(|session| sessions::Registered(session, id.clone()));
        async move {
            let result = match work {
                Work::Call(mut params) | Work::CallOnStream(mut params) => {
                    if let Some(meta) = params.meta.take() {
                        ctx.meta = meta;
                    }
                    let modern = ctx
                        .protocol_version()
                        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
                    // The lane answers with the server's kept bytes: the call's result need
                    // not be read into its typed form.
                    forwarder
                        .gate_and_call(CallToolRequest::new(params), ctx, true)
                        .await
                        .map(|answer| match answer {
                            // One the gateway made (a denial, a pending answer) or read: shaped
                            // for the agent's revision as rmcp's server shapes every result.
                            CallAnswer::Typed(result) => {
                                let mut result = rmcp::model::ServerResult::CallToolResult(result);
                                if modern {
                                    result.fill_missing_cache_hints();
                                } else {
                                    result.strip_result_type_for_legacy_peer();
                                    result.strip_non_object_output_for_legacy_peer();
                                }
                                Answered::Other(result)
                            }
                            CallAnswer::Kept => Answered::Kept,
                        })
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
            drop(registered);
            result
        }
    });
    let Some(mut progress) = progress else {
        let result = running.await;
        abandoned.answered();
        return in_json(&raw_id, result, kept.take_for(&id), None);
    };
    let mut first = None;
    if json_first {
        tokio::select! {
            biased;
            // (Closed once the call is over: then its answer is here too.)
            Some(event) = progress.recv() => first = Some(event),
            result = &mut running => {
                abandoned.answered();
                let as_2026 = as_2026.map(Cancels::answered);
                let raw = kept.take_for(&id);
                // The answer waited for the progress before it (`caught_up`): had any come,
                // it would be queued here now, and go first.
                let mut events = Vec::new();
                while let Some(event) = progress.try_recv() {
                    events.extend_from_slice(&event);
                }
                if events.is_empty() {
                    return in_json(&raw_id, result, raw, as_2026);
                }
                push_answer(&mut events, &raw_id, result, raw, as_2026);
                return on_stream(Body::from(events));
            }
            // The stream starts with a keep-alive, which tells at once whether the agent is
            // still there.
            () = tokio::time::sleep(KEEP_ALIVE) => first = Some(Bytes::from_static(b":\n\n")),
        }
    }
    // From here the body is the request's: `gone` watches it as it does rmcp's streams.
    abandoned.answered();
    let stream = Streamed {
        first,
        progress,
        running,
        kept,
        id,
        raw_id,
        keep_alive: tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE),
        done: false,
        as_2026,
    };
    on_stream(Body::from_stream(futures::stream::unfold(
        stream,
        Streamed::next,
    )))
}

/// Cancels a sessionless request when dropped before its answer is made: an agent that goes
/// away (its connection closed) cancels it, as rmcp's server cancels such a request.
struct Cancels(Option<tokio_util::sync::DropGuard>);

impl Cancels {
    /// The answer is made: what is left is telling it. Marks the answer as a 2026-07-28
    /// agent's (see [`as_2026_07_28`]).
    fn answered(mut self) -> Answered2026 {
        if let Some(guard) = self.0.take() {
            guard.disarm();
        }
        Answered2026
    }
}

/// An answer to a 2026-07-28 agent's self-contained request.
#[derive(Clone, Copy)]
struct Answered2026;

/// A 2026-07-28 agent's error answer as rmcp's server makes it: "resource not found" is the
/// revision's invalid params, and the HTTP status says what a few codes mean.
fn as_2026_07_28(
    mut result: Result<Result<Answered, rmcp::ErrorData>, tokio::task::JoinError>,
) -> (
    Result<Result<Answered, rmcp::ErrorData>, tokio::task::JoinError>,
    StatusCode,
) {
    use rmcp::model::ErrorCode;
    let mut status = StatusCode::OK;
    if let Ok(Err(error)) = &mut result {
        if error.code == ErrorCode::RESOURCE_NOT_FOUND {
            error.code = ErrorCode::INVALID_PARAMS;
        }
        status = match error.code {
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
            | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
            ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
            _ => StatusCode::OK,
        };
    }
    (result, status)
}

/// The answer to `raw_id` as a JSON body.
fn in_json(
    raw_id: &RawValue,
    result: Result<Result<Answered, rmcp::ErrorData>, tokio::task::JoinError>,
    raw: Option<Box<RawValue>>,
    as_2026: Option<Answered2026>,
) -> Response {
    let (result, status) = match as_2026 {
        Some(Answered2026) => as_2026_07_28(result),
        None => (result, StatusCode::OK),
    };
    match answer(raw_id, result, raw) {
        Ok(body) => (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            Body::from(body),
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// `body` as an SSE stream.
fn on_stream(body: Body) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// The answer to `raw_id` as an SSE event, after `events`.
fn push_answer(
    events: &mut Vec<u8>,
    raw_id: &RawValue,
    result: Result<Result<Answered, rmcp::ErrorData>, tokio::task::JoinError>,
    raw: Option<Box<RawValue>>,
    as_2026: Option<Answered2026>,
) {
    // (On a stream the status was told already.)
    let result = match as_2026 {
        Some(Answered2026) => as_2026_07_28(result).0,
        None => result,
    };
    match answer(raw_id, result, raw) {
        Ok(body) => {
            events.extend_from_slice(b"event: message\n");
            super::faithful::push_sse_data(events, &body);
            events.push(b'\n');
        }
        Err(e) => tracing::warn!(error = %e, "gateway: an answer that cannot be written"),
    }
}

/// As rmcp's own streams: a comment this often, so a write to an agent that went away fails
/// and `gone` notices.
const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(5);

/// A call answered on a stream: its progress and the server's requests as they come, then its
/// answer.
struct Streamed {
    /// What came for the stream while the answer was awaited for JSON.
    first: Option<Bytes>,
    progress: LaneEvents,
    running: tokio::task::JoinHandle<Result<Answered, rmcp::ErrorData>>,
    kept: super::faithful::Kept,
    id: RequestId,
    raw_id: Box<RawValue>,
    keep_alive: tokio::time::Interval,
    done: bool,
    /// A sessionless request's: cancelled if the stream is dropped before its answer.
    as_2026: Option<Cancels>,
}

impl Streamed {
    async fn next(mut self) -> Option<(Result<Bytes, std::convert::Infallible>, Self)> {
        if self.done {
            return None;
        }
        if let Some(first) = self.first.take() {
            return Some((Ok(first), self));
        }
        let event = tokio::select! {
            biased;
            Some(event) = self.progress.recv() => event.to_vec(),
            result = &mut self.running => {
                // The answer waited for the progress before it (`caught_up`), so that is all
                // queued here now, and goes first.
                let mut events = Vec::new();
                while let Some(event) = self.progress.try_recv() {
                    events.extend_from_slice(&event);
                }
                let raw = self.kept.take_for(&self.id);
                let as_2026 = self.as_2026.take().map(Cancels::answered);
                push_answer(&mut events, &self.raw_id, result, raw, as_2026);
                self.done = true;
                events
            }
            _ = self.keep_alive.tick() => b":\n\n".to_vec(),
        };
        Some((Ok(Bytes::from(event)), self))
    }
}

/// The JSON-RPC answer to `raw_id`: the server's own result (`raw`, kept for this request)
/// where there is one, so it goes out as the bytes it came in.
fn answer(
    raw_id: &RawValue,
    result: Result<Result<Answered, rmcp::ErrorData>, tokio::task::JoinError>,
    raw: Option<Box<RawValue>>,
) -> serde_json::Result<Vec<u8>> {
    match result {
        Ok(Ok(Answered::Kept)) => match raw {
            Some(raw) => reply(raw_id, "result", &raw),
            None => reply(raw_id, "error", &CallAnswer::lost()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `Accept` as rmcp reads it, the SDKs' own value or any other spelling of it.
    #[test]
    fn accept_is_read_as_rmcp_reads_it() {
        let accepting = |values: &[&'static str]| {
            let mut map = HeaderMap::new();
            for value in values {
                map.append(header::ACCEPT, http::HeaderValue::from_static(value));
            }
            accepts_both(&map)
        };
        for both in [
            &["application/json, text/event-stream"][..],
            &["text/event-stream, application/json"],
            &["application/json", "text/event-stream"],
            &["Application/JSON;q=0.5,text/event-stream;q=1"],
            &["text/event-stream;x=\"a,b\", application/json;q=0.001"],
            // A kind listed again with a zero quality is still listed acceptably once.
            &[
                "application/json, text/event-stream",
                "text/event-stream;q=0",
            ],
        ] {
            assert!(accepting(both), "{both:?}");
        }
        for not_both in [
            &[][..],
            &["application/json"],
            &["application/json, text/event-stream;q=0"],
            &["application/json;q=0.000, text/event-stream"],
            &["text/event-stream;x=\"a, application/json\""],
        ] {
            assert!(!accepting(not_both), "{not_both:?}");
        }
    }

    /// A sessionless request is the lane's only when every header the revision has is given
    /// once, plainly, and agrees with the request; anything else is left for rmcp to judge.
    #[test]
    fn a_sessionless_requests_headers_must_agree_with_it_once_and_plainly() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.append(*name, http::HeaderValue::from_static(value));
            }
            map
        };
        let good = [
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ];
        let call =
            |headers: &HeaderMap, tool| sessionless_headers(headers, "tools/call", Some(tool));
        assert!(call(&headers(&good), "echo"));
        assert!(!call(&headers(&good), "other"), "another tool");
        let with = |name: &'static str, value: Option<&'static str>| {
            let mut pairs: Vec<_> = good.iter().copied().filter(|(n, _)| *n != name).collect();
            if let Some(value) = value {
                pairs.push((name, value));
            }
            headers(&pairs)
        };
        for (name, value) in [
            ("mcp-name", None),
            ("mcp-method", None),
            ("mcp-protocol-version", None),
            ("mcp-protocol-version", Some("2025-11-25")),
            ("mcp-method", Some("tools/list")),
            ("mcp-name", Some("=?base64?b3RoZXI=?=")),
            ("mcp-name", Some("=?base64?not base64?=")),
            ("accept", Some("application/json")),
            ("content-type", Some("text/plain")),
        ] {
            assert!(!call(&with(name, value), "echo"), "{name}: {value:?}");
        }
        assert!(
            call(&with("mcp-name", Some("=?base64?ZWNobw==?=")), "echo"),
            "a name in SEP-2243's Base64 wrapping, read as rmcp reads it"
        );
        let mut twice = headers(&good);
        twice.append("mcp-name", http::HeaderValue::from_static("echo"));
        assert!(!call(&twice, "echo"), "a header given twice");

        // A resource is named by its URI, a prompt by its name; a request that names nothing
        // takes no name header.
        let read = with("mcp-method", Some("resources/read"));
        assert!(!sessionless_headers(
            &read,
            "resources/read",
            Some("raw://a")
        ));
        let mut read = with("mcp-name", Some("raw://a"));
        read.insert(
            "mcp-method",
            http::HeaderValue::from_static("resources/read"),
        );
        assert!(sessionless_headers(
            &read,
            "resources/read",
            Some("raw://a")
        ));
        assert!(!sessionless_headers(
            &read,
            "resources/read",
            Some("raw://b")
        ));
        assert!(!sessionless_headers(&read, "prompts/get", Some("raw://a")));
        let mut list = with("mcp-name", None);
        list.insert("mcp-method", http::HeaderValue::from_static("tools/list"));
        assert!(sessionless_headers(&list, "tools/list", None));
        assert!(!sessionless_headers(&list, "prompts/list", None));
        list.insert("mcp-name", http::HeaderValue::from_static("echo"));
        assert!(
            !sessionless_headers(&list, "tools/list", None),
            "a name where the request has none is rmcp's to judge"
        );
    }

    /// A 2026-07-28 agent's error answer is shaped as rmcp's server shapes it.
    #[test]
    fn a_2026_agents_error_answer_says_its_code_in_the_status_as_rmcp_would() {
        use rmcp::model::ErrorCode;
        let status = |code: ErrorCode| {
            let result = Ok(Err(rmcp::ErrorData::new(code, "no", None)));
            as_2026_07_28(result).1
        };
        assert_eq!(status(ErrorCode::METHOD_NOT_FOUND), StatusCode::NOT_FOUND);
        assert_eq!(status(ErrorCode::HEADER_MISMATCH), StatusCode::BAD_REQUEST);
        assert_eq!(status(ErrorCode::INTERNAL_ERROR), StatusCode::OK);
        let (result, _) = as_2026_07_28(Ok(Err(rmcp::ErrorData::new(
            ErrorCode::RESOURCE_NOT_FOUND,
            "gone",
            None,
        ))));
        assert!(matches!(result, Ok(Err(e)) if e.code == ErrorCode::INVALID_PARAMS));
        let (_, ok) = as_2026_07_28(Ok(Ok(Answered::AsSent(json!({})))));
        assert_eq!(ok, StatusCode::OK);
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

    /// A call whose result was kept as sent is answered with those bytes; were they gone, the
    /// agent gets an error, not a result made up in their place.
    #[test]
    fn a_kept_result_is_the_answer_and_without_it_an_error() {
        let id: Box<RawValue> = serde_json::from_str("7").unwrap();
        let kept: Box<RawValue> = serde_json::from_str(r#"{"content": []}"#).unwrap();
        let body = answer(&id, Ok(Ok(Answered::Kept)), Some(kept)).unwrap();
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            r#"{"jsonrpc":"2.0","id":7,"result":{"content": []}}"#
        );
        let body = answer(&id, Ok(Ok(Answered::Kept)), None).unwrap();
        let parsed: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(parsed.get("result").is_none(), "{parsed}");
        assert_eq!(parsed["error"]["code"], -32603, "{parsed}");
    }
}
