//! Our Streamable HTTP POST. rmcp's reqwest client parses a plain JSON answer before anything
//! else can read it, and its typed model drops what it does not know (a tool result's vendor
//! fields, a newer revision's), so an upstream that answers in JSON lost them on the way to
//! the agent while one that answers in SSE did not. This is the same exchange with the same
//! outcome for every status and body as rmcp 3.11's `post_message_with_response_limits`
//! (whose helpers are private), except that a JSON answer's bytes are shown to
//! [`RawRequests`] before they are parsed, as SSE events are.

use std::borrow::Cow;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use http::header::{ACCEPT, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorData, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, SseError, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};

use super::raw::RawRequests;

type Headers = HashMap<HeaderName, HeaderValue>;
type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;

/// Headers the transport sets itself; a server's configured headers may not name them
/// (`MCP-Protocol-Version` may: the session sets it through them after the handshake).
const RESERVED: &[&str] = &["accept", HEADER_SESSION_ID, "last-event-id"];
/// Bytes of an unusable body quoted in an error.
const PREVIEW: usize = 256;
const UNREADABLE: &str = "<failed to read response body>";
/// A `Retry-After` value longer than this is not kept (as rmcp).
const MAX_RETRY_AFTER: usize = 128;

pub(super) struct Post<'a> {
    pub http: &'a reqwest::Client,
    pub raw: &'a RawRequests,
    pub uri: &'a str,
    /// `uri` parsed already (reqwest would parse it again for every message).
    pub parsed: Option<reqwest::Url>,
    pub session_id: Option<Arc<str>>,
    pub auth_token: Option<String>,
    pub custom_headers: Headers,
    pub limits: StreamableHttpResponseLimits,
}

/// What a POST got back, the JSON body still as sent. Made once per POST and taken apart at
/// once, so its size does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Posted {
    Accepted,
    /// A JSON body with a success status.
    Json(Vec<u8>, Option<String>),
    Sse(SseEvents, Option<String>),
    /// The answer the status and body come to without being read as a success: a JSON-RPC
    /// error under a failure status, or a refused `server/discover`.
    Answered(StreamableHttpPostResponse),
}

pub(crate) type SseEvents = futures::stream::BoxStream<'static, Result<sse_stream::Sse, SseError>>;

/// How long the rest of a response stream may take to end once nothing more is wanted of it
/// (see [`read_to_end`]).
const READ_TO_END_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// Reads to its end a response stream nothing more is wanted of (its answer is in, or it
/// answers a POST that takes none). A server ends such a stream right after, and a stream
/// dropped before its end takes its connection with it: the next POST would open a new one, a
/// TCP handshake and teardown for us and the server each (with 16 agents on an SSE-answering
/// desk, a new connection for most calls; BENCHMARKS.md). What else comes on it was never
/// anyone's (rmcp drops it too); a stream still open after [`READ_TO_END_WITHIN`] is dropped
/// all the same.
pub(crate) fn read_to_end(mut events: SseEvents) {
    use futures::FutureExt;
    // Usually its end is in already.
    if let Some(None) = events.next().now_or_never() {
        return;
    }
    tokio::spawn(async move {
        let _ = tokio::time::timeout(READ_TO_END_WITHIN, async {
            while events.next().await.is_some() {}
        })
        .await;
    });
}

