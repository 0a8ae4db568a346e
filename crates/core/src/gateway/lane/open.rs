//! An agent's `initialize` (2025-11-25 and older) on the lane: the session is made in the
//! endpoint's own rmcp session manager, as rmcp's service makes it, and the answer is written
//! here from the result the `Forwarder` kept, so a 2025-11-25 server's task capability (which
//! rmcp's typed capabilities have no place for) reaches the agent as the server offered it.
//!
//! Only an `initialize` whose headers the lane judges as rmcp would is taken; rmcp refuses
//! the rest (a version header that is unknown or contradicts the body, a contradicting
//! `Mcp-Method`, an answer kind the agent does not accept, a body that is not JSON).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, GetExtensions, GetMeta, ProtocolVersion,
    ServerJsonRpcMessage,
};
use rmcp::transport::streamable_http_server::SessionManager;

use super::{Opening, SESSION_HEADER, VERSION_HEADER, accepts_both, json_in, reply};
use crate::gateway::Shared;
use crate::gateway::faithful::Kept;
use crate::gateway::forward::Forwarder;

/// An `initialize` request the lane may answer, read as rmcp reads it.
pub(super) fn initialize(headers: &HeaderMap, bytes: &[u8]) -> Option<Initialize> {
    if !json_in(headers) || !accepts_both(headers) {
        return None;
    }
    let ClientJsonRpcMessage::Request(request) = serde_json::from_slice(bytes).ok()? else {
        return None;
    };
    let ClientRequest::InitializeRequest(init) = &request.request else {
        return None;
    };
    // As rmcp judges the handshake's headers: a version given must be one it knows (or any,
    // when the request names its version in `_meta` too) and the one the body asks for.
    if let Some(version) = headers.get(VERSION_HEADER) {
        let version = version.to_str().ok()?;
        let known = ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .any(|known| known.as_str() == version);
        let meta_names_one = request.request.get_meta().protocol_version().is_some();
        if !(known || meta_names_one) || version != init.params.protocol_version.as_str() {
            return None;
        }
        // From the revision with standard headers on, an `Mcp-Method` given must say this,
        // once.
        if version >= ProtocolVersion::STANDARD_HEADERS.as_str() {
            let mut methods = headers.get_all("mcp-method").iter();
            if let Some(method) = methods.next()
                && (methods.next().is_some() || method.as_bytes() != b"initialize")
            {
                return None;
            }
        }
    }
    Some(request)
}

type Initialize = rmcp::model::JsonRpcRequest<ClientRequest>;

