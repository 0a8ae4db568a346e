//! What the lane reads of an agent's message: no more than it needs to tell whether the
//! message is the lane's, borrowed.

use std::collections::HashMap;

use rmcp::model::{CallToolRequestParams, GetMeta, ProtocolVersion, RequestId, RequestMetaObject};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::Work;
use super::stream::{ASKED_PREFIX, AgentAnswer};
use crate::gateway::forward::task;
use crate::gateway::sent::{Members, Unmodeled, beyond_the_model};

/// What the lane reads of a JSON-RPC message: no more than it needs, borrowed.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    method: Option<&'a str>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

/// The keys of a call's `_meta`.
type MetaShape<'a> = HashMap<std::borrow::Cow<'a, str>, serde::de::IgnoredAny>;

/// Whether a request's `_meta` carries any of the 2026 revision's lifecycle keys (its
/// per-request protocol version, client info or capabilities).
fn has_lifecycle_keys(meta: &MetaShape) -> bool {
    meta.keys()
        .any(|key| key.starts_with("io.modelcontextprotocol/"))
}

/// Whether rmcp runs a request on its session whose `_meta` carries lifecycle keys, under
/// version header `version` (its `is_legacy_request` and
/// `validate_request_protocol_version_meta`): not when the keys are the 2026 revision's full
/// set (rmcp serves that without the session), and a version the `_meta` names must be one
/// with the handshake, and the header's.
fn runs_on_session(meta: &RequestMetaObject, version: Option<&str>) -> bool {
    if meta
        .missing_required_keys(&ProtocolVersion::V_2026_07_28)
        .is_empty()
    {
        return false;
    }
    match meta.protocol_version() {
        None => true,
        Some(named) => named.has_initialize() && version == Some(named.as_str()),
    }
}

fn asks_progress(meta: &MetaShape) -> bool {
    meta.contains_key("progressToken")
}

#[derive(Deserialize)]
struct CancelShape {
    #[serde(rename = "requestId")]
    request_id: Option<RequestId>,
}

/// What the lane may take of a message. Made once per request and moved once: boxing the
/// larger variant would only add an allocation to every call.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(super) enum Message {
    /// A request the lane runs: `id` as read, and as the agent wrote it for the answer; for a
    /// call, the fields it carries beyond rmcp's model.
    Run {
        id: RequestId,
        raw_id: Box<RawValue>,
        work: Work,
        unmodeled: Option<Unmodeled>,
    },
    /// The agent cancels this request (the lane's, if it is in flight there).
    Cancelled(RequestId),
    /// The agent answers a request the gateway put on a lane stream (if one waits for it).
    Answer(String, AgentAnswer),
}

/// Reads a message on a session far enough to tell whether it is the lane's; `version` is the
/// request's version header.
pub(super) fn read(bytes: &[u8], version: Option<&str>) -> Option<Message> {
    let envelope: Envelope = serde_json::from_slice(bytes).ok()?;
    let Some(method) = envelope.method else {
        return read_answer(&envelope);
    };
    match method {
        "tools/call" => read_call(envelope.id?, envelope.params?, Some(version)),
        method if envelope.id.is_some() && task::METHODS.contains(&method) => {
            let method = task::METHODS.iter().copied().find(|m| *m == method)?;
            let raw_id = envelope.id?;
            let id: RequestId = serde_json::from_str(raw_id.get()).ok()?;
            let params = envelope
                .params
                .map(|p| serde_json::from_str::<Value>(p.get()))
                .transpose()
                .ok()?;
            Some(Message::Run {
                id,
                raw_id: raw_id.to_owned(),
                work: Work::Task(method, params),
                unmodeled: None,
            })
        }
        "notifications/cancelled" if envelope.id.is_none() => {
            let cancel: CancelShape = serde_json::from_str(envelope.params?.get()).ok()?;
            Some(Message::Cancelled(cancel.request_id?))
        }
        method if envelope.id.is_some() && OTHER_METHODS.contains(&method) => {
            let raw_id = envelope.id?;
            let mut lifecycle = false;
            if let Some(params) = envelope.params {
                let shape: ParamsShape = serde_json::from_str(params.get()).ok()?;
                if let Some(meta) = shape.meta {
                    lifecycle =
                        has_lifecycle_keys(&serde_json::from_str::<MetaShape>(meta.get()).ok()?);
                }
            }
            let request = read_as_rmcp(bytes)?;
            if lifecycle && !runs_on_session(request.request.get_meta(), version) {
                return None;
            }
            let streamed = request.request.get_meta().get_progress_token().is_some();
            Some(run_request(raw_id, request, streamed))
        }
        _ => None,
    }
}

