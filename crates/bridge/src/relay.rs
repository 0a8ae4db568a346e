//! The relay: agent lines on stdin become POSTs to the gateway; what the gateway answers, and
//! what it sends on its own, becomes lines on stdout.
//!
//! Each POST body is the exact text the agent wrote, and each line to the agent the exact text
//! the gateway sent (line breaks, whitespace between a JSON text's tokens, become spaces):
//! rmcp's typed model drops fields it does not know, `serde_json::Value` rounds numbers past 64
//! bits, and a transport adapter must not change what it carries. The bridge reads only what the transport needs: the method and id, the
//! session id and protocol version that `initialize` returns, a 2026-07-28 request's own version
//! in `params._meta`, and tool schemas for the `Mcp-Param-*` headers.
//!
//! Requests run concurrently (a long `tools/call` must not hold up a `ping`, or the
//! `notifications/cancelled` that withdraws it). Notifications and responses are posted in the
//! order they were written, and `initialize` completes before the next line is read, because the
//! session id it returns goes on everything after it. One writer task owns stdout, so lines never
//! interleave.

mod line;

use std::{
    collections::HashMap,
    fmt::Display,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures::StreamExt;
use reqwest::{
    Response, StatusCode, Url,
    header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue},
};
use serde_json::{Map, Value, value::RawValue};
use sse_stream::Sse;
use tokio::{
    io::{AsyncBufRead, AsyncWriteExt},
    sync::{Notify, mpsc},
    task::{AbortHandle, JoinHandle, JoinSet},
    time::Instant,
};

use crate::{discovery, headers, owner};
use line::{Line, MAX_LINE, read_line};

/// The most of one answer from the gateway (a JSON body, or one event) the bridge holds: as
/// much as it takes from the agent in a line. Whatever listens on the gateway's port could
/// otherwise send without end into the bridge's memory.
const MAX_ANSWER: usize = MAX_LINE;

/// JSON-RPC: the line was not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: JSON, but not a message.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's implementation-defined server error: the gateway could not be reached, refused,
/// or failed.
pub const GATEWAY_ERROR: i64 = -32000;

const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
const VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
const LAST_EVENT_ID_HEADER: HeaderName = HeaderName::from_static("last-event-id");
const EVENT_STREAM: &str = "text/event-stream";

/// How long requests still running may finish after the agent closes stdin.
const DRAIN_ON_EOF: Duration = Duration::from_secs(10);
/// How often a response stream that ended before its answer is resumed.
const RESUME_ATTEMPTS: u32 = 3;
const DELETE_TIMEOUT: Duration = Duration::from_secs(3);
/// How long posting a notification or an answer may take.
const NOT_A_REQUEST_WAIT: Duration = Duration::from_secs(30);

/// Writes `countersign-bridge: <message>` to stderr, which agents show in their logs.
pub fn log(message: impl Display) {
    use std::io::Write;
    // Not `eprintln!`, which panics when the write fails: an agent host that stopped reading
    // stderr (EPIPE) must not cost the agent an answer.
    let _ = writeln!(std::io::stderr(), "countersign-bridge: {message}");
}

/// The one task that writes stdout: a line per message, flushed at once.
pub fn spawn_writer() -> (mpsc::Sender<String>, JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel::<String>(64);
    let task = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(mut line) = rx.recv().await {
            line.push('\n');
            let written = async {
                stdout.write_all(line.as_bytes()).await?;
                stdout.flush().await
            };
            if let Err(e) = written.await {
                log(format_args!("cannot write to stdout: {e}"));
                break;
            }
        }
    });
    (tx, task)
}

/// A JSON-RPC error response.
pub fn error_response(id: Value, code: i64, message: &str) -> Value {
    let mut error = Map::new();
    error.insert("code".into(), code.into());
    error.insert("message".into(), message.into());
    let mut response = Map::new();
    response.insert("jsonrpc".into(), "2.0".into());
    response.insert("id".into(), id);
    response.insert("error".into(), Value::Object(error));
    Value::Object(response)
}

/// With no gateway to talk to: answers the first request on `input` (normally `initialize`)
/// with `message`, so the agent shows why instead of waiting, and gives up after `wait`.
pub async fn refuse_first_request(
    mut input: impl AsyncBufRead + Unpin,
    out: &mpsc::Sender<String>,
    message: &str,
    wait: Duration,
) {
    let deadline = Instant::now() + wait;
    let mut buf = Vec::new();
    loop {
        match tokio::time::timeout_at(deadline, read_line(&mut input, &mut buf, MAX_LINE)).await {
            Ok(Ok(Line::Read)) => {}
            Ok(Ok(Line::TooLong)) => continue,
            _ => return,
        }
        let Some(Ok(Ok(message_in))) = line_text(&buf).map(|t| t.map(read_message)) else {
            continue;
        };
        if let Some(Request { id, .. }) = request_of(&message_in) {
            let reply = error_response(id, GATEWAY_ERROR, message);
            let _ = out.send(reply.to_string()).await;
            return;
        }
    }
}

/// A request's id and method: what its answer is matched by and what the bridge learns from it.
#[derive(Clone, Debug)]
struct Request {
    id: Value,
    method: String,
}

fn request_of(message: &Value) -> Option<Request> {
    let method = message.get("method")?.as_str()?;
    let id = message.get("id").filter(|id| !id.is_null())?;
    Some(Request {
        id: id.clone(),
        method: method.to_owned(),
    })
}

