//! Reading a host's config file: its server entries, each with where its value sits in the
//! text (so a rewrite replaces just that value and keeps the rest of the file, comments
//! included), and Countersign's own config, for comparison and for the import.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{ClientError, ClientKind, Places, jsonc};
use crate::config::ServerConfig;

/// One server entry of a host's file.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub name: String,
    pub value: Value,
    /// The value's bytes in the file's text.
    pub span: Range<usize>,
    /// Claude Code: the project folder a per-project (`local` scope) server belongs to.
    pub project: Option<String>,
    /// The host's own settings that stay on the entry when it is routed (its tool filters:
    /// [`super::kept_when_routed`]); `value` is in Countersign's words, without them.
    pub kept_when_routed: serde_json::Map<String, Value>,
}

/// A host's config file as read.
#[derive(Debug, Clone)]
pub(crate) struct ClientFile {
    pub path: PathBuf,
    pub text: String,
    /// In file order (Claude Code's per-project servers after the user-wide ones). A name given
    /// twice in one list appears twice (the hosts use the last one).
    pub entries: Vec<Entry>,
    /// VS Code: the file declares `inputs` (prompted values).
    pub has_inputs: bool,
    /// Gemini CLI: project settings files that could not be read, and why.
    pub unread: Vec<String>,
}

impl Entry {
    /// The host's entry `value` as read, at `span` in its file.
    fn read(
        client: ClientKind,
        name: String,
        value: Value,
        span: Range<usize>,
        project: Option<String>,
    ) -> Entry {
        let entry = Entry {
            name,
            kept_when_routed: super::kept_when_routed(client, &value),
            value: super::in_our_words(client, value),
            span,
            project: None,
        };
        match project {
            Some(folder) => entry.in_project(folder),
            None => entry,
        }
    }

    /// The entry as a server of the project `folder`. The host starts a project's command in
    /// that folder, so Countersign must too: without a `cwd` it would start it in its own
    /// directory, where `.` or `./bin/mcp` name something else. A relative `cwd` is the
    /// project's subfolder. And with the folder in its transport, two projects' identical
    /// entries are two servers (`same_server`), each routed to its own.
    fn in_project(mut self, folder: String) -> Entry {
        if let Value::Object(fields) = &mut self.value
            // A URL runs in no folder.
            && fields.contains_key("command")
        {
            let cwd = match fields.get("cwd") {
                None | Some(Value::Null) => Some(folder.clone()),
                Some(Value::String(dir)) if Path::new(dir).is_relative() => {
                    Some(Path::new(&folder).join(dir).to_string_lossy().into_owned())
                }
                // Absolute, or not a path (which Countersign then declines to load).
                Some(_) => None,
            };
            if let Some(cwd) = cwd {
                fields.insert("cwd".into(), cwd.into());
            }
        }
        self.project = Some(folder);
        self
    }

    /// Its name, or for a per-project server `<name>@<project folder>`: unique in a file.
    pub fn key(&self) -> String {
        match &self.project {
            Some(folder) => format!("{}@{folder}", self.name),
            None => self.name.clone(),
        }
    }
}

impl ClientFile {
    /// The entries as the host sees them: for a name given twice, the last.
    pub fn effective(&self) -> Vec<&Entry> {
        let last: std::collections::HashMap<(&str, Option<&str>), usize> = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| ((e.name.as_str(), e.project.as_deref()), i))
            .collect();
        self.entries
            .iter()
            .enumerate()
            .filter(|(i, e)| last[&(e.name.as_str(), e.project.as_deref())] == *i)
            .map(|(_, e)| e)
            .collect()
    }
}

pub(crate) fn io_error(path: &str, e: &std::io::Error) -> ClientError {
    if e.kind() == std::io::ErrorKind::NotFound {
        ClientError::NotFound { path: path.into() }
    } else {
        ClientError::Io {
            path: path.into(),
            message: e.to_string(),
        }
    }
}

