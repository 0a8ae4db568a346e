//! The built `countersign-bridge` against a real Streamable HTTP MCP server in this process: the
//! demo desk behind a small front that stands in for the gateway (bearer token, `/mcp/demo`),
//! driven line by line over the child's stdin and stdout as an agent would.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use axum::{
    extract::Request,
    http::StatusCode,
    middleware::Next,
    response::{IntoResponse, Response},
};
use countersign_demo_server::{TicketDesk, TicketStore};
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    },
    service::RequestContext,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

mod common;

use common::{Bridge, Scratch, closed_port, error_message, first_text, initialize, meta_2026};

const TOKEN: &str = "test-token-3f9a";

/// One HTTP request as the front saw it.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    path: String,
    session: Option<String>,
    version: Option<String>,
    mcp_method: Option<String>,
    mcp_name: Option<String>,
    mcp_param_region: Option<String>,
}

impl Seen {
    fn of(request: &Request) -> Self {
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        Self {
            method: request.method().to_string(),
            path: request.uri().path().to_owned(),
            session: header("mcp-session-id"),
            version: header("mcp-protocol-version"),
            mcp_method: header("mcp-method"),
            mcp_name: header("mcp-name"),
            mcp_param_region: header("mcp-param-region"),
        }
    }
}

/// A server whose one tool routes on an argument (`x-mcp-header`), which 2026-07-28 clients
/// must repeat in an `Mcp-Param-Region` header.
#[derive(Clone)]
struct Regions;

fn deploy_tool() -> Tool {
    let schema = json!({"type": "object", "required": ["region"], "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "note": {"type": "string"}
    }});
    Tool::new(
        "deploy",
        "Deploys to a region",
        schema.as_object().cloned().unwrap_or_default(),
    )
}