/// Reads a 2026-07-28 agent's message made without a session as far as to tell whether the
/// lane runs it: a `tools/call` (not a task) or a read (see [`SESSION_ONLY_METHODS`]), whose
/// `_meta` carries that revision's lifecycle keys in full, naming 2026-07-28 itself. Anything
/// else (another method, an older or newer revision, a key missing or malformed) is rmcp's to
/// judge and answer.
pub(super) fn read_sessionless(bytes: &[u8]) -> Option<Message> {
    let envelope: Envelope = serde_json::from_slice(bytes).ok()?;
    match envelope.method? {
        "tools/call" => read_call(envelope.id?, envelope.params?, None),
        method if OTHER_METHODS.contains(&method) && !SESSION_ONLY_METHODS.contains(&method) => {
            let raw_id = envelope.id?;
            let request = read_as_rmcp(bytes)?;
            if !speaks_2026_07_28(request.request.get_meta()) {
                return None;
            }
            // Whatever comes for it before its answer goes on a stream of its own.
            Some(run_request(raw_id, request, true))
        }
        _ => None,
    }
}

/// A request read as rmcp reads it: the `Forwarder` answers requests other than a call
/// through rmcp's own dispatch.
fn read_as_rmcp(bytes: &[u8]) -> Option<rmcp::model::JsonRpcRequest<rmcp::model::ClientRequest>> {
    match serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(bytes).ok()? {
        rmcp::model::JsonRpcMessage::Request(request) => Some(request),
        _ => None,
    }
}

/// The lane runs `request`, answering under `raw_id` as the agent wrote it.
fn run_request(
    raw_id: &RawValue,
    request: rmcp::model::JsonRpcRequest<rmcp::model::ClientRequest>,
    streamed: bool,
) -> Message {
    Message::Run {
        id: request.id,
        raw_id: raw_id.to_owned(),
        work: Work::Request {
            request: request.request,
            streamed,
        },
        unmodeled: None,
    }
}

/// Of [`OTHER_METHODS`], those a 2026-07-28 agent makes without a session that the lane
/// leaves to rmcp: what subscribes or sets a level belongs to a session or a stream of the
/// revision's own, and the revision has no `ping`. The rest read the server, and the lane runs
/// them as it runs such an agent's calls (`server/discover` is not among them: rmcp answers it).
const SESSION_ONLY_METHODS: &[&str] = &[
    "ping",
    "resources/subscribe",
    "resources/unsubscribe",
    "logging/setLevel",
];

