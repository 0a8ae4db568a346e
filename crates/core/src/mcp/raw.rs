//! Server requests exactly as they arrived on the wire.
//!
//! rmcp parses `elicitation/create` into its typed schema model, which silently drops keywords
//! it does not know (`pattern`, integer `enum`, ...). A schema with such a keyword is outside
//! the supported subset and must be refused with the reason, and an answer must be validated
//! against what the server really asked. So the bytes are read beside rmcp: on stdio from the
//! child's stdout, on Streamable HTTP from the SSE events, and kept by request id until the
//! handler takes them. Gateway sessions also keep the raw results of their own requests, so
//! what rmcp cannot model still reaches the agent (`gateway::faithful`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::StreamExt;

use crate::mcp::needle::finder;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, NumberOrString, RequestId};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, ReadBuf};

use super::direct::{Answer, Claim, Direct, PostedWith};
use super::http_post::Post;
use crate::lock;

/// Requests kept before the oldest is forgotten: the handler takes each at once, so only
/// requests rmcp never hands over (malformed, duplicated) can pile up.
const KEEP: usize = 256;
/// Bytes of kept values (counted as the size of the message each came in) per
/// `RawRequests`; past it the oldest are forgotten, so a server sending answers nobody
/// asked for cannot make us hold more.
const KEEP_BYTES: usize = 16 * 1024 * 1024;
/// The longest request id of a server's whose origin is kept (`note_origin`).
const MAX_ORIGIN_ID: usize = 256;
/// A line longer than this is not scanned: rmcp drops a line past the same length
/// (`DEFAULT_MAX_LINE_LENGTH`), so every line it reads is seen here whole.
const MAX_LINE: usize = 16 * 1024 * 1024;
const METHOD: &[u8] = b"elicitation/create";
const RESULT: &[u8] = b"\"result\"";
const INPUT_REQUESTS: &[u8] = b"inputRequests";
/// In results about tasks (2025-11-25): a created task, `tasks/get`, and `tasks/result`'s
/// related-task mark.
const TASK_ID: &[u8] = b"taskId";
/// In a `tools/list` result whose tools say how they run as tasks.
const TASK_SUPPORT: &[u8] = b"taskSupport";
/// Tool names remembered as needing task execution, per session, at most.
const MAX_TASK_TOOLS: usize = 1024;
/// The server's requests a handler looks up the origin of (see [`RawRequests::origin_of`]).
const ATTRIBUTED: [&str; 3] = ["elicitation/create", "sampling/createMessage", "roots/list"];

/// Raw params of `elicitation/create` requests, by request id; for gateway sessions also
/// the raw results of responses, so a forwarded result keeps what rmcp cannot model.
#[derive(Default)]
pub struct RawRequests {
    inner: Kept,
    results: Option<Kept>,
    /// Keep only results that ask for input (`inputRequests`) or are about tasks.
    only_input: bool,
    /// Tools the server listed with `execution.taskSupport: "required"`; rmcp's typed `Tool`
    /// drops `execution`, so it is read here.
    task_tools: Mutex<HashSet<String>>,
    /// The server's `capabilities.tasks` (2025-11-25) from its handshake, which rmcp's typed
    /// capabilities drop; the gateway offers it to agents.
    server_tasks: Mutex<Option<Value>>,
    /// Where results are kept: the server's requests that came on the response stream of one
    /// of our requests, as (the server's request id, ours), oldest first. The 2025 wire says
    /// nothing else of which call a server's request belongs to.
    origins: Option<Mutex<VecDeque<(RequestId, RequestId)>>>,
    /// The gateway's own requests on a stdio server's wire, and their answers.
    pub(crate) direct: Direct,
}

impl RawRequests {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Also keeps every response's raw `result` until [`Self::take_result`].
    pub fn with_results() -> Arc<Self> {
        Arc::new(RawRequests {
            results: Some(Kept::default()),
            origins: Some(Mutex::default()),
            ..Default::default()
        })
    }

    /// Also keeps the raw `result` of responses that ask for input (multi round-trip
    /// requests), so their questions are judged as sent, and of those about tasks, which
    /// rmcp models only in their 2026 form.
    pub fn with_input_results() -> Arc<Self> {
        Arc::new(RawRequests {
            results: Some(Kept::default()),
            only_input: true,
            origins: Some(Mutex::default()),
            ..Default::default()
        })
    }

    /// Looks at one JSON-RPC message (or a batch) as text; keeps elicitation params, and
    /// results when asked to. What is kept stays bytes (`RawValue`): a result is usually
    /// handed on whole, so building a tree of it was wasted work on every forwarded call.
    pub fn observe(&self, text: &[u8]) {
        let holds = |finder: &memchr::memmem::Finder| finder.find(text).is_some();
        let listed_tasks = self.results.is_some() && holds(finder!(TASK_SUPPORT));
        let results_wanted = listed_tasks
            || (self.results.is_some()
                && holds(finder!(RESULT))
                && (!self.only_input || holds(finder!(INPUT_REQUESTS)) || holds(finder!(TASK_ID))));
        // The method may be spelled with escapes (`elicitation\/create`, `\u0065...`): such a
        // message is read too (its top level only), or rmcp's typed model, which drops what it
        // does not know, would be all that was judged.
        let maybe_elicitation =
            holds(finder!(METHOD)) || holds(finder!(b"\\u")) || holds(finder!(b"\\/"));
        if !(results_wanted || maybe_elicitation) {
            return;
        }
        let size = text.len();
        if text.trim_ascii_start().starts_with(b"[") {
            let Ok(batch) = serde_json::from_slice::<Vec<&RawValue>>(text) else {
                return;
            };
            for message in batch {
                if let Ok(seen) = serde_json::from_str::<Seen>(message.get()) {
                    self.keep(seen, size, results_wanted);
                }
            }
        } else if let Ok(seen) = serde_json::from_slice::<Seen>(text) {
            self.keep(seen, size, results_wanted);
        }
    }