impl ServerHandler for Regions {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![deploy_tool()]))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        (name == "deploy").then(deploy_tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let region = request
            .arguments
            .as_ref()
            .and_then(|args| args.get("region"))
            .and_then(Value::as_str)
            .unwrap_or("nowhere");
        let text = format!("deploying to {region}");
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// The demo desk at `/mcp/demo` (and [`Regions`] at `/mcp/regions`) behind a bearer-token
/// check: the shape of Countersign's gateway.
struct FakeGateway {
    addr: SocketAddr,
    store: TicketStore,
    seen: Arc<Mutex<Vec<Seen>>>,
    shutdown: CancellationToken,
}

impl FakeGateway {
    async fn start() -> Self {
        let store = TicketStore::seeded();
        let shutdown = CancellationToken::new();
        let config =
            StreamableHttpServerConfig::default().with_cancellation_token(shutdown.child_token());
        let desk_store = store.clone();
        let desk: StreamableHttpService<TicketDesk, LocalSessionManager> =
            StreamableHttpService::new(
                move || Ok(TicketDesk::new(desk_store.clone())),
                Arc::default(),
                config.clone(),
            );
        let regions: StreamableHttpService<Regions, LocalSessionManager> =
            StreamableHttpService::new(|| Ok(Regions), Arc::default(), config);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let front = axum::middleware::from_fn(move |request: Request, next: Next| {
            let log = Arc::clone(&log);
            async move { check_token(log, request, next).await }
        });
        // A server that has "moved" to the desk, on the same origin.
        let moved = axum::routing::any(|| async {
            (
                StatusCode::TEMPORARY_REDIRECT,
                [(axum::http::header::LOCATION, "/mcp/demo")],
            )
        });
        let router = axum::Router::new()
            .route("/mcp/moved", moved)
            .route("/mcp/verbatim", axum::routing::post(verbatim))
            .route("/mcp/endless", axum::routing::post(endless))
            .route("/mcp/endless-error", axum::routing::post(endless_error))
            .nest_service("/mcp/demo", desk)
            .nest_service("/mcp/regions", regions)
            .layer(front);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let stop = shutdown.clone();
        tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move { stop.cancelled_owned().await })
                .await
        });
        Self {
            addr,
            store,
            seen,
            shutdown,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for FakeGateway {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn check_token(log: Arc<Mutex<Vec<Seen>>>, request: Request, next: Next) -> Response {
    log.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Seen::of(&request));
    let authorization = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    if authorization != Some(&format!("Bearer {TOKEN}")) {
        return (StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    }
    next.run(request).await
}

/// The environment that points the bridge at `url` with the token in file `token`.
fn gateway_at<'a>(url: &'a str, token: &'a std::path::Path) -> [(&'static str, &'a str); 2] {
    [
        ("COUNTERSIGN_GATEWAY_URL", url),
        (
            "COUNTERSIGN_GATEWAY_TOKEN_FILE",
            token.to_str().expect("utf-8 path"),
        ),
    ]
}

/// The app's side of the contract: gateway.json and the token in its data dir.
fn app_files(scratch: &Scratch, gateway: &FakeGateway) {
    scratch.write(
        &scratch.app_data().join("gateway.json"),
        &json!({"url": gateway.url(), "pid": 1}).to_string(),
    );
    scratch.write(
        &scratch.app_data().join("gateway-token"),
        &format!("{TOKEN}\n"),
    );
}

/// Its answer to request 1, in JSON and written over two lines, with numbers a `Value` would
/// round or refuse.
const VERBATIM_JSON: &str = "{\"jsonrpc\":\"2.0\",\"id\":1,\n  \"result\":{\"protocolVersion\":\"2025-11-25\",\
    \"capabilities\":{},\"serverInfo\":{\"name\":\"verbatim\",\"version\":\"1\"},\
    \"big\":123456789012345678901234567890,\"huge\":1e400,\"exact\":0.10000000000000000555}}";
/// Its answer to request 2, as an SSE event.
const VERBATIM_EVENT: &str =
    "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[],\"n\":18446744073709551616}}";

/// A gateway stand-in that answers with fixed text: request 1 in JSON, request 3 with the
/// body it was sent, any other on a stream.
async fn verbatim(body: String) -> Response {
    if body.contains("\"id\":3") {
        let echo = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{{\"content\":[],\"sent\":{body}}}}}"
        );
        (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            echo,
        )
            .into_response()
    } else if body.contains("\"id\":1") {
        (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            VERBATIM_JSON,
        )
            .into_response()
    } else {
        (
            [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
            format!("data: {VERBATIM_EVENT}\n\n"),
        )
            .into_response()
    }
}

/// A stand-in for whatever listens on the gateway's port and answers without end: request 1
/// in a JSON body, any other in one SSE event.
async fn endless(body: String) -> Response {
    let json = body.contains("\"id\":1");
    let (content_type, start) = if json {
        (
            "application/json",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"x\":\"",
        )
    } else {
        (
            "text/event-stream",
            "data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"x\":\"",
        )
    };
    let more = futures::stream::repeat_with(|| {
        Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(vec![b'a'; 1 << 20]))
    });
    let body = futures::StreamExt::chain(
        futures::stream::once(async move { Ok(axum::body::Bytes::from(start)) }),
        more,
    );
    (
        [(axum::http::header::CONTENT_TYPE, content_type)],
        axum::body::Body::from_stream(body),
    )
        .into_response()
}

/// A failure whose words never end: 500, and a body without end.
async fn endless_error() -> Response {
    let body = futures::stream::repeat_with(|| {
        Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(vec![b'e'; 1 << 20]))
    });
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        axum::body::Body::from_stream(body),
    )
        .into_response()
}

/// A failure answered with words without end: the bridge reads their start, and the agent is
/// told at once (it read them all, growing until it was killed, and never answered).
#[tokio::test]
async fn an_error_answer_without_end_is_cut_off() {
    let gateway = FakeGateway::start().await;
    let scratch = Scratch::new("endless-error");
    app_files(&scratch, &gateway);
    let mut bridge = Bridge::spawn(&scratch, "endless-error", &[]);
    bridge.send(initialize("2025-11-25")).await;
    let (reply, _) = bridge.answer(json!(1)).await;
    let message = error_message(&reply);
    assert!(message.contains("failed (500)"), "{message}");
    bridge.finish().await;
}

