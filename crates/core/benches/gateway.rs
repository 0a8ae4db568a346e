//! What forwarding through the gateway costs an agent, beside two other MCP proxies.
//!
//! Figures, not assertions: `cargo bench -p countersign-core --bench gateway` prints them
//! (`scripts/bench-gateway.sh` installs the third-party proxies first) and BENCHMARKS.md
//! (repo root) records runs.
//!
//! Every row is the same agent workload: rmcp Streamable HTTP clients (legacy `initialize`,
//! 2025-11-25, so every target speaks it) calling `tools/call list_tickets` on the demo ticket
//! desk, 10,000 calls one after the other on one session, then 10,000 calls from 16 callers at
//! once, each its own agent session. 500 warm-up calls come first each time. The rows:
//!
//! 1. direct: the agents talk to the desk over Streamable HTTP.
//! 2. Countersign: the agents talk to Countersign's gateway (with the bearer token), whose
//!    upstream is that same HTTP desk; `toolPolicy: {"list_tickets": "allow"}` lets the calls
//!    through unasked. The default upstream protocol (`auto`) and `"protocol": "legacy"`.
//!    Row 2c: the same gateway with the desk as its stdio child instead, `"protocol":
//!    "legacy"` (as most stdio servers speak today); row R below is its reference. Row 2d:
//!    that stdio desk on `auto` (2026-07-28).
//! 3. mcp-proxy (PyPI): it can only put a stdio server behind Streamable HTTP, so it fronts the
//!    desk on stdio (one child for every agent).
//! 4. supergateway (npm), `--stdio ... --outputTransport streamableHttp --stateful`: likewise
//!    stdio only; one desk child per agent session.
//!
//! and, for rows 3 and 4, a reference: the agents talk to the desk over stdio directly. Row F,
//! the floor: a relay that does no work (`=relay`: each request passed to the HTTP desk as its
//! bytes, the answer streamed back), so what the two loopback hops and an HTTP server and
//! client cost by themselves, which no HTTP-to-HTTP gateway can go under.
//! Rows 1m and 2m are rows 1 and 2 with agents on 2026-07-28 (`server/discover`, each request
//! self-contained), each measured against row 1m.
//!
//! Then rows T1-T4 (`ts_agent.rs`): one agent written with the TypeScript SDK, keeping its
//! connections alive as agent hosts do, one call at a time, to the desk on stdio directly and
//! through Countersign, mcp-proxy and supergateway, each fronting that same stdio desk.
//!
//! Each process has its own: this binary is the agents; it re-executes itself as the desk
//! (`COUNTERSIGN_BENCH_ROLE=desk-http` or `desk-stdio`), as the gateway (`=gateway`) and as the
//! floor's relay (`=relay`), so
//! the CPU time of the proxy in the middle (utime + stime from /proc/<pid>/stat, all threads)
//! and its resident memory (VmRSS) are its own.
//!
//! Environment: `COUNTERSIGN_BENCH_MCP_PROXY` and `COUNTERSIGN_BENCH_SUPERGATEWAY` name the
//! proxies' executables (default: where scripts/bench-gateway.sh installs them);
//! `COUNTERSIGN_BENCH_ROWS` picks rows (comma-separated: direct, countersign,
//! countersign-legacy, floor, direct-2026, countersign-2026, countersign-stdio-legacy, countersign-stdio, mcp-proxy, supergateway, direct-stdio, ts-direct, ts-countersign,
//! ts-mcp-proxy, ts-supergateway, sessions, sessions-legacy);
//! `COUNTERSIGN_BENCH_KEEPALIVE=1` has the rmcp agents keep their connections (rmcp's default
//! HTTP client opens one a request); `COUNTERSIGN_BENCH_GATEWAY_THREADS=1` runs the gateway on a single-threaded runtime (what
//! fewer cross-thread wake-ups would buy); `COUNTERSIGN_BENCH_CALLS` changes the 10,000.
//!
//! Rows S (`sessions`, `sessions-legacy`) are memory, not speed: the gateway's resident
//! memory idle, with one agent session open, then with 16 and with 31 (the cap is 32 upstream
//! sessions per server), each session having made its calls, and after they all closed.
//! `COUNTERSIGN_BENCH_HOLD_S=<s>` pauses that long idle and with all the sessions open, printing
//! the gateway's pid, to read its `/proc/<pid>/smaps_rollup` then.

#[path = "../tests/common/procs.rs"]
mod procs;
#[path = "gateway/ts_agent.rs"]
mod ts_agent;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use countersign_core::config::{GatewayConfig, ProtocolChoice, ToolRule};
use countersign_core::gateway::Gateway;
use countersign_core::settings::SettingsStore;
use countersign_core::{AuditLog, Broker, ServerConfig};
use countersign_demo_server::{TicketDesk, TicketStore, serve_http, serve_stdio};
use procs::descendants;
use rmcp::model::{CallToolRequestParams, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, RoleClient, RunningService, serve_client_with_lifecycle};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};

const ROLE_ENV: &str = "COUNTERSIGN_BENCH_ROLE";
const UPSTREAM_ENV: &str = "COUNTERSIGN_BENCH_UPSTREAM";
const PROTOCOL_ENV: &str = "COUNTERSIGN_BENCH_UPSTREAM_PROTOCOL";
const MCP_PROXY_ENV: &str = "COUNTERSIGN_BENCH_MCP_PROXY";
const SUPERGATEWAY_ENV: &str = "COUNTERSIGN_BENCH_SUPERGATEWAY";
const ROWS_ENV: &str = "COUNTERSIGN_BENCH_ROWS";
const CALLS_ENV: &str = "COUNTERSIGN_BENCH_CALLS";
const NODELAY_ENV: &str = "COUNTERSIGN_BENCH_NODELAY";

const HOLD_ENV: &str = "COUNTERSIGN_BENCH_HOLD_S";
const CALLGRIND_ENV: &str = "COUNTERSIGN_BENCH_CALLGRIND";
const KEEPALIVE_ENV: &str = "COUNTERSIGN_BENCH_KEEPALIVE";
const ALL_ROWS: &str = "direct,floor,countersign,countersign-legacy,direct-2026,countersign-2026,countersign-stdio-legacy,countersign-stdio,mcp-proxy,supergateway,direct-stdio,ts-direct,ts-countersign,ts-mcp-proxy,ts-supergateway,sessions,sessions-legacy";
const DEFAULT_CALLS: usize = 10_000;
const WARMUP_CALLS: usize = 500;
const CALLERS: usize = 16;
const TOOL: &str = "list_tickets";
const SERVER: &str = "desk";
/// A call that takes longer than this counts as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// More failed calls than this and the row stops.
const MAX_ERRORS: usize = 50;
const READY_TIMEOUT: Duration = Duration::from_secs(30);

