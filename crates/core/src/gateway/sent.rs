//! Faithful requests: rmcp's typed model drops the fields of an agent's `tools/call` params it
//! does not know (a vendor's, a newer revision's), but the upstream must get them as the agent
//! sent them.
//!
//! The lane, which reads an agent's call anyway, finds the keys rmcp does not model in the
//! params it has read ([`beyond_the_model`]); for a POST that goes rmcp's way, [`read`] (or
//! [`mark`], when the body is already in hand) reads that far itself. Only those keys' values
//! are parsed, and kept in the request's extensions under the request's id; the forwarder adds
//! them to the call it sends upstream ([`upstream_call`]). Everything else is the gate's and
//! the gateway's: the tool's name and arguments as the gate judged them, `_meta` (the progress
//! token and lifecycle keys are the gateway's own upstream), the multi round-trip fields the
//! gateway fills in, and `task`.

use std::borrow::Cow;
use std::collections::HashMap;

use rmcp::model::{CallToolRequest, ClientRequest, CustomRequest, RequestId};
use rmcp::service::{RequestContext, RoleServer};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// rmcp's own default cap on a request body: a larger one is refused (413) either way, so
/// none is held in memory whole before it is.
pub(crate) const MAX_BODY: usize = 4 * 1024 * 1024;

/// The `tools/call` params keys that are the gate's or the gateway's: never taken from the
/// agent's extra fields.
const OWNED: &[&str] = &[
    "_meta",
    "name",
    "arguments",
    "inputResponses",
    "requestState",
    "task",
];

/// The fields of one agent `tools/call` that rmcp does not model, and the request's id.
#[derive(Clone, Debug)]
pub(crate) struct Unmodeled {
    id: RequestId,
    fields: Map<String, Value>,
}

impl Unmodeled {
    /// The fields the agent sent with request `ctx` (when it came through [`read`]).
    pub(crate) fn of(ctx: &RequestContext<RoleServer>) -> Option<&Map<String, Value>> {
        ctx.extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Unmodeled>())
            .filter(|u| u.id == ctx.id)
            .map(|u| &u.fields)
    }

    /// A field that a lax reader takes for one of the call's own: `NAME` beside `name`, read
    /// last by a Go server, would run another tool than the one judged; `InputResponses`, or
    /// `input_responses` to a Python SDK server (whose models take a field's Python name beside
    /// its camelCase alias), would answer the server's questions for the person.
    pub(crate) fn shadowing(fields: &Map<String, Value>) -> Option<&str> {
        fields.keys().map(String::as_str).find(|key| {
            OWNED.iter().any(|owned| {
                crate::ask::approval::same_key_to_a_lax_reader(key, owned)
                    || same_name_in_another_case_style(key, owned)
            })
        })
    }

    #[cfg(test)]
    pub(crate) fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }
}

/// Whether `a` and `b` name the same field in different case styles (`input_responses`,
/// `input-responses`, `inputResponses`; `meta` for `_meta`): the Python SDK's models take a
/// field by its snake_case name and its camelCase alias alike.
pub(crate) fn same_name_in_another_case_style(a: &str, b: &str) -> bool {
    let squash = |k: &str| -> String {
        k.chars()
            .filter(|c| !matches!(c, '_' | '-'))
            .flat_map(char::to_lowercase)
            .collect()
    };
    squash(a) == squash(b)
}

