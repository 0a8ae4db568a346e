//! How long a question takes to reach the person's side, and the answer to get back.
//!
//! Figures, not assertions: `cargo bench -p countersign-core --bench asks` prints them and
//! BENCHMARKS.md (repo root) records runs.
//!
//! 1. In process: an rmcp server and Countersign's client [`Handler`] over `tokio::io::duplex`,
//!    wired as a child's pipes are (raw-request `TapRead` under rmcp's `AsyncRwTransport`,
//!    inside `Tapped`). "Ask hop": the server about to send `elicitation/create` ->
//!    `AskEvent::Added` in a broker subscriber. "Answer hop": the subscriber about to call
//!    `broker.answer(...)` -> the server holding the `ElicitResult`.
//! 2. Over stdio: the same hops with the server as a child process, connected through
//!    `SessionManager` (spawn, tap, handler, broker: the product path). The child is this very
//!    binary, re-executed with `COUNTERSIGN_BENCH_ROLE=server`.
//! 3. The broker with 10 to 10,000 asks pending: `answer` and `withdraw` on asks spread
//!    through the set, beside a control (a plain map of ask-sized values).
//!
//! Between 2 and 3 it prints where a hop's CPU time goes: each CPU-bound step (rmcp parse and
//! serialize, raw tap, schema parse, `broker.open`, answer validation) alone.
//!
//! Select parts with `COUNTERSIGN_BENCH_PARTS=hops,parts,scale`.
//!
//! Both hops are measured with wall-clock `SystemTime` in unix nanoseconds (one machine, one
//! clock, so it works across the process boundary): the server writes its send time into the
//! question's message, the subscriber puts its answer time into the `stamp` field of the
//! content, and the server returns its answer-hop samples in the tool result.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use countersign_core::ask::schema::parse_form_schema;
use countersign_core::config::{ProtocolChoice, TransportConfig};
use countersign_core::mcp::handler::{Elicitor, Handler, client_config};
use countersign_core::mcp::raw::{RawRequests, TapRead};
use countersign_core::mcp::tap::{Tap, Tapped};
use countersign_core::{
    Answer, AskEvent, AskKind, Asker, AuditLog, Broker, CancelReason, Endpoint, NewAsk, PendingAsk,
    ServerConfig as CsServerConfig, SessionManager, SessionState,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ElicitationAction, ElicitationSchema, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{ClientLifecycleMode, RequestContext, serve_client_with_lifecycle};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// Set to `server` in the child: this binary then serves the storm tool on stdio.
const ROLE_ENV: &str = "COUNTERSIGN_BENCH_ROLE";
const PARTS_ENV: &str = "COUNTERSIGN_BENCH_PARTS";
const STORM: &str = "storm";

/// A broker without the per-server limit of waiting questions or the question budget: the
/// storms and the scale runs keep thousands open from one server, which the defaults refuse.
fn unlimited(audit: AuditLog) -> Broker {
    Broker::unlimited(audit)
}
/// Marks the send time inside the question's message.
const SENT_MARK: &str = "sent_ns=";

const MEASURED_ASKS: usize = 10_000;
const SYNCED_ASKS: usize = 1_000;
const WARMUP_ASKS: usize = 500;
const SCALE_SIZES: [usize; 4] = [10, 100, 1_000, 10_000];
const SCALE_OPS: usize = 10_000;
const PART_ITERS: usize = 10_000;

fn main() {
    if std::env::var(ROLE_ENV).as_deref() == Ok("server") {
        serve_storm_on_stdio();
        return;
    }
    // `COUNTERSIGN_BENCH_PARTS=scale` (comma-separated: hops, parts, scale) runs only those.
    let parts = std::env::var(PARTS_ENV).unwrap_or_else(|_| "hops,parts,scale".into());
    let run = |part: &str| parts.split(',').any(|p| p.trim() == part);
    let dir = std::env::temp_dir().join(format!("countersign-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");

    println!("countersign-core asks benchmark (times in µs; nearest-rank percentiles)");
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    println!(
        "{cpus} CPUs; bench side: tokio multi-thread runtime ({cpus} workers); stdio child: current-thread runtime"
    );

    if run("hops") {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            println!();
            println!("1. in process: rmcp server <-duplex-> TapRead/Tapped -> Handler -> Broker -> subscriber (legacy initialize)");
            let audit = AuditLog::open_unsynced(dir.join("in-process.jsonl")).expect("audit");
            let storm = in_process_storm(unlimited(audit), MEASURED_ASKS).await;
            storm.print("audit fsync off", MEASURED_ASKS);
            let audit = AuditLog::open(dir.join("in-process-synced.jsonl")).expect("audit");
            let storm = in_process_storm(unlimited(audit), SYNCED_ASKS).await;
            storm.print("audit fsync ON (the default)", SYNCED_ASKS);

            println!();
            println!("2. over stdio: SessionManager -> child process (this binary, {ROLE_ENV}=server) (legacy initialize)");
            let audit = AuditLog::open_unsynced(dir.join("stdio.jsonl")).expect("audit");
            let storm = stdio_storm(unlimited(audit), MEASURED_ASKS).await;
            storm.print("audit fsync off", MEASURED_ASKS);
            let audit = AuditLog::open(dir.join("stdio-synced.jsonl")).expect("audit");
            let storm = stdio_storm(unlimited(audit), SYNCED_ASKS).await;
            storm.print("audit fsync ON (the default)", SYNCED_ASKS);
        });
    }

    if run("parts") {
        println!();
        println!("   where a hop's CPU time goes: each step alone, {PART_ITERS} runs");
        hop_parts(&dir.join("parts.jsonl"));
    }

    if run("scale") {
        println!();
        println!(
            "3. broker at scale (audit fsync off): {SCALE_OPS} ops per size on asks picked at random from the pending set"
        );
        broker_at_scale(&dir.join("scale.jsonl"));
    }

    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// The server side: one tool, `storm {n}`, that asks n questions one after the other.

#[derive(Clone)]
struct StormServer;

fn storm_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "confirm": {"type": "boolean", "title": "Go on?"},
            "stamp": {"type": "string", "title": "Answer time (unix ns)"}
        },
        "required": ["confirm", "stamp"]
    })
}

