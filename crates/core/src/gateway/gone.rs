//! Noticing an agent that went away mid-request.
//!
//! On a session-keeping (2025-11-25) connection rmcp answers each request on its own SSE
//! stream but does not cancel the request when that stream's client disconnects: the request
//! (and a question open for it) would wait until the session idles out, minutes later, and the
//! person could approve a call nobody waits for. So every request gets a token that fires when
//! its response body is dropped before it ended; hyper drops it when a write (an event or
//! the keep-alive ping) fails on the closed connection.

use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use futures::Stream;
use rmcp::service::{RequestContext, RoleServer};
use tokio_util::sync::CancellationToken;

/// An agent that cancels a call usually closes its stream too, and the two arrive in either
/// order: a closed stream counts as "gone" only if no cancellation follows this soon.
const GRACE: Duration = Duration::from_millis(250);

/// Carried in the HTTP request's extensions, which rmcp hands to the handler.
#[derive(Clone, Default)]
struct ClientGone {
    /// Fires [`GRACE`] after the response was abandoned, unless the request was cancelled.
    agent_gone: CancellationToken,
    /// The request's own cancellation, once its handler asked for [`token`].
    cancelled: Arc<OnceLock<CancellationToken>>,
}

impl ClientGone {
    /// The response was dropped before it ended. Nothing waits per request until then: a
    /// timer starts only for a request that was abandoned.
    fn abandoned(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.agent_gone.cancel();
            return;
        };
        let client = self.clone();
        runtime.spawn(async move {
            tokio::time::sleep(GRACE).await;
            if !client.cancelled.get().is_some_and(|c| c.is_cancelled()) {
                client.agent_gone.cancel();
            }
        });
    }
}

/// A token that fires when the agent behind request `ctx` went away without cancelling it,
/// when the request came over HTTP through [`watch`].
pub(crate) fn token(ctx: &RequestContext<RoleServer>) -> Option<CancellationToken> {
    let client = ctx
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<ClientGone>())?;
    let _ = client.cancelled.set(ctx.ct.clone());
    Some(client.agent_gone.clone())
}

/// Marks the request as abandoned if dropped before [`Abandoned::answered`]: a request
/// answered in one piece (see `lane`) has no response body to watch while it waits, but hyper
/// drops the request's future when the agent's connection closes.
pub(crate) fn on_drop(parts: &http::request::Parts) -> Abandoned {
    Abandoned(parts.extensions.get::<ClientGone>().cloned())
}

pub(crate) struct Abandoned(Option<ClientGone>);

impl Abandoned {
    pub(crate) fn answered(mut self) {
        self.0 = None;
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            client.abandoned();
        }
    }
}

/// The layer: marks each request, and fires its token if the response is abandoned.
pub(crate) async fn watch(mut request: Request, next: Next) -> Response {
    let client = ClientGone::default();
    request.extensions_mut().insert(client.clone());
    let response = next.run(request).await;
    let (parts, body) = response.into_parts();
    let watched = Watched {
        inner: body.into_data_stream(),
        armed: true,
        client,
    };
    Response::from_parts(parts, Body::from_stream(watched))
}

struct Watched<S> {
    inner: S,
    /// Disarmed once the body ended by itself.
    armed: bool,
    client: ClientGone,
}

impl<S: Stream<Item = Result<Bytes, axum::Error>> + Unpin> Stream for Watched<S> {
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = Pin::new(&mut self.inner).poll_next(cx);
        if let Poll::Ready(None) = next {
            self.armed = false;
        }
        next
    }
}

impl<S> Drop for Watched<S> {
    fn drop(&mut self) {
        if self.armed {
            self.client.abandoned();
        }
    }
}
