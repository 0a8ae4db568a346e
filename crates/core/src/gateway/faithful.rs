//! Faithful results: rmcp's typed model drops what it does not know (a tool's vendor fields,
//! newer spec fields), but agents must get the server's own words.
//!
//! The upstream's raw result is read off the wire beside rmcp (`RawRequests::with_results`)
//! and kept as the bytes it came in: the agent gets those bytes, not a rewrite of them (numbers
//! past 64 bits, escapes and key order stay as the server wrote them). Shaping for the agent's
//! revision reads only the top level ([`members`]).
//!
//! The lane gives each request it runs (a session's `initialize` and requests, and a
//! 2026-07-28 agent's self-contained ones) its own [`Kept`], in the request's extensions,
//! which the handler is handed; the forwarder keeps the raw result there under the JSON-RPC
//! id of the agent's request it answers, and the lane writes its answer with it
//! (`Kept::take_for`). So the agent's answer is made from the server's own bytes, never
//! rewritten from rmcp's typed result: nothing in a message selects a kept result, which
//! answers only the request it was kept for, and is gone with that request. Results the
//! gateway makes itself (a denial) are never kept.
//!
//! What rmcp still answers (a request whose headers the lane does not judge as rmcp would, see
//! `lane`) has no `Kept`, and its answer is rmcp's typed one.

use std::sync::{Arc, Mutex};

use rmcp::model::RequestId;
use rmcp::service::{RequestContext, RoleServer};
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// Raw results waiting for the responses of one HTTP request, by the agent's request id.
#[derive(Clone, Default)]
pub(crate) struct Kept(Arc<Mutex<Vec<KeptResult>>>);

/// The agent's request id (as JSON), and the result kept for its response.
type KeptResult = (Value, Box<RawValue>);

impl Kept {
    /// The `Kept` of request `ctx`, if the lane runs it.
    fn of(ctx: &RequestContext<RoleServer>) -> Option<&Kept> {
        ctx.extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Kept>())
    }

    /// Has the response to request `ctx` carry `raw` instead of its typed result.
    pub(crate) fn keep(ctx: &RequestContext<RoleServer>, raw: Box<RawValue>) {
        if let Some(kept) = Self::of(ctx) {
            kept.insert(&ctx.id, raw);
        }
    }

    fn insert(&self, id: &RequestId, raw: Box<RawValue>) {
        let id = serde_json::to_value(id).unwrap_or(Value::Null);
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|(k, _)| *k != id);
        kept.push((id, raw));
    }

    fn take(&self, id: &Value) -> Option<Box<RawValue>> {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let i = kept.iter().position(|(k, _)| k == id)?;
        Some(kept.swap_remove(i).1)
    }

    /// The raw result kept for request `id`, once (the lane answers with it itself).
    pub(crate) fn take_for(&self, id: &RequestId) -> Option<Box<RawValue>> {
        self.take(&serde_json::to_value(id).ok()?)
    }
}

/// Writes one JSON-RPC message as the `data:` of an SSE event. A message kept as the server
/// wrote it may hold line breaks (whitespace between tokens: a JSON string cannot hold one
/// raw), and any line break ends an SSE line, so after one `data: ` the agent would read the
/// message cut short at its first. Each line goes in a `data:` line of its own instead, which
/// the agent's reader joins with `\n` again: the same message, a CR between tokens read as LF.
pub(crate) fn push_sse_data(out: &mut Vec<u8>, message: &[u8]) {
    let mut rest = message;
    loop {
        out.extend_from_slice(b"data: ");
        let Some(end) = memchr::memchr2(b'\r', b'\n', rest) else {
            out.extend_from_slice(rest);
            out.push(b'\n');
            return;
        };
        out.extend_from_slice(&rest[..end]);
        out.push(b'\n');
        let crlf = rest[end] == b'\r' && rest.get(end + 1) == Some(&b'\n');
        rest = &rest[end + 1 + usize::from(crlf)..];
    }
}

/// The keys of results a 2026-07-28 agent may cache (listings and reads).
const CACHEABLE: [&str; 5] = [
    "tools",
    "prompts",
    "resources",
    "resourceTemplates",
    "contents",
];

