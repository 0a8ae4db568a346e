//! Test harness for the MCP conformance suite (`scripts/conformance.sh`): the suite starts a
//! scenario server and runs `countersign-conformance-client <url>` with
//! `MCP_CONFORMANCE_SCENARIO` set. The session, handler and broker are Countersign's core;
//! the only thing faked is the person, who presses Submit on the untouched pre-filled form.
//! This is test code: no product binary answers without a person.

use std::time::Duration;

use countersign_core::config::OAuthConfig;
use countersign_core::config::ProtocolChoice;
use countersign_core::session::SessionError;
use countersign_core::{
    Answer, AskEvent, AskKind, AuditLog, Broker, ServerConfig, SessionManager, SessionState,
};
use tokio_util::sync::CancellationToken;

const SERVER: &str = "conformance";

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "countersign_core=debug,rmcp=info".into()),
        )
        .init();
    let (Some(url), Ok(scenario)) = (
        std::env::args().nth(1),
        std::env::var("MCP_CONFORMANCE_SCENARIO"),
    ) else {
        eprintln!(
            "usage: MCP_CONFORMANCE_SCENARIO=<name> countersign-conformance-client <server-url>"
        );
        std::process::exit(2);
    };
    match run(&url, &scenario).await {
        Ok(()) => eprintln!("conformance-client: {scenario}: done"),
        Err(e) => {
            eprintln!("conformance-client: {scenario}: {e}");
            std::process::exit(1);
        }
    }
}

async fn run(url: &str, scenario: &str) -> Result<(), String> {
    let audit_path = std::env::temp_dir().join(format!(
        "countersign-conformance-{}.jsonl",
        std::process::id()
    ));
    let broker = Broker::new(AuditLog::open(&audit_path).map_err(|e| e.to_string())?);
    let person = tokio::spawn(press_submit_on_defaults(broker.clone()));

    let mut config = ServerConfig::http(SERVER, url);
    config.oauth = oauth_config(scenario);
    // The 2026-07-28 scenarios start with server/discover; the others expect `initialize`.
    let modern = std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION")
        .is_ok_and(|v| v.as_str() >= "2026-07-28")
        || scenario.starts_with("sep-2322");
    config.protocol = if modern {
        ProtocolChoice::Auto
    } else {
        ProtocolChoice::Legacy
    };
    config.request_timeout = Duration::from_secs(20);

    let sessions = SessionManager::new(broker.clone());
    sessions.start(vec![config]).await;
    let state = ready(&sessions).await;
    if !matches!(state, Some(SessionState::Ready { .. })) {
        sessions.shutdown().await;
        return Err(format!("not connected: {state:?}"));
    }
    let result = drive(&sessions, scenario).await;
    sessions.shutdown().await;
    person.abort();
    let _ = std::fs::remove_file(&audit_path);
    result
}

/// Waits for the session; when the server asks for a sign-in, the person signs in (through
/// the core's flow: a URL question, then the browser below) and it waits again.
async fn ready(sessions: &SessionManager) -> Option<SessionState> {
    loop {
        let state = sessions.wait_until_settled(SERVER).await;
        match state {
            Some(SessionState::SignInRequired { .. }) => {
                if let Err(e) = sessions.sign_in(SERVER).await {
                    eprintln!("conformance-client: sign-in: {e}");
                    return state;
                }
            }
            other => return other,
        }
    }
}

/// A request, made again after the sign-in the server asked for; the core bounds how often
/// (`oauth::MAX_STEP_UPS`), so this loop ends when it refuses another sign-in.
async fn signed<T, F, Fut>(sessions: &SessionManager, op: F) -> Result<T, SessionError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, SessionError>>,
{
    loop {
        match op().await {
            Err(SessionError::SignIn { .. }) => {
                sessions.sign_in(SERVER).await?;
                if !matches!(ready(sessions).await, Some(SessionState::Ready { .. })) {
                    return Err(SessionError::NotReady {
                        server: SERVER.into(),
                        state: "not ready after signing in".into(),
                    });
                }
            }
            other => return other,
        }
    }
}

/// The scenario's pre-registered client (its context), and the client ID metadata document
/// the suite expects (Countersign has no public one; a deployment names its own).
fn oauth_config(scenario: &str) -> OAuthConfig {
    let mut oauth = OAuthConfig::default();
    if !scenario.starts_with("auth/") {
        return oauth;
    }
    let context: serde_json::Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or_default();
    oauth.client_id = context["client_id"].as_str().map(str::to_owned);
    oauth.client_secret = context["client_secret"].as_str().map(str::to_owned);
    oauth.client_metadata_url = Some("https://conformance-test.local/client-metadata.json".into());
    oauth
}

async fn drive(sessions: &SessionManager, scenario: &str) -> Result<(), String> {
    let tools = signed(sessions, || sessions.list_tools(SERVER)).await;
    if scenario == "initialize" {
        // The scenario judges the handshake; its server answers everything else with `{}`.
        return Ok(());
    }
    let tools = tools.map_err(|e| e.to_string())?;
    for tool in tools {
        let args = match (scenario, tool.name.as_ref()) {
            ("tools_call", "add_numbers") => Some(serde_json::json!({"a": 5, "b": 3})),
            ("tools_call", _) => continue,
            _ => Some(serde_json::json!({})),
        };
        let args = args.and_then(|a| a.as_object().cloned());
        let called = signed(sessions, || {
            sessions.call_tool(SERVER, &tool.name, args.clone(), CancellationToken::new())
        })
        .await;
        let result = match called {
            Ok(result) => result,
            // The core stopped offering sign-ins to a server that refuses every scope.
            Err(e) if scenario == "auth/scope-retry-limit" => {
                eprintln!("conformance-client: gave up as expected: {e}");
                return Ok(());
            }
            Err(e) => return Err(format!("{}: {e}", tool.name)),
        };
        eprintln!(
            "conformance-client: {} -> {}",
            tool.name,
            serde_json::to_string(&result.content).unwrap_or_default()
        );
    }
    Ok(())
}

/// The test person: Submit on every form exactly as pre-filled; consent to every URL; allow
/// a tool call or a sampling request once (none come here: this client has no gateway).
async fn press_submit_on_defaults(broker: Broker) {
    let mut events = broker.subscribe();
    while let Ok(event) = events.recv().await {
        if let AskEvent::Added { ask } = event {
            let content = match &ask.kind {
                AskKind::Form { schema, .. } => {
                    Some(countersign_core::ask::schema::defaults(schema))
                }
                AskKind::Url { .. } | AskKind::ToolCall { .. } | AskKind::Sampling { .. } => None,
            };
            if let Err(e) = broker.answer(ask.id, Answer::Accept { content }) {
                eprintln!("conformance-client: answer refused: {e}");
                continue;
            }
            if let AskKind::Url { url, .. } = &ask.kind {
                tokio::spawn(browse(url.clone()));
            }
        }
    }
}

/// The browser: opens the address, and where the authorization server sends it back (the
/// suite's authorizes at once with a redirect), follows to that address, which is the sign-in's
/// loopback redirect.
async fn browse(url: String) {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client");
    let response = match client.get(&url).send().await {
        Ok(r) => r,
        Err(e) => return eprintln!("conformance-client: browser: {e}"),
    };
    let Some(location) = response
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
    else {
        return;
    };
    if let Err(e) = client.get(location).send().await {
        eprintln!("conformance-client: browser: redirect: {e}");
    }
}
