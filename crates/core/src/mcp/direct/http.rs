//! The direct way to a Streamable HTTP server (2025-11-25 and before): the gateway POSTs its
//! requests itself, in the session rmcp's client opened (its session id, its protocol
//! header, its headers and credentials, as rmcp last posted with them; a signed-in session's
//! token as its sign-in holds it at each post), and reads the answer off the response as
//! sent. Through rmcp's session a forwarded call was handed to its worker
//! task and back, its answer parsed whole into rmcp's types and serialized again.
//!
//! What else the server sends on such a response (its own requests, notifications other than
//! progress) goes on to rmcp's session through the standalone stream rmcp reads
//! (`TapHttpClient::get_stream`), so the person's answers, the server's withdrawals and the
//! audit take rmcp's way as before. The way is open only while rmcp holds that stream.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpResponseLimits,
};
use sse_stream::Sse;
use tokio::sync::mpsc;

use crate::lock;
use crate::mcp::http_post::{Post, Posted, SseEvents};
use crate::mcp::raw::RawRequests;

type Headers = std::collections::HashMap<http::HeaderName, http::HeaderValue>;
/// A server's sign-in, shared with rmcp's auth client (and swapped inside on sign-out).
pub(crate) type SignIn = Arc<tokio::sync::Mutex<rmcp::transport::auth::AuthorizationManager>>;
type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;

/// Events kept for rmcp's stream while it has none open (between its reconnections), at most.
const HELD: usize = 64;
/// Events of ours handed to rmcp's stream and not read by rmcp yet, at most.
const PASSING: usize = 16;

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
    /// Into the standalone stream rmcp reads, while it reads one.
    events: Mutex<Events>,
}

#[derive(Default)]
struct Events {
    into: Option<mpsc::Sender<Sse>>,
    /// What came while rmcp had no stream open: it goes first on the next.
    held: std::collections::VecDeque<Sse>,
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

    /// Whether requests can be posted from here: a session rmcp has posted in, and a stream
    /// of rmcp's to hand the server's other messages to.
    pub(crate) fn is_open(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
            && lock(&self.posted).is_some()
            && lock(&self.events)
                .into
                .as_ref()
                .is_some_and(|into| !into.is_closed())
    }

    /// rmcp's session posted with these: ours go the same way.
    pub(crate) fn saw_post(&self, with: impl FnOnce() -> PostedWith) {
        if !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        let mut with = with();
        // A session is posted in without a session id only before its handshake.
        if with.session_id.is_none() {
            return;
        }
        // A signed-in session's token is read from its sign-in at each post: no copy is kept.
        if lock(&self.signed_in).is_some() {
            with.auth = None;
        }
        let mut posted = lock(&self.posted);
        if posted.as_ref().is_none_or(|p| !p.same_session(&with)) {
            *posted = Some(Arc::new(with));
        }
    }

    /// The server ended the session: ours go rmcp's way until it has opened another.
    pub(crate) fn close(&self) {
        lock(&self.posted).take();
    }

    /// POSTs one request of ours (its bytes as they go on the wire).
    pub(crate) async fn post(&self, raw: &RawRequests, body: Bytes) -> HttpResult<Posted> {
        let Some(with) = lock(&self.posted).clone() else {
            return Err(StreamableHttpError::TransportChannelClosed);
        };
        let auth_token = self.token(&with).await?;
        Post {
            http: &with.http,
            raw,
            uri: &with.uri,
            parsed: with.url.clone(),
            session_id: with.session_id.clone(),
            auth_token,
            custom_headers: with.headers.clone(),
            limits: with.limits,
        }
        .exchange(body, true, None)
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

    /// Hands one event of the server's to rmcp's session, as if it came on rmcp's stream. It
    /// waits while rmcp has [`PASSING`] of ours unread, so a server flooding a response stream
    /// is slowed to rmcp's pace rather than held in memory.
    pub(crate) async fn hand_to_rmcp(&self, event: Sse) {
        let into = lock(&self.events).into.clone();
        let event = match into {
            Some(into) => match into.send(event).await {
                Ok(()) => return,
                Err(mpsc::error::SendError(event)) => event,
            },
            None => event,
        };
        hold(&mut lock(&self.events).held, event);
    }

    /// rmcp's standalone stream, with what we hand it put in between the server's events.
    pub(crate) fn with_ours(raw: Arc<RawRequests>, theirs: SseEvents) -> SseEvents {
        let (into, ours) = mpsc::channel(PASSING);
        let held = {
            let mut events = lock(&raw.direct.http.events);
            events.into = Some(into.clone());
            std::mem::take(&mut events.held)
        };
        Box::pin(WithOurs {
            held,
            ours,
            theirs,
            into,
            raw,
        })
    }
}

struct WithOurs {
    /// What came while rmcp had no stream open, first.
    held: std::collections::VecDeque<Sse>,
    ours: mpsc::Receiver<Sse>,
    theirs: SseEvents,
    /// Ours, to know it again when this stream goes.
    into: mpsc::Sender<Sse>,
    raw: Arc<RawRequests>,
}

impl Stream for WithOurs {
    type Item = Result<Sse, SseError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(event) = self.held.pop_front() {
            return Poll::Ready(Some(Ok(event)));
        }
        if let Poll::Ready(Some(event)) = self.ours.poll_recv(cx) {
            return Poll::Ready(Some(Ok(event)));
        }
        // The server's stream ending ends this one: rmcp reconnects, and gets a new one.
        self.theirs.as_mut().poll_next(cx)
    }
}