/// Adjusts a raw result to the agent's revision, as rmcp's server does for typed ones:
/// 2026-07-28 agents expect cache hints on cacheable results; older agents must not see
/// `resultType: "complete"` or non-object structured output. Only the top level is read, and
/// only what changes is written anew: the rest goes on as the bytes it came in.
pub(crate) fn shape_result(raw: Box<RawValue>, modern_agent: bool) -> Box<RawValue> {
    let Some(members) = Members::read(raw.get()) else {
        // Not an object with distinct keys: the whole reading decides, as it would.
        return shape_whole(raw, modern_agent);
    };
    let result_type = members
        .get("resultType")
        .and_then(|t| serde_json::from_str::<std::borrow::Cow<str>>(t.get()).ok());
    let mut edits = Edits::default();
    if modern_agent {
        let cacheable = CACHEABLE.iter().any(|k| members.get(k).is_some());
        if cacheable && result_type.is_none_or(|t| t == "complete") {
            if members.get("ttlMs").is_none() {
                edits.add.push(("ttlMs", json!(0)));
            }
            if members.get("cacheScope").is_none() {
                edits.add.push(("cacheScope", json!("private")));
            }
        }
    } else {
        if result_type.is_some_and(|t| t == "complete") {
            edits.drop.push("resultType");
        }
        if let Some(structured) = members
            .get("structuredContent")
            .filter(|s| !s.get().starts_with('{'))
        {
            edits.drop.push("structuredContent");
            // A `null` content is read as none, as rmcp reads it.
            let content = members.get("content");
            let listed = content.filter(|c| c.get() != "null");
            if let Some(told) = told_first(listed, structured) {
                if content.is_some() {
                    edits.replace.push(("content", told));
                } else if let Ok(told) = serde_json::from_str::<Value>(told.get()) {
                    edits.add.push(("content", told));
                }
            }
        }
        if let Some(tools) = members.get("tools") {
            let text = tools.get().as_bytes();
            use crate::mcp::needle::finder;
            if finder!(b"\"outputSchema\"").find(text).is_some()
                || finder!(b"\\u").find(text).is_some()
            {
                let mut tree: Value = serde_json::from_str(tools.get()).unwrap_or(Value::Null);
                if strip_output_schemas(&mut tree)
                    && let Ok(tools) = serde_json::value::to_raw_value(&tree)
                {
                    edits.replace.push(("tools", tools));
                }
            }
        }
    }
    if edits.is_empty() {
        return raw;
    }
    members.write(&edits).unwrap_or(raw)
}

/// A call result's `content` for an older agent, whose result cannot carry `structured`
/// (structured content that is not an object): the value told as the first text block, as
/// rmcp's own server does for such an agent, unless that block already says it; `None` when
/// nothing is to change (or `content` is not a list to change).
fn told_first(content: Option<&RawValue>, structured: &RawValue) -> Option<Box<RawValue>> {
    #[derive(serde::Deserialize)]
    struct Text {
        #[serde(rename = "type")]
        kind: String,
        text: String,
    }
    let mut blocks: Vec<Box<RawValue>> = match content {
        Some(content) => serde_json::from_str(content.get()).ok()?,
        None => Vec::new(),
    };
    let value = serde_json::from_str::<Value>(structured.get()).ok();
    let said = blocks
        .first()
        .and_then(|b| serde_json::from_str::<Text>(b.get()).ok())
        .filter(|b| b.kind == "text")
        .and_then(|b| serde_json::from_str::<Value>(&b.text).ok())
        .zip(value.as_ref())
        .is_some_and(|(said, value)| said == *value);
    if said {
        return None;
    }
    // Written as rmcp writes it; a value it cannot read (a number past a float) as sent.
    let text = value.map_or_else(|| structured.get().to_owned(), |v| v.to_string());
    let block = json!({"type": "text", "text": text});
    blocks.insert(0, serde_json::value::to_raw_value(&block).ok()?);
    serde_json::value::to_raw_value(&blocks).ok()
}

/// [`shape_result`] for a tool call's result made only of a tool result's members and perhaps
/// `resultType: "complete"` (`mcp::direct`), read no further than it must be: none of those
/// members is cacheable, and an older agent's only edits can be that `resultType`, which sends
/// the result the whole way, and structured content that is not an object. So unless a
/// `"structuredContent"` key at any depth holds something other than an object, nothing is
/// edited. The text is JSON, so that string token can only be a string (a key when a colon
/// follows); and only a `\u` escape can spell the key otherwise, so any such escape sends the
/// result the whole way.
pub(crate) fn shape_plain_call_result(raw: Box<RawValue>, modern_agent: bool) -> Box<RawValue> {
    const KEY: &[u8] = b"\"structuredContent\"";
    let text = raw.get().as_bytes();
    if modern_agent {
        return raw;
    }
    use crate::mcp::needle::finder;
    if finder!(b"\"resultType\"").find(text).is_some() {
        return shape_result(raw, modern_agent);
    }
    let after_space = |from: usize| {
        text[from..]
            .iter()
            .position(|b| !b" \t\r\n".contains(b))
            .map(|at| from + at)
    };
    let objects_only = finder!(KEY).find_iter(text).all(|at| {
        match after_space(at + KEY.len()) {
            Some(colon) if text[colon] == b':' => {
                after_space(colon + 1).is_some_and(|value| text[value] == b'{')
            }
            _ => true, // a string value, not a key
        }
    });
    if objects_only && finder!(b"\\u").find(text).is_none() {
        return raw;
    }
    shape_result(raw, modern_agent)
}

