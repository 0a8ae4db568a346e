//! What the log keeps of large things a server or an agent chose: each record's size is
//! bounded, so that the budgets on how many records they cause (`traffic`, the broker's
//! question budget, the refusals') bound the bytes too. A question is kept whole up to
//! [`KEPT_ASK_BYTES`] of JSON; past that, its texts are cut (their start, length and SHA-256:
//! the same digest the person's shown text has) and its lists shortened.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::ask::Ask;

/// A question's record is written whole up to this many bytes of JSON.
pub const KEPT_ASK_BYTES: usize = 64 * 1024;
/// Past [`KEPT_ASK_BYTES`], each text in the question is kept up to this many bytes...
const KEPT_TEXT: usize = 1024;
/// ...until this many bytes of text are kept, and each one after up to [`KEPT_TEXT_LATE`]
/// (with its length, not its digest).
const KEPT_TEXT_TOTAL: usize = 32 * 1024;
const KEPT_TEXT_LATE: usize = 64;
/// Past [`KEPT_ASK_BYTES`], each list in the question keeps this many items.
const KEPT_ITEMS: usize = 16;
/// The name an agent gives itself, as the log keeps it.
const KEPT_NAME: usize = 256;

/// `text` whole up to `max` bytes; past that, its start, its length and its SHA-256.
pub fn kept_text(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… (cut: {} bytes, SHA-256 {})",
        &text[..end],
        text.len(),
        hex::encode(Sha256::digest(text.as_bytes()))
    )
    .into()
}

/// `ask` as its record keeps it (its `request` already cut by `kept_request`): whole when
/// small; else the tool call's arguments and annotations cut like a request, every text cut,
/// every list shortened. `None` if the shortened question no longer reads as one (it is then
/// not asked: unrecorded, a question is a no).
pub(super) fn kept_ask(mut ask: Ask) -> Option<Ask> {
    if let Some(declared) = &ask.asker.declared {
        ask.asker.declared = Some(kept_text(declared, KEPT_NAME).into_owned());
    }
    if serde_json::to_vec(&ask).map_or(0, |json| json.len()) <= KEPT_ASK_BYTES {
        return Some(ask);
    }
    if let crate::ask::AskKind::ToolCall {
        arguments,
        annotations,
        ..
    } = &mut ask.kind
    {
        *arguments = super::kept_request(arguments);
        if let Some(annotations) = annotations {
            *annotations = super::kept_request(annotations);
        }
    }
    let mut kind = serde_json::to_value(&ask.kind).ok()?;
    cut(&mut kind, &mut 0);
    ask.kind = serde_json::from_value(kind).ok()?;
    Some(ask)
}

/// Cuts every string in `value` and shortens every list, counting the text kept in `kept`.
fn cut(value: &mut Value, kept: &mut usize) {
    match value {
        Value::String(text) if *kept < KEPT_TEXT_TOTAL => {
            if text.len() > KEPT_TEXT {
                *text = kept_text(text, KEPT_TEXT).into_owned();
            }
            *kept += text.len();
        }
        Value::String(text) => {
            if text.len() > KEPT_TEXT_LATE {
                let mut end = KEPT_TEXT_LATE;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                *text = format!("{}… (cut: {} bytes)", &text[..end], text.len());
            }
        }
        Value::Array(items) => {
            items.truncate(KEPT_ITEMS);
            items.iter_mut().for_each(|item| cut(item, kept));
        }
        Value::Object(members) => members.values_mut().for_each(|member| cut(member, kept)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ask::{AskKind, Asker, Endpoint, SamplingLine};
    use serde_json::json;

    fn ask(kind: AskKind) -> Ask {
        Ask {
            id: 1,
            asker: Asker {
                server: "desk".into(),
                endpoint: Endpoint::Stdio {
                    command: "desk".into(),
                },
                agent: Some("Agent A".into()),
                declared: Some("x".repeat(100_000)),
                agent_id: None,
            },
            kind,
            request: json!({"cut": true}),
            received_at_ms: 1,
            deadline_ms: None,
        }
    }

    fn size(ask: &Ask) -> usize {
        serde_json::to_vec(ask).unwrap().len()
    }

    #[test]
    fn a_small_question_is_kept_whole_and_a_large_one_of_every_kind_cut_to_size() {
        let small = AskKind::Url {
            message: "Open?".into(),
            url: "https://example.com".into(),
            elicitation_id: "e".into(),
            host: "example.com".into(),
            warnings: vec![],
            sign_in: false,
        };
        let kept = kept_ask(ask(small.clone())).unwrap();
        assert_eq!(kept.kind, small);
        assert!(kept.asker.declared.as_ref().unwrap().len() < 400);

        let huge = "é".repeat(200_000);
        let many: serde_json::Map<String, Value> =
            (0..20_000).map(|i| (format!("k{i}"), json!(i))).collect();
        let call = AskKind::ToolCall {
            tool: huge.clone(),
            title: Some(huge.clone()),
            description: Some(huge.clone()),
            annotations: Some(Value::Object(many.clone())),
            arguments: Value::Object(many),
            arguments_text: huge.clone(),
            also_sent_text: Some(huge.clone()),
            changed: (0..1_000)
                .map(|_| crate::ask::approval::DefinitionChange {
                    field: huge[..1000].to_owned(),
                    before: huge[..4000].to_owned(),
                    after: huge[..4000].to_owned(),
                })
                .collect(),
            server_changed: false,
            preview: true,
            unlisted: true,
            sessionless: false,
        };
        let schema = json!({"type": "object", "properties": (0..crate::ask::schema::MAX_FIELDS)
            .map(|i| (format!("f{i}"), json!({"type": "string", "description": "d".repeat(5_000),
                "enum": (0..100).map(|j| format!("option {j} {}", "o".repeat(100))).collect::<Vec<_>>()})))
            .collect::<serde_json::Map<_, _>>()});
        let form = AskKind::Form {
            message: huge.clone(),
            schema: crate::ask::schema::parse_form_schema(&schema).unwrap(),
        };
        let sampling = AskKind::Sampling {
            messages: (0..1_000)
                .map(|_| SamplingLine {
                    role: "user".into(),
                    text: "t".repeat(1_000),
                })
                .collect(),
            system_prompt: Some(huge.clone()),
            max_tokens: 10,
            include_context: None,
            tools: vec!["tool".repeat(100); 1_000],
            also_sent: Some(huge.clone()),
        };
        for kind in [call, form, sampling] {
            let whole = size(&ask(kind.clone()));
            let kept = kept_ask(ask(kind)).expect("still a question");
            assert!(
                size(&kept) < 2 * KEPT_ASK_BYTES,
                "{whole} kept as {}",
                size(&kept)
            );
        }
    }

    #[test]
    fn a_cut_text_keeps_its_start_length_and_digest() {
        let text = "a".repeat(5_000);
        let kept = kept_text(&text, 10);
        assert!(kept.starts_with("aaaaaaaaaa… (cut: 5000 bytes, SHA-256 "));
        assert_eq!(kept_text("short", 10), "short");
        // Never inside a character.
        assert!(kept_text(&"é".repeat(10), 5).starts_with("éé…"));
    }
}
