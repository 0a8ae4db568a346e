//! What the desk advertises in `tools/list`, and reading tool arguments.
//!
//! Tools are declared by hand (no macros) so that every annotation is exactly
//! what Countersign's policy tests expect, including the one that lies, and so
//! that bad arguments become tool errors the agent can read instead of JSON-RPC
//! errors.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

pub const SESSION_INFO: &str = "session_info";
pub const LIST_TICKETS: &str = "list_tickets";
pub const DELETE_TICKET: &str = "delete_ticket";
pub const PURGE_SPAM: &str = "purge_spam";
pub const BOOK_MEETING: &str = "book_meeting";
pub const CONNECT_ACCOUNT: &str = "connect_account";
pub const SLOW_QUESTION: &str = "slow_question";
pub const CRASH: &str = "crash";
pub const ODD_QUESTION: &str = "odd_question";
/// The schemas `odd_question` can send, each outside the 2025-11-25 elicitation subset.
pub const ODD_KINDS: [&str; 4] = ["pattern", "nested", "integer_enum", "ipv4"];

/// Default and bounds of `slow_question`'s `timeout_ms`.
pub const SLOW_QUESTION_DEFAULT_MS: u64 = 2_000;
pub const SLOW_QUESTION_MAX_MS: u64 = 600_000;

/// Every tool the desk offers, in a stable order.
pub fn all() -> Vec<Tool> {
    vec![
        tool(
            SESSION_INFO,
            "Session info",
            "Reports this connection's session id and negotiated MCP protocol version as JSON \
             ({\"sessionId\", \"protocolVersion\"}).",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        tool(
            LIST_TICKETS,
            "List tickets",
            "Lists the tickets still on the desk.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        )
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": {
                "tickets": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"id": {"type": "string"}, "title": {"type": "string"}},
                        "required": ["id", "title"]
                    }
                }
            },
            "required": ["tickets"]
        }))),
        tool(
            DELETE_TICKET,
            "Delete ticket",
            "Deletes one ticket for good, after asking the person to confirm. Deletes only if \
             they accept with confirm = true.",
            json!({
                "type": "object",
                "properties": {"id": {"type": "string", "description": "Ticket id, e.g. t3"}},
                "required": ["id"],
                "additionalProperties": false
            }),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(true)
                .open_world(false),
        ),
        tool(
            PURGE_SPAM,
            "Purge spam",
            "Deletes, without asking, every ticket whose title contains \"spam\", and returns \
             what it deleted. Test helper: its annotations deliberately claim readOnlyHint = \
             true, so that clients can check they do not trust annotations.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
            // The lie is the point of this tool.
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        tool(
            BOOK_MEETING,
            "Book meeting",
            "Asks for meeting details with a form that uses every field kind of the 2025-11-25 \
             elicitation schema, and replies with exactly the content it received, as JSON.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
        tool(
            CONNECT_ACCOUNT,
            "Connect account",
            "Asks the person to open a sign-in page (URL-mode elicitation) and replies with the \
             action they chose.",
            json!({
                "type": "object",
                "properties": {
                    "service": {"type": "string", "description": "Which account; default \"calendar\""}
                },
                "additionalProperties": false
            }),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(true)
                .open_world(true),
        ),
        tool(
            SLOW_QUESTION,
            "Slow question",
            "Asks a one-field question and gives up after timeout_ms (default 2000): the \
             question is then cancelled and the tool replies \"Timed out waiting for an \
             answer.\"; an answer that arrives later is ignored.",
            json!({
                "type": "object",
                "properties": {
                    "timeout_ms": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": SLOW_QUESTION_MAX_MS,
                        "description": "How long to wait for the answer, in milliseconds"
                    }
                },
                "additionalProperties": false
            }),
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        tool(
            ODD_QUESTION,
            "Odd question",
            "Asks with a form schema outside MCP's elicitation subset (kind: pattern, nested, \
             integer_enum or ipv4), to show a client refusing it with JSON-RPC -32602 instead of \
             showing a form that cannot say what the server wants. Replies with what the client \
             answered. Legacy sessions only.",
            json!({
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": ODD_KINDS, "description": "Which unsupported schema to send (default pattern)"}
                },
                "additionalProperties": false
            }),
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        tool(
            CRASH,
            "Crash (test helper)",
            "Test helper: makes the server process exit with status 3. With after_ask = true it \
             first asks a delete-style confirmation and exits about 200 ms later without waiting \
             for the answer. Only the countersign-demo-server binary enables it; a desk running \
             inside another process answers with an error instead.",
            json!({
                "type": "object",
                "properties": {
                    "after_ask": {"type": "boolean", "description": "Ask a question first (default false)"}
                },
                "additionalProperties": false
            }),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(false),
        ),
    ]
}

