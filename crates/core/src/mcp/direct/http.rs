//! The direct way to a Streamable HTTP server: the gateway POSTs its requests itself, in the
//! session rmcp's client opened (its session id if the server keeps sessions, its protocol
//! header, its headers and credentials, as rmcp last posted with them; a signed-in session's
//! token as its sign-in holds it at each post), and reads the answer off the response as
//! sent. Through rmcp's session a forwarded call was handed to its worker task and back, its
//! answer parsed whole into rmcp's types and serialized again.
//!
//! To a 2026-07-28 server each post also carries the SEP-2243 headers made for it
//! (`headers`). What else the server sends on the response stream of a request of ours (its
//! own requests, notifications other than progress) belongs to that request, and is the
//! gateway's to answer (`gateway::forward::upstream`): rmcp's session, from 2026-07-28 on,
//! refuses a question that does not belong to a request of its own, and a server with no
//! sessions or no standalone stream gives rmcp nowhere to read it anyway.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpResponseLimits,
};

use crate::lock;
use crate::mcp::http_post::{Post, Posted, SseEvents};
use crate::mcp::raw::RawRequests;
use crate::mcp::standard_headers;

type Headers = std::collections::HashMap<http::HeaderName, http::HeaderValue>;
/// A server's sign-in, shared with rmcp's auth client (and swapped inside on sign-out).
pub(crate) type SignIn = Arc<tokio::sync::Mutex<rmcp::transport::auth::AuthorizationManager>>;
type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;

#[derive(Default)]
pub(crate) struct HttpWay {
    /// Set for the gateway's upstream sessions (`TapHttpClient::with_direct_way`). A server
    /// that refuses a signed-in session's token (revoked) sends the call rmcp's way, whose
    /// auth client refreshes it or asks the person; one short of a scope ends the call asking
    /// the person for more.
    enabled: AtomicBool,
    /// A signed-in session's sign-in: its token is taken from there at each post.
    signed_in: Mutex<Option<SignIn>>,
    posted: Mutex<Option<Arc<PostedWith>>>,
    /// The server gives no session ids (2026-07-28 has none; a 2025-11-25 server may run
    /// without): a post without one is then in the session, not before its handshake.
    sessionless: AtomicBool,
}

/// What rmcp's session last posted with.
#[derive(Clone)]
pub(crate) struct PostedWith {
    pub(crate) http: reqwest::Client,
    pub(crate) uri: Arc<str>,
    pub(crate) url: Option<reqwest::Url>,
    pub(crate) session_id: Option<Arc<str>>,
    pub(crate) auth: Option<String>,
    pub(crate) headers: Headers,
    pub(crate) limits: StreamableHttpResponseLimits,
}

impl PostedWith {
    fn same_session(&self, other: &PostedWith) -> bool {
        self.uri == other.uri
            && self.session_id == other.session_id
            && self.auth == other.auth
            && self.headers == other.headers
    }
}

impl HttpWay {
    pub(crate) fn enable(&self) {
        self.enabled.store(true, Ordering::Relaxed);
    }

    /// The session is signed in with `sign_in`: each post carries its token as it is then
    /// (refreshed when about to expire; none once the person signed out, and then the request
    /// goes rmcp's way, which asks for a new sign-in), never a copy of an older one.
    pub(crate) fn sign_in_from(&self, sign_in: SignIn) {
        *lock(&self.signed_in) = Some(sign_in);
    }

    /// The token a post of ours carries.
    async fn token(&self, with: &PostedWith) -> HttpResult<Option<String>> {
        let Some(sign_in) = lock(&self.signed_in).clone() else {
            return Ok(with.auth.clone());
        };
        let token = sign_in.lock().await.get_access_token().await;
        token.map(Some).map_err(|e| {
            StreamableHttpError::AuthRequired(
                rmcp::transport::streamable_http_client::AuthRequiredError::new(e.to_string()),
            )
        })
    }

    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Whether requests can be posted from here: in a session rmcp has posted in.
    pub(crate) fn is_open(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
            && lock(&self.posted)
                .as_ref()
                .is_some_and(|p| p.session_id.is_some() || self.sessionless.load(Ordering::Relaxed))
    }