impl ServerHandler for StormServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("countersign-bench-storm", "0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let input =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let Value::Object(input) = input else {
            unreachable!()
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            STORM,
            "Asks n form questions in a row and returns the answer-hop samples (ns) as JSON",
            Arc::new(input as JsonObject),
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != STORM {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {}", request.name),
                None,
            ));
        }
        let n = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("n"))
            .and_then(Value::as_u64)
            .ok_or_else(|| ErrorData::invalid_params("storm needs an integer n", None))?;
        let schema: ElicitationSchema = serde_json::from_value(storm_schema())
            .map_err(|e| ErrorData::internal_error(format!("schema: {e}"), None))?;
        let mut answer_hops_ns: Vec<u64> = Vec::with_capacity(n as usize);
        for i in 0..n {
            let sent = unix_ns();
            let params = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: format!("storm question {i} {SENT_MARK}{sent}"),
                requested_schema: schema.clone(),
            };
            let result = context
                .peer
                .create_elicitation_with_timeout(params, Some(Duration::from_secs(60)))
                .await
                .map_err(|e| ErrorData::internal_error(format!("question {i}: {e}"), None))?;
            let received = unix_ns();
            let stamp = match (&result.action, &result.content) {
                (ElicitationAction::Accept, Some(content)) => content
                    .get("stamp")
                    .and_then(Value::as_str)
                    .and_then(|s| s.parse::<u64>().ok()),
                _ => None,
            };
            let Some(stamp) = stamp else {
                return Err(ErrorData::internal_error(
                    format!("question {i}: expected accept with a stamp, got {result:?}"),
                    None,
                ));
            };
            answer_hops_ns.push(received.saturating_sub(stamp));
        }
        let text = serde_json::to_string(&answer_hops_ns).expect("numbers serialize");
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// The child process: serve the storm tool on stdin/stdout until the client goes away.
fn serve_storm_on_stdio() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        match StormServer.serve(rmcp::transport::stdio()).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => eprintln!("storm server: handshake failed: {e}"),
        }
    });
}

// ---------------------------------------------------------------------------------------------
// The person's side: a broker subscriber that accepts every question the moment it appears.

struct SubscriberSamples {
    ask_hops_ns: Vec<u64>,
    /// How long the `broker.answer(...)` call itself took (validation, audit, wake-up).
    answer_calls_ns: Vec<u64>,
}

