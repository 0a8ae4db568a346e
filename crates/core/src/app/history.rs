//! History: the audit log read back for the person — every question with its outcome, the
//! requests refused before they reached anyone, and the agents' calls the gateway decided
//! without asking, newest first. (The log's own records and their chain are `audit`'s.)

use serde::Serialize;

use crate::ask::audit::AuditRecord;
use crate::ask::{Ask, Outcome};

/// One ask from the audit log with its outcome, newest first in `history()`.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    pub run: String,
    pub ask: Ask,
    /// `None` while open, or when the run ended without recording it (a crash).
    pub outcome: Option<Outcome>,
    #[ts(type = "number | null")]
    pub resolved_at_ms: Option<u64>,
    /// The answer is on record as taken by the transport to the server. Without it, an
    /// answer the person gave may not have reached the server (Countersign stopped, or the
    /// session ended, between the two).
    pub delivered: bool,
    /// Countersign stopped (a crash, a kill) before it recorded an outcome: it sent none.
    pub interrupted: bool,
}

/// A refused request (e.g. a schema outside the subset) from the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct RefusedEntry {
    pub server: String,
    pub reason: String,
    #[ts(type = "number")]
    pub at_ms: u64,
    /// The server's refusals before this one that were counted, not written (a flood).
    #[ts(type = "number")]
    pub unrecorded: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct GatedEntry {
    pub server: String,
    pub agent: Option<String>,
    pub tool: String,
    pub allowed: bool,
    pub why: String,
    #[ts(type = "number")]
    pub at_ms: u64,
    /// How many such calls this stands for: past its budget, an agent's calls are counted
    /// by kind and written together, the last at `at_ms`.
    #[ts(type = "number")]
    pub count: u64,
    /// Calls of more kinds than are counted apart, counted together: `tool`, `allowed` and
    /// `why` say nothing.
    pub others: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct History {
    pub asks: Vec<HistoryEntry>,
    pub refused: Vec<RefusedEntry>,
    /// Agents' tool calls the gateway decided without asking (a rule, an Always allow, a
    /// trusted server's read-only tool), newest first.
    pub gated: Vec<GatedEntry>,
    /// Lines of the log that could not be read.
    pub skipped: usize,
    /// Older records exist than were read (History reads only the log's newest part).
    pub older: bool,
}

/// The records, oldest first as the log holds them, projected for the person. `run` is this
/// process's: an ask an earlier run left without an outcome was cut short by its end.
pub(crate) fn history_from(records: Vec<AuditRecord>, skipped: usize, run: &str) -> History {
    let mut asks: Vec<HistoryEntry> = Vec::new();
    let mut refused = Vec::new();
    let mut gated = Vec::new();
    let mut index = std::collections::HashMap::new();
    for record in records {
        match record {
            AuditRecord::Asked { run, ask, .. } => {
                index.insert((run.clone(), ask.id), asks.len());
                asks.push(HistoryEntry {
                    run,
                    ask,
                    outcome: None,
                    resolved_at_ms: None,
                    delivered: false,
                    interrupted: false,
                });
            }
            AuditRecord::Resolved {
                run,
                at_ms,
                id,
                outcome,
            } => {
                // An ask ends once: a second outcome for it (a line added to the log, "accepted"
                // after the person declined) does not replace the first.
                if let Some(&i) = index.get(&(run, id))
                    && asks[i].outcome.is_none()
                {
                    asks[i].outcome = Some(outcome);
                    asks[i].resolved_at_ms = Some(at_ms);
                }
            }
            AuditRecord::Delivered { run, id, .. } => {
                if let Some(&i) = index.get(&(run, id)) {
                    asks[i].delivered = true;
                }
            }
            AuditRecord::Refused {
                server,
                reason,
                at_ms,
                unrecorded,
                ..
            } => refused.push(RefusedEntry {
                server,
                reason,
                at_ms,
                unrecorded,
            }),
            AuditRecord::Gated {
                at_ms,
                server,
                agent,
                tool,
                allowed,
                why,
                ..
            } => gated.push(GatedEntry {
                server,
                agent,
                tool,
                allowed,
                why,
                at_ms,
                count: 1,
                others: false,
            }),
            // On record for the audit, not for the person's History: listing and the like.
            AuditRecord::Forwarded { .. } => {}
            AuditRecord::Counted {
                at_ms,
                server,
                agent,
                counts,
                others,
                ..
            } => {
                for count in counts {
                    // Forwarded requests, counted, are left out as they are one by one.
                    if let (Some(allowed), Some(why)) = (count.allowed, count.why) {
                        gated.push(GatedEntry {
                            server: server.clone(),
                            agent: agent.clone(),
                            tool: count.what,
                            allowed,
                            why,
                            at_ms,
                            count: count.n,
                            others: false,
                        });
                    }
                }
                if others > 0 {
                    gated.push(GatedEntry {
                        server,
                        agent,
                        tool: String::new(),
                        allowed: false,
                        why: String::new(),
                        at_ms,
                        count: others,
                        others: true,
                    });
                }
            }
        }
    }
    for entry in &mut asks {
        entry.interrupted = entry.outcome.is_none() && entry.run != run;
    }
    asks.reverse();
    refused.reverse();
    gated.reverse();
    History {
        asks,
        refused,
        gated,
        skipped,
        older: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateways_own_decisions_are_in_the_history_newest_first() {
        let gated = |at_ms, tool: &str, allowed| AuditRecord::Gated {
            run: "r".into(),
            at_ms,
            server: "desk".into(),
            agent: Some("a".into()),
            tool: tool.into(),
            allowed,
            why: "rule".into(),
        };
        let history = history_from(
            vec![gated(1, "list", true), gated(2, "purge", false)],
            0,
            "r",
        );
        assert_eq!(
            history
                .gated
                .iter()
                .map(|g| (g.tool.as_str(), g.allowed))
                .collect::<Vec<_>>(),
            [("purge", false), ("list", true)]
        );
        assert!(history.asks.is_empty());
    }

    #[test]
    fn calls_counted_past_an_agents_budget_are_in_the_history_with_their_number() {
        let count = |what: &str, allowed: Option<bool>, n| crate::ask::audit::Count {
            what: what.into(),
            allowed,
            why: allowed.map(|_| "rule".to_owned()),
            n,
        };
        let counted = AuditRecord::Counted {
            run: "r".into(),
            at_ms: 20_000,
            since_ms: 10_000,
            server: "desk".into(),
            agent: Some("a".into()),
            counts: vec![
                count("read", Some(true), 900),
                count("tools/list", None, 50),
                count("purge", Some(false), 3),
            ],
            others: 7,
        };
        let history = history_from(vec![counted], 0, "r");
        assert_eq!(
            history
                .gated
                .iter()
                .map(|g| (g.tool.as_str(), g.allowed, g.count, g.others))
                .collect::<Vec<_>>(),
            [
                ("", false, 7, true),
                ("purge", false, 3, false),
                ("read", true, 900, false)
            ]
        );
    }

    #[test]
    fn an_answer_is_delivered_only_on_record_and_a_run_cut_short_says_so() {
        let ask = |run: &str, id| AuditRecord::Asked {
            run: run.into(),
            at_ms: 1,
            ask: crate::ask::Ask {
                id,
                asker: crate::ask::Asker {
                    server: "desk".into(),
                    endpoint: crate::ask::Endpoint::Stdio {
                        command: "desk".into(),
                    },
                    agent: None,
                    declared: None,
                    agent_id: None,
                },
                kind: crate::ask::AskKind::Url {
                    message: "m".into(),
                    url: "https://example.com".into(),
                    elicitation_id: "e".into(),
                    host: "example.com".into(),
                    warnings: vec![],
                    sign_in: false,
                },
                received_at_ms: 1,
                deadline_ms: None,
                request: serde_json::Value::Null,
            },
        };
        let resolved = |run: &str, id| AuditRecord::Resolved {
            run: run.into(),
            at_ms: 2,
            id,
            outcome: Outcome::Declined,
        };
        let delivered = |run: &str, id| AuditRecord::Delivered {
            run: run.into(),
            at_ms: 3,
            id,
        };
        let records = vec![
            // An earlier run: one answer delivered, one recorded but not sent, one cut short
            // before its outcome, and run "now" reusing id 1 (ids restart each run).
            ask("old", 1),
            resolved("old", 1),
            // A second outcome for it, added to the log: the first stands.
            AuditRecord::Resolved {
                run: "old".into(),
                at_ms: 9,
                id: 1,
                outcome: Outcome::Accepted { content: None },
            },
            delivered("old", 1),
            ask("old", 2),
            resolved("old", 2),
            ask("old", 3),
            ask("now", 1),
            delivered("now", 9),
        ];
        let history = history_from(records, 0, "now");
        let seen: Vec<(&str, u64, bool, bool)> = history
            .asks
            .iter()
            .map(|e| (e.run.as_str(), e.ask.id, e.delivered, e.interrupted))
            .collect();
        assert_eq!(
            seen,
            [
                ("now", 1, false, false),
                ("old", 3, false, true),
                ("old", 2, false, false),
                ("old", 1, true, false),
            ]
        );
        assert_eq!(history.asks[3].outcome, Some(Outcome::Declined));
    }
}