fn answers(message: &Value, request: &Request) -> bool {
    message.get("method").is_none()
        && message.get("id") == Some(&request.id)
        && (message.get("result").is_some() || message.get("error").is_some())
}

/// What the bridge reads of a message from the gateway, borrowed from its text: the rest, the
/// server's own words, is never parsed, so it reaches the agent as written (numbers past 64
/// bits, or too large for a float, included).
#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
    /// Read only of an agent's line (`read_message`).
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

impl Envelope<'_> {
    /// A JSON-RPC message: an object with a `jsonrpc` member.
    fn read(text: &str) -> Result<Envelope<'_>, String> {
        // serde's derived reading also takes an array, member by position: a batch or
        // `["2.0"]` would pass for a message.
        if !text.trim_start().starts_with('{') {
            return Err(format!("not a JSON-RPC message: {}", snippet(text)));
        }
        match serde_json::from_str::<Envelope>(text) {
            Ok(envelope) if envelope.jsonrpc.is_some() => Ok(envelope),
            Ok(_) => Err(format!("not a JSON-RPC message: {}", snippet(text))),
            Err(e) => Err(format!("not JSON ({e})")),
        }
    }

    fn answers(&self, request: &Request) -> bool {
        self.method.is_none()
            && (self.result.is_some() || self.error.is_some())
            && self
                .id
                .and_then(|id| serde_json::from_str::<Value>(id.get()).ok())
                .is_some_and(|id| id == request.id)
    }
}

/// An agent's line as the bridge reads it: the whole message, or, when it is JSON that a `Value`
/// cannot hold (a number too large for a float, a lone surrogate in a string), what the
/// transport reads of it: `jsonrpc`, `id` and `method`, and the `name` and `_meta` of its
/// `params`. The line goes to the gateway as written either way, so the agent gets an answer
/// to its request rather than a parse error without its id.
fn read_message(text: &str) -> Result<Value, serde_json::Error> {
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(borrow, default)]
        name: Option<&'a RawValue>,
        #[serde(borrow, default, rename = "_meta")]
        meta: Option<&'a RawValue>,
    }
    fn readable(raw: Option<&RawValue>) -> Option<Value> {
        serde_json::from_str(raw?.get()).ok()
    }
    let refused = match serde_json::from_str::<Value>(text) {
        Ok(message) => return Ok(message),
        Err(e) => e,
    };
    // serde's derived reading also takes an array, member by position.
    if !text.trim_start().starts_with('{') {
        return Err(refused);
    }
    let Ok(line) = serde_json::from_str::<Envelope>(text) else {
        return Err(refused);
    };
    let mut message = Map::new();
    for (key, raw) in [
        ("jsonrpc", line.jsonrpc),
        ("id", line.id),
        ("method", line.method),
    ] {
        if let Some(value) = readable(raw) {
            message.insert(key.into(), value);
        }
    }
    if let Some(params) = line
        .params
        .and_then(|p| serde_json::from_str::<Params>(p.get()).ok())
    {
        let mut read = Map::new();
        for (key, raw) in [("name", params.name), ("_meta", params.meta)] {
            if let Some(value) = readable(raw) {
                read.insert(key.into(), value);
            }
        }
        message.insert("params".into(), Value::Object(read));
    }
    Ok(Value::Object(message))
}

/// `text` as one line: a JSON text has line breaks only as whitespace between its tokens
/// (never unescaped in a string), so they become spaces and nothing else changes.
fn one_line(text: &str) -> String {
    text.trim().replace(['\r', '\n'], " ")
}

/// What the transport has learned so far.
#[derive(Default)]
struct State {
    /// `Mcp-Session-Id` from the `initialize` response (legacy protocol versions only).
    session: Option<String>,
    /// The negotiated version, or the one the latest 2026-07-28 request named for itself.
    version: Option<String>,
    /// The `Mcp-Param-*` headers each tool's calls carry, by tool name, from `tools/list`
    /// (only tools that have any).
    annotated_tools: HashMap<String, headers::ParamHeaders>,
    /// The GET stream for server-initiated messages, once opened.
    listener: Option<AbortHandle>,
    /// The agent's `initialize` as it wrote it, once the gateway took it: sent again to open a
    /// new session when the gateway no longer knows the one held (the app restarted), since a
    /// stdio host knows nothing of HTTP sessions and would never do it itself.
    initialize: Option<String>,
}

/// How a response stream ended.
#[derive(Default)]
struct StreamEnd {
    answered: bool,
    last_event_id: Option<String>,
    retry: Option<Duration>,
    /// Why the stream could not be read on (an event past [`MAX_ANSWER`], a broken connection).
    broke: Option<String>,
}

/// How relaying ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The agent closed stdin or stopped the bridge.
    Normally,
    /// A new connection led to a listener that is not the user's own: nothing more is sent.
    Refused,
}

pub struct Relay {
    http: reqwest::Client,
    base: Url,
    endpoint: Url,
    server: String,
    auth: HeaderValue,
    /// Where the token came from (the environment or a file), for a refusal's message.
    token_from: String,
    out: mpsc::Sender<String>,
    state: Mutex<State>,
    /// Set when a connection was refused by the owner check; every later one would be too.
    refused: AtomicBool,
    /// Wakes the read loop to stop after a refusal.
    stop: Notify,
    /// Held while a new session is opened, so requests that all found the old one gone open
    /// one between them.
    renewing: tokio::sync::Mutex<()>,
}

