//! Soak: does the backend stay the same size and leave nothing behind over a long day?
//!
//! Figures, not assertions: `make soak` (`cargo bench -p countersign-core --bench soak`)
//! prints them and BENCHMARKS.md records runs. This process is the backend (the core, as the
//! app runs it, without the webview); the servers are child processes (this binary again,
//! `COUNTERSIGN_SOAK_ROLE=desk`, serving the demo ticket desk on stdio), so their memory is
//! theirs.
//!
//! 1. questions: `delete_ticket` called on the desk again and again, 8 calls at a time, each
//!    asking the person, who declines (so the ticket stays and the next call asks again);
//!    100,000 questions by default (`COUNTERSIGN_SOAK_QUESTIONS`). The backend's RSS is
//!    sampled every 5,000, and the slope over the second half (after warm-up) printed. The
//!    audit log is on tmpfs (`/dev/shm`): this measures memory, not the disk's fsync.
//! 2. idle servers: 10 desks connected over stdio, then 20 s with nothing to do (a ping round
//!    included); the backend's RSS, its threads and open files.
//! 3. gateway sessions: 1,000 agent sessions (rmcp Streamable HTTP clients, `initialize`),
//!    each listing tools and closing, one after another, through the gateway to a stdio desk
//!    (each agent session gets its own desk child); tasks, open files and child processes
//!    before and after.
//!
//! `COUNTERSIGN_SOAK_PARTS=questions,idle,sessions` picks parts.

#[path = "../tests/common/procs.rs"]
mod procs;

use std::time::{Duration, Instant};

