//! Approvals that outlive the call: a question may take an afternoon, and no agent should hold
//! a connection open that long. When the person has not answered within the server's
//! `approvalWaitSecs`, the agent is told the approval is pending (with an id) and may make the
//! same call again later; the question stays in the app, across restarts, until it is answered
//! or expires. The person's answer is used once, by the agent's next call with the same token,
//! server, tool, exact arguments and tool definition.

use std::path::PathBuf;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// At most this many approvals wait at once (across servers); past it, a call that times out
/// waiting is denied as before rather than kept.
pub(crate) const MAX_PENDING: usize = 200;

/// At most this many of them are one agent's: no agent leaves the others none.
pub(crate) const MAX_PENDING_PER_AGENT: usize = 50;

/// A call kept longer than this (as compact JSON: its arguments, twice, and its tool's
/// definition) is not kept for a later answer: every change rewrites the whole file, and 200
/// calls of 4 MiB would be a file of gigabytes rewritten on each.
pub(crate) const MAX_PENDING_ENTRY: usize = 128 * 1024;

/// Why an approval was not kept for a later answer: the end of "nobody answered in time,
/// and ...".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotKept {
    #[error("{MAX_PENDING} approvals are already pending")]
    Full,
    #[error("this agent already has {MAX_PENDING_PER_AGENT} approvals pending")]
    AgentFull,
    #[error(
        "its arguments and its tool's definition are too long to keep for a later answer (over \
         {} KiB)",
        MAX_PENDING_ENTRY / 1024
    )]
    TooLong,
    #[error("the agent's token was revoked")]
    Revoked,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum PendingState {
    Waiting,
    Allowed,
    Denied,
}

/// One approval waiting for the person, or answered and waiting for the agent's retry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PendingApproval {
    pub id: String,
    /// The agent's token id, and its name for the person.
    pub agent: String,
    pub agent_name: String,
    pub declared: Option<String>,
    pub server: String,
    /// The server's identity when the person was asked (`TransportConfig::identity`): the
    /// answer is for that server only. Empty in approvals kept before it was: those are
    /// never used.
    #[serde(default)]
    pub endpoint: String,
    pub tool: String,
    /// What the retry must send, as compact JSON, and as a value to show again.
    pub arguments: String,
    pub arguments_value: Value,
    pub definition: Value,
    pub digest: String,
    pub created_ms: u64,
    pub expires_ms: u64,
    pub state: PendingState,
    /// The question it came from, to record the call forwarded once the agent makes it.
    #[serde(default)]
    pub asked: Option<AskedIn>,
    /// When the person answered (the gate's clock): a denial given after an allow was
    /// remembered outweighs it. `None` while waiting, and in answers kept before it was.
    #[serde(default)]
    pub answered_ms: Option<u64>,
    /// The decision the person chose to remember with their answer, if any: revoked in
    /// Settings before the retry came, it takes the answer with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<u64>,
}

/// An ask, named across runs (ask ids restart with each run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AskedIn {
    pub run: String,
    pub id: crate::ask::AskId,
}

/// What an answer is used by: a call of the same agent's token, to the same server as
/// configured, of the same tool as defined, with the same arguments.
pub(crate) struct SameCall<'a> {
    pub agent: &'a str,
    pub server: &'a str,
    pub endpoint: &'a str,
    pub tool: &'a str,
    pub arguments: &'a str,
    pub digest: &'a str,
}

/// What a call finds in the store.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Found {
    /// Answered (at `answered_ms`, if known): used up now.
    Answered {
        id: String,
        allow: bool,
        asked: Option<AskedIn>,
        answered_ms: Option<u64>,
    },
    /// Still waiting for the person.
    Waiting {
        id: String,
    },
    /// Answered, but that the answer is used up cannot be saved: not used.
    Unsaved {
        id: String,
        allow: bool,
        answered_ms: Option<u64>,
    },
    None,
}

/// The pending approvals, kept in `pending-approvals.json` (0600) beside the token.
pub(crate) struct PendingStore {
    path: Option<PathBuf>,
    entries: Mutex<Vec<PendingApproval>>,
    changed: tokio::sync::Notify,
    /// Held while a retry checks that its approval's question is on the desktop, so two
    /// retries at once ask it again once.
    asking_again: Mutex<()>,
    /// The approvals waiting with no question on the desktop (it could not be asked again when
    /// its session ended, or the app is quitting): a retry asks them again.
    unasked: Mutex<std::collections::HashSet<String>>,
}

