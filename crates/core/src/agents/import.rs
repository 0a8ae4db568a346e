//! Import: a host's servers into Countersign's config.
//!
//! The preview writes nothing; it says for each server what the import would do. A name that
//! Countersign already uses for the same server is "already there"; for a different server the
//! import takes `<name>-<host>` (e.g. `github-cursor`), so nothing the person configured is
//! replaced and nothing offered is silently dropped. Entries that point at Countersign's own
//! gateway, that Countersign cannot load (e.g. the old SSE transport) or that are disabled are
//! listed and not importable. The import writes the entries as the host had them (their keys
//! and values, variables included) into `mcpServers`, keeps every other key and the order of
//! Countersign's file, and keeps a backup (`config.json.bak-<unix-ms>`) first. The app reads
//! its config at start: a restart uses the new servers.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use super::read::{self, OurConfig};
use super::{ClientError, ClientKind, Clients, as_countersign, files, is_routed, same_server};
use crate::private_fs;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub enum ImportStatus {
    /// Not in Countersign: imported under its own name.
    New,
    /// Countersign has a different server by this name: imported as `importAs`.
    Renamed,
    /// Countersign has this server (under this name or the one in `note`).
    AlreadyThere,
    /// It already reaches its server through Countersign's gateway.
    Routed,
    /// Countersign cannot use it (`note` says why), or it is disabled.
    Skipped,
}