    /// Keeps what `message` holds that is wanted: its elicitation's params, and its result
    /// when `results_wanted` (a message read only for a possible elicitation keeps no result).
    fn keep(&self, message: Seen, size: usize, results_wanted: bool) {
        let Some(id) = message.id.as_ref().and_then(request_id) else {
            return;
        };
        if let Some(results) = &self.results
            && let Some(result) = message.result
        {
            if !results_wanted {
                return;
            }
            // A tree, read once, only for the results that need one read: listings and
            // handshakes, and for sessions keeping only some results, whether this is one.
            let value = match self.note(&result) {
                Some(value) => Some(value),
                None if self.only_input => tree(&result),
                None => None,
            };
            let wanted = !self.only_input
                || value.is_some_and(|r| r.get("inputRequests").is_some() || about_task(&r));
            if wanted {
                remember(results, id, result, size);
            }
            return;
        }
        if message.method.as_deref() != Some("elicitation/create") {
            return;
        }
        let params = message.params.unwrap_or_else(null);
        remember(&self.inner, id, params, size);
    }

    /// How many results are kept, waiting to be taken.
    #[cfg(test)]
    pub(crate) fn results_kept(&self) -> usize {
        self.results.as_ref().map_or(0, |kept| {
            kept.0.lock().unwrap_or_else(|e| e.into_inner()).map.len()
        })
    }

    /// Notes what a result says that rmcp's types drop: the tools a listing says must run as
    /// tasks, and a handshake's task capability. Also for answers that were not kept (the
    /// gateway's own, `direct`). Returns the tree it read, if it read one.
    pub(crate) fn note(&self, result: &RawValue) -> Option<Value> {
        let bytes = result.get().as_bytes();
        if !may_hold(bytes, finder!(b"\"tools\""))
            && !may_hold(bytes, finder!(b"\"protocolVersion\""))
        {
            return None;
        }
        let value = tree(result)?;
        self.note_task_tools(&value);
        self.note_server_tasks(&value);
        Some(value)
    }

    /// Remembers the tools a `tools/list` result says must run as tasks.
    fn note_task_tools(&self, result: &Value) {
        let Some(tools) = result.get("tools").and_then(Value::as_array) else {
            return;
        };
        let mut known = self.task_tools.lock().unwrap_or_else(|e| e.into_inner());
        for tool in tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            let support = tool
                .pointer("/execution/taskSupport")
                .and_then(Value::as_str);
            if support == Some("required") {
                if known.len() < MAX_TASK_TOOLS {
                    known.insert(name.to_owned());
                }
            } else {
                known.remove(name);
            }
        }
    }

    /// Remembers what an `initialize` result says of the server's tasks.
    fn note_server_tasks(&self, result: &Value) {
        if result.get("protocolVersion").is_none() {
            return;
        }
        if let Some(tasks) = result
            .pointer("/capabilities/tasks")
            .filter(|t| t.is_object())
        {
            *self.server_tasks.lock().unwrap_or_else(|e| e.into_inner()) = Some(tasks.clone());
        }
    }

    /// The server's `capabilities.tasks` as it declared them in its handshake (read only
    /// where results are kept, and not from a plain-JSON HTTP answer, which rmcp alone sees).
    pub fn server_tasks(&self) -> Option<Value> {
        self.server_tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether the server listed `tool` as one that must run as a task.
    pub fn requires_task(&self, tool: &str) -> bool {
        self.task_tools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(tool)
    }

    /// The params of request `id` as received, once.
    pub fn take(&self, id: &RequestId) -> Option<Value> {
        tree(&take(&self.inner, id)?)
    }

    /// The raw result of the response to our request `id`, once.
    pub fn take_result(&self, id: &RequestId) -> Option<Value> {
        tree(&self.take_result_bytes(id)?)
    }

    /// The same, as the bytes it came in: for handing on whole.
    pub fn take_result_bytes(&self, id: &RequestId) -> Option<Box<RawValue>> {
        take(self.results.as_ref()?, id)
    }

    /// Notes that `event`, if it is one of the server's requests a handler takes, came on the
    /// response stream of our request `origin`: it belongs to that request.
    pub(crate) fn note_origin(&self, event: &[u8], origin: &RequestId) {
        let Some(origins) = &self.origins else {
            return;
        };
        use crate::mcp::needle::{finders, holds_any};
        if !holds_any(event, finders!(ATTRIBUTED)) {
            return;
        }
        #[derive(serde::Deserialize)]
        struct Request<'a> {
            id: RequestId,
            #[serde(borrow)]
            method: std::borrow::Cow<'a, str>,
        }
        let Ok(request) = serde_json::from_slice::<Request>(event) else {
            return;
        };
        if !ATTRIBUTED.contains(&request.method.as_ref()) {
            return;
        }
        // Kept by count, so kept small: an id of megabytes is no id a server needs, and one
        // rmcp never sees (no `jsonrpc`, say) would never be taken.
        let id_len = match &request.id {
            NumberOrString::Number(_) => 0,
            NumberOrString::String(s) => s.len(),
        };
        if id_len > MAX_ORIGIN_ID {
            return;
        }
        let mut origins = lock(origins);
        origins.retain(|(asked, _)| *asked != request.id);
        if origins.len() >= KEEP {
            origins.pop_front();
        }
        origins.push_back((request.id, origin.clone()));
    }

    /// Which of our requests the server's request `asked` came in answer to, when it came on
    /// that request's response stream (Streamable HTTP); once.
    pub fn origin_of(&self, asked: &RequestId) -> Option<RequestId> {
        let mut origins = lock(self.origins.as_ref()?);
        let at = origins.iter().position(|(id, _)| id == asked)?;
        origins.remove(at).map(|(_, origin)| origin)
    }
}

