//! The approval gate: whether an agent's `tools/call` (or read) runs, is refused, or waits for
//! the person. In order: the person's explicit rule for (server, tool), then a decision the
//! person remembered for this agent's token that still lasts, covers these arguments and was
//! made for the tool as it is now, then the tool's annotations, which count only for servers
//! marked `trusted` (annotations are the server's own untrusted hints), then ask. While
//! remembered decisions this version cannot read name the server, only rules and readable
//! denials decide: one of those decisions may be a denial (`Settings::unread`).

use serde_json::Value;

use crate::ask::approval::Call;
use crate::config::{ServerConfig, ToolRule};
use crate::settings::SettingsStore;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Forward without asking; `why` goes to the audit log, `remembered` is the decision
    /// that said so, if one did.
    Allow {
        why: String,
        remembered: Option<u64>,
    },
    /// Refuse without asking.
    Deny {
        why: String,
        remembered: Option<u64>,
    },
    Ask,
}

impl Decision {
    fn rule(rule: ToolRule, what: &str) -> Option<Decision> {
        match rule {
            ToolRule::Allow => Some(Decision::Allow {
                why: format!("rule: allow{what}"),
                remembered: None,
            }),
            ToolRule::Deny => Some(Decision::Deny {
                why: format!("rule: deny{what}"),
                remembered: None,
            }),
            ToolRule::Ask => Some(Decision::Ask),
        }
    }

    /// `self`, unless it is an allow that unread decisions hold back: then the person is asked.
    fn unless_held_back(self, call: &Call, settings: &SettingsStore) -> Decision {
        match self {
            Decision::Allow { .. } if settings.holds_back(call.server) => Decision::Ask,
            decision => decision,
        }
    }

    fn remembered(call: &Call, settings: &SettingsStore) -> Option<Decision> {
        let d = settings.decision_for(call)?;
        let why = d.describe();
        Some(if d.allow {
            Decision::Allow {
                why,
                remembered: Some(d.id),
            }
        } else {
            Decision::Deny {
                why,
                remembered: Some(d.id),
            }
        })
    }
}