// The issue's figures (TypeScript SDK client, same kind of machine) and targets.
const SUPERGATEWAY_ISSUE: (f64, f64) = (0.6, 1.3);
const MCP_PROXY_ISSUE: (f64, f64) = (1.0, 1.5);
const TARGET_ADDED_P50_MS: f64 = 0.15;
const TARGET_CPU_MS: f64 = 0.25;
const TARGET_THROUGHPUT: f64 = 0.80;
/// CPU per call for a keep-alive TypeScript SDK agent.
const TARGET_TS_CPU_MS: f64 = 0.15;
/// Resident memory each additional agent session may cost the gateway.
const TARGET_SESSION_MIB: f64 = 0.5;
/// Agent sessions open at each step of row S (the gateway allows 32 upstreams per server).
const SESSION_STEPS: [usize; 3] = [1, 16, 31];
/// How many sessions the gateway lets the shared token hold on one server, and an agent with
/// its own token (`MAX_UPSTREAMS_SHARED`, `MAX_UPSTREAMS_PER_AGENT`).
const SHARED_TOKEN_SESSIONS: usize = 16;
const AGENT_TOKEN_SESSIONS: usize = 8;

fn main() {
    match std::env::var(ROLE_ENV).as_deref() {
        Ok("desk-http") => return role_desk_http(),
        Ok("desk-stdio") => return role_desk_stdio(),
        Ok("gateway") => return role_gateway(),
        Ok("relay") => return role_relay(),
        _ => {}
    }
    let rows = std::env::var(ROWS_ENV).unwrap_or_else(|_| ALL_ROWS.into());
    let calls = std::env::var(CALLS_ENV)
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(DEFAULT_CALLS);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(bench(&rows, calls));
}

fn runtime() -> tokio::runtime::Runtime {
    // What `#[tokio::main]` builds: one worker per core.
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

// ---------------------------------------------------------------------------------------------
// The roles this binary plays in its child processes.

/// The desk over Streamable HTTP; prints its URL, serves until stdin closes.
fn role_desk_http() {
    runtime().block_on(async {
        if nodelay() {
            return desk_http_nodelay().await;
        }
        let server = serve_http(([127, 0, 0, 1], 0).into(), TicketStore::seeded())
            .await
            .expect("desk over HTTP");
        println!("{}", server.url());
        wait_for_stdin_eof().await;
        let _ = server.shutdown().await;
    });
}

/// `COUNTERSIGN_BENCH_NODELAY=1`: what TCP_NODELAY on the servers' sockets changes (axum 0.8's
/// `serve` leaves Nagle's algorithm on).
fn nodelay() -> bool {
    std::env::var(NODELAY_ENV).as_deref() == Ok("1")
}

/// `serve_http` as the desk crate has it, with TCP_NODELAY on every accepted connection.
async fn desk_http_nodelay() {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let store = TicketStore::seeded();
    let service: StreamableHttpService<TicketDesk, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(TicketDesk::new(store.clone())),
            Default::default(),
            StreamableHttpServerConfig::default(),
        );
    serve_with_nodelay(
        axum::Router::new().nest_service(countersign_demo_server::MCP_PATH, service),
    )
    .await;
}

/// Serves `router` on a loopback port with TCP_NODELAY on every accepted connection, prints
/// its URL (with the desk's path), and serves until stdin closes.
async fn serve_with_nodelay(router: axum::Router) {
    use axum::serve::ListenerExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    println!("http://{addr}{}", countersign_demo_server::MCP_PATH);
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::select! {
        _ = axum::serve(listener, router) => {}
        _ = wait_for_stdin_eof() => {}
    }
}