impl Post<'_> {
    pub(super) async fn send(
        self,
        message: &ClientJsonRpcMessage,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let body = Bytes::from(serde_json::to_vec(message)?);
        // Only a request waits for an answer; a notification's or response's POST needs none.
        let awaits_no_response = !matches!(message, ClientJsonRpcMessage::Request(_));
        let raw = self.raw;
        match self
            .exchange(body, !awaits_no_response, Some(message))
            .await?
        {
            Posted::Accepted => Ok(StreamableHttpPostResponse::Accepted),
            Posted::Sse(events, session_id) => {
                Ok(StreamableHttpPostResponse::Sse(events, session_id))
            }
            Posted::Answered(answer) => Ok(answer),
            Posted::Json(body, session_id) => {
                // The one difference from rmcp: the answer as sent, before the typed parse.
                raw.observe(&body);
                match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                    Ok(parsed) => Ok(StreamableHttpPostResponse::Json(parsed, session_id)),
                    Err(_) if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
                    Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                        format!(
                            "could not parse JSON response as ServerJsonRpcMessage: {e}: {}",
                            preview(&body)
                        ),
                    ))),
                }
            }
        }
    }

    /// POSTs one message's bytes. `awaits_response` says it is a request; `sent` is the message
    /// when a refused `server/discover` may need answering under its id.
    pub(crate) async fn exchange(
        self,
        body: Bytes,
        awaits_response: bool,
        sent: Option<&ClientJsonRpcMessage>,
    ) -> HttpResult<Posted> {
        let awaits_no_response = !awaits_response;
        let mut request = match self.parsed {
            Some(url) => self.http.post(url),
            None => self.http.post(self.uri),
        }
        .header(
            ACCEPT,
            format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"),
        );
        if let Some(token) = self.auth_token {
            request = request.bearer_auth(token);
        }
        for (name, value) in self.custom_headers {
            if RESERVED
                .iter()
                .any(|r| name.as_str().eq_ignore_ascii_case(r))
            {
                return Err(StreamableHttpError::ReservedHeaderConflict(
                    name.to_string(),
                ));
            }
            request = request.header(name, value);
        }
        let session_was_attached = self.session_id.is_some();
        if let Some(session) = &self.session_id {
            request = request.header(HEADER_SESSION_ID, session.as_ref());
        }
        // reqwest names the URL in its errors, and a server's URL may hold its key
        // (`?api_key=…`): such an error reaches the agent, the person and the log.
        let response = request
            .header(CONTENT_TYPE, JSON_MIME_TYPE)
            .body(body)
            .send()
            .await
            .map_err(reqwest::Error::without_url)?;
        let status = response.status();
        if let Some(challenge) = response.headers().get(WWW_AUTHENTICATE)
            && matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
        {
            let challenge = challenge.to_str().map_err(|_| {
                StreamableHttpError::UnexpectedServerResponse(Cow::from(
                    "invalid www-authenticate header value",
                ))
            })?;
            return Err(if status == StatusCode::UNAUTHORIZED {
                StreamableHttpError::AuthRequired(AuthRequiredError::new(challenge.to_owned()))
            } else {
                StreamableHttpError::InsufficientScope(InsufficientScopeError::new(
                    challenge.to_owned(),
                    scope_of(challenge),
                ))
            });
        }
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(Posted::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_was_attached {
            return Err(StreamableHttpError::SessionExpired);
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .map(|ct| String::from_utf8_lossy(ct.as_bytes()).into_owned());
        let is_json = content_type
            .as_deref()
            .is_some_and(|ct| media_type_is(ct, JSON_MIME_TYPE));
        // A rate limit or a non-JSON failure is answered from the status alone; a JSON server
        // failure is read, within the JSON limit, for its JSON-RPC error.
        let status_error = match status_error(status, response.headers()) {
            Some(error) if !is_json || status == StatusCode::TOO_MANY_REQUESTS => {
                return Err(error.into());
            }
            other => other,
        };
        let session_id = response
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let content_length = response.content_length();
        if status.is_success() && content_length == Some(0) && awaits_no_response {
            return Ok(Posted::Accepted);
        }
        if !status.is_success() {
            let auth_failure = matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
            let body = if is_json && !auth_failure {
                match read_bounded(
                    response.bytes_stream(),
                    content_length,
                    self.limits.max_json_response_size,
                )
                .await
                {
                    Ok(body) => {
                        let text = String::from_utf8_lossy(&body);
                        if let Ok(error @ ServerJsonRpcMessage::Error(_)) =
                            serde_json::from_slice::<ServerJsonRpcMessage>(&body)
                        {
                            // A discover rejection goes back under the request's own id.
                            if let Some(answer) =
                                legacy_discover(sent, session_was_attached, status, &text)
                            {
                                return Ok(Posted::Answered(answer));
                            }
                            return Ok(Posted::Answered(StreamableHttpPostResponse::Json(
                                error, session_id,
                            )));
                        }
                        truncate(&text, self.limits.max_error_response_size).into_owned()
                    }
                    Err(error @ StreamableHttpError::ResponseBodyTooLarge { .. }) => {
                        return Err(status_error.map(StreamableHttpError::from).unwrap_or(error));
                    }
                    Err(StreamableHttpError::Client(_)) => {
                        truncate(UNREADABLE, self.limits.max_error_response_size).into_owned()
                    }
                    Err(error) => return Err(error),
                }
            } else {
                read_prefix(response.bytes_stream(), self.limits.max_error_response_size).await
            };
            if let Some(answer) = legacy_discover(sent, session_was_attached, status, &body) {
                return Ok(Posted::Answered(answer));
            }
            if let Some(error) = status_error {
                return Err(error.into());
            }
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status}: {body}"),
            )));
        }
        match content_type.as_deref() {
            Some(ct) if media_type_is(ct, EVENT_STREAM_MIME_TYPE) => {
                let events = bounded_sse(response.bytes_stream(), self.limits.max_sse_event_size);
                Ok(Posted::Sse(events, session_id))
            }
            Some(ct) if media_type_is(ct, JSON_MIME_TYPE) => {
                let body = read_bounded(
                    response.bytes_stream(),
                    content_length,
                    self.limits.max_json_response_size,
                )
                .await?;
                Ok(Posted::Json(body, session_id))
            }
            // Some servers answer `notifications/initialized` with 200 and no type.
            _ if awaits_no_response => Ok(Posted::Accepted),
            _ => Err(StreamableHttpError::UnexpectedContentType(content_type)),
        }
    }
}