/// Makes the session and answers `request` (an `initialize`, see [`initialize`]) in JSON,
/// naming the session as rmcp does (even when the handshake failed: rmcp ends that session by
/// itself).
pub(super) async fn open(
    shared: &Arc<Shared>,
    server: &str,
    mut parts: http::request::Parts,
    bytes: &Bytes,
    mut request: Initialize,
) -> Response {
    let Some(manager) = shared.lanes.manager(server) else {
        return (StatusCode::NOT_FOUND, "Not Found").into_response();
    };
    crate::gateway::sent::mark(&mut parts, bytes);
    let opening = Opening::default();
    let kept = Kept::default();
    parts.extensions.insert(opening.clone());
    parts.extensions.insert(kept.clone());
    request.request.extensions_mut().insert(parts);
    let id = request.id.clone();
    let Ok(raw_id) = serde_json::value::to_raw_value(&id) else {
        return (StatusCode::BAD_REQUEST, "Bad Request").into_response();
    };
    let (session, transport) = match manager.create_session().await {
        Ok(made) => made,
        Err(e) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Internal Server Error: create session: {e}"),
            )
                .into_response();
        }
    };
    // As rmcp's service runs a session: to its end, then gone from the manager.
    let service = Forwarder::new(shared.clone(), server.to_owned());
    let stopped = shared.stop.child_token();
    let worker_manager = manager.clone();
    let worker_session = session.clone();
    tokio::spawn(async move {
        match rmcp::service::serve_server_with_ct(service, transport, stopped).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => tracing::debug!(error = %e, "gateway: a session that did not start"),
        }
        let _ = worker_manager.close_session(&worker_session).await;
    });
    let answered = manager
        .initialize_session(&session, ClientJsonRpcMessage::Request(request))
        .await;
    let body = match answered {
        Ok(ServerJsonRpcMessage::Response(response)) => match kept.take_for(&id) {
            Some(raw) => reply(&raw_id, "result", &raw),
            None => reply(&raw_id, "result", &response.result),
        },
        Ok(ServerJsonRpcMessage::Error(error)) => reply(&raw_id, "error", &error.error),
        Ok(_) => reply(
            &raw_id,
            "error",
            &rmcp::ErrorData::internal_error("the handshake gave no answer", None),
        ),
        Err(e) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Internal Server Error: create stream: {e}"),
            )
                .into_response();
        }
    };
    let body = match body {
        Ok(body) => body,
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    };
    if let Some((forwarder, peer)) = opening.0.get() {
        shared
            .lanes
            .open(server, &session, forwarder.clone(), peer.clone());
    }
    let mut response = (
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(body),
    )
        .into_response();
    if let Ok(value) = http::HeaderValue::from_str(&session) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(
            "content-type",
            http::HeaderValue::from_static("application/json"),
        );
        map.insert(
            "accept",
            http::HeaderValue::from_static("application/json, text/event-stream"),
        );
        for (name, value) in pairs {
            map.append(*name, http::HeaderValue::from_static(value));
        }
        map
    }

    fn initialize_naming(version: &str) -> Vec<u8> {
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "a", "version": "1"}}})
        .to_string()
        .into_bytes()
    }

    /// The lane answers an `initialize` only where rmcp would run it: the headers rmcp refuses
    /// stay rmcp's to refuse.
    #[test]
    fn an_initialize_is_the_lanes_only_with_headers_rmcp_would_take() {
        let body = initialize_naming("2025-11-25");
        assert!(initialize(&headers(&[]), &body).is_some());
        let same = headers(&[("mcp-protocol-version", "2025-11-25")]);
        assert!(initialize(&same, &body).is_some());
        let refused = headers(&[("mcp-protocol-version", "2025-06-18")]);
        assert!(
            initialize(&refused, &body).is_none(),
            "not the body's version"
        );
        // A version rmcp does not know, the body's own: refused, unless the request names a
        // version in its `_meta` too.
        let unknown = initialize_naming("1999-01-01");
        let naming = headers(&[("mcp-protocol-version", "1999-01-01")]);
        assert!(
            initialize(&naming, &unknown).is_none(),
            "an unknown version"
        );
        let mut in_meta: serde_json::Value = serde_json::from_slice(&unknown).unwrap();
        in_meta["params"]["_meta"] =
            json!({"io.modelcontextprotocol/protocolVersion": "1999-01-01"});
        let in_meta = in_meta.to_string().into_bytes();
        assert!(
            initialize(&naming, &in_meta).is_some(),
            "named in _meta too"
        );
        let modern = initialize_naming("2026-07-28");
        let told = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "initialize"),
        ]);
        assert!(initialize(&told, &modern).is_some());
        for refused in [
            headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/list"),
            ]),
            headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "initialize"),
                ("mcp-method", "initialize"),
            ]),
        ] {
            assert!(initialize(&refused, &modern).is_none(), "{refused:?}");
        }
        let mut no_sse = headers(&[]);
        no_sse.insert(
            "accept",
            http::HeaderValue::from_static("application/json, text/event-stream;q=0"),
        );
        assert!(
            initialize(&no_sse, &body).is_none(),
            "a zero quality is a no"
        );
        no_sse.insert(
            "accept",
            http::HeaderValue::from_static("application/json;q=0.5, text/event-stream;q=0.001"),
        );
        assert!(initialize(&no_sse, &body).is_some());
        let mut not_json = headers(&[]);
        not_json.insert("content-type", http::HeaderValue::from_static("text/plain"));
        assert!(initialize(&not_json, &body).is_none());
        let listed = br#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#;
        assert!(initialize(&headers(&[]), listed).is_none());
    }
}
