//! What an agent's config needs to reach a server through the gateway, per agent host.
//!
//! Each host has its own config shape; the person should be able to paste a block as is.
//! Hosts that speak Streamable HTTP get the URL and the agent's token in a header; Claude
//! Desktop, which launches only commands, gets `countersign-bridge` with the agent's token in
//! its environment (`COUNTERSIGN_TOKEN`).

use serde::Serialize;
use serde_json::{Value, json};

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

/// What to paste into one agent host.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct ClientSetup {
    /// `claudeCode`, `claudeDesktop`, `cursor`, `vscode`.
    pub client: String,
    pub title: String,
    /// Where it goes, in words ("Run in a terminal", "~/.cursor/mcp.json, under mcpServers").
    pub where_to: String,
    /// `shell` or `json`.
    pub format: String,
    pub snippet: String,
    /// A sentence to read before pasting: what the token in the snippet protects.
    pub note: Option<String>,
}

/// For the snippets that carry the token itself.
const TOKEN_NOTE: &str = "This token keeps other programs and web pages from using your \
    servers through Countersign: whoever has it can act as this agent (your rules and approvals \
    still apply), so keep it private.";

/// The environment variable `countersign-bridge` takes its agent's token from.
pub const BRIDGE_TOKEN_ENV: &str = "COUNTERSIGN_TOKEN";

/// The path of a server on the gateway (its name as one path segment).
pub fn server_path(server: &str) -> String {
    let segment: String = url::form_urlencoded::byte_serialize(server.as_bytes())
        .collect::<String>()
        // form encoding writes spaces as '+', which a path does not decode.
        .replace('+', "%20");
    format!("/mcp/{segment}")
}

/// How a host's config names a server reached through the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryShape {
    /// `{"command": <bridge>, "args": [<server>], "env": {"COUNTERSIGN_TOKEN": <token>}}`:
    /// hosts that only launch commands.
    Bridge,
    /// `{"url", "headers"}` (Cursor).
    Http,
    /// `{"type": "http", "url", "headers"}` (VS Code; what `claude mcp add --transport http`
    /// writes).
    TypedHttp,
}

/// One server's entry in a host's config, reaching it through the gateway at `base_url`.
pub fn gateway_entry(
    shape: EntryShape,
    base_url: &str,
    token: &str,
    bridge: &str,
    server: &str,
) -> Value {
    let url = format!("{base_url}{}", server_path(server));
    let bearer = format!("Bearer {token}");
    match shape {
        EntryShape::Bridge => {
            json!({"command": bridge, "args": [server], "env": {BRIDGE_TOKEN_ENV: token}})
        }
        EntryShape::Http => json!({"url": url, "headers": {"Authorization": bearer}}),
        EntryShape::TypedHttp => {
            json!({"type": "http", "url": url, "headers": {"Authorization": bearer}})
        }
    }
}

/// The blocks to paste, for every server, into each host this page knows, carrying one
/// agent's `token`.
pub fn client_setups(
    base_url: &str,
    token: &str,
    bridge: &str,
    servers: &[String],
) -> Vec<ClientSetup> {
    let url = |s: &str| format!("{base_url}{}", server_path(s));
    let bearer = format!("Bearer {token}");
    let claude_code = servers
        .iter()
        .map(|s| {
            format!(
                "claude mcp add --transport http {} {} --header {}",
                shell_quote(s),
                shell_quote(&url(s)),
                shell_quote(&format!("Authorization: {bearer}"))
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let map = |shape: EntryShape| -> serde_json::Map<String, Value> {
        servers
            .iter()
            .map(|s| (s.clone(), gateway_entry(shape, base_url, token, bridge, s)))
            .collect()
    };
    let desktop = json!({"mcpServers": map(EntryShape::Bridge)});
    let cursor = json!({"mcpServers": map(EntryShape::Http)});
    let vscode = json!({"servers": map(EntryShape::TypedHttp)});
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
    vec![
        ClientSetup {
            client: "claudeCode".into(),
            title: "Claude Code".into(),
            where_to: "Run in a terminal (add --scope user to use it in every project)".into(),
            format: "shell".into(),
            snippet: claude_code,
            note: Some(TOKEN_NOTE.into()),
        },
        ClientSetup {
            client: "claudeDesktop".into(),
            title: "Claude Desktop".into(),
            where_to: "claude_desktop_config.json, merged into \"mcpServers\" (uses countersign-bridge, which sends the token)".into(),
            format: "json".into(),
            snippet: pretty(&desktop),
            note: Some(TOKEN_NOTE.into()),
        },
        ClientSetup {
            client: "cursor".into(),
            title: "Cursor".into(),
            where_to: "~/.cursor/mcp.json (or .cursor/mcp.json in a project), merged into \"mcpServers\"".into(),
            format: "json".into(),
            snippet: pretty(&cursor),
            note: Some(TOKEN_NOTE.into()),
        },
        ClientSetup {
            client: "vscode".into(),
            title: "VS Code".into(),
            where_to: ".vscode/mcp.json in a workspace (or the user mcp.json), merged into \"servers\"".into(),
            format: "json".into(),
            snippet: pretty(&vscode),
            note: Some(TOKEN_NOTE.into()),
        },
    ]
}

/// POSIX single quotes: the server name and URL are the person's own, but may hold spaces.
pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:@%+=,".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_gets_every_server_with_the_token_or_the_bridge() {
        let setups = client_setups(
            "http://127.0.0.1:47717",
            "tok",
            "/usr/bin/countersign-bridge",
            &["demo".into(), "my desk".into()],
        );
        let by = |c: &str| {
            setups
                .iter()
                .find(|s| s.client == c)
                .unwrap()
                .snippet
                .clone()
        };
        assert_eq!(
            by("claudeCode").lines().next().unwrap(),
            "claude mcp add --transport http demo http://127.0.0.1:47717/mcp/demo --header 'Authorization: Bearer tok'"
        );
        assert!(by("claudeCode").contains("'my desk' http://127.0.0.1:47717/mcp/my%20desk"));
        let desktop: Value = serde_json::from_str(&by("claudeDesktop")).unwrap();
        assert_eq!(
            desktop["mcpServers"]["my desk"],
            json!({
                "command": "/usr/bin/countersign-bridge",
                "args": ["my desk"],
                "env": {"COUNTERSIGN_TOKEN": "tok"},
            })
        );
        let cursor: Value = serde_json::from_str(&by("cursor")).unwrap();
        assert_eq!(
            cursor["mcpServers"]["demo"]["headers"]["Authorization"],
            "Bearer tok"
        );
        let vscode: Value = serde_json::from_str(&by("vscode")).unwrap();
        assert_eq!(vscode["servers"]["demo"]["type"], "http");
        assert_eq!(
            vscode["servers"]["demo"]["url"],
            "http://127.0.0.1:47717/mcp/demo"
        );
    }

    #[test]
    fn snippets_with_the_token_say_what_it_protects() {
        let setups = client_setups("http://127.0.0.1:1", "tok", "bridge", &["demo".into()]);
        for setup in &setups {
            assert!(setup.snippet.contains("tok"), "{}", setup.client);
            let note = setup.note.as_deref().unwrap_or_default();
            assert!(note.contains("keep it private"), "{}: {note}", setup.client);
        }
    }

    #[test]
    fn quotes_what_a_shell_would_split_or_expand() {
        assert_eq!(shell_quote("demo"), "demo");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote("$(rm)"), "'$(rm)'");
    }
}
