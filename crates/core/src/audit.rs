//! The audit log: every question and how it ended, appended as JSON Lines.
//!
//! The record of an outcome is written and synced to disk before the outcome is handed to
//! the server, so a crash can lose an answer in flight but never send one unrecorded.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ask::{Ask, AskId, Outcome};
use crate::broker::unix_ms;

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("cannot open the audit log {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read the audit log {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// One line of the log.
// Records are written once and read in bulk; boxing the ask would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "event",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum AuditRecord {
    /// A question was put to the person.
    Asked { run: String, at_ms: u64, ask: Ask },
    /// A question ended.
    Resolved {
        run: String,
        at_ms: u64,
        id: AskId,
        #[serde(flatten)]
        outcome: Outcome,
    },
    /// A server's request was refused before it reached the person (e.g. a schema outside
    /// the supported subset).
    Refused {
        run: String,
        at_ms: u64,
        server: String,
        reason: String,
        request: Value,
    },
    /// The gateway's policy decided an agent's tool call without asking the person (a rule,
    /// a remembered "Always allow", or a trusted server's read-only annotation).
    Gated {
        run: String,
        at_ms: u64,
        server: String,
        agent: Option<String>,
        tool: String,
        allowed: bool,
        why: String,
    },
}

struct Inner {
    path: PathBuf,
    file: Mutex<File>,
    /// Tells this process's records apart from earlier runs' (ask ids restart at 1).
    run: String,
    /// Whether each outcome is fsynced; benchmarks of the broker turn this off.
    sync: bool,
}

#[derive(Clone)]
pub struct AuditLog {
    inner: Arc<Inner>,
}

impl AuditLog {
    /// Opens (creating if needed) the log at `path` for appending.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, AuditError> {
        Self::open_with(path.into(), true)
    }

    /// Like `open`, but outcomes are flushed to the OS without fsync. For benchmarks that
    /// measure the broker rather than the disk.
    pub fn open_unsynced(path: impl Into<PathBuf>) -> Result<Self, AuditError> {
        Self::open_with(path.into(), false)
    }

    fn open_with(path: PathBuf, sync: bool) -> Result<Self, AuditError> {
        let open_error = |source| AuditError::Open {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(open_error)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(open_error)?;
        Ok(AuditLog {
            inner: Arc::new(Inner {
                run: format!("{}-{}", unix_ms(), std::process::id()),
                path,
                file: Mutex::new(file),
                sync,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    pub fn run(&self) -> &str {
        &self.inner.run
    }

    pub(crate) fn record_asked(&self, ask: &Ask) {
        self.append(
            &AuditRecord::Asked {
                run: self.inner.run.clone(),
                at_ms: unix_ms(),
                ask: ask.clone(),
            },
            false,
        );
    }

    pub(crate) fn record_resolved(&self, id: AskId, outcome: &Outcome) {
        self.append(
            &AuditRecord::Resolved {
                run: self.inner.run.clone(),
                at_ms: unix_ms(),
                id,
                outcome: outcome.clone(),
            },
            self.inner.sync,
        );
    }

    pub fn record_refused(&self, server: &str, reason: &str, request: &Value) {
        self.append(
            &AuditRecord::Refused {
                run: self.inner.run.clone(),
                at_ms: unix_ms(),
                server: server.to_owned(),
                reason: reason.to_owned(),
                request: request.clone(),
            },
            self.inner.sync,
        );
    }

    pub(crate) fn record_gated(
        &self,
        server: &str,
        agent: Option<&str>,
        tool: &str,
        allowed: bool,
        why: &str,
    ) {
        self.append(
            &AuditRecord::Gated {
                run: self.inner.run.clone(),
                at_ms: unix_ms(),
                server: server.to_owned(),
                agent: agent.map(str::to_owned),
                tool: tool.to_owned(),
                allowed,
                why: why.to_owned(),
            },
            false,
        );
    }

    fn append(&self, record: &AuditRecord, sync: bool) {
        let mut line = match serde_json::to_vec(record) {
            Ok(line) => line,
            Err(e) => {
                tracing::error!(error = %e, "cannot serialize an audit record");
                return;
            }
        };
        line.push(b'\n');
        let mut file = self.inner.file.lock().unwrap_or_else(|e| e.into_inner());
        // One write call per line: with O_APPEND, lines from this process never interleave.
        let written = file
            .write_all(&line)
            .and_then(|()| if sync { file.sync_data() } else { Ok(()) });
        if let Err(e) = written {
            tracing::error!(path = %self.inner.path.display(), error = %e, "cannot write the audit log");
        }
    }

    /// Every record in the log, oldest first. Lines that do not parse (a torn last line after
    /// a crash, a newer format) are skipped and counted in the second value.
    pub fn history(&self) -> Result<(Vec<AuditRecord>, usize), AuditError> {
        read_history(&self.inner.path)
    }
}

pub fn read_history(path: &Path) -> Result<(Vec<AuditRecord>, usize), AuditError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(source) => {
            return Err(AuditError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    let mut records = Vec::new();
    let mut skipped = 0;
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|source| AuditError::Read {
            path: path.to_owned(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(&line) {
            Ok(record) => records.push(record),
            Err(_) => skipped += 1,
        }
    }
    Ok((records, skipped))
}
