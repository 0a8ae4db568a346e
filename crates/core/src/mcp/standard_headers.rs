//! The headers a request carries to a 2026-07-28 Streamable HTTP server beside its body
//! (SEP-2243): `Mcp-Method`, `Mcp-Name` and one `Mcp-Param-*` for each argument the tool's
//! input schema marks with `x-mcp-header`, so that whatever routes the traffic need not read
//! the body. A server checks them against the body and refuses a request whose headers
//! disagree. rmcp builds them for its own requests in a module it does not export; these are
//! the same rules, read off the request's bytes with borrowed parsing rather than a `Value`
//! tree. One place for both of our senders: the gateway's own posts upstream (`direct`) and
//! the bridge's posts of an agent's messages to the gateway, so that a rule (and its caps on
//! what a server's schema may ask for) cannot differ between them.

use std::borrow::Cow;

use base64::Engine;
use http::{HeaderName, HeaderValue};
use rmcp::transport::common::http_header::{
    BASE64_HEADER_PREFIX, BASE64_HEADER_SUFFIX, HEADER_MCP_METHOD, HEADER_MCP_NAME,
    HEADER_MCP_PARAM_PREFIX,
};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

pub type Headers = Vec<(HeaderName, HeaderValue)>;

/// `x-mcp-header` annotations taken from one tool's schema, at most: each costs a header on
/// every call of the tool, and the schema is the server's to write.
const MAX_PARAM_HEADERS: usize = 32;

/// The arguments a tool's input schema asks to see as headers: each property's path from the
/// root (through `properties` alone) and the header it goes in. Read once per listing.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ParamHeaders(Vec<(Vec<String>, HeaderName)>);

impl ParamHeaders {
    /// The annotations of `schema`, if they are well formed as SEP-2243 has them: on
    /// primitive properties reached through `properties` alone, each a token, unique without
    /// regard to case. A schema that breaks the rules gets none (rmcp's client drops such a
    /// tool from the list; the server then refuses a call, which says why).
    pub fn of(schema: &Value) -> Self {
        let mut found = Vec::new();
        let mut path = Vec::new();
        if collect(schema.get("properties"), &mut path, &mut found).is_err() {
            return ParamHeaders::default();
        }
        let mut seen = std::collections::HashSet::new();
        if found.len() > MAX_PARAM_HEADERS || !found.iter().all(|(_, h)| seen.insert(h.clone())) {
            return ParamHeaders::default();
        }
        ParamHeaders(found)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Walks `properties` chains; an annotation that is not a token on a primitive is an error.
fn collect(
    properties: Option<&Value>,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, HeaderName)>,
) -> Result<(), ()> {
    let Some(Value::Object(properties)) = properties else {
        return Ok(());
    };
    for (name, schema) in properties {
        path.push(name.clone());
        if let Some(header) = schema.get("x-mcp-header") {
            let primitive = matches!(
                schema.get("type").and_then(Value::as_str),
                Some("string" | "integer" | "boolean")
            );
            let header = header
                .as_str()
                .filter(|h| !h.is_empty() && primitive)
                .and_then(|h| {
                    HeaderName::from_bytes(format!("{HEADER_MCP_PARAM_PREFIX}{h}").as_bytes()).ok()
                })
                .ok_or(())?;
            out.push((path.clone(), header));
        }
        if out.len() > MAX_PARAM_HEADERS {
            return Err(());
        }
        collect(schema.get("properties"), path, out)?;
        path.pop();
    }
    Ok(())
}

/// As much of a request as its headers need.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: Option<Params<'a>>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow)]
    name: Option<&'a RawValue>,
    #[serde(borrow)]
    uri: Option<&'a RawValue>,
    #[serde(borrow, rename = "taskId")]
    task_id: Option<&'a RawValue>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
}