/// A `tools/call` request, member by member, once: what keeps it off the lane, makes it a
/// task or goes upstream beside rmcp's model is read from here. On a session (`session` names
/// the request's version header, if any) any lifecycle keys of the 2026 revision in its
/// `_meta` must be ones rmcp runs on the session ([`runs_on_session`]); without one it must
/// carry them all, for 2026-07-28.
fn read_call(
    raw_id: &RawValue,
    params: &RawValue,
    session: Option<Option<&str>>,
) -> Option<Message> {
    let sessionless = session.is_none();
    let members: Members = serde_json::from_str(params.get()).ok()?;
    let meta = match members.get("_meta") {
        Some(meta) => serde_json::from_str::<MetaShape>(meta.get()).ok()?,
        None => MetaShape::new(),
    };
    let lifecycle = has_lifecycle_keys(&meta);
    if sessionless && !lifecycle {
        return None;
    }
    let progress = asks_progress(&meta);
    let id: RequestId = serde_json::from_str(raw_id.get()).ok()?;
    let task = members
        .get("task")
        .map(|t| serde_json::from_str::<Value>(t.get()))
        .transpose()
        .ok()?;
    // A 2026 task is rmcp's to judge against the agent's declared capabilities.
    if sessionless && task.is_some() {
        return None;
    }
    let unmodeled = beyond_the_model(id.clone(), &members);
    let params: CallToolRequestParams = serde_json::from_str(params.get()).ok()?;
    if sessionless && !speaks_2026_07_28(params.meta.as_ref()?) {
        return None;
    }
    if let Some(version) = session
        && lifecycle
        && !params
            .meta
            .as_ref()
            .is_some_and(|meta| runs_on_session(meta, version))
    {
        return None;
    }
    let work = match task {
        Some(task) => Work::TaskCall(params, task),
        None if progress => Work::CallOnStream(params),
        None => Work::Call(params),
    };
    Some(Message::Run {
        id,
        raw_id: raw_id.to_owned(),
        work,
        unmodeled,
    })
}

/// Whether a request's `_meta` names 2026-07-28 and carries every key that revision requires
/// of a request, well-formed (as rmcp's server judges them).
fn speaks_2026_07_28(meta: &RequestMetaObject) -> bool {
    meta.protocol_version() == Some(ProtocolVersion::V_2026_07_28)
        && meta
            .missing_required_keys(&ProtocolVersion::V_2026_07_28)
            .is_empty()
}

/// The other requests an agent's session makes that the lane runs: all but `initialize`
/// (which makes the session) and what only the 2026 revision has.
pub(super) const OTHER_METHODS: &[&str] = &[
    "ping",
    "tools/list",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
];

/// The `_meta` of any request's params.
#[derive(Deserialize)]
struct ParamsShape<'a> {
    #[serde(rename = "_meta", borrow)]
    meta: Option<&'a RawValue>,
}

