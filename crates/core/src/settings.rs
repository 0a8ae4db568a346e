//! The person's preferences set in the app (not the server config, which they edit by hand):
//! which servers are muted, which tool calls are always allowed. (Start at login is the OS's autostart entry itself, not a copy
//! here.) Kept as JSON beside the config; written atomically so a
//! crash mid-write leaves the old file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use crate::ask::approval::{Call, DefinitionChange, Lasting, RememberedDecision};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase", default)]
pub struct Settings {
    /// Servers whose questions send no desktop notification (they still open a dialog).
    pub muted_servers: BTreeSet<String>,
    /// Tool-call decisions the person chose to remember (for a session, a time, always), each
    /// for one agent's token, server and tool. (An older `alwaysAllow` list, keyed by the name
    /// agents give themselves, is not carried over: those calls are asked about once more.)
    pub remembered: Vec<RememberedDecision>,
    /// Decisions from before they named their server were bound once (`bind_endpoints`);
    /// any still unbound decide nothing, and are never bound later.
    #[serde(default)]
    pub endpoints_bound: bool,
    /// The id the next remembered decision gets. Ids only go up, never reused: Settings names
    /// the decision to revoke by its id from a list that may be minutes old, and an id given
    /// again (after an expiry or a revoke) would revoke the newer decision instead, maybe the
    /// person's last "never".
    #[serde(default)]
    #[ts(skip)]
    pub next_decision_id: u64,
    /// Remembered decisions this version cannot read (a newer version's kind, say), kept as
    /// they came and written back with the rest, so they are not lost. One of them may be a
    /// denial, so while any names a server (or names none), that server's calls are decided by
    /// the config's rules and readable denials only: no remembered allow and no trusted
    /// server's automatic allow runs a call it might refuse (`holds_back`).
    #[serde(skip)]
    #[ts(skip)]
    pub unread: Vec<serde_json::Value>,
    /// What can be told of each of `unread`, as Settings lists them (so the person knows what
    /// "Forget them" forgets, and which servers it holds back); never kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub unread_shown: Option<Vec<UnreadShown>>,
}

/// What can be told of a remembered decision this version cannot read: each field only if it
/// reads as this version's would (untrusted text: it is in the file).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct UnreadShown {
    pub agent_name: Option<String>,
    pub server: Option<String>,
    pub tool: Option<String>,
    pub allow: Option<bool>,
    /// For what stands for a file that could not be read (`Settings::lost`): where it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub lost_in: Option<String>,
}

impl UnreadShown {
    fn of(decision: &serde_json::Value) -> UnreadShown {
        let text = |key: &str| {
            decision
                .get(key)
                .and_then(serde_json::Value::as_str)
                .map(|t| {
                    let mut t = t.to_owned();
                    crate::cut_to(&mut t, 200);
                    t
                })
        };
        UnreadShown {
            agent_name: text("agentName"),
            server: text("server").filter(|s| !s.is_empty()),
            tool: text("tool"),
            allow: decision.get("allow").and_then(serde_json::Value::as_bool),
            lost_in: text(LOST_IN),
        }
    }
}

/// Whether a decision has lapsed by `now_ms`, and can go from the list: a Deny by the patient
/// clock too (`crate::ask::patient_ms`, read once), so a clock set forward deletes no "never"
/// before its time.
fn lapsed(now_ms: u64) -> impl Fn(&RememberedDecision) -> bool {
    let patient = now_ms.min(crate::ask::patient_ms());
    move |d| d.is_expired(if d.allow { now_ms } else { patient })
}

/// The key of the unread decision that stands for a file that could not be read
/// (`Settings::lost`): where that file is.
const LOST_IN: &str = "lostIn";

/// What a start on settings it could not read tells the person.
const HELD_BACK: &str = "since the decisions it held (a \"never\" among them, perhaps) are \
                         unknown, until you forget them in Settings no remembered or trusted \
                         allow runs a tool call on any server without asking you";

impl Settings {
    /// The decisions' times as the person's clock reads them, for Settings to show: they are
    /// kept on the decision clock, which runs `ahead_ms` ahead of the wall clock after the
    /// computer's clock was set back (`crate::ask::decision_ms`), so "until 15:30" would read
    /// later than it ends by as much. (Under a second apart, the clocks only round differently.)
    pub fn on_the_wall_clock(mut self, ahead_ms: u64) -> Settings {
        if ahead_ms < 1_000 {
            return self;
        }
        let back = |ms: u64| ms.saturating_sub(ahead_ms);
        for d in &mut self.remembered {
            if let Lasting::Until { until_ms } = d.lasting {
                d.lasting = Lasting::Until {
                    until_ms: back(until_ms),
                };
            }
            d.created_ms = back(d.created_ms);
            d.last_used_ms = d.last_used_ms.map(back);
        }
        self
    }