impl PendingStore {
    /// Reads the file; an unreadable one starts empty (logged): a lost pending approval is a
    /// question asked again, never a yes.
    /// A file that cannot be read may have held the person's denial of a call that a
    /// remembered allow would otherwise run: `hold_back` is told where it will be (`.bad`
    /// beside it) and holds back such allows; only once that is saved is the file moved there.
    /// Until then (and if it cannot be moved) it is not written over, so the next start finds
    /// it again.
    pub(crate) fn load(
        path: Option<PathBuf>,
        now_ms: u64,
        hold_back: impl FnOnce(&std::path::Path) -> bool,
    ) -> PendingStore {
        let mut path = path;
        let read = path.as_deref().map(|p| {
            crate::private_fs::read_ours(p)
                .and_then(|bytes| serde_json::from_slice(&bytes).map_err(std::io::Error::other))
        });
        let mut entries: Vec<PendingApproval> = match read {
            None => Vec::new(),
            Some(Ok(entries)) => entries,
            Some(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Some(Err(e)) => {
                let broken = path.clone().unwrap_or_default();
                let aside = broken.with_extension("json.bad");
                tracing::warn!(path = %broken.display(), error = %e, "pending approvals unreadable; starting empty, and holding back allows");
                if !hold_back(&aside) || std::fs::rename(&broken, &aside).is_err() {
                    path = None;
                }
                Vec::new()
            }
        };
        // Made ahead of the clock now (it was set back since): as if made now, lasting as long
        // as it had left, and an answer as if given now, so none outlives its time and a Deny
        // is not taken for older than an allow made since.
        // Saved at once if so: left on disk, they would last as long as first written at a
        // later start.
        let mut judged = false;
        for e in entries.iter_mut().filter(|e| e.created_ms > now_ms) {
            let ahead = e.created_ms - now_ms;
            e.created_ms = now_ms;
            e.expires_ms = e.expires_ms.saturating_sub(ahead);
            judged = true;
        }
        for e in &mut entries {
            if e.answered_ms.is_some_and(|answered| answered > now_ms) {
                e.answered_ms = Some(now_ms);
                judged = true;
            }
        }
        entries.retain(|e| e.expires_ms > now_ms);
        let store = PendingStore {
            path,
            entries: Mutex::new(entries),
            changed: tokio::sync::Notify::new(),
            asking_again: Mutex::new(()),
            unasked: Mutex::default(),
        };
        if judged {
            let _ = store.save(&store.lock());
        }
        store
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<PendingApproval>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn save(&self, entries: &[PendingApproval]) -> std::io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let written = serde_json::to_vec(entries)
            .map_err(std::io::Error::other)
            .and_then(|bytes| crate::private_fs::write_atomic(path, &bytes));
        if let Err(e) = &written {
            tracing::error!(path = %path.display(), error = %e, "cannot save pending approvals");
        }
        written
    }

    /// Keeps `approval` (made now, at its `created_ms`), first letting go of those expired.
    pub(crate) fn add(&self, approval: PendingApproval) -> Result<(), NotKept> {
        if serde_json::to_vec(&approval).map_or(usize::MAX, |kept| kept.len()) > MAX_PENDING_ENTRY {
            return Err(NotKept::TooLong);
        }
        let mut entries = self.lock();
        entries.retain(|e| e.expires_ms > approval.created_ms);
        if entries.len() >= MAX_PENDING {
            return Err(NotKept::Full);
        }
        if entries.iter().filter(|e| e.agent == approval.agent).count() >= MAX_PENDING_PER_AGENT {
            return Err(NotKept::AgentFull);
        }
        entries.push(approval);
        let _ = self.save(&entries);
        Ok(())
    }

    /// The person answered approval `id`, in the question `asked`, at `now_ms` (a decision
    /// remembered with the answer is tied to it after: [`Self::given_with`]).
    pub(crate) fn answer(&self, id: &str, allow: bool, asked: Option<AskedIn>, now_ms: u64) {
        let mut entries = self.lock();
        if let Some(e) = entries.iter_mut().find(|e| e.id == id) {
            e.asked = asked;
            e.answered_ms = Some(now_ms);
            e.decision = None;
            e.state = if allow {
                PendingState::Allowed
            } else {
                PendingState::Denied
            };
            let _ = self.save(&entries);
        }
        drop(entries);
        self.changed.notify_waiters();
    }

    /// Agent `agent`'s token was revoked: its approvals are gone, and the questions they
    /// were asked in are returned, to be withdrawn.
    pub(crate) fn forget_agent(&self, agent: &str) -> Vec<AskedIn> {
        let mut entries = self.lock();
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut *entries)
            .into_iter()
            .partition(|e| e.agent == agent);
        *entries = kept;
        if !gone.is_empty() {
            let _ = self.save(&entries);
        }
        drop(entries);
        self.changed.notify_waiters();
        gone.into_iter().filter_map(|e| e.asked).collect()
    }

