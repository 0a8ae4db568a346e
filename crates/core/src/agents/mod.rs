//! The agents' own config files (Claude Desktop, Claude Code, Cursor, VS Code, Gemini CLI,
//! Codex): importing the MCP servers they list into Countersign's config, and rewriting one so
//! that it reaches those servers through Countersign's gateway, with a backup and an undo.
//!
//! A top-level module rather than part of `gateway`: it is about other programs' files on this
//! machine, and feeds two things: Countersign's config (import) and the agents' routes through
//! the gateway (rewrite). Nothing in it runs while agents are being served, and it needs from
//! the gateway only the shape of an entry ([`crate::agents::connect::gateway_entry`]), its
//! address and token.
//!
//! Everything read from those files is the person's or another program's and may be anything:
//! it is parsed, never trusted to be well formed, and every write is previewed first, backed
//! up, and atomic. Previews are kept here as plans; the write that follows carries out exactly
//! the plan the person saw (or refuses, when a file changed in between).

mod codex;
pub mod connect;
mod files;
mod health;
mod import;
pub mod jsonc;
mod read;
mod rewrite;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::config::{ServerConfig, TransportConfig};
pub use health::HostCheck;
pub use import::{
    ImportCandidate, ImportPreview, ImportResult, ImportStatus, ImportedServer, Skipped,
};
pub use rewrite::{
    RewritePreview, RewriteRecord, RewriteResult, RewriteView, RouteChange, UndoResult,
};

/// An agent host whose MCP config file Countersign knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
pub enum ClientKind {
    #[serde(rename = "claudeDesktop")]
    ClaudeDesktop,
    #[serde(rename = "claudeCode")]
    ClaudeCode,
    #[serde(rename = "cursor")]
    Cursor,
    #[serde(rename = "vscode")]
    VsCode,
    /// Gemini CLI (`~/.gemini/settings.json`; `type: http` with `url`, or the older `httpUrl`,
    /// is Streamable HTTP; a `url` alone is SSE).
    #[serde(rename = "gemini")]
    Gemini,
    /// Codex (`~/.codex/config.toml`, TOML: `codex.rs`).
    #[serde(rename = "codex")]
    Codex,
}

impl ClientKind {
    pub const ALL: [ClientKind; 6] = [
        ClientKind::ClaudeDesktop,
        ClientKind::ClaudeCode,
        ClientKind::Cursor,
        ClientKind::VsCode,
        ClientKind::Gemini,
        ClientKind::Codex,
    ];

    pub fn title(self) -> &'static str {
        match self {
            ClientKind::ClaudeDesktop => "Claude Desktop",
            ClientKind::ClaudeCode => "Claude Code",
            ClientKind::Cursor => "Cursor",
            ClientKind::VsCode => "VS Code",
            ClientKind::Gemini => "Gemini CLI",
            ClientKind::Codex => "Codex",
        }
    }

    /// Appended to a server's name when Countersign already has a different server by it.
    pub fn suffix(self) -> &'static str {
        match self {
            ClientKind::ClaudeDesktop => "claude-desktop",
            ClientKind::ClaudeCode => "claude-code",
            ClientKind::Cursor => "cursor",
            ClientKind::VsCode => "vscode",
            ClientKind::Gemini => "gemini",
            ClientKind::Codex => "codex",
        }
    }

    /// The key the servers are under.
    pub fn servers_key(self) -> &'static str {
        match self {
            ClientKind::VsCode => "servers",
            ClientKind::Codex => "mcp_servers",
            ClientKind::ClaudeDesktop
            | ClientKind::ClaudeCode
            | ClientKind::Cursor
            | ClientKind::Gemini => "mcpServers",
        }
    }

    /// How this host's file names a server reached through the gateway, for route-through.
    pub fn entry_shape(self) -> crate::agents::connect::EntryShape {
        use crate::agents::connect::EntryShape;
        match self {
            ClientKind::ClaudeDesktop => EntryShape::Bridge,
            ClientKind::Cursor => EntryShape::Http,
            // `claude mcp add --transport http` and `gemini mcp add --transport http` write
            // the type (Gemini reads a `url` without it as SSE); VS Code needs it.
            ClientKind::ClaudeCode | ClientKind::VsCode | ClientKind::Gemini => {
                EntryShape::TypedHttp
            }
            ClientKind::Codex => EntryShape::CodexHttp,
        }
    }
}

