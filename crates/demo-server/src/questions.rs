//! The exact questions the desk asks, as they go on the wire.
//!
//! Countersign's dialogs are tested against these, so the schemas are written
//! as JSON literals rather than built field by field: what is written here is
//! what the client receives. `book_meeting` uses every field kind of the
//! 2025-11-25 elicitation schema; a unit test checks that rmcp's typed schema
//! model (which silently drops keywords it does not know) carries every keyword
//! of it through unchanged, so no raw `elicitation/create` is needed.

use rmcp::model::{ElicitRequestParams, ElicitationSchema};
use serde_json::{Value, json};

use crate::store::Ticket;

/// The confirmation message for deleting `ticket`.
pub fn delete_message(ticket: &Ticket) -> String {
    format!(
        "Delete ticket {}, \"{}\"? This cannot be undone.",
        ticket.id, ticket.title
    )
}

/// The schema of the delete confirmation: one required boolean, no default,
/// so the person has to make the choice.
pub fn delete_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "confirm": {
                "type": "boolean",
                "title": "Confirm deletion",
                "description": "Tick to delete the ticket for good."
            }
        },
        "required": ["confirm"]
    })
}

pub const BOOK_MEETING_MESSAGE: &str = "Book a meeting: fill in the details.";

/// Every field kind of the 2025-11-25 elicitation schema, in a fixed order.
pub fn book_meeting_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "topic": {
                "type": "string",
                "title": "Topic",
                "description": "What the meeting is about",
                "minLength": 3,
                "maxLength": 80
            },
            "attendee": {
                "type": "string",
                "title": "Attendee email",
                "format": "email"
            },
            "agenda": {
                "type": "string",
                "title": "Agenda link",
                "format": "uri",
                "default": "https://wiki.example.com/agenda"
            },
            "day": {
                "type": "string",
                "title": "Day",
                "format": "date"
            },
            "start": {
                "type": "string",
                "title": "Start",
                "format": "date-time"
            },
            "durationHours": {
                "type": "number",
                "title": "Duration (hours)",
                "minimum": 0.5,
                "maximum": 8.0,
                "default": 1.0
            },
            "attendeeCount": {
                "type": "integer",
                "title": "Number of attendees",
                "minimum": 1,
                "maximum": 20,
                "default": 2
            },
            "sendInvites": {
                "type": "boolean",
                "title": "Send invites",
                "default": true
            },
            "room": {
                "type": "string",
                "title": "Room",
                "enum": ["Aurora", "Borealis", "Cosmos"],
                "default": "Borealis"
            },
            "priority": {
                "type": "string",
                "title": "Priority",
                "oneOf": [
                    {"const": "low", "title": "Low"},
                    {"const": "normal", "title": "Normal"},
                    {"const": "high", "title": "High: bump other meetings"}
                ],
                "default": "normal"
            },
            "timezone": {
                "type": "string",
                "title": "Time zone",
                "enum": ["UTC", "Europe/Paris", "America/New_York"],
                "enumNames": ["UTC", "Paris", "New York"]
            },
            "equipment": {
                "type": "array",
                "title": "Equipment",
                "minItems": 1,
                "maxItems": 2,
                "items": {"type": "string", "enum": ["projector", "whiteboard", "speakerphone"]},
                "default": ["whiteboard"]
            },
            "catering": {
                "type": "array",
                "title": "Catering",
                "items": {
                    "anyOf": [
                        {"const": "coffee", "title": "Coffee"},
                        {"const": "tea", "title": "Tea"},
                        {"const": "snacks", "title": "Snacks"}
                    ]
                }
            }
        },
        "required": ["topic", "attendee", "day", "start", "room", "priority", "equipment"]
    })
}

pub const SLOW_QUESTION_MESSAGE: &str = "Quick: what is the answer? (This question times out.)";

pub fn slow_question_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "answer": {"type": "string", "title": "Answer"}
        },
        "required": ["answer"]
    })
}

/// A form-mode request for `schema`. Fails only if `schema` is outside rmcp's
/// model, which the unit tests rule out for every schema in this module.
pub(crate) fn form(message: String, schema: Value) -> Result<ElicitRequestParams, String> {
    let requested_schema: ElicitationSchema = serde_json::from_value(schema)
        .map_err(|error| format!("the desk's own question schema is invalid: {error}"))?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    })
}

pub(crate) fn connect_url(service: &str, session_id: &str) -> String {
    format!(
        "https://auth.example.com/connect?session={}&service={}",
        encode_query(session_id),
        encode_query(service)
    )
}

pub(crate) fn connect_message(service: &str) -> String {
    format!("Connect your {service} account: sign in on the page that opens.")
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
fn encode_query(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rmcp parses the schema into its typed model and serializes that, so any
    /// keyword it does not model would vanish here.
    fn assert_survives_rmcp(schema: Value) {
        let params = form("m".into(), schema.clone()).expect("schema parses");
        let wire = serde_json::to_value(&params).expect("serializes");
        assert_eq!(wire["requestedSchema"], schema);
        assert_eq!(wire["mode"], "form");
        // Field order is part of what the person sees.
        let sent: Vec<&String> = wire["requestedSchema"]["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .collect();
        let written: Vec<&String> = schema["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .collect();
        assert_eq!(sent, written);
    }

    #[test]
    fn book_meeting_schema_survives_rmcp_model() {
        assert_survives_rmcp(book_meeting_schema());
    }

    #[test]
    fn delete_and_slow_schemas_survive_rmcp_model() {
        assert_survives_rmcp(delete_schema());
        assert_survives_rmcp(slow_question_schema());
    }

    #[test]
    fn delete_message_wording() {
        let ticket = Ticket {
            id: "t3".into(),
            title: "Printer on fire".into(),
        };
        assert_eq!(
            delete_message(&ticket),
            "Delete ticket t3, \"Printer on fire\"? This cannot be undone."
        );
    }

    #[test]
    fn connect_url_is_encoded() {
        assert_eq!(
            connect_url("my cal&x", "abc-1"),
            "https://auth.example.com/connect?session=abc-1&service=my%20cal%26x"
        );
    }
}