/// Decides `call` of a tool listed with `annotations` (if the server gave any).
pub fn decide(
    server: &ServerConfig,
    call: &Call,
    annotations: Option<&Value>,
    settings: &SettingsStore,
) -> Decision {
    if let Some(rule) = server.tool_policy.get(call.tool) {
        return Decision::rule(*rule, "").unwrap_or(Decision::Ask);
    }
    // A name a lax server takes for a denied tool's (`DELETE_FILE`, `deleteFile`, `ſcrub` for
    // `delete_file` and `scrub`: Go's JSON matching, a map folded by case) is denied with it,
    // rather than asked about as a tool the person never named.
    if let Some((denied, _)) = server.tool_policy.iter().find(|(name, rule)| {
        **rule == ToolRule::Deny
            && (crate::ask::approval::same_key_to_a_lax_reader(name, call.tool)
                || crate::gateway::sent::same_name_in_another_case_style(name, call.tool))
    }) {
        return Decision::Deny {
            why: format!("rule: deny, for {denied}, which a server may take this name for"),
            remembered: None,
        };
    }
    // A remembered read is stored under the method's name; a tool the server names after one
    // must not inherit it.
    if !READ_METHODS.contains(&call.tool)
        && let Some(decision) = Decision::remembered(call, settings)
    {
        return decision.unless_held_back(call, settings);
    }
    // The spec's defaults: readOnlyHint false. Only a trusted server's claim counts.
    let read_only = annotations
        .and_then(|a| a.get("readOnlyHint"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    // A tool the person denied, changed since (it may claim read-only now): asked again with
    // what changed, as any changed tool is, never allowed by the server's own claim.
    if server.trusted && read_only && !settings.denied_before_a_change(call) {
        return Decision::Allow {
            why: "trusted server: read-only tool".into(),
            remembered: None,
        }
        .unless_held_back(call, settings);
    }
    Decision::Ask
}

/// The requests that read what a server holds, gated like tool calls.
pub const READ_METHODS: [&str; 3] = ["resources/read", "resources/subscribe", "prompts/get"];

/// Decides an agent's read (`call.tool` is one of [`READ_METHODS`]): the person's
/// `readPolicy` for the server, then a remembered decision about that method, then a trusted
/// server's reads are allowed and an untrusted server's ask.
pub fn decide_read(server: &ServerConfig, call: &Call, settings: &SettingsStore) -> Decision {
    if let Some(rule) = server.read_policy {
        return Decision::rule(rule, " reading").unwrap_or(Decision::Ask);
    }
    if let Some(decision) = Decision::remembered(call, settings) {
        return decision.unless_held_back(call, settings);
    }
    if server.trusted {
        return Decision::Allow {
            why: "trusted server: reading".into(),
            remembered: None,
        }
        .unless_held_back(call, settings);
    }
    Decision::Ask
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ask::approval::RememberedDecision;
    use serde_json::json;

    fn server(trusted: bool) -> ServerConfig {
        let mut s = ServerConfig::stdio("desk", "desk", &[]);
        s.trusted = trusted;
        s
    }

    const ARGS: Value = Value::Null;

    fn call<'a>(agent: &'a str, tool: &'a str) -> Call<'a> {
        Call {
            agent,
            server: "desk",
            endpoint: "e",
            tool,
            arguments: &ARGS,
            session: 1,
            digest: "d",
            now_ms: 1_000,
            patient_ms: 1_000,
        }
    }

    fn remember(settings: &SettingsStore, agent: &str, tool: &str, allow: bool) {
        settings
            .remember(
                RememberedDecision::for_test(agent, "desk", "e", tool, allow),
                0,
            )
            .unwrap();
    }

    #[test]
    fn a_read_only_claim_counts_only_for_a_trusted_server() {
        let settings = SettingsStore::default();
        let ro = json!({"readOnlyHint": true});
        let purge = call("a", "purge_spam");
        assert_eq!(
            decide(&server(false), &purge, Some(&ro), &settings),
            Decision::Ask
        );
        assert!(matches!(
            decide(&server(true), &purge, Some(&ro), &settings),
            Decision::Allow { .. }
        ));
        // No annotations, or a write: ask even when trusted.
        assert_eq!(
            decide(&server(true), &call("a", "t"), None, &settings),
            Decision::Ask
        );
        let write = json!({"readOnlyHint": false, "destructiveHint": false});
        assert_eq!(
            decide(&server(true), &call("a", "t"), Some(&write), &settings),
            Decision::Ask
        );
    }

    /// The person denied a tool; the trusted server then changed it to claim read-only: that
    /// claim allows nothing unasked (it did: the denial no longer applied, and the claim did).
    /// An allow made before the change does not stand in the claim's way.
    #[test]
    fn a_denied_tool_changed_since_is_asked_about_not_allowed_by_its_claim() {
        let settings = SettingsStore::default();
        let ro = json!({"readOnlyHint": true});
        remember(&settings, "a", "purge", false);
        let changed = Call {
            digest: "d2",
            ..call("a", "purge")
        };
        assert_eq!(
            decide(&server(true), &changed, Some(&ro), &settings),
            Decision::Ask
        );
        // Another agent's denial is not this one's.
        let other = Call {
            digest: "d2",
            ..call("b", "purge")
        };
        assert!(matches!(
            decide(&server(true), &other, Some(&ro), &settings),
            Decision::Allow { .. }
        ));
        remember(&settings, "a", "peek", true);
        let peek = Call {
            digest: "d2",
            ..call("a", "peek")
        };
        assert!(matches!(
            decide(&server(true), &peek, Some(&ro), &settings),
            Decision::Allow { .. }
        ));
    }

    /// A server that reads tool names without regard to case or style (Go's JSON matching, a
    /// map folded by case) would run the denied tool for `DELETE_FILE`: denied with it. Only
    /// deny rules reach that far; an allow covers its own name only.
    #[test]
    fn a_name_a_lax_server_takes_for_a_denied_tools_is_denied_too() {
        let settings = SettingsStore::default();
        let mut s = server(false);
        s.tool_policy.insert("delete_file".into(), ToolRule::Deny);
        s.tool_policy.insert("scrub".into(), ToolRule::Deny);
        s.tool_policy.insert("list_files".into(), ToolRule::Allow);
        for name in [
            "DELETE_FILE",
            "Delete_File",
            "deleteFile",
            "delete-file",
            "ſcrub",
            "SCRUB",
        ] {
            let decision = decide(&s, &call("a", name), None, &settings);
            assert!(
                matches!(&decision, Decision::Deny { why, .. } if why.contains("rule: deny")),
                "{name}: {decision:?}"
            );
        }
        assert_eq!(
            decide(&s, &call("a", "LIST_FILES"), None, &settings),
            Decision::Ask
        );
        assert_eq!(
            decide(&s, &call("a", "delete_files"), None, &settings),
            Decision::Ask
        );
    }

    #[test]
    fn a_rule_comes_first_then_what_the_person_remembered_for_that_agent() {
        let settings = SettingsStore::default();
        let mut s = server(true);
        s.tool_policy.insert("list".into(), ToolRule::Deny);
        s.tool_policy.insert("delete".into(), ToolRule::Allow);
        s.tool_policy.insert("peek".into(), ToolRule::Ask);
        let ro = json!({"readOnlyHint": true});
        assert!(matches!(
            decide(&s, &call("a", "list"), Some(&ro), &settings),
            Decision::Deny { .. }
        ));
        assert!(matches!(
            decide(&s, &call("a", "delete"), None, &settings),
            Decision::Allow { .. }
        ));
        assert_eq!(
            decide(&s, &call("a", "peek"), Some(&ro), &settings),
            Decision::Ask
        );

        remember(&settings, "a", "book", true);
        let plain = server(false);
        assert!(matches!(
            decide(&plain, &call("a", "book"), None, &settings),
            Decision::Allow {
                remembered: Some(1),
                ..
            }
        ));
        // Remembered for that agent's token only.
        assert_eq!(
            decide(&plain, &call("b", "book"), None, &settings),
            Decision::Ask
        );
        // A remembered no answers at once, and wins over a yes that overlaps it.
        remember(&settings, "a", "book", false);
        assert!(matches!(
            decide(&plain, &call("a", "book"), None, &settings),
            Decision::Deny {
                remembered: Some(2),
                ..
            }
        ));
    }

    #[test]
    fn reads_ask_unless_the_server_is_trusted_or_a_rule_or_the_person_says_otherwise() {
        let settings = SettingsStore::default();
        for method in READ_METHODS {
            assert_eq!(
                decide_read(&server(false), &call("a", method), &settings),
                Decision::Ask
            );
            assert!(matches!(
                decide_read(&server(true), &call("a", method), &settings),
                Decision::Allow { .. }
            ));
        }
        let mut denied = server(true);
        denied.read_policy = Some(ToolRule::Deny);
        assert!(matches!(
            decide_read(&denied, &call("a", "resources/read"), &settings),
            Decision::Deny { .. }
        ));
        remember(&settings, "a", "resources/read", true);
        assert!(matches!(
            decide_read(&server(false), &call("a", "resources/read"), &settings),
            Decision::Allow { .. }
        ));
        assert_eq!(
            decide_read(&server(false), &call("a", "prompts/get"), &settings),
            Decision::Ask
        );
        // A tool the server names after a read method does not inherit that yes.
        assert_eq!(
            decide(
                &server(false),
                &call("a", "resources/read"),
                None,
                &settings
            ),
            Decision::Ask
        );
    }

    /// A remembered decision this version cannot read may be a denial: until the person forgets
    /// it, no remembered or trusted allow runs a call on its server; rules and readable
    /// denials still decide, and other servers are untouched.
    #[test]
    fn a_decision_that_cannot_be_read_holds_back_every_allow_on_its_server() {
        let settings = SettingsStore::default();
        remember(&settings, "a", "book", true);
        remember(&settings, "a", "burn", false);
        remember(&settings, "a", "resources/read", true);
        settings
            .update(|s| {
                s.unread
                    .push(json!({"server": "desk", "tool": "book", "lasting": "untilTheMoon"}))
            })
            .unwrap();
        let ro = json!({"readOnlyHint": true});
        let mut s = server(true);
        s.tool_policy.insert("list".into(), ToolRule::Allow);
        assert_eq!(
            decide(&s, &call("a", "book"), None, &settings),
            Decision::Ask
        );
        assert_eq!(
            decide(&s, &call("a", "peek"), Some(&ro), &settings),
            Decision::Ask
        );
        assert_eq!(
            decide_read(&s, &call("a", "resources/read"), &settings),
            Decision::Ask
        );
        assert_eq!(
            decide_read(&s, &call("b", "prompts/get"), &settings),
            Decision::Ask
        );
        assert!(matches!(
            decide(&s, &call("a", "burn"), None, &settings),
            Decision::Deny { .. }
        ));
        assert!(matches!(
            decide(&s, &call("a", "list"), None, &settings),
            Decision::Allow { .. }
        ));
        // Another server's trusted allows run as before.
        let other = Call {
            server: "other",
            ..call("a", "peek")
        };
        assert!(matches!(
            decide(&s, &other, Some(&ro), &settings),
            Decision::Allow { .. }
        ));
        // Forgotten: allows run again.
        settings.forget_unread().unwrap();
        assert!(matches!(
            decide(&s, &call("a", "book"), None, &settings),
            Decision::Allow { .. }
        ));
        assert!(matches!(
            decide_read(&s, &call("a", "resources/read"), &settings),
            Decision::Allow { .. }
        ));
    }
}
