//! The approval gate: whether an agent's `tools/call` runs, is refused, or waits for the
//! person. In order: the person's explicit rule for (server, tool), then a remembered
//! "Always allow" for (agent, server, tool), then the tool's annotations, which count only
//! for servers marked `trusted` (annotations are the server's own untrusted hints), then ask.

use serde_json::Value;

use crate::config::{ServerConfig, ToolRule};
use crate::settings::{AllowedCall, SettingsStore};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Forward without asking; `why` goes to the audit log.
    Allow {
        why: String,
    },
    /// Refuse without asking.
    Deny {
        why: String,
    },
    Ask,
}

/// Decides a call of `tool` (listed with `annotations`, if the server gave any).
pub fn decide(
    server: &ServerConfig,
    agent: &str,
    tool: &str,
    annotations: Option<&Value>,
    settings: &SettingsStore,
) -> Decision {
    match server.tool_policy.get(tool) {
        Some(ToolRule::Allow) => {
            return Decision::Allow {
                why: "rule: allow".into(),
            };
        }
        Some(ToolRule::Deny) => {
            return Decision::Deny {
                why: "rule: deny".into(),
            };
        }
        Some(ToolRule::Ask) => return Decision::Ask,
        None => {}
    }
    let remembered = AllowedCall {
        agent: agent.to_owned(),
        server: server.name.clone(),
        tool: tool.to_owned(),
    };
    // A remembered read is stored under the method's name; a tool the server names after one
    // must not inherit it.
    if !READ_METHODS.contains(&tool) && settings.is_always_allowed(&remembered) {
        return Decision::Allow {
            why: "always allowed by the person".into(),
        };
    }
    // The spec's defaults: readOnlyHint false. Only a trusted server's claim counts.
    let read_only = annotations
        .and_then(|a| a.get("readOnlyHint"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if server.trusted && read_only {
        return Decision::Allow {
            why: "trusted server: read-only tool".into(),
        };
    }
    Decision::Ask
}

/// The requests that read what a server holds, gated like tool calls.
pub const READ_METHODS: [&str; 3] = ["resources/read", "resources/subscribe", "prompts/get"];

/// Decides an agent's read (`method` is one of [`READ_METHODS`]): the person's `readPolicy`
/// for the server, then a remembered "Always allow" of that method, then a trusted server's
/// reads are allowed and an untrusted server's ask.
pub fn decide_read(
    server: &ServerConfig,
    agent: &str,
    method: &str,
    settings: &SettingsStore,
) -> Decision {
    match server.read_policy {
        Some(ToolRule::Allow) => {
            return Decision::Allow {
                why: "rule: allow reading".into(),
            };
        }
        Some(ToolRule::Deny) => {
            return Decision::Deny {
                why: "rule: deny reading".into(),
            };
        }
        Some(ToolRule::Ask) => return Decision::Ask,
        None => {}
    }
    let remembered = AllowedCall {
        agent: agent.to_owned(),
        server: server.name.clone(),
        tool: method.to_owned(),
    };
    if settings.is_always_allowed(&remembered) {
        return Decision::Allow {
            why: "always allowed by the person".into(),
        };
    }
    if server.trusted {
        return Decision::Allow {
            why: "trusted server: reading".into(),
        };
    }
    Decision::Ask
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn server(trusted: bool) -> ServerConfig {
        let mut s = ServerConfig::stdio("desk", "desk", &[]);
        s.trusted = trusted;
        s
    }

    #[test]
    fn a_read_only_claim_counts_only_for_a_trusted_server() {
        let settings = SettingsStore::default();
        let ro = json!({"readOnlyHint": true});
        assert_eq!(
            decide(&server(false), "a", "purge_spam", Some(&ro), &settings),
            Decision::Ask
        );
        assert!(matches!(
            decide(&server(true), "a", "purge_spam", Some(&ro), &settings),
            Decision::Allow { .. }
        ));
        // No annotations, or a write: ask even when trusted.
        assert_eq!(
            decide(&server(true), "a", "t", None, &settings),
            Decision::Ask
        );
        let write = json!({"readOnlyHint": false, "destructiveHint": false});
        assert_eq!(
            decide(&server(true), "a", "t", Some(&write), &settings),
            Decision::Ask
        );
    }

    #[test]
    fn a_rule_comes_first_then_what_the_person_remembered() {
        let settings = SettingsStore::default();
        let mut s = server(true);
        s.tool_policy.insert("list".into(), ToolRule::Deny);
        s.tool_policy.insert("delete".into(), ToolRule::Allow);
        s.tool_policy.insert("peek".into(), ToolRule::Ask);
        let ro = json!({"readOnlyHint": true});
        assert!(matches!(
            decide(&s, "a", "list", Some(&ro), &settings),
            Decision::Deny { .. }
        ));
        assert!(matches!(
            decide(&s, "a", "delete", None, &settings),
            Decision::Allow { .. }
        ));
        assert_eq!(decide(&s, "a", "peek", Some(&ro), &settings), Decision::Ask);

        settings
            .update(|st| {
                st.always_allow.insert(AllowedCall {
                    agent: "a".into(),
                    server: "desk".into(),
                    tool: "book".into(),
                });
            })
            .unwrap();
        let plain = server(false);
        assert!(matches!(
            decide(&plain, "a", "book", None, &settings),
            Decision::Allow { .. }
        ));
        // Remembered for that agent only.
        assert_eq!(decide(&plain, "b", "book", None, &settings), Decision::Ask);
    }

    #[test]
    fn reads_ask_unless_the_server_is_trusted_or_a_rule_or_the_person_says_otherwise() {
        let settings = SettingsStore::default();
        for method in READ_METHODS {
            assert_eq!(
                decide_read(&server(false), "a", method, &settings),
                Decision::Ask
            );
            assert!(matches!(
                decide_read(&server(true), "a", method, &settings),
                Decision::Allow { .. }
            ));
        }
        let mut denied = server(true);
        denied.read_policy = Some(ToolRule::Deny);
        assert!(matches!(
            decide_read(&denied, "a", "resources/read", &settings),
            Decision::Deny { .. }
        ));
        settings
            .update(|st| {
                st.always_allow.insert(AllowedCall {
                    agent: "a".into(),
                    server: "desk".into(),
                    tool: "resources/read".into(),
                });
            })
            .unwrap();
        assert!(matches!(
            decide_read(&server(false), "a", "resources/read", &settings),
            Decision::Allow { .. }
        ));
        assert_eq!(
            decide_read(&server(false), "a", "prompts/get", &settings),
            Decision::Ask
        );
        // A tool the server names after a read method does not inherit that yes.
        assert_eq!(
            decide(&server(false), "a", "resources/read", None, &settings),
            Decision::Ask
        );
    }
}