/// Notes on a POST for rmcp's way, whose body is in hand, what a `tools/call` carries beyond
/// rmcp's model, so that it goes on.
pub(crate) fn mark(parts: &mut http::request::Parts, bytes: &[u8]) {
    if let Some(unmodeled) = unmodeled(bytes) {
        parts.extensions.insert(unmodeled);
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

/// A call's params, member by member, unread.
pub(crate) type Members<'a> = HashMap<Cow<'a, str>, &'a RawValue>;

/// A `tools/call`'s fields beyond rmcp's model; `None` for anything else (a batch, another
/// method, a call with none).
fn unmodeled(bytes: &[u8]) -> Option<Unmodeled> {
    crate::mcp::needle::finder!(b"tools/call").find(bytes)?;
    let envelope: Envelope = serde_json::from_slice(bytes).ok()?;
    if envelope.method.as_deref() != Some("tools/call") {
        return None;
    }
    let id: RequestId = serde_json::from_str(envelope.id?.get()).ok()?;
    let members: Members = serde_json::from_str(envelope.params?.get()).ok()?;
    beyond_the_model(id, &members)
}

/// The fields of call `id`'s params (`members`) that rmcp does not model, if any, in the order
/// of their names: what the gate judges must be the same text for the same call each time
/// (a decision for exactly these arguments, a pending answer are matched by it), and the
/// members come in a hash map's order, which differs from one map to the next.
pub(crate) fn beyond_the_model(id: RequestId, members: &Members) -> Option<Unmodeled> {
    let mut fields: Map<String, Value> = members
        .iter()
        .filter(|(key, _)| !OWNED.contains(&key.as_ref()))
        .filter_map(|(key, value)| Some((key.to_string(), serde_json::from_str(value.get()).ok()?)))
        .collect();
    fields.sort_keys();
    (!fields.is_empty()).then_some(Unmodeled { id, fields })
}

/// The call to send upstream: `request` (what the gate judged, with the gateway's own fields)
/// and the agent's fields rmcp does not model, as sent. Without any, the typed request as is.
pub(super) fn upstream_call(
    request: &CallToolRequest,
    unmodeled: Option<&Map<String, Value>>,
) -> ClientRequest {
    let typed = || ClientRequest::CallToolRequest(request.clone());
    let Some(fields) = unmodeled else {
        return typed();
    };
    let Ok(mut params @ Value::Object(_)) = serde_json::to_value(&request.params) else {
        return typed();
    };
    // `_meta` travels beside the params, where rmcp puts the upstream progress token.
    if let Value::Object(map) = &mut params {
        map.remove("_meta");
    }
    add_unmodeled(&mut params, Some(fields));
    let mut custom = CustomRequest::new("tools/call", Some(params));
    if let Some(meta) = request.params.meta.clone() {
        custom.extensions.insert(meta);
    }
    ClientRequest::CustomRequest(custom)
}

/// Adds the agent's unmodeled fields to params the gateway built; a field never replaces one
/// the gateway set.
pub(super) fn add_unmodeled(params: &mut Value, unmodeled: Option<&Map<String, Value>>) {
    if let (Some(fields), Value::Object(params)) = (unmodeled, params) {
        for (key, value) in fields {
            params.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
}

/// What the gate judges for a call that carries fields beyond the model: `[arguments,
/// fields]`. An array, so that no call's own arguments (always an object) can equal it, and a
/// decision remembered for one never covers the other.
pub(super) fn judged(arguments: Value, fields: &Map<String, Value>) -> Value {
    Value::Array(vec![arguments, Value::Object(fields.clone())])
}

/// How a judged value is shown to the person, as the texts that will be forwarded
/// (pretty-printed; key order and integers as sent): the call's arguments, and the fields
/// beyond the model it also carries, if any.
pub(crate) fn shown(judged: &Value) -> (String, Option<String>) {
    let text = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let (arguments, fields) = crate::ask::approval::judged_parts(judged);
    (text(arguments), fields.map(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::CallToolRequestParams;
    use serde_json::json;

    fn read_json(message: Value) -> Option<Unmodeled> {
        unmodeled(message.to_string().as_bytes())
    }

    #[test]
    fn the_same_calls_fields_are_judged_as_the_same_text_every_time() {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "t", "arguments": {},
            "x-f": 6, "x-c": 3, "x-a": 1, "x-e": 5, "x-b": 2, "x-d": 4,
        }});
        for _ in 0..20 {
            let fields = read_json(call.clone()).unwrap().fields;
            let keys: Vec<&str> = fields.keys().map(String::as_str).collect();
            assert_eq!(keys, ["x-a", "x-b", "x-c", "x-d", "x-e", "x-f"]);
        }
    }

    #[test]
    fn only_a_tool_calls_fields_beyond_rmcps_model_are_kept() {
        let kept = read_json(
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
                "name": "echo", "arguments": {"a": 1}, "_meta": {"progressToken": 1},
                "task": {"ttl": 1}, "inputResponses": {}, "requestState": "s",
                "x-vendor": {"kept": true}, "future": [1, 2],
            }}),
        )
        .unwrap();
        assert_eq!(kept.id, RequestId::Number(7));
        assert_eq!(
            Value::Object(kept.fields),
            json!({"x-vendor": {"kept": true}, "future": [1, 2]})
        );
        // Nothing beyond the model, another method, a batch, a notification: nothing kept.
        assert!(
            read_json(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"tools/call": 1}}}))
            .is_none()
        );
        assert!(
            read_json(json!({"jsonrpc": "2.0", "id": 1, "method": "prompts/get",
            "params": {"name": "tools/call", "x": 1}}))
            .is_none()
        );
        assert!(
            read_json(json!([{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "e", "x": 1}}]))
            .is_none()
        );
        assert!(
            read_json(json!({"jsonrpc": "2.0", "method": "tools/call",
            "params": {"name": "e", "x": 1}}))
            .is_none()
        );
    }

    #[test]
    fn a_call_with_more_is_judged_apart_from_any_arguments_and_shown_with_names() {
        let fields = json!({"x-force": true});
        let judged = judged(json!({"a": 1}), fields.as_object().unwrap());
        assert!(judged.is_array(), "no call's own arguments can equal it");
        assert_eq!(
            shown(&judged),
            (
                "{\n  \"a\": 1\n}".to_owned(),
                Some("{\n  \"x-force\": true\n}".to_owned())
            )
        );
        // Arguments that merely look like the two parts are only arguments.
        let plain = json!({"arguments": {"a": 1}, "alsoSent": {"x-force": true}});
        let (text, also) = shown(&plain);
        assert_eq!(text, serde_json::to_string_pretty(&plain).unwrap());
        assert_eq!(also, None);
    }

    #[test]
    fn the_upstream_call_is_what_the_gate_judged_plus_the_agents_own_fields() {
        let mut params = CallToolRequestParams::new("echo");
        params.arguments = Some(json!({"a": 1}).as_object().unwrap().clone());
        let request = CallToolRequest::new(params);
        assert!(matches!(
            upstream_call(&request, None),
            ClientRequest::CallToolRequest(_)
        ));
        // An agent cannot override what the gate judged through a duplicate of its own.
        let fields = json!({"x-vendor": {"kept": true}, "name": "rm", "arguments": {"b": 2}});
        let fields = fields.as_object().unwrap();
        let ClientRequest::CustomRequest(custom) = upstream_call(&request, Some(fields)) else {
            panic!("a custom request");
        };
        assert_eq!(custom.method, "tools/call");
        assert_eq!(
            custom.params.unwrap(),
            json!({"name": "echo", "arguments": {"a": 1}, "x-vendor": {"kept": true}})
        );
    }
}
