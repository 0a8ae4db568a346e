//! The HTTP headers a message needs beside its body.
//!
//! Streamable HTTP carries some of the message in headers so that proxies can route without
//! reading bodies: `MCP-Protocol-Version` on every request after the handshake, and from
//! 2026-07-28 on (SEP-2243) `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*`, which the gateway checks
//! against the body and answers with a 400 when they are missing or differ. They are worked out
//! from the bytes the agent wrote, never a re-serialization (rmcp's typed model drops fields it
//! does not know), by the same code the gateway's own posts upstream use.

pub use countersign_core::mcp::standard_headers::{ParamHeaders, of_request as standard_headers};
use serde_json::Value;

/// The first protocol version whose requests carry `Mcp-Method` / `Mcp-Name` / `Mcp-Param-*`,
/// and whose requests name their version in `params._meta` instead of an `initialize` handshake.
pub const STANDARD_HEADERS: &str = "2026-07-28";

/// Where a 2026-07-28 request says which protocol version it speaks.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// Protocol versions are dates, so string order is version order (rmcp compares them the same
/// way).
pub fn needs_standard_headers(version: &str) -> bool {
    version >= STANDARD_HEADERS
}

/// The version a request names for itself in `params._meta` (2026-07-28 and later).
pub fn inline_version(message: &Value) -> Option<&str> {
    message
        .get("params")?
        .get("_meta")?
        .get(META_PROTOCOL_VERSION)?
        .as_str()
}

/// A `tools/list` result → (tool name, the arguments its input schema asks to see as
/// `Mcp-Param-*` headers), for later calls of each tool. The rules, and their caps on what a
/// server's schema may ask for, are the gateway's own (`countersign_core::mcp::standard_headers`).
pub fn listed_param_headers(result: &Value) -> Vec<(String, ParamHeaders)> {
    let Some(tools) = result.get("tools").and_then(Value::as_array) else {
        return Vec::new();
    };
    tools
        .iter()
        .filter_map(|tool| {
            let name = tool.get("name")?.as_str()?;
            let schema = tool.get("inputSchema").filter(|s| s.is_object())?;
            Some((name.to_owned(), ParamHeaders::of(schema)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The headers of `message` as the bridge posts it, the tool's annotations taken from
    /// `listed` (a `tools/list` result) as the bridge learns them.
    fn headers(message: Value, listed: Option<Value>) -> Vec<(String, String)> {
        let listed = listed.map(|l| listed_param_headers(&l)).unwrap_or_default();
        let params = listed.first().map(|(_, p)| p);
        standard_headers(message.to_string().as_bytes(), params)
            .into_iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
            .collect()
    }

    fn tool(schema: Value) -> Value {
        json!({"tools": [{"name": "deploy", "inputSchema": schema}]})
    }

    #[test]
    fn method_and_name_for_a_tool_call() {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "list_tickets", "arguments": {}}});
        assert_eq!(
            headers(call, None),
            [
                ("mcp-method".to_owned(), "tools/call".to_owned()),
                ("mcp-name".to_owned(), "list_tickets".to_owned())
            ]
        );
    }

    #[test]
    fn notifications_carry_only_their_method() {
        let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 3}});
        assert_eq!(
            headers(note, None),
            [(
                "mcp-method".to_owned(),
                "notifications/cancelled".to_owned()
            )]
        );
    }

    #[test]
    fn resource_uri_is_the_name_and_odd_values_are_wrapped() {
        let read = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
            "params": {"uri": "file:///Bücher"}});
        let name = &headers(read, None)[1];
        assert_eq!(name.0, "mcp-name");
        assert_eq!(name.1, "=?base64?ZmlsZTovLy9Cw7xjaGVy?=");
    }

    #[test]
    fn annotated_arguments_become_param_headers() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "location": {"type": "object", "properties": {
                "zone": {"type": "integer", "x-mcp-header": "Zone"}}},
            "note": {"type": "string"}
        }});
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "deploy", "arguments": {"region": "eu", "location": {"zone": 3}, "note": "x"}}});
        let got = headers(call, Some(tool(schema)));
        assert!(got.contains(&("mcp-param-region".to_owned(), "eu".to_owned())));
        assert!(got.contains(&("mcp-param-zone".to_owned(), "3".to_owned())));
        assert_eq!(got.len(), 4, "{got:?}");
    }

    /// A hostile server lists a tool whose schema asks for a header per argument, thousands
    /// of them: the bridge used to put every one on each call of that tool (its own rule had no
    /// cap), now it puts none, as the gateway's posts upstream do; nor any for an annotation on
    /// an object or one written twice.
    #[test]
    fn a_schema_asking_for_too_many_or_malformed_param_headers_gets_none() {
        let many: serde_json::Map<String, Value> = (0..5000)
            .map(|i| {
                (
                    format!("p{i}"),
                    json!({"type": "string", "x-mcp-header": format!("H{i}")}),
                )
            })
            .collect();
        let arguments: serde_json::Map<String, Value> =
            (0..5000).map(|i| (format!("p{i}"), json!("v"))).collect();
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "deploy", "arguments": arguments}});
        let got = headers(call.clone(), Some(tool(json!({"properties": many}))));
        assert_eq!(
            got.len(),
            2,
            "only the method and the name: {:?}",
            &got[..3.min(got.len())]
        );
        for schema in [
            json!({"properties": {"p0": {"type": "object", "x-mcp-header": "A"}}}),
            json!({"properties": {
                "p0": {"type": "string", "x-mcp-header": "Same"},
                "p1": {"type": "string", "x-mcp-header": "same"}}}),
        ] {
            assert_eq!(
                headers(call.clone(), Some(tool(schema.clone()))).len(),
                2,
                "{schema}"
            );
        }
    }

    #[test]
    fn inline_version_is_read_from_meta() {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
            "params": {"_meta": {META_PROTOCOL_VERSION: "2026-07-28"}}});
        assert_eq!(inline_version(&request), Some("2026-07-28"));
        assert!(needs_standard_headers("2026-07-28"));
        assert!(!needs_standard_headers("2025-11-25"));
    }
}