/// One server of a host's file, and what the import would do with it.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct ImportCandidate {
    /// What the import is told to take it by: its name, or for a per-project server
    /// `<name>@<project folder>` (a name can be in several lists).
    pub key: String,
    /// Its name in the host's file.
    pub name: String,
    /// Claude Code: the project folder of a per-project (`local` scope) server.
    pub project: Option<String>,
    /// The name it gets in Countersign; `None` when it is not imported.
    pub import_as: Option<String>,
    /// The command line or the URL.
    pub transport: String,
    pub status: ImportStatus,
    pub note: Option<String>,
    /// Things the person should know before relying on it (variables the host fills in).
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct ImportPreview {
    /// Pass to the import: it imports from exactly what this preview read.
    #[ts(type = "number")]
    pub plan: u64,
    pub client: ClientKind,
    pub title: String,
    pub path: String,
    /// Countersign's config, which the import writes.
    pub config_path: String,
    pub candidates: Vec<ImportCandidate>,
    /// About the file as a whole (servers it has that are not offered, `inputs`).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct ImportedServer {
    pub name: String,
    pub import_as: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct ImportResult {
    pub config_path: String,
    /// The copy of Countersign's config from before (none when there was no file).
    pub backup_path: Option<String>,
    pub imported: Vec<ImportedServer>,
    /// Chosen, but found already there when importing.
    pub skipped: Vec<Skipped>,
}

pub(crate) struct ImportPlan {
    client: ClientKind,
    candidates: Vec<(ImportCandidate, Value)>,
    client_names: BTreeSet<String>,
}

/// What the import would do with one entry; `assigned` holds the names given so far.
fn judge(
    client: ClientKind,
    name: &str,
    value: &Value,
    ours: &OurConfig,
    client_names: &BTreeSet<String>,
    assigned: &mut BTreeSet<String>,
    gateway_port: u16,
) -> (ImportStatus, Option<String>, Option<String>) {
    if is_routed(value, gateway_port) {
        return (
            ImportStatus::Routed,
            None,
            Some("already routed through Countersign".into()),
        );
    }
    let server = match as_countersign(name, value) {
        Ok(Some(server)) => server,
        Ok(None) => {
            return (
                ImportStatus::Skipped,
                None,
                Some(format!("disabled in {}", client.title())),
            );
        }
        Err(reason) => {
            return (
                ImportStatus::Skipped,
                None,
                Some(format!("Countersign cannot use it: {reason}")),
            );
        }
    };
    // Prefer the same name when several of Countersign's servers are this one.
    let mut same: Vec<&str> = ours
        .servers
        .iter()
        .filter(|s| same_server(s, &server))
        .map(|s| s.name.as_str())
        .collect();
    same.sort_by_key(|n| *n != name);
    if let Some(existing) = same.first() {
        let note = (*existing != name).then(|| format!("in Countersign as \"{existing}\""));
        return (ImportStatus::AlreadyThere, None, note);
    }
    // Taken too when it reads the same as one of ours (`tіckets` beside `tickets`): a
    // question from it could pass for the other's.
    let taken = |n: &str| {
        ours.names
            .iter()
            .chain(assigned.iter())
            .any(|o| o == n || crate::config::names_look_alike(o, n))
    };
    if !taken(name) {
        assigned.insert(name.to_owned());
        return (ImportStatus::New, Some(name.to_owned()), None);
    }
    let look_alike = !ours.names.iter().chain(assigned.iter()).any(|o| o == name);
    let base = format!("{name}-{}", client.suffix());
    let mut candidate = base.clone();
    let mut n = 2;
    while taken(&candidate) || client_names.contains(&candidate) {
        candidate = format!("{base}-{n}");
        n += 1;
    }
    assigned.insert(candidate.clone());
    (
        ImportStatus::Renamed,
        Some(candidate),
        Some(if look_alike {
            format!("Countersign already has a server whose name reads the same as \"{name}\"")
        } else {
            format!("Countersign already has a different server named \"{name}\"")
        }),
    )
}

/// `${...}` variables in an entry's strings, in order, once each.
pub(super) fn variables(value: &Value) -> Vec<String> {
    fn walk(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::String(s) => {
                let mut rest = s.as_str();
                while let Some(start) = rest.find("${") {
                    let Some(len) = rest[start..].find('}') else {
                        break;
                    };
                    let var = &rest[start..start + len + 1];
                    if !out.iter().any(|v| v == var) {
                        out.push(var.to_owned());
                    }
                    rest = &rest[start + len + 1..];
                }
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            Value::Object(map) => map.values().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, &mut out);
    out
}

/// "uses ${A}, ${B}, which <host> fills in and Countersign does not", when `value` has
/// variables: the import warns with it, and a route-through leaves such an entry unrouted.
pub(super) fn unfilled_variables(client: ClientKind, value: &Value) -> Option<String> {
    let vars = variables(value);
    if vars.is_empty() {
        return None;
    }
    let shown: Vec<String> = vars.iter().take(4).cloned().collect();
    let more = if vars.len() > 4 { ", …" } else { "" };
    Some(format!(
        "uses {}{more}, which {} fills in and Countersign does not",
        shown.join(", "),
        client.title()
    ))
}

fn warnings(client: ClientKind, value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(uses) = unfilled_variables(client, value) {
        out.push(format!("{uses}: edit the entry after importing"));
    }
    if value.get("envFile").is_some() {
        out.push(
            "its \"envFile\" is not read by Countersign: copy the variables into \"env\"".into(),
        );
    }
    out
}

impl Clients {
    /// What importing `client`'s servers would do. Writes nothing.
    pub fn preview_import(&self, client: ClientKind) -> Result<ImportPreview, ClientError> {
        let file = read::client_file(&self.places, client)?;
        let ours = OurConfig::read(&self.config_path, &self.places)?;
        let effective = file.effective();
        let client_names: BTreeSet<String> = effective.iter().map(|e| e.name.clone()).collect();
        let mut assigned = BTreeSet::new();
        let candidates: Vec<(ImportCandidate, Value)> = effective
            .iter()
            .map(|entry| {
                let (status, import_as, note) = judge(
                    client,
                    &entry.name,
                    &entry.value,
                    &ours,
                    &client_names,
                    &mut assigned,
                    self.gateway_port,
                );
                let candidate = ImportCandidate {
                    key: entry.key(),
                    name: entry.name.clone(),
                    project: entry.project.clone(),
                    import_as,
                    transport: super::transport_summary(&entry.name, &entry.value),
                    status,
                    note,
                    warnings: warnings(client, &entry.value),
                };
                (candidate, entry.value.clone())
            })
            .collect();
        let mut notes = Vec::new();
        for unread in &file.unread {
            notes.push(format!("Not read: {unread}"));
        }
        if file.has_inputs {
            notes.push("This file declares \"inputs\", values VS Code asks you for; Countersign does not ask for them.".into());
        }
        let preview_candidates = candidates.iter().map(|(c, _)| c.clone()).collect();
        let plan = self.remember(
            |p| &mut p.import,
            ImportPlan {
                client,
                candidates,
                client_names,
            },
        );
        Ok(ImportPreview {
            plan,
            client,
            title: client.title().into(),
            path: self.places.display(&file.path),
            config_path: self.places.display(&self.config_path),
            candidates: preview_candidates,
            notes,
        })
    }

    /// Imports the servers named `names` (by their names in the host's file) from the preview
    /// `plan` into Countersign's config, after a backup of it.
    pub fn import(&self, plan: u64, names: &[String]) -> Result<ImportResult, ClientError> {
        let taken = self.take_plan(|p| &mut p.import, plan)?;
        match self.import_plan(&taken, names) {
            Ok(result) => Ok(result),
            Err(e) => {
                // Nothing was written: the same preview can be imported again.
                self.put_back(|p| &mut p.import, plan, taken);
                Err(e)
            }
        }
    }

    fn import_plan(
        &self,
        plan: &ImportPlan,
        names: &[String],
    ) -> Result<ImportResult, ClientError> {
        let chosen: Vec<&(ImportCandidate, Value)> = plan
            .candidates
            .iter()
            .filter(|(c, _)| c.import_as.is_some() && names.contains(&c.key))
            .collect();
        if chosen.is_empty() {
            return Err(ClientError::Refused(
                "choose at least one server that can be imported".into(),
            ));
        }
        // Judged again against the file as it is now (the person may have edited it, or
        // imported from another host, since the preview).
        let ours = OurConfig::read(&self.config_path, &self.places)?;
        let mut assigned = BTreeSet::new();
        let mut imported = Vec::new();
        let mut skipped = Vec::new();
        for (candidate, value) in chosen {
            let (status, import_as, note) = judge(
                plan.client,
                &candidate.name,
                value,
                &ours,
                &plan.client_names,
                &mut assigned,
                self.gateway_port,
            );
            match import_as {
                Some(import_as) => imported.push((
                    ImportedServer {
                        name: candidate.name.clone(),
                        import_as,
                    },
                    value.clone(),
                )),
                None => skipped.push(Skipped {
                    name: candidate.name.clone(),
                    reason: note.unwrap_or_else(|| match status {
                        ImportStatus::AlreadyThere => "already in Countersign".into(),
                        _ => "not importable".into(),
                    }),
                }),
            }
        }
        let config_path = self.places.display(&self.config_path);
        if imported.is_empty() {
            return Ok(ImportResult {
                config_path,
                backup_path: None,
                imported: Vec::new(),
                skipped,
            });
        }
        let backup = match &ours.text {
            Some(_) => {
                let backup = files::free_name(&self.config_path, ".bak-", files::now_ms());
                private_fs::copy_new(&self.config_path, &backup).map_err(|e| ClientError::Io {
                    path: self.places.display(&backup),
                    message: format!("cannot write the backup: {e}"),
                })?;
                Some(backup)
            }
            None => None,
        };
        let mut top = ours.top;
        let servers = top
            .entry("mcpServers")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        let Value::Object(servers) = servers else {
            return Err(ClientError::Refused(format!(
                "{config_path}: \"mcpServers\" is not an object"
            )));
        };
        for (server, value) in &imported {
            servers.insert(server.import_as.clone(), value.clone());
        }
        let mut text = serde_json::to_string_pretty(&Value::Object(top))
            .map_err(|e| ClientError::Refused(format!("cannot write Countersign's config: {e}")))?;
        text.push('\n');
        // Through a symlink (a dotfiles manager's) to its target, as a host's file is written:
        // renamed onto the link itself, the new file would replace the link.
        let target = files::real_path(&self.config_path);
        private_fs::write_atomic(&target, text.as_bytes()).map_err(|e| ClientError::Io {
            path: config_path.clone(),
            message: e.to_string(),
        })?;
        tracing::info!(client = ?plan.client, count = imported.len(), config = %self.config_path.display(), "imported servers");
        Ok(ImportResult {
            config_path,
            backup_path: backup.map(|b| self.places.display(&b)),
            imported: imported.into_iter().map(|(s, _)| s).collect(),
            skipped,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{PORT, setup};
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    const OURS: &str = r#"{
  "gateway": {"port": 47717},
  "mcpServers": {
    "demo": {"command": "countersign-demo-server", "args": [], "trusted": false},
    "github": {"type": "http", "url": "https://api.github.example/mcp", "headers": {"Authorization": "Bearer gh"}}
  },
  "zz-unrelated": {"keep": [1, 2, 3]}
}
"#;

    fn by_name<'a>(p: &'a ImportPreview, name: &str) -> &'a ImportCandidate {
        p.candidates.iter().find(|c| c.name == name).unwrap()
    }

    #[test]
    fn preview_says_what_each_server_would_become_and_writes_nothing() {
        let s = setup("import-preview", OURS);
        let cursor = s.client_file(
            ClientKind::Cursor,
            &json!({"mcpServers": {
                "linear": {"url": "https://mcp.linear.app/mcp"},
                "demo": {"command": "countersign-demo-server", "args": []},
                "github": {"command": "npx", "args": ["-y", "@gh/mcp server"]},
                "github-cursor": {"command": "other"},
                "desk": {"url": format!("http://127.0.0.1:{PORT}/mcp/desk"), "headers": {"Authorization": "Bearer t"}},
                "old": {"type": "sse", "url": "https://old.example/sse"},
                "off": {"command": "x", "disabled": true},
                "broken": {"command": 42}
            }})
            .to_string(),
        );
        let before_ours = std::fs::read(&s.config).unwrap();
        let before_cursor = std::fs::read(&cursor).unwrap();
        let p = s.clients.preview_import(ClientKind::Cursor).unwrap();
        assert_eq!(p.path, "~/.cursor/mcp.json");
        assert_eq!(p.config_path, "~/.config/countersign/config.json");
        let linear = by_name(&p, "linear");
        assert_eq!(
            (linear.status, linear.import_as.as_deref()),
            (ImportStatus::New, Some("linear"))
        );
        assert_eq!(linear.transport, "https://mcp.linear.app/mcp");
        assert_eq!(by_name(&p, "demo").status, ImportStatus::AlreadyThere);
        let github = by_name(&p, "github");
        assert_eq!(github.status, ImportStatus::Renamed);
        // `github-cursor` is the host's own name for another server: the next one is taken.
        assert_eq!(github.import_as.as_deref(), Some("github-cursor-2"));
        assert_eq!(github.transport, "npx -y '@gh/mcp server'");
        assert_eq!(by_name(&p, "github-cursor").status, ImportStatus::New);
        let desk = by_name(&p, "desk");
        assert_eq!(desk.status, ImportStatus::Routed);
        assert_eq!(
            desk.note.as_deref(),
            Some("already routed through Countersign")
        );
        assert_eq!(by_name(&p, "old").status, ImportStatus::Skipped);
        assert!(by_name(&p, "old").note.as_deref().unwrap().contains("SSE"));
        assert_eq!(
            by_name(&p, "off").note.as_deref(),
            Some("disabled in Cursor")
        );
        assert_eq!(by_name(&p, "broken").status, ImportStatus::Skipped);
        assert_eq!(by_name(&p, "broken").import_as, None);
        assert_eq!(std::fs::read(&s.config).unwrap(), before_ours);
        assert_eq!(std::fs::read(&cursor).unwrap(), before_cursor);
    }

    /// Gemini CLI's own words: `type: http` and the older `httpUrl` are imported as Streamable
    /// HTTP, a `url` without a type (SSE) is
    /// skipped with the reason, and its own settings (`trust`, `timeout`, tool filters) are
    /// not carried into Countersign's config.
    #[test]
    fn gemini_entries_are_imported_in_countersigns_words() {
        let s = setup("import-gemini", r#"{"mcpServers": {}}"#);
        s.client_file(
            ClientKind::Gemini,
            r#"{
                // user settings
                "mcpServers": {
                    "linear": {"httpUrl": "https://mcp.linear.example/mcp", "headers": {"Authorization": "Bearer L"}, "trust": true, "timeout": 5000},
                    "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"], "includeTools": ["read_file"]},
                    "old": {"url": "https://old.example/sse"},
                    "modern": {"url": "https://modern.example/mcp", "type": "http"}
                }
            }"#,
        );
        let preview = s.clients.preview_import(ClientKind::Gemini).unwrap();
        // What `gemini mcp add --transport http` writes.
        assert_eq!(by_name(&preview, "modern").status, ImportStatus::New);
        assert_eq!(by_name(&preview, "linear").status, ImportStatus::New);
        assert_eq!(
            by_name(&preview, "linear").transport,
            "https://mcp.linear.example/mcp (headers: Authorization)"
        );
        assert_eq!(by_name(&preview, "fs").status, ImportStatus::New);
        let old = by_name(&preview, "old");
        assert_eq!(old.status, ImportStatus::Skipped);
        assert!(
            old.note.as_deref().unwrap_or("").contains("SSE"),
            "{:?}",
            old.note
        );
        s.clients
            .import(preview.plan, &["linear".into(), "fs".into()])
            .unwrap();
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&s.config).unwrap()).unwrap();
        assert_eq!(
            written["mcpServers"]["linear"],
            json!({"type": "http", "url": "https://mcp.linear.example/mcp", "headers": {"Authorization": "Bearer L"}})
        );
        assert_eq!(
            written["mcpServers"]["fs"],
            json!({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]})
        );
    }

    /// Countersign's own approval settings in a host's entry (an install snippet's, a cloned
    /// repository's) are not imported: the host ignores them, the preview does not show them,
    /// and `trusted` or an `allow` rule would let the server's calls through unasked.
    #[test]
    fn countersigns_own_approval_settings_in_a_hosts_entry_are_not_imported() {
        let s = setup("import-policy", r#"{"mcpServers": {}}"#);
        s.client_file(
            ClientKind::ClaudeCode,
            r#"{"mcpServers": {
                "helper": {"command": "npx", "args": ["helper-mcp"], "env": {"K": "v"},
                    "trusted": true, "toolPolicy": {"run_shell": "allow"}, "readPolicy": "allow",
                    "approvalWaitSecs": 1, "protocol": "legacy", "answerTimeoutSecs": 1}
            }}"#,
        );
        let preview = s.clients.preview_import(ClientKind::ClaudeCode).unwrap();
        let helper = by_name(&preview, "helper");
        assert_eq!(helper.status, ImportStatus::New, "{:?}", helper.note);
        s.clients
            .import(preview.plan, std::slice::from_ref(&helper.key))
            .unwrap();
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&s.config).unwrap()).unwrap();
        assert_eq!(
            written["mcpServers"]["helper"],
            json!({"command": "npx", "args": ["helper-mcp"], "env": {"K": "v"}})
        );
        let loaded = crate::config::parse(std::path::Path::new(""), &written.to_string());
        assert!(!loaded.servers[0].trusted && loaded.servers[0].tool_policy.is_empty());
    }

    /// Codex's TOML: a command and a URL imported in Countersign's words; a token Codex takes
    /// from a variable is flagged (Countersign fills in no variables); a disabled one skipped.
    #[test]
    fn codex_entries_are_imported_from_its_toml() {
        let s = setup("import-codex", r#"{"mcpServers": {}}"#);
        s.client_file(
            ClientKind::Codex,
            "model = \"o4-mini\"\n\n[mcp_servers.docs]\ncommand = \"npx\"\nargs = [\"-y\", \"docs-mcp\"]\ntool_timeout_sec = 60\n\n[mcp_servers.tracker]\nurl = \"https://tracker.example/mcp\"\nbearer_token_env_var = \"TRACKER_TOKEN\"\n\n[mcp_servers.off]\ncommand = \"off\"\nenabled = false\n",
        );
        let preview = s.clients.preview_import(ClientKind::Codex).unwrap();
        assert_eq!(by_name(&preview, "docs").status, ImportStatus::New);
        let tracker = by_name(&preview, "tracker");
        assert_eq!(tracker.status, ImportStatus::New);
        assert!(
            tracker
                .warnings
                .iter()
                .any(|w| w.contains("${TRACKER_TOKEN}") && w.contains("Codex fills in")),
            "{:?}",
            tracker.warnings
        );
        assert_eq!(by_name(&preview, "off").status, ImportStatus::Skipped);
        s.clients
            .import(preview.plan, &["docs".into(), "tracker".into()])
            .unwrap();
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&s.config).unwrap()).unwrap();
        assert_eq!(
            written["mcpServers"]["docs"],
            json!({"command": "npx", "args": ["-y", "docs-mcp"]})
        );
        assert_eq!(
            written["mcpServers"]["tracker"],
            json!({"type": "http", "url": "https://tracker.example/mcp", "headers": {"Authorization": "Bearer ${TRACKER_TOKEN}"}})
        );
    }

    /// Gemini CLI's project settings (the folders it lists in ~/.gemini/projects.json) are
    /// offered with their project; a broken one is named, not fatal.
    #[test]
    fn gemini_project_settings_are_offered_with_their_project() {
        let s = setup("import-gemini-projects", r#"{"mcpServers": {}}"#);
        s.client_file(ClientKind::Gemini, r#"{"mcpServers": {}}"#);
        let home = s.home.path();
        let (app, broken) = (home.join("work/app"), home.join("work/broken"));
        for (folder, text) in [
            (&app, r#"{"mcpServers": {"db": {"command": "db-mcp"}}}"#),
            (&broken, "{not json"),
        ] {
            std::fs::create_dir_all(folder.join(".gemini")).unwrap();
            std::fs::write(folder.join(".gemini/settings.json"), text).unwrap();
        }
        std::fs::write(
            home.join(".gemini/projects.json"),
            json!({"projects": {app.display().to_string(): "app", broken.display().to_string(): "broken", "relative": "x"}}).to_string(),
        )
        .unwrap();
        let preview = s.clients.preview_import(ClientKind::Gemini).unwrap();
        let db = by_name(&preview, "db");
        assert_eq!(db.status, ImportStatus::New);
        assert_eq!(
            db.project.as_deref(),
            Some(app.display().to_string().as_str())
        );
        assert_eq!(db.key, format!("db@{}", app.display()));
        assert!(
            preview
                .notes
                .iter()
                .any(|n| n.starts_with("Not read: ~/work/broken/.gemini/settings.json:1:2")),
            "{:?}",
            preview.notes
        );
        s.clients
            .import(preview.plan, std::slice::from_ref(&db.key))
            .unwrap();
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&s.config).unwrap()).unwrap();
        // Gemini starts it in the project's folder; so will Countersign.
        assert_eq!(
            written["mcpServers"]["db"],
            json!({"command": "db-mcp", "cwd": app.display().to_string()})
        );
        // Routing it would put the token into a project file: it is left alone, and said why.
        let route = s
            .clients
            .preview_rewrite(
                ClientKind::Gemini,
                &crate::agents::Route {
                    base_url: format!("http://127.0.0.1:{PORT}"),
                    token: "TOKEN".into(),
                    bridge: "countersign-bridge".into(),
                    served: vec!["db".into()],
                },
            )
            .unwrap();
        let kept = route.kept.iter().find(|k| k.name == "db").expect("kept");
        assert!(kept.reason.contains("gets committed"), "{}", kept.reason);
    }

    /// An entry whose name reads the same as one of Countersign's (a Cyrillic `і`) is offered
    /// under a name of its own, and says why: its questions could pass for the other's.
    #[test]
    fn a_look_alike_name_is_imported_under_a_name_of_its_own() {
        let s = setup(
            "import-look-alike",
            r#"{"mcpServers": {"tickets": {"command": "tickets-mcp"}}}"#,
        );
        s.client_file(
            ClientKind::Gemini,
            r#"{"mcpServers": {"t\u0456ckets": {"command": "other-mcp"}}}"#,
        );
        let preview = s.clients.preview_import(ClientKind::Gemini).unwrap();
        let twin = by_name(&preview, "t\u{456}ckets");
        assert_eq!(twin.status, ImportStatus::Renamed);
        assert_eq!(twin.import_as.as_deref(), Some("t\u{456}ckets-gemini"));
        assert_eq!(
            twin.note.as_deref(),
            Some("Countersign already has a server whose name reads the same as \"t\u{456}ckets\"")
        );
    }

    /// A cloned repository decides what its folder holds: its `.gemini/settings.json` (or its
    /// `.gemini`) linked to the person's own Cursor file would offer the person's own entries,
    /// their tokens in `env`, to run in the repository's folder. Links are not followed, and a
    /// folder the person told Gemini not to trust is not read at all.
    #[test]
    fn a_projects_gemini_settings_are_read_only_from_the_project_itself() {
        let s = setup("import-gemini-links", r#"{"mcpServers": {}}"#);
        s.client_file(ClientKind::Gemini, r#"{"mcpServers": {}}"#);
        let home = s.home.path();
        let own = home.join("own-cursor.json");
        std::fs::write(
            &own,
            r#"{"mcpServers": {"github": {"command": "python", "args": ["-m", "mcp_server_github"], "env": {"GITHUB_TOKEN": "ghp_secret"}}}}"#,
        )
        .unwrap();
        let (linked, linked_dir, distrusted) = (
            home.join("work/linked"),
            home.join("work/linked-dir"),
            home.join("work/distrusted"),
        );
        std::fs::create_dir_all(linked.join(".gemini")).unwrap();
        std::os::unix::fs::symlink(&own, linked.join(".gemini/settings.json")).unwrap();
        std::fs::create_dir_all(&linked_dir).unwrap();
        let elsewhere = home.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::copy(&own, elsewhere.join("settings.json")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, linked_dir.join(".gemini")).unwrap();
        std::fs::create_dir_all(distrusted.join(".gemini")).unwrap();
        std::fs::write(
            distrusted.join(".gemini/settings.json"),
            r#"{"mcpServers": {"fmt": {"command": "python", "args": ["-m", "fmt_mcp"]}}}"#,
        )
        .unwrap();
        let folders = [&linked, &linked_dir, &distrusted];
        std::fs::write(
            home.join(".gemini/projects.json"),
            json!({"projects": folders.iter().map(|f| (f.display().to_string(), json!("x"))).collect::<serde_json::Map<_, _>>()}).to_string(),
        )
        .unwrap();
        std::fs::write(
            home.join(".gemini/trustedFolders.json"),
            json!({distrusted.display().to_string(): "DO_NOT_TRUST"}).to_string(),
        )
        .unwrap();
        let preview = s.clients.preview_import(ClientKind::Gemini).unwrap();
        assert!(preview.candidates.is_empty(), "{:?}", preview.candidates);
        let links: Vec<_> = preview
            .notes
            .iter()
            .filter(|n| n.contains("a project's settings are read only from the project itself"))
            .collect();
        assert_eq!(links.len(), 2, "{:?}", preview.notes);
        // The same file, in the project itself, is offered.
        std::fs::remove_file(linked.join(".gemini/settings.json")).unwrap();
        std::fs::copy(&own, linked.join(".gemini/settings.json")).unwrap();
        let preview = s.clients.preview_import(ClientKind::Gemini).unwrap();
        assert_eq!(
            by_name(&preview, "github").project.as_deref(),
            Some(linked.display().to_string().as_str())
        );
    }

    /// Claude Code starts a project's server in the project's folder: it is imported with that
    /// folder as its `cwd` (a relative one joined to it), so `.` still means the project. Two
    /// projects' identical entries are two servers, and each project's entry is routed to its
    /// own.
    #[test]
    fn a_projects_server_is_imported_to_run_in_its_folder() {
        let s = setup("import-project-cwd", r#"{"mcpServers": {}}"#);
        let fs = r#"{"command": "npx", "args": ["server-filesystem", "."]}"#;
        let tool = r#"{"command": "./bin/mcp", "cwd": "tools"}"#;
        s.client_file(
            ClientKind::ClaudeCode,
            &format!(
                r#"{{"projects": {{"/src/a": {{"mcpServers": {{"fs": {fs}, "tool": {tool}}}}},
                    "/src/b": {{"mcpServers": {{"fs": {fs}}}}}}}}}"#
            ),
        );
        let preview = s.clients.preview_import(ClientKind::ClaudeCode).unwrap();
        let keys: Vec<String> = preview.candidates.iter().map(|c| c.key.clone()).collect();
        assert_eq!(keys, ["fs@/src/a", "tool@/src/a", "fs@/src/b"]);
        assert_eq!(
            preview.candidates[0].transport,
            "cd /src/a && npx server-filesystem ."
        );
        let result = s.clients.import(preview.plan, &keys).unwrap();
        let names: Vec<&str> = result
            .imported
            .iter()
            .map(|i| i.import_as.as_str())
            .collect();
        assert_eq!(names, ["fs", "tool", "fs-claude-code"]);
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&s.config).unwrap()).unwrap();
        let servers = &written["mcpServers"];
        assert_eq!(
            servers["fs"],
            json!({"command": "npx", "args": ["server-filesystem", "."], "cwd": "/src/a"})
        );
        assert_eq!(
            servers["fs-claude-code"],
            json!({"command": "npx", "args": ["server-filesystem", "."], "cwd": "/src/b"})
        );
        assert_eq!(
            servers["tool"],
            json!({"command": "./bin/mcp", "cwd": "/src/a/tools"})
        );
        let route = s
            .clients
            .preview_rewrite(
                ClientKind::ClaudeCode,
                &crate::agents::Route {
                    base_url: format!("http://127.0.0.1:{PORT}"),
                    token: "TOKEN".into(),
                    bridge: "countersign-bridge".into(),
                    served: names.iter().map(|n| n.to_string()).collect(),
                },
            )
            .unwrap();
        let routed: Vec<(&str, &str, Option<&str>)> = route
            .changes
            .iter()
            .map(|c| (c.name.as_str(), c.server.as_str(), c.note.as_deref()))
            .collect();
        assert_eq!(
            routed,
            [
                ("fs", "fs", Some("for the project /src/a")),
                ("tool", "tool", Some("for the project /src/a")),
                ("fs", "fs-claude-code", Some("for the project /src/b")),
            ]
        );
    }

    #[test]
    fn the_same_server_under_another_name_is_already_there() {
        let s = setup("import-same", OURS);
        s.client_file(
            ClientKind::ClaudeDesktop,
            r#"{"mcpServers": {"gh": {"type": "http", "url": "https://api.github.example/mcp", "headers": {"Authorization": "Bearer gh"}}}}"#,
        );
        let p = s.clients.preview_import(ClientKind::ClaudeDesktop).unwrap();
        assert_eq!(p.candidates[0].status, ImportStatus::AlreadyThere);
        assert_eq!(
            p.candidates[0].note.as_deref(),
            Some("in Countersign as \"github\"")
        );
    }

    #[test]
    fn vs_code_variables_and_inputs_are_flagged_and_imported_as_they_are() {
        let s = setup("import-vscode", OURS);
        s.client_file(
            ClientKind::VsCode,
            "{\n  \"inputs\": [{\"type\": \"promptString\", \"id\": \"key\", \"password\": true}],\n  // servers\n  \"servers\": {\n    \"search\": {\n      \"type\": \"http\",\n      \"url\": \"https://search.example/mcp\",\n      \"headers\": {\"Authorization\": \"Bearer ${input:key}\"}, // prompted\n    },\n    \"files\": {\"type\": \"stdio\", \"command\": \"files-mcp\", \"args\": [\"${workspaceFolder}\"], \"envFile\": \"${workspaceFolder}/.env\"},\n  },\n}\n",
        );
        let p = s.clients.preview_import(ClientKind::VsCode).unwrap();
        assert_eq!(p.notes.len(), 1);
        assert!(p.notes[0].contains("inputs"));
        let search = by_name(&p, "search");
        assert_eq!(search.status, ImportStatus::New);
        assert!(
            search.warnings[0].starts_with("uses ${input:key}, which VS Code fills in"),
            "{:?}",
            search.warnings
        );
        let files = by_name(&p, "files");
        assert_eq!(files.warnings.len(), 2);
        assert!(files.warnings[0].contains("${workspaceFolder}"));
        let result = s
            .clients
            .import(p.plan, &["search".into(), "files".into()])
            .unwrap();
        assert_eq!(result.imported.len(), 2);
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&s.config).unwrap()).unwrap();
        assert_eq!(
            written["mcpServers"]["search"]["headers"]["Authorization"],
            "Bearer ${input:key}"
        );
        assert_eq!(written["mcpServers"]["files"]["type"], "stdio");
    }

    #[test]
    fn import_merges_keeps_the_rest_and_its_order_and_backs_up_first() {
        let s = setup("import-apply", OURS);
        std::fs::set_permissions(&s.config, std::fs::Permissions::from_mode(0o600)).unwrap();
        s.client_file(
            ClientKind::ClaudeCode,
            r#"{"numStartups": 1, "mcpServers": {
                "github": {"type": "stdio", "command": "gh-mcp", "args": [], "env": {"GH": "x"}},
                "notes": {"type": "http", "url": "https://notes.example/mcp"},
                "skip-me": {"command": "nope"}
            }, "projects": {"/p": {"mcpServers": {"local": {"command": "l"}}}}}"#,
        );
        let p = s.clients.preview_import(ClientKind::ClaudeCode).unwrap();
        assert!(p.notes.is_empty(), "{:?}", p.notes);
        // The per-project server is offered too, keyed by its folder.
        let local = by_name(&p, "local");
        assert_eq!(
            (local.key.as_str(), local.project.as_deref()),
            ("local@/p", Some("/p"))
        );
        assert_eq!(local.status, ImportStatus::New);
        let result = s
            .clients
            .import(
                p.plan,
                &["github".into(), "notes".into(), "not-there".into()],
            )
            .unwrap();
        assert_eq!(
            result.imported,
            [
                ImportedServer {
                    name: "github".into(),
                    import_as: "github-claude-code".into()
                },
                ImportedServer {
                    name: "notes".into(),
                    import_as: "notes".into()
                },
            ]
        );
        assert_eq!(result.config_path, "~/.config/countersign/config.json");
        let backup = result.backup_path.clone().unwrap();
        assert!(
            backup.starts_with("~/.config/countersign/config.json.bak-"),
            "{backup}"
        );
        let backup_file = s.home.path().join(backup.trim_start_matches("~/"));
        assert_eq!(std::fs::read_to_string(&backup_file).unwrap(), OURS);

        let text = std::fs::read_to_string(&s.config).unwrap();
        let written: Value = serde_json::from_str(&text).unwrap();
        let top: Vec<&String> = written.as_object().unwrap().keys().collect();
        assert_eq!(top, ["gateway", "mcpServers", "zz-unrelated"]);
        let names: Vec<&String> = written["mcpServers"].as_object().unwrap().keys().collect();
        assert_eq!(names, ["demo", "github", "github-claude-code", "notes"]);
        assert_eq!(written["zz-unrelated"], json!({"keep": [1, 2, 3]}));
        assert_eq!(
            written["mcpServers"]["github-claude-code"]["env"],
            json!({"GH": "x"})
        );
        assert_eq!(
            std::fs::metadata(&s.config).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // Countersign loads what was written.
        let loaded = crate::config::load(&s.config);
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        assert_eq!(loaded.servers.len(), 4);

        // The plan is used up; a new preview sees them as already there.
        assert!(s.clients.import(p.plan, &["github".into()]).is_err());
        let again = s.clients.preview_import(ClientKind::ClaudeCode).unwrap();
        assert_eq!(by_name(&again, "github").status, ImportStatus::AlreadyThere);
        assert_eq!(by_name(&again, "notes").status, ImportStatus::AlreadyThere);
    }

    /// Countersign's config kept elsewhere behind a symlink (a dotfiles repository): the import
    /// writes the link's target, and the link stays a link.
    #[test]
    fn import_into_a_symlinked_config_writes_its_target_and_keeps_the_link() {
        let s = setup("import-symlink", OURS);
        let target = s.home.write(Path::new("dotfiles/countersign.json"), OURS);
        std::fs::remove_file(&s.config).unwrap();
        std::os::unix::fs::symlink(&target, &s.config).unwrap();
        s.client_file(
            ClientKind::Cursor,
            r#"{"mcpServers": {"linear": {"url": "https://mcp.linear.app/mcp"}}}"#,
        );
        let p = s.clients.preview_import(ClientKind::Cursor).unwrap();
        s.clients.import(p.plan, &["linear".into()]).unwrap();
        assert!(
            std::fs::symlink_metadata(&s.config)
                .unwrap()
                .file_type()
                .is_symlink(),
            "still a link"
        );
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&target).unwrap()).unwrap();
        assert_eq!(
            written["mcpServers"]["linear"],
            json!({"url": "https://mcp.linear.app/mcp"})
        );
        assert_eq!(written["zz-unrelated"], json!({"keep": [1, 2, 3]}));
    }

    #[test]
    fn import_rechecks_against_the_config_as_it_is_now() {
        let s = setup("import-recheck", r#"{"mcpServers": {}}"#);
        s.client_file(
            ClientKind::Cursor,
            r#"{"mcpServers": {"a": {"command": "a"}, "b": {"command": "b"}}}"#,
        );
        let p = s.clients.preview_import(ClientKind::Cursor).unwrap();
        // Meanwhile the person adds `a` by hand, and a different `b`.
        std::fs::write(
            &s.config,
            r#"{"mcpServers": {"a": {"command": "a"}, "b": {"command": "other"}}}"#,
        )
        .unwrap();
        let result = s.clients.import(p.plan, &["a".into(), "b".into()]).unwrap();
        assert_eq!(
            result.skipped,
            [Skipped {
                name: "a".into(),
                reason: "already in Countersign".into()
            }]
        );
        assert_eq!(result.imported[0].import_as, "b-cursor");
    }

    #[test]
    fn nothing_chosen_a_missing_config_and_a_broken_one() {
        let s = setup(
            "import-edges",
            "{\n  \"mcpServers\": {\n    \"x\": {\"command\": \"x\"},\n  }\n}\n",
        );
        s.client_file(
            ClientKind::Cursor,
            r#"{"mcpServers": {"a": {"command": "a"}}}"#,
        );
        // Countersign's own file is strict JSON, as the app reads it.
        match s.clients.preview_import(ClientKind::Cursor) {
            Err(e @ ClientError::Syntax { line: 4, .. }) => {
                assert!(
                    e.to_string()
                        .starts_with("~/.config/countersign/config.json:4:"),
                    "{e}"
                )
            }
            other => panic!("{other:?}"),
        }
        std::fs::remove_file(&s.config).unwrap();
        let p = s.clients.preview_import(ClientKind::Cursor).unwrap();
        assert!(matches!(
            s.clients.import(p.plan, &[]),
            Err(ClientError::Refused(_))
        ));
        // The plan survives a refusal.
        let result = s.clients.import(p.plan, &["a".into()]).unwrap();
        assert_eq!(result.backup_path, None);
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&s.config).unwrap()).unwrap();
        assert_eq!(written, json!({"mcpServers": {"a": {"command": "a"}}}));
        assert!(matches!(
            s.clients.preview_import(ClientKind::VsCode),
            Err(ClientError::NotFound { .. })
        ));
    }
}