/// An answer without end, in JSON or in one event, is cut off at the bridge's limit and the
/// agent told: the bridge does not hold it all in memory (it did, until it ran out).
#[tokio::test]
async fn an_answer_without_end_is_refused_at_the_limit() {
    let gateway = FakeGateway::start().await;
    let scratch = Scratch::new("endless");
    app_files(&scratch, &gateway);
    let mut bridge = Bridge::spawn(&scratch, "endless", &[]);
    bridge.send(initialize("2025-11-25")).await;
    let (reply, _) = bridge.answer(json!(1)).await;
    let message = error_message(&reply);
    assert!(
        message.contains("exceeded the maximum size of 33554432 bytes"),
        "{message}"
    );
    bridge
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "count", "arguments": {}}}))
        .await;
    let (reply, _) = bridge.answer(json!(2)).await;
    let message = error_message(&reply);
    assert!(
        message.contains("stream broke off before answering") && message.contains("33554432"),
        "{message}"
    );
    bridge.finish().await;
}

/// The gateway passes on the server's bytes, and so does the bridge: numbers past 64 bits or
/// too large for a float reach the agent as written, in a JSON answer and on a stream alike.
#[tokio::test]
async fn the_gateways_answers_reach_the_agent_as_written() {
    let gateway = FakeGateway::start().await;
    let scratch = Scratch::new("verbatim");
    app_files(&scratch, &gateway);
    let mut bridge = Bridge::spawn(&scratch, "verbatim", &[]);
    bridge.send(initialize("2025-11-25")).await;
    assert_eq!(bridge.recv_line().await, VERBATIM_JSON.replace('\n', " "));
    bridge
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "count", "arguments": {}}}))
        .await;
    assert_eq!(bridge.recv_line().await, VERBATIM_EVENT);
    // The version came from the JSON answer, though the rest of it cannot be read into a
    // `Value`: the call went with it.
    let call = gateway.seen().into_iter().last().unwrap();
    assert_eq!(call.version.as_deref(), Some("2025-11-25"));
    // The agent's own words the same way: a request a `Value` cannot hold goes to the gateway
    // as written, and its answer comes back to the agent with the request's id (it was a
    // parse error with no id, which left the agent waiting).
    let line = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"count","arguments":{"n":1e400,"s":"\ud800"}}}"#;
    bridge.send_line(line).await;
    assert_eq!(
        bridge.recv_line().await,
        format!(r#"{{"jsonrpc":"2.0","id":3,"result":{{"content":[],"sent":{line}}}}}"#)
    );
    bridge.finish().await;
}