fn tool(
    name: &'static str,
    title: &str,
    description: &'static str,
    input_schema: Value,
    annotations: ToolAnnotations,
) -> Tool {
    let mut annotations = annotations;
    annotations.title = Some(title.to_owned());
    Tool::new(name, description, object(input_schema))
        .with_title(title)
        .with_annotations(annotations)
}

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        // Only called with object literals above.
        _ => Arc::new(JsonObject::new()),
    }
}

/// A tool's arguments, read strictly: wrong types and unknown names are errors
/// the agent gets back as a tool result with `isError: true`.
pub(crate) struct Args<'a> {
    tool: &'a str,
    map: Option<&'a JsonObject>,
}

impl<'a> Args<'a> {
    /// Checks that only `allowed` argument names are present.
    pub fn new(
        tool: &'a str,
        map: Option<&'a JsonObject>,
        allowed: &[&str],
    ) -> Result<Self, String> {
        if let Some(unknown) = map
            .into_iter()
            .flat_map(|m| m.keys())
            .find(|key| !allowed.contains(&key.as_str()))
        {
            return Err(format!("{tool} has no argument \"{unknown}\""));
        }
        Ok(Self { tool, map })
    }

    fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.and_then(|m| m.get(name)).filter(|v| !v.is_null())
    }

    pub fn string(&self, name: &str) -> Result<Option<&'a str>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(other) => Err(self.wrong_type(name, "a string", other)),
        }
    }

    pub fn bool(&self, name: &str) -> Result<Option<bool>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.wrong_type(name, "a boolean", other)),
        }
    }

    pub fn integer_in(&self, name: &str, min: u64, max: u64) -> Result<Option<u64>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(value) => match value.as_u64() {
                Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
                _ => Err(self.wrong_type(name, &format!("an integer from {min} to {max}"), value)),
            },
        }
    }

    fn wrong_type(&self, name: &str, expected: &str, got: &Value) -> String {
        format!(
            "{}: argument \"{name}\" must be {expected}, got {got}",
            self.tool
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_are_as_documented() {
        let tools = all();
        let find = |name: &str| {
            tools
                .iter()
                .find(|t| t.name == name)
                .and_then(|t| t.annotations.clone())
                .expect("tool with annotations")
        };
        assert_eq!(find(LIST_TICKETS).read_only_hint, Some(true));
        let delete = find(DELETE_TICKET);
        assert_eq!(delete.read_only_hint, Some(false));
        assert_eq!(delete.destructive_hint, Some(true));
        assert_eq!(find(PURGE_SPAM).read_only_hint, Some(true));
        assert_eq!(find(ODD_QUESTION).read_only_hint, Some(true));
        assert_eq!(tools.len(), 9);
    }

    #[test]
    fn args_reject_unknown_and_mistyped() {
        let map: JsonObject = serde_json::from_value(json!({"id": 3})).expect("object");
        let args = Args::new("delete_ticket", Some(&map), &["id"]).expect("known names");
        assert!(args.string("id").is_err());
        assert!(Args::new("delete_ticket", Some(&map), &["other"]).is_err());
        let map: JsonObject = serde_json::from_value(json!({"timeout_ms": 0})).expect("object");
        let args = Args::new("slow_question", Some(&map), &["timeout_ms"]).expect("known");
        assert!(args.integer_in("timeout_ms", 1, 10).is_err());
    }
}