/// Where each host keeps its user-wide MCP config (Linux): Claude Desktop and VS Code under
/// the XDG config dir (`~/.config`), Claude Code, Cursor, Gemini CLI and Codex in dot-files in
/// the home dir. Claude Code's per-project servers (`projects.<path>.mcpServers` in the same
/// file, `claude mcp add`'s default scope) are read with their project, and Gemini CLI's project
/// settings from the folders it lists (`read::gemini_projects`); Cursor's and VS Code's
/// workspace files are not: which projects there are is nowhere to be found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Places {
    pub home: PathBuf,
    pub config_home: PathBuf,
}

impl Places {
    /// This user's, from the platform (`$HOME`, `$XDG_CONFIG_HOME`).
    pub fn detect() -> Option<Places> {
        directories::BaseDirs::new().map(|b| Places {
            home: b.home_dir().to_owned(),
            config_home: b.config_dir().to_owned(),
        })
    }

    /// A home directory with the default layout (tests use a temporary one).
    pub fn under_home(home: &Path) -> Places {
        Places {
            home: home.to_owned(),
            config_home: home.join(".config"),
        }
    }

    pub fn file(&self, client: ClientKind) -> PathBuf {
        match client {
            ClientKind::ClaudeDesktop => self
                .config_home
                .join("Claude")
                .join("claude_desktop_config.json"),
            ClientKind::ClaudeCode => self.home.join(".claude.json"),
            ClientKind::Cursor => self.home.join(".cursor").join("mcp.json"),
            ClientKind::VsCode => self.config_home.join("Code").join("User").join("mcp.json"),
            ClientKind::Gemini => self.home.join(".gemini").join("settings.json"),
            ClientKind::Codex => self.home.join(".codex").join("config.toml"),
        }
    }

    /// For the person to read: `~/...`.
    pub fn display(&self, path: &Path) -> String {
        files::display(path, &self.home)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{path}: not found")]
    NotFound { path: String },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    /// Broken JSON (or a shape we cannot use), located in the file.
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// The file is not what the plan or the record was made from; `force` may override it
    /// where that is offered.
    #[error("{message}")]
    Changed { message: String },
    #[error("{0}")]
    Refused(String),
}

/// The Connect page's list of hosts, their files, and the rewrites that can be undone.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct AgentConfigs {
    /// Countersign's own config, where imports go.
    pub config_path: String,
    pub files: Vec<AgentFile>,
    /// Newest first.
    pub rewrites: Vec<RewriteView>,
    /// Why the rewrites cannot be listed (a broken record file), if they cannot.
    pub rewrites_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct AgentFile {
    pub client: ClientKind,
    pub title: String,
    pub path: String,
    pub found: bool,
    /// The host's own check of its servers (`claude mcp list`, ...), when its tool is installed.
    pub check: Option<String>,
}

/// What a rewrite needs from the running gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// `http://127.0.0.1:PORT`
    pub base_url: String,
    pub token: String,
    /// How agents launch `countersign-bridge`.
    pub bridge: String,
    /// The servers the running gateway serves (it reads the config at start only).
    pub served: Vec<String>,
}

/// How many previews are kept for the write that may follow.
const PLANS_KEPT: usize = 16;

#[derive(Default)]
struct Plans {
    next: u64,
    import: VecDeque<(u64, import::ImportPlan)>,
    rewrite: VecDeque<(u64, rewrite::RewritePlan)>,
}

