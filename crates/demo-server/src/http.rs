//! Serving the desk over Streamable HTTP at `/mcp`.
//!
//! rmcp's `StreamableHttpService` builds a desk per legacy session, and per
//! request for 2026-07-28 clients (that revision has no sessions), which is why
//! the factory shares one [`TicketStore`]. The service checks the `Host` header
//! against loopback names by default, which suits a server bound to 127.0.0.1.

use std::{io, net::SocketAddr, sync::Arc};

use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::{TicketDesk, TicketStore};

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

/// A running HTTP server. Dropping it stops the server.
#[derive(Debug)]
pub struct HttpServer {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: Option<JoinHandle<io::Result<()>>>,
}

impl HttpServer {
    /// The address actually bound (useful after binding port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{MCP_PATH}", self.addr)
    }

    /// Runs until the server stops (it stops only on error or [`Self::shutdown`]).
    pub async fn wait(mut self) -> io::Result<()> {
        match self.task.take() {
            Some(task) => task.await.unwrap_or_else(|e| Err(io::Error::other(e))),
            None => Ok(()),
        }
    }

    /// Stops accepting requests, ends every session and waits for the server task.
    pub async fn shutdown(self) -> io::Result<()> {
        self.shutdown.cancel();
        self.wait().await
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Serves desks on `store` at `http://addr/mcp`.
pub async fn serve_http(addr: SocketAddr, store: TicketStore) -> io::Result<HttpServer> {
    serve_http_with(addr, move || TicketDesk::new(store.clone())).await
}

/// Serves desks made by `make_desk` (called per legacy session, or per request
/// for 2026-07-28 clients) at `http://addr/mcp`.
pub async fn serve_http_with(
    addr: SocketAddr,
    make_desk: impl Fn() -> TicketDesk + Send + Sync + 'static,
) -> io::Result<HttpServer> {
    let shutdown = CancellationToken::new();
    let config =
        StreamableHttpServerConfig::default().with_cancellation_token(shutdown.child_token());
    let service: StreamableHttpService<TicketDesk, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(make_desk()), Arc::default(), config);
    let router = axum::Router::new().nest_service(MCP_PATH, service);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let stop = shutdown.clone();
    let task = tokio::spawn(async move {
        // Two writes per SSE answer (priming event, result): without TCP_NODELAY the second
        // waits for the client's delayed ACK, ~40 ms on a kept-alive connection.
        let listener = axum::serve::ListenerExt::tap_io(listener, |stream| {
            let _ = stream.set_nodelay(true);
        });
        axum::serve(listener, router)
            .with_graceful_shutdown(async move { stop.cancelled_owned().await })
            .await
    });
    Ok(HttpServer {
        addr,
        shutdown,
        task: Some(task),
    })
}
