//! The audit log: every question and how it ended, appended as JSON Lines.
//!
//! The record of an outcome is written and synced to disk before the outcome is handed to
//! the server, so a crash can lose an answer in flight but never send one unrecorded; when it
//! cannot be written, recording fails and the broker answers no. A call the gate lets through
//! without asking (an allow rule, a remembered decision) is written before it is forwarded but
//! not synced, which would cost every call a disk flush: a power cut can lose the newest such
//! lines (README, "the audit log"). Each line is linked to the
//! one before by its hash (`chain`), across rotation by size (`files`), and `verify` finds
//! the first record changed, removed or moved.

mod chain;
mod files;
mod kept;
pub mod traffic;
mod verify;

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use files::Rotation;
pub use kept::{KEPT_ASK_BYTES, kept_text};
pub use traffic::Count;
pub use verify::{BreakKind, ChainBreak, Verification};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ask::unix_ms;
use crate::ask::{Ask, AskId, Outcome};

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
    #[error("cannot write the audit log {path}: {source}")]
    Write {
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
    /// The answer to a server's question left Countersign: the transport took it (written
    /// to the server's stdin, or accepted by its endpoint), or the retried request carrying it
    /// (multi round-trip input) was answered, or, for addresses a call needs opened, the call
    /// was made again or ended on it. For an agent's call the person allowed: the call was
    /// forwarded and the server answered. An outcome without this record may not have reached
    /// the server: Countersign stopped, or the session (or the agent) ended, first.
    Delivered { run: String, at_ms: u64, id: AskId },
    /// A server's request was refused before it reached the person (e.g. a schema outside
    /// the supported subset).
    Refused {
        run: String,
        at_ms: u64,
        server: String,
        reason: String,
        /// The request, whole up to [`KEPT_REQUEST_BYTES`] of JSON; past that, its start,
        /// its length and its SHA-256 (`kept_request`).
        request: Value,
        /// Refusals of the same server since its last recorded one that were counted but not
        /// written ([`REFUSALS_BURST`]).
        #[serde(default, skip_serializing_if = "is_zero")]
        unrecorded: u64,
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
    /// The gateway forwarded an agent's request that passes no gate (listing, completion,
    /// logging level, unsubscribe), so every request that reached a server is on record.
    Forwarded {
        run: String,
        at_ms: u64,
        server: String,
        agent: Option<String>,
        method: String,
    },
    /// What one agent did on one server without the person past its budget
    /// ([`traffic::BURST`]), from `since_ms` to `at_ms`: `Gated` and `Forwarded` records
    /// counted by kind, not written one by one, so that an agent cannot push the person's
    /// questions out of the log.
    Counted {
        run: String,
        at_ms: u64,
        since_ms: u64,
        server: String,
        agent: Option<String>,
        counts: Vec<Count>,
        /// Records of more kinds than [`traffic::KINDS`], counted together.
        #[serde(default, skip_serializing_if = "is_zero")]
        others: u64,
    },
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A refused request is written whole up to this many bytes of JSON, and past them as its
/// start, its length and its digest: refusals are never shown to the person, so without a
/// bound a server could push every earlier record out of the rotated log unseen.
pub const KEPT_REQUEST_BYTES: usize = 4 * 1024;
/// A refusal's reason, which may quote what the server sent, is kept up to this many bytes.
pub const KEPT_REASON_BYTES: usize = 1024;

/// Refusals of one server written in a burst; after it, one more every
/// [`REFUSAL_REFILL_MS`], the rest counted in the next one written (`unrecorded`).
pub const REFUSALS_BURST: u64 = 20;
pub const REFUSAL_REFILL_MS: u64 = 10_000;

/// `request` as a refusal (or a question) is written down: whole when small, else cut.
pub fn kept_request(request: &Value) -> Value {
    let text = serde_json::to_string(request).unwrap_or_default();
    if text.len() <= KEPT_REQUEST_BYTES {
        return request.clone();
    }
    use sha2::{Digest, Sha256};
    let mut end = KEPT_REQUEST_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    serde_json::json!({
        "cut": true,
        "bytes": text.len(),
        "sha256": hex::encode(Sha256::digest(text.as_bytes())),
        "start": &text[..end],
    })
}

/// How many more of a server's refusals may be written now, and how many were not.
#[derive(Debug)]
struct RefusalBudget {
    bucket: traffic::Bucket,
    unrecorded: u64,
}

struct Inner {
    path: PathBuf,
    writer: Mutex<files::Writer>,
    rotation: Rotation,
    /// Tells this process's records apart from earlier runs' (ask ids restart at 1).
    run: String,
    /// Whether each outcome is fsynced; benchmarks of the broker turn this off.
    sync: bool,
    /// By server (a configured name), or by server and agent (`server\0token`).
    refusals: Mutex<std::collections::HashMap<String, RefusalBudget>>,
    /// By server and agent (`server\0token`).
    traffic: Mutex<std::collections::HashMap<String, traffic::Budget>>,
    /// The last write failed: nothing is counted in memory until one succeeds again (a record
    /// that cannot be written must stop what it records, and a count would not).
    failing: std::sync::atomic::AtomicBool,
}

#[derive(Clone)]
pub struct AuditLog {
    inner: Arc<Inner>,
}

impl AuditLog {
    /// Opens (creating if needed) the log at `path` for appending.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, AuditError> {
        Self::open_with(path.into(), true, Rotation::default())
    }

    /// Like `open`, rotating by `rotation` instead of the default sizes.
    pub fn open_rotating(path: impl Into<PathBuf>, rotation: Rotation) -> Result<Self, AuditError> {
        Self::open_with(path.into(), true, rotation)
    }

    /// Like `open`, but outcomes are flushed to the OS without fsync. For benchmarks that
    /// measure the broker rather than the disk.
    pub fn open_unsynced(path: impl Into<PathBuf>) -> Result<Self, AuditError> {
        Self::open_with(path.into(), false, Rotation::default())
    }

    fn open_with(path: PathBuf, sync: bool, rotation: Rotation) -> Result<Self, AuditError> {
        let writer = files::Writer::open(&path, rotation).map_err(|source| AuditError::Open {
            path: path.clone(),
            source,
        })?;
        Ok(AuditLog {
            inner: Arc::new(Inner {
                run: format!("{}-{}", unix_ms(), std::process::id()),
                path,
                writer: Mutex::new(writer),
                rotation,
                sync,
                refusals: Mutex::default(),
                traffic: Mutex::default(),
                failing: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    pub fn run(&self) -> &str {
        &self.inner.run
    }

    /// The question as the person is shown it (its `kind`) and the request it came in, cut
    /// like a refusal's when large (`kept_request`): the shown question is the record.
    pub(crate) fn record_asked(&self, ask: &Ask) -> Result<(), AuditError> {
        let mut ask = ask.clone();
        ask.request = kept_request(&ask.request);
        let ask = kept::kept_ask(ask).ok_or_else(|| AuditError::Write {
            path: self.inner.path.clone(),
            source: std::io::Error::other("the question could not be cut to a record's size"),
        })?;
        self.append(
            &AuditRecord::Asked {
                run: self.inner.run.clone(),
                at_ms: unix_ms(),
                ask,
            },
            false,
        )
    }

    pub(crate) fn record_resolved(&self, id: AskId, outcome: &Outcome) -> Result<(), AuditError> {
        self.append(
            &AuditRecord::Resolved {
                run: self.inner.run.clone(),
                at_ms: unix_ms(),
                id,
                outcome: outcome.clone(),
            },
            self.inner.sync,
        )
    }

    /// Not synced: a crash of the process keeps what was written, and a power cut that loses
    /// it leaves the outcome reading "may not have reached the server", the cautious side.
    pub(crate) fn record_delivered(&self, id: AskId) -> Result<(), AuditError> {
        let run = self.inner.run.clone();
        self.record_delivered_in(&run, id)
    }

    /// For an ask of an earlier run: an approval that outlived its call, and its run, is
    /// carried out when the agent makes the call again.
    pub(crate) fn record_delivered_in(&self, run: &str, id: AskId) -> Result<(), AuditError> {
        self.append(
            &AuditRecord::Delivered {
                run: run.to_owned(),
                at_ms: unix_ms(),
                id,
            },
            false,
        )
    }

    /// Records a refusal of `server`'s request, within the server's budget (see
    /// [`REFUSALS_BURST`]); past it, the refusal is counted for the next one written. Not
    /// synced: a refusal sends nothing but a no.
    pub fn record_refused(
        &self,
        server: &str,
        reason: &str,
        request: &Value,
    ) -> Result<(), AuditError> {
        self.record_refused_at(server, server, reason, request, unix_ms())
    }

    /// [`Self::record_refused`] within the budget named `budget` rather than the server's:
    /// refusals of an agent's requests, which must not use up the server's.
    pub(crate) fn record_refused_within(
        &self,
        budget: &str,
        server: &str,
        reason: &str,
        request: &Value,
    ) -> Result<(), AuditError> {
        self.record_refused_at(budget, server, reason, request, unix_ms())
    }

    fn record_refused_at(
        &self,
        budget: &str,
        server: &str,
        reason: &str,
        request: &Value,
        now_ms: u64,
    ) -> Result<(), AuditError> {
        let unrecorded = {
            let mut budgets = self
                .inner
                .refusals
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let budget = budgets.entry(budget.to_owned()).or_insert(RefusalBudget {
                bucket: traffic::Bucket::full(REFUSALS_BURST, now_ms),
                unrecorded: 0,
            });
            if !budget
                .bucket
                .take(now_ms, REFUSALS_BURST, REFUSAL_REFILL_MS)
            {
                budget.unrecorded += 1;
                return Ok(());
            }
            std::mem::take(&mut budget.unrecorded)
        };
        self.append(
            &AuditRecord::Refused {
                run: self.inner.run.clone(),
                at_ms: now_ms,
                server: server.to_owned(),
                reason: kept_text(reason, KEPT_REASON_BYTES).into_owned(),
                request: kept_request(request),
                unrecorded,
            },
            false,
        )
    }

    /// Writes down everything counted and not yet written: what agents did past their budget
    /// ([`Self::record_counted`]) and, for each refusal budget, the refusals counted since its
    /// last written one (a flood that stopped would otherwise keep its last count in memory
    /// until the next refusal, which may never come). Called as the app quits.
    pub fn record_what_was_counted(&self) -> Result<(), AuditError> {
        let traffic = self.record_counted(None);
        let counted: Vec<(String, u64)> = self
            .inner
            .refusals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
            .filter(|(_, budget)| budget.unrecorded > 0)
            .map(|(key, budget)| (key.clone(), std::mem::take(&mut budget.unrecorded)))
            .collect();
        for (key, unrecorded) in counted {
            // An agent's budget is named `server\0agent`.
            let server = key.split('\0').next().unwrap_or_default();
            let written = self.append(
                &AuditRecord::Refused {
                    run: self.inner.run.clone(),
                    at_ms: unix_ms(),
                    server: server.to_owned(),
                    reason: "refusals counted but not written (the last ones before Countersign \
                             quit)"
                        .to_owned(),
                    request: Value::Null,
                    unrecorded,
                },
                false,
            );
            if let Err(e) = written {
                // Not lost: counted again, for whatever is written next.
                if let Some(budget) = self
                    .inner
                    .refusals
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_mut(&key)
                {
                    budget.unrecorded += unrecorded;
                }
                return Err(e);
            }
        }
        traffic
    }

    /// A call the gateway's policy decided without asking, by the agent holding `token`
    /// (within that agent's budget on `server`: see [`traffic`]).
    pub(crate) fn record_gated(
        &self,
        server: &str,
        agent: Option<&str>,
        token: &str,
        tool: &str,
        allowed: bool,
        why: &str,
    ) -> Result<(), AuditError> {
        let kind = traffic::Kind {
            what: tool,
            allowed: Some(allowed),
            why: Some(why),
        };
        self.record_traffic(server, agent, Some(token), kind, unix_ms())
    }

    /// A request forwarded past no gate; by the agent holding `token` (within its budget on
    /// `server`), or by the person (`None`: a preview), always written.
    pub(crate) fn record_forwarded(
        &self,
        server: &str,
        agent: Option<&str>,
        token: Option<&str>,
        method: &str,
    ) -> Result<(), AuditError> {
        let kind = traffic::Kind {
            what: method,
            allowed: None,
            why: None,
        };
        self.record_traffic(server, agent, token, kind, unix_ms())
    }

    /// Writes `kind` as its own record, or counts it when the agent's budget is spent; first
    /// writes what this agent's budget counted, once that is due. An error means it is neither
    /// written nor counted: whatever it records must not happen.
    fn record_traffic(
        &self,
        server: &str,
        agent: Option<&str>,
        token: Option<&str>,
        kind: traffic::Kind,
        now_ms: u64,
    ) -> Result<(), AuditError> {
        if let Some(token) = token {
            let key = format!("{server}\0{token}");
            // While the log fails, nothing is counted: each record is written, or what it
            // records does not happen.
            let may_count = || {
                !self
                    .inner
                    .failing
                    .load(std::sync::atomic::Ordering::Relaxed)
            };
            let (due, mut verdict) = {
                let mut budgets = self.inner.traffic.lock().unwrap_or_else(|e| e.into_inner());
                let budget = budgets
                    .entry(key.clone())
                    .or_insert_with(|| traffic::Budget::new(now_ms));
                let due = budget.due(now_ms);
                // Counted only once what was counted before is written (below).
                let verdict = match due {
                    Some(_) => None,
                    None => Some(budget.judge(&kind, agent, now_ms, may_count())),
                };
                (due, verdict)
            };
            if let Some(due) = due {
                self.write_counted(&key, server, due, now_ms)?;
                let mut budgets = self.inner.traffic.lock().unwrap_or_else(|e| e.into_inner());
                verdict = budgets
                    .get_mut(&key)
                    .map(|budget| budget.judge(&kind, agent, now_ms, may_count()));
            }
            if verdict == Some(traffic::Verdict::Counted) {
                return Ok(());
            }
        }
        let what = traffic::clipped(kind.what, traffic::WHAT_BYTES).into_owned();
        let record = match (kind.allowed, kind.why) {
            (Some(allowed), Some(why)) => AuditRecord::Gated {
                run: self.inner.run.clone(),
                at_ms: now_ms,
                server: server.to_owned(),
                agent: agent.map(str::to_owned),
                tool: what,
                allowed,
                why: traffic::clipped(why, traffic::WHY_BYTES).into_owned(),
            },
            _ => AuditRecord::Forwarded {
                run: self.inner.run.clone(),
                at_ms: now_ms,
                server: server.to_owned(),
                agent: agent.map(str::to_owned),
                method: what,
            },
        };
        self.append(&record, false)
    }

    /// Writes what the budget `key` counted; what cannot be written is put back.
    fn write_counted(
        &self,
        key: &str,
        server: &str,
        counting: traffic::Counting,
        now_ms: u64,
    ) -> Result<(), AuditError> {
        let record = AuditRecord::Counted {
            run: self.inner.run.clone(),
            at_ms: now_ms,
            since_ms: counting.since_ms,
            server: server.to_owned(),
            agent: counting.agent.clone(),
            counts: counting.counts.clone(),
            others: counting.others,
        };
        self.append(&record, false).inspect_err(|_| {
            let mut budgets = self.inner.traffic.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(budget) = budgets.get_mut(key) {
                budget.put_back(counting);
            }
        })
    }

    /// Writes what every agent's budget counted: all of it (`None`, as the app quits), or
    /// what is due by `Some(now_ms)` (the gateway calls this every [`traffic::REFILL_MS`], so
    /// counts are on disk within about twice that even when the agent goes quiet).
    pub fn record_counted(&self, now_ms: Option<u64>) -> Result<(), AuditError> {
        let due: Vec<(String, traffic::Counting)> = self
            .inner
            .traffic
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
            .filter_map(|(key, budget)| {
                let due = match now_ms {
                    Some(now_ms) => budget.due(now_ms),
                    None => budget.counting.take(),
                };
                due.map(|due| (key.clone(), due))
            })
            .collect();
        let now = now_ms.unwrap_or_else(unix_ms);
        let mut result = Ok(());
        for (key, counting) in due {
            let server = key.split('\0').next().unwrap_or_default().to_owned();
            if let Err(e) = self.write_counted(&key, &server, counting, now) {
                result = Err(e);
            }
        }
        result
    }

    /// Writes `record` as the next link of the chain (synced with `sync`). An error means it
    /// is not in the log: whatever it would have recorded must not happen.
    fn append(&self, record: &AuditRecord, sync: bool) -> Result<(), AuditError> {
        let write_error = |source| AuditError::Write {
            path: self.inner.path.clone(),
            source,
        };
        let body = serde_json::to_vec(record).map_err(|e| write_error(std::io::Error::other(e)))?;
        // The chain's order is the file's order: link and write under one lock.
        let mut writer = self.inner.writer.lock().unwrap_or_else(|e| e.into_inner());
        let written = writer.append(&body, sync);
        self.inner
            .failing
            .store(written.is_err(), std::sync::atomic::Ordering::Relaxed);
        written.map_err(|source| {
            tracing::error!(path = %self.inner.path.display(), error = %source, "cannot write the audit log");
            write_error(source)
        })
    }

    /// The newest records, oldest first, read backwards from the end of the log (across
    /// rotated files) up to about `HISTORY_BYTES`: what History shows costs the same however
    /// long the log has grown.
    pub fn recent(&self) -> Result<Recent, AuditError> {
        read_recent(&self.inner.path, self.inner.rotation.keep, HISTORY_BYTES)
    }

    /// Every record in the current file, oldest first, read whole (tests and tools; History
    /// uses `recent`). Lines that do not parse are counted in the second value.
    pub fn history(&self) -> Result<(Vec<AuditRecord>, usize), AuditError> {
        read_history(&self.inner.path)
    }

    /// Checks the whole chain, and that its last record is the one this process last wrote.
    pub fn verify(&self) -> Result<Verification, AuditError> {
        let head = || {
            self.inner
                .writer
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .head()
        };
        let written = verify::Written {
            before: head(),
            after: &|| head().seq,
        };
        verify::verify(&self.inner.path, self.inner.rotation, Some(written))
    }
}

/// Checks the chain of the log at `path` and its rotated files (`countersign audit verify`).
pub fn verify_file(path: &Path) -> Result<Verification, AuditError> {
    if !path.exists() {
        return Err(AuditError::Read {
            path: path.to_owned(),
            source: std::io::ErrorKind::NotFound.into(),
        });
    }
    verify::verify(path, Rotation::default(), None)
}

/// How much of the log's end History reads at most.
pub const HISTORY_BYTES: u64 = 4 << 20;

/// The newest records of the log.
#[derive(Debug, Clone, PartialEq)]
pub struct Recent {
    /// Oldest first.
    pub records: Vec<AuditRecord>,
    /// Lines that did not parse (a newer format, an edit).
    pub skipped: usize,
    /// Older records exist beyond what was read.
    pub older: bool,
}

/// The newest records of the log at `path` (and its rotated files, up to `keep`), reading
/// backwards until about `budget` bytes have been read.
pub fn read_recent(path: &Path, keep: usize, budget: u64) -> Result<Recent, AuditError> {
    let mut newest_first = Vec::new();
    let mut skipped = 0;
    let mut used = 0u64;
    let mut older = false;
    for path in files::existing(path, keep) {
        let read_error = |source| AuditError::Read {
            path: path.clone(),
            source,
        };
        if used >= budget {
            older = true;
            break;
        }
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(read_error(e)),
        };
        let len = file.metadata().map_err(read_error)?.len();
        let mut lines = files::Backwards::new(&file, len).map_err(read_error)?;
        while let Some(line) = lines.next() {
            let line = line.map_err(read_error)?;
            used += line.len() as u64 + 1;
            match serde_json::from_slice(&line) {
                Ok(record) => newest_first.push(record),
                Err(_) => skipped += 1,
            }
            if used >= budget {
                older = lines.remaining() > 0;
                break;
            }
        }
    }
    newest_first.reverse();
    Ok(Recent {
        records: newest_first,
        skipped,
        older,
    })
}

/// Every record in the file at `path`, oldest first (lines that do not parse are counted).
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

#[cfg(test)]
mod tests {
    use super::*;

    fn log(name: &str) -> AuditLog {
        let dir = std::env::temp_dir().join(format!("cs-audit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        AuditLog::open(dir.join("audit.jsonl")).unwrap()
    }

    fn refusals(log: &AuditLog) -> Vec<(String, u64, Value)> {
        log.history()
            .unwrap()
            .0
            .into_iter()
            .filter_map(|r| match r {
                AuditRecord::Refused {
                    server,
                    unrecorded,
                    request,
                    ..
                } => Some((server, unrecorded, request)),
                _ => None,
            })
            .collect()
    }

    /// A server flooding refusals (never shown to the person) cannot fill the log and rotate
    /// earlier records away: a burst is written, then one per refill, each later one saying
    /// how many were counted and not written; another server's refusals are not held back.
    #[test]
    fn a_flood_of_refusals_is_counted_not_written() {
        let log = log("flood");
        let t = 1_000_000;
        let request = serde_json::json!({"message": "x"});
        for _ in 0..1_000 {
            log.record_refused_at("noisy", "noisy", "bad schema", &request, t)
                .unwrap();
        }
        log.record_refused_at("quiet", "quiet", "bad schema", &request, t)
            .unwrap();
        log.record_refused_at(
            "noisy",
            "noisy",
            "bad schema",
            &request,
            t + REFUSAL_REFILL_MS,
        )
        .unwrap();
        let written = refusals(&log);
        let noisy: Vec<u64> = written
            .iter()
            .filter(|(s, ..)| s == "noisy")
            .map(|(_, n, _)| *n)
            .collect();
        assert_eq!(noisy.len() as u64, REFUSALS_BURST + 1);
        assert_eq!(noisy.last(), Some(&(1_000 - REFUSALS_BURST)));
        assert!(noisy[..noisy.len() - 1].iter().all(|n| *n == 0));
        assert_eq!(written.iter().filter(|(s, ..)| s == "quiet").count(), 1);

        // The flood's tail, counted after that last one, is written as the app quits; so is an
        // agent's, under its server's name. Nothing counted is left out.
        for _ in 0..5 {
            log.record_refused_at(
                "noisy",
                "noisy",
                "bad schema",
                &request,
                t + REFUSAL_REFILL_MS,
            )
            .unwrap();
        }
        for _ in 0..(REFUSALS_BURST + 3) {
            log.record_refused_at("quiet\0agent-1", "quiet", "no token", &request, t)
                .unwrap();
        }
        log.record_what_was_counted().unwrap();
        let written = refusals(&log);
        let counted = |server: &str| -> u64 {
            written
                .iter()
                .filter(|(s, ..)| s == server)
                .map(|(_, n, _)| n + 1)
                .sum::<u64>()
                - written
                    .iter()
                    .filter(|(s, _, r)| s == server && r.is_null())
                    .count() as u64
        };
        assert_eq!(counted("noisy"), 1_000 + 1 + 5);
        assert_eq!(counted("quiet"), 1 + REFUSALS_BURST + 3);
        // Said once: a second call writes nothing more.
        log.record_what_was_counted().unwrap();
        assert_eq!(refusals(&log).len(), written.len());
    }

    /// An agent holding a token calls what its rules allow, and lists tools, as fast as it
    /// can: the person's answer written before stays in the log (rotated small here), and
    /// every call is on record, written or counted.
    #[test]
    fn an_agents_flood_cannot_push_the_persons_answers_out_of_the_log() {
        let dir = std::env::temp_dir().join(format!("cs-audit-traffic-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let rotation = Rotation {
            file_bytes: 64 << 10,
            keep: 3,
        };
        let log = AuditLog::open_rotating(dir.join("audit.jsonl"), rotation).unwrap();
        log.record_resolved(7, &Outcome::Declined).unwrap();
        let flood = 20_000;
        for i in 0..flood {
            if i % 2 == 0 {
                log.record_gated("desk", Some("Agent A"), "agent-a", "purge", true, "rule")
                    .unwrap();
            } else {
                log.record_forwarded("desk", Some("Agent A"), Some("agent-a"), "tools/list")
                    .unwrap();
            }
        }
        // Another agent's, and the person's preview, are written still.
        log.record_gated("desk", Some("Agent B"), "agent-b", "purge", true, "rule")
            .unwrap();
        log.record_forwarded("desk", None, None, "tools/call (preview, dryRun: true)")
            .unwrap();
        log.record_what_was_counted().unwrap();
        let records = read_recent(log.path(), rotation.keep, u64::MAX).unwrap();
        assert!(!records.older);
        let records = records.records;
        assert!(
            records
                .iter()
                .any(|r| matches!(r, AuditRecord::Resolved { id: 7, .. })),
            "the person's answer was rotated away"
        );
        let written = records
            .iter()
            .filter(|r| match r {
                AuditRecord::Gated { agent, .. } | AuditRecord::Forwarded { agent, .. } => {
                    agent.as_deref() == Some("Agent A")
                }
                _ => false,
            })
            .count() as u64;
        let counted: u64 = records
            .iter()
            .filter_map(|r| match r {
                AuditRecord::Counted { counts, others, .. } => {
                    Some(counts.iter().map(|c| c.n).sum::<u64>() + others)
                }
                _ => None,
            })
            .sum();
        assert_eq!(written, traffic::BURST);
        assert_eq!(written + counted, flood);
        let b = |r: &AuditRecord| matches!(r, AuditRecord::Gated { agent: Some(a), .. } if a == "Agent B");
        assert_eq!(records.iter().filter(|r| b(r)).count(), 1);
        assert!(records.iter().any(
            |r| matches!(r, AuditRecord::Forwarded { agent: None, method, .. } if method.contains("preview"))
        ));
        assert!(log.verify().unwrap().intact());
    }

    /// What a server or an agent chose (a refusal's reason quoting it, a decision naming its
    /// exact arguments, a tool's name) is kept to size in every record.
    #[test]
    fn every_record_is_kept_to_size() {
        let log = log("sizes");
        let huge = "x".repeat(1 << 20);
        log.record_refused("desk", &huge, &Value::Null).unwrap();
        log.record_gated("desk", Some("A"), "a", &huge, false, &huge)
            .unwrap();
        log.record_forwarded("desk", Some("A"), Some("a"), &huge)
            .unwrap();
        let file = std::fs::read_to_string(log.path()).unwrap();
        assert_eq!(file.lines().count(), 3);
        for line in file.lines() {
            assert!(line.len() < 4 * 1024, "{}", line.len());
        }
    }

    /// While the log cannot be written, an agent past its budget is not counted in memory
    /// instead: each of its calls is refused, as every call was before counting began.
    #[test]
    fn nothing_is_counted_while_the_log_fails() {
        let Ok(log) = AuditLog::open("/dev/full") else {
            return;
        };
        for _ in 0..traffic::BURST + 5 {
            assert!(
                log.record_gated("desk", Some("A"), "a", "purge", true, "rule")
                    .is_err()
            );
        }
    }

    /// A large request is written as its start, its length and its digest.
    #[test]
    fn a_large_refused_request_is_cut_with_its_length_and_digest() {
        let log = log("cut");
        let huge = serde_json::json!({"message": "é".repeat(1_000_000)});
        log.record_refused("big", "too big", &huge).unwrap();
        let (_, _, request) = refusals(&log).remove(0);
        assert_eq!(request["cut"], true);
        let whole = serde_json::to_string(&huge).unwrap();
        assert_eq!(request["bytes"], whole.len());
        assert_eq!(request["sha256"].as_str().unwrap().len(), 64);
        let start = request["start"].as_str().unwrap();
        assert!(start.len() <= KEPT_REQUEST_BYTES && whole.starts_with(start));
        let small = serde_json::json!({"message": "hi"});
        assert_eq!(kept_request(&small), small);
    }
}