/// The agents' config files as this user has them. Cheap to clone.
#[derive(Clone)]
pub struct Clients {
    places: Places,
    /// Countersign's own config file (the one the app runs with).
    config_path: PathBuf,
    /// The record of rewrites (`rewrites.json` in Countersign's data dir); `None`: no rewrites.
    records_path: Option<PathBuf>,
    /// The gateway's port: entries that point at it are already routed through Countersign.
    gateway_port: u16,
    plans: Arc<Mutex<Plans>>,
    /// Where the hosts' command-line tools are looked for (the app's own `PATH`).
    path: Option<std::ffi::OsString>,
}

impl Clients {
    pub fn new(
        places: Places,
        config_path: PathBuf,
        records_path: Option<PathBuf>,
        gateway_port: u16,
    ) -> Self {
        Clients {
            places,
            config_path,
            records_path,
            gateway_port,
            plans: Arc::default(),
            path: std::env::var_os("PATH"),
        }
    }

    /// Looks for the hosts' tools on `path` instead of the app's `PATH` (tests).
    pub fn with_path(mut self, path: std::ffi::OsString) -> Self {
        self.path = Some(path);
        self
    }

    /// Runs `client`'s own check of its servers and returns what it printed.
    pub async fn check_host(&self, client: ClientKind) -> Result<HostCheck, ClientError> {
        health::run(client, &self.places.home, self.path.as_ref()).await
    }

    /// This user's files, `config_path` as the app runs with it.
    pub fn detect(config_path: PathBuf, gateway_port: u16) -> Option<Self> {
        Places::detect().map(|places| {
            Clients::new(
                places,
                config_path,
                crate::dirs::rewrites_path(),
                gateway_port,
            )
        })
    }

