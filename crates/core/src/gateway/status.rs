//! The gateway as the app runs it, for the "Connect agents" page.

use serde::Serialize;

/// The gateway as the app runs it, for the "Connect agents" page.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct GatewayInfo {
    pub enabled: bool,
    /// Accepting agents now (false when disabled, paused, or the port could not be bound).
    pub listening: bool,
    pub paused: bool,
    /// Why it is not listening, for the person (e.g. the port is taken).
    pub error: Option<String>,
    /// `http://127.0.0.1:PORT`
    pub url: String,
    /// The older shared token's file (the built-in agent `shared`).
    pub token_path: String,
    pub servers: Vec<GatewayServer>,
    /// The agents and their tokens (never the tokens themselves).
    pub agents: Vec<super::AgentView>,
    /// Requests refused lately (a wrong or revoked token, an unknown server...), newest first:
    /// agent hosts say only "Failed to connect".
    pub refusals: Vec<super::refusals::GatewayRefusal>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct GatewayServer {
    pub name: String,
    /// Where agents reach this server: `{url}/mcp/{name}`.
    pub url: String,
}