/// Values (with their sizes) by request id, the order they came in (the oldest is
/// forgotten first), and their total size.
#[derive(Default)]
struct Kept(Mutex<KeptValues>);

#[derive(Default)]
struct KeptValues {
    map: HashMap<RequestId, (Box<RawValue>, usize)>,
    order: VecDeque<RequestId>,
    bytes: usize,
}

fn request_id(id: &Value) -> Option<RequestId> {
    match id {
        Value::Number(n) => n.as_i64().map(NumberOrString::Number),
        Value::String(s) => Some(NumberOrString::String(s.as_str().into())),
        _ => None,
    }
}

fn remember(kept: &Kept, id: RequestId, value: Box<RawValue>, size: usize) {
    let mut kept = kept.0.lock().unwrap_or_else(|e| e.into_inner());
    match kept.map.insert(id.clone(), (value, size)) {
        Some((_, old)) => kept.bytes -= old,
        None => kept.order.push_back(id),
    }
    kept.bytes += size;
    while kept.order.len() > KEEP || (kept.bytes > KEEP_BYTES && kept.order.len() > 1) {
        let Some(old) = kept.order.pop_front() else {
            break;
        };
        if let Some((_, size)) = kept.map.remove(&old) {
            kept.bytes -= size;
        }
    }
}

fn take(kept: &Kept, id: &RequestId) -> Option<Box<RawValue>> {
    let mut kept = kept.0.lock().unwrap_or_else(|e| e.into_inner());
    let (value, size) = kept.map.remove(id)?;
    kept.bytes -= size;
    kept.order.retain(|o| o != id);
    Some(value)
}

/// A result about a task: one created, one's status, or one's result (marked related).
fn about_task(result: &Value) -> bool {
    result
        .get("task")
        .is_some_and(|t| t.get("taskId").is_some())
        || result.get("taskId").is_some()
        || result
            .pointer("/_meta/io.modelcontextprotocol~1related-task")
            .is_some()
}

/// Whether JSON text may hold `key` (quoted): it does, or something in it is written with a
/// `\u` escape, which could spell the key another way.
fn may_hold(json: &[u8], key: &memchr::memmem::Finder) -> bool {
    key.find(json).is_some() || finder!(b"\\u").find(json).is_some()
}

/// What is read of a server's message when something in it is kept: the rest stays bytes.
#[derive(serde::Deserialize)]
struct Seen<'a> {
    id: Option<Value>,
    #[serde(borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
    params: Option<Box<RawValue>>,
    result: Option<Box<RawValue>>,
}

fn null() -> Box<RawValue> {
    RawValue::from_string("null".to_owned()).expect("null is JSON")
}

/// Kept bytes read as a tree, for the few that are looked into.
pub(crate) fn tree(raw: &RawValue) -> Option<Value> {
    serde_json::from_str(raw.get()).ok()
}

/// Passes a child's stdout on to rmcp a whole line at a time, showing each line to
/// [`RawRequests`]; a line answering one of the gateway's own requests (`direct`) goes to that
/// request instead, once rmcp has read every line before it.
pub struct TapRead<R> {
    inner: R,
    raw: Arc<RawRequests>,
    line: Vec<u8>,
    overlong: bool,
    /// What has been read and not yet handed on, in the order it came.
    ready: VecDeque<Ready>,
    scratch: Box<[u8]>,
}

enum Ready {
    /// Lines for rmcp, and how much of them it has taken.
    Lines(Vec<u8>, usize),
    /// An answer to a request of ours.
    Answer(Option<tokio::sync::oneshot::Sender<Answer>>, Answer),
    /// Progress for a request of ours, as the server wrote it (`Direct::take_progress`).
    Progress(Vec<u8>),
    /// A server's question that belongs to a request of ours (`Direct::question`); rare, so
    /// boxed rather than widening every line's entry.
    Question(Box<(RequestId, rmcp::model::ServerRequest)>),
}

/// Bytes read from the child at a time.
const SCRATCH: usize = 8 * 1024;

impl<R> TapRead<R> {
    pub fn new(inner: R, raw: Arc<RawRequests>) -> Self {
        TapRead {
            inner,
            raw,
            line: Vec::new(),
            overlong: false,
            ready: VecDeque::new(),
            scratch: vec![0; SCRATCH].into_boxed_slice(),
        }
    }