use countersign_core::config::GatewayConfig;
use countersign_core::gateway::Gateway;
use countersign_core::session::{Backoff, DEFAULT_PING_EVERY};
use countersign_core::settings::SettingsStore;
use countersign_core::{
    Answer, AskEvent, AuditLog, Broker, ServerConfig, SessionManager, SessionState,
};
use countersign_demo_server::{TicketDesk, TicketStore, serve_stdio};
use rmcp::model::{ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const ROLE_ENV: &str = "COUNTERSIGN_SOAK_ROLE";
const PARTS_ENV: &str = "COUNTERSIGN_SOAK_PARTS";
const QUESTIONS_ENV: &str = "COUNTERSIGN_SOAK_QUESTIONS";
const SESSIONS_ENV: &str = "COUNTERSIGN_SOAK_SESSIONS";

const QUESTIONS: usize = 100_000;
const SAMPLE_EVERY: usize = 5_000;
const IN_FLIGHT: usize = 8;
const IDLE_SERVERS: usize = 10;
const IDLE_FOR: Duration = Duration::from_secs(20);
const SESSIONS: usize = 1_000;

fn main() {
    if std::env::var(ROLE_ENV).as_deref() == Ok("desk") {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let _ = runtime.block_on(serve_stdio(TicketDesk::new(TicketStore::seeded())));
        return;
    }
    // `cargo bench` passes `--bench`; nothing else is taken from the command line.
    let parts = std::env::var(PARTS_ENV).unwrap_or_else(|_| "questions,idle,sessions".into());
    let number = |env: &str, default: usize| {
        std::env::var(env)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = scratch();
    println!(
        "soak: the backend is this process (pid {})",
        std::process::id()
    );
    runtime.block_on(async {
        if parts.contains("questions") {
            questions(&dir, number(QUESTIONS_ENV, QUESTIONS)).await;
        }
        if parts.contains("idle") {
            idle_servers(&dir).await;
        }
        if parts.contains("sessions") {
            gateway_sessions(&dir, number(SESSIONS_ENV, SESSIONS)).await;
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// Private scratch space on tmpfs when there is one.
fn scratch() -> std::path::PathBuf {
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("countersign-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn desk_config(name: &str) -> ServerConfig {
    let exe = std::env::current_exe().expect("own path");
    let mut config = ServerConfig::stdio(name, exe.to_str().expect("UTF-8 path"), &[]);
    if let countersign_core::config::TransportConfig::Stdio { env, .. } = &mut config.transport {
        env.insert(ROLE_ENV.into(), "desk".into());
    }
    config
}

// ---------------------------------------------------------------------------------------------
// What this process holds.

fn status_field(name: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(name))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn rss_mib() -> f64 {
    status_field("VmRSS:").unwrap_or(0.0) / 1024.0
}

fn threads() -> usize {
    status_field("Threads:").unwrap_or(0.0) as usize
}

fn open_files() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// Least-squares slope of `(x, y)` points.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let (num, den) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| {
        (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
    });
    if den == 0.0 { 0.0 } else { num / den }
}

async fn wait_ready(sessions: &SessionManager, names: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if names
            .iter()
            .all(|n| matches!(sessions.state(n), Some(SessionState::Ready { .. })))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("servers not ready: {:?}", sessions.states());
}

// ---------------------------------------------------------------------------------------------
// 1. Questions.

async fn questions(dir: &std::path::Path, total: usize) {
    println!("\n1. {total} questions, {IN_FLIGHT} at a time, each declined");
    let audit = AuditLog::open(dir.join("audit.jsonl")).expect("audit log");
    let broker = Broker::unlimited(audit);
    let sessions = SessionManager::new(broker.clone());
    sessions.start(vec![desk_config("desk")]).await;
    wait_ready(&sessions, &["desk".into()]).await;

    // The person: declines each question as it appears.
    let mut events = broker.subscribe();
    let person = broker.clone();
    let answerer = tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(AskEvent::Added { ask }) => {
                    let _ = person.answer(ask.id, Answer::Decline);
                }
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => break,
            }
        }
    });

    let started = Instant::now();
    let mut points = Vec::new();
    let mut done = 0;
    println!(
        "   {:>8}  {:>9}  {:>10}",
        "answered", "RSS MiB", "per second"
    );
    while done < total {
        let batch = SAMPLE_EVERY.min(total - done);
        let t0 = Instant::now();
        let calls = (0..IN_FLIGHT).map(|lane| {
            let sessions = sessions.clone();
            let share = batch / IN_FLIGHT + usize::from(lane < batch % IN_FLIGHT);
            async move {
                for _ in 0..share {
                    let args = json!({"id": "t1"}).as_object().cloned();
                    let result = sessions
                        .call_tool("desk", "delete_ticket", args, CancellationToken::new())
                        .await
                        .expect("delete_ticket");
                    let said = serde_json::to_string(&result.content).unwrap_or_default();
                    assert!(said.contains("declined"), "{said}");
                }
            }
        });
        futures::future::join_all(calls).await;
        done += batch;
        let rss = rss_mib();
        points.push((done as f64, rss));
        println!(
            "   {done:>8}  {rss:>9.1}  {:>10.0}",
            batch as f64 / t0.elapsed().as_secs_f64()
        );
    }
    let half = &points[points.len() / 2..];
    let per_10k = slope(half) * 10_000.0;
    println!(
        "   {} questions in {:.1} s; RSS {:.1} MiB at the end, slope over the second half {:+.3} MiB per 10,000 questions",
        total,
        started.elapsed().as_secs_f64(),
        rss_mib(),
        per_10k
    );
    answerer.abort();
    sessions.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// 2. Idle servers.

async fn idle_servers(dir: &std::path::Path) {
    println!(
        "\n2. {IDLE_SERVERS} desks connected over stdio, idle for {} s",
        IDLE_FOR.as_secs()
    );
    let before = rss_mib();
    let audit = AuditLog::open(dir.join("idle-audit.jsonl")).expect("audit log");
    let sessions = SessionManager::with_timing(
        Broker::new(audit),
        Backoff {
            first: Duration::from_millis(500),
            max: Duration::from_secs(30),
        },
        DEFAULT_PING_EVERY,
    );
    let names: Vec<String> = (0..IDLE_SERVERS).map(|i| format!("desk-{i}")).collect();
    sessions
        .start(names.iter().map(|n| desk_config(n)).collect())
        .await;
    wait_ready(&sessions, &names).await;
    let mut peak: f64 = 0.0;
    let idle_start = Instant::now();
    while idle_start.elapsed() < IDLE_FOR {
        peak = peak.max(rss_mib());
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    println!(
        "   backend RSS {:.1} MiB (peak {:.1}; {:.1} before the servers), {} threads, {} open files, {} server processes",
        rss_mib(),
        peak,
        before,
        threads(),
        open_files(),
        procs::descendants(std::process::id()).len()
    );
    sessions.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// 3. Gateway sessions.

fn agent_config(n: usize) -> ClientConfig {
    let mut info = Implementation::default();
    info.name = format!("soak-agent-{n}");
    info.version = "1.0".into();
    let mut client = ClientConfig::default();
    client.client_info = info;
    client.protocol_version = ProtocolVersion::V_2025_11_25;
    client
}

async fn gateway_sessions(dir: &std::path::Path, total: usize) {
    println!("\n3. {total} gateway agent sessions opened, used and closed, one after another");
    let config = GatewayConfig {
        port: 0,
        ..GatewayConfig::default()
    };
    let audit = AuditLog::open(dir.join("gateway-audit.jsonl")).expect("audit log");
    let gateway = Gateway::new(
        config,
        vec![desk_config("desk")],
        Broker::new(audit),
        SettingsStore::default(),
        dir.join("gateway-token"),
    )
    .expect("gateway");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = gateway.serve(listener);
    let url = format!("http://{addr}/mcp/desk");
    let token = gateway.token().to_owned();

    let settle = || tokio::time::sleep(Duration::from_secs(2));
    settle().await;
    // The gateway's own thread has a runtime of its own: its tasks count too.
    let tasks = || alive_tasks() + gateway.tasks_alive().unwrap_or(0);
    let before = (
        tasks(),
        open_files(),
        procs::descendants(std::process::id()).len(),
        rss_mib(),
    );
    let started = Instant::now();
    for n in 0..total {
        let mut transport = StreamableHttpClientTransportConfig::with_uri(url.clone());
        transport.auth_header = Some(token.clone());
        let agent = serve_client_with_lifecycle(
            agent_config(n),
            StreamableHttpClientTransport::from_config(transport),
            ClientLifecycleMode::Initialize,
        )
        .await
        .expect("initialize through the gateway");
        let tools = agent.list_all_tools().await.expect("tools/list");
        assert!(!tools.is_empty());
        agent.cancel().await.expect("close");
        if (n + 1) % 250 == 0 {
            println!(
                "   {:>5} sessions: {} tasks, {} open files, {} child processes, RSS {:.1} MiB",
                n + 1,
                tasks(),
                open_files(),
                procs::descendants(std::process::id()).len(),
                rss_mib()
            );
        }
    }
    let elapsed = started.elapsed();
    settle().await;
    let after = (
        tasks(),
        open_files(),
        procs::descendants(std::process::id()).len(),
        rss_mib(),
    );
    println!(
        "   {total} sessions in {:.1} s ({:.1} ms each)",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1000.0 / total as f64
    );
    println!(
        "   before: {} tasks, {} open files, {} child processes, RSS {:.1} MiB",
        before.0, before.1, before.2, before.3
    );
    println!(
        "   after:  {} tasks, {} open files, {} child processes, RSS {:.1} MiB",
        after.0, after.1, after.2, after.3
    );
    gateway.shutdown().await;
}
