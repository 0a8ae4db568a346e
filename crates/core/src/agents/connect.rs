//! What an agent's config needs to reach a server through the gateway, per agent host.
//!
//! Each host has its own config shape; the person should be able to paste a block as is.
//! Hosts that speak Streamable HTTP get the URL and the agent's token in a header; Claude
//! Desktop, which launches only commands, gets `countersign-bridge` with the agent's token in
//! its environment (`COUNTERSIGN_TOKEN`).

use serde::Serialize;
use serde_json::{Value, json};

/// What to paste into one agent host.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct ClientSetup {
    /// `claudeCode`, `claudeDesktop`, `cursor`, `vscode`, `gemini`, `codex`.
    pub client: String,
    pub title: String,
    /// Where it goes, in words ("Run in a terminal", "~/.cursor/mcp.json, under mcpServers").
    pub where_to: String,
    /// `shell` or `json`.
    pub format: String,
    pub snippet: String,
    /// A sentence to read before pasting: what the token in the snippet protects.
    pub note: Option<String>,
    /// The servers whose names the hosts could not take, and the names they have in the
    /// snippet: kept apart from `note`, whose words are Countersign's, since a server's name
    /// may come from a project's config and must be shown as that name, not as a sentence.
    pub renamed: Vec<Renamed>,
}

/// A server's name, and the one it has in a host's snippet.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
pub struct Renamed {
    pub server: String,
    pub here: String,
}

/// For the snippets that carry the token itself.
const TOKEN_NOTE: &str = "This token keeps other programs and web pages from using your \
    servers through Countersign: whoever has it can act as this agent (your rules and approvals \
    still apply), so keep it private.";

/// The environment variable `countersign-bridge` takes its agent's token from.
pub const BRIDGE_TOKEN_ENV: &str = "COUNTERSIGN_TOKEN";

/// The path of a server on the gateway (its name as one path segment).
pub fn server_path(server: &str) -> String {
    let segment: String = url::form_urlencoded::byte_serialize(server.as_bytes())
        .collect::<String>()
        // form encoding writes spaces as '+', which a path does not decode.
        .replace('+', "%20");
    format!("/mcp/{segment}")
}

/// How a host's config names a server reached through the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryShape {
    /// `{"command": <bridge>, "args": [<server>], "env": {"COUNTERSIGN_TOKEN": <token>}}`:
    /// hosts that only launch commands.
    Bridge,
    /// `{"url", "headers"}` (Cursor).
    Http,
    /// `{"type": "http", "url", "headers"}` (VS Code; what `claude mcp add --transport http`
    /// and `gemini mcp add --transport http` write).
    TypedHttp,
    /// `{"url", "http_headers"}` (Codex, written as TOML).
    CodexHttp,
}

/// One server's entry in a host's config, reaching it through the gateway at `base_url`.
pub fn gateway_entry(
    shape: EntryShape,
    base_url: &str,
    token: &str,
    bridge: &str,
    server: &str,
) -> Value {
    let url = format!("{base_url}{}", server_path(server));
    let bearer = format!("Bearer {token}");
    match shape {
        EntryShape::Bridge => {
            json!({"command": bridge, "args": [server], "env": {BRIDGE_TOKEN_ENV: token}})
        }
        EntryShape::Http => json!({"url": url, "headers": {"Authorization": bearer}}),
        EntryShape::TypedHttp => {
            json!({"type": "http", "url": url, "headers": {"Authorization": bearer}})
        }
        EntryShape::CodexHttp => json!({"url": url, "http_headers": {"Authorization": bearer}}),
    }
}

