//! Rewrite: a host's config changed so that its servers are reached through Countersign's
//! gateway, and the undo.
//!
//! Only the values of the entries that change are replaced in the file's text; every other
//! byte (comments, formatting, the host's other settings) stays as it was. An entry is routed
//! when Countersign has the same server (same command, arguments and folder, or same URL and
//! headers): under the same name preferably, else under the name the import gave it; and not
//! when it uses variables the host fills in and Countersign does not. A server only
//! sharing a name with one of Countersign's is left alone, so an agent never silently starts
//! talking to a different server.
//!
//! Before writing, the file is copied to `<file>.countersign-backup-<unix-ms>` beside it, and
//! the rewrite is recorded (`rewrites.json` in Countersign's data dir: host, file, backup, time,
//! SHA-256 of what was written and of the backup). Undo puts the backup back byte for byte with
//! its permissions (never a backup that is not what was copied); if the file changed since (the
//! hash differs) it refuses unless forced, and a forced undo keeps the changed file as
//! `<file>.countersign-replaced-<unix-ms>`. Backups are never deleted.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::import::Skipped;
use super::read::{self, OurConfig};
use super::{
    ClientError, ClientKind, Clients, Route, as_countersign, files, is_routed, jsonc, same_server,
};
use crate::agents::connect::gateway_entry;
use crate::private_fs;

/// One entry the rewrite changes.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct RouteChange {
    /// Its name in the host's file (kept).
    pub name: String,
    /// The Countersign server it will reach.
    pub server: String,
    /// What it runs or reaches now.
    pub from: String,
    /// What it will be: the gateway URL or the bridge command.
    pub to: String,
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct RewritePreview {
    /// Pass to the rewrite; `None` when nothing would change.
    #[ts(type = "number | null")]
    pub plan: Option<u64>,
    pub client: ClientKind,
    pub title: String,
    pub path: String,
    /// Where the current file will be copied first.
    pub backup_path: String,
    /// The whole file as it would be written.
    pub new_text: String,
    pub changes: Vec<RouteChange>,
    /// Entries left as they are, and why.
    pub kept: Vec<Skipped>,
    pub warnings: Vec<String>,
}

/// A rewrite as recorded, for the undo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewriteRecord {
    pub id: String,
    pub client: ClientKind,
    pub path: PathBuf,
    pub backup_path: PathBuf,
    pub at_ms: u64,
    /// SHA-256 (hex) of the text written.
    pub sha256: String,
    /// SHA-256 (hex) of the backup as written, which the undo checks before putting it back (a
    /// backup cut short by a crash, or changed since, would replace the file with something
    /// else). Absent in records from before: those are undone unchecked.
    #[serde(default)]
    pub backup_sha256: Option<String>,
    /// The file's mode before the rewrite, which the undo puts back (the backup is ours, so
    /// 0600). Absent in records from before backups were private: the backup's mode is.
    #[serde(default)]
    pub mode: Option<u32>,
    /// The id of the agent token the rewrite wrote into the file, revoked by the undo.
    #[serde(default)]
    pub agent: Option<String>,
    /// The entries it routed, by name (`<name>@<project folder>` for a per-project one): when the
    /// host has changed the rest of the file since
    /// (Claude Code writes its own state there whenever it runs), the undo puts back only these.
    #[serde(default)]
    pub routed: Vec<String>,
    /// SHA-256 of each routed entry's value as written (`entry_sha256`), by key: only while
    /// each is still exactly that does the undo put back just the routed entries; an entry
    /// edited since (pointed at another server, disabled) is the person's, so the undo asks.
    /// Absent in records from before: there, still routed is all that is checked.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub written: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Records {
    #[serde(default)]
    rewrites: Vec<RewriteRecord>,
}

/// A recorded rewrite as the Connect page lists it.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct RewriteView {
    pub id: String,
    pub client: ClientKind,
    pub title: String,
    pub path: String,
    pub backup_path: String,
    #[ts(type = "number")]
    pub at_ms: u64,
    /// The file is no longer what the rewrite wrote (an undo would need `force`).
    pub changed_since: bool,
    pub backup_found: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct RewriteResult {
    pub rewrite: RewriteView,
    /// How many entries now go through Countersign.
    pub routed: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct UndoResult {
    pub path: String,
    pub restored_from: String,
    /// An undo of a file changed since: where that changed file was kept.
    pub kept_as: Option<String>,
    /// The file had changed since, elsewhere than in the routed entries: only those were put
    /// back (how many), and the rest of the file is as the host left it.
    pub entries_only: Option<u32>,
}

pub(crate) struct RewritePlan {
    client: ClientKind,
    path: PathBuf,
    source_sha256: String,
    new_text: String,
    at_ms: u64,
    routed: usize,
    /// The keys of the routed entries, for the record.
    names: Vec<String>,
    /// `RewriteRecord::written`.
    written: BTreeMap<String, String>,
}

const BACKUP: &str = ".countersign-backup-";
const REPLACED: &str = ".countersign-replaced-";

/// Held across each load, change and save of the record of rewrites (`rewrites.json`), by the
/// rewrite and the undo: the app runs them concurrently (two hosts routed at once), and each
/// saves the whole list, so without it one's record could be lost (no undo, its token never
/// revoked) or an undone one come back.
static RECORDS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn records_lock() -> std::sync::MutexGuard<'static, ()> {
    RECORDS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The Countersign server a host's entry is: same definition, preferring the same name, then
/// the name an import from this host gives it.
fn counterpart<'a>(
    client: ClientKind,
    name: &str,
    server: &crate::config::ServerConfig,
    ours: &'a OurConfig,
) -> Option<&'a str> {
    let renamed = format!("{name}-{}", client.suffix());
    let mut same: Vec<&str> = ours
        .servers
        .iter()
        .filter(|s| same_server(s, server))
        .map(|s| s.name.as_str())
        .collect();
    same.sort_by_key(|n| (*n != name, !n.starts_with(&renamed)));
    same.first().copied()
}

/// SHA-256 of an entry's value, whatever its layout and key order: a host may write the file
/// again in its own format (Claude Code does whenever it runs) without changing the entry.
fn entry_sha256(value: &Value) -> String {
    let mut value = value.clone();
    value.sort_all_objects();
    files::sha256_hex(value.to_string().as_bytes())
}

/// `value` as JSON text to stand where `old` stood: on one line if `old` was, else pretty,
/// continuation lines indented like the line it starts on.
fn render(value: &Value, old: &str, line_indent: &str) -> String {
    if !old.contains('\n') {
        return value.to_string();
    }
    let unit: &[u8] = if line_indent.contains('\t') {
        b"\t"
    } else {
        b"  "
    };
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(unit);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    if value.serialize(&mut ser).is_err() {
        return value.to_string();
    }
    String::from_utf8_lossy(&out).replace('\n', &format!("\n{line_indent}"))
}

/// The blanks that start the line `offset` is on.
fn indent_at(text: &str, offset: usize) -> &str {
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = &text[line_start..];
    let len = line.len() - line.trim_start_matches([' ', '\t']).len();
    &line[..len]
}