/// TCP_NODELAY on a listening socket; Linux hands it down to the connections it accepts.
fn set_nodelay_on_listener(listener: &tokio::net::TcpListener) {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            &one as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// The desk over stdio, as `countersign-demo-server` serves it (without its log lines).
fn role_desk_stdio() {
    runtime().block_on(async {
        if let Err(e) = serve_stdio(TicketDesk::new(TicketStore::seeded())).await {
            eprintln!("desk-stdio: {e}");
        }
    });
}

/// The floor (row F): a relay that does no work. Every request goes on to the HTTP desk at
/// `$COUNTERSIGN_BENCH_UPSTREAM` as its bytes, with its method and headers, over one
/// keep-alive client; the answer comes back as it streams. No parse, no gate, no audit, no
/// session of its own: what any HTTP-to-HTTP proxy pays, the two loopback hops and an HTTP
/// server and client. Its agents' connections have TCP_NODELAY, as the gateway's always do
/// (`gateway/peer.rs`): an answer streamed in two writes would otherwise wait out the agent's
/// delayed ACK, about 40 ms, on a kept connection. Prints its URL, serves until stdin closes.
fn role_relay() {
    use axum::body::Body;
    use axum::extract::Request;
    use axum::response::Response;
    runtime().block_on(async {
        let upstream = std::env::var(UPSTREAM_ENV).expect("the desk's URL");
        let client = reqwest::Client::new();
        let relay = move |request: Request| {
            let (client, upstream) = (client.clone(), upstream.clone());
            async move {
                let (parts, body) = request.into_parts();
                let mut headers = parts.headers;
                for hop in ["host", "content-length", "connection", "transfer-encoding"] {
                    headers.remove(hop);
                }
                let bytes = axum::body::to_bytes(body, usize::MAX)
                    .await
                    .unwrap_or_default();
                let answer = client
                    .request(parts.method, &upstream)
                    .headers(headers)
                    .body(bytes)
                    .send()
                    .await;
                let Ok(answer) = answer else {
                    return Response::builder()
                        .status(502)
                        .body(Body::empty())
                        .expect("a response");
                };
                let mut response = Response::builder().status(answer.status());
                for (name, value) in answer.headers() {
                    if !matches!(
                        name.as_str(),
                        "content-length" | "connection" | "transfer-encoding"
                    ) {
                        response = response.header(name, value);
                    }
                }
                response
                    .body(Body::from_stream(answer.bytes_stream()))
                    .expect("a response")
            }
        };
        serve_with_nodelay(axum::Router::new().fallback(relay)).await;
    });
}

/// Countersign's gateway alone, as the app runs it: one server (`desk`, the HTTP desk at
/// `$COUNTERSIGN_BENCH_UPSTREAM`, or this binary as the stdio desk when that says `stdio`),
/// `toolPolicy: {"list_tickets": "allow"}`, the audit log opened as the app opens it. Prints
/// `URL TOKEN`, serves until stdin closes.
fn role_gateway() {
    let runtime = if std::env::var("COUNTERSIGN_BENCH_GATEWAY_THREADS").as_deref() == Ok("1") {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    } else {
        runtime()
    };
    runtime.block_on(async {
        let upstream = std::env::var(UPSTREAM_ENV).expect("upstream URL");
        let mut server = if upstream == ts_agent::STDIO_UPSTREAM {
            let exe = std::env::current_exe().expect("this binary");
            let mut server = ServerConfig::stdio(SERVER, &exe.display().to_string(), &[]);
            if let countersign_core::config::TransportConfig::Stdio { env, .. } =
                &mut server.transport
            {
                env.insert(ROLE_ENV.into(), "desk-stdio".into());
            }
            server
        } else {
            ServerConfig::http(SERVER, &upstream)
        };
        server.tool_policy = BTreeMap::from([(TOOL.to_owned(), ToolRule::Allow)]);
        if std::env::var(PROTOCOL_ENV).as_deref() == Ok("legacy") {
            server.protocol = ProtocolChoice::Legacy;
        }
        let dir = std::env::temp_dir().join(format!("countersign-bench-gw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let broker = Broker::new(AuditLog::open(dir.join("audit.jsonl")).expect("audit log"));
        let config = GatewayConfig {
            port: 0,
            ..GatewayConfig::default()
        };
        let gateway = Gateway::new(
            config,
            vec![server],
            broker,
            SettingsStore::default(),
            dir.join("gateway-token"),
        )
        .expect("gateway");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        if nodelay() {
            set_nodelay_on_listener(&listener);
        }
        let addr = gateway.serve(listener);
        // The shared token holds at most half of a server's places: rows S (31 sessions) take
        // the rest with tokens of their own, 8 sessions each.
        let more: Vec<String> = (1..=2)
            .map(|n| {
                gateway
                    .create_agent(&format!("bench-{n}"), "bridge")
                    .expect("agent token")
                    .token
            })
            .collect();
        println!(
            "http://{addr}/mcp/{SERVER} {} {}",
            gateway.token(),
            more.join(" ")
        );
        wait_for_stdin_eof().await;
        gateway.shutdown().await;
        let _ = std::fs::remove_dir_all(&dir);
    });
}

async fn wait_for_stdin_eof() {
    let _ = tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Processes: started here, measured through /proc, stopped by their own pid.

struct Proc {
    name: String,
    child: Child,
    log: Option<PathBuf>,
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last lines it wrote to its log, for a row that could not run.
    fn log_tail(&self) -> String {
        let Some(log) = &self.log else {
            return String::new();
        };
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n    ")
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited().is_some() {
            return;
        }
        // Closing stdin ends our own roles (and lets the gateway remove its scratch dir);
        // SIGTERM lets the proxies stop their children.
        if self.child.stdin.take().is_some() {
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                if self.exited().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("{} did not stop on SIGTERM; killing it", self.name);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts one of this binary's roles and reads the line it prints once it is ready.
fn spawn_role(role: &str, env: &[(&str, &str)]) -> Result<(Proc, String), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = match callgrind_dir() {
        Some(dir) if role == "gateway" => {
            let mut cmd = Command::new("valgrind");
            cmd.arg("--tool=callgrind")
                .arg(format!(
                    "--callgrind-out-file={}/callgrind.out.%p",
                    dir.display()
                ))
                .arg(exe);
            cmd
        }
        _ => Command::new(exe),
    };
    cmd.env(ROLE_ENV, role)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {role}: {e}"))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let proc = Proc {
        name: role.to_owned(),
        child,
        log: None,
    };
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| format!("{role}: {e}"))?;
    if line.trim().is_empty() {
        return Err(format!("{role} exited before it was ready"));
    }
    Ok((proc, line.trim().to_owned()))
}

/// Starts a third-party proxy with its output in a log file.
fn spawn_logged(name: &str, mut cmd: Command, dir: &Path) -> Result<Proc, String> {
    let log = dir.join(format!("{name}.log"));
    let file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null())
        .stdout(file.try_clone().map_err(|e| e.to_string())?)
        .stderr(file);
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {name} ({:?}): {e}", cmd.get_program()))?;
    Ok(Proc {
        name: name.to_owned(),
        child,
        log: Some(log),
    })
}

/// Waits until `port` accepts connections (or the process dies).
async fn wait_for_port(proc: &mut Proc, port: u16) -> Result<(), String> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Some(status) = proc.exited() {
            return Err(format!(
                "{} exited ({status}) before it listened:\n    {}",
                proc.name,
                proc.log_tail()
            ));
        }
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{} did not listen on port {port} within {READY_TIMEOUT:?}:\n    {}",
                proc.name,
                proc.log_tail()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Where `COUNTERSIGN_BENCH_CALLGRIND` asks the gateway to run under callgrind and write its
/// counts: instructions are what CPU time is not on a shared machine, the same from run to run.
fn callgrind_dir() -> Option<PathBuf> {
    std::env::var_os(CALLGRIND_ENV).map(PathBuf::from)
}

fn callgrind_control(pid: u32, what: &str) -> Result<String, String> {
    let out = Command::new("callgrind_control")
        .arg(what)
        .arg(pid.to_string())
        .output()
        .map_err(|e| format!("callgrind_control: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "callgrind_control {what} {pid}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The instructions the gateway ran since its counts were last zeroed (a dump's `totals:`).
fn callgrind_dump(pid: u32) -> Result<f64, String> {
    let dir = callgrind_dir().ok_or("no callgrind dir")?;
    let before: Vec<_> = dumps(&dir, pid);
    callgrind_control(pid, "-d")?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(new) = dumps(&dir, pid).into_iter().find(|d| !before.contains(d)) {
            let text = std::fs::read_to_string(&new).unwrap_or_default();
            if let Some(total) = text
                .lines()
                .find_map(|l| {
                    l.strip_prefix("totals: ")
                        .or_else(|| l.strip_prefix("summary: "))
                })
                .and_then(|t| t.split_whitespace().next()?.parse::<f64>().ok())
            {
                return Ok(total);
            }
        }
        if Instant::now() > deadline {
            return Err("callgrind wrote no dump".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn dumps(dir: &Path, pid: u32) -> Vec<PathBuf> {
    let prefix = format!("callgrind.out.{pid}.");
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// CPU time (user + system, all threads) of one process, in ms.
fn cpu_ms(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after "pid (comm)": state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks as f64 * 1000.0 / hz)
}

/// Resident memory of one process, in MiB.
fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn sum(pids: &[u32], f: impl Fn(u32) -> Option<f64>) -> f64 {
    pids.iter().filter_map(|&p| f(p)).sum()
}

// ---------------------------------------------------------------------------------------------
// The agents.

type Agent = RunningService<RoleClient, ClientConfig>;

#[derive(Clone)]
enum Endpoint {
    Http {
        url: String,
        token: Option<String>,
        /// Tokens for agents past the shared token's share of the server's places.
        more_tokens: Vec<String>,
        /// The agents speak 2026-07-28 (`server/discover`, every request self-contained)
        /// instead of the legacy `initialize` handshake on 2025-11-25.
        modern: bool,
    },
    /// The desk on stdio, one child per agent (the reference row).
    Stdio,
}

fn client_config(name: String, version: ProtocolVersion) -> ClientConfig {
    let mut info = Implementation::default();
    info.name = name;
    info.version = "1.0".into();
    let mut client = ClientConfig::default();
    client.client_info = info;
    client.protocol_version = version;
    client
}

async fn connect(endpoint: &Endpoint, n: usize) -> Result<Agent, String> {
    let name = format!("bench-agent-{n}");
    let handshake = async {
        match endpoint {
            Endpoint::Http {
                url,
                token,
                more_tokens,
                modern,
            } => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
                config.auth_header = match n.checked_sub(SHARED_TOKEN_SESSIONS) {
                    Some(past) if token.is_some() => Some(
                        more_tokens
                            .get(past / AGENT_TOKEN_SESSIONS)
                            .ok_or("more agent sessions than the gateway gave tokens for")?
                            .clone(),
                    ),
                    _ => token.clone(),
                };
                // rmcp's own HTTP client keeps no idle connection (a new one a request); with
                // `COUNTERSIGN_BENCH_KEEPALIVE=1` the agents keep theirs, as the TypeScript SDK's do.
                let transport = if std::env::var_os(KEEPALIVE_ENV).is_some() {
                    StreamableHttpClientTransport::with_client(reqwest::Client::new(), config)
                } else {
                    StreamableHttpClientTransport::from_config(config)
                };
                let (client, lifecycle) = if *modern {
                    (
                        client_config(name, ProtocolVersion::V_2026_07_28),
                        ClientLifecycleMode::Discover {
                            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                        },
                    )
                } else {
                    (
                        client_config(name, ProtocolVersion::V_2025_11_25),
                        ClientLifecycleMode::Initialize,
                    )
                };
                serve_client_with_lifecycle(client, transport, lifecycle)
                    .await
                    .map_err(|e| e.to_string())
            }
            Endpoint::Stdio => {
                let exe = std::env::current_exe().map_err(|e| e.to_string())?;
                let mut cmd = tokio::process::Command::new(exe);
                cmd.env(ROLE_ENV, "desk-stdio");
                let transport = TokioChildProcess::new(cmd).map_err(|e| e.to_string())?;
                let client = client_config(name, ProtocolVersion::V_2025_11_25);
                serve_client_with_lifecycle(client, transport, ClientLifecycleMode::Initialize)
                    .await
                    .map_err(|e| e.to_string())
            }
        }
    };
    tokio::time::timeout(READY_TIMEOUT, handshake)
        .await
        .map_err(|_| "initialize timed out".to_owned())?
        .map_err(|e| format!("initialize failed: {e}"))
}

/// `calls` calls one after the other; the latency of each, in ns.
async fn call_loop(agent: &Agent, calls: usize) -> Result<Vec<u64>, String> {
    let mut samples = Vec::with_capacity(calls);
    let mut errors = 0;
    let mut last_error = String::new();
    for _ in 0..calls {
        let start = Instant::now();
        let outcome = tokio::time::timeout(
            CALL_TIMEOUT,
            agent.peer().call_tool(CallToolRequestParams::new(TOOL)),
        )
        .await;
        let took = start.elapsed().as_nanos() as u64;
        match outcome {
            Ok(Ok(result)) if result.is_error != Some(true) => samples.push(took),
            Ok(Ok(result)) => {
                errors += 1;
                last_error = format!("isError result: {:?}", result.content);
            }
            Ok(Err(e)) => {
                errors += 1;
                last_error = e.to_string();
            }
            Err(_) => {
                errors += 1;
                last_error = format!("no answer within {CALL_TIMEOUT:?}");
            }
        }
        if errors > MAX_ERRORS {
            return Err(format!("{errors} calls failed; the last: {last_error}"));
        }
    }
    if errors > 0 {
        eprintln!("  ({errors} calls failed; the last: {last_error})");
    }
    Ok(samples)
}

/// The same loop on every agent at once; all latencies, in ns.
async fn call_loops(agents: &[std::sync::Arc<Agent>], calls: usize) -> Result<Vec<u64>, String> {
    let per_agent = calls.div_ceil(agents.len());
    let tasks: Vec<_> = agents
        .iter()
        .map(|a| {
            let a = a.clone();
            tokio::spawn(async move { call_loop(&a, per_agent).await })
        })
        .collect();
    let mut all = Vec::with_capacity(calls);
    for t in tasks {
        all.extend(t.await.map_err(|e| e.to_string())??);
    }
    Ok(all)
}

// ---------------------------------------------------------------------------------------------
// One row: a target, measured.

/// What is measured around a target: the process in the middle and the upstream desk(s).
struct Sides {
    /// The proxy (or gateway) process; none when the agents talk to the desk directly.
    middle: Option<u32>,
    /// The desk processes: one HTTP desk, or the proxy's stdio children (found at each
    /// sample), or the agents' own stdio children.
    upstream: UpstreamPids,
}

enum UpstreamPids {
    Fixed(u32),
    ChildrenOf(u32),
    OurChildren,
}

impl Sides {
    fn upstream_pids(&self) -> Vec<u32> {
        match self.upstream {
            UpstreamPids::Fixed(p) => vec![p],
            UpstreamPids::ChildrenOf(p) => descendants(p),
            UpstreamPids::OurChildren => descendants(std::process::id())
                .into_iter()
                .filter(|&p| is_stdio_desk(p))
                .collect(),
        }
    }

    fn cpu(&self) -> (Option<f64>, f64) {
        (
            self.middle.and_then(cpu_ms),
            sum(&self.upstream_pids(), cpu_ms),
        )
    }
}

fn is_stdio_desk(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|env| {
            env.split(|b| *b == 0)
                .any(|kv| kv == format!("{ROLE_ENV}=desk-stdio").as_bytes())
        })
        .unwrap_or(false)
}

struct Run {
    samples: Vec<u64>,
    wall: Duration,
    middle_cpu_ms: Option<f64>,
    upstream_cpu_ms: f64,
}

impl Run {
    fn percentile_ms(&self, p: f64) -> f64 {
        let rank = ((p * self.samples.len() as f64).ceil() as usize).max(1) - 1;
        self.samples[rank.min(self.samples.len() - 1)] as f64 / 1e6
    }

    fn per_second(&self) -> f64 {
        self.samples.len() as f64 / self.wall.as_secs_f64()
    }

    fn middle_cpu_per_call(&self) -> Option<f64> {
        self.middle_cpu_ms.map(|c| c / self.samples.len() as f64)
    }

    fn upstream_cpu_per_call(&self) -> f64 {
        self.upstream_cpu_ms / self.samples.len() as f64
    }
}

struct Row {
    label: String,
    outcome: Result<Measured, String>,
}

struct Measured {
    sequential: Run,
    concurrent: Run,
    /// RSS of the middle process before any agent, and with 16 agent sessions open.
    idle_rss: Option<f64>,
    rss_16: Option<f64>,
    /// RSS of the desk processes with 16 agent sessions open.
    upstream_rss_16: f64,
    upstream_count_16: usize,
}

async fn measure(endpoint: &Endpoint, sides: &Sides, calls: usize) -> Result<Measured, String> {
    let idle_rss = sides.middle.and_then(rss_mib);

    // One agent, one call at a time.
    let agent = connect(endpoint, 0).await?;
    call_loop(&agent, WARMUP_CALLS).await?;
    let counted = sides.middle.filter(|_| callgrind_dir().is_some());
    if let Some(pid) = counted {
        callgrind_control(pid, "-z")?;
    }
    let (m0, u0) = sides.cpu();
    let start = Instant::now();
    let mut samples = call_loop(&agent, calls).await?;
    let wall = start.elapsed();
    let (m1, u1) = sides.cpu();
    let instructions = match counted {
        Some(pid) => Some(callgrind_dump(pid)? / calls as f64),
        None => None,
    };
    samples.sort_unstable();
    let sequential = Run {
        samples,
        wall,
        middle_cpu_ms: m0.zip(m1).map(|(a, b)| b - a),
        upstream_cpu_ms: u1 - u0,
    };
    if let Some(instructions) = instructions {
        eprintln!(
            "  the gateway's instructions per call, one at a time (callgrind): {instructions:.0}"
        );
    }
    let _ = agent.cancel().await;

    // 16 agents, each its own session, all calling at once.
    let mut agents = Vec::with_capacity(CALLERS);
    for n in 1..=CALLERS {
        agents.push(std::sync::Arc::new(connect(endpoint, n).await?));
    }
    call_loops(&agents, WARMUP_CALLS).await?;
    let (m0, u0) = sides.cpu();
    let start = Instant::now();
    let mut samples = call_loops(&agents, calls).await?;
    let wall = start.elapsed();
    let (m1, u1) = sides.cpu();
    samples.sort_unstable();
    let concurrent = Run {
        samples,
        wall,
        middle_cpu_ms: m0.zip(m1).map(|(a, b)| b - a),
        upstream_cpu_ms: u1 - u0,
    };
    let rss_16 = sides.middle.and_then(rss_mib);
    let upstream = sides.upstream_pids();
    let upstream_rss_16 = sum(&upstream, rss_mib);
    for agent in agents {
        if let Ok(agent) = std::sync::Arc::try_unwrap(agent) {
            let _ = agent.cancel().await;
        }
    }
    Ok(Measured {
        sequential,
        concurrent,
        idle_rss,
        rss_16,
        upstream_rss_16,
        upstream_count_16: upstream.len(),
    })
}

/// Agents speaking 2026-07-28 (`modern`) or the legacy handshake, straight to the HTTP desk.
async fn row_direct(calls: usize, modern: bool) -> Result<Measured, String> {
    let (desk, url) = spawn_role("desk-http", &[])?;
    let sides = Sides {
        middle: None,
        upstream: UpstreamPids::Fixed(desk.pid()),
    };
    let endpoint = Endpoint::Http {
        url,
        token: None,
        more_tokens: Vec::new(),
        modern,
    };
    measure(&endpoint, &sides, calls).await
}

async fn row_direct_stdio(calls: usize) -> Result<Measured, String> {
    let sides = Sides {
        middle: None,
        upstream: UpstreamPids::OurChildren,
    };
    measure(&Endpoint::Stdio, &sides, calls).await
}

/// The gateway in front of `upstream` (an HTTP desk's URL, or `stdio`), upstream `protocol`,
/// and its endpoint.
fn spawn_gateway(upstream: &str, protocol: &str) -> Result<(Proc, Endpoint), String> {
    let (gateway, line) = spawn_role(
        "gateway",
        &[(UPSTREAM_ENV, upstream), (PROTOCOL_ENV, protocol)],
    )?;
    let mut words = line.split(' ').map(str::to_owned);
    let (Some(url), Some(token)) = (words.next(), words.next()) else {
        return Err(format!("gateway said {line:?}"));
    };
    let endpoint = Endpoint::Http {
        url,
        token: Some(token),
        more_tokens: words.collect(),
        modern: false,
    };
    Ok((gateway, endpoint))
}

/// The HTTP desk and the gateway in front of it (upstream `protocol`), and the gateway's endpoint.
fn spawn_gateway_and_desk(protocol: &str) -> Result<(Proc, Proc, Endpoint), String> {
    let (desk, desk_url) = spawn_role("desk-http", &[])?;
    let (gateway, endpoint) = spawn_gateway(&desk_url, protocol)?;
    Ok((gateway, desk, endpoint))
}

/// Row F: the relay that does no work in front of the HTTP desk.
async fn row_floor(calls: usize) -> Result<Measured, String> {
    let (desk, desk_url) = spawn_role("desk-http", &[])?;
    let (relay, url) = spawn_role("relay", &[(UPSTREAM_ENV, desk_url.as_str())])?;
    let sides = Sides {
        middle: Some(relay.pid()),
        upstream: UpstreamPids::Fixed(desk.pid()),
    };
    let endpoint = Endpoint::Http {
        url,
        token: None,
        more_tokens: Vec::new(),
        modern: false,
    };
    let measured = measure(&endpoint, &sides, calls).await;
    drop(relay);
    drop(desk);
    measured
}

async fn row_countersign(calls: usize, protocol: &str, modern: bool) -> Result<Measured, String> {
    let (gateway, desk, mut endpoint) = spawn_gateway_and_desk(protocol)?;
    if let Endpoint::Http { modern: m, .. } = &mut endpoint {
        *m = modern;
    }
    let sides = Sides {
        middle: Some(gateway.pid()),
        upstream: UpstreamPids::Fixed(desk.pid()),
    };
    let measured = measure(&endpoint, &sides, calls).await;
    drop(gateway);
    drop(desk);
    measured
}

/// The gateway with this binary as its stdio desk (upstream `protocol`), one child per agent
/// session.
async fn row_countersign_stdio(calls: usize, protocol: &str) -> Result<Measured, String> {
    let (gateway, endpoint) = spawn_gateway(ts_agent::STDIO_UPSTREAM, protocol)?;
    let sides = Sides {
        middle: Some(gateway.pid()),
        upstream: UpstreamPids::ChildrenOf(gateway.pid()),
    };
    let measured = measure(&endpoint, &sides, calls).await;
    drop(gateway);
    measured
}

/// mcp-proxy on `port`, fronting this binary as the stdio desk (one child shared).
fn mcp_proxy_command(program: &Path, port: u16) -> Result<Command, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(program);
    cmd.args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--log-level", "WARNING"])
        .args(["-e", ROLE_ENV, "desk-stdio"])
        .arg("--")
        .arg(&exe);
    Ok(cmd)
}

/// supergateway on `port`, fronting this binary as the stdio desk (a child per session).
fn supergateway_command(program: &Path, port: u16) -> Result<Command, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(program);
    // It runs the command through a shell; the desks inherit the role from its environment.
    cmd.env(ROLE_ENV, "desk-stdio")
        .arg("--stdio")
        .arg(shell_quote(&exe.to_string_lossy()))
        .args(["--outputTransport", "streamableHttp", "--stateful"])
        .args(["--port", &port.to_string(), "--logLevel", "none"]);
    Ok(cmd)
}

async fn row_mcp_proxy(calls: usize, program: &Path, dir: &Path) -> Result<Measured, String> {
    let port = free_port();
    let mut proxy = spawn_logged("mcp-proxy", mcp_proxy_command(program, port)?, dir)?;
    wait_for_port(&mut proxy, port).await?;
    let sides = Sides {
        middle: Some(proxy.pid()),
        upstream: UpstreamPids::ChildrenOf(proxy.pid()),
    };
    let endpoint = Endpoint::Http {
        url: format!("http://127.0.0.1:{port}/mcp"),
        token: None,
        more_tokens: Vec::new(),
        modern: false,
    };
    measure(&endpoint, &sides, calls)
        .await
        .map_err(|e| format!("{e}\n    {}", proxy.log_tail()))
}

async fn row_supergateway(calls: usize, program: &Path, dir: &Path) -> Result<Measured, String> {
    let port = free_port();
    let mut proxy = spawn_logged("supergateway", supergateway_command(program, port)?, dir)?;
    wait_for_port(&mut proxy, port).await?;
    let sides = Sides {
        middle: Some(proxy.pid()),
        upstream: UpstreamPids::ChildrenOf(proxy.pid()),
    };
    let endpoint = Endpoint::Http {
        url: format!("http://127.0.0.1:{port}/mcp"),
        token: None,
        more_tokens: Vec::new(),
        modern: false,
    };
    measure(&endpoint, &sides, calls)
        .await
        .map_err(|e| format!("{e}\n    {}", proxy.log_tail()))
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The proxy's executable: from the environment, else where scripts/bench-gateway.sh puts it.
fn locate(env: &str, default: &str, install_hint: &str) -> Result<PathBuf, String> {
    let path = match std::env::var_os(env) {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(default),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "not installed: {} does not exist (set {env}, or run {install_hint})",
            path.display()
        ))
    }
}

fn version_of(program: &Path) -> String {
    Command::new(program)
        .arg("--version")
        .output()
        .ok()
        .map(|o| {
            let mut s = String::from_utf8_lossy(&o.stdout).trim().to_owned();
            if s.is_empty() {
                s = String::from_utf8_lossy(&o.stderr).trim().to_owned();
            }
            s.lines().last().unwrap_or_default().to_owned()
        })
        .unwrap_or_else(|| "?".into())
}

// ---------------------------------------------------------------------------------------------

async fn bench(rows: &str, calls: usize) {
    let wanted = |r: &str| rows.split(',').any(|x| x.trim() == r);
    let dir = std::env::temp_dir().join(format!("countersign-bench-gw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let hint = "scripts/bench-gateway.sh";
    let mcp_proxy = locate(MCP_PROXY_ENV, "target/bench-peers/venv/bin/mcp-proxy", hint);
    let supergateway = locate(
        SUPERGATEWAY_ENV,
        "target/bench-peers/npm/node_modules/.bin/supergateway",
        hint,
    );

    println!("countersign-core gateway benchmark: tools/call {TOOL} on the demo ticket desk");
    println!(
        "{cpus} CPUs; {calls} calls one at a time on one agent session, then {calls} calls from {CALLERS} agents at once (each its own session); {WARMUP_CALLS} warm-up calls before each"
    );
    println!(
        "agents: rmcp 3.11 Streamable HTTP clients (legacy initialize, 2025-11-25, but in rows 1m and 2m) in this process, {}; every other side in its own process",
        if std::env::var_os(KEEPALIVE_ENV).is_some() {
            "keeping their connections (COUNTERSIGN_BENCH_KEEPALIVE)"
        } else {
            "a new connection a request (rmcp's default client)"
        }
    );
    println!(
        "mcp-proxy and supergateway can only put a stdio server behind Streamable HTTP (neither forwards HTTP to HTTP), so they front the desk on stdio; row R is that desk over stdio directly"
    );
    if nodelay() {
        println!("{NODELAY_ENV}=1: TCP_NODELAY on the HTTP desk's and the gateway's connections");
    }
    if let Ok(p) = &mcp_proxy {
        println!("mcp-proxy: {} ({})", version_of(p), p.display());
    }
    if let Ok(p) = &supergateway {
        println!("supergateway: {} ({})", version_of(p), p.display());
    }
    println!();

    let mut results: Vec<Row> = Vec::new();
    let run = |label: &str| {
        eprintln!("running: {label}");
        label.to_owned()
    };
    if wanted("direct") {
        let label = run("1  direct: agent -> desk (HTTP)");
        results.push(Row {
            label,
            outcome: row_direct(calls, false).await,
        });
    }
    if wanted("floor") {
        let label = run("F  floor: a relay that does no work -> desk (HTTP)");
        results.push(Row {
            label,
            outcome: row_floor(calls).await,
        });
    }
    if wanted("countersign") {
        let label = run("2  Countersign gateway -> desk (HTTP, upstream protocol auto)");
        results.push(Row {
            label,
            outcome: row_countersign(calls, "auto", false).await,
        });
    }
    if wanted("countersign-legacy") {
        let label = run("2b Countersign gateway -> desk (HTTP, upstream protocol legacy)");
        results.push(Row {
            label,
            outcome: row_countersign(calls, "legacy", false).await,
        });
    }
    if wanted("direct-2026") {
        let label = run("1m direct, agents on 2026-07-28: agent -> desk (HTTP)");
        results.push(Row {
            label,
            outcome: row_direct(calls, true).await,
        });
    }
    if wanted("countersign-2026") {
        let label = run("2m Countersign gateway -> desk (HTTP, auto), agents on 2026-07-28");
        results.push(Row {
            label,
            outcome: row_countersign(calls, "auto", true).await,
        });
    }
    if wanted("countersign-stdio-legacy") {
        let label = run("2c Countersign gateway -> desk (stdio, upstream protocol legacy)");
        results.push(Row {
            label,
            outcome: row_countersign_stdio(calls, "legacy").await,
        });
    }
    if wanted("countersign-stdio") {
        let label = run("2d Countersign gateway -> desk (stdio, upstream protocol auto)");
        results.push(Row {
            label,
            outcome: row_countersign_stdio(calls, "auto").await,
        });
    }
    if wanted("mcp-proxy") {
        let label = run("3  mcp-proxy -> desk (stdio, one child shared)");
        let outcome = match &mcp_proxy {
            Ok(p) => row_mcp_proxy(calls, p, &dir).await,
            Err(e) => Err(e.clone()),
        };
        results.push(Row { label, outcome });
    }
    if wanted("supergateway") {
        let label = run("4  supergateway --stateful -> desk (stdio, child per session)");
        let outcome = match &supergateway {
            Ok(p) => row_supergateway(calls, p, &dir).await,
            Err(e) => Err(e.clone()),
        };
        results.push(Row { label, outcome });
    }
    if wanted("direct-stdio") {
        let label = run("R  reference: agent -> desk (stdio, child per agent)");
        results.push(Row {
            label,
            outcome: row_direct_stdio(calls).await,
        });
    }

    report(&results);

    let mut ts_rows: Vec<(&str, Result<Run, String>)> = Vec::new();
    if wanted("ts-direct") {
        let label = "T1 TypeScript agent -> desk (stdio, direct)";
        eprintln!("running: {label}");
        ts_rows.push((label, ts_agent::direct(calls).await));
    }
    if wanted("ts-countersign") {
        let label = "T2 TypeScript agent -> Countersign -> desk (stdio)";
        eprintln!("running: {label}");
        ts_rows.push((label, ts_agent::countersign(calls).await));
    }
    if wanted("ts-mcp-proxy") {
        let label = "T3 TypeScript agent -> mcp-proxy -> desk (stdio)";
        eprintln!("running: {label}");
        let outcome = match &mcp_proxy {
            Ok(p) => ts_agent::mcp_proxy(calls, p, &dir).await,
            Err(e) => Err(e.clone()),
        };
        ts_rows.push((label, outcome));
    }
    if wanted("ts-supergateway") {
        let label = "T4 TypeScript agent -> supergateway --stateful -> desk (stdio)";
        eprintln!("running: {label}");
        let outcome = match &supergateway {
            Ok(p) => ts_agent::supergateway(calls, p, &dir).await,
            Err(e) => Err(e.clone()),
        };
        ts_rows.push((label, outcome));
    }
    report_ts(&ts_rows);

    for (row, protocol) in [("sessions", "auto"), ("sessions-legacy", "legacy")] {
        if wanted(row) {
            let label =
                format!("S  Countersign gateway -> desk (HTTP, upstream protocol {protocol})");
            eprintln!("running: {label}");
            report_sessions(&label, row_sessions(protocol).await);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The gateway's resident memory at each of [`SESSION_STEPS`], then after every session closed.
struct SessionsMemory {
    idle: f64,
    steps: Vec<(usize, f64)>,
    after_close: f64,
}

async fn row_sessions(protocol: &str) -> Result<SessionsMemory, String> {
    let (gateway, desk, endpoint) = spawn_gateway_and_desk(protocol)?;
    let pid = gateway.pid();
    let rss = || rss_mib(pid).ok_or_else(|| "the gateway's VmRSS is unreadable".to_owned());
    let hold = std::env::var(HOLD_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .map(Duration::from_secs);
    let settle = || tokio::time::sleep(Duration::from_millis(500));
    let idle = rss()?;
    if let Some(hold) = hold {
        eprintln!("  gateway pid {pid}, idle: holding {hold:?}");
        tokio::time::sleep(hold).await;
    }
    let mut agents = Vec::new();
    let mut steps = Vec::new();
    for (i, &open) in SESSION_STEPS.iter().enumerate() {
        while agents.len() < open {
            let agent = connect(&endpoint, agents.len()).await?;
            // The first session warms what every later one shares (the tools' facts, the
            // upstream's connection pool): a few calls, so its cost is not counted per session.
            let calls = if agents.is_empty() { WARMUP_CALLS } else { 1 };
            call_loop(&agent, calls).await?;
            agents.push(agent);
        }
        settle().await;
        steps.push((open, rss()?));
        if let Some(hold) = hold.filter(|_| i == SESSION_STEPS.len() - 1) {
            eprintln!("  gateway pid {pid}, {open} sessions open: holding {hold:?}");
            tokio::time::sleep(hold).await;
        }
    }
    for agent in agents {
        let _ = agent.cancel().await;
    }
    // The gateway ends an upstream session once its agent's session is gone.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after_close = rss()?;
    drop(gateway);
    drop(desk);
    Ok(SessionsMemory {
        idle,
        steps,
        after_close,
    })
}

fn report_sessions(label: &str, outcome: Result<SessionsMemory, String>) {
    println!("memory per agent session (the gateway's VmRSS, MiB; each session made its calls):");
    let m = match outcome {
        Ok(m) => m,
        Err(e) => {
            println!("  {label}  did not run: {e}\n");
            return;
        }
    };
    let steps: Vec<String> = m
        .steps
        .iter()
        .map(|(n, rss)| format!("{n} open: {rss:.1}"))
        .collect();
    println!("  {label}");
    println!(
        "    idle: {:.1}, {}; all closed: {:.1}",
        m.idle,
        steps.join(", "),
        m.after_close
    );
    if let (Some(first), Some(last)) = (m.steps.first(), m.steps.last()) {
        let per = (last.1 - first.1) / (last.0 - first.0) as f64;
        println!(
            "    each additional session: {per:.2} MiB; target under {TARGET_SESSION_MIB} MiB -> {}",
            if per < TARGET_SESSION_MIB {
                "met"
            } else {
                "NOT met"
            }
        );
    }
    println!();
}

fn report_ts(rows: &[(&str, Result<Run, String>)]) {
    if rows.is_empty() {
        return;
    }
    let width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let direct = rows
        .iter()
        .find(|r| r.0.starts_with("T1"))
        .and_then(|r| r.1.as_ref().ok());
    println!(
        "one TypeScript SDK 1.32 agent (keep-alive connections), one call at a time, each proxy fronting the stdio desk (times in ms; CPU per call):"
    );
    println!(
        "  {:width$}  {:>7} {:>7} {:>8}  {:>11}  {:>9} {:>9}",
        "", "p50", "p99", "calls/s", "+p50 vs T1", "CPU proxy", "CPU desk",
    );
    for (label, outcome) in rows {
        match outcome {
            Ok(r) => println!(
                "  {:width$}  {:>7.3} {:>7.3} {:>8.0}  {:>11}  {:>9} {:>9.3}",
                label,
                r.percentile_ms(0.50),
                r.percentile_ms(0.99),
                r.per_second(),
                direct
                    .map(|d| format!("{:+.3}", r.percentile_ms(0.5) - d.percentile_ms(0.5)))
                    .unwrap_or_default(),
                r.middle_cpu_per_call()
                    .map(|c| format!("{c:.3}"))
                    .unwrap_or_else(|| "-".into()),
                r.upstream_cpu_per_call(),
            ),
            Err(e) => println!("  {label:width$}  did not run: {e}"),
        }
    }
    if let Some((_, Ok(c))) = rows.iter().find(|r| r.0.starts_with("T2")) {
        let cpu = c.middle_cpu_per_call().unwrap_or(f64::NAN);
        println!(
            "  target: Countersign under {TARGET_TS_CPU_MS} ms of CPU per call for this agent: {cpu:.3} ms -> {}",
            if cpu < TARGET_TS_CPU_MS {
                "met"
            } else {
                "NOT met"
            }
        );
    }
    println!();
}

fn report(rows: &[Row]) {
    if rows.is_empty() {
        return;
    }
    // Each row against the direct row of its agents: 2026-07-28 agents (tags ending in "m")
    // against row 1m, the others against row 1.
    let baseline = |row: &Row| {
        let tag = if row
            .label
            .split(' ')
            .next()
            .is_some_and(|t| t.ends_with('m'))
        {
            "1m "
        } else {
            "1 "
        };
        rows.iter()
            .find(|r| r.label.starts_with(tag))
            .and_then(|r| r.outcome.as_ref().ok())
    };
    let width = rows.iter().map(|r| r.label.len()).max().unwrap_or(0);
    for (title, pick) in [
        (
            "one agent, one call at a time",
            (|m: &Measured| &m.sequential) as fn(&Measured) -> &Run,
        ),
        ("16 agents at once", |m: &Measured| &m.concurrent),
    ] {
        println!("{title} (times in ms; CPU = user+system time of that process per call):");
        println!(
            "  {:width$}  {:>7} {:>7} {:>8}  {:>11} {:>10}  {:>9} {:>9}",
            "", "p50", "p99", "calls/s", "+p50 vs 1", "thr vs 1", "CPU proxy", "CPU desk",
        );
        for row in rows {
            match &row.outcome {
                Ok(m) => {
                    let r = pick(m);
                    let base = baseline(row).map(pick);
                    println!(
                        "  {:width$}  {:>7.3} {:>7.3} {:>8.0}  {:>11} {:>10}  {:>9} {:>9.3}",
                        row.label,
                        r.percentile_ms(0.50),
                        r.percentile_ms(0.99),
                        r.per_second(),
                        base.map(|b| format!(
                            "{:+.3}",
                            r.percentile_ms(0.5) - b.percentile_ms(0.5)
                        ))
                        .unwrap_or_default(),
                        base.map(|b| format!("{:.0}%", 100.0 * r.per_second() / b.per_second()))
                            .unwrap_or_default(),
                        r.middle_cpu_per_call()
                            .map(|c| format!("{c:.3}"))
                            .unwrap_or_else(|| "-".into()),
                        r.upstream_cpu_per_call(),
                    );
                }
                Err(e) => println!("  {:width$}  did not run: {e}", row.label),
            }
        }
        println!();
    }

    println!("memory (VmRSS, MiB):");
    println!(
        "  {:width$}  {:>10} {:>18}  {:>22}",
        "", "proxy idle", "proxy, 16 sessions", "desk(s), 16 sessions"
    );
    for row in rows {
        if let Ok(m) = &row.outcome {
            let f = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into());
            println!(
                "  {:width$}  {:>10} {:>18}  {:>22}",
                row.label,
                f(m.idle_rss),
                f(m.rss_16),
                format!("{:.1} in {}", m.upstream_rss_16, m.upstream_count_16),
            );
        }
    }
    println!();

    let found = |prefix: &str| {
        rows.iter()
            .find(|r| r.label.starts_with(prefix))
            .and_then(|r| r.outcome.as_ref().ok())
    };
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    let direct = found("1 ");
    println!("targets (from the issue), against row 1 (row 2m against row 1m):");
    for (prefix, name, base) in [
        ("2 ", "Countersign, upstream auto (the default)", "1 "),
        ("2b", "Countersign, upstream legacy", "1 "),
        ("2c", "Countersign, stdio upstream legacy", "1 "),
        ("2d", "Countersign, stdio upstream auto", "1 "),
        (
            "2m",
            "Countersign, upstream auto, agents on 2026-07-28",
            "1m ",
        ),
    ] {
        let (Some(c), Some(d)) = (found(prefix), found(base)) else {
            continue;
        };
        let added = c.sequential.percentile_ms(0.5) - d.sequential.percentile_ms(0.5);
        let added_16 = c.concurrent.percentile_ms(0.5) - d.concurrent.percentile_ms(0.5);
        let cpu = c.sequential.middle_cpu_per_call().unwrap_or(f64::NAN);
        let cpu_16 = c.concurrent.middle_cpu_per_call().unwrap_or(f64::NAN);
        let thr = c.concurrent.per_second() / d.concurrent.per_second();
        let thr_1 = c.sequential.per_second() / d.sequential.per_second();
        println!("  {name}:");
        println!(
            "    adds < {TARGET_ADDED_P50_MS} ms at p50 (one at a time): {added:.3} ms -> {} (16 at once: {added_16:.3} ms)",
            verdict(added < TARGET_ADDED_P50_MS)
        );
        println!(
            "    CPU < {TARGET_CPU_MS} ms per call: {cpu:.3} ms one at a time, {cpu_16:.3} ms 16 at once -> {}",
            verdict(cpu < TARGET_CPU_MS && cpu_16 < TARGET_CPU_MS)
        );
        println!(
            "    >= {:.0}% of direct throughput (16 at once): {:.0}% -> {} (one at a time: {:.0}%)",
            TARGET_THROUGHPUT * 100.0,
            thr * 100.0,
            verdict(thr >= TARGET_THROUGHPUT),
            thr_1 * 100.0
        );
    }
    println!(
        "  for scale (the issue, TypeScript SDK client, this kind of machine), and measured here:"
    );
    for (prefix, name, (added, cpu)) in [
        ("4 ", "supergateway", SUPERGATEWAY_ISSUE),
        ("3 ", "mcp-proxy", MCP_PROXY_ISSUE),
    ] {
        let here = match (found(prefix), direct) {
            (Some(p), Some(d)) => format!(
                "adds {:.3} ms vs row 1{}, {:.3} ms CPU/call",
                p.sequential.percentile_ms(0.5) - d.sequential.percentile_ms(0.5),
                found("R ")
                    .map(|r| format!(
                        " ({:+.3} vs row R)",
                        p.sequential.percentile_ms(0.5) - r.sequential.percentile_ms(0.5)
                    ))
                    .unwrap_or_default(),
                p.sequential.middle_cpu_per_call().unwrap_or(f64::NAN)
            ),
            _ => "not measured".into(),
        };
        println!("    {name:13} issue: adds ~{added} ms at p50, ~{cpu} ms CPU/call; here: {here}");
    }
}