    /// The server answered rmcp's `initialize` or `server/discover`: with a session id or
    /// without one.
    pub(crate) fn saw_lifecycle(&self, session_id: Option<&str>) {
        self.sessionless
            .store(session_id.is_none(), Ordering::Relaxed);
    }

    /// rmcp's session posted with these: ours go the same way. (Before the handshake of a
    /// server that keeps sessions there is no session id yet, and the way is not open.)
    pub(crate) fn saw_post(&self, with: impl FnOnce() -> PostedWith) {
        if !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        let mut with = with();
        // A signed-in session's token is read from its sign-in at each post: no copy is kept.
        if lock(&self.signed_in).is_some() {
            with.auth = None;
        }
        // Made for each request of ours (`headers`), not inherited from rmcp's last.
        with.headers
            .retain(|name, _| !standard_headers::is_per_request(name));
        let mut posted = lock(&self.posted);
        if posted.as_ref().is_none_or(|p| !p.same_session(&with)) {
            *posted = Some(Arc::new(with));
        }
    }

    /// The server ended the session: ours go rmcp's way until it has opened another.
    pub(crate) fn close(&self) {
        lock(&self.posted).take();
    }

    /// POSTs one request of ours (its bytes as they go on the wire), with `per_request`
    /// headers (SEP-2243's, to a 2026-07-28 server) beside the session's.
    pub(crate) async fn post(
        &self,
        raw: &RawRequests,
        body: Bytes,
        per_request: standard_headers::Headers,
    ) -> HttpResult<Posted> {
        self.exchange(raw, body, true, per_request).await
    }

    /// POSTs our answer to one of the server's requests (which takes no answer back).
    pub(crate) async fn answer(&self, raw: &RawRequests, body: Bytes) -> HttpResult<()> {
        match self.exchange(raw, body, false, Vec::new()).await? {
            Posted::Accepted | Posted::Json(..) => Ok(()),
            // A stream has nothing for an answer: it is read to its end, which keeps the
            // connection.
            Posted::Sse(events, _) => {
                crate::mcp::http_post::read_to_end(events);
                Ok(())
            }
            Posted::Answered(_) => Err(StreamableHttpError::UnexpectedServerResponse(
                "the server refused an answer to its own request".into(),
            )),
        }
    }

    async fn exchange(
        &self,
        raw: &RawRequests,
        body: Bytes,
        is_request: bool,
        per_request: standard_headers::Headers,
    ) -> HttpResult<Posted> {
        let Some(with) = lock(&self.posted).clone() else {
            return Err(StreamableHttpError::TransportChannelClosed);
        };
        let auth_token = self.token(&with).await?;
        let mut custom_headers = with.headers.clone();
        custom_headers.extend(per_request);
        Post {
            http: &with.http,
            raw,
            uri: &with.uri,
            parsed: with.url.clone(),
            session_id: with.session_id.clone(),
            auth_token,
            custom_headers,
            limits: with.limits,
        }
        .exchange(body, is_request, None)
        .await
    }

    /// Picks up the response stream of one of our requests where it broke off (the server
    /// closed it to be polled, SEP-1699), as rmcp resumes its own.
    pub(crate) async fn resume(&self, last_event_id: String) -> HttpResult<SseEvents> {
        let Some(with) = lock(&self.posted).clone() else {
            return Err(StreamableHttpError::TransportChannelClosed);
        };
        let auth_token = self.token(&with).await?;
        with.http
            .get_stream_with_max_sse_event_size(
                with.uri.clone(),
                with.session_id.clone(),
                Some(last_event_id),
                auth_token,
                with.headers.clone(),
                with.limits.max_sse_event_size,
            )
            .await
    }
}