/// `object` with its member `key` (which it has) set to `value`, every other member as the
/// bytes it came in; `None` when it is not an object with distinct keys, or has no `key`.
pub(crate) fn with_member(
    object: &RawValue,
    key: &'static str,
    value: Box<RawValue>,
) -> Option<Box<RawValue>> {
    let members = Members::read(object.get())?;
    members.get(key)?;
    members.write(&Edits {
        replace: vec![(key, value)],
        ..Edits::default()
    })
}

/// `raw` read whole, shaped, and written again.
fn shape_whole(raw: Box<RawValue>, modern_agent: bool) -> Box<RawValue> {
    let Ok(mut value) = serde_json::from_str::<Value>(raw.get()) else {
        return raw;
    };
    shape_tree(&mut value, modern_agent);
    serde_json::value::to_raw_value(&value).unwrap_or(raw)
}

/// Drops the output schemas older agents cannot take (any but an object's) from listed tools;
/// whether any was dropped.
fn strip_output_schemas(tools: &mut Value) -> bool {
    let Value::Array(tools) = tools else {
        return false;
    };
    let mut stripped = false;
    for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
        let non_object = tool
            .get("outputSchema")
            .is_some_and(|s| s.get("type").and_then(Value::as_str) != Some("object"));
        if non_object {
            tool.remove("outputSchema");
            stripped = true;
        }
    }
    stripped
}

/// [`shape_result`] on a result read whole.
fn shape_tree(raw: &mut Value, modern_agent: bool) {
    let Some(obj) = raw.as_object_mut() else {
        return;
    };
    if modern_agent {
        let cacheable = CACHEABLE.iter().any(|k| obj.contains_key(*k));
        let complete = obj
            .get("resultType")
            .and_then(Value::as_str)
            .is_none_or(|t| t == "complete");
        if cacheable && complete {
            obj.entry("ttlMs").or_insert(json!(0));
            obj.entry("cacheScope").or_insert(json!("private"));
        }
        return;
    }
    if obj.get("resultType").and_then(Value::as_str) == Some("complete") {
        obj.remove("resultType");
    }
    if let Some(structured) = obj.remove("structuredContent") {
        if structured.is_object() {
            obj.insert("structuredContent".into(), structured);
        } else {
            let said = obj
                .get("content")
                .and_then(|c| c.get(0))
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .and_then(|b| b.get("text")?.as_str())
                .and_then(|t| serde_json::from_str::<Value>(t).ok())
                .is_some_and(|v| v == structured);
            let block = json!({"type": "text", "text": structured.to_string()});
            match obj.get_mut("content") {
                _ if said => {}
                Some(Value::Array(blocks)) => blocks.insert(0, block),
                // A `null` content is read as none, as rmcp reads it.
                None | Some(Value::Null) => {
                    obj.insert("content".into(), json!([block]));
                }
                Some(_) => {}
            }
        }
    }
    if let Some(tools) = obj.get_mut("tools") {
        strip_output_schemas(tools);
    }
}

