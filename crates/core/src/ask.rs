//! What an ask is: one question to the person, who asks it, and how it ended.
//!
//! These are plain data types shared by the broker, the audit log, the shell's IPC and the
//! tests; the broker (`broker.rs`) owns their lifecycle.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub mod approval;
pub mod audit;
pub mod broker;
pub mod kill_point;
pub mod schema;
pub mod url_policy;
mod withdrawal;

pub use withdrawal::Withdrawal;

use schema::{FieldError, FormSchema};

/// Unique within one process run; also the key the UI answers with.
pub type AskId = u64;

/// How Countersign reaches the server that asks, for the person to recognise it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Endpoint {
    /// A child process: the command line as configured.
    Stdio { command: String },
    /// Streamable HTTP: the host (and port) the person should recognise, and the full URL.
    Http { host: String, url: String },
}

/// Who asks: the configured server, and the agent whose call the ask belongs to, when known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct Asker {
    pub server: String,
    pub endpoint: Endpoint,
    /// The agent whose call the ask belongs to, when it came through the gateway: the name
    /// of the token it holds (the person named it; this is who the agent is).
    pub agent: Option<String>,
    /// The name the agent gives itself (`clientInfo.name`): shown, never trusted.
    #[serde(default)]
    pub declared: Option<String>,
    /// The agent's token's id in the gateway's registry (not the token): two tokens the person
    /// gave one name are two agents, with a question budget each, never batched together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub agent_id: Option<String>,
}

/// What the person is asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum AskKind {
    /// Form-mode elicitation: fill a form built from `schema`.
    Form { message: String, schema: FormSchema },
    /// URL-mode elicitation: consent to opening `url`. Accept means consent, not completion.
    Url {
        message: String,
        url: String,
        elicitation_id: String,
        /// Where the address leads, as `url_policy` judged it on arrival (empty in records
        /// written before it was kept).
        #[serde(default)]
        host: String,
        #[serde(default)]
        warnings: Vec<crate::ask::url_policy::UrlWarning>,
        /// Countersign's own question (signing in to the server), never a server's: the dialog
        /// says Countersign asks, which no server's question can.
        #[serde(default)]
        sign_in: bool,
    },
    /// An agent's `tools/call` through the gateway that policy says the person approves.
    /// Accept is "Allow once", `Remember` decides it for longer, anything else denies.
    ToolCall {
        tool: String,
        /// The tool's `title`, `description` and `annotations` as the server listed them
        /// (untrusted text; annotations are hints unless the server is trusted).
        #[serde(default)]
        title: Option<String>,
        #[serde(default)]
        description: Option<String>,
        #[ts(type = "Record<string, unknown> | null")]
        #[serde(default)]
        annotations: Option<Value>,
        /// The call's arguments as the agent sent them; through the gateway, a call that also
        /// carries fields beyond rmcp's model is `[arguments, fields]` (what the gate judges
        /// and a remembered choice is checked against; `argumentsText` and `alsoSentText`
        /// show the two).
        #[ts(type = "unknown")]
        arguments: Value,
        /// The arguments as the text that will be forwarded (pretty-printed by the backend):
        /// what the dialog shows, so a number too large for JavaScript is shown as sent.
        #[serde(default)]
        arguments_text: String,
        /// The fields beyond the arguments that also go to the server with the call (a
        /// vendor's, a newer revision's), as the text that will be forwarded; `None` when
        /// there are none.
        #[serde(default)]
        also_sent_text: Option<String>,
        /// What changed in the tool's definition since the person last decided about it (a
        /// remembered decision that no longer applies because of it); empty otherwise.
        #[serde(default)]
        changed: Vec<crate::ask::approval::DefinitionChange>,
        /// The server's name now runs or reaches another server than the one such a decision
        /// was given for (its command, arguments, environment, directory, URL or headers
        /// changed).
        #[serde(default)]
        server_changed: bool,
        /// The tool takes a boolean `dryRun`: the person can have the same call made with
        /// `dryRun: true` and see its result before deciding.
        #[serde(default)]
        preview: bool,
        /// The server did not list a tool by this name (or its list could not be read): the
        /// agent named it, and a server that reads names loosely may run another under it.
        #[serde(default)]
        unlisted: bool,
        /// The call comes in no agent session (a 2026-07-28 agent's, or one asked again after
        /// Countersign restarted), so "for this agent's session" cannot be chosen: a
        /// session-less agent's calls share one upstream with its other conversations, for as
        /// long as it keeps calling.
        #[serde(default)]
        sessionless: bool,
    },
    /// A server's `sampling/createMessage` through the gateway: it wants the agent's model to
    /// write a reply to `messages`. Accept ("Allow") forwards the request to the agent as sent;
    /// anything else refuses it. Read from the request (`crate::mcp::sampling`), clipped for showing.
    Sampling {
        /// Every message: a request with more than can be shown is refused.
        messages: Vec<SamplingLine>,
        #[serde(default)]
        system_prompt: Option<String>,
        #[ts(type = "number")]
        max_tokens: u64,
        /// `thisServer` / `allServers` ask the agent to add context from its sessions.
        #[serde(default)]
        include_context: Option<String>,
        /// The tools the server offers the model (2025-11-25), by name.
        #[serde(default)]
        tools: Vec<String>,
        /// Everything else the agent's model is sent with the request, as JSON (pretty): the
        /// tools whole (their descriptions and input schemas, which the model reads as
        /// instructions), the model preferences, temperature, stop sequences, metadata.
        #[serde(default)]
        also_sent: Option<String>,
    },
}

