//! Faithful results: rmcp's typed model drops what it does not know (a tool's vendor fields,
//! newer spec fields), but agents must get the server's own words.
//!
//! The upstream's raw result is read off the wire beside rmcp (`RawRequests::with_results`).
//! The forwarder stashes it and marks the typed result it hands rmcp's server with a `_meta`
//! key; [`swap`], a layer on the agent's HTTP responses, puts the raw result back in place of
//! the marked one, in plain JSON bodies and in SSE events alike. Results the gateway makes
//! itself (a denial) carry no mark and pass untouched.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;
use rmcp::model::MetaObject;
use serde_json::{Value, json};
use std::sync::Arc;

const MARK: &str = "dev.countersign/raw";
/// Raw results kept for their response; one that never goes out (the agent left) is
/// forgotten after this many newer ones.
const KEEP: usize = 4096;
/// A plain JSON response larger than this is passed as is rather than held in memory whole.
const MAX_BODY: usize = 64 * 1024 * 1024;

#[derive(Default)]
pub(crate) struct Stash {
    kept: Mutex<(HashMap<u64, Value>, VecDeque<u64>)>,
    next: AtomicU64,
}

impl Stash {
    /// Keeps `raw` (already shaped for the agent) and marks `meta` with where it is.
    pub(crate) fn mark(&self, meta: &mut Option<MetaObject>, raw: Value) {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        {
            let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
            let (map, order) = &mut *kept;
            map.insert(n, raw);
            order.push_back(n);
            while order.len() > KEEP {
                if let Some(old) = order.pop_front() {
                    map.remove(&old);
                }
            }
        }
        meta.get_or_insert_with(|| MetaObject(Default::default()))
            .0
            .insert(MARK.into(), json!(n));
    }

    fn take(&self, n: u64) -> Option<Value> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let (map, order) = &mut *kept;
        let raw = map.remove(&n)?;
        if let Some(i) = order.iter().position(|o| *o == n) {
            order.remove(i);
        }
        Some(raw)
    }

    /// One JSON-RPC message (or batch) as text, with marked results replaced; `None` when
    /// there is nothing to replace.
    fn swap_message(&self, text: &[u8]) -> Option<Vec<u8>> {
        memchr::memmem::find(text, MARK.as_bytes())?;
        let mut message: Value = serde_json::from_slice(text).ok()?;
        let swapped = match &mut message {
            Value::Array(batch) => batch.iter_mut().fold(false, |s, m| self.swap_one(m) | s),
            one => self.swap_one(one),
        };
        swapped.then(|| serde_json::to_vec(&message).ok()).flatten()
    }

    fn swap_one(&self, message: &mut Value) -> bool {
        let Some(result) = message.get_mut("result") else {
            return false;
        };
        let Some(n) = result
            .get("_meta")
            .and_then(|m| m.get(MARK))
            .and_then(Value::as_u64)
        else {
            return false;
        };
        match self.take(n) {
            Some(raw) => *result = raw,
            // Lost (should not happen): at least do not leak our mark to the agent.
            None => {
                if let Some(meta) = result.get_mut("_meta").and_then(Value::as_object_mut) {
                    meta.remove(MARK);
                }
            }
        }
        true
    }
}

/// The layer: agent responses with marked results get the raw ones back.
pub(crate) async fn swap(
    State(stash): State<Arc<Stash>>,
    request: Request,
    next: Next,
) -> Response {
    let response = next.run(request).await;
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    if content_type.starts_with("application/json") {
        let (mut parts, body) = response.into_parts();
        let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
            Ok(bytes) => bytes,
            Err(_) => return Response::from_parts(parts, Body::empty()),
        };
        let body = match stash.swap_message(&bytes) {
            Some(swapped) => {
                parts.headers.remove(header::CONTENT_LENGTH);
                Body::from(swapped)
            }
            None => Body::from(bytes),
        };
        Response::from_parts(parts, body)
    } else if content_type.starts_with("text/event-stream") {
        let (parts, body) = response.into_parts();
        let mut events = SseEvents::default();
        let stream = body.into_data_stream().map(move |chunk| match chunk {
            Ok(chunk) => Ok::<Bytes, axum::Error>(events.push(&chunk, &stash)),
            Err(e) => Err(e),
        });
        Response::from_parts(parts, Body::from_stream(stream))
    } else {
        response
    }
}

/// Reassembles SSE events across chunks and rewrites their `data:` lines.
#[derive(Default)]
struct SseEvents {
    pending: Vec<u8>,
}

impl SseEvents {
    /// Returns the complete events in `pending + chunk`, rewritten; keeps a partial one.
    fn push(&mut self, chunk: &[u8], stash: &Stash) -> Bytes {
        self.pending.extend_from_slice(chunk);
        let Some(end) = last_event_end(&self.pending) else {
            return Bytes::new();
        };
        let complete: Vec<u8> = self.pending.drain(..end).collect();
        if memchr::memmem::find(&complete, MARK.as_bytes()).is_none() {
            return Bytes::from(complete);
        }
        let mut out = Vec::with_capacity(complete.len());
        for line in complete.split_inclusive(|b| *b == b'\n') {
            let body = line.strip_suffix(b"\n").unwrap_or(line);
            let body = body.strip_suffix(b"\r").unwrap_or(body);
            match body.strip_prefix(b"data:") {
                Some(data) => {
                    let data = data.strip_prefix(b" ").unwrap_or(data);
                    match stash.swap_message(data) {
                        Some(swapped) => {
                            out.extend_from_slice(b"data: ");
                            out.extend_from_slice(&swapped);
                            out.push(b'\n');
                        }
                        None => out.extend_from_slice(line),
                    }
                }
                None => out.extend_from_slice(line),
            }
        }
        Bytes::from(out)
    }
}

