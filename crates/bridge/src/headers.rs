//! The HTTP headers a message needs beside its body, worked out from the JSON alone.
//!
//! Streamable HTTP carries some of the message in headers so that proxies can route without
//! reading bodies: `MCP-Protocol-Version` on every request after the handshake, and from
//! 2026-07-28 on (SEP-2243) `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*`, which rmcp's server
//! checks against the body and answers with a 400 when they are missing or differ. rmcp's own
//! client computes them from its typed model; the bridge must not re-serialize through that model
//! (it drops fields it does not know), so this is the same rule over `serde_json::Value`.

use base64::{Engine, prelude::BASE64_STANDARD};
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

/// `(name, value)` pairs of the SEP-2243 headers for `message` (a request or notification),
/// given the called tool's input schema when it is a `tools/call` whose tool was listed.
pub fn standard_headers(message: &Value, tool_schema: Option<&Value>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return out;
    };
    out.push(("Mcp-Method".to_owned(), method.to_owned()));
    let params = message.get("params");
    let name_key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    };
    if let Some(name) = name_key
        .and_then(|key| params?.get(key))
        .and_then(Value::as_str)
    {
        out.push(("Mcp-Name".to_owned(), encode(name)));
    }
    if method == "tools/call"
        && let (Some(schema), Some(arguments)) =
            (tool_schema, params.and_then(|p| p.get("arguments")))
    {
        let mut annotated = Vec::new();
        collect_annotations(schema.get("properties"), &mut Vec::new(), &mut annotated);
        for (path, header) in annotated {
            let value = path
                .iter()
                .try_fold(arguments, |value, key| value.get(key))
                .and_then(primitive);
            if let Some(value) = value {
                out.push((format!("Mcp-Param-{header}"), encode(&value)));
            }
        }
    }
    out
}

/// Every `x-mcp-header` annotation reached from the schema root through `properties` alone,
/// as (property path, header suffix); the only places rmcp's server looks for them.
fn collect_annotations<'a>(
    properties: Option<&'a Value>,
    path: &mut Vec<&'a str>,
    out: &mut Vec<(Vec<&'a str>, &'a str)>,
) {
    let Some(Value::Object(properties)) = properties else {
        return;
    };
    for (name, schema) in properties {
        path.push(name);
        if let Some(header) = schema.get("x-mcp-header").and_then(Value::as_str)
            && !header.is_empty()
            && header.chars().all(is_tchar)
        {
            out.push((path.clone(), header));
        }
        collect_annotations(schema.get("properties"), path, out);
        path.pop();
    }
}

fn primitive(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// RFC 9110 token characters (a header name).
fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// A value as it may travel in a header: bare when it is plain visible ASCII, otherwise wrapped
/// as `=?base64?...?=` (also when it merely looks like that wrapping).
fn encode(value: &str) -> String {
    let edge_space = value.starts_with([' ', '\t']) || value.ends_with([' ', '\t']);
    let unprintable = value.chars().any(|c| !(' '..='~').contains(&c));
    let looks_wrapped = value.starts_with("=?base64?") && value.ends_with("?=");
    if edge_space || unprintable || looks_wrapped {
        format!("=?base64?{}?=", BASE64_STANDARD.encode(value))
    } else {
        value.to_owned()
    }
}

/// `tools/list` result → (tool name, input schema), for `Mcp-Param-*` on later calls.
pub fn listed_tool_schemas(result: &Value) -> Vec<(String, Value)> {
    let Some(tools) = result.get("tools").and_then(Value::as_array) else {
        return Vec::new();
    };
    tools
        .iter()
        .filter_map(|tool| {
            let name = tool.get("name")?.as_str()?;
            let schema = tool.get("inputSchema").filter(|s| s.is_object())?;
            Some((name.to_owned(), schema.clone()))
        })
        .collect()
}

/// Whether any header annotation is present at all (most tools have none; caching only those
/// keeps the cache small).
pub fn has_annotations(schema: &Value) -> bool {
    let mut found = Vec::new();
    collect_annotations(schema.get("properties"), &mut Vec::new(), &mut found);
    !found.is_empty()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn headers(message: Value, schema: Option<Value>) -> Vec<(String, String)> {
        standard_headers(&message, schema.as_ref())
    }

    #[test]
    fn method_and_name_for_a_tool_call() {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "list_tickets", "arguments": {}}});
        assert_eq!(
            headers(call, None),
            [
                ("Mcp-Method".to_owned(), "tools/call".to_owned()),
                ("Mcp-Name".to_owned(), "list_tickets".to_owned())
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
                "Mcp-Method".to_owned(),
                "notifications/cancelled".to_owned()
            )]
        );
    }

    #[test]
    fn resource_uri_is_the_name_and_odd_values_are_wrapped() {
        let read = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
            "params": {"uri": "file:///Bücher"}});
        let name = &headers(read, None)[1];
        assert_eq!(name.0, "Mcp-Name");
        assert_eq!(
            name.1,
            format!("=?base64?{}?=", BASE64_STANDARD.encode("file:///Bücher"))
        );
    }

    #[test]
    fn annotated_arguments_become_param_headers() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "location": {"type": "object", "properties": {
                "zone": {"type": "integer", "x-mcp-header": "Zone"}}},
            "note": {"type": "string"}
        }});
        assert!(has_annotations(&schema));
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "deploy", "arguments": {"region": "eu", "location": {"zone": 3}, "note": "x"}}});
        let got = headers(call, Some(schema));
        assert!(got.contains(&("Mcp-Param-Region".to_owned(), "eu".to_owned())));
        assert!(got.contains(&("Mcp-Param-Zone".to_owned(), "3".to_owned())));
        assert_eq!(got.len(), 4, "{got:?}");
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
