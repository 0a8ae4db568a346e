//! What both test files need: a scratch home, the bridge as a child process spoken to a line at
//! a time, and the messages an agent sends.

#![allow(dead_code)]

use std::{
    path::{Path, PathBuf},
    process::{ExitStatus, Stdio},
    sync::atomic::{AtomicU32, Ordering},
    time::Duration,
};

use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines},
    process::{Child, ChildStdin, ChildStdout},
};

pub const WAIT: Duration = Duration::from_secs(20);

/// A scratch home for one bridge run, so it never reads the real user's files.
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "countersign-bridge-test-{}-{}-{name}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("home")).expect("scratch dir");
        Self { dir }
    }

    pub fn home(&self) -> PathBuf {
        self.dir.join("home")
    }

    pub fn data_home(&self) -> PathBuf {
        self.home().join(".local/share")
    }

    /// Where the app would write `gateway.json` and the token (`dirs` under this home).
    pub fn app_data(&self) -> PathBuf {
        self.data_home().join("countersign")
    }

    pub fn write(&self, path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    /// A token file outside the app's data dir, for `COUNTERSIGN_GATEWAY_TOKEN_FILE`.
    pub fn token_file(&self, token: &str) -> PathBuf {
        let path = self.dir.join("token");
        self.write(&path, &format!("{token}\n"));
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The bridge as a child process, read and written a line at a time.
pub struct Bridge {
    pub child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Bridge {
    pub fn spawn(scratch: &Scratch, server: &str, env: &[(&str, &str)]) -> Self {
        Self::spawn_with_stderr(scratch, server, env, Stdio::piped())
    }

    /// The bridge with its stderr going to `stderr` (not read by [`Self::wait`]).
    pub fn spawn_with_stderr(
        scratch: &Scratch,
        server: &str,
        env: &[(&str, &str)],
        stderr: Stdio,
    ) -> Self {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_countersign-bridge"));
        command
            .arg(server)
            .env_clear()
            .env("HOME", scratch.home())
            .env("XDG_DATA_HOME", scratch.data_home())
            .env("XDG_CONFIG_HOME", scratch.home().join(".config"))
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true);
        let mut child = command.spawn().expect("spawn countersign-bridge");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Self {
            child,
            stdin,
            stdout,
        }
    }

    pub async fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write to bridge");
        stdin.flush().await.expect("flush");
    }

    pub async fn send(&mut self, message: Value) {
        self.send_line(&message.to_string()).await;
    }

    pub async fn recv(&mut self) -> Value {
        let line = self.recv_line().await;
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// The next line on the bridge's stdout, as written.
    pub async fn recv_line(&mut self) -> String {
        tokio::time::timeout(WAIT, self.stdout.next_line())
            .await
            .expect("a line from the bridge in time")
            .expect("read stdout")
            .expect("the bridge's stdout is open")
    }

    /// Reads until the answer to request `id`; returns it and whatever came before it.
    pub async fn answer(&mut self, id: Value) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let message = self.recv().await;
            if message.get("id") == Some(&id) && message.get("method").is_none() {
                return (message, before);
            }
            before.push(message);
        }
    }

    pub async fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.answer(json!(id)).await.0
    }

    /// Closes stdin and waits for the exit; returns the status and all of stderr.
    pub async fn finish(mut self) -> (ExitStatus, String) {
        drop(self.stdin.take());
        self.wait().await
    }

    pub async fn wait(mut self) -> (ExitStatus, String) {
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the bridge exits in time")
            .expect("wait");
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            let _ = pipe.read_to_string(&mut stderr).await;
        }
        (status, stderr)
    }
}

pub fn initialize(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version,
        "capabilities": {"elicitation": {"form": {}}},
        "clientInfo": {"name": "bridge-test", "version": "1.0"}
    }})
}

/// The `_meta` a 2026-07-28 request carries instead of an `initialize` handshake.
pub fn meta_2026() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bridge-test", "version": "1.0"}
    })
}

pub fn first_text(result: &Value) -> &str {
    result
        .pointer("/result/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no text content in {result}"))
}

pub fn error_message(reply: &Value) -> &str {
    reply
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("not a JSON-RPC error: {reply}"))
}

/// A port nothing listens on (bound, then released).
pub async fn closed_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    listener.local_addr().expect("address").port()
}
