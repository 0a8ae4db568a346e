//! Agents and their tokens: an agent is whoever holds its token.
//!
//! The person names an agent ("Claude Code", "Cursor"); Countersign makes it a random token,
//! shows it once, and keeps only its SHA-256 (with an id, the name and when it was made) in
//! `agents.json` (0600, replaced atomically). The gateway's guard hashes a request's bearer
//! token once and compares the digest with every stored one without an early exit, then hands
//! the request on with a [`TokenAgent`] in its extensions: anything that decides (remembered
//! approvals, rules) keys on that, never on the name an agent declares in `clientInfo`.
//!
//! The older single token (the `gateway-token` file) is the built-in agent [`SHARED_ID`], so
//! setups pasted before keep working until the person revokes it. Revoking it is a flag in
//! `agents.json` (the file alone would be recreated at the next start) and removes the file.
//! A revocation takes effect for the next request: the store the guard reads is the one
//! revoked.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rmcp::service::{RequestContext, RoleServer};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::token;
use crate::agents::connect::ClientSetup;
use crate::lock;
use crate::private_fs;

/// The built-in agent that holds the shared `gateway-token`.
pub const SHARED_ID: &str = "shared";
pub const SHARED_NAME: &str = "Shared token (older setups)";
/// Names are the person's, shown in dialogs and lists: short enough to read at a glance.
pub const MAX_NAME_CHARS: usize = 64;
/// Agents besides the shared token; each is a file entry checked on every request.
pub const MAX_AGENTS: usize = 64;

/// The agent whose token a request carried; in the HTTP request's extensions (rmcp hands
/// the request's `http::request::Parts` to handlers through `ctx.extensions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenAgent {
    pub id: String,
    pub name: String,
}

/// The agent behind request `ctx`, when it came over HTTP through the guard.
pub(crate) fn token_agent(ctx: &RequestContext<RoleServer>) -> Option<TokenAgent> {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<TokenAgent>())
        .cloned()
}

/// An agent as the Connect page lists it (never its token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct AgentView {
    pub id: String,
    pub name: String,
    /// `None` for the shared token, whose file predates this list.
    #[ts(type = "number | null")]
    pub created_ms: Option<u64>,
    /// Last request with its token since the app started (kept in memory only).
    #[ts(type = "number | null")]
    pub last_used_ms: Option<u64>,
    /// The built-in agent of the older shared token.
    pub shared: bool,
}