/// One message of a sampling request, in words: its role and its content as text (pictures,
/// sound and tool use described, not shown).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct SamplingLine {
    pub role: String,
    pub text: String,
}

/// One question to the person, as the UI and the audit log see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct Ask {
    #[ts(type = "number")]
    pub id: AskId,
    pub asker: Asker,
    #[serde(flatten)]
    pub kind: AskKind,
    /// The request's params as received from the server, for the record.
    pub request: Value,
    /// Milliseconds since the Unix epoch.
    #[ts(type = "number")]
    pub received_at_ms: u64,
    /// Milliseconds since the Unix epoch after which the ask is withdrawn as `timeout`.
    #[ts(type = "number | null")]
    pub deadline_ms: Option<u64>,
}

/// What the person chose. Only `Accept` can ever produce an `accept` on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum Answer {
    /// Submit. Form asks carry the content; URL asks carry none (consent).
    Accept {
        #[serde(default)]
        content: Option<Map<String, Value>>,
    },
    Decline,
    /// Escape or closing the dialog.
    Cancel,
    /// A tool-call approval decided now and remembered: for the session, a time or always,
    /// for any arguments or narrower ("Always allow" is allow, always, any arguments).
    Remember {
        decision: crate::ask::approval::Remember,
    },
}

/// Why an ask ended without the person's Submit or Decline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub enum CancelReason {
    /// The person pressed Escape or closed the dialog.
    Person,
    /// The ask's deadline passed.
    Timeout,
    /// The server sent `notifications/cancelled` for the request.
    Server,
    /// The agent cancelled the call the ask belongs to.
    Agent,
    /// The agent went away (its connection closed) while the call the ask belongs to was
    /// waiting.
    AgentGone,
    /// The session to the server died.
    Disconnect,
    /// Countersign is quitting.
    Shutdown,
    /// The audit log could not record the question or its answer, so the answer is no.
    AuditFailed,
    /// The person revoked the token of the agent whose call the ask belongs to.
    Revoked,
    /// The person paused the gateway while the agent's call the ask belongs to was in flight.
    Paused,
}