/// Where the Gemini CLI and Codex snippets keep their agents' tokens for the shell (0600),
/// sourced from `~/.profile`.
const AGENT_ENV: &str = "~/.config/countersign/agent-env";
/// The variables Gemini CLI's header and Codex's config name: one per host, so each keeps its
/// own agent's token. Never [`BRIDGE_TOKEN_ENV`]: exported to the whole login session, it would
/// be every `countersign-bridge`'s token that has none of its own (each such host would speak
/// as Codex), and every process's to read.
const GEMINI_TOKEN_ENV: &str = "COUNTERSIGN_TOKEN_GEMINI";
const CODEX_TOKEN_ENV: &str = "COUNTERSIGN_TOKEN_CODEX";

/// Shell lines that set `var` to `token` in [`AGENT_ENV`] (private before anything is written;
/// any earlier value of `var` replaced, and of `stale`, which an earlier snippet set there,
/// dropped; other variables kept), have `~/.profile` source that file (added once), and set it
/// in this shell too.
fn token_env(var: &str, token: &str, stale: Option<&str>) -> String {
    let export = shell_quote(&format!("export {var}={}", shell_quote(token)));
    let source = shell_quote(&format!("[ -f {AGENT_ENV} ] && . {AGENT_ENV}"));
    let (drop_stale, unset_stale) = match stale {
        Some(stale) => (
            format!(" -e '^export {stale}='"),
            format!("; unset {stale}"),
        ),
        None => Default::default(),
    };
    format!(
        "(umask 077; mkdir -p ~/.config/countersign && touch {AGENT_ENV} && chmod 600 {AGENT_ENV} && \
         {{ grep -v -e '^export {var}='{drop_stale} {AGENT_ENV}; printf '%s\\n' {export}; }} > {AGENT_ENV}.new && mv {AGENT_ENV}.new {AGENT_ENV})\n\
         grep -qxF {source} ~/.profile 2>/dev/null || printf '%s\\n' {source} >> ~/.profile\n\
         export {var}={}{unset_stale}",
        shell_quote(token)
    )
}