#[tokio::test]
async fn legacy_session_round_trip_found_through_gateway_json() {
    let gateway = FakeGateway::start().await;
    let scratch = Scratch::new("legacy");
    app_files(&scratch, &gateway);
    let mut bridge = Bridge::spawn(&scratch, "demo", &[]);

    let init = bridge
        .request(1, "initialize", initialize("2025-11-25")["params"].clone())
        .await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    bridge
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;

    // A line that is not JSON gets a parse error and the bridge carries on.
    bridge.send_line("this is not json").await;
    let parse_error = bridge.recv().await;
    assert_eq!(parse_error["error"]["code"], -32700, "{parse_error}");
    assert_eq!(parse_error["id"], Value::Null);
    bridge.send_line("[1, 2]").await;
    let invalid = bridge.recv().await;
    assert_eq!(invalid["error"]["code"], -32600, "{invalid}");

    let tools = bridge.request(2, "tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"list_tickets"), "{names:?}");

    let call = bridge
        .request(
            3,
            "tools/call",
            json!({"name": "list_tickets", "arguments": {}}),
        )
        .await;
    let text = first_text(&call);
    assert!(text.contains("t1") && text.contains("t5"), "{text}");

    let (status, stderr) = bridge.finish().await;
    assert!(status.success(), "{status}: {stderr}");

    let seen = gateway.seen();
    let posts: Vec<&Seen> = seen.iter().filter(|s| s.method == "POST").collect();
    assert!(posts.iter().all(|s| s.path == "/mcp/demo"), "{seen:?}");
    let session = posts[0].session.clone();
    assert_eq!(session, None, "initialize opens the session: {seen:?}");
    assert_eq!(
        posts[0].version, None,
        "initialize has no version header yet"
    );
    let session = posts[1]
        .session
        .clone()
        .expect("session id after initialize");
    for post in &posts[1..] {
        assert_eq!(post.session.as_deref(), Some(session.as_str()), "{post:?}");
        assert_eq!(post.version.as_deref(), Some("2025-11-25"), "{post:?}");
        // SEP-2243 routing headers belong to 2026-07-28 and later only.
        assert_eq!(post.mcp_method, None, "{post:?}");
    }
    // The GET stream for server messages was opened, and the session ended with a DELETE.
    assert!(
        seen.iter()
            .any(|s| s.method == "GET" && s.session.as_deref() == Some(session.as_str())),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|s| s.method == "DELETE" && s.session.as_deref() == Some(session.as_str())),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_question_mid_call_goes_to_the_agent_and_a_ping_is_not_held_up() {
    let gateway = FakeGateway::start().await;
    let scratch = Scratch::new("elicit");
    let token = scratch.token_file(TOKEN);
    let url = gateway.url();
    let env = gateway_at(&url, &token);
    let mut bridge = Bridge::spawn(&scratch, "demo", &env);
    bridge.send(initialize("2025-11-25")).await;
    bridge.answer(json!(1)).await;
    bridge
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;

    // delete_ticket asks for confirmation in the middle of the call, on the call's stream.
    bridge
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "delete_ticket", "arguments": {"id": "t3"}}}))
        .await;
    let question = bridge.recv().await;
    assert_eq!(question["method"], "elicitation/create", "{question}");
    // While the call waits for the person, another request still gets through.
    let pong = bridge.request(3, "ping", json!({})).await;
    assert_eq!(pong["result"], json!({}), "{pong}");
    bridge
        .send(json!({"jsonrpc": "2.0", "id": question["id"],
            "result": {"action": "accept", "content": {"confirm": true}}}))
        .await;
    let (deleted, _) = bridge.answer(json!(2)).await;
    assert_eq!(first_text(&deleted), "Deleted ticket t3.", "{deleted}");
    assert!(!gateway.store.ids().contains(&"t3".to_owned()));

    let (status, stderr) = bridge.finish().await;
    assert!(status.success(), "{status}: {stderr}");
}

#[tokio::test]
async fn stateless_2026_07_28_requests_carry_their_version_and_routing_headers() {
    let gateway = FakeGateway::start().await;
    let scratch = Scratch::new("modern");
    let token = scratch.token_file(TOKEN);
    let url = gateway.url();
    let env = gateway_at(&url, &token);
    let mut bridge = Bridge::spawn(&scratch, "demo", &env);

    let discover = bridge
        .request(1, "server/discover", json!({"_meta": meta_2026()}))
        .await;
    assert!(discover.get("result").is_some(), "{discover}");
    let tools = bridge
        .request(2, "tools/list", json!({"_meta": meta_2026()}))
        .await;
    assert!(tools["result"]["tools"].is_array(), "{tools}");
    let call = bridge
        .request(
            3,
            "tools/call",
            json!({"name": "session_info", "arguments": {}, "_meta": meta_2026()}),
        )
        .await;
    let info: Value = serde_json::from_str(first_text(&call)).expect("session_info is JSON");
    assert_eq!(info["protocolVersion"], "2026-07-28", "{info}");
    let call = bridge
        .request(
            4,
            "tools/call",
            json!({"name": "list_tickets", "arguments": {}, "_meta": meta_2026()}),
        )
        .await;
    assert!(first_text(&call).contains("t1"), "{call}");

    let (status, stderr) = bridge.finish().await;
    assert!(status.success(), "{status}: {stderr}");

    let seen = gateway.seen();
    assert!(
        seen.iter().all(|s| s.method == "POST"),
        "no session, no GET or DELETE: {seen:?}"
    );
    assert!(seen.iter().all(|s| s.session.is_none()), "{seen:?}");
    assert!(
        seen.iter()
            .all(|s| s.version.as_deref() == Some("2026-07-28")),
        "{seen:?}"
    );
    let last = seen.last().expect("requests");
    assert_eq!(last.mcp_method.as_deref(), Some("tools/call"));
    assert_eq!(last.mcp_name.as_deref(), Some("list_tickets"));
}