impl Drop for WithOurs {
    fn drop(&mut self) {
        let mut events = lock(&self.raw.direct.http.events);
        if events
            .into
            .as_ref()
            .is_some_and(|into| into.same_channel(&self.into))
        {
            events.into = None;
        }
        // What rmcp did not read yet goes first on its next stream.
        self.ours.close();
        for event in std::mem::take(&mut self.held) {
            hold(&mut events.held, event);
        }
        while let Ok(event) = self.ours.try_recv() {
            hold(&mut events.held, event);
        }
    }
}

fn hold(held: &mut std::collections::VecDeque<Sse>, event: Sse) {
    if held.len() >= HELD {
        tracing::warn!("a server's message for a session with no stream open was dropped");
        held.pop_front();
    }
    held.push_back(event);
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn event(n: usize) -> Sse {
        Sse {
            data: Some(n.to_string()),
            ..Default::default()
        }
    }

    async fn read_all(stream: SseEvents) -> Vec<String> {
        stream
            .map(|e| e.expect("an event").data.expect("data"))
            .collect()
            .await
    }

    #[tokio::test]
    async fn what_comes_while_rmcp_has_no_stream_goes_first_on_its_next_within_bounds() {
        let raw = RawRequests::with_results();
        raw.direct.http.enable();
        for n in 0..HELD + 5 {
            raw.direct.http.hand_to_rmcp(event(n)).await;
        }
        let theirs = futures::stream::iter([Ok(event(1000))]).boxed();
        let got = read_all(HttpWay::with_ours(raw.clone(), theirs)).await;
        // The oldest past the bound are gone; the rest come in order, before the server's.
        let expected: Vec<String> = (5..HELD + 5).chain([1000]).map(|n| n.to_string()).collect();
        assert_eq!(got, expected);
        assert!(lock(&raw.direct.http.events).held.is_empty());
    }

    #[tokio::test]
    async fn a_flood_waits_for_rmcp_to_read_and_what_it_left_unread_is_kept_for_its_next_stream() {
        let raw = RawRequests::with_results();
        raw.direct.http.enable();
        // A server stream that stays open, so only ours come.
        let theirs = futures::stream::pending().boxed();
        let stream = HttpWay::with_ours(raw.clone(), theirs);
        for n in 0..PASSING {
            raw.direct.http.hand_to_rmcp(event(n)).await;
        }
        let one_more = raw.direct.http.hand_to_rmcp(event(PASSING));
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(100), one_more)
                .await
                .is_err(),
            "past the bound, handing waits for rmcp to read"
        );
        let mut stream = stream;
        assert_eq!(stream.next().await.unwrap().unwrap().data.unwrap(), "0");
        drop(stream);
        // rmcp's stream went with events unread: they are the next one's first.
        let held: Vec<_> = lock(&raw.direct.http.events)
            .held
            .iter()
            .map(|e| e.data.clone().unwrap())
            .collect();
        let expected: Vec<String> = (1..PASSING).map(|n| n.to_string()).collect();
        assert_eq!(held, expected);
        assert!(lock(&raw.direct.http.events).into.is_none());
    }
}