impl CancelReason {
    /// Why, in a short sentence for the person, e.g. when a dialog is torn down.
    pub fn why(self) -> &'static str {
        match self {
            CancelReason::Person => "You cancelled this question.",
            CancelReason::Timeout => "This question timed out.",
            CancelReason::Server => "The server withdrew this question.",
            CancelReason::Agent => "The agent cancelled the call this question belonged to.",
            CancelReason::AgentGone => "The agent disconnected.",
            CancelReason::Disconnect => "The server disconnected.",
            CancelReason::Shutdown => "Countersign is quitting.",
            CancelReason::AuditFailed => {
                "Countersign could not write its audit log, so the answer was no."
            }
            CancelReason::Revoked => "You revoked the token of the agent that asked.",
            CancelReason::Paused => "You paused the gateway, which stopped the call that asked.",
        }
    }
}

/// How an ask ended. Exactly one per ask.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum Outcome {
    /// Validated content (form) or consent (URL, `content` is `None`).
    Accepted {
        content: Option<Map<String, Value>>,
    },
    Declined,
    Cancelled {
        reason: CancelReason,
    },
    /// A tool call allowed and remembered ("Always allow"), in records written before
    /// decisions had scopes.
    AlwaysAllowed,
    /// A tool call decided and remembered as chosen.
    Remembered {
        decision: crate::ask::approval::Remember,
    },
}

impl Outcome {
    /// The MCP `ElicitResult` this outcome is answered with.
    pub fn to_elicit_result(&self) -> Value {
        match self {
            Outcome::Accepted { content: Some(c) } => {
                serde_json::json!({"action": "accept", "content": c})
            }
            Outcome::Accepted { content: None } | Outcome::AlwaysAllowed => {
                serde_json::json!({"action": "accept"})
            }
            Outcome::Remembered { decision } if decision.allow => {
                serde_json::json!({"action": "accept"})
            }
            Outcome::Remembered { .. } => serde_json::json!({"action": "decline"}),
            Outcome::Declined => serde_json::json!({"action": "decline"}),
            Outcome::Cancelled { .. } => serde_json::json!({"action": "cancel"}),
        }
    }
}

/// Why an answer from the person was not taken.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum AnswerError {
    /// No such ask, or it has already ended (answered, withdrawn); the late answer is dropped.
    #[error("this question is no longer open")]
    NotPending,
    /// The content does not satisfy the requested schema; nothing was sent.
    #[error("the answer does not fit the form")]
    Invalid { errors: Vec<FieldError> },
    /// A form accept without content, a URL accept with content, "Always allow" on a
    /// question that is not a tool call.
    #[error("{message}")]
    Malformed { message: String },
}

/// Notifications to subscribers (the shell, the gateway, tests).
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(tag = "event", rename_all = "camelCase")]
pub enum AskEvent {
    /// Boxed: the broker's broadcast channel lays out all of its slots when it is made, so the
    /// size of this enum times `EVENT_CAPACITY` is memory held from start (2.2 MB unboxed).
    Added { ask: Box<Ask> },
    /// The ask ended; `outcome` says how (answered by the person or withdrawn).
    Resolved {
        #[ts(type = "number")]
        id: AskId,
        outcome: Outcome,
    },
    /// The server reported finished what a URL question the person opened sent them to do
    /// (`notifications/elicitation/complete`, 2025-11-25). The ask itself ended earlier.
    #[serde(rename_all = "camelCase")]
    UrlCompleted {
        #[ts(type = "number")]
        id: AskId,
        server: String,
        host: String,
    },
}

/// Now, in milliseconds since the Unix epoch, by the wall clock: the time of asks and of the
/// audit log's records, as the person's clock shows it.
pub(crate) fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Now, on the clock remembered decisions and pending answers last by: the wall clock, but
/// never behind its own last reading plus the time that has really passed since, so it never
/// runs backwards. A clock set back (by hand, a VM restored, or a correction, also after it had
/// been set forward) must not stretch a decision the person made "for 15 minutes" by however
/// far it went back, nor bring back one that had lapsed; set forward, it ends decisions early,
/// which asks again. (After a set-back it stays ahead of the wall clock for the rest of the
/// run; a time the person chose by the wall clock is moved onto it,
/// `Lasting::onto_decision_clock`. Across a restart, what was written on it ahead of the clock
/// at the start is judged at load: `settings`, `gateway::pending`.)
pub(crate) fn decision_ms() -> u64 {
    // Its last reading, and the time passed (`boot_ms`) at it.
    static LAST: std::sync::Mutex<Option<(u64, u64)>> = std::sync::Mutex::new(None);
    // Read under the lock: read before it, a reading taken meanwhile by another caller would
    // be paired with this one's older time passed, and put the clock ahead for good.
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    let wall = unix_ms();
    let passed = boot_ms();
    let now = match *last {
        Some((then, passed_then)) => not_behind(wall, then, passed.saturating_sub(passed_then)),
        None => wall,
    };
    *last = Some((now, passed));
    now
}

