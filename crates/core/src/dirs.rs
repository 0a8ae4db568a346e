//! Where Countersign keeps its files, per platform conventions.
//!
//! `directories` is the field's standard for XDG (Linux), Known Folders (Windows) and
//! Application Support (macOS); hand-rolling `$XDG_CONFIG_HOME` fallbacks gets edge cases wrong.

use std::path::PathBuf;

fn project() -> Option<directories::ProjectDirs> {
    directories::ProjectDirs::from("", "", "countersign")
}

/// `~/.config/countersign` on Linux.
pub fn config_dir() -> Option<PathBuf> {
    project().map(|p| p.config_dir().to_owned())
}

/// `~/.local/share/countersign` on Linux: the audit log lives here.
pub fn data_dir() -> Option<PathBuf> {
    project().map(|p| p.data_dir().to_owned())
}

/// Countersign's own directories (config and data; the same one on some platforms), which
/// only the user may read (`private_fs`).
pub fn own_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = [config_dir(), data_dir()].into_iter().flatten().collect();
    dirs.dedup();
    dirs
}

/// The lock only one running Countersign holds (`private_fs::lock_exclusive`).
pub fn instance_lock_path() -> Option<PathBuf> {
    data_dir().map(|d| d.join("countersign.lock"))
}

/// The audit log's default place.
pub fn audit_log_path() -> Option<PathBuf> {
    data_dir().map(|d| d.join("audit.jsonl"))
}

/// The person's in-app preferences (`settings.rs`), beside the config.
pub fn settings_path() -> Option<PathBuf> {
    config_dir().map(|d| d.join("settings.json"))
}

/// Where the running app says where its gateway listens (`gateway::Discovery`), for
/// `countersign-bridge`. Removed when the app quits.
pub fn gateway_file() -> Option<PathBuf> {
    data_dir().map(|d| d.join("gateway.json"))
}

/// The gateway's bearer token, readable by the user only. Kept across runs so that agent
/// configs pasted once keep working.
pub fn gateway_token_path() -> Option<PathBuf> {
    data_dir().map(|d| d.join("gateway-token"))
}

/// The record of agents' config files rewritten to route through the gateway, for the undo
/// (`agents`).
pub fn rewrites_path() -> Option<PathBuf> {
    data_dir().map(|d| d.join("rewrites.json"))
}