impl Clients {
    /// The rewrite of `client`'s file that would route its servers through the gateway.
    /// Writes nothing.
    pub fn preview_rewrite(
        &self,
        client: ClientKind,
        route: &Route,
    ) -> Result<RewritePreview, ClientError> {
        let file = read::client_file(&self.places, client)?;
        let ours = OurConfig::read(&self.config_path, &self.places)?;
        let shape = client.entry_shape();
        let mut changes = Vec::new();
        let mut kept = Vec::new();
        let mut splices: Vec<(std::ops::Range<usize>, String)> = Vec::new();
        // Codex's TOML tables, replaced whole by name.
        let mut tables: Vec<(String, Value)> = Vec::new();
        // The routed entries' keys, for the record (see `RewriteRecord::routed`).
        let mut keys: Vec<String> = Vec::new();
        let mut written = BTreeMap::new();
        for entry in &file.entries {
            let keep = |reason: String| Skipped {
                name: entry.name.clone(),
                reason: match &entry.project {
                    Some(folder) => format!("{reason} (for the project {folder})"),
                    None => reason,
                },
            };
            if is_routed(&entry.value, self.gateway_port) {
                kept.push(keep("already routed through Countersign".into()));
                continue;
            }
            if client == ClientKind::Gemini && entry.project.is_some() {
                kept.push(keep(
                    "a project's .gemini/settings.json is not rewritten: the token would go into \
                     a file that gets committed; paste the Connect page's snippet (user scope) \
                     instead"
                        .into(),
                ));
                continue;
            }
            let server = match as_countersign(&entry.name, &entry.value) {
                Ok(Some(server)) => server,
                Ok(None) => {
                    kept.push(keep(format!("disabled in {}", client.title())));
                    continue;
                }
                Err(reason) => {
                    kept.push(keep(format!("Countersign cannot use it: {reason}")));
                    continue;
                }
            };
            // Countersign would start or reach the server with `${VAR}` as written (a token
            // never sent, say): the host's working entry stays.
            if let Some(uses) = super::import::unfilled_variables(client, &entry.value) {
                kept.push(keep(format!(
                    "{uses}: through the gateway its server would get the text as written"
                )));
                continue;
            }
            let Some(ours_name) = counterpart(client, &entry.name, &server, &ours) else {
                kept.push(keep("not in Countersign's config: import it first".into()));
                continue;
            };
            let mut value = gateway_entry(
                shape,
                &route.base_url,
                &route.token,
                &route.bridge,
                ours_name,
            );
            // The host's tool filters stay: without them the agent could call, through the
            // gateway, tools the person had excluded.
            if let Value::Object(fields) = &mut value {
                fields.extend(entry.kept_when_routed.clone());
            }
            if client == ClientKind::Codex {
                tables.push((entry.name.clone(), value.clone()));
            } else {
                let old = &file.text[entry.span.clone()];
                splices.push((
                    entry.span.clone(),
                    render(&value, old, indent_at(&file.text, entry.span.start)),
                ));
            }
            let mut notes = Vec::new();
            if !route.served.iter().any(|s| s == ours_name) {
                notes.push("Countersign serves it once restarted".to_owned());
            }
            if let Some(folder) = &entry.project {
                notes.push(format!("for the project {folder}"));
            }
            if !keys.contains(&entry.key()) {
                keys.push(entry.key());
            }
            written.insert(entry.key(), entry_sha256(&value));
            changes.push(RouteChange {
                name: entry.name.clone(),
                server: ours_name.to_owned(),
                from: super::transport_summary(&entry.name, &entry.value),
                to: super::transport_summary(&entry.name, &value),
                note: (!notes.is_empty()).then(|| notes.join("; ")),
            });
        }
        let mut new_text = file.text.clone();
        splices.sort_by_key(|(span, _)| std::cmp::Reverse(span.start));
        for (span, text) in splices {
            new_text.replace_range(span, &text);
        }
        let unwritable = |format: &str| {
            ClientError::Refused(format!(
                "{}: the rewritten file would not be valid {format}; nothing was written",
                self.places.display(&file.path)
            ))
        };
        if client == ClientKind::Codex {
            if !tables.is_empty() {
                new_text =
                    super::codex::rewrite(&file.text, &tables).map_err(|_| unwritable("TOML"))?;
            }
            if super::codex::entries(&new_text).is_err() {
                return Err(unwritable("TOML"));
            }
        } else if serde_json::from_str::<Value>(&jsonc::strip(&new_text)).is_err() {
            return Err(unwritable("JSON"));
        }
        let shown = self.places.display(&file.path);
        let mut warnings = Vec::new();
        // Every shape carries the agent's token now (the bridge's in its `env`).
        if !changes.is_empty() {
            let mode = std::fs::metadata(&file.path).map_or(0, |m| m.permissions().mode());
            if mode & 0o077 != 0 {
                warnings.push(format!(
                    "{shown} can be read by other users of this computer. It will hold the gateway's token, so Countersign makes it readable by you only; Undo puts its permissions back, unless it keeps changes made to the file since."
                ));
            }
        }
        if client == ClientKind::ClaudeCode && !changes.is_empty() {
            warnings.push(format!(
                "Quit Claude Code first: it writes {shown} while it runs and could put the old entries back."
            ));
        }
        let at_ms = files::now_ms();
        let backup = files::free_name(&file.path, BACKUP, at_ms);
        let plan = (!changes.is_empty()).then(|| {
            self.remember(
                |p| &mut p.rewrite,
                RewritePlan {
                    client,
                    path: file.path.clone(),
                    source_sha256: files::sha256_hex(file.text.as_bytes()),
                    new_text: new_text.clone(),
                    at_ms,
                    routed: changes.len(),
                    names: keys.clone(),
                    written,
                },
            )
        });
        Ok(RewritePreview {
            plan,
            client,
            title: client.title().into(),
            path: shown,
            backup_path: self.places.display(&backup),
            new_text,
            changes,
            kept,
            warnings,
        })
    }

    /// Writes the previewed `plan`: the backup, the new text (atomically, permissions kept),
    /// the record. Refused when the file changed since the preview.
    pub fn rewrite(&self, plan: u64) -> Result<RewriteResult, ClientError> {
        self.rewrite_for(plan, None)
    }

    /// The agent a rewrite wrote a token for (`agent`, its id) is recorded with it, so that
    /// an undo can revoke it.
    pub fn rewrite_agent(&self, id: &str) -> Option<String> {
        let records = self.load_records().ok()?;
        records
            .rewrites
            .iter()
            .find(|r| r.id == id)
            .and_then(|r| r.agent.clone())
    }