    fn scan(&mut self, bytes: &[u8]) {
        let mut start = 0;
        let ends = memchr::memchr_iter(b'\n', bytes).map(|i| i + 1);
        for end in ends.chain(std::iter::once(bytes.len())) {
            if end == start {
                continue;
            }
            let chunk = &bytes[start..end];
            start = end;
            let complete = chunk.last() == Some(&b'\n');
            if !self.overlong && self.line.len() + chunk.len() > MAX_LINE {
                // Too long to be read here: it goes on to rmcp as it comes (which drops it).
                self.overlong = true;
                let held = std::mem::take(&mut self.line);
                self.pass(&held);
            }
            if self.overlong {
                self.pass(chunk);
            } else {
                self.line.extend_from_slice(chunk);
            }
            if complete {
                if !self.overlong {
                    let line = std::mem::take(&mut self.line);
                    match self.raw.direct.claim(&line) {
                        Claim::Ours(to, answer) => self.ready.push_back(Ready::Answer(to, answer)),
                        Claim::Progress => self.ready.push_back(Ready::Progress(line)),
                        Claim::Not => {
                            // Its params as sent are kept for whoever answers it.
                            self.raw.observe(&line);
                            match self.raw.direct.question(&line) {
                                Some(question) => {
                                    self.ready.push_back(Ready::Question(Box::new(question)))
                                }
                                None => self.pass(&line),
                            }
                        }
                    }
                }
                self.overlong = false;
            }
        }
    }

    fn pass(&mut self, bytes: &[u8]) {
        // Nothing handed on reads as the end to rmcp.
        if bytes.is_empty() {
            return;
        }
        match self.ready.back_mut() {
            Some(Ready::Lines(lines, _)) => lines.extend_from_slice(bytes),
            _ => self.ready.push_back(Ready::Lines(bytes.to_vec(), 0)),
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for TapRead<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            // rmcp's reader asks for more only once it has used up what it was given, so an
            // answer or a question at the front comes after everything before it has reached
            // rmcp, and before anything after it does.
            while let Some(Ready::Answer(..) | Ready::Progress(_) | Ready::Question(_)) =
                this.ready.front()
            {
                match this.ready.pop_front() {
                    Some(Ready::Answer(Some(to), answer)) => {
                        let _ = to.send(answer);
                    }
                    Some(Ready::Progress(line)) => {
                        this.raw.direct.progress(&line);
                    }
                    Some(Ready::Question(question)) => {
                        let (id, request) = *question;
                        this.raw.direct.ask(id, request)
                    }
                    _ => {}
                }
            }
            if let Some(Ready::Lines(lines, taken)) = this.ready.front_mut() {
                let n = buf.remaining().min(lines.len() - *taken);
                buf.put_slice(&lines[*taken..*taken + n]);
                *taken += n;
                if *taken == lines.len() {
                    this.ready.pop_front();
                }
                return Poll::Ready(Ok(()));
            }
            let mut scratch = std::mem::take(&mut this.scratch);
            let mut read = ReadBuf::new(&mut scratch);
            let polled = Pin::new(&mut this.inner).poll_read(cx, &mut read);
            let filled = read.filled().len();
            if let Poll::Ready(Ok(())) = polled
                && filled > 0
            {
                this.scan(&scratch[..filled]);
                this.scratch = scratch;
                continue;
            }
            this.scratch = scratch;
            // Pending, an error, or the end (a last line without its newline is dropped, as
            // rmcp would drop it). At the end no answer can come.
            if polled.is_ready() {
                this.raw.direct.end();
            }
            return polled;
        }
    }
}

/// A URI as rmcp gave it, and as reqwest reads it.
type ParsedUri = (Arc<str>, reqwest::Url);

/// The least and the most a server's SSE `retry:` may make rmcp wait before it opens a stream
/// again, in ms. rmcp waits exactly what the server says: a server that says `retry: 0` and
/// ends every stream has it reconnect as fast as the loopback goes, for ever; one that says a
/// day leaves the session deaf to it that long. The floor is below what servers ask for in
/// earnest (the conformance suite's `sse-retry` asks 500 ms, and a client MUST wait that).
const SSE_RETRY_MS: (u64, u64) = (250, 60_000);

/// rmcp's reqwest client for Streamable HTTP, showing every SSE event's data and every plain
/// JSON answer to [`RawRequests`]. Server-to-client requests only ever arrive on SSE streams.
#[derive(Clone)]
pub struct TapHttpClient {
    inner: reqwest::Client,
    raw: Arc<RawRequests>,
    last_uri: Arc<Mutex<Option<ParsedUri>>>,
}

impl TapHttpClient {
    pub fn new(inner: reqwest::Client, raw: Arc<RawRequests>) -> Self {
        TapHttpClient {
            inner,
            raw,
            last_uri: Arc::default(),
        }
    }

    /// Lets the gateway post its requests in this session itself (`direct::HttpWay`), with
    /// the credentials rmcp's session last posted with.
    pub fn with_direct_way(self) -> Self {
        self.raw.direct.http.enable();
        self
    }

    /// The session is signed in with `sign_in`, whose token the gateway's own posts carry.
    pub(crate) fn signed_in_by(self, sign_in: super::direct::SignIn) -> Self {
        self.raw.direct.http.sign_in_from(sign_in);
        self
    }

