//! Shared helpers for the core's integration tests against real MCP peers: where the peers
//! live, a temporary audit log, the real broker and session manager wired together, a test
//! person who watches the broker's events, and a Streamable HTTP peer run as a child process.
//!
//! Every wait is bounded, so a hang fails the test instead of blocking the run. A peer that is
//! not installed fails the test with a pointer to `make deps`; nothing is skipped silently.

#![allow(dead_code)]

pub mod procs;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign_core::{
    Ask, AskEvent, AskId, AuditLog, Broker, Outcome, ServerConfig, SessionError, SessionManager,
    SessionState,
};
use serde_json::{Map, Value};
use tokio::io::AsyncBufReadExt;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// The longest any single step may take (a peer starting, a question arriving, a call
/// returning). Generous: the machine is shared with builds.
pub const WAIT: Duration = Duration::from_secs(30);

/// `tests/peers` at the workspace root.
pub fn peers_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers");
    dir.canonicalize().unwrap_or(dir)
}

/// The absolute path of a file under `tests/peers`, which must exist.
pub fn peer_path(relative: &str) -> String {
    let path = peers_dir().join(relative);
    assert!(
        path.exists(),
        "test peer {} is not installed: run `make deps` (scripts/install-deps.sh) at the repository root",
        path.display()
    );
    // Not canonicalized: that would resolve the venv's `python` symlink to the base
    // interpreter, which does not see the venv's packages.
    path.to_string_lossy().into_owned()
}

/// `node`, checked to be on PATH.
pub fn node() -> &'static str {
    let ok = std::process::Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "`node` is not on PATH: install Node 20+ and run `make deps`"
    );
    "node"
}

/// The TypeScript SDK peer script (also checks the SDK it imports is installed).
pub fn ts_server_script() -> String {
    peer_path("node_modules/@modelcontextprotocol/sdk/package.json");
    peer_path("ts-elicit-server.mjs")
}