#[cfg(test)]
mod fuzz;
mod members;
use members::{Edits, Members};

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Bytes;
    use futures::StreamExt;

    /// The messages an agent's SSE reader (the one rmcp's client uses) reads from `events`.
    async fn read_sse(events: Vec<u8>) -> Vec<Value> {
        let chunks = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from(events))]);
        sse_stream::SseStream::from_bytes_stream(chunks)
            .filter_map(|event| async move { event.ok()?.data })
            .map(|data| serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {data:?}")))
            .collect()
            .await
    }

    /// A result kept as the server wrote it, indented over several lines with any line ends,
    /// reaches the agent whole on a stream: one `data:` line each, which its reader joins.
    /// (After a single `data: `, the reader got the first line alone, `{`, and the call's
    /// answer was lost.)
    #[tokio::test]
    async fn a_message_written_over_several_lines_is_one_message_on_the_stream() {
        let message = json!({"jsonrpc": "2.0", "id": 3,
            "result": {"content": [{"type": "text", "text": "a\nb"}], "x-vendor": {"n": [1, 2]}}});
        let pretty = serde_json::to_string_pretty(&message).unwrap();
        for ends in ["\n", "\r\n", "\r"] {
            let written = format!("{}{ends}", pretty.replace('\n', ends));
            let mut events = b"event: message\n".to_vec();
            push_sse_data(&mut events, written.as_bytes());
            events.push(b'\n');
            events.extend_from_slice(b"event: message\n");
            push_sse_data(&mut events, br#"{"jsonrpc":"2.0","method":"next"}"#);
            events.push(b'\n');
            let read = read_sse(events).await;
            assert_eq!(read.len(), 2, "{ends:?}: {read:?}");
            assert_eq!(read[0], message, "{ends:?}");
            assert_eq!(read[1]["method"], "next", "{ends:?}");
        }
    }

    fn id(n: i64) -> RequestId {
        RequestId::Number(n)
    }

    /// A kept result is the answer of its own request alone, and only once: not of another
    /// id, nor of a string id that spells the same number.
    #[test]
    fn a_kept_result_is_taken_by_its_own_id_once() {
        let kept = Kept::default();
        kept.insert(&id(1), raw(json!({"secret": "agent A's tickets"})));
        assert!(kept.take_for(&id(2)).is_none());
        assert!(kept.take_for(&RequestId::String("1".into())).is_none());
        let taken = kept.take_for(&id(1)).expect("kept for request 1");
        assert_eq!(taken.get(), r#"{"secret":"agent A's tickets"}"#);
        assert!(kept.take_for(&id(1)).is_none(), "taken once");
    }

    fn raw(value: Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&value).unwrap()
    }

    fn shaped(value: Value, modern: bool) -> Value {
        serde_json::from_str(shape_result(raw(value), modern).get()).unwrap()
    }

    #[test]
    fn legacy_agents_get_the_legacy_shape_and_modern_ones_cache_hints() {
        let listed = json!({"tools": [
            {"name": "a", "outputSchema": {"type": "array"}, "x-vendor": 1},
            {"name": "b", "outputSchema": {"type": "object"}}
        ], "resultType": "complete"});
        assert_eq!(
            shaped(listed, false),
            json!({"tools": [{"name": "a", "x-vendor": 1}, {"name": "b", "outputSchema": {"type": "object"}}]})
        );
        // Structured content an older agent cannot take is told as the first text block, as
        // rmcp tells it, unless that block says it already.
        let called = json!({"content": [], "structuredContent": [1, 2]});
        assert_eq!(
            shaped(called, false),
            json!({"content": [{"type": "text", "text": "[1,2]"}]})
        );
        let said =
            json!({"content": [{"type": "text", "text": "[1, 2]"}], "structuredContent": [1, 2]});
        assert_eq!(
            shaped(said, false),
            json!({"content": [{"type": "text", "text": "[1, 2]"}]})
        );
        let none = json!({"content": null, "structuredContent": [1]});
        assert_eq!(
            shaped(none, false),
            json!({"content": [{"type": "text", "text": "[1]"}]})
        );
        let bare = json!({"structuredContent": "done"});
        assert_eq!(
            shaped(bare, false),
            json!({"content": [{"type": "text", "text": "\"done\""}]})
        );
        let escaped = r#"{"content":[],"result\u0054ype":"compl\u0065te"}"#;
        let escaped = shape_result(RawValue::from_string(escaped.into()).unwrap(), false);
        assert_eq!(escaped.get(), r#"{"content":[]}"#);

        assert_eq!(
            shaped(json!({"tools": []}), true),
            json!({"tools": [], "ttlMs": 0, "cacheScope": "private"})
        );
        assert_eq!(
            shaped(json!({"contents": null, "resultType": 7}), true),
            json!({"contents": null, "resultType": 7, "ttlMs": 0, "cacheScope": "private"})
        );
        let kept = json!({"tools": [], "ttlMs": 5000, "cacheScope": "public"});
        assert_eq!(shaped(kept, true)["ttlMs"], 5000);
    }

    #[test]
    fn a_result_nested_past_any_readers_depth_is_shaped_without_harm() {
        let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
        for (text, modern) in [
            (format!(r#"{{"resultType":"complete","d":{deep}}}"#), false),
            (format!(r#"{{"tools":{deep}}}"#), true),
            (format!(r#"{{"tools":{deep},"x":"\u0041"}}"#), false),
            (deep.clone(), false),
        ] {
            let _ = shape_result(RawValue::from_string(text).unwrap(), modern);
        }
    }

    #[test]
    fn a_result_that_needs_no_shaping_goes_on_as_the_bytes_it_came_in() {
        // Numbers, escapes, spacing and key order a tree would rewrite.
        let sent = r#"{"content": [{"type":"text","text":"caf\u00e9"}], "n": 1e2, "big": 123456789012345678901234567890, "structuredContent": {"z":1,"a":-0.0}}"#;
        for modern in [false, true] {
            let out = shape_result(RawValue::from_string(sent.into()).unwrap(), modern);
            assert_eq!(out.get(), sent, "modern: {modern}");
        }
    }
}