    pub fn overview(&self) -> AgentConfigs {
        let files = ClientKind::ALL
            .iter()
            .map(|&client| {
                let path = self.places.file(client);
                AgentFile {
                    client,
                    title: client.title().into(),
                    check: health::available(client, self.path.as_ref()),
                    found: path.is_file(),
                    path: self.places.display(&path),
                }
            })
            .collect();
        let (rewrites, rewrites_error) = match self.rewrites() {
            Ok(r) => (r, None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        AgentConfigs {
            config_path: self.places.display(&self.config_path),
            files,
            rewrites,
            rewrites_error,
        }
    }

    fn remember<T>(
        &self,
        pick: impl FnOnce(&mut Plans) -> &mut VecDeque<(u64, T)>,
        plan: T,
    ) -> u64 {
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        plans.next += 1;
        let id = plans.next;
        let list = pick(&mut plans);
        if list.len() == PLANS_KEPT {
            list.pop_front();
        }
        list.push_back((id, plan));
        id
    }

    fn take_plan<T>(
        &self,
        pick: impl FnOnce(&mut Plans) -> &mut VecDeque<(u64, T)>,
        id: u64,
    ) -> Result<T, ClientError> {
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        let list = pick(&mut plans);
        let at = list
            .iter()
            .position(|(i, _)| *i == id)
            .ok_or_else(expired)?;
        list.remove(at).map(|(_, plan)| plan).ok_or_else(expired)
    }

    fn put_back<T>(
        &self,
        pick: impl FnOnce(&mut Plans) -> &mut VecDeque<(u64, T)>,
        id: u64,
        plan: T,
    ) {
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        pick(&mut plans).push_back((id, plan));
    }
}

fn expired() -> ClientError {
    ClientError::Refused("this preview is no longer available; open it again".into())
}

/// A host's entry in Countersign's own words: only what says which server it is and how to
/// reach it (`SERVER_KEYS`). Where the host says it its own way, it is translated (Codex: see
/// `codex::in_our_words`; Gemini CLI's older `httpUrl`, Streamable HTTP, becomes `type: http`
/// with `url`, and its `url` without a type, SSE, becomes `type: sse`, which Countersign then
/// declines, saying why). Everything else is left behind: a host's own settings (Gemini's
/// `trust`, which skips its confirmations, is not Countersign's `trusted`) mean nothing here,
/// and Countersign's own approval settings (`trusted`, `toolPolicy`, `readPolicy`, `agentRoots`, waits) are
/// the person's to set in Countersign, never something an install snippet or a repository's
/// settings file slips in through an import the preview does not show.
pub(crate) fn in_our_words(client: ClientKind, value: serde_json::Value) -> serde_json::Value {
    let serde_json::Value::Object(mut entry) = value else {
        return value;
    };
    if client == ClientKind::Codex {
        return codex::in_our_words(entry);
    }
    if client == ClientKind::Gemini {
        if let Some(url) = entry.remove("httpUrl") {
            entry.insert("type".into(), "http".into());
            entry.insert("url".into(), url);
        } else if entry.contains_key("url") && !entry.contains_key("type") {
            entry.insert("type".into(), "sse".into());
        }
    }
    entry.retain(|key, _| SERVER_KEYS.contains(&key.as_str()));
    serde_json::Value::Object(entry)
}

/// The host's own settings on `client`'s entry `value` that it still applies once the entry is
/// routed through the gateway, so a route-through keeps them on the routed entry: the tools it
/// lets the agent call (Gemini CLI's `includeTools` and `excludeTools`, Codex's `enabled_tools`
/// and `disabled_tools`, which each host applies to any server, URL ones included; dropping
/// them would let the agent call tools the person had excluded) and Codex's timeouts, which
/// hold for a URL as for a command. Gemini's `trust` is not kept: Countersign asks instead.
pub(crate) fn kept_when_routed(
    client: ClientKind,
    value: &serde_json::Value,
) -> serde_json::Map<String, serde_json::Value> {
    let keys: &[&str] = match client {
        ClientKind::Gemini => &["includeTools", "excludeTools"],
        ClientKind::Codex => &[
            "enabled_tools",
            "disabled_tools",
            "startup_timeout_sec",
            "tool_timeout_sec",
        ],
        _ => &[],
    };
    keys.iter()
        .filter_map(|&key| Some((key.to_owned(), value.get(key)?.clone())))
        .collect()
}

/// The keys of a host's entry that Countersign takes: which server, how to start or reach
/// it, whether it is off, how to sign in to it (`oauth`, as Claude Code and Gemini CLI write
/// it), and `envFile` and `serverUrl`, kept to say why such an entry cannot be imported.
const SERVER_KEYS: [&str; 11] = [
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "disabled",
    "oauth",
    "envFile",
    "serverUrl",
];

/// How a client's entry would load in Countersign: the server, `None` when it is marked
/// `disabled`, or why it cannot load.
pub(crate) fn as_countersign(
    name: &str,
    value: &serde_json::Value,
) -> Result<Option<ServerConfig>, String> {
    let mut servers = serde_json::Map::new();
    servers.insert(name.to_owned(), value.clone());
    let text = serde_json::json!({ "mcpServers": servers }).to_string();
    let loaded = crate::config::parse(Path::new(""), &text);
    if let Some(e) = loaded.errors.first() {
        return Err(e.message.clone());
    }
    Ok(loaded.servers.into_iter().next())
}

/// Two entries name the same server when they would start or reach the same thing.
pub(crate) fn same_server(a: &ServerConfig, b: &ServerConfig) -> bool {
    a.transport == b.transport
}

/// What the entry runs or reaches, for a preview: the command line as a shell would read it,
/// with its directory and environment (`cd DIR && NAME=value command args`: an import starts
/// it at once, and `NODE_OPTIONS=--require ./x.js` beside a harmless command is what a cloned
/// project's settings would slip in), or the URL with the names of its headers. Values of
/// variables whose names say they hold a credential are left out (`…`).
pub(crate) fn transport_summary(name: &str, value: &serde_json::Value) -> String {
    use crate::agents::connect::shell_quote;
    if let Ok(Some(server)) = as_countersign(name, value) {
        let sign_in = sign_in_summary(&server.oauth);
        let transport = match server.transport {
            TransportConfig::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let cd = cwd.map(|dir| format!("cd {} && ", shell_quote(&dir.to_string_lossy())));
                let env = env.iter().map(|(name, value)| {
                    // What chooses the code that runs is shown as it is, whatever it holds:
                    // hiding it would hide what the import starts.
                    // (A URL's `user:password@` chooses nothing: left out.)
                    let value = if chooses_what_runs(name) {
                        shell_quote(&without_url_credentials(value))
                    } else if holds_a_credential(name) {
                        "…".to_owned()
                    } else {
                        shell_quote(&without_url_credentials(value))
                    };
                    format!("{}={value}", shell_quote(name))
                });
                cd.into_iter()
                    .chain(std::iter::once(
                        env.chain(
                            std::iter::once(&command)
                                .chain(args.iter())
                                .map(|a| shell_quote(a)),
                        )
                        .collect::<Vec<_>>()
                        .join(" "),
                    ))
                    .collect()
            }
            TransportConfig::Http { url, headers } if headers.is_empty() => url,
            TransportConfig::Http { url, headers } => format!(
                "{url} (headers: {})",
                headers.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        };
        return match sign_in {
            Some(sign_in) => format!("{transport} (sign-in: {sign_in})"),
            None => transport,
        };
    }
    let text = |k: &str| value.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    match (text("command"), text("url"), text("serverUrl")) {
        (Some(command), _, _) => {
            let args = value
                .get("args")
                .and_then(|a| a.as_array())
                .map(|a| {
                    a.iter()
                        .map(|v| match v.as_str() {
                            Some(s) => crate::agents::connect::shell_quote(s),
                            None => v.to_string(),
                        })
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            std::iter::once(crate::agents::connect::shell_quote(&command))
                .chain(args)
                .collect::<Vec<_>>()
                .join(" ")
        }
        (None, Some(url), _) | (None, None, Some(url)) => url,
        _ => "(no command or URL)".into(),
    }
}

/// How an entry's `oauth` block would have Countersign sign in, when it says anything: the
/// client the person would consent to, the access asked for, where the sign-in comes back. A
/// project's settings could name a client of someone else's, or more access.
fn sign_in_summary(oauth: &crate::config::OAuthConfig) -> Option<String> {
    let mut said = Vec::new();
    if let Some(id) = &oauth.client_id {
        said.push(format!("client {id}"));
    }
    if oauth.client_secret.is_some() {
        said.push("a client secret".to_owned());
    }
    if let Some(document) = &oauth.client_metadata_url {
        said.push(format!("client described at {document}"));
    }
    if !oauth.scopes.is_empty() {
        said.push(format!("access {}", oauth.scopes.join(" ")));
    }
    if let Some(port) = oauth.callback_port {
        said.push(format!("back to port {port}"));
    }
    (!said.is_empty()).then(|| said.join(", "))
}

/// Whether an environment variable's name says it holds a credential. The words are matched
/// by segment of the name (between `_`, `-` or `.`), not anywhere in it: `PAT` names a personal access token
/// in `GITHUB_PAT`, not in `PATH`. A segment that is or ends with a word counts (`API_KEY`,
/// `APIKEY`, `GH_TOKEN`); a word of four letters or more also counts inside a segment
/// (`PGPASSWORD`, `AUTHTOKEN`), where a shorter one would match ordinary words (`PATTERN`).
fn holds_a_credential(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    // A variable's name says more than a flag's: these also name connection strings and
    // personal access tokens there (a flag such as `--path` would match `PAT`).
    let segments: Vec<&str> = name.split(['_', '-', '.']).collect();
    crate::mcp::connect::CREDENTIAL_WORDS
        .iter()
        .chain(&["SESSION", "PAT", "DSN", "CONN"])
        .any(|word| {
            segments.iter().any(|segment| {
                segment.ends_with(word) || (word.len() >= 4 && segment.contains(word))
            })
        })
}

/// Whether an environment variable chooses what code a command runs (where programs are
/// looked for, what an interpreter loads first): the preview shows its value in full, since a
/// repository's settings could point it at the repository's own code (`PATH=./bin:...` beside
/// `npx`).
fn chooses_what_runs(name: &str) -> bool {
    const NAMES: [&str; 26] = [
        "PATH",
        "ENV",
        "BASH_ENV",
        "ZDOTDIR",
        "HOME",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PYTHONUSERBASE",
        "CLASSPATH",
        "JAVA_TOOL_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "_JAVA_OPTIONS",
        "PERL5LIB",
        "PERLLIB",
        "PERL5OPT",
        "RUBYLIB",
        "RUBYOPT",
        "GEM_HOME",
        "GEM_PATH",
        "GOFLAGS",
        "RUSTC_WRAPPER",
        "GIT_EXEC_PATH",
        "GIT_CONFIG_GLOBAL",
    ];
    /// Families by the start of their names: the dynamic linker's (`LD_PRELOAD`, macOS's
    /// `DYLD_INSERT_LIBRARIES`); git's configuration given in the environment
    /// (`GIT_CONFIG_KEY_0=core.fsmonitor`, `GIT_CONFIG_PARAMETERS`) and its ssh command; npm's
    /// (`npm_config_script_shell`, the registry it installs from).
    const STARTS: [&str; 5] = ["LD_", "DYLD_", "GIT_CONFIG", "GIT_SSH", "NPM_CONFIG_"];
    /// And by their ends: programs run for a password (`GIT_ASKPASS`, `SSH_ASKPASS`).
    const ENDS: [&str; 1] = ["ASKPASS"];
    /// Single names beyond those: the commands other programs start, and where packages are
    /// fetched from (`uvx` and `pip` install what these indexes serve).
    const MORE: [&str; 11] = [
        "GIT_PROXY_COMMAND",
        "GIT_EXTERNAL_DIFF",
        "GIT_PAGER",
        "PAGER",
        "EDITOR",
        "VISUAL",
        "SHELL",
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "UV_INDEX_URL",
        "UV_EXTRA_INDEX_URL",
    ];
    let name = name.to_ascii_uppercase();
    NAMES.contains(&name.as_str())
        || MORE.contains(&name.as_str())
        || STARTS.iter().any(|start| name.starts_with(start))
        || ENDS.iter().any(|end| name.ends_with(end))
}

/// `value` with the credentials of each URL in it (`scheme://user:password@`) left out
/// (`scheme://…@`), and everything else as it is: an `@` elsewhere (`a@b`, `pkg@1.2`) is no
/// credential.
fn without_url_credentials(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let authority = after
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(after.len());
        match after[..authority].rfind('@') {
            Some(user_end) => {
                out.push('…');
                rest = &after[user_end..];
            }
            None => rest = after,
        }
    }
    out.push_str(rest);
    out
}

/// The entry reaches Countersign's own gateway (an HTTP URL on this machine's gateway port
/// under `/mcp/`, or `countersign-bridge`).
pub(crate) fn is_routed(value: &serde_json::Value, gateway_port: u16) -> bool {
    let command = value.get("command").and_then(|c| c.as_str()).unwrap_or("");
    let url = value
        .get("url")
        .or_else(|| value.get("serverUrl"))
        .and_then(|u| u.as_str());
    crate::config::runs_the_bridge(command)
        || url.is_some_and(|url| crate::config::is_gateway_url(url, gateway_port))
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The preview shows what an import would start: its directory and environment too, with
    /// credentials' values left out, and the names of a URL's headers.
    #[test]
    fn the_preview_shows_the_directory_and_environment_an_import_would_start_with() {
        let entry = serde_json::json!({
            "command": "npx",
            "args": ["-y", "server-filesystem", "."],
            "cwd": "/home/me/cloned repo",
            "env": {"NODE_OPTIONS": "--require ./x.js", "GITHUB_TOKEN": "ghp_secret", "api_key": "k",
                "PG": "postgres://u:hunter2@db/x"}
        });
        assert_eq!(
            transport_summary("fs", &entry),
            "cd '/home/me/cloned repo' && GITHUB_TOKEN=… NODE_OPTIONS='--require ./x.js' \
             PG='postgres://…@db/x' api_key=… npx -y server-filesystem ."
        );
        let remote = serde_json::json!({"url": "https://a.example/mcp",
            "headers": {"Authorization": "Bearer t", "X-Team": "x"}});
        assert_eq!(
            transport_summary("r", &remote),
            "https://a.example/mcp (headers: Authorization, X-Team)"
        );
        // How it would sign in: the client and the access the person would consent to.
        let signed = serde_json::json!({"url": "https://a.example/mcp", "oauth": {
            "clientId": "their-app", "clientSecret": "s3cret", "scopes": ["repo", "admin:org"],
            "callbackPort": 8765}});
        let shown = transport_summary("o", &signed);
        assert_eq!(
            shown,
            "https://a.example/mcp (sign-in: client their-app, a client secret, access repo \
             admin:org, back to port 8765)"
        );
        assert!(!shown.contains("s3cret"));
    }

    /// What chooses the code that runs is never left out of the preview: `PATH` is no personal
    /// access token (`PAT`), and an `@` outside a URL's credentials is no credential. A
    /// credential's value, and a URL's `user:password@`, still are left out.
    #[test]
    fn the_preview_shows_what_chooses_the_code_and_hides_only_credentials() {
        use serde_json::json;
        let path = json!({"command": "npx", "env": {"PATH": "/r/bin"}});
        assert_eq!(transport_summary("p", &path), "PATH=/r/bin npx");
        let node = json!({"command": "node", "env": {"NODE_OPTIONS": "--require ./x.js a@b"}});
        assert_eq!(
            transport_summary("n", &node),
            "NODE_OPTIONS='--require ./x.js a@b' node"
        );
        let secrets = json!({"command": "s", "env": {
            "GITHUB_PAT": "ghp_1", "API_KEY": "k2", "PGPASSWORD": "pw3", "OPENAI_APIKEY": "k4",
            "DB": "postgres://u:pw5@h/db", "PATTERN": "*.rs"
        }});
        let shown = transport_summary("s", &secrets);
        assert_eq!(
            shown,
            "API_KEY=… DB='postgres://…@h/db' GITHUB_PAT=… OPENAI_APIKEY=… PATTERN='*.rs' \
             PGPASSWORD=… s"
        );
        for secret in ["ghp_1", "k2", "pw3", "k4", "pw5"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        // Names that look like credentials (`PASS`, `KEY`) but choose what runs: in full.
        let git = json!({"command": "uvx", "args": ["mcp-server-git"], "env": {
            "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.fsmonitor",
            "GIT_CONFIG_VALUE_0": "./.x", "GIT_ASKPASS": "./.p", "SSH_ASKPASS": "./.q",
            "UV_INDEX_URL": "https://u:pw6@pkgs.evil.example/simple"
        }});
        assert_eq!(
            transport_summary("g", &git),
            "GIT_ASKPASS=./.p GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor \
             GIT_CONFIG_VALUE_0=./.x SSH_ASKPASS=./.q \
             UV_INDEX_URL='https://…@pkgs.evil.example/simple' uvx mcp-server-git"
        );
    }

    /// A temporary directory (a home for the tests), removed when dropped.
    pub(crate) struct TempHome(PathBuf);

    impl TempHome {
        pub(crate) fn new(tag: &str) -> Self {
            static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!(
                "cs-clients-{tag}-{}-{n}-{}",
                std::process::id(),
                files::now_ms()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("temp dir");
            TempHome(dir)
        }

        pub(crate) fn path(&self) -> &Path {
            &self.0
        }

        /// Writes `text` at `rel` (parents created) and returns the full path.
        pub(crate) fn write(&self, rel: &Path, text: &str) -> PathBuf {
            let path = self.0.join(rel);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, text).expect("write");
            path
        }
    }

    impl Drop for TempHome {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A home with Countersign's config at `~/.config/countersign/config.json`.
    pub(crate) struct Setup {
        pub home: TempHome,
        pub clients: Clients,
        pub config: PathBuf,
    }

    pub(crate) const PORT: u16 = 47717;

    pub(crate) fn setup(tag: &str, countersign_config: &str) -> Setup {
        let home = TempHome::new(tag);
        let config = home.write(
            Path::new(".config/countersign/config.json"),
            countersign_config,
        );
        let clients = Clients::new(
            Places::under_home(home.path()),
            config.clone(),
            Some(home.path().join(".local/share/countersign/rewrites.json")),
            PORT,
        );
        Setup {
            home,
            clients,
            config,
        }
    }

    impl Setup {
        pub(crate) fn client_file(&self, client: ClientKind, text: &str) -> PathBuf {
            let path = self.clients.places.file(client);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, text).expect("write");
            path
        }
    }

    #[test]
    fn each_host_has_its_file_under_the_home_dir() {
        let places = Places::under_home(Path::new("/home/me"));
        let shown: Vec<String> = ClientKind::ALL
            .iter()
            .map(|&c| places.display(&places.file(c)))
            .collect();
        assert_eq!(
            shown,
            [
                "~/.config/Claude/claude_desktop_config.json",
                "~/.claude.json",
                "~/.cursor/mcp.json",
                "~/.config/Code/User/mcp.json",
                "~/.gemini/settings.json",
                "~/.codex/config.toml"
            ]
        );
    }

    #[test]
    fn overview_lists_hosts_and_which_files_exist() {
        let s = setup("overview", "{}");
        s.client_file(ClientKind::Cursor, "{}");
        let overview = s.clients.overview();
        assert_eq!(overview.config_path, "~/.config/countersign/config.json");
        let found: Vec<(ClientKind, bool)> =
            overview.files.iter().map(|f| (f.client, f.found)).collect();
        assert_eq!(
            found,
            [
                (ClientKind::ClaudeDesktop, false),
                (ClientKind::ClaudeCode, false),
                (ClientKind::Cursor, true),
                (ClientKind::VsCode, false),
                (ClientKind::Gemini, false),
                (ClientKind::Codex, false)
            ]
        );
        assert!(overview.rewrites.is_empty());
        assert_eq!(overview.rewrites_error, None);
    }

    #[test]
    fn the_gateway_s_own_entries_are_recognised() {
        use serde_json::json;
        assert!(is_routed(
            &json!({"command": "/usr/bin/countersign-bridge", "args": ["demo"]}),
            PORT
        ));
        assert!(is_routed(
            &json!({"command": "countersign-bridge", "args": ["demo"]}),
            PORT
        ));
        assert!(is_routed(
            &json!({"type": "http", "url": "http://127.0.0.1:47717/mcp/demo"}),
            PORT
        ));
        assert!(is_routed(
            &json!({"url": "http://localhost:47717/mcp/a%20b"}),
            PORT
        ));
        assert!(is_routed(
            &json!({"serverUrl": "http://[::1]:47717/mcp/x"}),
            PORT
        ));
        assert!(!is_routed(
            &json!({"url": "http://127.0.0.1:8080/mcp/demo"}),
            PORT
        ));
        assert!(!is_routed(
            &json!({"url": "https://evil.example:47717/mcp/demo"}),
            PORT
        ));
        assert!(!is_routed(
            &json!({"url": "http://127.0.0.1:47717/other"}),
            PORT
        ));
        assert!(!is_routed(
            &json!({"command": "npx", "args": ["countersign-bridge"]}),
            PORT
        ));
        assert!(!is_routed(&json!({"url": 12}), PORT));
        assert!(!is_routed(&json!("not an object"), PORT));
    }
}