/// A new agent: its token, shown this once, and what to paste into each host with it.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct CreatedAgent {
    pub agent: AgentView,
    pub token: String,
    pub clients: Vec<ClientSetup>,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("give the agent a name")]
    EmptyName,
    #[error("an agent's name can be at most {MAX_NAME_CHARS} characters")]
    NameTooLong,
    #[error("an agent's name cannot contain control characters")]
    ControlInName,
    #[error("there are already {MAX_AGENTS} agents; revoke one you no longer use to make another")]
    TooMany,
    #[error("there is no agent with id {0:?} (it may have been revoked already)")]
    NotFound(String),
    #[error("cannot make a random token: {0}")]
    Random(String),
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid agents file ({message}); fix or remove it")]
    Invalid { path: PathBuf, message: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read or create the shared token {path}: {source}")]
    SharedToken {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// `agents.json` as written.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AgentsFile {
    #[serde(default)]
    agents: Vec<StoredAgent>,
    /// The person revoked the shared token: it is not read (or made) again.
    #[serde(default)]
    shared_revoked: bool,
    /// SHA-256 of the shared token last seen, hex: a token written over the file is a new
    /// holder, as one made afresh is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shared_sha256: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredAgent {
    id: String,
    name: String,
    created_ms: u64,
    /// SHA-256 of the token, hex.
    sha256: String,
}

struct State {
    file: AgentsFile,
    /// Each agent's id and token digest, the shared token's first when it is in force.
    digests: Vec<(String, [u8; 32])>,
    last_used: HashMap<String, u64>,
}

/// The agents and their token digests, read at start and kept in step with the file.
pub struct AgentStore {
    path: PathBuf,
    shared_path: PathBuf,
    /// The shared token as read at start (empty when it was revoked before).
    shared_token: String,
    /// The shared token was made at this start (its file was missing or empty), or is another
    /// than the last start's (written over the file): whoever holds it now is not who held the
    /// one before.
    shared_token_is_new: bool,
    state: Mutex<State>,
}

impl AgentStore {
    /// Reads `path` (none yet: no agents) and, unless it was revoked, the shared token at
    /// `shared_path` (created if missing, as before agents existed).
    pub fn open(path: PathBuf, shared_path: PathBuf) -> Result<AgentStore, AgentError> {
        let file = match private_fs::read_ours(&path) {
            Ok(bytes) => {
                private_fs::tighten_path(&path);
                serde_json::from_slice::<AgentsFile>(&bytes).map_err(|e| AgentError::Invalid {
                    path: path.clone(),
                    message: e.to_string(),
                })?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => AgentsFile::default(),
            Err(source) => return Err(AgentError::Read { path, source }),
        };
        let mut digests = Vec::with_capacity(file.agents.len() + 1);
        let mut shared_token = String::new();
        let mut shared_token_is_new = false;
        if !file.shared_revoked {
            (shared_token, shared_token_is_new) =
                token::load_or_create_new(&shared_path).map_err(|source| {
                    AgentError::SharedToken {
                        path: shared_path.clone(),
                        source,
                    }
                })?;
            let held = digest(&shared_token);
            digests.push((SHARED_ID.to_owned(), held));
            let held = hex::encode(held);
            // (None: kept by a version before this was; the token it had is not known.)
            shared_token_is_new |= file
                .shared_sha256
                .as_ref()
                .is_some_and(|known| *known != held);
        }
        for agent in &file.agents {
            let parsed = parse_hex(&agent.sha256).ok_or_else(|| AgentError::Invalid {
                path: path.clone(),
                message: format!("agent {:?} has no valid sha256", agent.id),
            })?;
            digests.push((agent.id.clone(), parsed));
        }
        Ok(AgentStore {
            path,
            shared_path,
            shared_token,
            shared_token_is_new,
            state: Mutex::new(State {
                file,
                digests,
                last_used: HashMap::new(),
            }),
        })
    }

    /// The shared token as read at start; empty when it had been revoked.
    pub fn shared_token(&self) -> &str {
        &self.shared_token
    }

    /// Whether the shared token was made at this start (see `shared_token_is_new`).
    pub fn shared_token_is_new(&self) -> bool {
        self.shared_token_is_new
    }

    /// Keeps the shared token's digest, to tell at the next start whether it was replaced: only
    /// once what was allowed the one before is forgotten (`Gateway::new`), so a failure between
    /// the two leaves it to be forgotten at the next start, not kept for the new holder.
    pub fn note_shared_token(&self) -> Result<(), AgentError> {
        if self.shared_token.is_empty() {
            return Ok(());
        }
        let held = hex::encode(digest(&self.shared_token));
        let mut state = lock(&self.state);
        if state.file.shared_sha256.as_ref() == Some(&held) {
            return Ok(());
        }
        let mut file = state.file.clone();
        file.shared_sha256 = Some(held);
        self.save(&file)?;
        state.file = file;
        Ok(())
    }

    pub fn shared_token_path(&self) -> &Path {
        &self.shared_path
    }

    /// Makes an agent named `name` with a fresh token; returns it with the token, which is
    /// not kept anywhere but in what this returns.
    pub fn create(&self, name: &str) -> Result<(AgentView, String), AgentError> {
        let token = token::fresh().map_err(|e| AgentError::Random(e.to_string()))?;
        let view = self.adopt(name, &token)?;
        Ok((view, token))
    }

    /// Registers `token` (made by [`token::fresh`] for a config rewrite) as agent `name`.
    pub fn adopt(&self, name: &str, token: &str) -> Result<AgentView, AgentError> {
        let name = check_name(name)?;
        let mut state = lock(&self.state);
        if state.file.agents.len() >= MAX_AGENTS {
            return Err(AgentError::TooMany);
        }
        let mut id = fresh_id()?;
        while id == SHARED_ID || state.file.agents.iter().any(|a| a.id == id) {
            id = fresh_id()?;
        }
        let hashed = digest(token);
        let stored = StoredAgent {
            id: id.clone(),
            name,
            created_ms: now_ms(),
            sha256: hex::encode(hashed),
        };
        let mut next = state.file.clone();
        next.agents.push(stored.clone());
        // The file first: an agent that would not survive a restart is not made at all.
        self.save(&next)?;
        state.file = next;
        state.digests.push((id, hashed));
        Ok(view_of(&stored, None))
    }

    /// Every agent, the shared token first while it is in force, then oldest first.
    pub fn list(&self) -> Vec<AgentView> {
        let state = lock(&self.state);
        let mut views = Vec::with_capacity(state.file.agents.len() + 1);
        if !state.file.shared_revoked {
            views.push(AgentView {
                id: SHARED_ID.into(),
                name: SHARED_NAME.into(),
                created_ms: None,
                last_used_ms: state.last_used.get(SHARED_ID).copied(),
                shared: true,
            });
        }
        views.extend(
            state
                .file
                .agents
                .iter()
                .map(|a| view_of(a, state.last_used.get(&a.id).copied())),
        );
        views
    }

    /// Revokes agent `id`: from the next request on, its token gets 401.
    pub fn revoke(&self, id: &str) -> Result<(), AgentError> {
        let mut state = lock(&self.state);
        let mut next = state.file.clone();
        if id == SHARED_ID {
            if next.shared_revoked {
                return Err(AgentError::NotFound(id.into()));
            }
            next.shared_revoked = true;
        } else {
            let before = next.agents.len();
            next.agents.retain(|a| a.id != id);
            if next.agents.len() == before {
                return Err(AgentError::NotFound(id.into()));
            }
        }
        self.save(&next)?;
        state.file = next;
        state.digests.retain(|(known, _)| known != id);
        state.last_used.remove(id);
        drop(state);
        if id == SHARED_ID {
            // The flag is what keeps it revoked; the file would only hold a dead secret.
            if let Err(e) = std::fs::remove_file(&self.shared_path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %self.shared_path.display(), error = %e, "cannot remove the revoked shared token's file");
            }
        }
        tracing::info!(agent = %id, "agent token revoked");
        Ok(())
    }

    /// Whether agent `id`'s token is still good (not revoked).
    pub(crate) fn holds(&self, id: &str) -> bool {
        lock(&self.state)
            .digests
            .iter()
            .any(|(known, _)| known == id)
    }

    /// The agent holding `given`, if any. Hashes it once and compares with every stored
    /// digest, with no early exit, so timing tells nothing about which digest came close.
    pub fn identify(&self, given: &str) -> Option<TokenAgent> {
        let given = digest(given);
        let mut state = lock(&self.state);
        let mut found: Option<usize> = None;
        for (i, (_, known)) in state.digests.iter().enumerate() {
            if token::matches(&given, known) && found.is_none() {
                found = Some(i);
            }
        }
        let id = state.digests.get(found?)?.0.clone();
        let name = if id == SHARED_ID {
            SHARED_NAME.to_owned()
        } else {
            state.file.agents.iter().find(|a| a.id == id)?.name.clone()
        };
        state.last_used.insert(id.clone(), now_ms());
        Some(TokenAgent { id, name })
    }

    fn save(&self, file: &AgentsFile) -> Result<(), AgentError> {
        let bytes = serde_json::to_vec_pretty(file).map_err(|e| AgentError::Write {
            path: self.path.clone(),
            source: std::io::Error::other(e),
        })?;
        private_fs::write_atomic(&self.path, &bytes).map_err(|source| AgentError::Write {
            path: self.path.clone(),
            source,
        })
    }
}

/// Trimmed; refused when empty, too long, or holding control characters (which could
/// rearrange what a dialog or a log line shows).
fn check_name(name: &str) -> Result<String, AgentError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(AgentError::EmptyName);
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(AgentError::NameTooLong);
    }
    if name.chars().any(char::is_control) {
        return Err(AgentError::ControlInName);
    }
    Ok(name.to_owned())
}