/// The SEP-2243 headers for `request` (one JSON-RPC request as it goes on the wire);
/// `params` are the called tool's annotations, for a `tools/call`.
pub fn of_request(request: &[u8], params: Option<&ParamHeaders>) -> Headers {
    let mut out = Headers::new();
    let Ok(head) = serde_json::from_slice::<Head>(request) else {
        return out;
    };
    let method = head.method.as_ref();
    if let Ok(value) = HeaderValue::from_str(method) {
        out.push((HeaderName::from_static(lower(HEADER_MCP_METHOD)), value));
    }
    let Some(p) = head.params else {
        return out;
    };
    let name = match method {
        "tools/call" | "prompts/get" => p.name,
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => p.uri,
        "tasks/get" | "tasks/update" | "tasks/cancel" => p.task_id,
        _ => None,
    };
    if let Some(name) = name.and_then(|n| serde_json::from_str::<String>(n.get()).ok())
        && let Some(value) = encoded(&name)
    {
        out.push((HeaderName::from_static(lower(HEADER_MCP_NAME)), value));
    }
    if method == "tools/call"
        && let (Some(params), Some(arguments)) = (params.filter(|p| !p.is_empty()), p.arguments)
        && let Ok(arguments) = serde_json::from_str::<Value>(arguments.get())
    {
        for (path, header) in &params.0 {
            let value = path.iter().try_fold(&arguments, |v, key| v.get(key));
            let text = match value {
                Some(Value::String(s)) => Cow::Borrowed(s.as_str()),
                Some(Value::Bool(b)) => Cow::Owned(b.to_string()),
                Some(Value::Number(n)) => Cow::Owned(n.to_string()),
                _ => continue,
            };
            if let Some(value) = encoded(&text) {
                out.push((header.clone(), value));
            }
        }
    }
    out
}

/// `HeaderName::from_static` takes lower case only.
const fn lower(name: &'static str) -> &'static str {
    match name.as_bytes() {
        b"Mcp-Method" => "mcp-method",
        b"Mcp-Name" => "mcp-name",
        _ => panic!("a header name this module does not use"),
    }
}

/// `value` as it travels in a header: as it is when it can, else wrapped as
/// `=?base64?…?=` (a space or tab at either end, a character outside visible ASCII, or a
/// value that reads as that wrapping already).
fn encoded(value: &str) -> Option<HeaderValue> {
    let edged = value.starts_with([' ', '\t']) || value.ends_with([' ', '\t']);
    let wrapped_already =
        value.starts_with(BASE64_HEADER_PREFIX) && value.ends_with(BASE64_HEADER_SUFFIX);
    let bare = !edged && !wrapped_already && value.chars().all(|c| (' '..='~').contains(&c));
    if bare {
        HeaderValue::from_str(value).ok()
    } else {
        let wrapped = base64::prelude::BASE64_STANDARD.encode(value);
        HeaderValue::from_str(&format!(
            "{BASE64_HEADER_PREFIX}{wrapped}{BASE64_HEADER_SUFFIX}"
        ))
        .ok()
    }
}

/// A header value as an agent sent it, unwrapped when it is in SEP-2243's Base64 wrapping
/// (as rmcp's server reads it); `None` when that wrapping holds no Base64 of UTF-8.
pub(crate) fn decoded(value: &str) -> Option<std::borrow::Cow<'_, str>> {
    use base64::Engine;
    match value
        .strip_prefix(BASE64_HEADER_PREFIX)
        .and_then(|inner| inner.strip_suffix(BASE64_HEADER_SUFFIX))
    {
        Some(inner) => {
            let bytes = base64::prelude::BASE64_STANDARD.decode(inner).ok()?;
            String::from_utf8(bytes).ok().map(std::borrow::Cow::Owned)
        }
        None => Some(std::borrow::Cow::Borrowed(value)),
    }
}

