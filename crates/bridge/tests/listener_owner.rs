//! The token goes only to the user's own app: a listener on the gateway's port run as another
//! user (`nobody`, through `runuser`) records every byte it receives, and the bridge, run as
//! this user, must send it none, answer the agent with the reason and exit.
//!
//! These tests need root (to start a process as `nobody`) and `runuser`. They are not skipped
//! without them: a security test that quietly passes when it could not run proves nothing, so
//! they fail with a message that says what is missing.

use std::{
    os::unix::fs::MetadataExt,
    path::Path,
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines},
    net::{TcpListener, TcpStream},
    process::{Child, ChildStdout},
    task::JoinSet,
};

mod common;

use common::{Bridge, Scratch, WAIT, error_message, initialize};

const TOKEN: &str = "secret-token-7c1e";

/// Listens on 127.0.0.1:argv[1] (0: any free port) and prints `listening PORT`, then
/// `accepted` for every connection and `data HEX` for every chunk received, at once. Answers
/// nothing; closes a connection after 3 s. When its stdin closes it accepts what is still in the
/// backlog, prints `end` and exits (after two minutes whatever happens).
const RECORDER: &str = r#"
import binascii, os, signal, socket, sys, threading, time
signal.alarm(120)
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
lock = threading.Lock()
def say(*words):
    with lock:
        print(*words, flush=True)
say("listening", s.getsockname()[1])
def record(c):
    c.settimeout(3)
    try:
        while True:
            chunk = c.recv(65536)
            if not chunk:
                break
            say("data", binascii.hexlify(chunk).decode())
    except OSError:
        pass
    c.close()
def serve():
    while True:
        c, _ = s.accept()
        say("accepted")
        threading.Thread(target=record, args=(c,), daemon=True).start()
threading.Thread(target=serve, daemon=True).start()
sys.stdin.read()
# Connections still waiting in the backlog count too.
s.setblocking(False)
while True:
    try:
        c, _ = s.accept()
    except OSError:
        break
    say("accepted")
    threading.Thread(target=record, args=(c,), daemon=True).start()
time.sleep(0.2)
say("end")
os._exit(0)
"#;

/// Fails, loudly, where these tests cannot mean anything.
fn require_root_and_runuser() {
    let uid = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .expect("read /proc/self (these tests run on Linux)");
    assert_eq!(
        uid, 0,
        "listener_owner tests must run as root: they start a listener as `nobody` with runuser \
         to show the bridge sends another user nothing. Run them as root (CI does); they are not \
         skipped, so a run without root cannot pass them"
    );
    let runuser = std::process::Command::new("runuser")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    assert!(
        runuser.is_ok_and(|s| s.success()),
        "listener_owner tests need `runuser` (util-linux) to start a listener as `nobody`"
    );
}

/// The recording listener, run as `nobody`.
struct Recorder {
    child: Child,
    stdout: Lines<BufReader<ChildStdout>>,
    port: u16,
}

impl Recorder {
    async fn start(port: u16) -> Self {
        let python = if Path::new("/usr/bin/python3").exists() {
            "/usr/bin/python3"
        } else {
            "python3"
        };
        let mut child = tokio::process::Command::new("runuser")
            .args(["-u", "nobody", "--", python, "-c", RECORDER])
            .arg(port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the listener with runuser");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let line = tokio::time::timeout(WAIT, stdout.next_line())
            .await
            .expect("the listener starts in time")
            .expect("read the listener")
            .expect("the listener says where it listens");
        let port = line
            .strip_prefix("listening ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line from the listener: {line}"));
        Self {
            child,
            stdout,
            port,
        }
    }

    /// Stops it; how many connections it accepted and every byte it received.
    async fn stop(mut self) -> (usize, Vec<u8>) {
        drop(self.child.stdin.take());
        let (mut connections, mut received) = (0, Vec::new());
        loop {
            let line = tokio::time::timeout(WAIT, self.stdout.next_line())
                .await
                .expect("the listener stops in time")
                .expect("read the listener")
                .expect("the listener says `end` before it exits");
            match line.split_once(' ') {
                _ if line == "end" => break,
                _ if line == "accepted" => connections += 1,
                Some(("data", hex)) => received.extend(from_hex(hex)),
                _ => panic!("unexpected line from the listener: {line}"),
            }
        }
        let _ = tokio::time::timeout(WAIT, self.child.wait()).await;
        (connections, received)
    }
}

fn from_hex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

