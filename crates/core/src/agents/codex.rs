//! Codex's config, `~/.codex/config.toml`: its `[mcp_servers.NAME]` tables read as entries, and
//! rewritten table by table with toml_edit, so comments, order and every other setting stay as
//! the person wrote them.

use serde_json::{Map, Value};
use toml_edit::{DocumentMut, InlineTable, Item};

/// The servers under `mcp_servers`, in file order, as JSON; or where the file stops being TOML
/// (a byte offset) and why.
pub(crate) fn entries(text: &str) -> Result<Vec<(String, Value)>, (usize, String)> {
    let doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        (
            e.span().map_or(0, |s| s.start),
            e.message().trim().to_owned(),
        )
    })?;
    let Some(servers) = doc.get("mcp_servers") else {
        return Ok(Vec::new());
    };
    let Some(servers) = servers.as_table_like() else {
        return Err((0, "\"mcp_servers\" is not a table".into()));
    };
    Ok(servers
        .iter()
        .map(|(name, item)| (name.to_owned(), to_json(item)))
        .collect())
}

/// `text` with each named server's table replaced by the given entry (JSON: strings, and
/// tables of strings); every other byte as it was.
pub(crate) fn rewrite(text: &str, routed: &[(String, Value)]) -> Result<String, String> {
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| e.to_string())?;
    let servers = doc
        .get_mut("mcp_servers")
        .and_then(Item::as_table_like_mut)
        .ok_or("\"mcp_servers\" is not a table")?;
    for (name, value) in routed {
        let Some(item) = servers.get_mut(name) else {
            return Err(format!("no server \"{name}\" under mcp_servers"));
        };
        let Value::Object(fields) = value else {
            return Err("an entry must be a table".into());
        };
        match item {
            // `[mcp_servers.NAME]`: its keys replaced, its header and the comments above it kept.
            Item::Table(table) => {
                table.clear();
                for (key, value) in fields {
                    table.insert(key, Item::Value(to_toml(value)));
                }
            }
            // `NAME = { ... }` inside `[mcp_servers]`.
            other => {
                let mut inline = InlineTable::new();
                for (key, value) in fields {
                    inline.insert(key, to_toml(value));
                }
                *other = Item::Value(toml_edit::Value::InlineTable(inline));
            }
        }
    }
    Ok(doc.to_string())
}

/// A Codex entry in Countersign's words: a command with its `args`, `env` and `cwd`, or a `url`
/// (Streamable HTTP) with its `http_headers`; a bearer token Codex takes from a variable
/// (`bearer_token_env_var`, `env_http_headers`) as a `${VAR}` reference, which the import flags
/// (Countersign does not fill variables in); `enabled = false` as disabled; Codex's own
/// settings (timeouts, tool filters) left behind (a route-through keeps them on the routed
/// table: `super::kept_when_routed`).
pub(crate) fn in_our_words(entry: Map<String, Value>) -> Value {
    let mut out = Map::new();
    for key in ["command", "args", "env", "cwd", "url"] {
        if let Some(value) = entry.get(key) {
            out.insert(key.into(), value.clone());
        }
    }
    if out.contains_key("url") {
        out.insert("type".into(), "http".into());
        let mut headers = entry
            .get("http_headers")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if let Some(from) = entry.get("env_http_headers").and_then(Value::as_object) {
            for (header, var) in from {
                if let Some(var) = var.as_str() {
                    headers.insert(header.clone(), format!("${{{var}}}").into());
                }
            }
        }
        if let Some(var) = entry.get("bearer_token_env_var").and_then(Value::as_str) {
            headers.insert("Authorization".into(), format!("Bearer ${{{var}}}").into());
        }
        if !headers.is_empty() {
            out.insert("headers".into(), Value::Object(headers));
        }
    }
    if entry.get("enabled") == Some(&Value::Bool(false)) {
        out.insert("disabled".into(), true.into());
    }
    Value::Object(out)
}

fn to_json(item: &Item) -> Value {
    match item {
        Item::None => Value::Null,
        Item::Value(value) => value_json(value),
        Item::Table(table) => table_json(table.iter()),
        Item::ArrayOfTables(tables) => tables
            .iter()
            .map(|t| table_json(t.iter()))
            .collect::<Vec<_>>()
            .into(),
    }
}