    /// The answer to approval `id` was given with remembered decision `decision` (if it is
    /// still there to be used).
    pub(crate) fn given_with(&self, id: &str, decision: u64) {
        let mut entries = self.lock();
        if let Some(e) = entries
            .iter_mut()
            .find(|e| e.id == id && e.state != PendingState::Waiting)
        {
            e.decision = Some(decision);
            let _ = self.save(&entries);
        }
    }

    /// Remembered decision `decision` was revoked: the allows given with it go too, and their
    /// calls' retries are asked about afresh. (The person's "yes, and for 15 minutes", taken
    /// back before the agent came back for it, is a yes no more.)
    /// Whether that is saved: until it is, a restart brings the answers back, so the caller
    /// keeps the decision too (and says why).
    pub(crate) fn forget_decision(&self, decision: u64) -> std::io::Result<()> {
        self.forget_decisions(|d| d == decision)
    }

    /// The allows given with remembered decisions that are gone (revoked while no gateway
    /// ran, or before their answers' forgetting was saved; or lapsed and dropped from Settings
    /// since) go too: a yes no more, and the retry is asked about afresh. A Deny stays the
    /// person's word on its call, whatever became of a decision given with it (a "for this
    /// session" one never outlives a start).
    pub(crate) fn forget_decisions_but(&self, known: &std::collections::HashSet<u64>) {
        let _ = self.forget_decisions(|d| !known.contains(&d));
    }

    fn forget_decisions(&self, gone: impl Fn(u64) -> bool) -> std::io::Result<()> {
        let mut entries = self.lock();
        let before = entries.len();
        entries.retain(|e| e.state != PendingState::Allowed || !e.decision.is_some_and(&gone));
        let saved = if entries.len() != before {
            self.save(&entries)
        } else {
            Ok(())
        };
        drop(entries);
        self.changed.notify_waiters();
        saved
    }

    /// Approval `id` ended without an answer (expired, withdrawn): gone.
    pub(crate) fn remove(&self, id: &str) {
        let mut entries = self.lock();
        entries.retain(|e| e.id != id);
        let _ = self.save(&entries);
        drop(entries);
        self.changed.notify_waiters();
    }

    /// Approval `id`, as kept.
    fn get(&self, id: &str) -> Option<PendingApproval> {
        self.lock().iter().find(|e| e.id == id).cloned()
    }