    /// Decisions made on the decision clock ahead of where it reads now (`now_ms`): the clock
    /// was set back since (before this start, or it ran ahead in the last run). An allow for a
    /// time cannot tell how much of it is left, so it goes and the person is asked; waiting
    /// until the clock caught up with it, it would allow as long again as chosen, later than
    /// chosen. Anything else is taken as made now: a Deny the person gives from now on is later
    /// than it, and so outweighs it (`gate::outweighs`), as it would have.
    /// Whether it changed anything (then it is saved at once: left on disk, an allow dropped
    /// here came back at a later start, once the clock had passed when it was made).
    fn made_ahead_of(&mut self, now_ms: u64) -> bool {
        let mut changed = false;
        self.remembered.retain_mut(|d| {
            if d.created_ms <= now_ms {
                return true;
            }
            changed = true;
            if d.allow && matches!(d.lasting, Lasting::Until { .. }) {
                tracing::warn!(
                    id = d.id,
                    "an allow made ahead of the clock is dropped: it asks again"
                );
                return false;
            }
            d.created_ms = now_ms;
            d.last_used_ms = d.last_used_ms.map(|used| used.min(now_ms));
            true
        });
        changed
    }

    /// The defaults, in place of a settings file that could not be read (`where` it is now):
    /// what it held is unknown, a "never" perhaps, so it stands as one unread decision that
    /// names no server, and holds back every remembered or trusted allow on every server until
    /// the person has seen it and forgets it. Starting from the defaults alone, a trusted
    /// server's reads and read-only tools ran unasked where the person had said "never".
    fn lost(r#where: &Path) -> Settings {
        Settings {
            unread: vec![serde_json::json!({ LOST_IN: r#where.display().to_string() })],
            ..Settings::default()
        }
    }

    /// The server an unread decision names: `None` when it names none readable (then it may
    /// be about any server).
    fn unread_server(decision: &serde_json::Value) -> Option<&str> {
        decision
            .get("server")
            .and_then(serde_json::Value::as_str)
            .filter(|name| !name.is_empty())
    }

    /// Whether unread decisions hold back allows for `server`.
    pub fn holds_back(&self, server: &str) -> bool {
        self.unread
            .iter()
            .any(|d| Self::unread_server(d).is_none_or(|named| named == server))
    }

    /// What can be told of each unread decision.
    pub fn unread_shown(&self) -> Vec<UnreadShown> {
        self.unread.iter().map(UnreadShown::of).collect()
    }

    /// The servers unread decisions hold back, each once (`""` for one that names none).
    pub fn held_back_servers(&self) -> Vec<String> {
        let named: BTreeSet<&str> = self
            .unread
            .iter()
            .map(|d| Self::unread_server(d).unwrap_or(""))
            .collect();
        named.into_iter().map(str::to_owned).collect()
    }
}

/// The settings in `bytes`: a remembered decision that does not read (a newer version's kind)
/// costs only itself, and is kept in `unread`.
fn read_settings(bytes: &[u8]) -> Result<Settings, serde_json::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Loose {
        #[serde(default)]
        remembered: Vec<serde_json::Value>,
        #[serde(flatten)]
        rest: serde_json::Map<String, serde_json::Value>,
    }
    let mut loose: Loose = serde_json::from_slice(bytes)?;
    // Only ever worked out from `unread`, never taken from the file.
    loose.rest.remove("unreadShown");
    let mut settings: Settings = serde_json::from_value(serde_json::Value::Object(loose.rest))?;
    for decision in loose.remembered {
        match RememberedDecision::deserialize(&decision) {
            Ok(read) if knows_every_field(&decision, &read) => settings.remembered.push(read),
            _ => settings.unread.push(decision),
        }
    }
    Ok(settings)
}

/// Whether `read` holds every field `decision` has, at any depth: one this version does not
/// know (a newer version's narrowing of what it covers, say) would be dropped in the reading,
/// and the decision read as a wider one than the person made.
fn knows_every_field(decision: &serde_json::Value, read: &RememberedDecision) -> bool {
    fn within(written: &serde_json::Value, kept: &serde_json::Value) -> bool {
        match (written, kept) {
            (serde_json::Value::Object(written), serde_json::Value::Object(kept)) => written
                .iter()
                .all(|(key, value)| kept.get(key).is_some_and(|k| within(value, k))),
            _ => true,
        }
    }
    let mut decision = decision.clone();
    // Worked out as Settings lists a decision, never kept: not a field of the decision's.
    if let Some(fields) = decision.as_object_mut() {
        fields.remove("inert");
    }
    serde_json::to_value(read).is_ok_and(|kept| within(&decision, &kept))
}

/// Why a remembered decision that would decide a call no longer does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChangedSince {
    /// The tool's fields that changed.
    pub tool: Vec<DefinitionChange>,
    /// The server's name now runs or reaches another server (its command, arguments,
    /// environment, directory, URL or headers changed).
    pub server: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot save settings to {path}: {source}")]
pub struct SettingsError {
    path: String,
    source: std::io::Error,
}

/// What becomes of a change that cannot be saved, as the person is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unsaved {
    /// Not made.
    Dropped,
    /// A remembered allow, not made: the call is asked about again.
    DroppedAllow,
    /// A remembered Deny: kept in memory, since it only refuses and the person chose it.
    KeptDeny,
    /// What holds back allows, kept in memory all the same.
    KeptHoldBack,
}

impl Unsaved {
    fn told(self) -> &'static str {
        match self {
            Self::Dropped => "the change was not made",
            Self::DroppedAllow => "your allow was not kept, so you will be asked again",
            Self::KeptDeny => "your \"never\" is kept until Countersign quits",
            Self::KeptHoldBack => "what holds back allows is kept until Countersign quits",
        }
    }
}