/// An agent's answer to one of the lane's own requests: a string id of the lane's, and a
/// result or a well-formed error.
fn read_answer(envelope: &Envelope) -> Option<Message> {
    let id: String = serde_json::from_str(envelope.id?.get()).ok()?;
    if !id.starts_with(ASKED_PREFIX) {
        return None;
    }
    let answer = match (envelope.result, envelope.error) {
        (Some(result), None) => Ok(serde_json::from_str(result.get()).ok()?),
        (None, Some(error)) => Err(serde_json::from_str(error.get()).ok()?),
        _ => return None,
    };
    Some(Message::Answer(id, answer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read_json(message: serde_json::Value) -> Option<Message> {
        read(message.to_string().as_bytes(), None)
    }

    #[test]
    fn an_agents_other_requests_are_the_lanes_read_as_rmcp_reads_them() {
        let listed = read_json(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}));
        let Some(Message::Run {
            id,
            work:
                Work::Request {
                    request: rmcp::model::ClientRequest::ListToolsRequest(_),
                    streamed: false,
                },
            ..
        }) = listed
        else {
            panic!("{listed:?}")
        };
        assert_eq!(id, RequestId::Number(4));
        let read = read_json(
            json!({"jsonrpc": "2.0", "id": "r", "method": "resources/read",
            "params": {"uri": "file:///a", "_meta": {"progressToken": 1}}}),
        );
        assert!(
            matches!(
                read,
                Some(Message::Run {
                    work: Work::Request {
                        request: rmcp::model::ClientRequest::ReadResourceRequest(_),
                        streamed: true,
                    },
                    ..
                })
            ),
            "a request asking for progress is answered on a stream: {read:?}"
        );
        for method in OTHER_METHODS {
            assert!(
                !matches!(*method, "initialize" | "tools/call" | "server/discover"),
                "{method}"
            );
        }
    }

    /// Without a session, only a `tools/call` that carries the 2026-07-28 lifecycle keys in
    /// full, for that revision, and no task is the lane's; on a session, no such call is.
    #[test]
    fn a_sessionless_call_is_the_lanes_only_with_the_revisions_keys_in_full() {
        let meta = |extra: serde_json::Value| {
            let mut meta = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "a", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}});
            for (k, v) in extra.as_object().unwrap() {
                meta[k] = v.clone();
            }
            meta
        };
        let call = |id: serde_json::Value, params: serde_json::Value| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
                .to_string()
        };
        let plain = call(
            json!("c-1"),
            json!({"name": "echo", "arguments": {"x": 1}, "x-vendor": 2, "_meta": meta(json!({}))}),
        );
        let Some(Message::Run {
            id,
            raw_id,
            work: Work::Call(params),
            unmodeled: Some(unmodeled),
        }) = read_sessionless(plain.as_bytes())
        else {
            panic!("{plain}")
        };
        assert_eq!(id, RequestId::String("c-1".into()));
        assert_eq!(raw_id.get(), "\"c-1\"");
        assert_eq!(params.name, "echo");
        assert_eq!(
            serde_json::Value::Object(unmodeled.fields().clone()),
            json!({"x-vendor": 2})
        );
        // The lifecycle keys go to the forwarder with the call, as rmcp hands them on.
        assert!(params.meta.as_ref().unwrap().client_info().is_some());
        assert!(
            read(plain.as_bytes(), Some("2026-07-28")).is_none(),
            "no session's"
        );
        let progress = call(
            json!(2),
            json!({"name": "echo", "_meta": meta(json!({"progressToken": 5}))}),
        );
        assert!(matches!(
            read_sessionless(progress.as_bytes()),
            Some(Message::Run {
                work: Work::CallOnStream(_),
                ..
            })
        ));
        for not_ours in [
            // An older or newer revision, or a required key missing or malformed.
            call(
                json!(1),
                json!({"name": "echo", "_meta": meta(json!({
                    "io.modelcontextprotocol/protocolVersion": "2025-11-25"}))}),
            ),
            call(
                json!(1),
                json!({"name": "echo", "_meta": meta(json!({
                    "io.modelcontextprotocol/protocolVersion": "2027-01-01"}))}),
            ),
            call(
                json!(1),
                json!({"name": "echo", "_meta": meta(json!({
                    "io.modelcontextprotocol/clientCapabilities": null}))}),
            ),
            call(
                json!(1),
                json!({"name": "echo", "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
            ),
            // No lifecycle keys at all, a task, or not a call.
            call(json!(1), json!({"name": "echo"})),
            call(
                json!(1),
                json!({"name": "echo", "task": {"ttl": 1}, "_meta": meta(json!({}))}),
            ),
            json!({"jsonrpc": "2.0", "method": "tools/call",
                "params": {"name": "echo", "_meta": meta(json!({}))}})
            .to_string(),
        ] {
            assert!(
                read_sessionless(not_ours.as_bytes()).is_none(),
                "{not_ours}"
            );
        }
    }

    /// Without a session, the requests that read the server are the lane's too, on the same
    /// terms as a call: the revision's keys in full, for 2026-07-28. What subscribes, sets a
    /// level or discovers is rmcp's.
    #[test]
    fn a_sessionless_agents_reads_are_the_lanes_with_the_revisions_keys_in_full() {
        let meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "a", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}});
        let sent_as = |method: &str, mut params: serde_json::Value, meta: &serde_json::Value| {
            params["_meta"] = meta.clone();
            json!({"jsonrpc": "2.0", "id": "ID", "method": method, "params": params})
                .to_string()
                .replacen(r#""ID""#, r#""r\u0041""#, 1)
        };
        for (method, params) in [
            ("tools/list", json!({})),
            ("prompts/list", json!({"cursor": "c"})),
            ("prompts/get", json!({"name": "p"})),
            ("resources/list", json!({})),
            ("resources/templates/list", json!({})),
            ("resources/read", json!({"uri": "raw://a"})),
            (
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "p"},
                    "argument": {"name": "a", "value": "x"}}),
            ),
        ] {
            let sent = sent_as(method, params.clone(), &meta);
            let Some(Message::Run {
                id,
                raw_id,
                work:
                    Work::Request {
                        request,
                        streamed: true,
                    },
                unmodeled: None,
            }) = read_sessionless(sent.as_bytes())
            else {
                panic!("{sent}")
            };
            assert_eq!(request.method(), method);
            assert_eq!(id, RequestId::String("rA".into()));
            assert_eq!(raw_id.get(), r#""r\u0041""#, "the id as the agent wrote it");
            // The lifecycle keys go to the forwarder with the request, as rmcp hands them on.
            assert!(request.get_meta().client_info().is_some(), "{method}");
            assert!(
                read(sent.as_bytes(), Some("2026-07-28")).is_none(),
                "{method}: no session's"
            );
            let older = sent_as(
                method,
                params.clone(),
                &json!({"io.modelcontextprotocol/protocolVersion": "2025-11-25"}),
            );
            assert!(read_sessionless(older.as_bytes()).is_none(), "{older}");
            let partial = sent_as(
                method,
                params,
                &json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"}),
            );
            assert!(read_sessionless(partial.as_bytes()).is_none(), "{partial}");
        }
        for (method, params) in [
            ("server/discover", json!({})),
            ("resources/subscribe", json!({"uri": "raw://a"})),
            ("logging/setLevel", json!({"level": "info"})),
            ("initialize", json!({})),
            ("ping", json!({})),
        ] {
            let sent = sent_as(method, params, &meta);
            assert!(read_sessionless(sent.as_bytes()).is_none(), "{sent}");
        }
    }

    #[test]
    fn only_a_plain_tool_call_or_a_cancellation_is_the_lanes() {
        let call = read_json(
            json!({"jsonrpc": "2.0", "id": "a-1", "method": "tools/call",
            "params": {"name": "echo", "arguments": {"x": 1}, "_meta": {"vendor": 2}}}),
        );
        let Some(Message::Run {
            id,
            raw_id,
            work: Work::Call(params),
            unmodeled: None,
        }) = call
        else {
            panic!("{call:?}")
        };
        assert_eq!(id, RequestId::String("a-1".into()));
        assert_eq!(raw_id.get(), "\"a-1\"");
        assert_eq!(params.name, "echo");
        assert!(params.meta.is_some(), "the call's _meta goes with it");
        // What it carries beyond rmcp's model is read in the same pass, for the upstream.
        let more = read_json(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "echo", "arguments": {}, "x-vendor": [1, 2.50]}}));
        let Some(Message::Run {
            unmodeled: Some(unmodeled),
            ..
        }) = more
        else {
            panic!("{more:?}")
        };
        assert_eq!(
            serde_json::Value::Object(unmodeled.fields().clone()),
            json!({"x-vendor": [1, 2.5]})
        );

        for not_ours in [
            // 2026 metadata and other methods are rmcp's.
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "echo", "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}),
            json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "echo"}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}),
            json!({"jsonrpc": "2.0", "method": "tools/list", "params": {}}),
            json!([{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}}]),
            json!({"jsonrpc": "2.0", "id": {"no": 1}, "method": "tools/call",
                "params": {"name": "echo"}}),
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"reason": "no id"}}),
            json!({"jsonrpc": "2.0", "method": "tasks/get", "params": {"taskId": "t"}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/update", "params": {}}),
        ] {
            assert!(read_json(not_ours.clone()).is_none(), "{not_ours}");
        }
        assert!(read(b"{not json", None).is_none());
        // Some lifecycle keys on a session, as rmcp runs them there: a version named only with
        // the same version header, and one with the handshake.
        for method in ["tools/call", "tools/list"] {
            let partial = json!({"jsonrpc": "2.0", "id": 3, "method": method,
                "params": {"name": "echo", "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2025-11-25"}}})
            .to_string();
            let on_session = read(partial.as_bytes(), Some("2025-11-25"));
            assert!(matches!(on_session, Some(Message::Run { .. })), "{method}");
            assert!(read(partial.as_bytes(), None).is_none(), "{method}");
            assert!(
                read(partial.as_bytes(), Some("2025-06-18")).is_none(),
                "{method}"
            );
            let client_only = json!({"jsonrpc": "2.0", "id": 3, "method": method,
                "params": {"name": "echo", "_meta": {
                    "io.modelcontextprotocol/clientInfo": {"name": "a", "version": "1"}}}})
            .to_string();
            let on_session = read(client_only.as_bytes(), None);
            assert!(matches!(on_session, Some(Message::Run { .. })), "{method}");
        }
        let with_progress = read_json(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo", "_meta": {"progressToken": 0}}}));
        assert!(
            matches!(
                with_progress,
                Some(Message::Run {
                    work: Work::CallOnStream(_),
                    ..
                })
            ),
            "{with_progress:?}"
        );
        // A task call is the lane's whether or not it asks for progress (rmcp's server side
        // would drop its `task`).
        for meta in [json!({}), json!({"progressToken": 1})] {
            let task_call = read_json(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "report", "task": {"ttl": 1000}, "_meta": meta}}));
            let Some(Message::Run {
                work: Work::TaskCall(params, task),
                ..
            }) = task_call
            else {
                panic!("{task_call:?}")
            };
            assert_eq!(
                (params.name.as_ref(), task),
                ("report", json!({"ttl": 1000}))
            );
        }
        let about = read_json(json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/result",
            "params": {"taskId": "t-1"}}));
        let Some(Message::Run {
            work: Work::Task(method, params),
            ..
        }) = about
        else {
            panic!("{about:?}")
        };
        assert_eq!(
            (method, params),
            ("tasks/result", Some(json!({"taskId": "t-1"})))
        );
        // An answer to one of the lane's own requests, and nothing else that looks like one.
        let answer = read_json(json!({"jsonrpc": "2.0", "id": "countersign-lane-3",
            "result": {"model": "m"}}));
        assert!(
            matches!(&answer, Some(Message::Answer(id, Ok(result)))
                if id == "countersign-lane-3" && result["model"] == "m"),
            "{answer:?}"
        );
        let refused = read_json(json!({"jsonrpc": "2.0", "id": "countersign-lane-4",
            "error": {"code": -1, "message": "no"}}));
        assert!(
            matches!(&refused, Some(Message::Answer(_, Err(e))) if e.message == "no"),
            "{refused:?}"
        );
        for not_an_answer in [
            json!({"jsonrpc": "2.0", "id": 0, "result": {}}),
            json!({"jsonrpc": "2.0", "id": "other-1", "result": {}}),
            json!({"jsonrpc": "2.0", "id": "countersign-lane-5"}),
            json!({"jsonrpc": "2.0", "id": "countersign-lane-5", "result": {},
                "error": {"code": -1, "message": "both"}}),
            json!({"jsonrpc": "2.0", "id": "countersign-lane-5", "error": {"message": "no code"}}),
        ] {
            assert!(
                read_json(not_an_answer.clone()).is_none(),
                "{not_an_answer}"
            );
        }
        let cancel = read_json(json!({"jsonrpc": "2.0",
            "method": "notifications/cancelled", "params": {"requestId": 7}}));
        assert!(
            matches!(cancel, Some(Message::Cancelled(RequestId::Number(7)))),
            "{cancel:?}"
        );
    }
}
