//! Countersign's core: everything that is not GUI. The Tauri shell wires these pieces together;
//! nothing here knows about windows.
//!
//! - [`config`]: which servers to connect to.
//! - [`session`]: one supervised MCP client session per server.
//! - [`handler`]: what a session declares and how a server's questions reach the broker.
//! - [`broker`]: where questions to the person wait and end, exactly once.
//! - [`schema`]: the elicitation form schema, and the verdict on an answer.
//! - [`audit`]: every question and outcome, on disk before the answer goes out.
//! - [`notification`]: what a desktop notification says, a burst coalesced into one.
//! - [`settings`]: the person's in-app preferences (muted servers, Always allow).
//! - [`gateway`]: agents reach their servers through Countersign; the approval gate.
//! - [`clients`]: the agents' own config files: import their servers, route them through the gateway.

pub mod agents;
pub mod app;
pub mod ask;
pub mod config;
pub mod dirs;
pub mod gateway;
pub mod mcp;
pub mod notification;
pub mod private_fs;
pub mod session;
pub mod settings;

pub use app::{App, AppError};
pub use ask::audit::AuditLog;
pub use ask::broker::{Broker, NewAsk, PendingAsk};
pub use ask::{
    Answer, AnswerError, Ask, AskEvent, AskId, AskKind, Asker, CancelReason, Endpoint, Outcome,
};
pub use config::{LoadedConfig, ServerConfig};
pub use session::{SessionError, SessionEvent, SessionManager, SessionState};