/// The end (exclusive) of the last complete event: just after a blank line.
fn last_event_end(buf: &[u8]) -> Option<usize> {
    let lf = memchr::memmem::rfind(buf, b"\n\n").map(|i| i + 2);
    let crlf = memchr::memmem::rfind(buf, b"\r\n\r\n").map(|i| i + 4);
    lf.max(crlf)
}

/// Adjusts a raw result to the agent's revision, as rmcp's server does for typed ones:
/// 2026-07-28 agents expect cache hints on cacheable results; older agents must not see
/// `resultType: "complete"` or non-object structured output.
pub(crate) fn shape_result(raw: &mut Value, modern_agent: bool) {
    let Some(obj) = raw.as_object_mut() else {
        return;
    };
    if modern_agent {
        let cacheable = [
            "tools",
            "prompts",
            "resources",
            "resourceTemplates",
            "contents",
        ]
        .iter()
        .any(|k| obj.contains_key(*k));
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
    if obj.get("structuredContent").is_some_and(|s| !s.is_object()) {
        obj.remove("structuredContent");
    }
    if let Some(Value::Array(tools)) = obj.get_mut("tools") {
        for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
            let non_object = tool
                .get("outputSchema")
                .is_some_and(|s| s.get("type").and_then(Value::as_str) != Some("object"));
            if non_object {
                tool.remove("outputSchema");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_result_is_replaced_by_the_raw_one_in_json_and_in_sse_split_anywhere() {
        let stash = Stash::default();
        let mut meta = None;
        stash.mark(
            &mut meta,
            json!({"tools": [{"name": "a", "x-vendor": {"k": 1}}]}),
        );
        let typed =
            json!({"jsonrpc": "2.0", "id": 7, "result": {"tools": [{"name": "a"}], "_meta": meta}});
        let swapped: Value =
            serde_json::from_slice(&stash.swap_message(typed.to_string().as_bytes()).unwrap())
                .unwrap();
        assert_eq!(swapped["id"], 7);
        assert_eq!(swapped["result"]["tools"][0]["x-vendor"]["k"], 1);
        assert!(swapped["result"].get("_meta").is_none());
        // Taken once.
        assert!(stash.take(0).is_none());

        for split in [1, 10, 40] {
            let mut meta = None;
            stash.mark(&mut meta, json!({"content": [], "x-extra": split}));
            let event = format!(
                "id: 0\ndata: {}\n\n",
                json!({"jsonrpc": "2.0", "id": 8, "result": {"content": [], "_meta": meta}})
            );
            let bytes = event.as_bytes();
            let mut events = SseEvents::default();
            let mut out = events.push(&bytes[..split], &stash).to_vec();
            out.extend_from_slice(&events.push(&bytes[split..], &stash));
            let text = String::from_utf8(out).unwrap();
            assert!(text.starts_with("id: 0\ndata: "), "{text}");
            assert!(text.ends_with("\n\n"), "{text}");
            let data = text.lines().nth(1).unwrap().strip_prefix("data: ").unwrap();
            let data: Value = serde_json::from_str(data).unwrap();
            assert_eq!(data["result"]["x-extra"], split);
        }
    }

    #[test]
    fn unmarked_messages_pass_untouched() {
        let stash = Stash::default();
        assert!(
            stash
                .swap_message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#)
                .is_none()
        );
        let mut events = SseEvents::default();
        let out = events.push(b"data: {\"a\":1}\n\n", &stash);
        assert_eq!(&out[..], b"data: {\"a\":1}\n\n");
    }

    #[test]
    fn legacy_agents_get_the_legacy_shape_and_modern_ones_cache_hints() {
        let mut listed = json!({"tools": [
            {"name": "a", "outputSchema": {"type": "array"}, "x-vendor": 1},
            {"name": "b", "outputSchema": {"type": "object"}}
        ], "resultType": "complete"});
        shape_result(&mut listed, false);
        assert_eq!(
            listed,
            json!({"tools": [{"name": "a", "x-vendor": 1}, {"name": "b", "outputSchema": {"type": "object"}}]})
        );
        let mut called = json!({"content": [], "structuredContent": [1, 2]});
        shape_result(&mut called, false);
        assert_eq!(called, json!({"content": []}));

        let mut modern = json!({"tools": []});
        shape_result(&mut modern, true);
        assert_eq!(
            modern,
            json!({"tools": [], "ttlMs": 0, "cacheScope": "private"})
        );
        let mut kept = json!({"tools": [], "ttlMs": 5000, "cacheScope": "public"});
        shape_result(&mut kept, true);
        assert_eq!(kept["ttlMs"], 5000);
    }
}