/// An agent host's config file is read up to this size: the largest real ones (Claude Code's
/// `~/.claude.json`, with its history) are a few MiB.
const MAX_FILE: u64 = 32 * 1024 * 1024;

/// The bytes of a host's file: a regular file (a symbolic link to one is followed) of at most
/// `MAX_FILE`. A repository's settings file can be a link to `/dev/zero` or a FIFO, which
/// would otherwise be read without end.
pub(crate) fn read_host_file(path: &Path) -> std::io::Result<Vec<u8>> {
    read_file(path, libc::O_NONBLOCK)
}

/// A file of a project folder (`folder`/`relative`), as [`read_host_file`] reads one, but
/// never through a symbolic link, in its name or in the folders between: a cloned repository
/// decides what is in it, and its `.gemini/settings.json` linked to the person's own Cursor
/// file would hand the person's own entries (their tokens in `env`) to a server run in the
/// repository's folder.
pub(crate) fn read_project_file(folder: &Path, relative: &Path) -> std::io::Result<Vec<u8>> {
    let mut at = folder.to_path_buf();
    let parts: Vec<_> = relative.components().collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push(part);
        if std::fs::symlink_metadata(&at)?.file_type().is_symlink() {
            return Err(std::io::Error::other(format!(
                "{} is a link; a project's settings are read only from the project itself",
                at.display()
            )));
        }
    }
    read_file(&folder.join(relative), libc::O_NONBLOCK | libc::O_NOFOLLOW).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            std::io::Error::other(
                "it is a link; a project's settings are read only from the project itself",
            )
        } else {
            e
        }
    })
}

fn read_file(path: &Path, flags: libc::c_int) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking, so opening a FIFO does not wait for a writer; then judged by what was
    // opened, not by a look at the path before.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(std::io::Error::other(format!(
            "larger than {} MiB",
            MAX_FILE / 1024 / 1024
        )));
    }
    Ok(bytes)
}

/// Reads `client`'s file. Missing: `NotFound`; not JSON (with comments): located `Syntax`.
pub(crate) fn client_file(places: &Places, client: ClientKind) -> Result<ClientFile, ClientError> {
    let path = places.file(client);
    let shown = places.display(&path);
    let bytes = read_host_file(&path).map_err(|e| io_error(&shown, &e))?;
    let mut file = parse(client, path, &shown, bytes)?;
    if client == ClientKind::Gemini {
        gemini_projects(places, &mut file);
    }
    Ok(file)
}

/// Gemini CLI's project settings: `.gemini/settings.json` in each folder Gemini has run in (it
/// lists them in `~/.gemini/projects.json`). Their servers are added with their project, for
/// import only (span empty: a project file is not rewritten, see `rewrite.rs`); a project file
/// that cannot be read is named in `unread`.
fn gemini_projects(places: &Places, file: &mut ClientFile) {
    /// Project folders read, at most.
    const MAX_PROJECTS: usize = 64;
    let listed = places.home.join(".gemini").join("projects.json");
    let Some(text) = read_host_file(&listed)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
    else {
        return;
    };
    let folders: Vec<String> = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| {
            v.get("projects")?
                .as_object()
                .map(|p| p.keys().cloned().collect())
        })
        .unwrap_or_default();
    let distrusted = distrusted_by_gemini(places);
    for folder in folders.into_iter().take(MAX_PROJECTS) {
        let relative = Path::new(".gemini").join("settings.json");
        let path = Path::new(&folder).join(&relative);
        // One the person told Gemini not to trust: Gemini does not load it either.
        if !Path::new(&folder).is_absolute() || path == file.path || distrusted.contains(&folder) {
            continue;
        }
        let shown = places.display(&path);
        let read = read_project_file(Path::new(&folder), &relative)
            .map_err(|e| io_error(&shown, &e))
            .and_then(|bytes| parse(ClientKind::Gemini, path.clone(), &shown, bytes));
        match read {
            Ok(project) => file
                .entries
                .extend(project.entries.into_iter().map(|e| Entry {
                    span: 0..0,
                    // Gemini runs in the project's folder, and starts its servers there.
                    ..e.in_project(folder.clone())
                })),
            Err(ClientError::NotFound { .. }) => {}
            Err(e) => file.unread.push(e.to_string()),
        }
    }
}

