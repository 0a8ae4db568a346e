//! "Test the connection" on the Connect page: a host's own command-line tool asked about its MCP
//! servers (`claude mcp list`, `gemini mcp list`: both connect to each server and say whether it
//! answered; `codex mcp list`: what Codex has configured), run as the person would run it, and
//! what it printed shown as text. A host's own check is the one that counts: it is what that
//! host will do, with its own config, token and name mapping.
//!
//! Only a fixed program name and fixed arguments are run, found on the app's own `PATH`; nothing
//! from a config file or a server reaches the command line. What the tool prints is untrusted
//! text: escape sequences are removed and it is clipped, and the UI shows it as text.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::AsyncReadExt;

use super::{ClientError, ClientKind};

/// How long a check may take: a host connects to every server it lists, one by one.
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);
/// Bytes of output kept from a check.
const MAX_OUTPUT: usize = 64 * 1024;

/// What a host's check printed.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct HostCheck {
    pub client: ClientKind,
    /// The command line, as the person would type it.
    pub command: String,
    /// `None` when it did not exit by itself (timed out, or killed by a signal).
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// Standard output then standard error, escape sequences removed, clipped.
    pub output: String,
    #[ts(type = "number")]
    pub took_ms: u64,
}

impl ClientKind {
    /// The host's own command for listing (and, where it does, checking) its MCP servers;
    /// `None` for hosts without a command-line tool.
    pub fn check_command(self) -> Option<(&'static str, &'static [&'static str])> {
        match self {
            ClientKind::ClaudeCode => Some(("claude", &["mcp", "list"])),
            ClientKind::Gemini => Some(("gemini", &["mcp", "list"])),
            ClientKind::Codex => Some(("codex", &["mcp", "list"])),
            ClientKind::ClaudeDesktop | ClientKind::Cursor | ClientKind::VsCode => None,
        }
    }
}

/// `program` as found on `path` (a `PATH` value), if it is there and executable.
pub(crate) fn find_program(program: &str, path: Option<&OsString>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The check's command line for `client` when its tool is installed on `path`.
pub(crate) fn available(client: ClientKind, path: Option<&OsString>) -> Option<String> {
    let (program, args) = client.check_command()?;
    find_program(program, path)?;
    Some(
        std::iter::once(program)
            .chain(args.iter().copied())
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// Runs `client`'s check in `home` with `path` as its `PATH`.
pub(crate) async fn run(
    client: ClientKind,
    home: &Path,
    path: Option<&OsString>,
) -> Result<HostCheck, ClientError> {
    run_within(client, home, path, CHECK_TIMEOUT).await
}

async fn run_within(
    client: ClientKind,
    home: &Path,
    path: Option<&OsString>,
    timeout: Duration,
) -> Result<HostCheck, ClientError> {
    let refused = |message: String| ClientError::Refused(message);
    let (program, args) = client.check_command().ok_or_else(|| {
        refused(format!(
            "{} has no command-line tool to ask",
            client.title()
        ))
    })?;
    let found = find_program(program, path).ok_or_else(|| {
        refused(format!(
            "{program} is not installed (not found on PATH), so {} cannot be asked",
            client.title()
        ))
    })?;
    let command = std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let started = Instant::now();
    let mut child = tokio::process::Command::new(&found)
        .args(args)
        .current_dir(home)
        // The home whose files the Connect page shows (the app's own, but for tests).
        .env("HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // No colours or prompts: this is read, not watched in a terminal.
        .env("NO_COLOR", "1")
        .env("CI", "1")
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| refused(format!("cannot run {command}: {e}")))?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let read = async {
        let (out, err) = tokio::join!(read_capped(&mut stdout), read_capped(&mut stderr));
        let status = child.wait().await.ok();
        (out, err, status)
    };
    let (output, exit_code, timed_out) = match tokio::time::timeout(timeout, read).await {
        Ok((out, err, status)) => {
            let mut text = plain(&out);
            let err = plain(&err);
            if !err.trim().is_empty() {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&err);
            }
            (text, status.and_then(|s| s.code()), false)
        }
        // Dropping the read future drops the child, which kills it.
        Err(_) => (String::new(), None, true),
    };
    Ok(HostCheck {
        client,
        command,
        exit_code,
        timed_out,
        output: clip(output),
        took_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

/// What `reader` gives until it ends, the first `MAX_OUTPUT` bytes kept: the rest is read and
/// dropped, so a tool that prints without end is neither held whole nor left blocked on a full
/// pipe.
async fn read_capped(reader: &mut (impl tokio::io::AsyncRead + Unpin)) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = MAX_OUTPUT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

/// Text without terminal escape sequences (colours, cursor moves) or other control characters
/// but newlines and tabs.
fn plain(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // CSI (`ESC [ ... final`), OSC (`ESC ] ... BEL|ESC \`), or a two-byte escape.
                match chars.next() {
                    Some('[') => {
                        for c in chars.by_ref() {
                            if ('@'..='~').contains(&c) {
                                break;
                            }
                        }
                    }
                    Some(']') => {
                        while let Some(c) = chars.next() {
                            if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some())
                            {
                                break;
                            }
                        }
                    }
                    _ => {}
                }
            }
            '\r' => {}
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

fn clip(mut text: String) -> String {
    if crate::cut_to(&mut text, MAX_OUTPUT) {
        text.push_str("\n… (cut)");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory with a stand-in `claude` script (its body given), as a PATH.
    fn stand_in(tag: &str, body: &str) -> (PathBuf, OsString) {
        let dir = std::env::temp_dir().join(format!("cs-health-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("claude");
        std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = OsString::from(format!("/nonexistent:{}", dir.display()));
        (dir, path)
    }

    #[tokio::test]
    async fn the_hosts_own_check_is_run_in_the_home_and_its_words_kept_as_text() {
        let (dir, path) = stand_in(
            "ok",
            r#"echo "args: $*"; pwd; printf '\033[32m✓ Connected\033[0m <b>desk</b>\r\n'; echo oops >&2; exit 3"#,
        );
        assert_eq!(
            available(ClientKind::ClaudeCode, Some(&path)).as_deref(),
            Some("claude mcp list")
        );
        assert_eq!(
            available(ClientKind::Gemini, Some(&path)),
            None,
            "not installed"
        );
        assert_eq!(
            available(ClientKind::Cursor, Some(&path)),
            None,
            "no tool to ask"
        );
        let check = run(ClientKind::ClaudeCode, &dir, Some(&path))
            .await
            .unwrap();
        assert_eq!(check.command, "claude mcp list");
        assert_eq!(check.exit_code, Some(3));
        assert!(!check.timed_out);
        let canonical = dir.canonicalize().unwrap();
        assert_eq!(
            check.output,
            format!(
                "args: mcp list\n{}\n✓ Connected <b>desk</b>\noops\n",
                canonical.display()
            )
        );
    }

    #[tokio::test]
    async fn a_check_that_is_not_installed_is_refused_with_the_reason() {
        let path = OsString::from("/nonexistent");
        match run(ClientKind::Gemini, Path::new("/"), Some(&path)).await {
            Err(ClientError::Refused(message)) => {
                assert!(message.contains("gemini is not installed"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            run(ClientKind::VsCode, Path::new("/"), Some(&path)).await,
            Err(ClientError::Refused(_))
        ));
    }

    #[tokio::test]
    async fn a_check_that_hangs_is_stopped_and_says_so() {
        let (dir, path) = stand_in("hang", "echo started; exec sleep 30");
        let started = Instant::now();
        let check = run_within(
            ClientKind::ClaudeCode,
            &dir,
            Some(&path),
            Duration::from_millis(500),
        )
        .await
        .unwrap();
        assert!(check.timed_out);
        assert_eq!(check.exit_code, None);
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn escapes_and_controls_are_removed_and_long_output_clipped() {
        assert_eq!(
            plain(b"\x1b]0;title\x07a\x1b[1;31mb\x1b[0m\x08c\n"),
            "abc\n"
        );
        let long = clip("é".repeat(MAX_OUTPUT));
        assert!(long.len() <= MAX_OUTPUT + 16);
        assert!(long.ends_with("… (cut)"));
    }
}