/// The settings in memory and on disk. `path: None` keeps them in memory only.
#[derive(Debug, Clone, Default)]
pub struct SettingsStore {
    path: Option<PathBuf>,
    current: Arc<RwLock<Settings>>,
    /// Why the last save failed, until one succeeds: the person is told (`unsaved`), since the
    /// change they made in a dialog is gone, or lasts only until Countersign quits.
    unsaved: Arc<tokio::sync::watch::Sender<Option<String>>>,
}

impl SettingsStore {
    /// Reads `path`; a missing file is the defaults. A file that cannot be read is not
    /// written over: the settings are kept in memory only for this run, and the warning says
    /// so. A file that is not JSON is moved aside (`settings.json.bad`) so the next save does
    /// not destroy what the person may want to recover; remembered decisions that do not read
    /// (say, a newer version's) are kept as they are, and hold back allows (`Settings::unread`).
    pub fn load(path: Option<PathBuf>) -> (SettingsStore, Option<String>) {
        let mut path = path;
        let (settings, warning) = match path.as_deref().map(crate::private_fs::read_ours) {
            None => (Settings::default(), None),
            // No file there (nor a folder for one): nothing to keep.
            Some(Err(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                (Settings::default(), None)
            }
            Some(Err(e)) => {
                let unread = path.take().unwrap_or_default();
                (
                    Settings::lost(&unread),
                    Some(format!(
                        "cannot read settings from {}: {e}; nothing is saved there until it \
                         can be read (changes last until Countersign quits), and {HELD_BACK}",
                        unread.display()
                    )),
                )
            }
            Some(Ok(bytes)) => match read_settings(&bytes) {
                Ok(settings) if settings.unread.is_empty() => (settings, None),
                Ok(settings) => {
                    let file = path.as_deref().unwrap_or(Path::new(""));
                    let servers = settings.held_back_servers();
                    let which = if servers.iter().any(String::is_empty) {
                        "any server".to_owned()
                    } else {
                        servers.join(", ")
                    };
                    let warning = format!(
                        "{}: {} remembered decision(s) cannot be read by this version and are \
                         kept as they are; until you forget them in Settings, no remembered or \
                         trusted allow runs a tool call on {which} without asking you",
                        file.display(),
                        settings.unread.len()
                    );
                    (settings, Some(warning))
                }
                Err(e) => {
                    let broken = path.clone().unwrap_or_default();
                    let aside = broken.with_extension("json.bad");
                    let kept = match std::fs::rename(&broken, &aside) {
                        Ok(()) => format!("kept as {}", aside.display()),
                        Err(move_error) => {
                            // Not moved aside: not written over either.
                            path = None;
                            format!(
                                "cannot move it aside ({move_error}), so nothing is saved there \
                                 until it is fixed"
                            )
                        }
                    };
                    (
                        Settings::lost(&aside),
                        Some(format!(
                            "{}: {e}; using defaults ({kept}), and {HELD_BACK}",
                            broken.display()
                        )),
                    )
                }
            },
        };
        let mut settings = settings;
        // Session numbers start again with each run: a session decision from a previous run
        // must not match a new session that happens to get its number.
        settings
            .remembered
            .retain(|d| d.lasting != Lasting::Session);
        let judged = settings.made_ahead_of(crate::ask::decision_ms());
        // A file moved aside leaves none: the hold-back is written at once, so a restart before
        // any other change still holds back. So is what was judged made ahead of the clock.
        let lost = settings.unread.iter().any(|d| d.get(LOST_IN).is_some());
        if let Some(path) = &path
            && (judged || (lost && !path.exists()))
            && let Err(e) = save(path, &settings)
        {
            tracing::warn!(path = %path.display(), error = %e, "cannot write the settings as read");
        }
        let store = SettingsStore {
            path,
            current: Arc::new(RwLock::new(settings)),
            unsaved: Arc::default(),
        };
        (store, warning)
    }

    pub fn get(&self) -> Settings {
        self.current.read().expect("settings lock").clone()
    }

    pub fn is_muted(&self, server: &str) -> bool {
        self.current
            .read()
            .expect("settings lock")
            .muted_servers
            .contains(server)
    }

    /// Whether remembered decisions that cannot be read hold back allows for `server`
    /// (`Settings::holds_back`).
    pub fn holds_back(&self, server: &str) -> bool {
        self.current
            .read()
            .expect("settings lock")
            .holds_back(server)
    }

    /// A file that held the person's answers (`lost_in`, where it is now) could not be read:
    /// as with settings that could not be ([`Settings::lost`]), every remembered or trusted
    /// allow waits on the person until they forget it in Settings.
    /// Held back in memory even when that cannot be saved.
    pub fn hold_back_for(&self, lost_in: &Path) -> Result<(), SettingsError> {
        let held = Settings::lost(lost_in).unread;
        let hold = |s: &mut Settings| {
            for placeholder in &held {
                if !s.unread.contains(placeholder) {
                    s.unread.push(placeholder.clone());
                }
            }
        };
        // Held in memory even when it cannot be saved: it only holds back.
        self.change(Unsaved::KeptHoldBack, hold).map(|_| ())
    }

    /// Forgets the remembered decisions that cannot be read: the person has seen that they
    /// are there, and allows run again.
    pub fn forget_unread(&self) -> Result<Settings, SettingsError> {
        self.update(|s| s.unread.clear())
    }

    /// The remembered decision that decides `call`, if one does: a deny before an allow, so
    /// two overlapping decisions resolve to no.
    pub fn decision_for(&self, call: &Call) -> Option<RememberedDecision> {
        let current = self.current.read().expect("settings lock");
        let applying = current.remembered.iter().filter(|d| d.applies(call));
        let mut allow = None;
        for d in applying {
            if !d.allow {
                return Some(d.clone());
            }
            allow.get_or_insert_with(|| d.clone());
        }
        allow
    }

    /// Whether the person denied `call` in a decision that no longer applies because the tool
    /// or the server changed since: their last word on it is no, so nothing allows it unasked.
    pub fn denied_before_a_change(&self, call: &Call) -> bool {
        let current = self.current.read().expect("settings lock");
        current
            .remembered
            .iter()
            .any(|d| !d.allow && d.outdated_for(call))
    }

    /// What changed since the latest remembered decision that would decide `call` was made
    /// (it no longer applies because of it): the tool's fields, and whether the server is
    /// configured to be another one. Nothing when no decision is outdated.
    pub fn changed_since(&self, call: &Call, now: &serde_json::Value) -> ChangedSince {
        let current = self.current.read().expect("settings lock");
        current
            .remembered
            .iter()
            .filter(|d| d.outdated_for(call))
            .max_by_key(|d| d.created_ms)
            .map(|d| ChangedSince {
                tool: crate::ask::approval::changes(&d.definition, now),
                server: d.endpoint != call.endpoint,
            })
            .unwrap_or_default()
    }

    /// Binds decisions made before they named their server's endpoint to the endpoint each
    /// server has now (`identity_of` its name), once ever, at the first start with this
    /// version: the person gave them for the server as it was then, which is the best knowledge
    /// there is. A decision whose server is not configured then stays unbound for good and
    /// decides nothing (a server put under its name later is not the one it was given for).
    pub fn bind_endpoints(
        &self,
        identity_of: impl Fn(&str) -> Option<String>,
    ) -> Result<(), SettingsError> {
        if self.get().endpoints_bound {
            return Ok(());
        }
        self.update(|s| {
            s.endpoints_bound = true;
            for d in s.remembered.iter_mut().filter(|d| d.endpoint.is_empty()) {
                if let Some(identity) = identity_of(&d.server) {
                    d.endpoint = identity;
                }
            }
        })
        .map(|_| ())
    }

    /// Counts a use of decision `id`, in memory only: a call is not worth a disk write, and
    /// the counts are saved with the next change.
    pub fn touch(&self, id: u64, now_ms: u64) {
        let mut current = self.current.write().expect("settings lock");
        if let Some(d) = current.remembered.iter_mut().find(|d| d.id == id) {
            d.uses += 1;
            d.last_used_ms = Some(now_ms);
        }
    }

    /// Keeps `decision` (its id assigned here), dropping expired ones on the way.
    /// A Deny that cannot be saved is kept all the same, until Countersign quits (it only
    /// refuses, and the person chose it), and counts as kept; an allow that cannot be saved is
    /// not kept (an error), so the call is asked about again. Either way the failure is kept
    /// for the person (`unsaved`).
    pub fn remember(
        &self,
        mut decision: RememberedDecision,
        now_ms: u64,
    ) -> Result<RememberedDecision, SettingsError> {
        let unsaved = if decision.allow {
            Unsaved::DroppedAllow
        } else {
            Unsaved::KeptDeny
        };
        let kept = self.change(unsaved, |s| {
            let lapsed = lapsed(now_ms);
            s.remembered.retain(|d| !lapsed(d));
            // Not an id an unread decision has: a version that reads it would see two.
            let unread_ids = s.unread.iter().filter_map(|d| d.get("id")?.as_u64());
            decision.id = s
                .remembered
                .iter()
                .map(|d| d.id)
                .chain(unread_ids)
                .max()
                .unwrap_or(0)
                .saturating_add(1)
                .max(s.next_decision_id);
            s.next_decision_id = decision.id.saturating_add(1);
            s.remembered.push(decision.clone());
        });
        match kept {
            Ok(_) => Ok(decision),
            Err(_) if unsaved == Unsaved::KeptDeny => Ok(decision),
            Err(e) => Err(e),
        }
    }

    /// Revokes decision `id` (and drops expired ones).
    pub fn revoke(&self, id: u64, now_ms: u64) -> Result<Settings, SettingsError> {
        self.update(|s| {
            let lapsed = lapsed(now_ms);
            s.remembered.retain(|d| d.id != id && !lapsed(d));
        })
    }

    /// An agent's session ended: its session decisions end with it.
    pub fn end_session(&self, session: u64) -> Result<(), SettingsError> {
        let ends =
            |d: &RememberedDecision| d.lasting == Lasting::Session && d.session == Some(session);
        if !self.get().remembered.iter().any(ends) {
            return Ok(());
        }
        self.update(|s| s.remembered.retain(|d| !ends(d)))
            .map(|_| ())
    }

    /// The settings as Settings lists them: expired decisions are gone.
    pub fn current(&self, now_ms: u64) -> Settings {
        let mut settings = self.get();
        let lapsed = lapsed(now_ms);
        settings.remembered.retain(|d| !lapsed(d));
        settings
    }

    /// Applies `change`, saves, and returns the new settings. On a failed save the change is
    /// not kept, so what the app shows is what is on disk (but for what `remember` and
    /// `hold_back_for` keep all the same).
    pub fn update(&self, change: impl FnOnce(&mut Settings)) -> Result<Settings, SettingsError> {
        self.change(Unsaved::Dropped, change)
    }

    /// Makes `change`, in memory only if it is saved (or if `unsaved` says it is kept, then
    /// also when it cannot be, which the error still reports).
    fn change(
        &self,
        unsaved: Unsaved,
        change: impl FnOnce(&mut Settings),
    ) -> Result<Settings, SettingsError> {
        let mut current = self.current.write().expect("settings lock");
        let mut next = current.clone();
        change(&mut next);
        let saved = match &self.path {
            Some(path) => save(path, &next).map_err(|source| SettingsError {
                path: path.display().to_string(),
                source,
            }),
            None => Ok(()),
        };
        let kept = matches!(unsaved, Unsaved::KeptDeny | Unsaved::KeptHoldBack);
        if saved.is_ok() || kept {
            *current = next.clone();
        }
        // Told while the lock is held: a save that succeeds in another thread must not clear
        // the news of one that failed after it.
        match saved {
            Ok(()) => {
                self.unsaved.send_if_modified(|why| why.take().is_some());
                Ok(next)
            }
            Err(e) => {
                let told = format!("{e}; {}", unsaved.told());
                tracing::warn!("{told}");
                self.unsaved.send_replace(Some(told));
                Err(e)
            }
        }
    }

    /// Why the last change could not be saved, while no save since has succeeded.
    pub fn unsaved(&self) -> Option<String> {
        self.unsaved.borrow().clone()
    }

    /// Fires when [`Self::unsaved`] changes.
    pub fn unsaved_changes(&self) -> tokio::sync::watch::Receiver<Option<String>> {
        self.unsaved.subscribe()
    }
}

fn save(path: &Path, settings: &Settings) -> std::io::Result<()> {
    let mut value = serde_json::to_value(settings).map_err(std::io::Error::other)?;
    if let Some(remembered) = value
        .get_mut("remembered")
        .and_then(serde_json::Value::as_array_mut)
    {
        remembered.extend(settings.unread.iter().cloned());
    }
    let mut bytes = serde_json::to_vec_pretty(&value).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    // Who is always allowed to do what is the person's business: 0600.
    crate::private_fs::write_atomic(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read back at a start with the clock set back below when they were made: an allow for a
    /// time goes (how much of it is left cannot be told; kept, it allowed as long again once
    /// the clock caught up); anything else counts as made now, so a Deny given from now on
    /// outweighs it.
    /// After the computer's clock was set back, "for 15 minutes" chosen at 15:15 by the
    /// person's clock ends at 15:30 by it: Settings says so, not 15:30 plus how far it went back.
    #[test]
    fn settings_show_times_on_the_persons_clock() {
        let mut decision = RememberedDecision::for_test("x", "s", "e", "t", true);
        decision.lasting = Lasting::Until {
            until_ms: 10_000_000,
        };
        decision.created_ms = 9_100_000;
        decision.last_used_ms = Some(9_200_000);
        let settings = Settings {
            remembered: vec![decision.clone()],
            ..Settings::default()
        };
        let shown = settings.clone().on_the_wall_clock(3_600_000);
        let d = &shown.remembered[0];
        assert_eq!(
            d.lasting,
            Lasting::Until {
                until_ms: 6_400_000
            }
        );
        assert_eq!((d.created_ms, d.last_used_ms), (5_500_000, Some(5_600_000)));
        // The clocks less than a second apart: as kept.
        assert_eq!(settings.clone().on_the_wall_clock(999), settings);
    }

    #[test]
    fn decisions_made_ahead_of_the_clock_are_judged_at_a_start() {
        let made = |id: u64, allow: bool, lasting: Lasting| {
            let definition = crate::ask::approval::definition("t", None, None, None, None);
            RememberedDecision {
                id,
                agent: "a".into(),
                agent_name: "A".into(),
                server: "s".into(),
                endpoint: "e".into(),
                tool: "t".into(),
                allow,
                lasting,
                covering: crate::ask::approval::Covering::AnyArguments { also_sent: None },
                session: None,
                digest: crate::ask::approval::digest(&definition),
                definition,
                created_ms: 5_000,
                last_used_ms: Some(6_000),
                uses: 1,
                inert: None,
            }
        };
        let quarter = Lasting::Until {
            until_ms: 5_000 + 900_000,
        };
        let settings = Settings {
            remembered: vec![
                made(1, true, quarter.clone()),
                made(2, false, quarter.clone()),
                made(3, true, Lasting::Always),
            ],
            ..Settings::default()
        };
        let mut behind = settings.clone();
        assert!(behind.made_ahead_of(1_000));
        let kept: Vec<(u64, u64, Option<u64>)> = behind
            .remembered
            .iter()
            .map(|d| (d.id, d.created_ms, d.last_used_ms))
            .collect();
        assert_eq!(kept, [(2, 1_000, Some(1_000)), (3, 1_000, Some(1_000))]);
        // A clock that is not behind changes nothing.
        let mut on_time = settings.clone();
        assert!(!on_time.made_ahead_of(7_000));
        assert_eq!(on_time, settings);
        // Read at a start: the dropped allow is gone from the file too, so a later start, the
        // clock put right, does not find it again.
        let path = temp("ahead");
        let day_ahead = crate::ask::decision_ms() + 86_400_000;
        let mut ahead = settings.clone();
        for d in &mut ahead.remembered {
            d.created_ms = day_ahead;
            if let Lasting::Until { until_ms } = &mut d.lasting {
                *until_ms = day_ahead + 900_000;
            }
        }
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        save(&path, &ahead).unwrap();
        let (store, _) = SettingsStore::load(Some(path.clone()));
        let ids = |s: &Settings| s.remembered.iter().map(|d| d.id).collect::<Vec<_>>();
        assert_eq!(ids(&store.get()), [2, 3]);
        let on_disk = read_settings(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(ids(&on_disk), [2, 3]);
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cs-settings-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("settings.json")
    }

    #[test]
    fn defaults_when_missing_and_round_trip() {
        let path = temp("roundtrip");
        let (store, warning) = SettingsStore::load(Some(path.clone()));
        assert_eq!(warning, None);
        assert_eq!(store.get(), Settings::default());
        store
            .update(|s| {
                s.muted_servers.insert("github".into());
            })
            .unwrap();
        assert!(store.is_muted("github"));
        let (again, _) = SettingsStore::load(Some(path));
        assert!(again.is_muted("github"));
        assert!(!again.is_muted("demo"));
    }

    /// A decision that cannot be saved: a Deny is kept until Countersign quits, an allow is
    /// not (asked again); either way the person is told, until a save succeeds, which writes
    /// the Deny kept meanwhile.
    #[test]
    fn a_never_that_cannot_be_saved_is_kept_and_told() {
        let path = temp("unsaved");
        let (store, _) = SettingsStore::load(Some(path.clone()));
        let mut told = store.unsaved_changes();
        let dir = path.parent().unwrap();
        // A file where the folder should be: no save can succeed.
        std::fs::write(dir, b"").unwrap();
        let denial = RememberedDecision::for_test("x", "s", "e", "delete_repo", false);
        let kept = store.remember(denial, 0).expect("kept in memory");
        assert_eq!(store.get().remembered, vec![kept], "the never is kept");
        assert!(told.has_changed().unwrap());
        let why = told.borrow_and_update().clone().unwrap();
        assert!(why.contains("kept until Countersign quits"), "{why}");
        let allow = RememberedDecision::for_test("x", "s", "e", "read_file", true);
        assert!(store.remember(allow, 0).is_err());
        assert_eq!(store.get().remembered.len(), 1, "the allow is not kept");
        let why = told.borrow_and_update().clone().unwrap();
        assert!(why.contains("asked again"), "{why}");
        std::fs::remove_file(dir).unwrap();
        store.update(|_| {}).unwrap();
        assert_eq!(store.unsaved(), None);
        assert!(told.has_changed().unwrap());
        let on_disk = read_settings(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(on_disk.remembered.len(), 1);
        assert!(!on_disk.remembered[0].allow);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A decision's id is never given again, after it expired or was revoked: Settings revokes
    /// by id from a list that may be old.
    #[test]
    fn a_decision_id_is_never_given_again() {
        let path = temp("ids");
        let (store, _) = SettingsStore::load(Some(path.clone()));
        let mut brief = RememberedDecision::for_test("x", "s", "e", "write_file", true);
        brief.lasting = Lasting::Until { until_ms: 1_000 };
        let first = store.remember(brief, 0).unwrap();
        // Expired, and dropped as the next one is kept: the next must not take its id.
        let denial = RememberedDecision::for_test("x", "s", "e", "delete_repo", false);
        let second = store.remember(denial.clone(), 2_000).unwrap();
        assert_ne!(second.id, first.id);
        // An old list's Revoke of the first revokes nothing now.
        store.revoke(first.id, 2_000).unwrap();
        assert_eq!(store.get().remembered, vec![second.clone()]);
        // Revoked, then another kept; and across a restart.
        store.revoke(second.id, 2_000).unwrap();
        let third = store.remember(denial.clone(), 2_000).unwrap();
        assert!(third.id > second.id, "{third:?}");
        let (again, _) = SettingsStore::load(Some(path));
        again.revoke(third.id, 2_000).unwrap();
        let fourth = again.remember(denial, 2_000).unwrap();
        assert!(fourth.id > third.id, "{fourth:?}");
    }

    /// A settings file that cannot be read is never written over; one decision that does not
    /// read costs only itself, and is written back as it came until the person forgets it.
    #[test]
    fn what_cannot_be_read_is_kept_not_destroyed() {
        let path = temp("unreadable");
        let (store, _) = SettingsStore::load(Some(path.clone()));
        for tool in ["a", "b"] {
            store
                .remember(RememberedDecision::for_test("x", "s", "e", tool, false), 0)
                .unwrap();
        }
        // A decision of a kind a newer version made.
        let mut text: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        text["remembered"][1]["lasting"] = serde_json::json!({"kind": "untilTheMoon"});
        // What is held back is worked out, never read from the file.
        text["unreadShown"] = serde_json::json!([{"server": "nothing"}]);
        std::fs::write(&path, text.to_string()).unwrap();
        let (store, warning) = SettingsStore::load(Some(path.clone()));
        let warning = warning.unwrap();
        assert!(warning.contains("1 remembered decision"), "{warning}");
        assert!(
            warning.contains("tool call on s without asking"),
            "{warning}"
        );
        let tools: Vec<String> = store.get().remembered.into_iter().map(|d| d.tool).collect();
        assert_eq!(tools, ["a"]);
        assert!(store.holds_back("s") && !store.holds_back("t"));
        assert_eq!(store.get().unread_shown, None);
        // Saved with the next change, under a new id of its own, and read back as it was.
        let c = store
            .remember(RememberedDecision::for_test("x", "s", "e", "c", true), 0)
            .unwrap();
        assert_eq!(c.id, 3);
        let on_disk: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(on_disk["remembered"][2], text["remembered"][1]);
        assert!(on_disk.get("heldBack").is_none() && on_disk.get("unreadShown").is_none());
        assert_eq!(
            store.get().unread_shown(),
            [UnreadShown {
                agent_name: Some(text["remembered"][1]["agentName"].as_str().unwrap().into()),
                server: Some("s".into()),
                tool: Some("b".into()),
                allow: Some(false),
                lost_in: None,
            }]
        );
        let (store, _) = SettingsStore::load(Some(path.clone()));
        assert!(store.holds_back("s"));
        assert_eq!(store.get().held_back_servers(), ["s"]);
        // A newer version's field, which may narrow what it covers, at any level: unread, not
        // read as wider. (`inert` is how Settings lists one, never a field of its own.)
        let known = serde_json::to_value(&store.get().remembered[0]).unwrap();
        for (at, field) in [
            ("", "ports"),
            ("covering", "ports"),
            ("lasting", "onlyOnWeekdays"),
        ] {
            let mut decision = known.clone();
            match at {
                "" => decision[field] = serde_json::json!([443]),
                place => decision[place][field] = serde_json::json!([443]),
            }
            let file = serde_json::json!({"remembered": [decision, known]});
            let read = read_settings(file.to_string().as_bytes()).unwrap();
            assert_eq!(
                (read.remembered.len(), read.unread.len()),
                (1, 1),
                "{at}.{field}"
            );
        }
        let mut listed = known.clone();
        listed["inert"] = serde_json::json!("serverGone");
        let file = serde_json::json!({"remembered": [listed]});
        assert!(
            read_settings(file.to_string().as_bytes())
                .unwrap()
                .unread
                .is_empty()
        );
        // One that names no server holds back every server.
        store
            .update(|s| {
                s.unread
                    .push(serde_json::json!({"kind": "everything", "server": ""}))
            })
            .unwrap();
        assert!(store.holds_back("t"));
        assert_eq!(store.get().held_back_servers(), ["", "s"]);
        // Forgotten: gone from the file, and nothing is held back.
        store.forget_unread().unwrap();
        let (store, warning) = SettingsStore::load(Some(path.clone()));
        assert_eq!(warning, None);
        assert!(!store.holds_back("s") && !store.holds_back("t"));
        assert_eq!(store.get().remembered.len(), 2);
        // A file that cannot be read (a directory in its place: even root cannot read it).
        let _ = std::fs::remove_file(&path);
        std::fs::create_dir_all(path.join("in-the-way")).unwrap();
        let (store, warning) = SettingsStore::load(Some(path.clone()));
        assert!(warning.unwrap().contains("nothing is saved there"));
        store
            .update(|s| {
                s.muted_servers.insert("github".into());
            })
            .unwrap();
        assert!(store.is_muted("github"));
        assert!(path.join("in-the-way").is_dir(), "not written over");
    }

    /// Decisions from before they named their server are bound once to the server of that name
    /// as configured at start; one for a server not configured stays unbound (it decides
    /// nothing), and a bound one is not rebound.
    #[test]
    fn decisions_without_a_server_endpoint_are_bound_to_the_server_configured_at_start() {
        let path = temp("bind");
        let decision = |server: &str, endpoint: &str| {
            RememberedDecision::for_test("a", server, endpoint, "t", true)
        };
        let (store, _) = SettingsStore::load(Some(path.clone()));
        for (server, endpoint) in [("fs", ""), ("gone", ""), ("web", "sha256:kept")] {
            store.remember(decision(server, endpoint), 0).unwrap();
        }
        let identity_of = |name: &str| (name != "gone").then(|| format!("sha256:{name}-now"));
        store.bind_endpoints(identity_of).unwrap();
        // Once: a server put under the unbound one's name later does not inherit it.
        store
            .bind_endpoints(|name| Some(format!("sha256:{name}-later")))
            .unwrap();
        let (again, _) = SettingsStore::load(Some(path));
        let endpoints: Vec<(String, String)> = again
            .get()
            .remembered
            .into_iter()
            .map(|d| (d.server, d.endpoint))
            .collect();
        assert_eq!(
            endpoints,
            [
                ("fs".into(), "sha256:fs-now".into()),
                ("gone".into(), String::new()),
                ("web".into(), "sha256:kept".into())
            ]
        );
    }

    #[test]
    fn a_broken_file_gives_defaults_and_a_warning() {
        let path = temp("broken");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{ not json").unwrap();
        let (store, warning) = SettingsStore::load(Some(path.clone()));
        let warning = warning.unwrap();
        assert!(warning.contains("using defaults"), "{warning}");
        assert!(warning.contains("without asking you"), "{warning}");
        assert_eq!(
            std::fs::read_to_string(path.with_extension("json.bad")).unwrap(),
            "{ not json"
        );
        // What it held is unknown: every allow waits on the person, across a restart too, until
        // they forget it.
        assert!(store.holds_back("any server"));
        let shown = store.get().unread_shown();
        assert_eq!(shown.len(), 1);
        let aside = path.with_extension("json.bad").display().to_string();
        assert_eq!(shown[0].lost_in.as_deref(), Some(aside.as_str()));
        let (again, warning) = SettingsStore::load(Some(path.clone()));
        assert!(again.holds_back("x"), "a restart still holds back");
        assert!(warning.unwrap().contains("forget them in Settings"));
        store.forget_unread().unwrap();
        assert!(!store.holds_back("x"));
        let (forgotten, warning) = SettingsStore::load(Some(path.clone()));
        assert!(!forgotten.holds_back("x"));
        assert_eq!(warning, None);
    }

    #[test]
    fn an_unreadable_file_holds_back_allows_too() {
        let path = temp("unreadable");
        // A folder where the file should be: it cannot be read.
        std::fs::create_dir_all(&path).unwrap();
        let (store, warning) = SettingsStore::load(Some(path.clone()));
        assert!(warning.unwrap().contains("without asking you"));
        assert!(store.holds_back("desk"));
        std::fs::remove_dir_all(&path).unwrap();
    }

    #[test]
    fn a_failed_save_keeps_the_old_settings() {
        let dir = temp("readonly");
        // A file where the directory should be: the save cannot create it.
        std::fs::create_dir_all(dir.parent().unwrap().parent().unwrap()).unwrap();
        std::fs::write(dir.parent().unwrap(), "file").unwrap();
        let (store, _) = SettingsStore::load(Some(dir));
        assert!(
            store
                .update(|s| {
                    s.muted_servers.insert("x".into());
                })
                .is_err()
        );
        assert!(!store.is_muted("x"));
        let _ = std::fs::remove_file(temp("readonly").parent().unwrap());
    }
}