/// The folders the person told Gemini CLI not to trust (`DO_NOT_TRUST` in
/// `~/.gemini/trustedFolders.json`).
fn distrusted_by_gemini(places: &Places) -> Vec<String> {
    let path = places.home.join(".gemini").join("trustedFolders.json");
    read_host_file(&path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| {
            v.as_object().map(|rules| {
                rules
                    .iter()
                    .filter(|(_, rule)| rule.as_str() == Some("DO_NOT_TRUST"))
                    .map(|(folder, _)| folder.clone())
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// `bytes` as `client`'s file at `path` (`shown` names it in errors).
pub(crate) fn parse(
    client: ClientKind,
    path: PathBuf,
    shown: &str,
    bytes: Vec<u8>,
) -> Result<ClientFile, ClientError> {
    let shown = shown.to_owned();
    let text = String::from_utf8(bytes).map_err(|e| {
        let (line, column) = position(
            &String::from_utf8_lossy(e.as_bytes()),
            e.utf8_error().valid_up_to(),
        );
        ClientError::Syntax {
            path: shown.clone(),
            line,
            column,
            message: "not UTF-8 text".into(),
        }
    })?;
    if client == ClientKind::Codex {
        let entries = super::codex::entries(&text).map_err(|(offset, message)| {
            let (line, column) = position(&text, offset);
            ClientError::Syntax {
                path: shown.clone(),
                line,
                column,
                message,
            }
        })?;
        return Ok(ClientFile {
            path,
            entries: entries
                .into_iter()
                // Rewritten by table (`codex::rewrite`), not by span.
                .map(|(name, value)| Entry::read(client, name, value, 0..0, None))
                .collect(),
            text,
            has_inputs: false,
            unread: Vec::new(),
        });
    }
    let stripped = jsonc::strip(&text);
    let syntax = |offset: usize, message: String| {
        let (line, column) = position(&text, offset);
        ClientError::Syntax {
            path: shown.clone(),
            line,
            column,
            message,
        }
    };
    let top = pairs(&stripped).map_err(|e| {
        syntax(
            offset_of(&stripped, e.line(), e.column()),
            strip_position(&e),
        )
    })?;
    let key = client.servers_key();
    let mut entries = Vec::new();
    let mut project_entries = Vec::new();
    let mut has_inputs = false;
    for (name, raw) in &top {
        let start = offset_in(&stripped, raw);
        if name == key {
            // A later key of the same name wins, as in the hosts' own parsers.
            let servers = pairs(raw.get()).map_err(|e| {
                syntax(
                    start + offset_of(raw.get(), e.line(), e.column()),
                    format!("\"{key}\": {}", strip_position(&e)),
                )
            })?;
            entries = servers
                .into_iter()
                .map(|(name, value)| {
                    let at = offset_in(&stripped, value);
                    Entry::read(
                        client,
                        name,
                        serde_json::from_str(value.get()).unwrap_or(Value::Null),
                        at..at + value.get().len(),
                        None,
                    )
                })
                .collect();
        } else if client == ClientKind::ClaudeCode && name == "projects" {
            // `claude mcp add`'s default (`local`) scope: `projects.<folder>.mcpServers`. Claude
            // Code's own bookkeeping; what does not parse is not offered.
            project_entries.clear();
            for (folder, project) in pairs(raw.get()).unwrap_or_default() {
                for (key, servers) in pairs(project.get()).unwrap_or_default() {
                    if key != "mcpServers" {
                        continue;
                    }
                    project_entries.retain(|e: &Entry| e.project.as_deref() != Some(&folder));
                    for (name, value) in pairs(servers.get()).unwrap_or_default() {
                        let at = offset_in(&stripped, value);
                        project_entries.push(Entry::read(
                            client,
                            name,
                            serde_json::from_str(value.get()).unwrap_or(Value::Null),
                            at..at + value.get().len(),
                            Some(folder.clone()),
                        ));
                    }
                }
            }
        } else if client == ClientKind::VsCode && name == "inputs" {
            has_inputs = serde_json::from_str::<Value>(raw.get())
                .ok()
                .and_then(|v| v.as_array().map(|a| !a.is_empty()))
                .unwrap_or(false);
        }
    }
    entries.extend(project_entries);
    Ok(ClientFile {
        path,
        text,
        entries,
        has_inputs,
        unread: Vec::new(),
    })
}

/// Countersign's own config as it is on disk now (not as the app loaded it at start: an
/// import since then is in here).
pub(crate) struct OurConfig {
    /// `None`: the file does not exist yet.
    pub text: Option<String>,
    /// The whole file, in its order.
    pub top: serde_json::Map<String, Value>,
    /// Every name under `mcpServers`, loadable or not.
    pub names: Vec<String>,
    /// The entries that load (and are not disabled).
    pub servers: Vec<ServerConfig>,
}

impl OurConfig {
    pub fn read(path: &Path, places: &Places) -> Result<OurConfig, ClientError> {
        let shown = places.display(path);
        let text = match std::fs::read_to_string(path) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_error(&shown, &e)),
        };
        let Some(text) = text else {
            return Ok(OurConfig {
                text: None,
                top: serde_json::Map::new(),
                names: Vec::new(),
                servers: Vec::new(),
            });
        };
        let top: serde_json::Map<String, Value> =
            serde_json::from_str(&text).map_err(|e| ClientError::Syntax {
                path: shown.clone(),
                line: e.line(),
                column: e.column(),
                message: format!("Countersign's config: {}", strip_position(&e)),
            })?;
        let names = match top.get("mcpServers") {
            None => Vec::new(),
            Some(Value::Object(servers)) => servers.keys().cloned().collect(),
            Some(_) => {
                return Err(ClientError::Refused(format!(
                    "{shown}: \"mcpServers\" is not an object; fix Countersign's config first"
                )));
            }
        };
        let servers = crate::config::parse(path, &text).servers;
        Ok(OurConfig {
            text: Some(text),
            top,
            names,
            servers,
        })
    }
}

/// An object's members in order, values as raw slices of `text` (duplicates kept).
fn pairs(text: &str) -> Result<Vec<(String, &RawValue)>, serde_json::Error> {
    struct Pairs<'a>(Vec<(String, &'a RawValue)>);
    struct PairsVisitor;
    impl<'de> Visitor<'de> for PairsVisitor {
        type Value = Pairs<'de>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some((k, v)) = map.next_entry::<String, &'de RawValue>()? {
                out.push((k, v));
            }
            Ok(Pairs(out))
        }
    }
    impl<'de> serde::Deserialize<'de> for Pairs<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_map(PairsVisitor)
        }
    }
    serde_json::from_str::<Pairs>(text).map(|p| p.0)
}