#[tokio::test]
async fn annotated_tool_arguments_travel_as_param_headers_on_2026_07_28() {
    let gateway = FakeGateway::start().await;
    let scratch = Scratch::new("params");
    let token = scratch.token_file(TOKEN);
    let url = gateway.url();
    let env = gateway_at(&url, &token);
    let mut bridge = Bridge::spawn(&scratch, "regions", &env);
    // The bridge learns the annotation from tools/list, as rmcp's client does; rmcp's server
    // refuses a call whose annotated argument is missing from the headers.
    let tools = bridge
        .request(1, "tools/list", json!({"_meta": meta_2026()}))
        .await;
    assert_eq!(tools["result"]["tools"][0]["name"], "deploy", "{tools}");
    let call = bridge
        .request(
            2,
            "tools/call",
            json!({"name": "deploy", "arguments": {"region": "eu-west", "note": "n"},
                "_meta": meta_2026()}),
        )
        .await;
    assert_eq!(first_text(&call), "deploying to eu-west", "{call}");
    let (status, stderr) = bridge.finish().await;
    assert!(status.success(), "{status}: {stderr}");
    let last = gateway.seen().pop().expect("requests");
    assert_eq!(
        last.mcp_param_region.as_deref(),
        Some("eu-west"),
        "{last:?}"
    );
}

#[tokio::test]
async fn stopped_with_sigterm_it_still_ends_the_session() {
    let gateway = FakeGateway::start().await;
    let scratch = Scratch::new("sigterm");
    let token = scratch.token_file(TOKEN);
    let url = gateway.url();
    let env = gateway_at(&url, &token);
    let mut bridge = Bridge::spawn(&scratch, "demo", &env);
    bridge.send(initialize("2025-11-25")).await;
    bridge.answer(json!(1)).await;
    bridge
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let pong = bridge.request(2, "ping", json!({})).await;
    assert_eq!(pong["result"], json!({}), "{pong}");
    let pid = bridge.child.id().expect("running").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    // stdin stays open: the signal alone ends it.
    let (status, stderr) = bridge.wait().await;
    assert!(status.success(), "{status}: {stderr}");
    assert!(
        gateway
            .seen()
            .iter()
            .any(|s| s.method == "DELETE" && s.session.is_some()),
        "{:?}",
        gateway.seen()
    );
}

