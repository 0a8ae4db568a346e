//! Countersign's demo MCP server: a small ticket desk that really elicits.
//!
//! It exists so that Countersign's default config has something to talk to and
//! so that tests can drive every kind of question a server can ask (a
//! destructive-action confirmation, a form with every field kind, a URL, a
//! question that times out, a server that dies mid-question) over stdio or
//! Streamable HTTP, on legacy sessions (`elicitation/create`) and on 2026-07-28
//! sessions (multi round-trip requests), and then check the effect on the
//! tickets directly through [`TicketStore`].
//!
//! In-process use:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use countersign_demo_server::{TicketDesk, TicketStore};
//! use rmcp::ServiceExt;
//!
//! let store = TicketStore::seeded();
//! let (server_io, client_io) = tokio::io::duplex(64 * 1024);
//! let server = TicketDesk::new(store.clone()).serve(server_io).await?;
//! // ... connect an rmcp client to `client_io`, call tools, check `store.ids()`.
//! # drop((server, client_io)); Ok(()) }
//! ```

mod ask;
mod desk;
mod http;
pub mod questions;
mod store;
pub mod tools;

pub use desk::{ANSWER_TIMEOUT, SERVER_NAME, TicketDesk, replies};
pub use http::{HttpServer, MCP_PATH, serve_http, serve_http_with};
pub use store::{SEED_TICKETS, Ticket, TicketStore};

use rmcp::{ServiceExt, service::ServerInitializeError};

/// Why serving a connection ended badly.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("the client never completed the MCP handshake: {0}")]
    Initialize(Box<ServerInitializeError>),
    #[error("the connection task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// Serves `desk` on this process's stdin/stdout until the client goes away.
pub async fn serve_stdio(desk: TicketDesk) -> Result<(), ServeError> {
    let running = desk
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| ServeError::Initialize(Box::new(e)))?;
    running.waiting().await?;
    Ok(())
}