/// Where a raw slice of `text` starts in it.
fn offset_in(text: &str, raw: &RawValue) -> usize {
    (raw.get().as_ptr() as usize).saturating_sub(text.as_ptr() as usize)
}

/// Byte offset of serde_json's 1-based line and (byte) column.
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    (line_start + column.saturating_sub(1)).min(text.len())
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn position(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// serde_json's message without its " at line L column C" (we give our own).
pub(crate) fn strip_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::setup;
    use super::*;
    use serde_json::json;

    /// A host's file (or a repository's project settings file) that is a link to `/dev/zero`,
    /// or larger than any real one, is refused with a reason instead of read without end.
    #[test]
    fn a_host_file_that_never_ends_is_refused() {
        let s = setup("endless", "{}");
        let path = s.clients.places.file(ClientKind::Cursor);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        let refused = client_file(&s.clients.places, ClientKind::Cursor).unwrap_err();
        assert!(
            refused.to_string().contains("not a regular file"),
            "{refused}"
        );
        std::fs::remove_file(&path).unwrap();
        let big = std::fs::File::create(&path).unwrap();
        big.set_len(MAX_FILE + 1).unwrap();
        let refused = client_file(&s.clients.places, ClientKind::Cursor).unwrap_err();
        assert!(refused.to_string().contains("larger than"), "{refused}");
    }

    /// The last of the entries given twice counts, in one pass (a file with many entries
    /// is not read in quadratic time).
    #[test]
    fn the_last_entry_of_a_name_counts() {
        let s = setup("effective", "{}");
        let many: Vec<String> = (0..50_000)
            .map(|i| format!("\"s{i}\": {{\"command\": \"c\"}}"))
            .collect();
        s.client_file(
            ClientKind::Cursor,
            &format!(
                "{{\"mcpServers\": {{{}, \"s7\": {{\"command\": \"last\"}}}}}}",
                many.join(",")
            ),
        );
        let file = client_file(&s.clients.places, ClientKind::Cursor).unwrap();
        let effective = file.effective();
        assert_eq!(effective.len(), 50_000);
        let s7: Vec<_> = effective.iter().filter(|e| e.name == "s7").collect();
        assert_eq!(s7.len(), 1);
        assert_eq!(s7[0].value["command"], "last");
    }

    #[test]
    fn reads_each_host_s_format() {
        let s = setup("formats", "{}");
        s.client_file(
            ClientKind::ClaudeDesktop,
            r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]}}, "globalShortcut": ""}"#,
        );
        s.client_file(
            ClientKind::ClaudeCode,
            r#"{"numStartups": 3, "mcpServers": {"gh": {"type": "http", "url": "https://api.example.com/mcp"}},
                "projects": {"/src/a": {"mcpServers": {"x": {"command": "x"}, "y": {"command": "y"}}}, "/src/b": {}}}"#,
        );
        s.client_file(
            ClientKind::Cursor,
            r#"{"mcpServers": {"linear": {"url": "https://mcp.linear.app/mcp", "headers": {"X": "1"}}}}"#,
        );
        s.client_file(
            ClientKind::VsCode,
            "{\n  // my servers\n  \"inputs\": [{\"id\": \"tok\", \"type\": \"promptString\", \"password\": true}],\n  \"servers\": {\n    \"desk\": {\"type\": \"stdio\", \"command\": \"desk\", \"env\": {\"T\": \"${input:tok}\"},},\n  },\n}\n",
        );
        let places = &s.clients.places;
        let desktop = client_file(places, ClientKind::ClaudeDesktop).unwrap();
        assert_eq!(desktop.entries.len(), 1);
        assert_eq!(desktop.entries[0].name, "fs");
        assert_eq!(desktop.entries[0].value["args"][2], "/tmp");

        let code = client_file(places, ClientKind::ClaudeCode).unwrap();
        assert_eq!(code.entries[0].name, "gh");
        // The per-project servers after the user-wide ones, each with its folder and its span.
        let keys: Vec<String> = code.entries.iter().map(Entry::key).collect();
        assert_eq!(keys, ["gh", "x@/src/a", "y@/src/a"]);
        assert_eq!(
            &code.text[code.entries[2].span.clone()],
            r#"{"command": "y"}"#
        );
        assert_eq!(code.entries[1].project.as_deref(), Some("/src/a"));

        let cursor = client_file(places, ClientKind::Cursor).unwrap();
        assert_eq!(cursor.entries[0].value["headers"], json!({"X": "1"}));

        let vscode = client_file(places, ClientKind::VsCode).unwrap();
        assert!(vscode.has_inputs);
        let desk = &vscode.entries[0];
        assert_eq!(desk.name, "desk");
        assert_eq!(desk.value["env"]["T"], "${input:tok}");
        // The span is the value's own text in the original file (trailing comma and all).
        assert_eq!(
            &vscode.text[desk.span.clone()],
            "{\"type\": \"stdio\", \"command\": \"desk\", \"env\": {\"T\": \"${input:tok}\"},}"
        );
    }

    #[test]
    fn missing_broken_and_odd_files_are_errors_not_panics() {
        let s = setup("broken", "{}");
        let places = &s.clients.places;
        match client_file(places, ClientKind::Cursor) {
            Err(e @ ClientError::NotFound { .. }) => {
                assert_eq!(e.to_string(), "~/.cursor/mcp.json: not found")
            }
            other => panic!("{other:?}"),
        }
        s.client_file(
            ClientKind::Cursor,
            "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n    \"b\": {}\n  }\n}\n",
        );
        match client_file(places, ClientKind::Cursor) {
            Err(
                e @ ClientError::Syntax {
                    line: 4, column: 5, ..
                },
            ) => assert!(
                e.to_string()
                    .starts_with("~/.cursor/mcp.json:4:5: expected `,` or `}`"),
                "{e}"
            ),
            other => panic!("{other:?}"),
        }
        s.client_file(ClientKind::Cursor, "{\"mcpServers\": [1, 2]}");
        match client_file(places, ClientKind::Cursor) {
            Err(e @ ClientError::Syntax { line: 1, .. }) => {
                assert!(
                    e.to_string().contains("\"mcpServers\": invalid type"),
                    "{e}"
                )
            }
            other => panic!("{other:?}"),
        }
        for odd in [
            "",
            "[]",
            "null",
            "\"x\"",
            "{\"mcpServers\": null}",
            "{\"a\":",
            "\u{0}",
        ] {
            s.client_file(ClientKind::Cursor, odd);
            let _ = client_file(places, ClientKind::Cursor);
        }
        // Entries that are not objects are read; what they are is judged later.
        s.client_file(
            ClientKind::Cursor,
            "{\"mcpServers\": {\"n\": 1, \"s\": \"x\"}}",
        );
        assert_eq!(
            client_file(places, ClientKind::Cursor)
                .unwrap()
                .entries
                .len(),
            2
        );
        std::fs::write(places.file(ClientKind::Cursor), b"{\"a\": \"\xff\"}").unwrap();
        assert!(matches!(
            client_file(places, ClientKind::Cursor),
            Err(ClientError::Syntax { message, .. }) if message == "not UTF-8 text"
        ));
    }

    #[test]
    fn an_error_in_a_commented_vs_code_file_points_into_the_file_as_written() {
        let s = setup("broken-jsonc", "{}");
        s.client_file(
            ClientKind::VsCode,
            "{\n  // ✓ servers, with comments\n  \"servers\": {\n    /* ✓✓ */ \"a\": {\"command\": x},\n  },\n}\n",
        );
        match client_file(&s.clients.places, ClientKind::VsCode) {
            Err(e @ ClientError::Syntax { line: 4, .. }) => assert!(
                e.to_string()
                    .starts_with("~/.config/Code/User/mcp.json:4:31: expected value"),
                "{e}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_name_given_twice_counts_once_the_last() {
        let s = setup("dups", "{}");
        s.client_file(
            ClientKind::Cursor,
            r#"{"mcpServers": {"a": {"command": "one"}, "b": {"command": "b"}, "a": {"command": "two"}}}"#,
        );
        let file = client_file(&s.clients.places, ClientKind::Cursor).unwrap();
        let names: Vec<_> = file
            .effective()
            .iter()
            .map(|e| (e.name.clone(), e.value["command"].clone()))
            .collect();
        assert_eq!(
            names,
            [("b".into(), json!("b")), ("a".into(), json!("two"))]
        );
    }
}