/// A gateway that accepts and never answers (the app stopped in a debugger, or wedged) holds
/// the `initialize` the bridge waits on; the agent's SIGTERM still ends the bridge.
#[tokio::test]
async fn a_gateway_that_never_answers_does_not_keep_the_bridge_from_its_signal() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut connections = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            connections.push(stream);
        }
    });
    let scratch = Scratch::new("silent");
    let token = scratch.token_file(TOKEN);
    let env = gateway_at(&url, &token);
    let mut bridge = Bridge::spawn(&scratch, "demo", &env);
    bridge.send(initialize("2025-11-25")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = bridge.child.id().expect("running").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let started = Instant::now();
    let (status, stderr) = tokio::time::timeout(Duration::from_secs(10), bridge.wait())
        .await
        .expect("the bridge ends on its signal");
    assert!(status.success(), "{status}: {stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    held.abort();
}

#[tokio::test]
async fn a_wrong_token_is_an_error_reply_and_a_message() {
    let gateway = FakeGateway::start().await;
    let scratch = Scratch::new("token");
    let token = scratch.token_file("not-the-token");
    let url = gateway.url();
    let env = gateway_at(&url, &token);
    let mut bridge = Bridge::spawn(&scratch, "demo", &env);
    bridge.send(initialize("2025-11-25")).await;
    let (reply, _) = bridge.answer(json!(1)).await;
    let message = error_message(&reply);
    assert!(message.contains("refused the token (401)"), "{message}");
    let (_, stderr) = bridge.finish().await;
    assert!(stderr.contains("refused the token"), "{stderr}");
}

/// The bridge follows no redirect, not even to the same origin: the gateway never sends one,
/// and a 307 would have it post the agent's message, with the token, wherever it points.
#[tokio::test]
async fn a_redirect_is_not_followed_and_the_agent_is_told() {
    let gateway = FakeGateway::start().await;
    let scratch = Scratch::new("redirect");
    let token = scratch.token_file(TOKEN);
    let url = gateway.url();
    let env = gateway_at(&url, &token);
    let mut bridge = Bridge::spawn(&scratch, "moved", &env);
    bridge.send(initialize("2025-11-25")).await;
    let (reply, _) = bridge.answer(json!(1)).await;
    let message = error_message(&reply);
    assert!(
        message.contains("answered with a redirect (307), which the bridge does not follow"),
        "{message}"
    );
    let (_, stderr) = bridge.finish().await;
    assert!(stderr.contains("redirect (307)"), "{stderr}");
    let seen = gateway.seen();
    assert!(seen.iter().any(|s| s.path == "/mcp/moved"), "{seen:?}");
    assert!(
        !seen.iter().any(|s| s.path.starts_with("/mcp/demo")),
        "nothing reached where it pointed: {seen:?}"
    );
}

#[tokio::test]
async fn an_unknown_server_is_named_in_the_error() {
    let gateway = FakeGateway::start().await;
    let scratch = Scratch::new("unknown");
    let token = scratch.token_file(TOKEN);
    let url = gateway.url();
    let env = gateway_at(&url, &token);
    let mut bridge = Bridge::spawn(&scratch, "no such/server", &env);
    bridge.send(initialize("2025-11-25")).await;
    let (reply, _) = bridge.answer(json!(1)).await;
    let message = error_message(&reply);
    assert!(
        message.contains("no server named \"no such/server\" (404)"),
        "{message}"
    );
    let (_, stderr) = bridge.finish().await;
    assert!(stderr.contains("no such/server"), "{stderr}");
    // The name travels as one percent-encoded path segment.
    assert!(
        gateway
            .seen()
            .iter()
            .any(|s| s.path == "/mcp/no%20such%2Fserver"),
        "{:?}",
        gateway.seen()
    );
}

#[tokio::test]
async fn with_no_gateway_listening_it_says_so_answers_initialize_and_exits() {
    let scratch = Scratch::new("closed");
    let token = scratch.token_file(TOKEN);
    let url = format!("http://127.0.0.1:{}", closed_port().await);
    let env = gateway_at(&url, &token);
    let started = Instant::now();
    let mut bridge = Bridge::spawn(&scratch, "demo", &env);
    bridge.send(initialize("2025-11-25")).await;
    let (reply, _) = bridge.answer(json!(1)).await;
    let expected = format!("Countersign is not running (no gateway at {url})");
    assert!(error_message(&reply).contains(&expected), "{reply}");
    // It exits by itself, stdin still open.
    let (status, stderr) = bridge.wait().await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&expected), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// An agent host that stopped reading the bridge's stderr: what the bridge logs goes nowhere
/// (EPIPE), and the agent still gets its answer.
#[tokio::test]
async fn a_closed_stderr_costs_the_agent_no_answer() {
    let scratch = Scratch::new("closed-stderr");
    let token = scratch.token_file(TOKEN);
    let url = format!("http://127.0.0.1:{}", closed_port().await);
    let env = gateway_at(&url, &token);
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let mut bridge = Bridge::spawn_with_stderr(&scratch, "demo", &env, writer.into());
    bridge.send(initialize("2025-11-25")).await;
    let (reply, _) = bridge.answer(json!(1)).await;
    assert!(
        error_message(&reply).contains("Countersign is not running"),
        "{reply}"
    );
    let status = tokio::time::timeout(Duration::from_secs(5), bridge.child.wait())
        .await
        .expect("it exits")
        .expect("its status");
    assert_eq!(status.code(), Some(1), "not a panic's 101: {status}");
}

/// Started by Countersign as one of its own servers (however wrapped: `sh -c`, `npx`, a link),
/// the bridge would reach Countersign through Countersign, each session opening another: it
/// refuses at once, before reaching for any gateway, and says why.
#[tokio::test]
async fn started_as_one_of_countersigns_servers_it_refuses_to_loop() {
    let scratch = Scratch::new("loop");
    let token = scratch.token_file(TOKEN);
    let gateway = FakeGateway::start().await;
    let url = gateway.url();
    let mut env = gateway_at(&url, &token).to_vec();
    env.push((countersign_core::mcp::STARTED_AS_SERVER_ENV, "looped"));
    let bridge = Bridge::spawn(&scratch, "demo", &env);
    let (status, stderr) = bridge.wait().await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("Countersign started this bridge as its server \"looped\""),
        "{stderr}"
    );
    assert!(gateway.seen().is_empty(), "{:?}", gateway.seen());
}