fn view_of(agent: &StoredAgent, last_used_ms: Option<u64>) -> AgentView {
    AgentView {
        id: agent.id.clone(),
        name: agent.name.clone(),
        created_ms: Some(agent.created_ms),
        last_used_ms,
        shared: false,
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn parse_hex(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(text, &mut out).ok()?;
    Some(out)
}

/// 8 random bytes, hex: an id to name an agent in files and commands, not a secret.
fn fresh_id() -> Result<String, AgentError> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| AgentError::Random(e.to_string()))?;
    Ok(hex::encode(bytes))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cs-agents-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn open(dir: &Path) -> AgentStore {
        AgentStore::open(dir.join("agents.json"), dir.join("gateway-token")).unwrap()
    }

    #[test]
    fn a_created_token_identifies_its_agent_and_only_its_hash_is_on_disk() {
        let dir = scratch("create");
        let store = open(&dir);
        let (cursor, cursor_token) = store.create("  Cursor ").unwrap();
        let (code, code_token) = store.create("Claude Code").unwrap();
        assert_eq!(cursor.name, "Cursor");
        assert_eq!(cursor_token.len(), 64);
        assert_eq!(cursor.id.len(), 16);
        assert_ne!(cursor.id, code.id);
        assert_eq!(
            store.identify(&cursor_token),
            Some(TokenAgent {
                id: cursor.id.clone(),
                name: "Cursor".into()
            })
        );
        assert_eq!(store.identify(&code_token).unwrap().id, code.id);
        assert_eq!(store.identify("nope"), None);
        assert_eq!(store.identify(""), None);

        let path = dir.join("agents.json");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains(&cursor_token) && !text.contains(&code_token),
            "{text}"
        );
        assert!(text.contains(&hex::encode(digest(&cursor_token))), "{text}");
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );

        // Read back after a restart: the same tokens still identify the same agents.
        let again = open(&dir);
        assert_eq!(again.identify(&cursor_token).unwrap().id, cursor.id);
        let listed: Vec<_> = again.list().into_iter().map(|a| a.name).collect();
        assert_eq!(listed, [SHARED_NAME, "Cursor", "Claude Code"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_revoked_token_is_refused_at_once_and_after_a_restart() {
        let dir = scratch("revoke");
        let store = open(&dir);
        let (agent, token) = store.create("Cursor").unwrap();
        assert!(store.identify(&token).is_some());
        store.revoke(&agent.id).unwrap();
        assert_eq!(store.identify(&token), None);
        assert!(matches!(
            store.revoke(&agent.id),
            Err(AgentError::NotFound(_))
        ));
        assert_eq!(open(&dir).identify(&token), None);
        assert!(store.list().iter().all(|a| a.id != agent.id));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A shared token written over its file is a new holder, as one made afresh is (what the
    /// person allowed the old one is then forgotten: `Gateway::new`).
    #[test]
    fn a_shared_token_written_over_its_file_is_a_new_holder() {
        let dir = scratch("shared-replaced");
        let token_path = dir.join("gateway-token");
        // As the gateway starts: opened, what the old holder had forgotten, then noted.
        let start = || {
            let store = open(&dir);
            let new = store.shared_token_is_new();
            store.note_shared_token().unwrap();
            (store, new)
        };
        assert!(start().1, "made at the first start");
        assert!(!start().1);
        std::fs::write(&token_path, "another-token\n").unwrap();
        // Not noted (forgetting failed): still new at the next start.
        assert!(open(&dir).shared_token_is_new());
        let (replaced, new) = start();
        assert!(new);
        assert_eq!(replaced.shared_token(), "another-token");
        assert!(!start().1);
        // A file kept by a version before the digest was: its token is not known to be new.
        std::fs::write(dir.join("agents.json"), r#"{"agents": []}"#).unwrap();
        std::fs::write(&token_path, "third-token\n").unwrap();
        assert!(!start().1);
        assert!(!start().1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_shared_token_is_an_agent_until_revoked_and_then_stays_revoked() {
        let dir = scratch("shared");
        let token_path = dir.join("gateway-token");
        std::fs::write(&token_path, "older-token\n").unwrap();
        let store = open(&dir);
        assert_eq!(store.shared_token(), "older-token");
        assert_eq!(
            store.identify("older-token"),
            Some(TokenAgent {
                id: SHARED_ID.into(),
                name: SHARED_NAME.into()
            })
        );
        assert!(store.list()[0].shared);
        store.revoke(SHARED_ID).unwrap();
        assert_eq!(store.identify("older-token"), None);
        assert!(!token_path.exists());
        assert!(store.list().is_empty());
        // Not made again at the next start: the flag in agents.json keeps it revoked.
        let again = open(&dir);
        assert_eq!(again.shared_token(), "");
        assert!(!token_path.exists());
        assert!(again.list().is_empty());
        assert!(matches!(
            again.revoke(SHARED_ID),
            Err(AgentError::NotFound(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn names_and_the_number_of_agents_are_capped() {
        let dir = scratch("caps");
        let store = open(&dir);
        assert!(matches!(store.create("   "), Err(AgentError::EmptyName)));
        assert!(matches!(
            store.create(&"x".repeat(MAX_NAME_CHARS + 1)),
            Err(AgentError::NameTooLong)
        ));
        assert!(store.create(&"é".repeat(MAX_NAME_CHARS)).is_ok());
        assert!(matches!(
            store.create("evil\u{1b}[2Jname"),
            Err(AgentError::ControlInName)
        ));
        assert!(matches!(
            store.create("two\nlines"),
            Err(AgentError::ControlInName)
        ));
        for n in 1..MAX_AGENTS {
            store.create(&format!("agent {n}")).unwrap();
        }
        assert!(matches!(store.create("one more"), Err(AgentError::TooMany)));
        // The shared token does not count against the cap.
        assert_eq!(store.list().len(), MAX_AGENTS + 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The guard puts the token's agent in the request, for whatever handles it.
    #[tokio::test]
    async fn the_guard_hands_on_the_agent_whose_token_came() {
        use axum::extract::Request;
        let dir = scratch("guard");
        let gateway = super::super::Gateway::new(
            crate::config::GatewayConfig {
                enabled: true,
                port: 0,
            },
            Vec::new(),
            crate::ask::broker::Broker::new(
                crate::AuditLog::open(dir.join("audit.jsonl")).unwrap(),
            ),
            crate::settings::SettingsStore::default(),
            dir.join("gateway-token"),
        )
        .unwrap();
        let code = gateway.create_agent("Claude Code", "bridge").unwrap();
        let cursor = gateway.create_agent("Cursor <b>", "bridge").unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let echo = |request: Request| async move {
            match request.extensions().get::<TokenAgent>() {
                Some(agent) => format!("{}|{}", agent.id, agent.name),
                None => "none".to_owned(),
            }
        };
        let router = axum::Router::new()
            .route("/echo", axum::routing::post(echo))
            .layer(axum::middleware::from_fn_with_state(
                (gateway.shared.clone(), port),
                super::super::guard,
            ));
        // Served as the gateway serves: the guard reads whose process connected.
        let refusals = gateway.shared.refusals.clone();
        tokio::spawn(async move {
            axum::serve(
                super::super::peer::AgentListener::new(listener, refusals),
                router.into_make_service_with_connect_info::<super::super::peer::Peer>(),
            )
            .await
        });
        let http = reqwest::Client::new();
        let ask = |token: String| {
            let request = http
                .post(format!("http://127.0.0.1:{port}/echo"))
                .header("authorization", format!("Bearer {token}"))
                .send();
            async move {
                let response = request.await.unwrap();
                (response.status().as_u16(), response.text().await.unwrap())
            }
        };
        assert_eq!(
            ask(code.token.clone()).await,
            (200, format!("{}|Claude Code", code.agent.id))
        );
        assert_eq!(
            ask(cursor.token.clone()).await,
            (200, format!("{}|Cursor <b>", cursor.agent.id))
        );
        assert_eq!(
            ask(gateway.token().to_owned()).await,
            (200, format!("{SHARED_ID}|{SHARED_NAME}"))
        );
        gateway.revoke_agent(&cursor.agent.id).unwrap();
        assert_eq!(ask(cursor.token.clone()).await.0, 401);
        assert_eq!(ask(code.token.clone()).await.0, 200);
        assert_eq!(ask("wrong".into()).await.0, 401);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_broken_file_is_an_error_not_an_empty_list() {
        let dir = scratch("broken");
        std::fs::write(dir.join("agents.json"), "{not json").unwrap();
        assert!(matches!(
            AgentStore::open(dir.join("agents.json"), dir.join("gateway-token")),
            Err(AgentError::Invalid { .. })
        ));
        std::fs::write(
            dir.join("agents.json"),
            r#"{"agents":[{"id":"a","name":"n","createdMs":1,"sha256":"zz"}]}"#,
        )
        .unwrap();
        assert!(matches!(
            AgentStore::open(dir.join("agents.json"), dir.join("gateway-token")),
            Err(AgentError::Invalid { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