/// A server's name as the agent hosts accept it: Claude Code and Codex take only ASCII
/// letters, digits, `-` and `_` (`Invalid name my desk. Names can only contain letters,
/// numbers, hyphens, and underscores.`), so every other run of characters becomes one `-`
/// (`my desk` -> `my-desk`, `a.b` -> `a-b`), trimmed at the ends; nothing left is `server`.
/// The gateway's URL keeps the real name.
pub fn host_safe_name(server: &str) -> String {
    let mut out = String::with_capacity(server.len());
    for c in server.chars() {
        if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed = out.trim_matches('-');
    if trimmed.is_empty() {
        "server".into()
    } else {
        trimmed.into()
    }
}

/// [`host_safe_name`] for each of `servers`, in order, made distinct: a name that is already
/// safe keeps itself; a mapped one that meets a name taken gets `-2`, `-3`... (the first free
/// one, in the order of `servers`).
pub fn host_safe_names(servers: &[String]) -> Vec<String> {
    use std::collections::HashSet;
    let mut taken: HashSet<String> = servers
        .iter()
        .filter(|s| host_safe_name(s) == **s)
        .cloned()
        .collect();
    servers
        .iter()
        .map(|s| {
            let safe = host_safe_name(s);
            if safe == *s {
                return safe;
            }
            let mut name = safe.clone();
            let mut n = 2;
            while !taken.insert(name.clone()) {
                name = format!("{safe}-{n}");
                n += 1;
            }
            name
        })
        .collect()
}

/// The blocks to paste, for every server, into each host this page knows, carrying one
/// agent's `token`. Every host names a server by [`host_safe_names`]; its URL keeps the real
/// name.
pub fn client_setups(
    base_url: &str,
    token: &str,
    bridge: &str,
    servers: &[String],
) -> Vec<ClientSetup> {
    let names = host_safe_names(servers);
    let pairs: Vec<(&String, &String)> = servers.iter().zip(&names).collect();
    let url = |s: &str| format!("{base_url}{}", server_path(s));
    let bearer = format!("Bearer {token}");
    let header = shell_quote(&format!("Authorization: {bearer}"));
    let lines = |line: &dyn Fn(&str, &str) -> String| -> String {
        pairs
            .iter()
            .map(|(s, n)| line(s, n))
            .collect::<Vec<_>>()
            .join("\n")
    };
    // Removed first (quietly: it may not be there), so pasting twice is harmless; user scope
    // on purpose: the default (local) scope is this project's only.
    let claude_code = lines(&|s, n| {
        let n = shell_quote(n);
        format!(
            "claude mcp remove --scope user {n} 2>/dev/null; claude mcp add --scope user --transport http {n} {} --header {header}",
            shell_quote(&url(s))
        )
    });
    // `gemini mcp add` replaces a server of the same name in the same scope.
    // Gemini CLI and Codex read the token from the environment (Gemini expands `${VAR}` in a
    // header), so their config names only a variable: Gemini's settings file is readable by
    // every local user (0644), and so is a usual `~/.profile`.
    let gemini = format!(
        "{}\n{}",
        token_env(GEMINI_TOKEN_ENV, token, None),
        lines(&|s, n| {
            format!(
                "gemini mcp add --scope user --transport http {} {} --header {}",
                shell_quote(n),
                shell_quote(&url(s)),
                shell_quote(&format!("Authorization: Bearer ${{{GEMINI_TOKEN_ENV}}}"))
            )
        })
    );
    let codex = format!(
        "{}\n{}",
        // Codex's snippets before this one exported the bridge's variable: dropped.
        token_env(CODEX_TOKEN_ENV, token, Some(BRIDGE_TOKEN_ENV)),
        lines(&|s, n| {
            let n = shell_quote(n);
            format!(
                "codex mcp remove {n} >/dev/null 2>&1; codex mcp add {n} --url {} --bearer-token-env-var {CODEX_TOKEN_ENV}",
                shell_quote(&url(s))
            )
        })
    );
    let map = |shape: EntryShape| -> serde_json::Map<String, Value> {
        pairs
            .iter()
            .map(|(s, n)| {
                (
                    (*n).clone(),
                    gateway_entry(shape, base_url, token, bridge, s),
                )
            })
            .collect()
    };
    let desktop = json!({"mcpServers": map(EntryShape::Bridge)});
    let cursor = json!({"mcpServers": map(EntryShape::Http)});
    let vscode = json!({"servers": map(EntryShape::TypedHttp)});
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let renamed: Vec<Renamed> = pairs
        .iter()
        .filter(|(s, n)| s != n)
        .map(|(s, n)| Renamed {
            server: (*s).clone(),
            here: (*n).clone(),
        })
        .collect();
    let note = |extra: &str| Some(format!("{TOKEN_NOTE}{extra}"));
    vec![
        ClientSetup {
            client: "claudeCode".into(),
            renamed: renamed.clone(),
            title: "Claude Code".into(),
            where_to: "Run in a terminal (user scope: every project; pasting it again replaces the entries)".into(),
            format: "shell".into(),
            snippet: claude_code,
            note: note(""),
        },
        ClientSetup {
            client: "claudeDesktop".into(),
            renamed: renamed.clone(),
            title: "Claude Desktop".into(),
            where_to: "claude_desktop_config.json, merged into \"mcpServers\" (uses countersign-bridge, which sends the token)".into(),
            format: "json".into(),
            snippet: pretty(&desktop),
            note: note(""),
        },
        ClientSetup {
            client: "cursor".into(),
            renamed: renamed.clone(),
            title: "Cursor".into(),
            where_to: "~/.cursor/mcp.json (or .cursor/mcp.json in a project), merged into \"mcpServers\"".into(),
            format: "json".into(),
            snippet: pretty(&cursor),
            note: note(""),
        },
        ClientSetup {
            client: "vscode".into(),
            renamed: renamed.clone(),
            title: "VS Code".into(),
            where_to: ".vscode/mcp.json in a workspace (or the user mcp.json), merged into \"servers\"".into(),
            format: "json".into(),
            snippet: pretty(&vscode),
            note: note(""),
        },
        ClientSetup {
            client: "gemini".into(),
            renamed: renamed.clone(),
            title: "Gemini CLI".into(),
            where_to: "Run in a terminal (user scope: ~/.gemini/settings.json, every project; pasting it again replaces the entries)".into(),
            format: "shell".into(),
            snippet: gemini,
            note: note(
                " The token goes into ~/.config/countersign/agent-env (readable only by you), \
                 which your ~/.profile sources, as COUNTERSIGN_TOKEN_GEMINI; Gemini CLI's \
                 settings name only the variable. --scope user on purpose: the default \
                 (project) scope writes into the project's .gemini/settings.json, a file that \
                 gets committed. Start Gemini CLI from a shell that has the variable (a new \
                 login, or this terminal).",
            ),
        },
        ClientSetup {
            client: "codex".into(),
            renamed: renamed.clone(),
            title: "Codex".into(),
            where_to: "Run in a terminal (~/.codex/config.toml, every project; pasting it again replaces the entries)".into(),
            format: "shell".into(),
            snippet: codex,
            note: note(
                " The token goes into ~/.config/countersign/agent-env (readable only by you), \
                 which your ~/.profile sources, as COUNTERSIGN_TOKEN_CODEX; Codex's config names only \
                 the variable, so the token is not in Codex's config file. Start Codex from a \
                 shell that has it (a new login, or this terminal).",
            ),
        },
    ]
}

/// POSIX single quotes: the server name and URL are the person's own, but may hold spaces.
pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:@%+=,".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_gets_every_server_with_the_token_or_the_bridge() {
        let setups = client_setups(
            "http://127.0.0.1:47717",
            "tok",
            "/usr/bin/countersign-bridge",
            &["demo".into(), "my desk".into()],
        );
        let by = |c: &str| {
            setups
                .iter()
                .find(|s| s.client == c)
                .unwrap()
                .snippet
                .clone()
        };
        assert_eq!(
            by("claudeCode").lines().next().unwrap(),
            "claude mcp remove --scope user demo 2>/dev/null; claude mcp add --scope user --transport http demo http://127.0.0.1:47717/mcp/demo --header 'Authorization: Bearer tok'"
        );
        assert!(by("claudeCode").contains(" my-desk http://127.0.0.1:47717/mcp/my%20desk "));
        let desktop: Value = serde_json::from_str(&by("claudeDesktop")).unwrap();
        assert_eq!(
            desktop["mcpServers"]["my-desk"],
            json!({
                "command": "/usr/bin/countersign-bridge",
                "args": ["my desk"],
                "env": {"COUNTERSIGN_TOKEN": "tok"},
            })
        );
        let cursor: Value = serde_json::from_str(&by("cursor")).unwrap();
        assert_eq!(
            cursor["mcpServers"]["demo"]["headers"]["Authorization"],
            "Bearer tok"
        );
        let vscode: Value = serde_json::from_str(&by("vscode")).unwrap();
        assert_eq!(vscode["servers"]["demo"]["type"], "http");
        assert_eq!(
            vscode["servers"]["demo"]["url"],
            "http://127.0.0.1:47717/mcp/demo"
        );
    }

    #[test]
    fn snippets_with_the_token_say_what_it_protects() {
        let setups = client_setups("http://127.0.0.1:1", "tok", "bridge", &["demo".into()]);
        for setup in &setups {
            assert!(setup.snippet.contains("tok"), "{}", setup.client);
            let note = setup.note.as_deref().unwrap_or_default();
            assert!(note.contains("keep it private"), "{}: {note}", setup.client);
        }
    }

    #[test]
    fn quotes_what_a_shell_would_split_or_expand() {
        assert_eq!(shell_quote("demo"), "demo");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote("$(rm)"), "'$(rm)'");
    }
    fn names(list: &[&str]) -> Vec<String> {
        host_safe_names(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn connect_names_are_mapped_to_what_the_hosts_accept() {
        assert_eq!(host_safe_name("demo"), "demo");
        assert_eq!(host_safe_name("my_desk-2"), "my_desk-2");
        assert_eq!(host_safe_name("my desk"), "my-desk");
        assert_eq!(host_safe_name("a.b"), "a-b");
        assert_eq!(host_safe_name("a . b"), "a-b", "one dash for a run");
        assert_eq!(host_safe_name(" x. "), "x", "trimmed");
        assert_eq!(host_safe_name("café"), "caf");
        assert_eq!(host_safe_name("büro tickets"), "b-ro-tickets");
        assert_eq!(host_safe_name("日本"), "server");
        assert_eq!(host_safe_name("..."), "server");
        for name in ["my desk", "a.b", "日本", "$(rm -rf)", "é-é"] {
            let safe = host_safe_name(name);
            assert!(
                !safe.is_empty()
                    && safe
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "{name} -> {safe}"
            );
        }
    }

    #[test]
    fn connect_name_collisions_are_resolved_the_same_way_every_time() {
        // A name already safe keeps itself, whatever comes first.
        assert_eq!(
            names(&["my desk", "my-desk", "my.desk", "my  desk"]),
            ["my-desk-2", "my-desk", "my-desk-3", "my-desk-4"]
        );
        assert_eq!(names(&["a.b", "a b"]), ["a-b", "a-b-2"]);
        // A suffixed name that is itself a server's name is skipped.
        assert_eq!(
            names(&["a.b", "a-b", "a b", "a-b-2"]),
            ["a-b-3", "a-b", "a-b-4", "a-b-2"]
        );
        assert_eq!(
            names(&["日本", "中文", "server"]),
            ["server-2", "server-3", "server"]
        );
        assert_eq!(names(&["x y", "x.y"]), names(&["x y", "x.y"]));
    }

    fn setups_for(servers: &[&str]) -> Vec<ClientSetup> {
        client_setups(
            "http://127.0.0.1:47717",
            "tok",
            "/usr/bin/countersign-bridge",
            &servers.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    }

    #[test]
    fn connect_every_snippet_uses_the_mapped_name_and_the_real_path() {
        let setups = setups_for(&["my desk", "a.b", "demo"]);
        assert_eq!(
            setups.iter().map(|s| s.client.as_str()).collect::<Vec<_>>(),
            [
                "claudeCode",
                "claudeDesktop",
                "cursor",
                "vscode",
                "gemini",
                "codex"
            ]
        );
        for setup in &setups {
            let (client, snippet) = (&setup.client, &setup.snippet);
            if client == "claudeDesktop" {
                // The bridge reaches the server by its real name, in its args.
                let v: Value = serde_json::from_str(snippet).unwrap();
                assert_eq!(v["mcpServers"]["my-desk"]["args"], json!(["my desk"]));
                assert_eq!(v["mcpServers"]["a-b"]["args"], json!(["a.b"]));
            } else {
                assert!(!snippet.contains("my desk"), "{client}: {snippet}");
                assert!(snippet.contains("/mcp/my%20desk"), "{client}: {snippet}");
                assert!(snippet.contains("/mcp/a.b"), "{client}: {snippet}");
            }
            assert!(snippet.contains("my-desk"), "{client}: {snippet}");
            assert!(snippet.contains("a-b"), "{client}: {snippet}");
            let renamed: Vec<(&str, &str)> = setup
                .renamed
                .iter()
                .map(|r| (r.server.as_str(), r.here.as_str()))
                .collect();
            assert_eq!(
                renamed,
                [("my desk", "my-desk"), ("a.b", "a-b")],
                "{client}"
            );
            assert!(
                !setup.note.as_deref().unwrap().contains("my desk"),
                "{client}"
            );
            if setup.format == "json" {
                let v: Value = serde_json::from_str(snippet).unwrap();
                let servers = v.as_object().unwrap().values().next().unwrap();
                let keys: Vec<&String> = servers.as_object().unwrap().keys().collect();
                assert_eq!(keys, ["my-desk", "a-b", "demo"], "{client}");
                if client != "claudeDesktop" {
                    assert_eq!(
                        servers["my-desk"]["url"],
                        "http://127.0.0.1:47717/mcp/my%20desk"
                    );
                }
            }
        }
        // No mapping: nothing said about it.
        for setup in setups_for(&["demo"]) {
            assert!(setup.renamed.is_empty(), "{}", setup.client);
        }
    }

    #[test]
    fn connect_claude_code_removes_before_adding_in_the_user_scope() {
        let setups = setups_for(&["demo", "my desk"]);
        let code = setups.iter().find(|s| s.client == "claudeCode").unwrap();
        assert_eq!(code.snippet.lines().count(), 2);
        for (line, name) in code.snippet.lines().zip(["demo", "my-desk"]) {
            let (remove, add) = line.split_once("; ").unwrap();
            assert_eq!(
                remove,
                format!("claude mcp remove --scope user {name} 2>/dev/null")
            );
            let start = format!(
                "claude mcp add --scope user --transport http {name} http://127.0.0.1:47717/mcp/"
            );
            assert!(add.starts_with(&start), "{add}");
            assert!(
                add.ends_with(" --header 'Authorization: Bearer tok'"),
                "{add}"
            );
        }
        assert!(code.where_to.contains("user scope"), "{}", code.where_to);
    }

    #[test]
    fn connect_gemini_is_user_scoped_and_says_why() {
        let setups = setups_for(&["demo", "my desk"]);
        let gemini = setups.iter().find(|s| s.client == "gemini").unwrap();
        assert_eq!(gemini.format, "shell");
        let lines: Vec<&str> = gemini.snippet.lines().collect();
        assert_eq!(
            lines[2..],
            [
                "export COUNTERSIGN_TOKEN_GEMINI=tok",
                "gemini mcp add --scope user --transport http demo http://127.0.0.1:47717/mcp/demo --header 'Authorization: Bearer ${COUNTERSIGN_TOKEN_GEMINI}'",
                "gemini mcp add --scope user --transport http my-desk http://127.0.0.1:47717/mcp/my%20desk --header 'Authorization: Bearer ${COUNTERSIGN_TOKEN_GEMINI}'",
            ]
        );
        // The token is only in the lines that keep it in the private env file.
        assert!(lines[3..].iter().all(|l| !l.contains("tok'")));
        let note = gemini.note.as_deref().unwrap();
        assert!(note.contains("default (project) scope"), "{note}");
        assert!(note.contains("gets committed"), "{note}");
        assert!(gemini.where_to.contains("~/.gemini/settings.json"));
    }

    #[test]
    fn connect_codex_names_the_variable_and_the_profile_holds_the_token() {
        let setups = setups_for(&["demo", "a.b"]);
        let codex = setups.iter().find(|s| s.client == "codex").unwrap();
        assert_eq!(codex.format, "shell");
        let lines: Vec<&str> = codex.snippet.lines().collect();
        assert_eq!(
            lines,
            [
                r"(umask 077; mkdir -p ~/.config/countersign && touch ~/.config/countersign/agent-env && chmod 600 ~/.config/countersign/agent-env && { grep -v -e '^export COUNTERSIGN_TOKEN_CODEX=' -e '^export COUNTERSIGN_TOKEN=' ~/.config/countersign/agent-env; printf '%s\n' 'export COUNTERSIGN_TOKEN_CODEX=tok'; } > ~/.config/countersign/agent-env.new && mv ~/.config/countersign/agent-env.new ~/.config/countersign/agent-env)",
                r"grep -qxF '[ -f ~/.config/countersign/agent-env ] && . ~/.config/countersign/agent-env' ~/.profile 2>/dev/null || printf '%s\n' '[ -f ~/.config/countersign/agent-env ] && . ~/.config/countersign/agent-env' >> ~/.profile",
                "export COUNTERSIGN_TOKEN_CODEX=tok; unset COUNTERSIGN_TOKEN",
                "codex mcp remove demo >/dev/null 2>&1; codex mcp add demo --url http://127.0.0.1:47717/mcp/demo --bearer-token-env-var COUNTERSIGN_TOKEN_CODEX",
                "codex mcp remove a-b >/dev/null 2>&1; codex mcp add a-b --url http://127.0.0.1:47717/mcp/a.b --bearer-token-env-var COUNTERSIGN_TOKEN_CODEX",
            ]
        );
        // `--transport` is an error for `codex mcp add`; the token is only in the env lines.
        assert!(!codex.snippet.contains("--transport"));
        assert!(lines[3..].iter().all(|l| !l.contains("tok ")));
        assert!(
            codex
                .note
                .as_deref()
                .unwrap()
                .contains("not in Codex's config")
        );
    }

    /// The Codex snippet's profile lines, run by `sh` twice in a throwaway home, with a token
    /// that needs quoting: one line in the profile, and it gives back the token exactly.
    #[test]
    fn connect_codex_profile_line_is_added_once_and_quoted() {
        let token = "t'k $x \"y\"";
        let setups = client_setups("http://127.0.0.1:1", token, "bridge", &["demo".into()]);
        let codex = setups.iter().find(|s| s.client == "codex").unwrap();
        let profile_lines: Vec<&str> = codex.snippet.lines().take(3).collect();
        let home = std::env::temp_dir().join(format!("countersign-connect-{}", std::process::id()));
        std::fs::create_dir_all(&home).unwrap();
        let run = |script: &str| {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(script)
                .env("HOME", &home)
                .output()
                .unwrap();
            assert!(out.status.success(), "{script}: {out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        // Another host's variable in the file stays; this one's is replaced, not added again,
        // and the bridge's, which an earlier Codex snippet exported, is gone.
        std::fs::create_dir_all(home.join(".config/countersign")).unwrap();
        std::fs::write(
            home.join(".config/countersign/agent-env"),
            "export COUNTERSIGN_TOKEN_GEMINI=g\nexport COUNTERSIGN_TOKEN=old\nexport COUNTERSIGN_TOKEN_CODEX=older\n",
        )
        .unwrap();
        let script = profile_lines.join("\n");
        run(&script);
        run(&script);
        let kept = std::fs::read_to_string(home.join(".config/countersign/agent-env")).unwrap();
        assert_eq!(kept.lines().count(), 2, "{kept}");
        assert!(
            kept.starts_with("export COUNTERSIGN_TOKEN_GEMINI=g\n"),
            "{kept}"
        );
        let profile = std::fs::read_to_string(home.join(".profile")).unwrap();
        assert_eq!(profile.lines().count(), 1, "{profile}");
        // Only the person can read the token; the profile only names the file.
        let env = home.join(".config/countersign/agent-env");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&env).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(!profile.contains("t'k"), "{profile}");
        assert_eq!(
            run(". ~/.profile; printf %s \"$COUNTERSIGN_TOKEN_CODEX\""),
            token
        );
        assert_eq!(
            run(". ~/.profile; printf %s \"${COUNTERSIGN_TOKEN-unset}\""),
            "unset"
        );
        assert_eq!(
            run(&format!(
                "export COUNTERSIGN_TOKEN=old; {}; printf %s \"$COUNTERSIGN_TOKEN_CODEX ${{COUNTERSIGN_TOKEN-unset}}\"",
                profile_lines[2]
            )),
            format!("{token} unset")
        );
        std::fs::remove_dir_all(&home).unwrap();
    }
}