impl Relay {
    pub fn new(
        gateway: discovery::Gateway,
        server: &str,
        out: mpsc::Sender<String>,
    ) -> Result<Arc<Self>, String> {
        let endpoint = endpoint(&gateway.base, server)?;
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", gateway.token))
            .map_err(|_| "the gateway token contains characters a header cannot carry")?;
        auth.set_sensitive(true);
        let mut http = reqwest::Client::builder()
            // The gateway is on loopback: a proxy from the environment must not see the token.
            .no_proxy()
            .connect_timeout(Duration::from_secs(5))
            // The gateway never redirects: one that does is not the gateway, and a redirect
            // would carry the agent's messages (a 307 or 308 sends the body again) elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            // Every connection the client opens, first or reconnect, is checked before the
            // client writes on it; reused pooled connections were checked when they were made.
            .connector_layer(owner::OwnerCheckLayer::new(&gateway.addrs));
        if let Some(url::Host::Domain(name)) = gateway.base.host() {
            // Connect only to the addresses the check looks at, not a later DNS answer.
            http = http.resolve_to_addrs(name, &gateway.addrs);
        }
        let http = http
            .build()
            .map_err(|e| format!("cannot set up HTTP: {}", chain(&e)))?;
        Ok(Arc::new(Self {
            http,
            base: gateway.base,
            endpoint,
            server: server.to_owned(),
            auth,
            token_from: gateway.token_from,
            out,
            state: Mutex::default(),
            refused: AtomicBool::new(false),
            stop: Notify::new(),
            renewing: tokio::sync::Mutex::new(()),
        }))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn is_refused(&self) -> bool {
        self.refused.load(Ordering::SeqCst)
    }

    /// Relays until `input` ends (or the agent stops the bridge with a signal, or a connection
    /// is refused by the owner check), lets running requests finish for a while, and ends the
    /// session.
    pub async fn run(self: &Arc<Self>, mut input: impl AsyncBufRead + Unpin) -> Ended {
        let mut requests = JoinSet::new();
        let mut buf = Vec::new();
        let terminated = terminated();
        tokio::pin!(terminated);
        let mut stopped = false;
        loop {
            let read = tokio::select! {
                read = read_line(&mut input, &mut buf, MAX_LINE) => read,
                () = &mut terminated => {
                    stopped = true;
                    break;
                }
                // Requests already running still get their answers (the drain below).
                () = self.stop.notified() => break,
            };
            match read {
                Ok(Line::Eof) => break,
                Ok(Line::Read) => {}
                Ok(Line::TooLong) => {
                    self.parse_error(&format!("a line longer than {} MiB", MAX_LINE >> 20))
                        .await;
                    continue;
                }
                Err(e) => {
                    log(format_args!("cannot read stdin: {e}"));
                    break;
                }
            }
            while requests.try_join_next().is_some() {}
            let text = match line_text(&buf) {
                None => continue,
                Some(Err(why)) => {
                    self.parse_error(&why).await;
                    continue;
                }
                Some(Ok(text)) => text,
            };
            let message = match read_message(text) {
                Ok(message) if message.is_object() => message,
                Ok(_) => {
                    log("a line on stdin is JSON but not a JSON-RPC message object");
                    let why = "Invalid Request: expected a JSON-RPC message object";
                    self.write(&error_response(Value::Null, INVALID_REQUEST, why))
                        .await;
                    continue;
                }
                Err(e) => {
                    self.parse_error(&e.to_string()).await;
                    continue;
                }
            };
            let body = text.to_owned();
            match request_of(&message) {
                Some(request) if request.method != "initialize" => {
                    let this = Arc::clone(self);
                    requests.spawn(async move { this.forward(body, &message).await });
                }
                // In order, yet never past the agent's signal: a gateway that accepts and
                // never answers must not keep the bridge from ending.
                _ => {
                    tokio::select! {
                        () = self.forward(body, &message) => {}
                        () = &mut terminated => {
                            stopped = true;
                            break;
                        }
                    }
                }
            }
        }
        let drain = async { while requests.join_next().await.is_some() {} };
        let wait = if stopped {
            Duration::ZERO
        } else {
            DRAIN_ON_EOF
        };
        if tokio::time::timeout(wait, drain).await.is_err() {
            log(format_args!(
                "{} request(s) still running were abandoned",
                requests.len()
            ));
            requests.shutdown().await;
        }
        if self.is_refused() {
            return Ended::Refused;
        }
        self.end_session().await;
        Ended::Normally
    }

    async fn parse_error(&self, why: &str) {
        log(format_args!("a line on stdin is not JSON ({why})"));
        let reply = error_response(Value::Null, PARSE_ERROR, &format!("Parse error: {why}"));
        self.write(&reply).await;
    }

    async fn write(&self, message: &Value) {
        // The writer has stopped only if stdout is gone, and then nobody is listening.
        let _ = self.out.send(message.to_string()).await;
    }

    /// Posts one message and relays whatever comes back for it.
    async fn forward(self: &Arc<Self>, body: String, message: &Value) {
        let request = request_of(message);
        let method = message.get("method").and_then(Value::as_str).unwrap_or("");
        let post = |body: String| {
            let headers = self.post_headers(&body, message);
            let mut post = self.http.post(self.endpoint.clone());
            if request.is_none() {
                // The gateway takes a notification or an answer at once (202): one held longer
                // would hold up every message after it.
                post = post.timeout(NOT_A_REQUEST_WAIT);
            }
            let held = headers
                .get(&SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            (post.headers(headers).body(body).send(), held)
        };
        let (sent, held) = post(body.clone());
        let mut sent = sent.await;
        // The gateway no longer knows the session (the app restarted): a new one, and the
        // message once more on it.
        if let (Ok(response), Some(held)) = (&sent, held)
            && response.status() == StatusCode::NOT_FOUND
            && method != "initialize"
            && self.renew_session(&held).await
        {
            sent = post(body.clone()).0.await;
        }
        let response = match sent {
            Ok(response) => response,
            Err(e) => {
                return self
                    .fail(request.as_ref(), method, &self.transport_error(&e))
                    .await;
            }
        };
        let status = response.status();
        if !status.is_success() {
            return self.http_error(request.as_ref(), method, response).await;
        }
        if method == "initialize" && request.is_some() {
            let session = response
                .headers()
                .get(&SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let mut state = self.state();
            state.initialize = session.as_ref().map(|_| body.clone());
            state.session = session;
        }
        if status != StatusCode::ACCEPTED && status != StatusCode::NO_CONTENT {
            if is_event_stream(&response) {
                self.relay_stream(response, request.as_ref()).await;
            } else {
                self.relay_json(response, request.as_ref()).await;
            }
        }
        if method == "notifications/initialized" {
            self.open_listener();
        }
    }

    /// The headers for posting `message`, as rmcp's client would send them: no version on
    /// `initialize`, the negotiated one after it, a 2026-07-28 request's own version from
    /// `params._meta`, and from 2026-07-28 on the SEP-2243 routing headers.
    fn post_headers(&self, body: &str, message: &Value) -> HeaderMap {
        let mut headers = self.base_headers("application/json, text/event-stream");
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let is_request = request_of(message).is_some();
        let is_initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
        let mut state = self.state();
        if let Some(session) = state.session.as_deref().filter(|_| !is_initialize) {
            insert(&mut headers, SESSION_HEADER, session);
        }
        if is_initialize {
            return headers;
        }
        if let Some(version) = headers::inline_version(message).filter(|_| is_request) {
            state.version = Some(version.to_owned());
        }
        let Some(version) = state.version.clone() else {
            return headers;
        };
        insert(&mut headers, VERSION_HEADER, &version);
        if headers::needs_standard_headers(&version) {
            let tool = message
                .get("params")
                .and_then(|p| p.get("name"))
                .and_then(Value::as_str)
                .filter(|_| message.get("method").and_then(Value::as_str) == Some("tools/call"));
            let params = tool.and_then(|name| state.annotated_tools.get(name));
            for (name, value) in headers::standard_headers(body.as_bytes(), params) {
                headers.insert(name, value);
            }
        }
        headers
    }

    fn base_headers(&self, accept: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, self.auth.clone());
        headers.insert(ACCEPT, HeaderValue::from_static(accept));
        headers
    }

    /// Authorization, Accept, and the session and version if known: for GETs and DELETE.
    fn session_headers(&self, accept: &'static str) -> HeaderMap {
        let mut headers = self.base_headers(accept);
        let state = self.state();
        if let Some(session) = &state.session {
            insert(&mut headers, SESSION_HEADER, session);
        }
        if let Some(version) = &state.version {
            insert(&mut headers, VERSION_HEADER, version);
        }
        headers
    }

    async fn relay_json(&self, response: Response, request: Option<&Request>) {
        let length = response.content_length();
        let body = countersign_core::mcp::read_bounded(response.bytes_stream(), length, MAX_ANSWER);
        let text = match body.await.map(String::from_utf8) {
            Ok(Ok(text)) => text,
            Ok(Err(_)) => {
                return self
                    .fail(request, "", "the gateway's answer is not UTF-8")
                    .await;
            }
            Err(e) => {
                let why = format!("the gateway's answer could not be read: {}", chain(&e));
                return self.fail(request, "", &why).await;
            }
        };
        if text.trim().is_empty() {
            if request.is_some() {
                self.fail(request, "", "the gateway answered with an empty body")
                    .await;
            }
            return;
        }
        match Envelope::read(&text) {
            Ok(message) => {
                self.deliver(&text, &message, request).await;
            }
            Err(e) => {
                let why = format!("the gateway's answer is {e}");
                self.fail(request, "", &why).await;
            }
        }
    }

    /// Relays a response stream until it answers `request`; one that ends early is resumed
    /// from its last event id, as rmcp's client does (the server may close it on purpose and
    /// keep the rest for a reconnect).
    async fn relay_stream(&self, mut response: Response, request: Option<&Request>) {
        let mut attempts = 0;
        loop {
            let end = self.relay_events(response, request).await;
            let Some(request) = request.filter(|_| !end.answered) else {
                return;
            };
            let Some(last_event_id) = end.last_event_id.filter(|_| attempts < RESUME_ATTEMPTS)
            else {
                let why = match end.broke {
                    Some(broke) => {
                        format!("the gateway's stream broke off before answering: {broke}")
                    }
                    None => "the gateway closed the stream before answering".to_owned(),
                };
                return self.fail(Some(request), "", &why).await;
            };
            attempts += 1;
            tokio::time::sleep(end.retry.unwrap_or(Duration::from_secs(1))).await;
            let mut headers = self.session_headers(EVENT_STREAM);
            insert(&mut headers, LAST_EVENT_ID_HEADER, &last_event_id);
            match self
                .http
                .get(self.endpoint.clone())
                .headers(headers)
                .send()
                .await
            {
                Ok(resumed) if resumed.status().is_success() && is_event_stream(&resumed) => {
                    response = resumed;
                }
                Ok(resumed) => {
                    let why = format!(
                        "the gateway could not resume the answer's stream ({})",
                        resumed.status()
                    );
                    return self.fail(Some(request), "", &why).await;
                }
                Err(e) => {
                    let why = self.transport_error(&e);
                    return self.fail(Some(request), "", &why).await;
                }
            }
        }
    }

    /// Writes each event's data as a line, as it arrives, until the one answering `request`.
    async fn relay_events(&self, response: Response, request: Option<&Request>) -> StreamEnd {
        let mut events = countersign_core::mcp::bounded_sse(response.bytes_stream(), MAX_ANSWER);
        let mut end = StreamEnd::default();
        while let Some(event) = events.next().await {
            let Sse {
                event,
                data,
                id,
                retry,
            } = match event {
                Ok(event) => event,
                Err(e) => {
                    log(format_args!("the gateway's event stream broke off: {e}"));
                    end.broke = Some(e.to_string());
                    break;
                }
            };
            if id.is_some() {
                end.last_event_id = id;
            }
            // Whatever listens on the gateway's port (the app, or anything that took the port
            // while the app is away) may say `retry: 0` and end each stream: never faster than
            // four times a second, never deaf for longer than a minute.
            if let Some(ms) = retry {
                end.retry = Some(Duration::from_millis(ms.clamp(250, 60_000)));
            }
            // Priming events carry only an id; other event types are not MCP messages.
            let Some(data) = data.filter(|d| !d.trim().is_empty()) else {
                continue;
            };
            if event.as_deref().is_some_and(|kind| kind != "message") {
                continue;
            }
            match Envelope::read(&data) {
                Ok(message) => {
                    if self.deliver(&data, &message, request).await {
                        end.answered = true;
                        break;
                    }
                }
                Err(e) => log(format_args!("skipped an event that is {e}")),
            }
        }
        end
    }

    /// Writes `message`; true if it answers `request`, after learning what the transport needs
    /// from that answer.
    async fn deliver(&self, text: &str, message: &Envelope<'_>, request: Option<&Request>) -> bool {
        let answered = request.filter(|request| message.answers(request));
        if let Some(request) = answered {
            self.learn(request, message);
        }
        // The writer has stopped only if stdout is gone, and then nobody is listening.
        let _ = self.out.send(one_line(text)).await;
        answered.is_some()
    }

    fn learn(&self, request: &Request, answer: &Envelope<'_>) {
        let Some(result) = answer.result else {
            return;
        };
        match request.method.as_str() {
            "initialize" => {
                // Only the version is read: the rest may hold what a `Value` cannot.
                #[derive(serde::Deserialize)]
                struct Initialized {
                    #[serde(rename = "protocolVersion")]
                    protocol_version: Option<String>,
                }
                let version = serde_json::from_str::<Initialized>(result.get())
                    .ok()
                    .and_then(|i| i.protocol_version);
                self.state().version = version;
            }
            "tools/list" => {
                let Ok(result) = serde_json::from_str::<Value>(result.get()) else {
                    return;
                };
                let mut state = self.state();
                for (name, params) in headers::listed_param_headers(&result) {
                    if params.is_empty() {
                        state.annotated_tools.remove(&name);
                    } else {
                        state.annotated_tools.insert(name, params);
                    }
                }
            }
            _ => {}
        }
    }

    /// Answers `request` (if it is one) with a JSON-RPC error, and says why on stderr.
    async fn fail(&self, request: Option<&Request>, method: &str, why: &str) {
        match request {
            Some(request) => {
                log(format_args!("{} failed: {why}", request.method));
                self.write(&error_response(request.id.clone(), GATEWAY_ERROR, why))
                    .await;
            }
            None if method.is_empty() => log(why),
            None => log(format_args!("could not deliver {method}: {why}")),
        }
    }

    fn transport_error(&self, e: &reqwest::Error) -> String {
        if let Some(refusal) = owner::refusal_in(e) {
            // Stop reading the agent's requests: each would only be refused again.
            if !self.refused.swap(true, Ordering::SeqCst) {
                self.stop.notify_one();
            }
            refusal.to_string()
        } else if e.is_connect() {
            discovery::not_running_at(&self.base)
        } else {
            format!(
                "the connection to Countersign's gateway failed: {}",
                chain(e)
            )
        }
    }

    async fn http_error(&self, request: Option<&Request>, method: &str, response: Response) {
        let status = response.status();
        // An error's words are short; whatever answers with an endless or stalled one gets
        // the start of it read, never all.
        let body = tokio::time::timeout(
            ERROR_BODY_WAIT,
            countersign_core::mcp::read_prefix(response.bytes_stream(), MAX_ERROR_BODY),
        )
        .await
        .unwrap_or_default();
        let json = serde_json::from_str::<Value>(&body).ok();
        // rmcp's own refusals (a header or version it will not take) are JSON-RPC errors that
        // answer the request: the most precise answer there is, so it goes through as it is.
        if let (Some(request), Some(json)) = (request, &json)
            && answers(json, request)
        {
            log(format_args!(
                "{} refused ({status}): {}",
                request.method,
                snippet(&body)
            ));
            return self.write(json).await;
        }
        let detail = json
            .as_ref()
            .and_then(|j| j.pointer("/error/message"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| snippet(&body));
        let has_session = self.state().session.is_some();
        let why = match status {
            StatusCode::UNAUTHORIZED => format!(
                "Countersign refused the token (401): it may have been revoked; see Countersign's \
                 Connect agents page (token from {})",
                self.token_from
            ),
            StatusCode::FORBIDDEN => {
                format!(
                    "Countersign refused the request ({}): {detail}",
                    status.as_u16()
                )
            }
            StatusCode::NOT_FOUND if has_session => format!(
                "Countersign no longer knows this session (404; the app may have restarted): \
                 restart the agent's connection to {:?}",
                self.server
            ),
            StatusCode::NOT_FOUND => format!(
                "Countersign has no server named {:?} (404): check the name in the agent's \
                 config against the servers in Countersign",
                self.server
            ),
            _ if status.is_redirection() => format!(
                "Countersign's gateway answered with a redirect ({}), which the bridge does not \
                 follow: the gateway never redirects, so something else may be answering at {}",
                status.as_u16(),
                self.base
            ),
            _ if status.is_server_error() => {
                format!(
                    "Countersign's gateway failed ({}): {detail}",
                    status.as_u16()
                )
            }
            _ => format!(
                "Countersign's gateway answered {}: {detail}",
                status.as_u16()
            ),
        };
        self.fail(request, method, &why).await;
    }

    /// Opens the GET stream on which a legacy session's server sends what it sends unasked
    /// (elicitation outside a call, list-changed notifications), once the handshake is done.
    fn open_listener(self: &Arc<Self>) {
        let mut state = self.state();
        if state.session.is_none() || state.listener.is_some() {
            return;
        }
        let this = Arc::clone(self);
        state.listener = Some(tokio::spawn(async move { this.listen().await }).abort_handle());
    }

    async fn listen(self: &Arc<Self>) {
        let mut last_event_id: Option<String> = None;
        let mut delay = Duration::from_secs(1);
        let mut failures = 0u32;
        loop {
            let mut headers = self.session_headers(EVENT_STREAM);
            if let Some(id) = &last_event_id {
                insert(&mut headers, LAST_EVENT_ID_HEADER, id);
            }
            let held = self.state().session.clone();
            let failure = match self
                .http
                .get(self.endpoint.clone())
                .headers(headers)
                .send()
                .await
            {
                Ok(response) if response.status().is_success() && is_event_stream(&response) => {
                    failures = 0;
                    let end = self.relay_events(response, None).await;
                    last_event_id = end.last_event_id.or(last_event_id);
                    delay = end.retry.unwrap_or(Duration::from_secs(1));
                    None
                }
                // The gateway sends nothing unasked: nothing to listen for.
                Ok(response) if response.status() == StatusCode::METHOD_NOT_ALLOWED => return,
                // The session is gone (Countersign restarted): a new one, which listens anew,
                // so an agent that only waits for what the server sends hears it again.
                Ok(response)
                    if response.status() == StatusCode::NOT_FOUND
                        && let Some(held) = held.as_deref()
                        && self.renew_session(held).await =>
                {
                    return;
                }
                Ok(response) if response.status().is_client_error() => {
                    log(format_args!(
                        "the gateway refused the stream for server messages ({})",
                        response.status()
                    ));
                    return;
                }
                Ok(response) => Some(format!("the gateway answered {}", response.status())),
                Err(e) => Some(self.transport_error(&e)),
            };
            if self.is_refused() {
                return;
            }
            if let Some(why) = failure {
                failures += 1;
                // Once per outage: the app may be gone for a while, and stderr is a log.
                if failures == 1 {
                    log(format_args!(
                        "the stream for server messages failed ({why}); retrying"
                    ));
                }
                delay = (delay * 2).min(Duration::from_secs(30));
            }
            tokio::time::sleep(delay).await;
        }
    }

    /// Opens a new session in place of `gone`, which the gateway answered it no longer knows:
    /// the agent's own `initialize` again, its answer kept from the agent (which has had one),
    /// then `notifications/initialized`, and the stream for server messages again. True when
    /// there is a session other than `gone` to send on (opened now, or by another request
    /// meanwhile).
    async fn renew_session(self: &Arc<Self>, gone: &str) -> bool {
        let _renewing = self.renewing.lock().await;
        let initialize = {
            let state = self.state();
            match state.session.as_deref() {
                Some(session) if session != gone => return true,
                None => return false,
                Some(_) => {}
            }
            let Some(initialize) = state.initialize.clone() else {
                return false;
            };
            initialize
        };
        let mut headers = self.base_headers("application/json, text/event-stream");
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let opened = async {
            let response = self
                .http
                .post(self.endpoint.clone())
                .headers(headers)
                .body(initialize)
                .send()
                .await
                .map_err(|e| self.transport_error(&e))?;
            if !response.status().is_success() {
                return Err(format!("the gateway answered {}", response.status()));
            }
            let session = response
                .headers()
                .get(&SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .ok_or("the gateway's answer named no session")?;
            // Its answer is the agent's no more (it has had one): read, to see it is one, and
            // for the version it names (an updated app may name another).
            let length = response.content_length();
            let body =
                countersign_core::mcp::read_bounded(response.bytes_stream(), length, MAX_ANSWER)
                    .await
                    .map_err(|e| chain(&e))?;
            let version = initialized_version(&String::from_utf8_lossy(&body))
                .ok_or("the gateway did not accept the agent's initialize again")?;
            Ok((session, version))
        };
        let (session, version) = match tokio::time::timeout(RENEW_WAIT, opened).await {
            Ok(Ok(opened)) => opened,
            Ok(Err(why)) => {
                log(format_args!("cannot open a new session: {why}"));
                return false;
            }
            Err(_) => {
                log("cannot open a new session: the gateway did not answer in time");
                return false;
            }
        };
        // Set up before anything else is sent on it.
        let initialized =
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let mut headers = self.base_headers("application/json, text/event-stream");
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        insert(&mut headers, SESSION_HEADER, &session);
        insert(&mut headers, VERSION_HEADER, &version);
        let sent = self
            .http
            .post(self.endpoint.clone())
            .timeout(NOT_A_REQUEST_WAIT)
            .headers(headers)
            .body(initialized.to_string())
            .send()
            .await;
        if let Err(e) = sent {
            log(format_args!(
                "the new session's notifications/initialized: {}",
                self.transport_error(&e)
            ));
        }
        let listener = {
            let mut state = self.state();
            // The agent opened a session of its own meanwhile (its own `initialize`): that one
            // is the agent's, and the one opened here is left to end quiet.
            if state.session.as_deref() != Some(gone) {
                return state.session.is_some();
            }
            state.session = Some(session);
            state.version = Some(version);
            state.listener.take()
        };
        if let Some(listener) = listener {
            listener.abort();
        }
        self.open_listener();
        log(
            "the gateway no longer knew the session (Countersign may have restarted): opened a new one",
        );
        true
    }

    /// Ends a legacy session (DELETE), so the gateway drops its upstream session at once.
    async fn end_session(&self) {
        let listener = self.state().listener.take();
        if let Some(listener) = listener {
            listener.abort();
        }
        if self.state().session.is_none() {
            return;
        }
        let headers = self.session_headers("application/json, text/event-stream");
        let delete = self
            .http
            .delete(self.endpoint.clone())
            .headers(headers)
            .send();
        match tokio::time::timeout(DELETE_TIMEOUT, delete).await {
            Ok(Ok(response))
                if response.status().is_success()
                    || response.status() == StatusCode::METHOD_NOT_ALLOWED => {}
            Ok(Ok(response)) => log(format_args!(
                "ending the session: the gateway answered {}",
                response.status()
            )),
            Ok(Err(e)) => log(format_args!(
                "ending the session: {}",
                self.transport_error(&e)
            )),
            Err(_) => log("ending the session: the gateway did not answer in time"),
        }
    }
}

/// Resolves when the bridge is told to stop (SIGTERM, or Ctrl-C): agents often end a server
/// that way instead of closing its stdin, and the session should still be ended.
async fn terminated() {
    let interrupted = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                () = interrupted => {}
            }
            return;
        }
    }
    interrupted.await;
}

/// The line without its line ending; `None` for a blank line, `Err` if it is not UTF-8.
fn line_text(buf: &[u8]) -> Option<Result<&str, String>> {
    match std::str::from_utf8(buf) {
        Ok(text) => Some(Ok(text.trim())).filter(|t| t != &Ok("")),
        Err(e) => Some(Err(format!("not UTF-8: {e}"))),
    }
}

/// `{base}/mcp/{server}`, the name encoded exactly as the gateway encodes it for its routes
/// (`connect::server_path` in core: form encoding with `%20` for spaces), because routes are
/// matched on the raw path and two valid encodings of one name would not match.
fn endpoint(base: &Url, server: &str) -> Result<Url, String> {
    let segment = url::form_urlencoded::byte_serialize(server.as_bytes())
        .collect::<String>()
        .replace('+', "%20");
    let text = format!("{}/mcp/{segment}", base.as_str().trim_end_matches('/'));
    Url::parse(&text).map_err(|e| format!("cannot make the server's address {text}: {e}"))
}

fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with(EVENT_STREAM))
}