/// A 429 or 5xx, with its `Retry-After` when short and readable; nothing else of the answer.
fn status_error(status: StatusCode, headers: &HeaderMap) -> Option<HttpStatusError> {
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let retry_after = headers
        .get(RETRY_AFTER)
        .filter(|v| v.as_bytes().len() <= MAX_RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Some(HttpStatusError::new(status.as_u16(), retry_after))
}

/// A 2026-revision `server/discover` that a 2025 server (or middleware before it) refuses
/// with a 4xx is answered as a JSON-RPC error under the request's id, so the client falls back
/// to `initialize` instead of dropping an answer it cannot correlate.
fn legacy_discover(
    message: Option<&ClientJsonRpcMessage>,
    session_was_attached: bool,
    status: StatusCode,
    body: &str,
) -> Option<StreamableHttpPostResponse> {
    if session_was_attached
        || !status.is_client_error()
        || matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
    {
        return None;
    }
    let Some(ClientJsonRpcMessage::Request(request)) = message else {
        return None;
    };
    if !matches!(request.request, ClientRequest::DiscoverRequest(_)) {
        return None;
    }
    let error = match serde_json::from_str::<ServerJsonRpcMessage>(body) {
        Ok(ServerJsonRpcMessage::Error(error)) => error.error,
        _ => ErrorData::invalid_request(
            format!("server/discover rejected with HTTP {status}: {body}"),
            None,
        ),
    };
    Some(StreamableHttpPostResponse::Json(
        ServerJsonRpcMessage::error(error, Some(request.id.clone())),
        None,
    ))
}

/// The `scope` of a `WWW-Authenticate` challenge, quoted or not.
fn scope_of(challenge: &str) -> Option<String> {
    let at = challenge.to_ascii_lowercase().find("scope=")? + "scope=".len();
    let rest = &challenge[at..];
    let scope = match rest.strip_prefix('"') {
        Some(quoted) => &quoted[..quoted.find('"')?],
        None => {
            &rest[..rest
                .find(|c: char| c == ',' || c == ';' || c.is_whitespace())
                .unwrap_or(rest.len())]
        }
    };
    (!scope.is_empty() || rest.starts_with('"')).then(|| scope.to_owned())
}

/// Whether a `Content-Type` names `expected`, whatever its case and parameters.
fn media_type_is(value: &str, expected: &str) -> bool {
    value.split(';').next().is_some_and(|essence| {
        essence
            .trim_matches([' ', '\t'])
            .eq_ignore_ascii_case(expected)
    })
}

/// The whole body, or `ResponseBodyTooLarge` as soon as it is known to pass `max`.
pub async fn read_bounded(
    body: impl Stream<Item = reqwest::Result<Bytes>>,
    length: Option<u64>,
    max: usize,
) -> HttpResult<Vec<u8>> {
    if length.is_some_and(|length| length > max as u64) {
        return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
    }
    let mut body = std::pin::pin!(body);
    let mut read = Vec::new();
    while let Some(chunk) = body.try_next().await.map_err(StreamableHttpError::Client)? {
        if chunk.len() > max - read.len() {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
        }
        read.extend_from_slice(&chunk);
    }
    Ok(read)
}

/// At most `max` bytes of a diagnostic body, as text; the rest is never read.
pub async fn read_prefix(
    body: impl Stream<Item = reqwest::Result<Bytes>>,
    max: usize,
) -> String {
    let mut body = std::pin::pin!(body);
    let mut read = Vec::new();
    while read.len() < max {
        match body.next().await {
            Some(Ok(chunk)) => read.extend_from_slice(&chunk[..chunk.len().min(max - read.len())]),
            Some(Err(_)) => return truncate(UNREADABLE, max).into_owned(),
            None => break,
        }
    }
    String::from_utf8_lossy(&read).into_owned()
}

fn truncate(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Borrowed(&text[..end])
}

fn preview(body: &[u8]) -> String {
    if body.is_empty() {
        return "<empty>".into();
    }
    truncate(&String::from_utf8_lossy(body), PREVIEW).into_owned()
}

/// The SSE events of a response body, failing once one event holds more than `max` bytes.
pub fn bounded_sse(
    body: impl Stream<Item = reqwest::Result<Bytes>> + Send + 'static,
    max: usize,
) -> futures::stream::BoxStream<'static, Result<sse_stream::Sse, SseError>> {
    let bounded = Bounded {
        body: Box::pin(body),
        event: EventSize::new(max),
        failed: false,
    };
    sse_stream::SseStream::from_bytes_stream(bounded).boxed()
}