fn table_json<'a>(items: impl Iterator<Item = (&'a str, &'a Item)>) -> Value {
    Value::Object(items.map(|(k, v)| (k.to_owned(), to_json(v))).collect())
}

fn value_json(value: &toml_edit::Value) -> Value {
    use toml_edit::Value as T;
    match value {
        T::String(s) => s.value().clone().into(),
        T::Integer(i) => (*i.value()).into(),
        T::Float(f) => serde_json::Number::from_f64(*f.value()).map_or(Value::Null, Value::Number),
        T::Boolean(b) => (*b.value()).into(),
        T::Datetime(d) => d.value().to_string().into(),
        T::Array(a) => a.iter().map(value_json).collect::<Vec<_>>().into(),
        T::InlineTable(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.to_owned(), value_json(v)))
                .collect(),
        ),
    }
}

fn to_toml(value: &Value) -> toml_edit::Value {
    match value {
        Value::Object(fields) => {
            let mut inline = InlineTable::new();
            for (k, v) in fields {
                inline.insert(k, to_toml(v));
            }
            toml_edit::Value::InlineTable(inline)
        }
        Value::Array(items) => items
            .iter()
            .map(to_toml)
            .collect::<toml_edit::Array>()
            .into(),
        Value::String(s) => s.as_str().into(),
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.into(),
            None => n.as_f64().unwrap_or_default().into(),
        },
        Value::Null => "".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CONFIG: &str = r#"# Codex settings
model = "o4-mini"

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]
env = { DOCS_KEY = "k" }
startup_timeout_sec = 20

# the tracker
[mcp_servers.tracker]
url = "https://tracker.example/mcp"
bearer_token_env_var = "TRACKER_TOKEN"
enabled = false

[profiles.fast]
model = "o4-mini"
"#;

    #[test]
    fn servers_are_read_in_order_and_in_countersigns_words() {
        let found = entries(CONFIG).unwrap();
        let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["docs", "tracker"]);
        let words = |i: usize| in_our_words(found[i].1.as_object().unwrap().clone());
        assert_eq!(
            words(0),
            json!({"command": "npx", "args": ["-y", "docs-mcp"], "env": {"DOCS_KEY": "k"}})
        );
        assert_eq!(
            words(1),
            json!({"type": "http", "url": "https://tracker.example/mcp",
                   "headers": {"Authorization": "Bearer ${TRACKER_TOKEN}"}, "disabled": true})
        );
    }

    #[test]
    fn a_rewrite_replaces_only_the_routed_table() {
        let routed = [(
            "docs".to_owned(),
            json!({"url": "http://127.0.0.1:7/mcp/docs", "http_headers": {"Authorization": "Bearer T"}}),
        )];
        let text = rewrite(CONFIG, &routed).unwrap();
        assert!(
            text.starts_with("# Codex settings\nmodel = \"o4-mini\"\n\n[mcp_servers.docs]\n"),
            "{text}"
        );
        assert!(text.contains("url = \"http://127.0.0.1:7/mcp/docs\"\nhttp_headers = { Authorization = \"Bearer T\" }\n"), "{text}");
        assert!(!text.contains("docs-mcp"), "{text}");
        let rest = &CONFIG[CONFIG.find("# the tracker").unwrap()..];
        assert!(text.ends_with(rest), "{text}");
        let inline = "[mcp_servers]\ndocs = { command = \"npx\" } # mine\n";
        let text = rewrite(inline, &routed).unwrap();
        assert!(
            text.contains("url = \"http://127.0.0.1:7/mcp/docs\""),
            "{text}"
        );
        assert_eq!(
            entries(&text).unwrap()[0].1["http_headers"]["Authorization"],
            "Bearer T"
        );
    }

    #[test]
    fn broken_toml_is_located() {
        let (at, message) = entries("a = 1\n[mcp_servers.x\ncommand = 1\n").unwrap_err();
        assert!(at >= 6, "{at}");
        assert!(!message.is_empty());
        assert!(entries("mcp_servers = 3").is_err());
        assert!(entries("").unwrap().is_empty());
    }
}