/// `gateway.json` in the scratch home pointing at `port`, and the token in a file.
fn app_files(scratch: &Scratch, port: u16) -> Vec<(String, String)> {
    scratch.write(
        &scratch.app_data().join("gateway.json"),
        &json!({"url": format!("http://127.0.0.1:{port}")}).to_string(),
    );
    let token = scratch.token_file(TOKEN);
    vec![(
        "COUNTERSIGN_GATEWAY_TOKEN_FILE".to_owned(),
        token.to_str().expect("utf-8 path").to_owned(),
    )]
}

fn spawn_bridge(scratch: &Scratch, env: &[(String, String)]) -> Bridge {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    Bridge::spawn(scratch, "demo", &env)
}

/// The bridge reached the listener (so the test tested something) and sent it nothing.
async fn assert_nothing_sent(recorder: Recorder) {
    let (connections, received) = recorder.stop().await;
    let text = String::from_utf8_lossy(&received);
    assert!(
        !text.contains(TOKEN),
        "the token reached another user's listener: {text:?}"
    );
    assert!(
        received.is_empty(),
        "the bridge wrote to another user's listener: {text:?}"
    );
    assert!(
        connections >= 1,
        "the bridge never connected to the listener"
    );
}

const REFUSED: &str = "another user's process (uid 65534";

#[tokio::test]
async fn another_users_listener_on_the_gateway_port_gets_no_token() {
    require_root_and_runuser();
    let recorder = Recorder::start(0).await;
    let scratch = Scratch::new("foreign-listener");
    let env = app_files(&scratch, recorder.port);
    let mut bridge = spawn_bridge(&scratch, &env);
    bridge.send(initialize("2025-11-25")).await;
    let (reply, _) = bridge.answer(json!(1)).await;
    // Connections so far: the bridge's probe that finds the app running. Without the check, also
    // the initialize request, which the listener holds until it closes the connection.
    assert_nothing_sent(recorder).await;
    let message = error_message(&reply);
    assert!(message.contains(REFUSED), "{reply}");
    assert!(message.contains("the token is not sent"), "{reply}");
    let (status, stderr) = bridge.wait().await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(REFUSED), "{stderr}");
}

/// Answers every POST with an empty result for its id, over keep-alive connections, until
/// dropped: the user's own gateway, as far as the bridge can tell.
struct OwnGateway {
    port: u16,
    tasks: JoinSet<()>,
    requests: Arc<AtomicUsize>,
}

impl OwnGateway {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let requests = Arc::new(AtomicUsize::new(0));
        let mut tasks = JoinSet::new();
        let counter = Arc::clone(&requests);
        tasks.spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                connections.spawn(answer_posts(stream, Arc::clone(&counter)));
            }
        });
        Self {
            port,
            tasks,
            requests,
        }
    }

    /// Closes the listener and every connection (the bridge sees them end).
    async fn stop(mut self) -> usize {
        self.tasks.shutdown().await;
        self.requests.load(Ordering::SeqCst)
    }
}

async fn answer_posts(mut stream: TcpStream, requests: Arc<AtomicUsize>) {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + length {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Value =
            serde_json::from_slice(&buf[head_end..head_end + length]).unwrap_or(Value::Null);
        buf.drain(..head_end + length);
        requests.fetch_add(1, Ordering::SeqCst);
        let answer = json!({"jsonrpc": "2.0", "id": body["id"], "result": {}}).to_string();
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        );
        if stream.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn ping(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
}

#[tokio::test]
async fn a_reconnect_to_another_users_listener_is_checked_too() {
    require_root_and_runuser();
    // The user's own gateway first: the bridge relays through it.
    let gateway = OwnGateway::start().await;
    let port = gateway.port;
    let scratch = Scratch::new("reconnect");
    let env = app_files(&scratch, port);
    let mut bridge = spawn_bridge(&scratch, &env);
    bridge.send(ping(1)).await;
    let (reply, _) = bridge.answer(json!(1)).await;
    assert_eq!(reply["result"], json!({}), "{reply}");

    // The app goes away, and another user takes its port.
    assert_eq!(gateway.stop().await, 1);
    let recorder = Recorder::start(port).await;
    assert_eq!(recorder.port, port);
    // Let the bridge's client see its pooled connection close.
    tokio::time::sleep(Duration::from_millis(300)).await;

    bridge.send(ping(2)).await;
    let (reply, _) = bridge.answer(json!(2)).await;
    // The new connection was made (the check comes after connecting) but carried nothing.
    assert_nothing_sent(recorder).await;
    assert!(error_message(&reply).contains(REFUSED), "{reply}");
    let (status, stderr) = bridge.wait().await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(REFUSED), "{stderr}");
}