#[tokio::test]
async fn with_no_app_and_a_silent_agent_it_still_exits() {
    // An empty home: no gateway.json, no override.
    let scratch = Scratch::new("silent");
    let started = Instant::now();
    let bridge = Bridge::spawn(&scratch, "demo", &[]);
    let (status, stderr) = bridge.wait().await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Countersign is not running"), "{stderr}");
    assert!(stderr.contains("gateway.json"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn usage_without_a_server_name() {
    let scratch = Scratch::new("usage");
    for args in [&[][..], &["--help"][..]] {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_countersign-bridge"))
            .args(args)
            .env_clear()
            .env("HOME", scratch.home())
            .output()
            .await
            .expect("run");
        assert_eq!(output.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("usage: countersign-bridge <server>"),
            "{stderr}"
        );
    }
}

/// Claude Desktop's snippet gives the bridge its agent's own token in `COUNTERSIGN_TOKEN`:
/// that is what is sent, even with a (shared) token file beside it.
#[tokio::test]
async fn the_agents_own_token_from_the_environment_is_what_gets_sent() {
    let gateway = FakeGateway::start().await;
    let scratch = Scratch::new("env-token");
    // The file's token is not the one the gateway accepts; the environment's is.
    let file = scratch.token_file("the-shared-token");
    let url = gateway.url();
    let env = [
        ("COUNTERSIGN_GATEWAY_URL", url.as_str()),
        (
            "COUNTERSIGN_GATEWAY_TOKEN_FILE",
            file.to_str().expect("utf-8 path"),
        ),
        ("COUNTERSIGN_TOKEN", TOKEN),
    ];
    let mut bridge = Bridge::spawn(&scratch, "demo", &env);
    let init = bridge
        .request(1, "initialize", initialize("2025-11-25")["params"].clone())
        .await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    bridge
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let tools = bridge.request(2, "tools/list", json!({})).await;
    assert!(tools["result"]["tools"].is_array(), "{tools}");
    let (status, stderr) = bridge.finish().await;
    assert!(status.success(), "{status}: {stderr}");

    // A revoked (or mistyped) agent token is refused, and the message says where it came from.
    let scratch = Scratch::new("env-token-wrong");
    let file = scratch.token_file(TOKEN);
    let env = [
        ("COUNTERSIGN_GATEWAY_URL", url.as_str()),
        (
            "COUNTERSIGN_GATEWAY_TOKEN_FILE",
            file.to_str().expect("utf-8 path"),
        ),
        ("COUNTERSIGN_TOKEN", "a-revoked-token"),
    ];
    let mut bridge = Bridge::spawn(&scratch, "demo", &env);
    bridge.send(initialize("2025-11-25")).await;
    let (reply, _) = bridge.answer(json!(1)).await;
    let message = error_message(&reply);
    assert!(message.contains("refused the token (401)"), "{message}");
    assert!(message.contains("COUNTERSIGN_TOKEN"), "{message}");
    let _ = bridge.finish().await;
}