    /// Writes plan `plan`, recording that it carries agent `agent`'s token.
    pub fn rewrite_for(
        &self,
        plan: u64,
        agent: Option<String>,
    ) -> Result<RewriteResult, ClientError> {
        let plan = self.take_plan(|p| &mut p.rewrite, plan)?;
        let shown = self.places.display(&plan.path);
        let io = |path: &Path, what: &str, e: std::io::Error| ClientError::Io {
            path: self.places.display(path),
            message: format!("{what}: {e}"),
        };
        let current = read::read_host_file(&plan.path).map_err(|e| read::io_error(&shown, &e))?;
        if files::sha256_hex(&current) != plan.source_sha256 {
            return Err(ClientError::Changed {
                message: format!(
                    "{shown} changed since the preview; nothing was written. Open the preview again."
                ),
            });
        }
        let _records = records_lock();
        // The record must be writable before anything else is touched.
        let mut records = self.load_records()?;
        let backup = files::free_name(&plan.path, BACKUP, plan.at_ms);
        let mode = std::fs::metadata(&plan.path)
            .map(|m| m.permissions().mode() & 0o7777)
            .ok();
        // The backup holds what the agent's file held (tokens, keys): only the user reads it.
        // Written from the bytes checked above, not read again: the host may write meanwhile.
        // Synced before the file is replaced: after a power cut the backup must hold the file,
        // not nothing, or an undo would put nothing back.
        private_fs::create_new(&backup)
            .and_then(|mut f| {
                std::io::Write::write_all(&mut f, &current)?;
                f.sync_all()
            })
            .map_err(|e| io(&backup, "cannot write the backup", e))?;
        if let Some(dir) = backup.parent()
            && let Ok(d) = std::fs::File::open(dir)
        {
            // Its name too; a failure here is not worth refusing the rewrite for.
            let _ = d.sync_all();
        }
        // The file now holds the agent's token: only the user may read it (another user
        // reading it could call the gateway as this agent).
        let private = mode.map_or(0o600, |m| m & !0o077);
        // Only over the file as checked: the host may have written it since.
        let written = files::write_atomic_over(
            &plan.path,
            plan.new_text.as_bytes(),
            Some(private),
            Some(&plan.source_sha256),
        )
        .map_err(|e| io(&plan.path, "cannot write", e))?;
        if !written {
            let _ = std::fs::remove_file(&backup);
            return Err(ClientError::Changed {
                message: format!(
                    "{shown} changed while it was being rewritten; nothing was written. Open the preview again."
                ),
            });
        }
        let at_ms = files::now_ms();
        let mut id = format!("{}-{at_ms}", plan.client.suffix());
        let mut n = 2;
        while records.rewrites.iter().any(|r| r.id == id) {
            id = format!("{}-{at_ms}-{n}", plan.client.suffix());
            n += 1;
        }
        let record = RewriteRecord {
            id,
            client: plan.client,
            path: plan.path.clone(),
            backup_path: backup.clone(),
            at_ms,
            sha256: files::sha256_hex(plan.new_text.as_bytes()),
            backup_sha256: Some(files::sha256_hex(&current)),
            mode,
            agent,
            routed: plan.names.clone(),
            written: plan.written.clone(),
        };
        records.rewrites.push(record.clone());
        if let Err(e) = self.save_records(&records) {
            // Without the record there is no undo: put the file back as it was.
            let restored = files::write_atomic(&plan.path, &current, mode);
            return Err(match restored {
                Ok(()) => ClientError::Io {
                    path: shown,
                    message: format!("not rewritten: cannot record the rewrite for undo ({e})"),
                },
                Err(r) => ClientError::Io {
                    path: shown,
                    message: format!(
                        "rewritten, but the record for undo could not be written ({e}) and the file could not be put back ({r}); the backup is {}",
                        self.places.display(&backup)
                    ),
                },
            });
        }
        tracing::info!(client = ?plan.client, path = %plan.path.display(), backup = %backup.display(), "rewrote an agent's config to route through Countersign");
        Ok(RewriteResult {
            rewrite: self.view(&record),
            routed: plan.routed,
        })
    }

    /// Every recorded rewrite, newest first.
    pub fn rewrites(&self) -> Result<Vec<RewriteView>, ClientError> {
        let records = self.load_records()?;
        Ok(records
            .rewrites
            .iter()
            .rev()
            .map(|r| self.view(r))
            .collect())
    }