struct Bounded<S> {
    body: Pin<Box<S>>,
    event: EventSize,
    failed: bool,
}

impl<S: Stream<Item = reqwest::Result<Bytes>>> Stream for Bounded<S> {
    type Item = std::io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.failed {
            return Poll::Ready(None);
        }
        let next = std::task::ready!(self.body.as_mut().poll_next(cx));
        Poll::Ready(match next {
            Some(Ok(chunk)) if self.event.observe(&chunk) => Some(Ok(chunk)),
            Some(Ok(_)) => {
                self.failed = true;
                Some(Err(std::io::Error::other(format!(
                    "an SSE event passed {} bytes",
                    self.event.max
                ))))
            }
            Some(Err(e)) => {
                self.failed = true;
                Some(Err(std::io::Error::other(e)))
            }
            None => None,
        })
    }
}

/// Counts the bytes an SSE parser keeps for the event being read: its non-comment lines, each
/// with the newline the parser joins them by. A blank line ends the event.
struct EventSize {
    max: usize,
    kept: usize,
    line: usize,
    comment: bool,
    after_cr: bool,
}

impl EventSize {
    fn new(max: usize) -> Self {
        EventSize {
            max,
            kept: 0,
            line: 0,
            comment: false,
            after_cr: false,
        }
    }