/// Answers `n` asks, then returns. Must be subscribed before the first ask is opened.
fn spawn_answerer(
    broker: Broker,
    mut events: broadcast::Receiver<AskEvent>,
    n: usize,
) -> tokio::task::JoinHandle<SubscriberSamples> {
    tokio::spawn(async move {
        let mut samples = SubscriberSamples {
            ask_hops_ns: Vec::with_capacity(n),
            answer_calls_ns: Vec::with_capacity(n),
        };
        while samples.ask_hops_ns.len() < n {
            let ask = match events.recv().await {
                Ok(AskEvent::Added { ask }) => *ask,
                Ok(AskEvent::Resolved { .. } | AskEvent::UrlCompleted { .. }) => continue,
                Err(broadcast::error::RecvError::Lagged(k)) => panic!("subscriber lagged by {k}"),
                Err(broadcast::error::RecvError::Closed) => panic!("broker gone"),
            };
            let arrived = unix_ns();
            let AskKind::Form { message, .. } = &ask.kind else {
                panic!("expected a form ask, got {:?}", ask.kind)
            };
            let sent: u64 = message
                .rsplit_once(SENT_MARK)
                .and_then(|(_, t)| t.parse().ok())
                .expect("send time in the message");
            samples.ask_hops_ns.push(arrived.saturating_sub(sent));

            let mut content = Map::new();
            content.insert("confirm".into(), Value::Bool(true));
            let stamp = unix_ns();
            content.insert("stamp".into(), Value::String(stamp.to_string()));
            let call = Instant::now();
            broker
                .answer(
                    ask.id,
                    Answer::Accept {
                        content: Some(content),
                    },
                )
                .expect("answer taken");
            samples
                .answer_calls_ns
                .push(call.elapsed().as_nanos() as u64);
        }
        samples
    })
}

struct StormSamples {
    ask_hops_ns: Vec<u64>,
    answer_hops_ns: Vec<u64>,
    answer_calls_ns: Vec<u64>,
    wall: Duration,
}

impl StormSamples {
    fn print(self, label: &str, n: usize) {
        assert_eq!(self.ask_hops_ns.len(), n);
        assert_eq!(self.answer_hops_ns.len(), n);
        println!(
            "  {label}: {n} asks in {:.2} s ({:.0} asks/s, one at a time)",
            self.wall.as_secs_f64(),
            n as f64 / self.wall.as_secs_f64()
        );
        println!("    ask hop      {}", Stats::of(self.ask_hops_ns).line(1));
        println!(
            "    answer hop   {}",
            Stats::of(self.answer_hops_ns).line(1)
        );
        println!(
            "      of which broker.answer() {}",
            Stats::of(self.answer_calls_ns).line(1)
        );
    }
}