    /// Approval `id` waits with no question on the desktop.
    fn unasked(&self, id: &str) {
        self.unasked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_owned());
    }

    /// Approval `id` is asked again, in question `asked`.
    fn asked_again(&self, id: &str, asked: AskedIn) {
        self.unasked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        let mut entries = self.lock();
        if let Some(e) = entries.iter_mut().find(|e| e.id == id) {
            e.asked = Some(asked);
            let _ = self.save(&entries);
        }
    }

    /// Whether no call waits or was answered.
    pub(crate) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// What there is for this call: an answer (used up now), a question still waiting, or
    /// nothing.
    pub(crate) fn find(&self, call: &SameCall, now_ms: u64) -> Found {
        let mut entries = self.lock();
        let Some(i) = entries.iter().position(|e| {
            e.agent == call.agent
                && e.server == call.server
                && e.endpoint == call.endpoint
                && e.tool == call.tool
                && e.arguments == call.arguments
                && e.digest == call.digest
                && e.expires_ms > now_ms
        }) else {
            return Found::None;
        };
        match entries[i].state {
            PendingState::Waiting => Found::Waiting {
                id: entries[i].id.clone(),
            },
            state => {
                let allow = state == PendingState::Allowed;
                let used = entries.remove(i);
                if self.save(&entries).is_err() {
                    // Still on file, the answer would be used again after a restart: it is
                    // used only once that it was can be kept.
                    let (id, answered_ms) = (used.id.clone(), used.answered_ms);
                    entries.insert(i, used);
                    return Found::Unsaved {
                        id,
                        allow,
                        answered_ms,
                    };
                }
                Found::Answered {
                    id: used.id,
                    allow,
                    asked: used.asked,
                    answered_ms: used.answered_ms,
                }
            }
        }
    }

    /// A wait for the next change, registered now: a change between this call and the
    /// await is not missed.
    pub(crate) fn changed(&self) -> std::pin::Pin<Box<tokio::sync::futures::Notified<'_>>> {
        let mut notified = Box::pin(self.changed.notified());
        notified.as_mut().enable();
        notified
    }

    /// The approvals still waiting for the person (to ask again after a restart).
    pub(crate) fn waiting(&self, now_ms: u64) -> Vec<PendingApproval> {
        self.lock()
            .iter()
            .filter(|e| e.state == PendingState::Waiting && e.expires_ms > now_ms)
            .cloned()
            .collect()
    }
}

/// A fresh id the agent is told: short, random, not a counter another agent could guess.
pub(crate) fn fresh_id() -> String {
    let mut bytes = [0u8; 6];
    let _ = getrandom::fill(&mut bytes);
    format!("p-{}", hex::encode(bytes))
}

/// The question behind a pending approval, waited for apart from any call.
type Waiting = std::pin::Pin<Box<dyn std::future::Future<Output = crate::ask::Outcome> + Send>>;

/// The upstream session a pending call came in (`approval::Call::session`), which a decision
/// "for this session" given in answer lasts for, while this run knows whether it is still open:
/// `closed` fires when it ends. Kept in memory only: session numbers start again with each run.
pub(crate) struct CameIn {
    pub session: u64,
    pub closed: tokio_util::sync::CancellationToken,
}

/// Keeps `approval` and waits for the person's answer to its question (`outcome`) in the
/// background; why not (and the question withdrawn) when it cannot be kept. `came_in` is the
/// upstream session of the call.
pub(crate) fn keep_waiting(
    shared: &std::sync::Arc<super::Shared>,
    approval: PendingApproval,
    outcome: Waiting,
    came_in: CameIn,
) -> Result<String, NotKept> {
    let id = approval.id.clone();
    // An agent revoked while it was asked makes no call: nothing to keep its question for.
    let kept = if shared.agents.holds(&approval.agent) {
        shared.pending.add(approval.clone())
    } else {
        Err(NotKept::Revoked)
    };
    if let Err(why) = kept {
        // Dropping the wait withdraws the question.
        drop(outcome);
        return Err(why);
    }
    let asked = approval.asked.clone();
    tokio::spawn(settle(
        shared.clone(),
        approval,
        outcome,
        asked,
        Some(came_in),
    ));
    Ok(id)
}

/// A retry found approval `id` still waiting: its question is on the desktop, or is asked
/// again now. (When the session it was asked in ended, it is asked again at once; if that found
/// no place, the question was gone from the desktop until the next start, and every retry was
/// told "pending" meanwhile.)
pub(crate) fn ask_if_unasked(shared: &std::sync::Arc<super::Shared>, id: &str) {
    let store = &shared.pending;
    let _one = store.asking_again.lock().unwrap_or_else(|e| e.into_inner());
    // Only one known to have no question: one whose question the person has just answered
    // is also waiting, for the instant until its answer is kept, and is not asked twice.
    if !store
        .unasked
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(id)
    {
        return;
    }
    let Some(approval) = store.get(id) else {
        return;
    };
    if approval.state == PendingState::Waiting {
        reopen(shared, approval);
    }
}

/// Asks again about every approval still waiting (after a restart): the person sees them as
/// before, and their answers wait for the agents' retries.
pub(crate) fn ask_again(shared: &std::sync::Arc<super::Shared>) {
    for approval in shared.pending.waiting(super::Gateway::now_ms(shared)) {
        reopen(shared, approval);
    }
}