    /// Puts the backup of rewrite `id` back. Refused when the file changed since the rewrite,
    /// unless `force`.
    pub fn undo(&self, id: &str, force: bool) -> Result<UndoResult, ClientError> {
        let _records = records_lock();
        let mut records = self.load_records()?;
        let Some(at) = records.rewrites.iter().position(|r| r.id == id) else {
            return Err(ClientError::Refused(
                "there is no such rewrite to undo (it may have been undone already)".into(),
            ));
        };
        let record = records.rewrites[at].clone();
        let shown = self.places.display(&record.path);
        let backup_shown = self.places.display(&record.backup_path);
        let backup = std::fs::read(&record.backup_path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                ClientError::Refused(format!("the backup {backup_shown} is gone; cannot undo"))
            }
            _ => read::io_error(&backup_shown, &e),
        })?;
        // Not what was copied (cut short by a crash, or changed since): putting it back would
        // replace the file with something else, so not even a forced undo does.
        if let Some(copied) = &record.backup_sha256
            && files::sha256_hex(&backup) != *copied
        {
            return Err(ClientError::Refused(format!(
                "the backup {backup_shown} is not what Countersign copied from {shown} (it may have been cut short by a crash, or changed since); nothing was undone"
            )));
        }
        let mode = record.mode.or_else(|| {
            std::fs::metadata(&record.backup_path)
                .map(|m| m.permissions().mode() & 0o7777)
                .ok()
        });
        let current = match read::read_host_file(&record.path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(read::io_error(&shown, &e)),
        };
        let changed = current
            .as_deref()
            .is_none_or(|c| files::sha256_hex(c) != record.sha256);
        let newer = records
            .rewrites
            .iter()
            .any(|r| r.path == record.path && r.at_ms > record.at_ms);
        // Changed only outside the routed entries (the host's own state): those entries go
        // back, and nothing the host or the person wrote since is lost.
        let entries_only = match (&current, changed && !force && !newer) {
            (Some(now), true) => self.routed_entries_put_back(&record, now, &backup),
            _ => None,
        };
        if changed && !force && entries_only.is_none() {
            let message = if newer {
                format!(
                    "{shown} was rewritten again after this; undo the later rewrite first, or undo this one anyway to go back to {backup_shown}"
                )
            } else if current.is_none() {
                format!(
                    "{shown} was removed since Countersign rewrote it; undo anyway to put {backup_shown} back"
                )
            } else {
                format!(
                    "{shown} has changed since Countersign rewrote it; undo anyway to put {backup_shown} back (the changed file is kept beside it)"
                )
            };
            return Err(ClientError::Changed { message });
        }
        let kept_as = match (&current, changed) {
            (Some(now), true) => {
                let aside = files::free_name(&record.path, REPLACED, files::now_ms());
                // The bytes already read (bounded), not the file read again.
                let kept = private_fs::create_new(&aside)
                    .and_then(|mut f| std::io::Write::write_all(&mut f, now));
                kept.map_err(|e| ClientError::Io {
                    path: self.places.display(&aside),
                    message: format!("cannot keep the changed file: {e}"),
                })?;
                Some(aside)
            }
            _ => None,
        };
        let (restored, mode) = match &entries_only {
            // The file's mode as it is now (`None`: `write_atomic` keeps it). The file kept is
            // not the one that had the old mode: what was written since (a key, say) went into
            // a private file, and must not become readable by others.
            Some((text, _)) => (text.as_bytes(), None),
            None => (backup.as_slice(), mode),
        };
        // Only over the file as just read: the host may have written it since.
        let read = current.as_deref().map(files::sha256_hex);
        let written = files::write_atomic_over(&record.path, restored, mode, read.as_deref())
            .map_err(|e| ClientError::Io {
                path: shown.clone(),
                message: e.to_string(),
            })?;
        if !written {
            return Err(ClientError::Changed {
                message: format!(
                    "{shown} changed while it was being put back; nothing was written. Undo again."
                ),
            });
        }
        records.rewrites.remove(at);
        if let Err(e) = self.save_records(&records) {
            tracing::warn!("undone, but the record of rewrites could not be updated: {e}");
        }
        tracing::info!(path = %record.path.display(), backup = %record.backup_path.display(), force, "undid a rewrite");
        Ok(UndoResult {
            path: shown,
            restored_from: backup_shown,
            kept_as: kept_as.map(|p| self.places.display(&p)),
            entries_only: entries_only.map(|(_, n)| n),
        })
    }

    /// `now` (the file as it is) with the routed entries' values put back as they are in
    /// `backup`, and how many; `None` unless every routed entry is still there and still what
    /// the rewrite wrote (then only the whole backup can go back, and the person decides).
    /// JSON hosts only: Codex does not rewrite its own config.
    fn routed_entries_put_back(
        &self,
        record: &RewriteRecord,
        now: &[u8],
        backup: &[u8],
    ) -> Option<(String, u32)> {
        if record.routed.is_empty() || record.client == ClientKind::Codex {
            return None;
        }
        let shown = self.places.display(&record.path);
        let now = read::parse(record.client, record.path.clone(), &shown, now.to_vec()).ok()?;
        let before =
            read::parse(record.client, record.path.clone(), &shown, backup.to_vec()).ok()?;
        let mut splices = Vec::new();
        // A key that names two entries (a user-wide server named like a project's, `x@/p`)
        // cannot be put back by place: the whole backup is, instead. Each key is put back once
        // (two splices of one place would cut the text apart).
        let keys: std::collections::BTreeSet<&String> = record.routed.iter().collect();
        let named_twice = |file: &read::ClientFile, key: &String| {
            file.entries.iter().filter(|e| &e.key() == key).count() > 1
        };
        if keys
            .iter()
            .any(|k| named_twice(&now, k) || named_twice(&before, k))
        {
            return None;
        }
        // The values as the file has them: `Entry::value` is in Countersign's words, which
        // leave out keys (a host's own) an edit may have added.
        let stripped = jsonc::strip(&now.text);
        for key in keys {
            let current = now.entries.iter().rfind(|e| &e.key() == key)?;
            let old = before.entries.iter().rfind(|e| &e.key() == key)?;
            let as_written = match record.written.get(key) {
                Some(sha256) => serde_json::from_str::<Value>(&stripped[current.span.clone()])
                    .is_ok_and(|value| entry_sha256(&value) == *sha256),
                None => is_routed(&current.value, self.gateway_port),
            };
            if !as_written {
                return None;
            }
            splices.push((current.span.clone(), &before.text[old.span.clone()]));
        }
        let mut text = now.text.clone();
        splices.sort_by_key(|(span, _)| std::cmp::Reverse(span.start));
        // Places that overlap (one entry inside another) cannot both be put back: the whole
        // backup is, instead.
        if splices.windows(2).any(|w| w[1].0.end > w[0].0.start) {
            return None;
        }
        for (span, value) in splices {
            text.replace_range(span, value);
        }
        serde_json::from_str::<Value>(&jsonc::strip(&text)).ok()?;
        Some((text, u32::try_from(record.routed.len()).unwrap_or(u32::MAX)))
    }

    fn view(&self, r: &RewriteRecord) -> RewriteView {
        let changed_since = read::read_host_file(&r.path)
            .map_or(true, |bytes| files::sha256_hex(&bytes) != r.sha256);
        RewriteView {
            id: r.id.clone(),
            client: r.client,
            title: r.client.title().into(),
            path: self.places.display(&r.path),
            backup_path: self.places.display(&r.backup_path),
            at_ms: r.at_ms,
            changed_since,
            backup_found: r.backup_path.is_file(),
        }
    }

    fn load_records(&self) -> Result<Records, ClientError> {
        let Some(path) = &self.records_path else {
            return Ok(Records::default());
        };
        let shown = self.places.display(path);
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| ClientError::Syntax {
                path: shown,
                line: e.line(),
                column: e.column(),
                message: format!("the record of rewrites: {}", read::strip_position(&e)),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Records::default()),
            Err(e) => Err(read::io_error(&shown, &e)),
        }
    }

    fn save_records(&self, records: &Records) -> Result<(), ClientError> {
        let Some(path) = &self.records_path else {
            return Err(ClientError::Refused(
                "no data directory to record the rewrite in, so it could not be undone".into(),
            ));
        };
        let mut text = serde_json::to_string_pretty(records).unwrap_or_default();
        text.push('\n');
        private_fs::write_atomic(path, text.as_bytes()).map_err(|e| ClientError::Io {
            path: self.places.display(path),
            message: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{PORT, Setup, setup};
    use super::*;
    use serde_json::json;

    const OURS: &str = r#"{"mcpServers": {
        "desk": {"command": "desk-mcp", "args": ["--db", "/tmp/d"]},
        "github": {"type": "http", "url": "https://gh.example/mcp", "headers": {"Authorization": "Bearer gh"}},
        "files-vscode": {"command": "files-mcp"}
    }}"#;

    fn route() -> Route {
        Route {
            base_url: format!("http://127.0.0.1:{PORT}"),
            token: "TOKEN".into(),
            bridge: "/opt/countersign/countersign-bridge".into(),
            served: vec!["desk".into(), "github".into()],
        }
    }

    fn read_json(path: &Path) -> Value {
        read_json_text(&std::fs::read_to_string(path).unwrap())
    }

    fn read_json_text(text: &str) -> Value {
        serde_json::from_str(&jsonc::strip(text)).unwrap()
    }

    fn rewrite(s: &Setup, client: ClientKind) -> (RewritePreview, RewriteResult) {
        let preview = s.clients.preview_rewrite(client, &route()).unwrap();
        let result = s.clients.rewrite(preview.plan.expect("a plan")).unwrap();
        (preview, result)
    }

    #[test]
    fn each_host_gets_its_gateway_shape() {
        let s = setup("rw-shapes", OURS);
        let desk = json!({"command": "desk-mcp", "args": ["--db", "/tmp/d"]});
        let gh = json!({"type": "http", "url": "https://gh.example/mcp", "headers": {"Authorization": "Bearer gh"}});
        let want_http = |typed: bool, server: &str| {
            let mut v = json!({"url": format!("http://127.0.0.1:{PORT}/mcp/{server}"), "headers": {"Authorization": "Bearer TOKEN"}});
            if typed {
                v = json!({"type": "http", "url": v["url"], "headers": v["headers"]});
            }
            v
        };
        // Codex's TOML has a test of its own.
        let json_hosts = ClientKind::ALL
            .into_iter()
            .filter(|c| *c != ClientKind::Codex);
        for client in json_hosts {
            let path = s.client_file(
                client,
                &json!({"other": true, client.servers_key(): {"desk": desk, "gh": gh, "mine": {"command": "mine"}}}).to_string(),
            );
            let (preview, result) = rewrite(&s, client);
            assert_eq!(result.routed, 2, "{client:?}");
            let written = read_json(&path);
            let servers = &written[client.servers_key()];
            match client {
                ClientKind::ClaudeDesktop => {
                    // The bridge sends the agent's token it finds in its environment.
                    let env = json!({"COUNTERSIGN_TOKEN": "TOKEN"});
                    assert_eq!(
                        servers["desk"],
                        json!({"command": "/opt/countersign/countersign-bridge", "args": ["desk"], "env": env})
                    );
                    assert_eq!(
                        servers["gh"],
                        json!({"command": "/opt/countersign/countersign-bridge", "args": ["github"], "env": env})
                    );
                }
                ClientKind::Cursor => {
                    assert_eq!(servers["desk"], want_http(false, "desk"));
                    assert_eq!(servers["gh"], want_http(false, "github"));
                }
                // Gemini as its own `gemini mcp add --transport http` writes it.
                ClientKind::ClaudeCode | ClientKind::VsCode | ClientKind::Gemini => {
                    assert_eq!(servers["desk"], want_http(true, "desk"));
                    assert_eq!(servers["gh"], want_http(true, "github"));
                }
                ClientKind::Codex => unreachable!("not in ClientKind::ALL"),
            }
            assert_eq!(
                servers["mine"],
                json!({"command": "mine"}),
                "not in Countersign: kept"
            );
            assert_eq!(written["other"], true);
            assert_eq!(
                preview.kept,
                [Skipped {
                    name: "mine".into(),
                    reason: "not in Countersign's config: import it first".into()
                }]
            );
            let gh_change = preview.changes.iter().find(|c| c.name == "gh").unwrap();
            assert_eq!(gh_change.server, "github");
            assert_eq!(
                gh_change.from,
                "https://gh.example/mcp (headers: Authorization)"
            );
            // The backup is the file as it was.
            let backup = s
                .home
                .path()
                .join(result.rewrite.backup_path.trim_start_matches("~/"));
            assert_eq!(result.rewrite.backup_path, preview.backup_path);
            assert!(result.rewrite.backup_path.contains(".countersign-backup-"));
            assert_eq!(read_json(&backup)[client.servers_key()]["desk"], desk);
            // A second preview finds nothing left to route.
            let again = s.clients.preview_rewrite(client, &route()).unwrap();
            assert_eq!(again.plan, None);
            assert!(again.changes.is_empty());
            assert_eq!(
                again
                    .kept
                    .iter()
                    .filter(|k| k.reason == "already routed through Countersign")
                    .count(),
                2
            );
        }
        let recorded = s.clients.rewrites().unwrap();
        assert_eq!(recorded.len(), ClientKind::ALL.len() - 1);
        assert_eq!(recorded[0].client, ClientKind::Gemini, "newest first");
        assert!(recorded.iter().all(|r| !r.changed_since && r.backup_found));
    }

    #[test]
    fn only_the_routed_values_change_comments_and_layout_stay() {
        let s = setup("rw-text", OURS);
        let original = "{\n\t// VS Code's user MCP servers\n\t\"servers\": {\n\t\t\"desk\": {\n\t\t\t\"command\": \"desk-mcp\", // the desk\n\t\t\t\"args\": [\"--db\", \"/tmp/d\"],\n\t\t},\n\t\t\"mine\": {\"command\": \"mine\"}, /* mine */\n\t\t\"files\": {\"command\": \"files-mcp\"}\n\t},\n\t\"inputs\": []\n}\n";
        let path = s.client_file(ClientKind::VsCode, original);
        let preview = s
            .clients
            .preview_rewrite(ClientKind::VsCode, &route())
            .unwrap();
        let expected = format!(
            "{{\n\t// VS Code's user MCP servers\n\t\"servers\": {{\n\t\t\"desk\": {{\n\t\t\t\"type\": \"http\",\n\t\t\t\"url\": \"http://127.0.0.1:{PORT}/mcp/desk\",\n\t\t\t\"headers\": {{\n\t\t\t\t\"Authorization\": \"Bearer TOKEN\"\n\t\t\t}}\n\t\t}},\n\t\t\"mine\": {{\"command\": \"mine\"}}, /* mine */\n\t\t\"files\": {{\"type\":\"http\",\"url\":\"http://127.0.0.1:{PORT}/mcp/files-vscode\",\"headers\":{{\"Authorization\":\"Bearer TOKEN\"}}}}\n\t}},\n\t\"inputs\": []\n}}\n"
        );
        assert_eq!(preview.new_text, expected);
        let files = preview.changes.iter().find(|c| c.name == "files").unwrap();
        assert_eq!(files.server, "files-vscode", "the name its import gave it");
        assert_eq!(
            files.note.as_deref(),
            Some("Countersign serves it once restarted")
        );
        // Nothing written by the preview.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
        s.clients.rewrite(preview.plan.unwrap()).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    }

    #[test]
    fn a_name_shared_with_a_different_server_is_not_routed() {
        let s = setup("rw-clash", OURS);
        s.client_file(ClientKind::Cursor, r#"{"mcpServers": {"github": {"command": "my-own-github"}, "old": {"type": "sse", "url": "http://x/sse"}}}"#);
        let preview = s
            .clients
            .preview_rewrite(ClientKind::Cursor, &route())
            .unwrap();
        assert_eq!(preview.plan, None);
        assert_eq!(
            preview.kept[0].reason,
            "not in Countersign's config: import it first"
        );
        assert!(
            preview.kept[1]
                .reason
                .starts_with("Countersign cannot use it: the old SSE")
        );
    }

    /// A host's file that others can read gets the token readable by its owner only; Undo puts
    /// the file and its permissions back.
    #[test]
    fn a_file_others_can_read_is_made_private_when_it_gets_the_token() {
        let s = setup("rw-private", OURS);
        let original =
            r#"{"mcpServers": {"desk": {"command": "desk-mcp", "args": ["--db", "/tmp/d"]}}}"#;
        let path = s.client_file(ClientKind::Cursor, original);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let (preview, result) = rewrite(&s, ClientKind::Cursor);
        assert!(
            preview
                .warnings
                .iter()
                .any(|w| w.contains("readable by you only")),
            "{:?}",
            preview.warnings
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert!(std::fs::read_to_string(&path).unwrap().contains("Bearer "));
        s.clients.undo(&result.rewrite.id, false).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
        assert_eq!(mode(&path), 0o644);
        // Again, and the host writes the rest of the file meanwhile: the undo that puts back
        // only the entries keeps the file private (what it holds now was written into a
        // private file: `an_undo_that_keeps_later_edits_keeps_the_file_private`).
        let (preview, result) = rewrite(&s, ClientKind::Cursor);
        let host_wrote = preview
            .new_text
            .replace("\"mcpServers\"", "\"x\": 1, \"mcpServers\"");
        std::fs::write(&path, host_wrote).unwrap();
        let undone = s.clients.undo(&result.rewrite.id, false).unwrap();
        assert_eq!(undone.entries_only, Some(1));
        assert_eq!(mode(&path), 0o600);
    }

    /// A file others could read, made private by the rewrite, then given a server with a key:
    /// the undo that keeps that edit (it puts back only the routed entry) keeps the file
    /// private. The file it leaves is not the one that had the old mode.
    #[test]
    fn an_undo_that_keeps_later_edits_keeps_the_file_private() {
        let s = setup("rw-private-kept", OURS);
        let original =
            r#"{"mcpServers": {"desk": {"command": "desk-mcp", "args": ["--db", "/tmp/d"]}}}"#;
        let path = s.client_file(ClientKind::Cursor, original);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let (preview, result) = rewrite(&s, ClientKind::Cursor);
        assert_eq!(mode(&path), 0o600);
        // The person adds a server with its API key.
        let with_key = preview.new_text.replacen(
            "{\"mcpServers\": {",
            "{\"mcpServers\": {\"search\": {\"url\": \"https://search.example/mcp\", \"headers\": {\"X-Api-Key\": \"sk-later\"}}, ",
            1,
        );
        assert_ne!(with_key, preview.new_text);
        std::fs::write(&path, &with_key).unwrap();
        let undone = s.clients.undo(&result.rewrite.id, false).unwrap();
        assert_eq!(undone.entries_only, Some(1));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("sk-later") && text.contains("desk-mcp"),
            "{text}"
        );
        assert_eq!(mode(&path), 0o600);
    }

    /// An edit to a routed entry itself that still reaches the gateway (the bridge pointed at
    /// another server, the entry disabled) is the person's: the undo asks before putting the
    /// old entry over it, and leaves the file as it is.
    #[test]
    fn undo_asks_before_reverting_an_edit_to_a_routed_entry() {
        let s = setup("rw-edited-routed", OURS);
        let original =
            r#"{"mcpServers": {"desk": {"command": "desk-mcp", "args": ["--db", "/tmp/d"]}}}"#;
        for (client, (from, to)) in [
            (
                ClientKind::ClaudeDesktop,
                ("\"args\":[\"desk\"]", "\"args\":[\"github\"]"),
            ),
            (ClientKind::Cursor, ("\"url\"", "\"disabled\":true,\"url\"")),
        ] {
            let path = s.client_file(client, original);
            let (preview, result) = rewrite(&s, client);
            let edited = preview.new_text.replacen(from, to, 1);
            assert_ne!(edited, preview.new_text, "{client:?}");
            assert!(is_routed(
                &read_json_text(&edited)["mcpServers"]["desk"],
                PORT
            ));
            std::fs::write(&path, &edited).unwrap();
            match s.clients.undo(&result.rewrite.id, false) {
                Err(ClientError::Changed { .. }) => {}
                other => panic!("{client:?}: {other:?}"),
            }
            assert_eq!(std::fs::read_to_string(&path).unwrap(), edited);
            // Forced, the whole backup goes back.
            let undone = s.clients.undo(&result.rewrite.id, true).unwrap();
            assert!(undone.kept_as.is_some());
            assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
        }
    }

    /// The host writing the file again in its own layout (Claude Code does whenever it runs)
    /// leaves the routed entry as the rewrite wrote it: the undo puts back just that entry.
    #[test]
    fn a_routed_entry_laid_out_anew_is_not_an_edit() {
        let s = setup("rw-relaid", OURS);
        let original =
            r#"{"mcpServers": {"desk": {"command": "desk-mcp", "args": ["--db", "/tmp/d"]}}}"#;
        let path = s.client_file(ClientKind::ClaudeCode, original);
        let (_, result) = rewrite(&s, ClientKind::ClaudeCode);
        let mut relaid = serde_json::to_string_pretty(&read_json(&path)).unwrap();
        relaid.push('\n');
        std::fs::write(&path, &relaid).unwrap();
        let undone = s.clients.undo(&result.rewrite.id, false).unwrap();
        assert_eq!(undone.entries_only, Some(1));
        assert_eq!(read_json(&path), read_json_text(original));
    }

    /// An entry using a variable the host fills in (Codex's `bearer_token_env_var`, imported as
    /// `Bearer ${VAR}`) is not routed: Countersign would reach its server with the text as
    /// written. The preview keeps it and names the variable.
    #[test]
    fn an_entry_with_variables_is_not_routed_and_the_preview_says_why() {
        let s = setup("rw-variables", r#"{"mcpServers": {}}"#);
        s.client_file(
            ClientKind::Codex,
            "[mcp_servers.docs]\ncommand = \"docs-mcp\"\n\n[mcp_servers.tracker]\nurl = \"https://tracker.example/mcp\"\nbearer_token_env_var = \"TRACKER_TOKEN\"\n",
        );
        let import = s.clients.preview_import(ClientKind::Codex).unwrap();
        let imported = s
            .clients
            .import(import.plan, &["docs".into(), "tracker".into()])
            .unwrap();
        assert_eq!(imported.imported.len(), 2);
        let preview = s
            .clients
            .preview_rewrite(ClientKind::Codex, &route())
            .unwrap();
        let routed: Vec<&str> = preview.changes.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(routed, ["docs"]);
        let tracker = preview.kept.iter().find(|k| k.name == "tracker");
        let reason = &tracker.expect("tracker is kept").reason;
        assert!(
            reason.starts_with("uses ${TRACKER_TOKEN}, which Codex fills in"),
            "{reason}"
        );
        assert!(
            preview
                .new_text
                .contains("bearer_token_env_var = \"TRACKER_TOKEN\""),
            "{}",
            preview.new_text
        );
    }

    #[test]
    fn undo_restores_byte_for_byte_with_the_mode() {
        let s = setup("rw-undo", OURS);
        let original = "{ \"mcpServers\" : { \"desk\" : {\"command\":\"desk-mcp\",\"args\":[\"--db\",\"/tmp/d\"]} } ,\"x\":1}";
        let path = s.client_file(ClientKind::Cursor, original);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let (preview, result) = rewrite(&s, ClientKind::Cursor);
        assert!(
            preview.warnings.is_empty(),
            "0600: no warning about other users: {:?}",
            preview.warnings
        );
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_ne!(std::fs::read_to_string(&path).unwrap(), original);
        let undone = s.clients.undo(&result.rewrite.id, false).unwrap();
        assert_eq!(undone.path, "~/.cursor/mcp.json");
        assert_eq!(undone.kept_as, None);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(s.clients.rewrites().unwrap().is_empty());
        // The backup stays; a second undo has nothing to do.
        assert!(
            s.home
                .path()
                .join(undone.restored_from.trim_start_matches("~/"))
                .is_file()
        );
        assert!(matches!(
            s.clients.undo(&result.rewrite.id, false),
            Err(ClientError::Refused(_))
        ));
    }

    /// A user-wide server named like a project's (`desk@/src/a`) shares that entry's key: the
    /// undo cannot put either back by place, so it says so (nothing is cut apart), and forced,
    /// puts the whole file back.
    #[test]
    fn undo_with_two_entries_of_one_key_puts_back_the_whole_file_or_nothing() {
        // The project's entry runs in its folder: Countersign's `desk-a` is that one.
        let s = setup(
            "rw-one-key",
            r#"{"mcpServers": {
                "desk": {"command": "desk-mcp", "args": ["--db", "/tmp/d"]},
                "desk-a": {"command": "desk-mcp", "args": ["--db", "/tmp/d"], "cwd": "/src/a"}
            }}"#,
        );
        let original = "{\n  \"n\": 1,\n  \"mcpServers\": {\"desk@/src/a\": {\"command\": \"desk-mcp\", \"args\": [\"--db\", \"/tmp/d\"]}},\n  \"projects\": {\"/src/a\": {\"mcpServers\": {\"desk\": {\"command\": \"desk-mcp\", \"args\": [\"--db\", \"/tmp/d\"]}}}}\n}\n";
        let path = s.client_file(ClientKind::ClaudeCode, original);
        let (preview, result) = rewrite(&s, ClientKind::ClaudeCode);
        assert_eq!(preview.changes.len(), 2, "{:?}", preview.changes);
        std::fs::write(&path, preview.new_text.replace("\"n\": 1", "\"n\": 2")).unwrap();
        assert!(s.clients.undo(&result.rewrite.id, false).is_err());
        s.clients.undo(&result.rewrite.id, true).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
    }

    /// The host changed the rest of the file since (Claude Code writes its own state there
    /// whenever it runs): the undo puts back only the routed entries, and keeps the rest as the
    /// host left it (and a copy of the file as it was).
    #[test]
    fn undo_after_the_host_changed_the_rest_puts_back_only_the_routed_entries() {
        let s = setup("rw-entries-only", OURS);
        let original = "{\n  \"numStartups\": 3,\n  \"mcpServers\": {\n    \"desk\": {\"command\": \"desk-mcp\", \"args\": [\"--db\", \"/tmp/d\"]},\n    \"mine\": {\"command\": \"mine\"}\n  }\n}\n";
        let path = s.client_file(ClientKind::ClaudeCode, original);
        let (preview, result) = rewrite(&s, ClientKind::ClaudeCode);
        // Claude Code ran: it counted a start and added a server of its own.
        let host_wrote = preview
            .new_text
            .replace("\"numStartups\": 3", "\"numStartups\": 4")
            .replace(
                "\"mine\": {\"command\": \"mine\"}",
                "\"mine\": {\"command\": \"mine\"}, \"later\": {\"command\": \"l\"}",
            );
        std::fs::write(&path, &host_wrote).unwrap();
        let undone = s.clients.undo(&result.rewrite.id, false).unwrap();
        assert_eq!(undone.entries_only, Some(1));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            original
                .replace("\"numStartups\": 3", "\"numStartups\": 4")
                .replace(
                    "\"mine\": {\"command\": \"mine\"}",
                    "\"mine\": {\"command\": \"mine\"}, \"later\": {\"command\": \"l\"}"
                ),
            "the desk entry as it was, the host's changes kept"
        );
        let kept = undone.kept_as.expect("the file as it was is kept");
        assert_eq!(
            std::fs::read_to_string(s.home.path().join(kept.trim_start_matches("~/"))).unwrap(),
            host_wrote
        );
        assert!(s.clients.rewrites().unwrap().is_empty(), "undone");
    }

    #[test]
    fn undo_after_a_change_to_a_routed_entry_is_refused_unless_forced() {
        let s = setup("rw-changed", OURS);
        let original =
            r#"{"mcpServers": {"desk": {"command": "desk-mcp", "args": ["--db", "/tmp/d"]}}}"#;
        let path = s.client_file(ClientKind::ClaudeDesktop, original);
        let (preview, result) = rewrite(&s, ClientKind::ClaudeDesktop);
        // The person pointed the routed entry somewhere else since.
        let edited = format!(
            "{}\n",
            preview.new_text.replace(
                "/opt/countersign/countersign-bridge",
                "/usr/bin/other-bridge"
            )
        );
        assert_ne!(edited.trim_end(), preview.new_text);
        std::fs::write(&path, &edited).unwrap();
        assert!(s.clients.rewrites().unwrap()[0].changed_since);
        match s.clients.undo(&result.rewrite.id, false) {
            Err(ClientError::Changed { message }) => assert!(
                message.starts_with("~/.config/Claude/claude_desktop_config.json has changed since Countersign rewrote it"),
                "{message}"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            edited,
            "refused: untouched"
        );
        let undone = s.clients.undo(&result.rewrite.id, true).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
        let kept = undone.kept_as.expect("the changed file is kept");
        assert!(kept.contains(".countersign-replaced-"));
        assert_eq!(
            std::fs::read_to_string(s.home.path().join(kept.trim_start_matches("~/"))).unwrap(),
            edited
        );
    }

    /// A backup that is not what was copied (emptied by a power cut before its data reached
    /// the disk) is not put back, forced or not: the file stays as it is. A record from before
    /// backups were hashed is undone as before.
    #[test]
    fn undo_refuses_a_backup_that_is_not_what_was_copied() {
        let s = setup("rw-backup-hash", OURS);
        let original =
            r#"{"mcpServers": {"desk": {"command": "desk-mcp", "args": ["--db", "/tmp/d"]}}}"#;
        let path = s.client_file(ClientKind::Cursor, original);
        let (preview, result) = rewrite(&s, ClientKind::Cursor);
        let backup = s
            .home
            .path()
            .join(result.rewrite.backup_path.trim_start_matches("~/"));
        std::fs::write(&backup, "").unwrap();
        for force in [false, true] {
            match s.clients.undo(&result.rewrite.id, force) {
                Err(ClientError::Refused(message)) => {
                    assert!(
                        message.contains("is not what Countersign copied"),
                        "{message}"
                    )
                }
                other => panic!("force {force}: {other:?}"),
            }
            assert_eq!(std::fs::read_to_string(&path).unwrap(), preview.new_text);
        }
        assert_eq!(s.clients.rewrites().unwrap().len(), 1, "still recorded");
        // An older record, without the backup's hash, with its backup whole.
        std::fs::write(&backup, original).unwrap();
        let records_path = s.clients.records_path.clone().unwrap();
        let mut records: Value =
            serde_json::from_str(&std::fs::read_to_string(&records_path).unwrap()).unwrap();
        let record = records["rewrites"][0].as_object_mut().unwrap();
        assert!(record.remove("backupSha256").is_some());
        std::fs::write(&records_path, records.to_string()).unwrap();
        s.clients.undo(&result.rewrite.id, false).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
    }

    /// Two hosts routed at once, then undone at once (the app's commands run concurrently):
    /// every record is kept, and every undo removes its own. Without the lock on the record of
    /// rewrites one of two saves made from the same list is lost; the threads start together
    /// (a barrier), and the race is run many times.
    #[test]
    fn concurrent_rewrites_and_undos_keep_every_record() {
        const ROUNDS: usize = 40;
        let s = setup("rw-concurrent", OURS);
        let original =
            r#"{"mcpServers": {"desk": {"command": "desk-mcp", "args": ["--db", "/tmp/d"]}}}"#;
        let hosts = [ClientKind::Cursor, ClientKind::VsCode];
        for client in hosts {
            let text = original.replace("mcpServers", client.servers_key());
            s.client_file(client, &text);
        }
        let at_once = |run: &(dyn Fn(usize) + Sync)| {
            let barrier = std::sync::Barrier::new(hosts.len());
            std::thread::scope(|scope| {
                for i in 0..hosts.len() {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        barrier.wait();
                        run(i);
                    });
                }
            });
        };
        for round in 0..ROUNDS {
            let plans: Vec<u64> = hosts
                .iter()
                .map(|&c| {
                    s.clients
                        .preview_rewrite(c, &route())
                        .unwrap()
                        .plan
                        .unwrap()
                })
                .collect();
            at_once(&|i| {
                s.clients.rewrite(plans[i]).unwrap();
            });
            let ids: Vec<String> = s
                .clients
                .rewrites()
                .unwrap()
                .into_iter()
                .map(|r| r.id)
                .collect();
            assert_eq!(ids.len(), hosts.len(), "round {round}: {ids:?}");
            at_once(&|i| {
                s.clients.undo(&ids[i], false).unwrap();
            });
            let left = s.clients.rewrites().unwrap();
            assert!(left.is_empty(), "round {round}: {left:?}");
        }
    }

    #[test]
    fn a_file_changed_after_the_preview_is_not_rewritten() {
        let s = setup("rw-stale", OURS);
        let path = s.client_file(
            ClientKind::Cursor,
            r#"{"mcpServers": {"desk": {"command": "desk-mcp", "args": ["--db", "/tmp/d"]}}}"#,
        );
        let preview = s
            .clients
            .preview_rewrite(ClientKind::Cursor, &route())
            .unwrap();
        std::fs::write(&path, r#"{"mcpServers": {}}"#).unwrap();
        assert!(matches!(
            s.clients.rewrite(preview.plan.unwrap()),
            Err(ClientError::Changed { .. })
        ));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            r#"{"mcpServers": {}}"#
        );
        assert!(s.clients.rewrites().unwrap().is_empty());
        let leftovers = std::fs::read_dir(path.parent().unwrap()).unwrap().count();
        assert_eq!(leftovers, 1, "no backup for a rewrite that did not happen");
    }

    #[test]
    fn undo_of_an_older_rewrite_says_a_later_one_came_after() {
        let s = setup("rw-twice", OURS);
        let path = s.client_file(
            ClientKind::Cursor,
            r#"{"mcpServers": {"desk": {"command": "desk-mcp", "args": ["--db", "/tmp/d"]}}}"#,
        );
        let (_, first) = rewrite(&s, ClientKind::Cursor);
        // The person adds github by hand; a second rewrite routes it.
        let text = std::fs::read_to_string(&path).unwrap().replacen(
            "{\"mcpServers\": {",
            "{\"mcpServers\": {\"github\": {\"type\": \"http\", \"url\": \"https://gh.example/mcp\", \"headers\": {\"Authorization\": \"Bearer gh\"}}, ",
            1,
        );
        std::fs::write(&path, text).unwrap();
        let (_, second) = rewrite(&s, ClientKind::Cursor);
        assert_ne!(first.rewrite.id, second.rewrite.id);
        match s.clients.undo(&first.rewrite.id, false) {
            Err(ClientError::Changed { message }) => {
                assert!(message.contains("rewritten again"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        s.clients.undo(&second.rewrite.id, false).unwrap();
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .contains("Bearer gh")
        );
    }

    #[test]
    fn warns_when_others_can_read_the_token_and_about_claude_code_running() {
        let s = setup("rw-warn", OURS);
        let path = s.client_file(
            ClientKind::ClaudeCode,
            r#"{"mcpServers": {"desk": {"command": "desk-mcp", "args": ["--db", "/tmp/d"]}}}"#,
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let preview = s
            .clients
            .preview_rewrite(ClientKind::ClaudeCode, &route())
            .unwrap();
        assert_eq!(preview.warnings.len(), 2, "{:?}", preview.warnings);
        assert!(preview.warnings[0].contains("other users"));
        assert!(preview.warnings[1].starts_with("Quit Claude Code first"));
    }

    #[test]
    fn a_rewrite_that_cannot_be_recorded_is_put_back() {
        let mut s = setup("rw-norecord", OURS);
        s.clients.records_path = None;
        let original =
            r#"{"mcpServers": {"desk": {"command": "desk-mcp", "args": ["--db", "/tmp/d"]}}}"#;
        let path = s.client_file(ClientKind::Cursor, original);
        let preview = s
            .clients
            .preview_rewrite(ClientKind::Cursor, &route())
            .unwrap();
        match s.clients.rewrite(preview.plan.unwrap()) {
            Err(e @ ClientError::Io { .. }) => {
                assert!(e.to_string().contains("not rewritten"), "{e}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
    }

    /// Gemini CLI's settings as a person keeps them (comments, its own keys, an SSE server,
    /// an older `httpUrl` entry): routed entries become `type: http` ones (as `gemini mcp add`
    /// writes), everything else stays as written, and undo gives back the file byte for byte.
    #[test]
    fn gemini_settings_are_routed_in_its_own_words_and_undone_byte_for_byte() {
        let s = setup("rw-gemini", OURS);
        let original = "{\n  // Gemini CLI settings\n  \"theme\": \"GitHub\",\n  \"mcpServers\": {\n    \"gh\": {\"httpUrl\": \"https://gh.example/mcp\", \"headers\": {\"Authorization\": \"Bearer gh\"}, \"timeout\": 30000, \"trust\": true},\n    \"desk\": {\"command\": \"desk-mcp\", \"args\": [\"--db\", \"/tmp/d\"], \"includeTools\": [\"list\"]},\n    \"old\": {\"url\": \"https://old.example/sse\"}\n  }\n}\n";
        let path = s.client_file(ClientKind::Gemini, original);
        let (preview, result) = rewrite(&s, ClientKind::Gemini);
        assert_eq!(result.routed, 2);
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(
            written.starts_with("{\n  // Gemini CLI settings\n  \"theme\": \"GitHub\","),
            "{written}"
        );
        let servers = &read_json(&path)["mcpServers"];
        assert_eq!(
            servers["gh"],
            json!({"type": "http", "url": format!("http://127.0.0.1:{PORT}/mcp/github"), "headers": {"Authorization": "Bearer TOKEN"}})
        );
        assert_eq!(servers["old"], json!({"url": "https://old.example/sse"}));
        let old = preview
            .kept
            .iter()
            .find(|k| k.name == "old")
            .expect("the SSE entry is kept");
        assert!(
            old.reason.contains("SSE transport is not supported"),
            "{}",
            old.reason
        );
        let undone = s.clients.undo(&result.rewrite.id, false).unwrap();
        assert_eq!(undone.path, "~/.gemini/settings.json");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
    }

    /// The host applies its own tool filters to a URL entry as to a command: they stay on the
    /// routed entry (else the agent could call, through the gateway, tools the person had
    /// excluded), Gemini's `trust` does not, and undo gives back the file as it was.
    #[test]
    fn the_hosts_tool_filters_stay_on_the_routed_entry() {
        let s = setup("rw-filters", OURS);
        let gateway = format!("http://127.0.0.1:{PORT}/mcp/desk");
        let gemini = r#"{"mcpServers": {"desk": {"command": "desk-mcp", "args": ["--db", "/tmp/d"], "excludeTools": ["drop_table"], "includeTools": ["list", "read"], "trust": true}}}"#;
        let path = s.client_file(ClientKind::Gemini, gemini);
        let (_, result) = rewrite(&s, ClientKind::Gemini);
        assert_eq!(
            read_json(&path)["mcpServers"]["desk"],
            json!({"type": "http", "url": gateway, "headers": {"Authorization": "Bearer TOKEN"},
                   "includeTools": ["list", "read"], "excludeTools": ["drop_table"]})
        );
        s.clients.undo(&result.rewrite.id, false).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), gemini);

        let codex = "[mcp_servers.desk]\ncommand = \"desk-mcp\"\nargs = [\"--db\", \"/tmp/d\"]\ndisabled_tools = [\"drop_table\"]\nenabled_tools = [\"list\", \"drop_table\"]\ntool_timeout_sec = 120\n";
        let path = s.client_file(ClientKind::Codex, codex);
        let (_, result) = rewrite(&s, ClientKind::Codex);
        let written = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            super::super::codex::entries(&written).unwrap()[0].1,
            json!({"url": gateway, "http_headers": {"Authorization": "Bearer TOKEN"},
                   "enabled_tools": ["list", "drop_table"], "disabled_tools": ["drop_table"],
                   "tool_timeout_sec": 120})
        );
        s.clients.undo(&result.rewrite.id, false).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), codex);
    }

    /// Codex's TOML: the routed table is replaced by the gateway's URL and header, the
    /// other tables, the comments and the host's settings stay, an entry Countersign does not
    /// have is left alone, and undo gives back the file byte for byte.
    #[test]
    fn codex_config_is_routed_table_by_table_and_undone_byte_for_byte() {
        let s = setup("rw-codex", OURS);
        let original = "# my Codex\nmodel = \"o4-mini\"\n\n[mcp_servers.desk]\ncommand = \"desk-mcp\"\nargs = [\"--db\", \"/tmp/d\"]\nstartup_timeout_sec = 20\n\n# mine\n[mcp_servers.mine]\ncommand = \"mine\"\n\n[profiles.fast]\nmodel = \"o4-mini\"\n";
        let path = s.client_file(ClientKind::Codex, original);
        let (preview, result) = rewrite(&s, ClientKind::Codex);
        assert_eq!(result.routed, 1);
        assert_eq!(
            preview.changes[0].to,
            format!("http://127.0.0.1:{PORT}/mcp/desk")
        );
        let written = std::fs::read_to_string(&path).unwrap();
        // Codex's own timeout stays (`kept_when_routed`).
        assert_eq!(
            written,
            format!(
                "# my Codex\nmodel = \"o4-mini\"\n\n[mcp_servers.desk]\nurl = \"http://127.0.0.1:{PORT}/mcp/desk\"\nhttp_headers = {{ Authorization = \"Bearer TOKEN\" }}\nstartup_timeout_sec = 20\n\n# mine\n[mcp_servers.mine]\ncommand = \"mine\"\n\n[profiles.fast]\nmodel = \"o4-mini\"\n"
            )
        );
        // Routed now, so a second preview changes nothing.
        let again = s
            .clients
            .preview_rewrite(ClientKind::Codex, &route())
            .unwrap();
        assert_eq!(again.plan, None);
        s.clients.undo(&result.rewrite.id, false).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
    }
}