fn parse_samples(result: &CallToolResult) -> Vec<u64> {
    let content = serde_json::to_value(&result.content).expect("content serializes");
    let text = content
        .as_array()
        .and_then(|blocks| blocks.first())
        .and_then(|b| b.get("text"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("storm returned no text: {content}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("storm returned {text:.200}: {e}"))
}

fn storm_args(n: usize) -> Option<Map<String, Value>> {
    json!({ "n": n }).as_object().cloned()
}

// ---------------------------------------------------------------------------------------------
// 1. In process.

async fn in_process_storm(broker: Broker, n: usize) -> StormSamples {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(async move { StormServer.serve(server_io).await });

    // Wired as `ChildTransport` wires a child's pipes: the raw tap reads beside rmcp.
    let tap = Tap::new(broker.clone());
    let raw = RawRequests::new();
    let handler = Handler {
        elicitor: Elicitor {
            broker: broker.clone(),
            asker: Asker {
                server: STORM.into(),
                endpoint: Endpoint::Stdio {
                    command: "in-process duplex".into(),
                },
                agent: None,
                declared: None,
                agent_id: None,
            },
            answer_timeout: Duration::from_secs(60),
            session: 1,
        },
        tap: tap.clone(),
        raw: raw.clone(),
        config: client_config(ProtocolVersion::V_2025_11_25),
    };
    let (read, write) = tokio::io::split(client_io);
    let transport = Tapped {
        inner: AsyncRwTransport::new_client(TapRead::new(read, raw), write),
        tap,
    };
    let client = serve_client_with_lifecycle(handler, transport, ClientLifecycleMode::Initialize)
        .await
        .expect("client handshake");
    let server = server
        .await
        .expect("server task")
        .expect("server handshake");

    let call = |k: usize| {
        let answerer = spawn_answerer(broker.clone(), broker.subscribe(), k);
        let mut params = CallToolRequestParams::new(STORM);
        params.arguments = storm_args(k);
        let peer = client.peer().clone();
        async move {
            let start = Instant::now();
            let result = peer.call_tool(params).await.expect("storm call");
            let wall = start.elapsed();
            let subscriber = answerer.await.expect("answerer");
            (parse_samples(&result), subscriber, wall)
        }
    };
    let _ = call(WARMUP_ASKS).await;
    let (answer_hops_ns, subscriber, wall) = call(n).await;

    let _ = client.cancel().await;
    let _ = server.cancel().await;
    StormSamples {
        ask_hops_ns: subscriber.ask_hops_ns,
        answer_hops_ns,
        answer_calls_ns: subscriber.answer_calls_ns,
        wall,
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Over stdio, through SessionManager.

async fn stdio_storm(broker: Broker, n: usize) -> StormSamples {
    let exe = std::env::current_exe().expect("own path");
    let mut config = CsServerConfig::stdio(STORM, exe.to_str().expect("utf-8 path"), &[]);
    if let TransportConfig::Stdio { env, .. } = &mut config.transport {
        env.insert(ROLE_ENV.into(), "server".into());
    }
    // rmcp forbids server-to-client requests on 2026-07-28 sessions; `elicitation/create`
    // needs an `initialize` (2025-11-25) session.
    config.protocol = ProtocolChoice::Legacy;
    let sessions = SessionManager::new(broker.clone());
    sessions.start(vec![config]).await;
    let state = sessions.wait_ready(STORM, Duration::from_secs(30)).await;
    assert!(
        matches!(state, Some(SessionState::Ready { .. })),
        "storm child not ready: {state:?}; stderr: {:?}",
        sessions.stderr_tail(STORM)
    );

    let call = |k: usize| {
        let answerer = spawn_answerer(broker.clone(), broker.subscribe(), k);
        let sessions = sessions.clone();
        async move {
            let start = Instant::now();
            let result = sessions
                .call_tool(STORM, STORM, storm_args(k), CancellationToken::new())
                .await
                .unwrap_or_else(|e| {
                    panic!("storm call: {e}; stderr: {:?}", sessions.stderr_tail(STORM))
                });
            let wall = start.elapsed();
            let subscriber = answerer.await.expect("answerer");
            (parse_samples(&result), subscriber, wall)
        }
    };
    let _ = call(WARMUP_ASKS).await;
    let (answer_hops_ns, subscriber, wall) = call(n).await;

    sessions.shutdown().await;
    StormSamples {
        ask_hops_ns: subscriber.ask_hops_ns,
        answer_hops_ns,
        answer_calls_ns: subscriber.answer_calls_ns,
        wall,
    }
}

// ---------------------------------------------------------------------------------------------
// The CPU-bound steps of a hop, each alone, to tell them from wake-ups and I/O.

fn time_each(iters: usize, mut f: impl FnMut()) -> Stats {
    for _ in 0..iters / 10 {
        f();
    }
    let samples = (0..iters)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_nanos() as u64
        })
        .collect();
    Stats::of(samples)
}

fn hop_parts(audit_path: &Path) {
    let schema = storm_schema();
    let params = json!({
        "mode": "form",
        "message": format!("storm question 1 {SENT_MARK}{}", unix_ns()),
        "requestedSchema": schema,
    });
    let line = serde_json::to_vec(&json!({
        "jsonrpc": "2.0", "id": 7, "method": "elicitation/create", "params": params,
    }))
    .expect("line");
    let form = parse_form_schema(&schema).expect("schema parses");
    let content = json!({"confirm": true, "stamp": unix_ns().to_string()});
    let reply = serde_json::to_vec(&json!({
        "jsonrpc": "2.0", "id": 7, "result": {"action": "accept", "content": content},
    }))
    .expect("reply");
    let broker = unlimited(AuditLog::open_unsynced(audit_path).expect("audit"));
    let mut events = broker.subscribe();

    let rows: Vec<(&str, Stats)> = vec![
        (
            "ask: rmcp parses the request line (typed)",
            time_each(PART_ITERS, || {
                let m: rmcp::model::ServerJsonRpcMessage =
                    serde_json::from_slice(&line).expect("parses");
                std::hint::black_box(m);
            }),
        ),
        ("ask: rmcp serializes the request (server side)", {
            let m: rmcp::model::ServerJsonRpcMessage =
                serde_json::from_slice(&line).expect("parses");
            time_each(PART_ITERS, || {
                std::hint::black_box(serde_json::to_vec(&m).expect("serializes"));
            })
        }),
        (
            "ask: raw tap keeps the request (RawRequests::observe + take)",
            time_each(PART_ITERS, || {
                let raw = RawRequests::default();
                raw.observe(&line);
                std::hint::black_box(raw.take(&rmcp::model::NumberOrString::Number(7)));
            }),
        ),
        (
            "ask: parse_form_schema (incl. a jsonschema validator)",
            time_each(PART_ITERS, || {
                std::hint::black_box(parse_form_schema(&schema).expect("parses"));
            }),
        ),
        ("ask: broker.open (audit write unsynced, broadcast)", {
            let new_ask = NewAsk {
                asker: Asker {
                    server: STORM.into(),
                    endpoint: Endpoint::Stdio {
                        command: "parts".into(),
                    },
                    agent: None,
                    declared: None,
                    agent_id: None,
                },
                kind: AskKind::Form {
                    message: "m".into(),
                    schema: form.clone(),
                },
                request: params.clone(),
                timeout: Some(Duration::from_secs(60)),
                session: 1,
            };
            let samples = (0..PART_ITERS)
                .map(|_| {
                    let new_ask = new_ask.clone();
                    let start = Instant::now();
                    let ask = broker.open(new_ask).expect("no limit");
                    let took = start.elapsed().as_nanos() as u64;
                    drop(ask);
                    while events.try_recv().is_ok() {}
                    took
                })
                .collect();
            Stats::of(samples)
        }),
        (
            "answer: validate_answer (builds a jsonschema validator)",
            time_each(PART_ITERS, || {
                std::hint::black_box(
                    countersign_core::ask::schema::validate_answer(&form, &schema, &content)
                        .expect("valid"),
                );
            }),
        ),
        (
            "answer: rmcp parses the reply line (typed, server side)",
            time_each(PART_ITERS, || {
                let m: rmcp::model::ClientJsonRpcMessage =
                    serde_json::from_slice(&reply).expect("parses");
                std::hint::black_box(m);
            }),
        ),
    ];
    for (name, stats) in rows {
        println!(
            "    {name:<62} p50 {:>7.1}  p99 {:>7.1}",
            stats.p50, stats.p99
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 3. The broker with many asks pending.

fn scale_ask(schema: &Value) -> NewAsk {
    NewAsk {
        asker: Asker {
            server: "scale".into(),
            endpoint: Endpoint::Stdio {
                command: "scale".into(),
            },
            agent: None,
            declared: None,
            agent_id: None,
        },
        kind: AskKind::Form {
            message: "Go on?".into(),
            schema: parse_form_schema(schema).expect("schema parses"),
        },
        request: json!({"message": "Go on?", "requestedSchema": schema}),
        timeout: None,
        session: 1,
    }
}

/// xorshift64*: spreads picks over the pending set without a dependency.
struct Picker(u64);

impl Picker {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n as u64) as usize
    }
}

fn broker_at_scale(audit_path: &Path) {
    let schema = storm_schema();
    let template = scale_ask(&schema);
    println!(
        "  {:>7}  {:>26}  {:>26}  {:>20}  {:>26}",
        "pending",
        "answer(Decline) p50 / p99",
        "withdraw(Server) p50 / p99",
        "open p50 / p99",
        "control: map remove+drop",
    );
    // `COUNTERSIGN_BENCH_SCALE_SIZES=10000` (comma-separated) picks other sizes, e.g. to profile one.
    let sizes: Vec<usize> = match std::env::var("COUNTERSIGN_BENCH_SCALE_SIZES") {
        Ok(list) => list
            .split(',')
            .filter_map(|n| n.trim().parse().ok())
            .collect(),
        Err(_) => SCALE_SIZES.to_vec(),
    };
    for &size in &sizes {
        let broker = unlimited(AuditLog::open_unsynced(audit_path).expect("audit"));
        // A subscriber, as the shell always has one; drained outside the timed section.
        let mut events = broker.subscribe();
        let drain = |events: &mut broadcast::Receiver<AskEvent>| while events.try_recv().is_ok() {};
        let mut pending: Vec<PendingAsk> = (0..size)
            .map(|_| broker.open(template.clone()).expect("no limit"))
            .collect();
        drain(&mut events);
        let mut picker = Picker(0x9E37_79B9_7F4A_7C15 ^ size as u64);
        let mut answer_ns = Vec::with_capacity(SCALE_OPS);
        let mut withdraw_ns = Vec::with_capacity(SCALE_OPS);
        let mut open_ns = Vec::with_capacity(2 * SCALE_OPS);
        for op in 0..2 * SCALE_OPS {
            let slot = picker.below(size);
            let id = pending[slot].id();
            let start = Instant::now();
            if op % 2 == 0 {
                let r = broker.answer(id, Answer::Decline);
                answer_ns.push(start.elapsed().as_nanos() as u64);
                assert!(r.is_ok());
            } else {
                let r = broker.withdraw(id, CancelReason::Server);
                withdraw_ns.push(start.elapsed().as_nanos() as u64);
                assert!(r);
            }
            // Keep the set at `size`: replace the ended ask with a fresh one.
            let fresh = template.clone();
            let start = Instant::now();
            let opened = broker.open(fresh).expect("no limit");
            open_ns.push(start.elapsed().as_nanos() as u64);
            drop(std::mem::replace(&mut pending[slot], opened));
            drain(&mut events);
        }
        assert_eq!(broker.pending().len(), size);
        drop(pending);
        drop(broker);
        let _ = std::fs::remove_file(audit_path);

        // Control: no broker, just a map of `size` ask-sized values (an `Ask` holds the same
        // schema tree) and the same random remove, drop and refill. If this grows with the size
        // as the broker does, the growth is the memory of the asks (freeing a cold tree of
        // small allocations), not the broker's bookkeeping.
        let mut map: std::collections::HashMap<usize, NewAsk> =
            (0..size).map(|k| (k, template.clone())).collect();
        let mut control_ns = Vec::with_capacity(SCALE_OPS);
        for _ in 0..SCALE_OPS {
            let key = picker.below(size);
            let start = Instant::now();
            drop(map.remove(&key));
            control_ns.push(start.elapsed().as_nanos() as u64);
            map.insert(key, template.clone());
        }
        drop(map);

        let (a, w, o, c) = (
            Stats::of(answer_ns),
            Stats::of(withdraw_ns),
            Stats::of(open_ns),
            Stats::of(control_ns),
        );
        println!(
            "  {:>7}  {:>26}  {:>26}  {:>20}  {:>26}",
            size,
            format!("{:.2} / {:.2}", a.p50, a.p99),
            format!("{:.2} / {:.2}", w.p50, w.p99),
            format!("{:.2} / {:.2}", o.p50, o.p99),
            format!("{:.2} / {:.2}", c.p50, c.p99),
        );
    }
}

// ---------------------------------------------------------------------------------------------

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Percentiles (nearest rank) in µs.
struct Stats {
    n: usize,
    p50: f64,
    p99: f64,
    max: f64,
}

impl Stats {
    fn of(mut ns: Vec<u64>) -> Stats {
        assert!(!ns.is_empty());
        ns.sort_unstable();
        let rank = |p: f64| ns[((p * ns.len() as f64).ceil() as usize).clamp(1, ns.len()) - 1];
        let us = |v: u64| v as f64 / 1_000.0;
        Stats {
            n: ns.len(),
            p50: us(rank(0.50)),
            p99: us(rank(0.99)),
            max: us(*ns.last().unwrap()),
        }
    }

    fn line(&self, decimals: usize) -> String {
        format!(
            "p50 {:>8.d$}  p99 {:>8.d$}  max {:>9.d$}  (n={})",
            self.p50,
            self.p99,
            self.max,
            self.n,
            d = decimals
        )
    }
}