/// Opens the question of `approval` again, tied to no agent's session: the session the call
/// came in has ended (or belonged to a run before), and a decision "for this session" given
/// in answer is for no session.
fn reopen(shared: &std::sync::Arc<super::Shared>, approval: PendingApproval) {
    use crate::ask::AskKind;
    let Some(config) = shared.server(&approval.server) else {
        // The server is no longer configured: nothing could run, nothing to ask.
        shared.pending.remove(&approval.id);
        return;
    };
    // The agent's token was revoked (it can make no call), or the server's name now runs or
    // reaches another server than the one asked about (the answer could never be used): there
    // is nothing to ask.
    if !shared.agents.holds(&approval.agent) || approval.endpoint != config.transport.identity() {
        shared.pending.remove(&approval.id);
        return;
    }
    let now = super::Gateway::now_ms(shared);
    let mut asker = crate::mcp::connect::asker_for(&config);
    asker.agent = Some(approval.agent_name.clone());
    asker.agent_id = Some(approval.agent.clone());
    asker.declared = approval.declared.clone();
    let text = |field: &str| {
        approval
            .definition
            .get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let (arguments_text, also_sent_text) = crate::gateway::sent::shown(&approval.arguments_value);
    let kind = AskKind::ToolCall {
        tool: approval.tool.clone(),
        title: text("title"),
        description: text("description"),
        annotations: approval
            .definition
            .get("annotations")
            .filter(|a| !a.is_null())
            .cloned(),
        arguments_text,
        also_sent_text,
        arguments: approval.arguments_value.clone(),
        changed: Vec::new(),
        server_changed: false,
        preview: false,
        unlisted: approval
            .definition
            .get("inputSchema")
            .is_none_or(Value::is_null),
        // The session the call came in ended with the run that asked first.
        sessionless: true,
    };
    let opened = shared.broker.open(crate::ask::broker::NewAsk {
        asker,
        kind,
        request: serde_json::json!({
            "name": approval.tool,
            "arguments": approval.arguments_value,
            "pendingApproval": approval.id,
        }),
        timeout: Some(std::time::Duration::from_millis(
            approval.expires_ms.saturating_sub(now),
        )),
        session: shared.pending_session,
    });
    match opened {
        Ok(pending) => {
            let asked = AskedIn {
                run: shared.broker.audit().run().to_owned(),
                id: pending.id(),
            };
            shared.pending.asked_again(&approval.id, asked.clone());
            tokio::spawn(settle(
                shared.clone(),
                approval,
                Box::pin(pending.outcome()),
                Some(asked),
                None,
            ));
        }
        // The server's questions are at their cap: kept, asked again at the agent's retry or
        // the next start.
        Err(e) => {
            tracing::warn!(error = %e, id = %approval.id, "cannot ask about a pending approval now");
            shared.pending.unasked(&approval.id);
        }
    }
}

/// Waits for the person's answer to the question `asked` and keeps it for the agent's retry.
/// `came_in`: the upstream session the call came in, when the question is still the one asked
/// in it.
async fn settle(
    shared: std::sync::Arc<super::Shared>,
    approval: PendingApproval,
    outcome: Waiting,
    asked: Option<AskedIn>,
    came_in: Option<CameIn>,
) {
    use crate::ask::approval::Lasting;
    use crate::ask::{CancelReason, Outcome};
    let store = &shared.pending;
    let outcome = outcome.await;
    if !shared.agents.holds(&approval.agent) {
        // Revoked meanwhile: its retry would be refused, and nothing is remembered for it.
        store.remove(&approval.id);
        return;
    }
    let now = super::Gateway::now_ms(&shared);
    match outcome {
        Outcome::Accepted { .. } | Outcome::AlwaysAllowed => {
            store.answer(&approval.id, true, asked, now)
        }
        Outcome::Remembered { decision } => {
            let allow = decision.allow;
            // A decision "for this session" lasts for the session the call came in, while it
            // is open. One already ended keeps no decision: it would decide nothing, yet be
            // listed in Settings as if it did. The answer still goes to the retry.
            let for_session = decision.lasting == Lasting::Session;
            // The answer first: a retry between the two is answered by it (and uses it up),
            // where one that came after the decision but before the answer ran by the decision
            // and left the answer to run the same call again once the decision had lapsed.
            store.answer(&approval.id, allow, asked, now);
            let mut kept = None;
            let session = came_in
                .as_ref()
                .filter(|came_in| for_session && !came_in.closed.is_cancelled())
                .map(|came_in| came_in.session);
            if for_session && session.is_none() {
                tracing::info!(
                    id = %approval.id,
                    "the session of a pending call has ended: its answer for that session is \
                     used by the retry, and not remembered"
                );
            } else {
                kept = super::forward::keep_decision(
                    &shared.settings,
                    super::forward::Decided {
                        agent: &approval.agent,
                        agent_name: &approval.agent_name,
                        server: &approval.server,
                        endpoint: &approval.endpoint,
                        tool: &approval.tool,
                        definition: &approval.definition,
                        digest: &approval.digest,
                        read: false,
                    },
                    decision,
                    session,
                    now,
                );
                // The session ended while it was kept, maybe after its end forgot the
                // session's decisions: forgotten now. (Ending later, it forgets this one.)
                if let (Some(session), Some(came_in)) = (session, &came_in)
                    && came_in.closed.is_cancelled()
                    && let Err(e) = shared.settings.end_session(session)
                {
                    tracing::warn!(error = %e, "cannot forget a session's decisions");
                }
            }
            if let Some(kept) = kept {
                store.given_with(&approval.id, kept);
                // Revoked in the instant between its keeping and now: gone all the same.
                if !shared
                    .settings
                    .get()
                    .remembered
                    .iter()
                    .any(|d| d.id == kept)
                {
                    let _ = store.forget_decision(kept);
                }
            }
        }
        Outcome::Declined
        | Outcome::Cancelled {
            reason: CancelReason::Person | CancelReason::AuditFailed,
        } => store.answer(&approval.id, false, asked, now),
        // Expired: gone, and a retry is asked about afresh. Revoked: its agent makes no call.
        Outcome::Cancelled {
            reason: CancelReason::Timeout | CancelReason::Revoked,
        } => store.remove(&approval.id),
        // Countersign is quitting: kept, asked again at the next start.
        Outcome::Cancelled {
            reason: CancelReason::Shutdown,
        } => store.unasked(&approval.id),
        // The agent's session ended (its upstream closed): the approval outlives it.
        Outcome::Cancelled { .. } => reopen(&shared, approval),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn approval(id: &str, expires_ms: u64) -> PendingApproval {
        PendingApproval {
            id: id.into(),
            agent: "a".into(),
            agent_name: "A".into(),
            declared: None,
            server: "s".into(),
            endpoint: "e".into(),
            tool: "t".into(),
            arguments: "{}".into(),
            arguments_value: json!({}),
            definition: json!({}),
            digest: "d".into(),
            created_ms: 0,
            expires_ms,
            state: PendingState::Waiting,
            asked: Some(AskedIn {
                run: "r".into(),
                id: 7,
            }),
            answered_ms: None,
            decision: None,
        }
    }

    fn same<'a>(
        agent: &'a str,
        server: &'a str,
        endpoint: &'a str,
        tool: &'a str,
        arguments: &'a str,
        digest: &'a str,
    ) -> SameCall<'a> {
        SameCall {
            agent,
            server,
            endpoint,
            tool,
            arguments,
            digest,
        }
    }

    /// A file that cannot be read is moved aside only once the hold-back is saved: until then
    /// it is neither moved nor written over, so the next start finds it again.
    #[test]
    fn an_unreadable_file_waits_for_its_hold_back() {
        let dir = std::env::temp_dir().join(format!("cs-pending-lost-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pending-approvals.json");
        std::fs::write(&path, "[cut short").unwrap();
        let mut told = None;
        let store = PendingStore::load(Some(path.clone()), 0, |aside| {
            told = Some(aside.to_owned());
            false
        });
        assert_eq!(told, Some(dir.join("pending-approvals.json.bad")));
        store.add(approval("p-1", 100)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[cut short");
        let _ = PendingStore::load(Some(path.clone()), 0, |_| true);
        assert!(!path.exists());
        assert_eq!(
            std::fs::read_to_string(dir.join("pending-approvals.json.bad")).unwrap(),
            "[cut short"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Read back with the clock set back below when it was made: it lasts as long as it had
    /// left, and its answer counts as given now.
    #[test]
    fn what_was_made_ahead_of_the_clock_lasts_no_longer() {
        let dir = std::env::temp_dir().join(format!("cs-pending-ahead-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("pending-approvals.json");
        let mut ahead = approval("p-1", 10_000 + 86_400_000);
        ahead.created_ms = 10_000;
        let store = PendingStore::load(Some(path.clone()), 0, |_| true);
        store.add(ahead).unwrap();
        store.answer("p-1", false, None, 20_000);
        // Started again with the clock 9 s behind where it was made.
        let again = PendingStore::load(Some(path.clone()), 1_000, |_| true);
        let entry = again.lock()[0].clone();
        assert_eq!(entry.created_ms, 1_000);
        assert_eq!(entry.expires_ms, 1_000 + 86_400_000);
        assert_eq!(entry.answered_ms, Some(1_000));
        // Saved so: a later start, the clock put right, does not find it as first written.
        let later = PendingStore::load(Some(path.clone()), 30_000, |_| true);
        let entry = later.lock()[0].clone();
        assert_eq!(
            (entry.created_ms, entry.expires_ms, entry.answered_ms),
            (1_000, 1_000 + 86_400_000, Some(1_000))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// At a start, an allow whose decision is gone goes; a Deny stays, whatever became of the
    /// decision given with it (a "for this session" one is always gone then), and so does an
    /// allow whose decision is still there or that had none.
    #[test]
    fn allows_go_with_their_decisions_and_denials_stay() {
        let store = PendingStore::load(None, 0, |_| true);
        for (id, allow, decision) in [
            ("kept", true, Some(1)),
            ("revoked", true, Some(2)),
            ("denied", false, Some(2)),
            ("once", true, None),
        ] {
            store.add(approval(id, 100)).unwrap();
            store.answer(id, allow, None, 5);
            if let Some(decision) = decision {
                store.given_with(id, decision);
            }
        }
        store.forget_decisions_but(&[1].into_iter().collect());
        let left: Vec<String> = store.lock().iter().map(|e| e.id.clone()).collect();
        assert_eq!(left, ["kept", "denied", "once"]);
        store.forget_decision(2).unwrap();
        assert_eq!(store.lock().len(), 3, "a revoke takes no Deny either");
    }

    #[test]
    fn an_answer_is_used_once_and_only_by_the_same_call() {
        let store = PendingStore::load(None, 0, |_| true);
        assert_eq!(store.add(approval("p-1", 100)), Ok(()));
        assert_eq!(
            store.find(&same("a", "s", "e", "t", "{}", "d"), 10),
            Found::Waiting { id: "p-1".into() }
        );
        store.answer(
            "p-1",
            true,
            Some(AskedIn {
                run: "r".into(),
                id: 7,
            }),
            5,
        );
        assert_eq!(
            store.find(&same("b", "s", "e", "t", "{}", "d"), 10),
            Found::None
        );
        assert_eq!(
            store.find(&same("a", "s", "e", "t", "{\"x\":1}", "d"), 10),
            Found::None
        );
        assert_eq!(
            store.find(&same("a", "s", "e", "t", "{}", "changed"), 10),
            Found::None
        );
        // The same name configured to run another server: not the server the person answered for.
        assert_eq!(
            store.find(&same("a", "s", "other", "t", "{}", "d"), 10),
            Found::None
        );
        assert_eq!(
            store.find(&same("a", "s", "e", "t", "{}", "d"), 10),
            Found::Answered {
                id: "p-1".into(),
                allow: true,
                asked: Some(AskedIn {
                    run: "r".into(),
                    id: 7
                }),
                answered_ms: Some(5),
            }
        );
        assert_eq!(
            store.find(&same("a", "s", "e", "t", "{}", "d"), 10),
            Found::None
        );
    }

    #[test]
    fn kept_across_restarts_privately_until_it_expires() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("cs-pending-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("pending-approvals.json");
        let store = PendingStore::load(Some(path.clone()), 0, |_| true);
        store.add(approval("p-1", 100)).unwrap();
        store.add(approval("p-2", 50)).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let again = PendingStore::load(Some(path.clone()), 60, |_| true);
        let ids: Vec<String> = again.waiting(60).into_iter().map(|e| e.id).collect();
        assert_eq!(ids, ["p-1"]);
        std::fs::write(&path, "not json").unwrap();
        assert!(
            PendingStore::load(Some(path), 0, |_| true)
                .waiting(0)
                .is_empty()
        );
    }

    /// When the person answered is kept with the answer (a denial outweighs an allow
    /// remembered before it); the session the call came in is not (`CameIn` lives in memory
    /// only): session numbers start again with each run.
    #[test]
    fn the_answer_time_is_kept_across_a_restart_and_the_session_is_not() {
        let dir = std::env::temp_dir().join(format!("cs-pending-time-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("pending-approvals.json");
        let store = PendingStore::load(Some(path.clone()), 0, |_| true);
        assert_eq!(store.add(approval("p-1", 100)), Ok(()));
        store.answer("p-1", false, None, 42);
        let again = PendingStore::load(Some(path), 50, |_| true);
        assert_eq!(
            again.find(&same("a", "s", "e", "t", "{}", "d"), 10),
            Found::Answered {
                id: "p-1".into(),
                allow: false,
                asked: None,
                answered_ms: Some(42),
            }
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_store_is_capped() {
        let store = PendingStore::load(None, 0, |_| true);
        let of = |agent: usize, id: String| PendingApproval {
            agent: format!("agent-{agent}"),
            ..approval(&id, 100)
        };
        for i in 0..MAX_PENDING {
            assert_eq!(store.add(of(i % 4, format!("p-{i}"))), Ok(()));
        }
        assert_eq!(store.add(of(9, "one-more".into())), Err(NotKept::Full));
    }

    /// One agent keeps at most its share; calls too long to keep are not kept; those expired
    /// make room as new ones come (they went only at the next start before).
    #[test]
    fn no_agent_fills_the_store_and_what_expired_makes_room() {
        let store = PendingStore::load(None, 0, |_| true);
        for i in 0..MAX_PENDING_PER_AGENT {
            assert_eq!(store.add(approval(&format!("p-{i}"), 100)), Ok(()));
        }
        assert_eq!(
            store.add(approval("one-more", 100)),
            Err(NotKept::AgentFull)
        );
        let other = PendingApproval {
            agent: "b".into(),
            ..approval("b-1", 100)
        };
        assert_eq!(store.add(other), Ok(()));
        let long = PendingApproval {
            agent: "c".into(),
            arguments: format!("{{\"content\":\"{}\"}}", "x".repeat(MAX_PENDING_ENTRY)),
            ..approval("c-1", 100)
        };
        assert_eq!(store.add(long), Err(NotKept::TooLong));
        // A tool's definition counts too: a server's long description is kept with every call.
        let described = PendingApproval {
            agent: "c".into(),
            definition: json!({"description": "d".repeat(MAX_PENDING_ENTRY)}),
            ..approval("c-2", 100)
        };
        assert_eq!(store.add(described), Err(NotKept::TooLong));
        // Later, the first agent's have expired: its new call is kept.
        let later = PendingApproval {
            created_ms: 100,
            ..approval("later", 500)
        };
        assert_eq!(store.add(later), Ok(()));
    }

    /// An answer is used up only once that it was is on file: else, after a restart, the file
    /// would hand it out again. (A file where the folder should be: even root cannot save.)
    #[test]
    fn an_answer_whose_use_cannot_be_saved_is_not_used() {
        let dir = std::env::temp_dir().join(format!("cs-pending-unsaved-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_file(&dir);
        let path = dir.join("pending-approvals.json");
        let store = PendingStore::load(Some(path.clone()), 0, |_| true);
        assert_eq!(store.add(approval("p-1", 100)), Ok(()));
        store.answer("p-1", true, None, 5);
        let call = same("a", "s", "e", "t", "{}", "d");
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::write(&dir, "in the way").unwrap();
        let unsaved = Found::Unsaved {
            id: "p-1".into(),
            allow: true,
            answered_ms: Some(5),
        };
        assert_eq!(store.find(&call, 10), unsaved);
        assert_eq!(store.find(&call, 10), unsaved);
        std::fs::remove_file(&dir).unwrap();
        assert!(matches!(
            store.find(&call, 10),
            Found::Answered { allow: true, .. }
        ));
        assert_eq!(store.find(&call, 10), Found::None);
        assert_eq!(
            PendingStore::load(Some(path), 10, |_| true).find(&call, 10),
            Found::None
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