    /// rmcp's standalone stream, each event shown.
    fn standalone(
        &self,
        stream: futures::stream::BoxStream<'static, Result<sse_stream::Sse, SseError>>,
    ) -> futures::stream::BoxStream<'static, Result<sse_stream::Sse, SseError>> {
        self.tap_stream(stream, None)
    }

    /// `uri` parsed: rmcp hands the same URI over with every message of a session, and
    /// parsing it each time was a per-call cost (BENCHMARKS.md, "Gateway"). `None` if it does
    /// not parse (reqwest then reports why).
    fn parsed(&self, uri: &Arc<str>) -> Option<reqwest::Url> {
        let mut last = crate::lock(&self.last_uri);
        if let Some((known, url)) = last.as_ref()
            && **known == **uri
        {
            return Some(url.clone());
        }
        let url = reqwest::Url::parse(uri).ok()?;
        *last = Some((uri.clone(), url.clone()));
        Some(url)
    }

    /// `stream` as it was, each event shown to [`RawRequests`]; `origin` is our request whose
    /// response stream it is, if it is one.
    fn tap_stream(
        &self,
        stream: futures::stream::BoxStream<'static, Result<sse_stream::Sse, SseError>>,
        origin: Option<RequestId>,
    ) -> futures::stream::BoxStream<'static, Result<sse_stream::Sse, SseError>> {
        let raw = self.raw.clone();
        stream
            .filter_map(move |mut event| {
                if let Ok(event) = &mut event
                    && let Some(retry) = &mut event.retry
                {
                    *retry = (*retry).clamp(SSE_RETRY_MS.0, SSE_RETRY_MS.1);
                }
                if let Ok(event) = &event
                    && let Some(data) = &event.data
                {
                    // Progress goes to the agent as sent, where the gateway takes it.
                    if data.contains("notifications/progress")
                        && raw.direct.progress(data.as_bytes())
                    {
                        return futures::future::ready(None);
                    }
                    // An answer to a request the gateway posted itself (`direct::HttpWay`)
                    // that came on one of rmcp's streams is ours, not rmcp's.
                    if let Claim::Ours(to, answer) = raw.direct.claim(data.as_bytes()) {
                        if let Some(to) = to {
                            let _ = to.send(answer);
                        }
                        return futures::future::ready(None);
                    }
                    raw.observe(data.as_bytes());
                    if let Some(origin) = &origin {
                        raw.note_origin(data.as_bytes(), origin);
                    }
                }
                futures::future::ready(Some(event))
            })
            .boxed()
    }

    fn tap_response(
        &self,
        response: StreamableHttpPostResponse,
        origin: Option<RequestId>,
    ) -> StreamableHttpPostResponse {
        match response {
            StreamableHttpPostResponse::Sse(stream, session) => {
                StreamableHttpPostResponse::Sse(self.tap_stream(stream, origin), session)
            }
            other => other,
        }
    }
}

type Headers = HashMap<http::HeaderName, http::HeaderValue>;
type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;

/// reqwest names the URL in its errors, and a server's URL may hold its key (`?api_key=…`):
/// such an error reaches the agent, the person and the log without it (see `http_post`).
fn without_url(e: StreamableHttpError<reqwest::Error>) -> StreamableHttpError<reqwest::Error> {
    match e {
        StreamableHttpError::Client(e) => StreamableHttpError::Client(e.without_url()),
        other => other,
    }
}