/// Now, on the clock a remembered Deny ends by: the decision clock ([`decision_ms`]), but
/// never ahead of its own last reading plus the time that has really passed since (suspended
/// time included). The computer's clock set forward (by hand, a VM's clock stepped on after a
/// pause) ends allows early, which asks again, but must not end a "never for an hour" early:
/// an allow it was holding back would run the call. After such a step it stays behind the
/// decision clock for the rest of the run, and a Deny lasts that much longer.
pub(crate) fn patient_ms() -> u64 {
    static LAST: std::sync::Mutex<Option<(u64, u64)>> = std::sync::Mutex::new(None);
    // Both clocks read under this lock (the decision clock's own is only ever taken inside
    // it), as in `decision_ms`.
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    let now = decision_ms();
    let passed = boot_ms();
    let patient = match *last {
        Some((then, passed_then)) => not_ahead(now, then, passed.saturating_sub(passed_then)),
        None => now,
    };
    *last = Some((patient, passed));
    patient
}

/// The decision clock `now`, or if it is ahead, the patient clock's last reading `then` plus
/// the time `passed` since.
fn not_ahead(now: u64, then: u64, passed: u64) -> u64 {
    now.min(then.saturating_add(passed))
}

/// The wall clock `wall`, or if it is behind, the clock's last reading `then` plus the time
/// `passed` since.
fn not_behind(wall: u64, then: u64, passed: u64) -> u64 {
    wall.max(then.saturating_add(passed))
}

/// Milliseconds on a clock nobody sets that counts suspended time too (`CLOCK_BOOTTIME`: a
/// laptop asleep overnight has passed the night).
pub(crate) fn boot_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    #[cfg(target_os = "linux")]
    const CLOCK: libc::clockid_t = libc::CLOCK_BOOTTIME;
    #[cfg(not(target_os = "linux"))]
    const CLOCK: libc::clockid_t = libc::CLOCK_MONOTONIC;
    // SAFETY: `ts` is a valid timespec for the call to fill.
    if unsafe { libc::clock_gettime(CLOCK, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1000) + (ts.tv_nsec as u64) / 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_never_falls_behind_the_time_that_has_passed() {
        // Started at 100,000,000; ten minutes on, the wall clock was set back an hour.
        let then = 100_000_000;
        let ten_minutes = 600_000;
        assert_eq!(
            not_behind(then + ten_minutes - 3_600_000, then, ten_minutes),
            then + ten_minutes
        );
        // Set forward, it is taken as it is.
        assert_eq!(
            not_behind(then + 7_200_000, then, ten_minutes),
            then + 7_200_000
        );
        // Set forward by a day, then put right: it goes on from where it was, never back (else
        // an allow made "for 15 minutes" in that day came back once the day came round).
        let forward = then + 86_400_000;
        let corrected = then + 2 * ten_minutes;
        assert_eq!(
            not_behind(corrected, forward, ten_minutes),
            forward + ten_minutes
        );
        // The patient clock does not take the step forward: a Deny ends no earlier for it.
        assert_eq!(not_ahead(forward, then, ten_minutes), then + ten_minutes);
        assert_eq!(not_ahead(then + 5, then, ten_minutes), then + 5);
        let patient = patient_ms();
        assert!(patient <= decision_ms() && patient_ms() >= patient);
        // Never behind the wall clock, nor its own last reading.
        let wall = unix_ms();
        let first = decision_ms();
        assert!(first >= wall && wall > 0);
        assert!(decision_ms() >= first);
    }
}
