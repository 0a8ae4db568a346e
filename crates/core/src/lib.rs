//! Countersign's core: everything that is not GUI. The Tauri shell wires these pieces together;
//! nothing here knows about windows. ARCHITECTURE.md draws the rooms and what flows between
//! them; no room uses one above it (`tests/architecture.rs`).
//!
//! - [`ask`]: the person's side: what an ask is, the broker where it waits and ends exactly
//!   once, the audit log, the form schema, URL policy, remembered approvals.
//! - [`mcp`]: the client side on the wire, shared by sessions and the gateway.
//! - [`session`]: the app's own supervised session per configured server.
//! - [`gateway`]: agents reach their servers through Countersign; the approval gate.
//! - [`agents`]: the agent hosts and their own config files: import, route through the
//!   gateway, the snippets to paste.
//! - [`config`], [`settings`]: which servers to connect to; the person's in-app choices.
//! - [`notification`]: what a desktop notification says, a burst coalesced into one.
//! - [`idle_memory`]: the code a tray app is not running, given back to the kernel.
//! - [`app`]: the facade the shell calls.

pub mod agents;
pub mod app;
pub mod ask;
pub mod config;
pub mod dirs;
#[cfg(test)]
mod fuzzing;
pub mod gateway;
#[cfg(target_os = "linux")]
pub mod idle_memory;
pub mod mcp;
pub mod notification;
pub mod private_fs;
mod reach;
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

/// Cuts `text` to at most `max` bytes, at a character's boundary; whether it was cut. (Text
/// from a server or a process is shown and kept within bounds in several places.)
pub(crate) fn cut_to(text: &mut String, max: usize) -> bool {
    if text.len() <= max {
        return false;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    true
}

/// Locks `m`, also after a thread panicked holding it: every value behind these locks stays
/// whole between statements, so a panic elsewhere must not take the app down with it.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
