//! Countersign's core: everything that is not GUI. The Tauri shell wires these pieces together;
//! nothing here knows about windows.
//!
//! - [`config`]: which servers to connect to.
//! - [`session`]: one supervised MCP client session per server.
//! - [`handler`]: what a session declares and how a server's questions reach the broker.
//! - [`broker`]: where questions to the person wait and end, exactly once.
//! - [`schema`]: the elicitation form schema, and the verdict on an answer.
//! - [`audit`]: every question and outcome, on disk before the answer goes out.
//! - [`notice`]: what a desktop notification says, a burst coalesced into one.
//! - [`settings`]: the person's in-app preferences (muted servers, Always allow).
//! - [`gateway`]: agents reach their servers through Countersign; the approval gate.
//! - [`clients`]: the agents' own config files: import their servers, route them through the gateway.

pub mod app;
pub mod approval;
pub mod ask;
pub mod audit;
pub mod broker;
mod child;
pub mod clients;
pub mod config;
pub mod dirs;
pub mod gateway;
pub mod handler;
pub mod history;
pub mod notice;
pub mod oauth;
pub mod private_fs;
pub mod raw;
pub mod schema;
pub mod sampling;
pub mod session;
pub mod settings;
pub mod task;
pub mod url_policy;
pub mod url_required;

pub use app::{App, AppError};
pub use ask::{
    Answer, AnswerError, Ask, AskEvent, AskId, AskKind, Asker, CancelReason, Endpoint, Outcome,
};
pub use audit::AuditLog;
pub use broker::{Broker, NewAsk, PendingAsk};
pub use config::{LoadedConfig, ServerConfig};
pub use session::{SessionError, SessionEvent, SessionManager, SessionState};