/// The `@modelcontextprotocol/server-everything` entry point.
pub fn everything_script() -> String {
    peer_path("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// The Python peer: (interpreter in the peers' venv, script).
pub fn py_server() -> (String, String) {
    let python = peer_path(".venv/bin/python");
    let import = std::process::Command::new(&python)
        .args(["-c", "import mcp.server.mcpserver"])
        .output()
        .expect("run the peers' Python");
    assert!(
        import.status.success(),
        "the Python `mcp` SDK is not installed in {python}: run `make deps`\n{}",
        String::from_utf8_lossy(&import.stderr)
    );
    (python, peer_path("py_elicit_server.py"))
}

/// A stdio server config for the TS peer, with test timeouts.
pub fn ts_stdio_config(name: &str) -> ServerConfig {
    let script = ts_server_script();
    with_test_timeouts(ServerConfig::stdio(name, node(), &[script.as_str()]))
}

pub fn with_test_timeouts(mut config: ServerConfig) -> ServerConfig {
    config.request_timeout = WAIT;
    // Long enough that no test's ask ends as `timeout` by accident.
    config.answer_timeout = Duration::from_secs(120);
    config
}

/// The real core: a broker with an audit log in a fresh temp dir, and a session manager.
pub struct Harness {
    pub broker: Broker,
    pub sessions: SessionManager,
    pub audit_path: PathBuf,
    dir: PathBuf,
}

impl Harness {
    pub fn new(label: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "countersign-real-peers-{label}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let audit_path = dir.join("audit.jsonl");
        let broker = Broker::new(AuditLog::open(&audit_path).expect("open the audit log"));
        let sessions = SessionManager::new(broker.clone());
        Harness {
            broker,
            sessions,
            audit_path,
            dir,
        }
    }

    /// Starts `config` and waits for it to be ready; fails with the state and stderr otherwise.
    pub async fn start(&self, config: ServerConfig) {
        let name = config.name.clone();
        self.sessions.start(vec![config]).await;
        let state = self.sessions.wait_ready(&name, WAIT).await;
        assert!(
            matches!(state, Some(SessionState::Ready { .. })),
            "server {name} not ready: {state:?}\nstderr:\n{}",
            self.sessions.stderr_tail(&name).join("\n")
        );
    }

    /// Starts a tool call in the background (so the test can play the person meanwhile).
    pub fn spawn_call(&self, server: &str, tool: &str, args: Value) -> Call {
        let sessions = self.sessions.clone();
        let (server, tool) = (server.to_owned(), tool.to_owned());
        let args = as_object(args);
        tokio::spawn(async move {
            sessions
                .call_tool(&server, &tool, Some(args), CancellationToken::new())
                .await
        })
    }

    /// Calls a tool that asks nothing; returns its reply.
    pub async fn call(&self, server: &str, tool: &str, args: Value) -> Reply {
        let call = self.spawn_call(server, tool, args);
        finish(call, &format!("{server}/{tool}")).await
    }

    /// Polls `list_tools` until `tool` is listed (some servers register tools only after
    /// `notifications/initialized`).
    pub async fn wait_for_tool(&self, server: &str, tool: &str) {
        let found = tokio::time::timeout(WAIT, async {
            loop {
                if let Ok(tools) = self.sessions.list_tools(server).await
                    && tools.iter().any(|t| t.name == tool)
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        assert!(found.is_ok(), "{server} never listed tool {tool}");
    }

    /// Polls the server's captured stderr until a line contains `needle`.
    pub async fn wait_stderr(&self, server: &str, needle: &str) {
        let sessions = self.sessions.clone();
        let found = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if sessions
                    .stderr_tail(server)
                    .iter()
                    .any(|l| l.contains(needle))
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        assert!(
            found.is_ok(),
            "{server} never wrote {needle:?} to stderr; it wrote:\n{}",
            self.sessions.stderr_tail(server).join("\n")
        );
    }

    /// Stops every session (open asks are answered cancel first) and waits for the children.
    pub async fn shutdown(&self) {
        tokio::time::timeout(WAIT, self.sessions.shutdown())
            .await
            .expect("sessions did not shut down in time");
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A tool call running in the background.
pub type Call = tokio::task::JoinHandle<Result<rmcp::model::CallToolResult, SessionError>>;

/// A tool's reply, reduced to what the tests check.
#[derive(Debug, Clone)]
pub struct Reply {
    pub is_error: bool,
    /// The text blocks of `content`, in order.
    pub texts: Vec<String>,
}

impl Reply {
    pub fn from_result(result: &rmcp::model::CallToolResult) -> Self {
        let value = serde_json::to_value(result).expect("serialize the tool result");
        let texts = value["content"]
            .as_array()
            .map(|blocks| {
                blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        Reply {
            is_error: value["isError"].as_bool().unwrap_or(false),
            texts,
        }
    }

    /// The single text block, parsed as JSON.
    pub fn json(&self) -> Value {
        assert_eq!(self.texts.len(), 1, "expected one text block: {self:?}");
        serde_json::from_str(&self.texts[0])
            .unwrap_or_else(|e| panic!("reply is not JSON ({e}): {self:?}"))
    }

    pub fn all_text(&self) -> String {
        self.texts.join("\n")
    }
}

/// Waits for a background call and returns its reply; fails on an error or a hang.
pub async fn finish(call: Call, what: &str) -> Reply {
    let result = tokio::time::timeout(WAIT, call)
        .await
        .unwrap_or_else(|_| panic!("{what}: the call did not return within {WAIT:?}"))
        .expect("the call task panicked")
        .unwrap_or_else(|e| panic!("{what}: the call failed: {e}"));
    Reply::from_result(&result)
}

pub fn as_object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("expected a JSON object, got {other}"),
    }
}

/// The test person: watches the broker's events (subscribed before anything is asked, so
/// nothing is missed) and lets the test decide what to do with each question.
pub struct Person {
    events: broadcast::Receiver<AskEvent>,
    /// Events already received but not yet consumed.
    backlog: Vec<AskEvent>,
}

impl Person {
    pub fn new(broker: &Broker) -> Self {
        Person {
            events: broker.subscribe(),
            backlog: Vec::new(),
        }
    }

    async fn next_event(&mut self) -> AskEvent {
        match tokio::time::timeout(WAIT, self.events.recv()).await {
            Err(_) => panic!("no ask event within {WAIT:?}"),
            Ok(Ok(event)) => event,
            Ok(Err(e)) => panic!("ask events: {e}"),
        }
    }

    /// The next question put to the person.
    pub async fn next_ask(&mut self) -> Ask {
        if let Some(i) = self
            .backlog
            .iter()
            .position(|e| matches!(e, AskEvent::Added { .. }))
            && let AskEvent::Added { ask } = self.backlog.remove(i)
        {
            return *ask;
        }
        loop {
            match self.next_event().await {
                AskEvent::Added { ask } => return *ask,
                other => self.backlog.push(other),
            }
        }
    }

    /// The next question, which `call` should cause; if the call ends first, fails with what it
    /// returned (and the server's stderr, when `harness` has it).
    pub async fn ask_from(&mut self, call: &mut Call, harness: &Harness, server: &str) -> Ask {
        tokio::select! {
            ask = self.next_ask() => ask,
            result = call => panic!(
                "the call ended without asking anything: {:?}\nstderr of {server}:\n{}",
                result.map(|r| r.map(|r| Reply::from_result(&r))),
                harness.sessions.stderr_tail(server).join("\n")
            ),
            _ = tokio::time::sleep(WAIT - Duration::from_secs(1)) => panic!(
                "no question and no reply from {server} within {WAIT:?}; session {:?}\nstderr:\n{}",
                harness.sessions.state(server),
                harness.sessions.stderr_tail(server).join("\n")
            ),
        }
    }

    /// How ask `id` ended, as announced by the broker.
    pub async fn resolution(&mut self, id: AskId) -> Outcome {
        if let Some(i) = self
            .backlog
            .iter()
            .position(|e| matches!(e, AskEvent::Resolved { id: r, .. } if *r == id))
            && let AskEvent::Resolved { outcome, .. } = self.backlog.remove(i)
        {
            return outcome;
        }
        loop {
            match self.next_event().await {
                AskEvent::Resolved { id: r, outcome } if r == id => return outcome,
                other => self.backlog.push(other),
            }
        }
    }

    /// Events received and not consumed; for asserting that nothing else happened.
    pub fn drain(&mut self) -> Vec<AskEvent> {
        while let Ok(event) = self.events.try_recv() {
            self.backlog.push(event);
        }
        std::mem::take(&mut self.backlog)
    }
}

/// A peer serving Streamable HTTP, run as a child process for the length of a test. Killed on
/// `stop` (and on drop, if the test fails first).
pub struct HttpPeer {
    child: tokio::process::Child,
    pub url: String,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl HttpPeer {
    /// `node tests/peers/ts-elicit-server.mjs --http 0`; the URL is read from its stderr.
    pub async fn start_ts() -> Self {
        let script = ts_server_script();
        let mut child = tokio::process::Command::new(node())
            .arg(&script)
            .args(["--http", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the TS peer over HTTP");
        let stderr = child.stderr.take().expect("piped stderr");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (url_tx, url_rx) = tokio::sync::oneshot::channel();
        {
            let lines = lines.clone();
            tokio::spawn(async move {
                let mut url_tx = Some(url_tx);
                let mut reader = tokio::io::BufReader::new(stderr).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    if let Some(at) = line.find("listening on ")
                        && let Some(tx) = url_tx.take()
                    {
                        let _ = tx.send(line[at + "listening on ".len()..].trim().to_owned());
                    }
                    lines.lock().unwrap().push(line);
                }
            });
        }
        let url = match tokio::time::timeout(WAIT, url_rx).await {
            Ok(Ok(url)) => url,
            _ => panic!(
                "the TS peer never printed its URL; stderr:\n{}",
                lines.lock().unwrap().join("\n")
            ),
        };
        assert!(
            url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
            "odd URL {url}"
        );
        HttpPeer {
            child,
            url,
            stderr: lines,
        }
    }

    pub fn stderr(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// Polls the peer's stderr until a line contains `needle`.
    pub async fn wait_stderr(&self, needle: &str) {
        let found = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if self.stderr().iter().any(|l| l.contains(needle)) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        assert!(
            found.is_ok(),
            "the HTTP peer never wrote {needle:?} to stderr; it wrote:\n{}",
            self.stderr().join("\n")
        );
    }

    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// A peer under `tests/peers` that serves HTTP and prints its URL on its first line of stdout,
/// run with `node` and `args`; killed when the child is dropped.
pub async fn node_peer_at_url(
    script: &str,
    args: &[&str],
    env: &[(&str, &Path)],
) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(node())
        .arg(peer_path(script))
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("start {script}: {e}"));
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .unwrap_or_else(|_| panic!("{script} printed no URL within 10 s"))
        .unwrap()
        .unwrap_or_else(|| panic!("{script} ended before printing its URL"));
    (child, url)
}

/// The demo server's binary, built if this test run did not build it already (it belongs to
/// another package of the workspace).
pub fn demo_server_binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let binary = target.join("debug/countersign-demo-server");
    if !binary.exists() {
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "-p", "countersign-demo-server"])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the demo server failed");
    }
    binary
}