/// Whether `name` is one of the headers made here for each request: rmcp's session sets
/// them for its own last request, and ours must not inherit them.
pub(crate) fn is_per_request(name: &HeaderName) -> bool {
    let name = name.as_str();
    name == "mcp-method"
        || name == "mcp-name"
        || name
            .get(..HEADER_MCP_PARAM_PREFIX.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(HEADER_MCP_PARAM_PREFIX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers(request: Value, schema: Option<Value>) -> Vec<(String, String)> {
        let params = schema.map(|s| ParamHeaders::of(&s));
        of_request(
            serde_json::to_string(&request).unwrap().as_bytes(),
            params.as_ref(),
        )
        .into_iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
        .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_method_and_the_name_each_method_takes_it_from() {
        let cases = [
            (
                json!({"jsonrpc":"2.0","id":"countersign:1","method":"tools/call","params":{"name":"delete_ticket","arguments":{}}}),
                vec![("mcp-method", "tools/call"), ("mcp-name", "delete_ticket")],
            ),
            (
                json!({"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"note://a b"}}),
                vec![("mcp-method", "resources/read"), ("mcp-name", "note://a b")],
            ),
            (
                json!({"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"greet"}}),
                vec![("mcp-method", "prompts/get"), ("mcp-name", "greet")],
            ),
            (
                json!({"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t-1"}}),
                vec![("mcp-method", "tasks/get"), ("mcp-name", "t-1")],
            ),
            // No name for a list, nor from a member the method does not name by.
            (
                json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"x"}}),
                vec![("mcp-method", "tools/list")],
            ),
            (
                json!({"jsonrpc":"2.0","id":1,"method":"ping"}),
                vec![("mcp-method", "ping")],
            ),
        ];
        for (request, expected) in cases {
            assert_eq!(
                headers(request.clone(), None),
                pairs(&expected),
                "{request}"
            );
        }
    }

    #[test]
    fn a_value_that_cannot_travel_bare_is_wrapped_in_base64() {
        for (name, wrapped) in [
            (" lead", "=?base64?IGxlYWQ=?="),
            ("tail\t", "=?base64?dGFpbAk=?="),
            ("héllo", "=?base64?aMOpbGxv?="),
            (
                "line\r\nX-Injected: 1",
                "=?base64?bGluZQ0KWC1JbmplY3RlZDogMQ==?=",
            ),
            ("=?base64?abc?=", "=?base64?PT9iYXNlNjQ/YWJjPz0=?="),
        ] {
            let got = headers(
                json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":name}}),
                None,
            );
            assert_eq!(
                got[1],
                ("mcp-name".to_owned(), wrapped.to_owned()),
                "{name:?}"
            );
        }
    }

    /// What is wrapped is read back as rmcp's server reads it; a wrapping of something that
    /// is not Base64 of UTF-8 reads as nothing.
    #[test]
    fn a_wrapped_value_reads_back_and_a_broken_wrapping_as_nothing() {
        for value in ["echo", " lead", "tail\t", "héllo", "=?base64?x?="] {
            let sent = encoded(value).unwrap();
            assert_eq!(decoded(sent.to_str().unwrap()).as_deref(), Some(value));
        }
        assert_eq!(decoded("=?base64?not base64?="), None);
        assert_eq!(decoded("=?base64?/w==?="), None, "not UTF-8");
        assert_eq!(
            decoded("=?base64?ZWNobw==").as_deref(),
            Some("=?base64?ZWNobw==")
        );
    }

    #[test]
    fn annotated_arguments_go_in_their_headers_and_absent_or_compound_ones_do_not() {
        let schema = json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "count": {"type": "integer", "x-mcp-header": "Count"},
                "dry": {"type": "boolean", "x-mcp-header": "Dry"},
                "missing": {"type": "string", "x-mcp-header": "Missing"},
                "target": {"type": "object", "properties": {
                    "zone": {"type": "string", "x-mcp-header": "Zone"}
                }},
                "plain": {"type": "string"}
            }
        });
        let got = headers(
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{
                "region": "eu-west", "count": 3, "dry": false, "target": {"zone": "ä"}, "plain": "p"
            }}}),
            Some(schema),
        );
        let mut got = got;
        got.sort();
        let mut expected = pairs(&[
            ("mcp-method", "tools/call"),
            ("mcp-name", "t"),
            ("mcp-param-region", "eu-west"),
            ("mcp-param-count", "3"),
            ("mcp-param-dry", "false"),
            ("mcp-param-zone", "=?base64?w6Q=?="),
        ]);
        expected.sort();
        assert_eq!(got, expected);
    }

    #[test]
    fn a_schema_that_breaks_the_rules_gets_no_param_headers() {
        for schema in [
            // Not a token.
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "has space"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "x\r\nInjected"}}}),
            // Not on a primitive.
            json!({"properties": {"a": {"type": "object", "x-mcp-header": "A"}}}),
            // Twice, in any case.
            json!({"properties": {
                "a": {"type": "string", "x-mcp-header": "Same"},
                "b": {"type": "string", "x-mcp-header": "same"}
            }}),
            // Empty, or not a string.
            json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": 7}}}),
        ] {
            assert!(ParamHeaders::of(&schema).is_empty(), "{schema}");
        }
        let many: serde_json::Map<String, Value> = (0..MAX_PARAM_HEADERS + 1)
            .map(|i| {
                (
                    format!("p{i}"),
                    json!({"type": "string", "x-mcp-header": format!("H{i}")}),
                )
            })
            .collect();
        assert!(ParamHeaders::of(&json!({ "properties": many })).is_empty());
    }

    #[test]
    fn only_the_per_request_headers_are_known_as_such() {
        for name in ["mcp-method", "mcp-name", "mcp-param-region"] {
            assert!(is_per_request(&HeaderName::from_static(name)), "{name}");
        }
        for name in [
            "mcp-protocol-version",
            "mcp-session-id",
            "authorization",
            "x-mcp-name",
        ] {
            assert!(!is_per_request(&HeaderName::from_static(name)), "{name}");
        }
    }
}