    /// False once the event passes `max`. Goes from line end to line end (`memchr2`): a
    /// byte-at-a-time walk was the larger part of reading a response's events.
    fn observe(&mut self, mut chunk: &[u8]) -> bool {
        loop {
            // A CR's LF may come at the start of the next chunk.
            if !chunk.is_empty() && std::mem::take(&mut self.after_cr) && chunk[0] == b'\n' {
                chunk = &chunk[1..];
            }
            if chunk.is_empty() {
                return true;
            }
            let end = memchr::memchr2(b'\r', b'\n', chunk);
            let part = &chunk[..end.unwrap_or(chunk.len())];
            if let Some(&first) = part.first() {
                if self.line == 0 {
                    self.comment = first == b':';
                }
                self.line = self.line.saturating_add(part.len());
            }
            if self.kept.saturating_add(self.line) > self.max {
                return false;
            }
            let Some(end) = end else {
                return true;
            };
            self.after_cr = chunk[end] == b'\r';
            if self.line == 0 {
                self.kept = 0;
            } else if !self.comment {
                self.kept = self.kept.saturating_add(self.line + 1);
            }
            self.line = 0;
            self.comment = false;
            if self.kept > self.max {
                return false;
            }
            chunk = &chunk[end + 1..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::response::IntoResponse;
    use rmcp::transport::streamable_http_client::StreamableHttpClient;
    use serde_json::json;

    /// Sets its flag when dropped.
    struct Dropped(Arc<std::sync::atomic::AtomicBool>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// A response stream of two events whose end comes after `end_after` (never with `None`);
    /// and flags that say when its end was read and when it was dropped.
    fn watched(
        end_after: Option<std::time::Duration>,
    ) -> (
        SseEvents,
        Arc<std::sync::atomic::AtomicBool>,
        Arc<std::sync::atomic::AtomicBool>,
    ) {
        let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let state = (0, Dropped(Arc::clone(&dropped)), Arc::clone(&ended));
        let events = futures::stream::unfold(state, move |(sent, guard, ended)| async move {
            if sent < 2 {
                return Some((Ok(sse_stream::Sse::default()), (sent + 1, guard, ended)));
            }
            match end_after {
                Some(wait) => tokio::time::sleep(wait).await,
                None => std::future::pending().await,
            }
            ended.store(true, std::sync::atomic::Ordering::SeqCst);
            None
        });
        (events.boxed(), ended, dropped)
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_nothing_more_is_wanted_of_is_read_to_its_end() {
        use std::sync::atomic::Ordering::SeqCst;
        use std::time::Duration;
        // Its end a moment later: read, so the connection under it goes back to the pool.
        let (events, ended, dropped) = watched(Some(Duration::from_millis(300)));
        read_to_end(events);
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(ended.load(SeqCst), "read to its end");
        assert!(dropped.load(SeqCst), "and let go");

        // No end: let go after a second, read no further.
        let (events, ended, dropped) = watched(None);
        read_to_end(events);
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert!(!dropped.load(SeqCst), "still read within the second");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(dropped.load(SeqCst), "dropped after it");
        assert!(!ended.load(SeqCst));
    }

    /// What one case's server answers: status, headers, body.
    fn answer(case: &str) -> axum::response::Response {
        let json = [(CONTENT_TYPE, "application/json")];
        let sse = [(CONTENT_TYPE, "text/event-stream")];
        let result = json!({"jsonrpc": "2.0", "id": 1,
            "result": {"tools": [], "x-vendor": {"kept": true}}})
        .to_string();
        let rpc_error =
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "no"}})
                .to_string();
        let s = |code: u16| StatusCode::from_u16(code).unwrap();
        match case {
            "json" => (json, result).into_response(),
            "json-charset" => (
                [
                    (CONTENT_TYPE, "Application/JSON; charset=utf-8"),
                    (http::HeaderName::from_static("mcp-session-id"), "s-1"),
                ],
                result,
            )
                .into_response(),
            "sse" => (sse, format!("event: message\ndata: {result}\n\n")).into_response(),
            "sse-huge" => (sse, format!("data: {}\n\n", "x".repeat(4096))).into_response(),
            "accepted" => s(202).into_response(),
            "no-content" => s(204).into_response(),
            "empty-200" => (s(200), "").into_response(),
            "text-200" => (s(200), [(CONTENT_TYPE, "text/plain")], "hi").into_response(),
            "untyped-200" => (s(200), "hi").into_response(),
            "bad-json" => (json, "{not json").into_response(),
            "huge-json" => (json, " ".repeat(4096)).into_response(),
            "not-found" => s(404).into_response(),
            "unauthorized" => (
                s(401),
                [(
                    WWW_AUTHENTICATE,
                    r#"Bearer resource_metadata="http://x/.well-known""#,
                )],
            )
                .into_response(),
            "unauthorized-bare" => (s(401), json, rpc_error).into_response(),
            "forbidden" => (
                s(403),
                [(
                    WWW_AUTHENTICATE,
                    r#"Bearer error="insufficient_scope", scope="a b""#,
                )],
            )
                .into_response(),
            "rate-limited" => (
                s(429),
                [(RETRY_AFTER, "7"), (CONTENT_TYPE, "application/json")],
                rpc_error,
            )
                .into_response(),
            "server-error-text" => (s(503), [(RETRY_AFTER, "3")], "down").into_response(),
            "server-error-json" => (s(500), json, rpc_error).into_response(),
            "server-error-not-rpc" => (s(500), json, r#"{"oops": 1}"#).into_response(),
            "bad-request-text" => (s(400), "nope").into_response(),
            "bad-request-json" => (s(400), json, rpc_error).into_response(),
            other => panic!("no case {other}"),
        }
    }

    /// An outcome in words, SSE events read to their end.
    async fn outcome(result: HttpResult<StreamableHttpPostResponse>) -> String {
        match result {
            Ok(StreamableHttpPostResponse::Accepted) => "accepted".into(),
            Ok(StreamableHttpPostResponse::Json(message, session)) => {
                format!(
                    "json {} {session:?}",
                    serde_json::to_string(&message).unwrap()
                )
            }
            Ok(StreamableHttpPostResponse::Sse(events, session)) => {
                let events: Vec<String> = events
                    .map(|e| match e {
                        Ok(e) => format!("{:?}", e.data),
                        Err(_) => "error".into(),
                    })
                    .collect()
                    .await;
                format!("sse {events:?} {session:?}")
            }
            Ok(_) => "another response".into(),
            Err(StreamableHttpError::HttpStatus(e)) => {
                format!("status {} {:?}", e.status, e.retry_after)
            }
            Err(StreamableHttpError::AuthRequired(e)) => format!("auth {e:?}"),
            Err(StreamableHttpError::InsufficientScope(e)) => {
                format!("scope {e:?} {:?}", e.get_required_scope())
            }
            Err(e) => format!("error {e}"),
        }
    }

    /// Every status and body ends the same through our POST as through rmcp's, but for the
    /// one difference we want: our raw tap has seen a plain JSON answer.
    #[tokio::test]
    async fn every_answer_ends_as_it_does_in_rmcps_own_post() {
        let app =
            axum::Router::new().route(
                "/{case}",
                axum::routing::post(
                    |axum::extract::Path(case): axum::extract::Path<String>| async move {
                        answer(&case)
                    },
                ),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });

        let request: ClientJsonRpcMessage =
            serde_json::from_value(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
                .unwrap();
        let notification: ClientJsonRpcMessage = serde_json::from_value(
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .unwrap();
        let discover: ClientJsonRpcMessage = serde_json::from_value(
            json!({"jsonrpc": "2.0", "id": 9, "method": "server/discover", "params": {}}),
        )
        .unwrap();
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_json_response_size = 1024;
        limits.max_sse_event_size = 1024;
        limits.max_error_response_size = 3;
        let http = reqwest::Client::new();
        let cases = [
            "json",
            "json-charset",
            "sse",
            "sse-huge",
            "accepted",
            "no-content",
            "empty-200",
            "text-200",
            "untyped-200",
            "bad-json",
            "huge-json",
            "not-found",
            "unauthorized",
            "unauthorized-bare",
            "forbidden",
            "rate-limited",
            "server-error-text",
            "server-error-json",
            "server-error-not-rpc",
            "bad-request-text",
            "bad-request-json",
        ];
        let mut compared = 0;
        for case in cases {
            let uri: Arc<str> = format!("http://{addr}/{case}").into();
            for (kind, message) in [
                ("request", &request),
                ("notification", &notification),
                ("discover", &discover),
            ] {
                for session in [None, Some(Arc::<str>::from("s-0"))] {
                    let headers = Headers::from([(
                        HeaderName::from_static("x-custom"),
                        HeaderValue::from_static("1"),
                    )]);
                    let theirs = http
                        .post_message_with_response_limits(
                            uri.clone(),
                            message.clone(),
                            session.clone(),
                            Some("t".into()),
                            headers.clone(),
                            limits,
                        )
                        .await;
                    let raw = RawRequests::with_results();
                    let ours = Post {
                        http: &http,
                        raw: &raw,
                        uri: &uri,
                        parsed: None,
                        session_id: session.clone(),
                        auth_token: Some("t".into()),
                        custom_headers: headers,
                        limits,
                    }
                    .send(message)
                    .await;
                    let (theirs, ours) = (outcome(theirs).await, outcome(ours).await);
                    assert_eq!(ours, theirs, "{case}, a {kind}, session {session:?}");
                    compared += 1;
                    let seen = raw.take_result(&rmcp::model::RequestId::Number(1));
                    if case.starts_with("json") && kind == "request" {
                        assert_eq!(seen.unwrap()["x-vendor"], json!({"kept": true}), "{case}");
                    }
                }
            }
        }
        assert_eq!(compared, cases.len() * 6);

        let reserved = Headers::from([(
            HeaderName::from_static("mcp-session-id"),
            HeaderValue::from_static("x"),
        )]);
        let raw = RawRequests::new();
        let refused = Post {
            http: &http,
            raw: &raw,
            uri: &format!("http://{addr}/json"),
            parsed: None,
            session_id: None,
            auth_token: None,
            custom_headers: reserved,
            limits,
        }
        .send(&request)
        .await;
        assert!(
            matches!(refused, Err(StreamableHttpError::ReservedHeaderConflict(_))),
            "{}",
            outcome(refused).await
        );
    }

    #[test]
    fn an_events_size_counts_its_kept_lines_and_starts_again_after_a_blank_line() {
        let mut size = EventSize::new(10);
        assert!(
            size.observe(b"data: 123\n"),
            "9 bytes and the joining newline"
        );
        assert!(!size.observe(b"x"), "11 kept bytes pass 10");
        let mut size = EventSize::new(10);
        assert!(size.observe(b"data: 12\r\n\r\ndata: 12\n\n"));
        assert!(
            size.observe(b": comment\ndata: 123\n"),
            "a comment is not kept"
        );
        let mut split = EventSize::new(10);
        assert!(split.observe(b"data: 12\r"));
        assert!(split.observe(b"\n\r\ndata: 123\n"), "CRLF across chunks");
        assert!(!split.observe(b"d"));
    }

    /// The byte-at-a-time count `EventSize::observe` replaced, as the reference it must agree
    /// with: (max, kept, line, comment, after CR).
    fn observed_byte_by_byte(state: &mut (usize, usize, usize, bool, bool), chunk: &[u8]) -> bool {
        let (max, kept, line, comment, after_cr) = state;
        for &byte in chunk {
            if std::mem::take(after_cr) && byte == b'\n' {
                continue;
            }
            match byte {
                b'\r' | b'\n' => {
                    *after_cr = byte == b'\r';
                    if *line == 0 {
                        *kept = 0;
                    } else if !*comment {
                        *kept = kept.saturating_add(*line + 1);
                    }
                    *line = 0;
                    *comment = false;
                }
                _ => {
                    if *line == 0 {
                        *comment = byte == b':';
                    }
                    *line = line.saturating_add(1);
                }
            }
            if kept.saturating_add(*line) > *max {
                return false;
            }
        }
        true
    }

    proptest::proptest! {
        /// Whatever the bytes and however they are cut into chunks, the line-to-line count
        /// fails exactly where the byte-by-byte one does.
        #[test]
        fn an_events_size_is_counted_as_byte_by_byte(
            bytes in proptest::collection::vec(
                proptest::sample::select(vec![b'a', b':', b'\r', b'\n', b' ']), 0..200),
            cuts in proptest::collection::vec(0usize..200, 0..8),
            max in 0usize..40,
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|c| *c <= bytes.len()).collect();
            cuts.push(0);
            cuts.push(bytes.len());
            cuts.sort_unstable();
            let mut size = EventSize::new(max);
            let mut reference = (max, 0, 0, false, false);
            for pair in cuts.windows(2) {
                let chunk = &bytes[pair[0]..pair[1]];
                let ok = size.observe(chunk);
                proptest::prop_assert_eq!(ok, observed_byte_by_byte(&mut reference, chunk));
                if !ok {
                    break;
                }
                proptest::prop_assert_eq!(
                    (size.kept, size.line, size.comment, size.after_cr),
                    (reference.1, reference.2, reference.3, reference.4)
                );
            }
        }
    }

    #[test]
    fn a_challenges_scope_is_read_quoted_or_bare() {
        assert_eq!(
            scope_of(r#"Bearer error="insufficient_scope", scope="notes:read notes:write""#),
            Some("notes:read notes:write".into())
        );
        assert_eq!(
            scope_of("Bearer scope=read:data, x=1"),
            Some("read:data".into())
        );
        assert_eq!(scope_of("Bearer realm=\"x\""), None);
    }

    #[test]
    fn media_types_match_whatever_their_case_and_parameters() {
        assert!(media_type_is(
            "Application/JSON; charset=utf-8",
            JSON_MIME_TYPE
        ));
        assert!(!media_type_is("application/json-seq", JSON_MIME_TYPE));
        assert!(media_type_is(" text/event-stream", EVENT_STREAM_MIME_TYPE));
    }
}