impl StreamableHttpClient for TapHttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> HttpResult<StreamableHttpPostResponse> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    /// Our own POST (`http_post`), so a plain JSON answer is seen as sent, like SSE events.
    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let parsed = self.parsed(&uri);
        self.raw.direct.http.saw_post(|| PostedWith {
            http: self.inner.clone(),
            uri: uri.clone(),
            url: parsed.clone(),
            session_id: session_id.clone(),
            auth: auth_header.clone(),
            headers: custom_headers.clone(),
            limits,
        });
        let post = Post {
            http: &self.inner,
            raw: &self.raw,
            parsed,
            uri: &uri,
            session_id,
            auth_token: auth_header,
            custom_headers,
            limits,
        };
        let response = post.send(&message).await?;
        let origin = match &message {
            ClientJsonRpcMessage::Request(request) => {
                if matches!(
                    request.request,
                    ClientRequest::InitializeRequest(_) | ClientRequest::DiscoverRequest(_)
                ) {
                    self.raw.direct.http.saw_lifecycle(match &response {
                        StreamableHttpPostResponse::Json(_, session)
                        | StreamableHttpPostResponse::Sse(_, session) => session.as_deref(),
                        _ => None,
                    });
                }
                Some(request.id.clone())
            }
            _ => None,
        };
        Ok(self.tap_response(response, origin))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> HttpResult<()> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
            .map_err(without_url)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> HttpResult<futures::stream::BoxStream<'static, Result<sse_stream::Sse, SseError>>> {
        let stream = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
            .map_err(without_url)?;
        Ok(self.standalone(stream))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> HttpResult<futures::stream::BoxStream<'static, Result<sse_stream::Sse, SseError>>> {
        let stream = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
            .map_err(without_url)?;
        Ok(self.standalone(stream))
    }
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::AsyncReadExt;

    #[test]
    fn a_uri_is_parsed_once_and_another_uri_is_never_served_the_last_ones_url() {
        let client = TapHttpClient::new(reqwest::Client::new(), RawRequests::new());
        let first: Arc<str> = "http://127.0.0.1:7/mcp".into();
        let url = client.parsed(&first).unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:7/mcp");
        assert_eq!(client.parsed(&"http://127.0.0.1:7/mcp".into()), Some(url));
        let other: Arc<str> = "https://example.com/other".into();
        assert_eq!(
            client.parsed(&other).unwrap().as_str(),
            "https://example.com/other"
        );
        assert_eq!(client.parsed(&"not a url".into()), None);
        assert_eq!(
            client.parsed(&first).unwrap().as_str(),
            "http://127.0.0.1:7/mcp"
        );
    }

    #[test]
    fn keeps_only_elicitations_by_id_and_gives_each_once() {
        let raw = RawRequests::default();
        raw.observe(br#"{"jsonrpc":"2.0","id":0,"method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object","properties":{"n":{"type":"integer","enum":[1,2]}}}}}"#);
        raw.observe(br#"{"jsonrpc":"2.0","id":"x","method":"ping"}"#);
        raw.observe(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"elicitation/create"}}"#);
        let params = raw.take(&NumberOrString::Number(0)).unwrap();
        assert_eq!(
            params["requestedSchema"]["properties"]["n"]["enum"],
            json!([1, 2])
        );
        assert!(raw.take(&NumberOrString::Number(0)).is_none());
        assert!(raw.take(&NumberOrString::String("x".into())).is_none());
        // The method spelled with escapes is the same method: kept as sent, `pattern` too.
        for (id, method) in [(1, r"elicitation\/create"), (2, r"\u0065licitation/create")] {
            raw.observe(
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{"message":"m","requestedSchema":{{"type":"object","properties":{{"s":{{"type":"string","pattern":"^a"}}}}}}}}}}"#
                )
                .as_bytes(),
            );
            let params = raw.take(&NumberOrString::Number(id)).unwrap();
            assert_eq!(
                params["requestedSchema"]["properties"]["s"]["pattern"],
                "^a"
            );
        }
    }

    #[test]
    fn the_servers_task_capability_is_read_from_its_handshake_only() {
        let raw = RawRequests::with_results();
        raw.observe(br#"{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tasks":{"x":1}}}}"#);
        assert_eq!(raw.server_tasks(), None, "not a handshake");
        raw.observe(br#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"s","version":"1"}}}"#);
        assert_eq!(
            raw.server_tasks(),
            Some(json!({"cancel": {}, "requests": {"tools": {"call": {}}}}))
        );
    }

    #[test]
    fn a_servers_request_is_tied_to_the_request_whose_stream_carried_it_once_and_within_bounds() {
        let raw = RawRequests::with_results();
        let ours = NumberOrString::Number(7);
        let asked = |id: i64| NumberOrString::Number(id);
        raw.note_origin(
            br#"{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}"#,
            &ours,
        );
        raw.note_origin(br#"{"jsonrpc":"2.0","id":2,"method":"roots/list"}"#, &ours);
        // Not requests a handler takes: a result that mentions one, a notification, a ping.
        raw.note_origin(
            br#"{"jsonrpc":"2.0","id":3,"result":{"text":"elicitation/create"}}"#,
            &ours,
        );
        raw.note_origin(
            br#"{"jsonrpc":"2.0","method":"elicitation/create","params":{}}"#,
            &ours,
        );
        raw.note_origin(
            br#"{"jsonrpc":"2.0","id":4,"method":"ping","params":{"x":"roots/list"}}"#,
            &ours,
        );
        assert_eq!(raw.origin_of(&asked(1)), Some(ours.clone()));
        assert_eq!(raw.origin_of(&asked(1)), None, "once");
        assert_eq!(raw.origin_of(&asked(2)), Some(ours.clone()));
        for id in [3, 4] {
            assert_eq!(raw.origin_of(&asked(id)), None);
        }
        for i in 0..(KEEP as i64 + 10) {
            let event = format!(r#"{{"id":{i},"method":"elicitation/create","params":{{}}}}"#);
            raw.note_origin(event.as_bytes(), &ours);
        }
        assert_eq!(
            raw.origin_of(&asked(0)),
            None,
            "the oldest went past the bound"
        );
        assert_eq!(raw.origin_of(&asked(KEEP as i64 + 9)), Some(ours.clone()));
        // Kept by count, so an id of megabytes is not kept at all (`KEEP` of them would be
        // gigabytes); one of an ordinary length is.
        let long = "x".repeat(MAX_ORIGIN_ID + 1);
        let event = format!(r#"{{"jsonrpc":"2.0","id":"{long}","method":"roots/list"}}"#);
        raw.note_origin(event.as_bytes(), &ours);
        assert_eq!(raw.origin_of(&NumberOrString::String(long.into())), None);
        let fine = "y".repeat(MAX_ORIGIN_ID);
        let event = format!(r#"{{"jsonrpc":"2.0","id":"{fine}","method":"roots/list"}}"#);
        raw.note_origin(event.as_bytes(), &ours);
        assert_eq!(
            raw.origin_of(&NumberOrString::String(fine.into())),
            Some(ours.clone())
        );
        // Nor does a reader that keeps no results (the sign-in's).
        let bare = RawRequests::new();
        bare.note_origin(br#"{"id":1,"method":"roots/list"}"#, &ours);
        assert_eq!(bare.origin_of(&asked(1)), None);
    }

    #[test]
    fn forgets_the_oldest_beyond_its_bound() {
        let raw = RawRequests::default();
        for i in 0..(KEEP as i64 + 10) {
            raw.observe(
                format!(r#"{{"id":{i},"method":"elicitation/create","params":{{}}}}"#).as_bytes(),
            );
        }
        assert!(raw.take(&NumberOrString::Number(0)).is_none());
        assert!(raw.take(&NumberOrString::Number(KEEP as i64 + 9)).is_some());
    }

    #[test]
    fn kept_results_stay_within_their_byte_budget() {
        let raw = RawRequests::with_results();
        let big = "x".repeat(3 * 1024 * 1024);
        // Twenty answers of 3 MiB nobody asked for: at most 16 MiB of them are held.
        for i in 0..20 {
            raw.observe(format!(r#"{{"id":{i},"result":{{"t":"{big}"}}}}"#).as_bytes());
        }
        let held = raw.results.as_ref().unwrap().0.lock().unwrap().bytes;
        assert!(held <= KEEP_BYTES, "{held}");
        assert!(raw.take_result(&NumberOrString::Number(0)).is_none());
        assert!(raw.take_result(&NumberOrString::Number(19)).is_some());
    }

    #[test]
    fn a_result_nested_past_any_readers_depth_is_kept_as_bytes_without_harm() {
        let raw = RawRequests::with_results();
        let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
        raw.observe(format!(r#"{{"id":1,"result":{{"content":[],"d":{deep}}}}}"#).as_bytes());
        // Kept as it came, with no stack to overflow; a tree of it is refused, not built.
        let kept = raw.take_result_bytes(&NumberOrString::Number(1)).unwrap();
        assert!(tree(&kept).is_none());
    }

    /// An answer to one of the gateway's own requests is taken out of what rmcp reads, and
    /// handed over only once rmcp has read every line before it (the call's progress, which
    /// must reach the agent first).
    #[tokio::test]
    async fn our_answer_leaves_the_stream_in_its_place() {
        use tokio::io::AsyncBufReadExt;
        let raw = RawRequests::with_results();
        let mut waiting = raw.direct.open();
        let NumberOrString::String(ours) = waiting.id.clone() else {
            panic!()
        };
        let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;
        let answer = format!(r#"{{"jsonrpc":"2.0","id":"{ours}","result":{{"content":[]}}}}"#);
        let after = r#"{"jsonrpc":"2.0","id":3,"result":{}}"#;
        let wire = format!("{progress}\n{answer}\n{after}\n");
        let mut lines =
            tokio::io::BufReader::new(TapRead::new(wire.as_bytes(), raw.clone())).lines();
        assert_eq!(lines.next_line().await.unwrap().unwrap(), progress);
        // rmcp has the progress line, but has not asked for more: the answer waits.
        assert!(waiting.answer.try_recv().is_err());
        assert_eq!(lines.next_line().await.unwrap().unwrap(), after);
        let result =
            crate::mcp::direct::read_answer(waiting.answer.try_recv().unwrap(), true).unwrap();
        assert_eq!(result.raw().unwrap().get(), r#"{"content":[]}"#);
        assert!(lines.next_line().await.unwrap().is_none());
        // Not kept for rmcp's way either.
        assert!(raw.take_result_bytes(&waiting.id).is_none());
        assert!(raw.take_result_bytes(&NumberOrString::Number(3)).is_some());
    }

    /// A server's question is taken only while a request of ours is in flight, and only of the
    /// kinds that must belong to one; it is handed over in its place: after what came before it
    /// has reached rmcp, before what comes after it (its own withdrawal, say) does. Its params
    /// as sent are kept for whoever answers it.
    #[tokio::test]
    async fn a_question_while_ours_are_in_flight_is_taken_in_its_place() {
        use tokio::io::AsyncBufReadExt;
        let raw = RawRequests::with_results();
        let taken = Arc::new(Mutex::new(Vec::new()));
        let into = taken.clone();
        raw.direct
            .take_questions(Box::new(move |id, _| lock(&into).push(id)));
        let elicit = r#"{"jsonrpc":"2.0","id":"q1","method":"elicitation/create","params":{"mode":"form","message":"hi","requestedSchema":{"type":"object","properties":{}}}}"#;
        let ping = r#"{"jsonrpc":"2.0","id":"p1","method":"ping"}"#;
        let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;
        let cancel =
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"q1"}}"#;

        // None of ours in flight: rmcp's to judge.
        assert!(raw.direct.question(elicit.as_bytes()).is_none());

        let _ours = raw.direct.open();
        let roots = r#"{"jsonrpc":"2.0","id":"r1","method":"roots/list"}"#;
        assert!(raw.direct.question(roots.as_bytes()).is_some());
        assert!(raw.direct.question(ping.as_bytes()).is_none());
        let wire = format!("{progress}\n{elicit}\n{cancel}\n{ping}\n");
        let mut lines =
            tokio::io::BufReader::new(TapRead::new(wire.as_bytes(), raw.clone())).lines();
        assert_eq!(lines.next_line().await.unwrap().unwrap(), progress);
        assert!(
            lock(&taken).is_empty(),
            "handed over before rmcp read what came first"
        );
        assert_eq!(lines.next_line().await.unwrap().unwrap(), cancel);
        assert_eq!(*lock(&taken), [NumberOrString::String("q1".into())]);
        assert_eq!(lines.next_line().await.unwrap().unwrap(), ping);
        assert!(lines.next_line().await.unwrap().is_none());
        assert_eq!(
            raw.take(&NumberOrString::String("q1".into())).unwrap()["message"],
            "hi"
        );
    }

    /// Progress for a request of ours is taken as the server wrote it, in its place: after the
    /// lines before it reached rmcp, before our answer is handed over (the agent gets the
    /// progress first). Progress for rmcp's own requests stays rmcp's.
    #[tokio::test]
    async fn progress_for_ours_is_taken_as_sent_in_its_place() {
        use tokio::io::AsyncBufReadExt;
        let raw = RawRequests::with_results();
        let taken = Arc::new(Mutex::new(Vec::new()));
        let into = taken.clone();
        raw.direct.take_progress(Box::new(move |message| {
            lock(&into).push(String::from_utf8_lossy(message).into_owned());
            true
        }));
        let mut waiting = raw.direct.open();
        let NumberOrString::String(ours) = waiting.id.clone() else {
            panic!()
        };
        let log = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#;
        let progress = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"{ours}","progress":1,"x-vendor":true}}}}"#
        );
        let theirs = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":3,"progress":1}}"#;
        let answer = format!(r#"{{"jsonrpc":"2.0","id":"{ours}","result":{{"content":[]}}}}"#);
        let wire = format!("{log}\n{progress}\n{theirs}\n{answer}\n");
        let mut lines =
            tokio::io::BufReader::new(TapRead::new(wire.as_bytes(), raw.clone())).lines();
        assert_eq!(lines.next_line().await.unwrap().unwrap(), log);
        assert!(
            lock(&taken).is_empty(),
            "taken before rmcp read what came first"
        );
        assert_eq!(lines.next_line().await.unwrap().unwrap(), theirs);
        assert_eq!(*lock(&taken), [progress + "\n"]);
        assert!(
            waiting.answer.try_recv().is_err(),
            "the answer waits its turn"
        );
        assert!(lines.next_line().await.unwrap().is_none());
        assert!(waiting.answer.try_recv().is_ok());
    }

    /// A server that says `retry: 0` on a stream it ends at once does not have the session
    /// reconnect as fast as it can: rmcp waits at least a quarter of a second between streams.
    #[tokio::test]
    async fn a_servers_retry_of_zero_does_not_make_the_session_spin() {
        use axum::http::{HeaderMap, StatusCode, header::CONTENT_TYPE};
        use axum::response::IntoResponse;
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        let streams = Arc::new(AtomicUsize::new(0));
        let counted = streams.clone();
        let app = axum::Router::new().route(
            "/mcp",
            axum::routing::post(|body: String| async move {
                let message: serde_json::Value = serde_json::from_str(&body).unwrap();
                if message["method"] != "initialize" {
                    return StatusCode::ACCEPTED.into_response();
                }
                let result = json!({"jsonrpc": "2.0", "id": message["id"], "result": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "serverInfo": {"name": "spin", "version": "1"}}});
                (
                    [
                        (CONTENT_TYPE, "application/json"),
                        (http::HeaderName::from_static("mcp-session-id"), "s1"),
                    ],
                    result.to_string(),
                )
                    .into_response()
            })
            .get(move |_: HeaderMap| async move {
                counted.fetch_add(1, SeqCst);
                (
                    [(CONTENT_TYPE, "text/event-stream")],
                    "id: 1\nretry: 0\ndata: {}\n\n",
                )
                    .into_response()
            })
            .delete(|| async { StatusCode::OK }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let client = TapHttpClient::new(reqwest::Client::new(), RawRequests::new());
        let config =
            rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                format!("http://{addr}/mcp"),
            );
        let transport = rmcp::transport::StreamableHttpClientTransport::with_client(client, config);
        let session = rmcp::serve_client(rmcp::model::ClientConfig::default(), transport)
            .await
            .expect("handshake");
        tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
        let opened = streams.load(SeqCst);
        assert!(
            (1..=12).contains(&opened),
            "{opened} streams opened in 2.5 s"
        );
        drop(session);
    }

    #[tokio::test]
    async fn the_stdout_tap_passes_bytes_through_and_sees_split_lines() {
        let raw = RawRequests::new();
        let wire = b"{\"id\":7,\"method\":\"elicitation/create\",\"params\":{\"message\":\"hi\"}}\n{\"id\":8,\"result\":{}}\n".to_vec();
        // Deliver the bytes in small pieces, as a pipe may.
        let (mut tx, rx) = tokio::io::duplex(5);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for piece in wire.chunks(3) {
                tx.write_all(piece).await.unwrap();
            }
        });
        let mut tapped = TapRead::new(rx, raw.clone());
        let mut out = Vec::new();
        tapped.read_to_end(&mut out).await.unwrap();
        writer.await.unwrap();
        assert!(out.ends_with(b"{\"id\":8,\"result\":{}}\n"));
        assert_eq!(
            raw.take(&NumberOrString::Number(7)).unwrap(),
            json!({"message": "hi"})
        );
    }
}