fn insert(headers: &mut HeaderMap, name: HeaderName, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        headers.insert(name, value);
    }
}

/// An error and its causes on one line (reqwest's own text leaves out the interesting part).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The protocol version an `initialize` answer names, in a JSON body or an SSE stream's event;
/// `None` when it is not one.
fn initialized_version(body: &str) -> Option<String> {
    let version = |text: &str| {
        serde_json::from_str::<Value>(text)
            .ok()?
            .pointer("/result/protocolVersion")?
            .as_str()
            .map(str::to_owned)
    };
    version(body).or_else(|| {
        body.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .find_map(|data| version(data.trim()))
    })
}

/// How long opening a new session in place of a forgotten one may take.
const RENEW_WAIT: Duration = Duration::from_secs(30);

/// At most this much of an error's body is read, for so long.
const MAX_ERROR_BODY: usize = 64 * 1024;
const ERROR_BODY_WAIT: Duration = Duration::from_secs(10);

/// The start of a body for stderr, on one line, with control characters (a terminal's escape
/// sequences) written as their code, since the host shows or logs what the bridge writes there.
fn snippet(body: &str) -> String {
    let flat = body
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .flat_map(|c| match c.is_control() {
            true => c.escape_unicode().collect::<Vec<_>>(),
            false => vec![c],
        })
        .collect::<String>();
    match flat.char_indices().nth(200) {
        Some((cut, _)) => format!("{}...", &flat[..cut]),
        None if flat.is_empty() => "(no details)".to_owned(),
        None => flat,
    }
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {

    use serde_json::json;

    use super::*;

    #[test]
    fn requests_are_told_from_notifications_and_responses() {
        let request = request_of(&json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
        assert_eq!(
            request.map(|r| (r.id, r.method)),
            Some((json!(7), "ping".into()))
        );
        assert!(
            request_of(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).is_none()
        );
        assert!(request_of(&json!({"jsonrpc": "2.0", "id": 7, "result": {}})).is_none());
    }

    #[test]
    fn only_an_object_with_jsonrpc_is_a_message_from_the_gateway() {
        let request = Request {
            id: json!(1),
            method: "ping".into(),
        };
        let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"big":1e400}}"#;
        assert!(Envelope::read(answer).unwrap().answers(&request));
        for not_one in [
            r#"["2.0"]"#,
            r#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#,
            r#"{"id":1,"result":{}}"#,
            "7",
            "{",
        ] {
            assert!(Envelope::read(not_one).is_err(), "{not_one}");
        }
        assert_eq!(one_line("{\"a\":\r\n 1}\n"), "{\"a\":   1}");
    }

    #[test]
    fn an_answer_matches_its_request_by_id() {
        let request = Request {
            id: json!("a"),
            method: "tools/list".into(),
        };
        assert!(answers(
            &json!({"jsonrpc": "2.0", "id": "a", "result": {}}),
            &request
        ));
        assert!(answers(
            &json!({"jsonrpc": "2.0", "id": "a", "error": {}}),
            &request
        ));
        assert!(!answers(
            &json!({"jsonrpc": "2.0", "id": "b", "result": {}}),
            &request
        ));
        // A server's own request that happens to reuse the id is not the answer.
        assert!(!answers(
            &json!({"jsonrpc": "2.0", "id": "a", "method": "elicitation/create"}),
            &request
        ));
    }

    #[test]
    fn a_line_a_value_cannot_hold_is_still_read_for_what_the_transport_needs() {
        let text = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"count",
            "arguments":{"n":1e400,"s":"\ud800"},
            "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert!(serde_json::from_str::<Value>(text).is_err());
        let message = read_message(text).unwrap();
        let request = request_of(&message).unwrap();
        assert_eq!(
            (request.id, request.method.as_str()),
            (json!(7), "tools/call")
        );
        assert_eq!(message["params"]["name"], "count");
        assert_eq!(headers::inline_version(&message), Some("2026-07-28"));
        // Not JSON, or not a message object: refused as before.
        assert!(read_message(r#"{"id": 1e400"#).is_err());
        assert!(read_message("[1e400]").is_err());
    }

    #[test]
    fn blank_lines_are_skipped_and_bad_bytes_reported() {
        assert_eq!(line_text(b"  \r\n"), None);
        assert_eq!(line_text(b"{}\r\n"), Some(Ok("{}")));
        assert!(matches!(line_text(b"\xff\n"), Some(Err(_))));
    }

    #[test]
    fn the_server_name_is_one_path_segment() {
        let base = Url::parse("http://127.0.0.1:47717").expect("url");
        let url = |name| endpoint(&base, name).expect("endpoint").to_string();
        assert_eq!(url("demo"), "http://127.0.0.1:47717/mcp/demo");
        assert_eq!(
            url("my server/x~"),
            "http://127.0.0.1:47717/mcp/my%20server%2Fx%7E"
        );
        let prefixed = Url::parse("http://127.0.0.1:1/prefix/").expect("url");
        assert_eq!(
            endpoint(&prefixed, "a").expect("endpoint").as_str(),
            "http://127.0.0.1:1/prefix/mcp/a"
        );
    }

    #[test]
    fn an_initialize_answer_is_read_for_its_version_in_json_and_in_an_event() {
        let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}"#;
        assert_eq!(initialized_version(answer).as_deref(), Some("2025-11-25"));
        let event = format!("id: 0\ndata:\n\nevent: message\ndata: {answer}\n\n");
        assert_eq!(initialized_version(&event).as_deref(), Some("2025-11-25"));
        assert_eq!(
            initialized_version(r#"{"jsonrpc":"2.0","id":1,"error":{}}"#),
            None
        );
    }

    #[test]
    fn snippets_are_short_and_flat() {
        assert_eq!(snippet("Not\n Found"), "Not Found");
        assert_eq!(snippet(""), "(no details)");
        assert!(snippet(&"x ".repeat(500)).len() < 210);
        assert_eq!(snippet("\x1b[2Jgone"), "\\u{1b}[2Jgone");
    }
}
