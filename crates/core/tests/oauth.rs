//! Signing in to an OAuth-protected remote server (`tests/peers/oauth-server.mjs`, a server and
//! authorization server written without an SDK): the 401 puts the session in "sign-in needed",
//! the authorization address reaches the person as a URL question, the browser (a stand-in that
//! follows the authorization server's redirect, as a browser would after the person logs in)
//! comes back to the loopback redirect, and the tokens serve the app's sessions and the
//! gateway's. Refresh after expiry, step-up on `insufficient_scope`, sign-out, a declined
//! sign-in, and an agent that never sees the server's tokens.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use countersign_core::ask::AskKind;
use countersign_core::config::{GatewayConfig, ProtocolChoice, ToolRule};
use countersign_core::gateway::Gateway;
use countersign_core::mcp::oauth::vault::Vault;
use countersign_core::mcp::oauth::{Auth, Revocation};
use countersign_core::session::{Backoff, DEFAULT_PING_EVERY};
use countersign_core::settings::SettingsStore;
use countersign_core::{
    Answer, AskEvent, AuditLog, Broker, ServerConfig, SessionError, SessionManager, SessionState,
};
use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

mod common;

const WAIT: Duration = Duration::from_secs(30);

struct NotesServer {
    _child: tokio::process::Child,
    base: String,
    log: PathBuf,
}

impl NotesServer {
    async fn start(test: &str, expires_in: u64) -> NotesServer {
        Self::launch(test, expires_in, false).await
    }

    /// The same server keeping sessions, with a standalone stream (GET) for a good token.
    async fn start_keeping_sessions(test: &str, expires_in: u64) -> NotesServer {
        Self::launch(test, expires_in, true).await
    }

    async fn launch(test: &str, expires_in: u64, sessions: bool) -> NotesServer {
        Self::launch_with(test, expires_in, sessions, &[]).await
    }

    /// A server whose authorization server's metadata has `metadata`'s members put over it;
    /// with `at`, that metadata is served at that path instead and named by the server, while
    /// the RFC 8414 address keeps the honest one.
    async fn with_metadata(test: &str, metadata: &str, at: Option<&str>) -> NotesServer {
        let env = [
            ("OAUTH_AS_METADATA", metadata),
            ("OAUTH_AS_PATH", at.unwrap_or_default()),
        ];
        Self::launch_with(test, 3600, false, &env).await
    }

    /// A server whose refresh grants are answered `delay_ms` late.
    async fn with_slow_refresh(test: &str, expires_in: u64, delay_ms: u64) -> NotesServer {
        let delay = delay_ms.to_string();
        Self::launch_with(
            test,
            expires_in,
            false,
            &[("OAUTH_REFRESH_DELAY_MS", &delay)],
        )
        .await
    }

    async fn launch_with(
        test: &str,
        expires_in: u64,
        sessions: bool,
        env: &[(&str, &str)],
    ) -> NotesServer {
        let log = scratch(test).join("oauth-server.jsonl");
        let mut child = tokio::process::Command::new(common::node())
            .arg(common::peer_path("oauth-server.mjs"))
            .envs(env.iter().copied())
            .env("OAUTH_EXPIRES_IN", expires_in.to_string())
            .env("OAUTH_SESSIONS", if sessions { "1" } else { "0" })
            .env("OAUTH_SERVER_LOG", &log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start oauth-server.mjs");
        let stdout = child.stdout.take().unwrap();
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let line = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .expect("the server starts in time")
            .unwrap()
            .expect("the server prints its address");
        let base = line.strip_prefix("listening ").unwrap().to_owned();
        NotesServer {
            _child: child,
            base,
            log,
        }
    }

    fn config(&self) -> ServerConfig {
        let mut config = ServerConfig::http("notes", &format!("{}/mcp", self.base));
        config.protocol = ProtocolChoice::Legacy;
        config.request_timeout = Duration::from_secs(15);
        config
    }

    /// The server's log: one JSON object per event.
    fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn grants(&self, grant: &str) -> usize {
        self.events()
            .iter()
            .filter(|e| e["event"] == "token" && e["grant"] == grant && e["ok"] == true)
            .count()
    }

    /// Every access token the server issued.
    fn issued_tokens(&self) -> Vec<String> {
        self.events()
            .iter()
            .filter_map(|e| e["access"].as_str().map(str::to_owned))
            .chain(
                self.events()
                    .iter()
                    .filter_map(|e| e["refresh"].as_str().map(str::to_owned)),
            )
            .collect()
    }
}

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cs-oauth-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>;

/// The person at the desktop: `consent` to every sign-in question (opening the address in the
/// "browser"), or decline each. Returns the (host, server) of each question seen.
fn person(broker: &Broker, consent: bool) -> Seen {
    let mut events = broker.subscribe();
    let broker = broker.clone();
    let seen = Seen::default();
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok(event) = events.recv().await {
            let AskEvent::Added { ask } = event else {
                continue;
            };
            let AskKind::Url {
                url, host, sign_in, ..
            } = &ask.kind
            else {
                continue;
            };
            // Countersign's own question, which the dialog says is Countersign's.
            let host = if *sign_in {
                host.clone()
            } else {
                format!("a server's question on {host}")
            };
            record
                .lock()
                .unwrap()
                .push((host, ask.asker.server.clone()));
            if !consent {
                broker.answer(ask.id, Answer::Decline).unwrap();
                continue;
            }
            broker
                .answer(ask.id, Answer::Accept { content: None })
                .unwrap();
            browse(url).await;
        }
    });
    seen
}

/// The browser: the authorization server signs the person in at once and redirects; the
/// browser follows to the loopback redirect.
async fn browse(url: &str) {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = client.get(url).send().await.unwrap();
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    let page = client
        .get(&location)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Signed in"), "{page}");
}

fn sessions(broker: &Broker) -> SessionManager {
    SessionManager::with_auth(
        broker.clone(),
        Backoff::default(),
        DEFAULT_PING_EVERY,
        Auth::new(Vault::memory()),
    )
}

async fn settled(sessions: &SessionManager) -> SessionState {
    sessions.wait_until_settled("notes").await.unwrap()
}

async fn whoami(sessions: &SessionManager, tool: &str) -> Result<String, SessionError> {
    let result = sessions
        .call_tool("notes", tool, None, CancellationToken::new())
        .await?;
    Ok(serde_json::to_string(&result.content).unwrap())
}

/// A gateway serving `config` with the person's sign-ins (`sessions`), on a port of its own.
async fn gateway_for(
    config: ServerConfig,
    broker: &Broker,
    sessions: &SessionManager,
    dir: &std::path::Path,
) -> (Gateway, SocketAddr) {
    let gateway = Gateway::new(
        GatewayConfig::default(),
        vec![config],
        broker.clone(),
        SettingsStore::default(),
        dir.join("gateway-token"),
    )
    .unwrap();
    gateway.set_auth(sessions.auth().clone());
    let told = sessions.clone();
    gateway.on_sign_in_needed(std::sync::Arc::new(move |server: &str, header: &str| {
        told.needs_sign_in(server, header)
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = gateway.serve(listener);
    (gateway, addr)
}

/// An rmcp agent holding `token`, through the gateway at `addr` to the notes server.
async fn agent(
    addr: SocketAddr,
    token: String,
) -> Result<
    rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>,
    rmcp::service::ClientInitializeError,
> {
    let mut transport =
        StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp/notes"));
    transport.auth_header = Some(token);
    let mut info = ClientConfig::default();
    info.protocol_version = ProtocolVersion::V_2025_11_25;
    serve_client_with_lifecycle(
        info,
        StreamableHttpClientTransport::from_config(transport),
        ClientLifecycleMode::Initialize,
    )
    .await
}

/// The agent's `whoami` through the gateway, answered: the answer as JSON.
async fn answered(agent: &rmcp::service::Peer<rmcp::RoleClient>) -> String {
    let result = tokio::time::timeout(WAIT, agent.call_tool(CallToolRequestParams::new("whoami")))
        .await
        .unwrap()
        .unwrap();
    serde_json::to_string(&result).unwrap()
}

/// The agent's `whoami` through the gateway ends in words (`why` it must): the person is asked
/// on the desktop to sign in again.
async fn refused_for_sign_in(agent: &rmcp::service::Peer<rmcp::RoleClient>, why: &str) {
    let refused = tokio::time::timeout(WAIT, agent.call_tool(CallToolRequestParams::new("whoami")))
        .await
        .unwrap()
        .expect_err(why);
    assert!(
        refused
            .to_string()
            .contains("asks them on the desktop to sign in again"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_through_a_url_question_then_refresh_step_up_and_sign_out() {
    let server = NotesServer::start("flow", 3).await;
    let dir = scratch("flow-audit");
    let broker = Broker::new(AuditLog::open(dir.join("audit.jsonl")).unwrap());
    let person = person(&broker, true);
    let sessions = sessions(&broker);
    sessions.start(vec![server.config()]).await;

    // The server's 401: nothing connects, nothing is retried behind the person's back.
    assert!(matches!(
        settled(&sessions).await,
        SessionState::SignInRequired { .. }
    ));
    assert!(matches!(
        sessions.list_tools("notes").await,
        Err(SessionError::NotReady { .. })
    ));

    // Sign in: a URL question naming the server and the sign-in page's host.
    tokio::time::timeout(WAIT, sessions.sign_in("notes"))
        .await
        .unwrap()
        .expect("signed in");
    assert!(matches!(
        sessions.wait_ready("notes", WAIT).await,
        Some(SessionState::Ready { .. })
    ));
    let text = whoami(&sessions, "whoami").await.unwrap();
    assert!(
        text.ends_with("scopes: notes:read\"}]"),
        "the scope the challenge named, no more: {text}"
    );
    assert_eq!(server.grants("authorization_code"), 1);
    let register = server
        .events()
        .into_iter()
        .find(|e| e["event"] == "register")
        .unwrap();
    assert_eq!(register["client_name"], "Countersign");
    assert!(
        register["redirect_uris"][0]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:"),
        "a loopback redirect: {register}"
    );

    // The token expires (3 s): the next call refreshes it, the person is not asked.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let text = whoami(&sessions, "whoami").await.unwrap();
    assert!(text.contains("notes:read"), "{text}");
    assert_eq!(server.grants("refresh_token"), 1, "{:?}", server.events());

    // A tool that needs more: the 403 `insufficient_scope` asks for a new sign-in with the
    // scope the server named.
    match whoami(&sessions, "write_note").await {
        Err(SessionError::SignIn { message, .. }) => {
            assert!(message.contains("more access"), "{message}")
        }
        other => panic!("expected a sign-in for more scope, got {other:?}"),
    }
    assert!(matches!(
        settled(&sessions).await,
        SessionState::SignInRequired { .. }
    ));
    sessions.sign_in("notes").await.expect("stepped up");
    sessions.wait_ready("notes", WAIT).await;
    let text = whoami(&sessions, "write_note").await.unwrap();
    assert!(text.contains("notes:write"), "{text}");
    let authorizations: Vec<Value> = server
        .events()
        .into_iter()
        .filter(|e| e["event"] == "authorize")
        .collect();
    assert_eq!(authorizations.len(), 2);
    assert!(
        authorizations[1]["scope"]
            .as_str()
            .unwrap()
            .contains("notes:write")
    );
    assert!(
        authorizations
            .iter()
            .all(|a| a["resource"] == format!("{}/mcp", server.base)),
        "the resource indicator names the server: {authorizations:?}"
    );

    // Nothing secret in the audit log: the questions are there, no token is.
    let audit = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    assert!(audit.contains("Sign in to notes"));
    for token in server.issued_tokens() {
        assert!(!audit.contains(&token), "token {token} in the audit log");
    }

    // Sign out: the tokens are forgotten and the server asks again, and the authorization
    // server revokes them (RFC 7009), so a copy taken before stops working too.
    let last = server
        .events()
        .into_iter()
        .rfind(|e| e["event"] == "token" && e["ok"] == true)
        .unwrap();
    assert_eq!(
        sessions.sign_out("notes").await.unwrap(),
        Revocation::Revoked {
            host: "127.0.0.1".into()
        }
    );
    let revoked: Vec<(Value, Value, Value)> = server
        .events()
        .into_iter()
        .filter(|e| e["event"] == "revoke")
        .map(|e| (e["token"].clone(), e["hint"].clone(), e["known"].clone()))
        .collect();
    assert_eq!(
        revoked,
        vec![
            (last["refresh"].clone(), json!("refresh_token"), json!(true)),
            (last["access"].clone(), json!("access_token"), json!(true)),
        ]
    );
    assert!(
        server
            .events()
            .iter()
            .filter(|e| e["event"] == "revoke")
            .all(|e| e["client_id"] == "client-1"),
        "the public client names itself"
    );
    let refreshed = reqwest::Client::new()
        .post(format!("{}/token", server.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "grant_type=refresh_token&refresh_token={}",
            last["refresh"].as_str().unwrap()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(
        refreshed.status(),
        400,
        "the revoked refresh token still works"
    );
    assert!(matches!(
        settled(&sessions).await,
        SessionState::SignInRequired { .. }
    ));
    let config = server.config();
    let url = match &config.transport {
        countersign_core::config::TransportConfig::Http { url, .. } => url.clone(),
        _ => unreachable!(),
    };
    assert!(
        !sessions
            .auth()
            .known_view("notes", &url)
            .is_some_and(|v| v.signed_in)
    );

    sessions.shutdown().await;
    let seen = person.lock().unwrap().clone();
    let host = server.base.trim_start_matches("http://").to_owned();
    assert_eq!(
        seen,
        vec![(host.clone(), "notes".into()), (host, "notes".into())]
    );
}

/// A server that refuses every sign-in (here with `invalid_token`, not `insufficient_scope`)
/// sends the person round at most three times in a row; the fourth sign-in is refused in words
/// without asking. And the question says what access the sign-in would grant.
#[tokio::test]
async fn a_server_refusing_every_sign_in_sends_the_person_round_at_most_three_times() {
    let server =
        NotesServer::launch_with("refuses", 3600, false, &[("OAUTH_REFUSE_TOKENS", "1")]).await;
    let broker = Broker::new(AuditLog::open(scratch("refuses-audit").join("a.jsonl")).unwrap());
    let mut asked = broker.subscribe();
    let seen = person(&broker, true);
    let sessions = sessions(&broker);
    sessions.start(vec![server.config()]).await;
    settled(&sessions).await;
    for round in 1..=3 {
        tokio::time::timeout(WAIT, sessions.sign_in("notes"))
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("sign-in {round}: {e:?}"));
        // Refused again: the session asks for another sign-in.
        let deadline = tokio::time::Instant::now() + WAIT;
        while !matches!(
            sessions.state("notes"),
            Some(SessionState::SignInRequired { .. })
        ) {
            assert!(tokio::time::Instant::now() < deadline, "round {round}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    match sessions.sign_in("notes").await {
        Err(SessionError::SignIn { message, .. }) => {
            assert!(message.contains("3 sign-ins in a row"), "{message}")
        }
        other => panic!("a fourth sign-in: {other:?}"),
    }
    assert_eq!(seen.lock().unwrap().len(), 3, "asked three times, not four");
    let mut messages = Vec::new();
    while let Ok(event) = asked.try_recv() {
        if let AskEvent::Added { ask } = event
            && let AskKind::Url { message, .. } = &ask.kind
        {
            messages.push(message.clone());
        }
    }
    assert!(
        messages[0].ends_with("It asks for this access: notes:read."),
        "{messages:?}"
    );
    sessions.shutdown().await;
}

/// An agent making calls that need more access, again and again, does not use up the person's
/// sign-ins: only the first `insufficient_scope` after each sign-in counts toward the limit.
#[tokio::test]
async fn an_agent_cannot_lock_the_person_out_of_signing_in() {
    let server = NotesServer::start("lockout", 3600).await;
    let broker = Broker::new(AuditLog::open(scratch("lockout-audit").join("a.jsonl")).unwrap());
    let _person = person(&broker, true);
    let sessions = sessions(&broker);
    sessions.start(vec![server.config()]).await;
    settled(&sessions).await;
    tokio::time::timeout(WAIT, sessions.sign_in("notes"))
        .await
        .unwrap()
        .expect("signed in");
    // What the gateway reports for each of an agent's calls the server found wanting.
    let step_up = format!(
        r#"Bearer error="insufficient_scope", scope="notes:read notes:write", resource_metadata="{}/.well-known/oauth-protected-resource/mcp""#,
        server.base
    );
    for _ in 0..5 {
        sessions.needs_sign_in("notes", &step_up);
    }
    tokio::time::timeout(WAIT, sessions.sign_in("notes"))
        .await
        .unwrap()
        .expect("the person can still sign in");
    sessions.wait_ready("notes", WAIT).await;
    assert!(
        whoami(&sessions, "write_note")
            .await
            .unwrap()
            .contains("notes:write")
    );
    sessions.shutdown().await;
}

/// Metadata that would send the code where the person did not sign in, or anything in clear
/// off this computer, or have the redirect wait for a state the metadata chose, is refused
/// before the person is asked: nothing is registered, nobody is sent to a sign-in page. So is
/// metadata a server serves at an address of its choosing that claims a provider's issuer and
/// sign-in page (here `localhost`) and keeps the token endpoint for itself (`127.0.0.1`): the
/// issuer's own metadata does not name that endpoint. rmcp checks the issuer only where the
/// address is the issuer's own, and the code went to the server before.
#[tokio::test]
async fn a_sign_in_whose_metadata_would_leak_the_code_is_refused_before_anyone_is_asked() {
    for (case, metadata, at, why) in [
        (
            "mix-up",
            r#"{"authorization_endpoint": "https://login.real.example/authorize"}"#,
            None,
            "its sign-in page is at login.real.example but the code would be sent to 127.0.0.1",
        ),
        (
            "claimed-issuer",
            r#"{"issuer": "http://localhost:{port}",
                "authorization_endpoint": "http://localhost:{port}/authorize"}"#,
            Some("/.well-known/as"),
            "the issuer it claims (localhost) was not found to name it in its own metadata",
        ),
        (
            "clear",
            r#"{"token_endpoint": "http://203.0.113.7/token"}"#,
            None,
            "its token endpoint 203.0.113.7 is not https",
        ),
        (
            "state",
            r#"{"authorization_endpoint": "{base}/authorize?state=public"}"#,
            None,
            "its sign-in page's address sets `state` itself",
        ),
    ] {
        let server = NotesServer::with_metadata(&format!("refused-{case}"), metadata, at).await;
        let broker = Broker::new(
            AuditLog::open(scratch(&format!("refused-{case}-audit")).join("a.jsonl")).unwrap(),
        );
        let person = person(&broker, true);
        let sessions = sessions(&broker);
        sessions.start(vec![server.config()]).await;
        assert!(matches!(
            settled(&sessions).await,
            SessionState::SignInRequired { .. }
        ));
        match sessions.sign_in("notes").await {
            Err(SessionError::SignIn { message, .. }) => {
                assert!(message.contains(why), "{case}: {message}")
            }
            other => panic!("{case}: expected a refused sign-in, got {other:?}"),
        }
        assert!(
            person.lock().unwrap().is_empty(),
            "{case}: the person was asked"
        );
        assert!(
            !server
                .events()
                .iter()
                .any(|e| e["event"] == "register" || e["event"] == "authorize"),
            "{case}: {:?}",
            server.events()
        );
        sessions.shutdown().await;
    }
}

/// Sign-out sends the tokens for revocation only where they already went: a revocation
/// endpoint on another host than the token endpoint's gets nothing, and the person is told the
/// tokens were not revoked. One the metadata does not name is said to be missing.
#[tokio::test]
async fn sign_out_sends_the_tokens_to_no_host_but_their_own() {
    for (case, metadata, expected) in [
        (
            "elsewhere",
            r#"{"revocation_endpoint": "https://collector.example/revoke"}"#,
            Some(
                "its revocation endpoint is at collector.example but the tokens were granted by 127.0.0.1",
            ),
        ),
        ("none", r#"{"revocation_endpoint": null}"#, None),
    ] {
        let server = NotesServer::with_metadata(&format!("revoke-{case}"), metadata, None).await;
        let broker = Broker::new(
            AuditLog::open(scratch(&format!("revoke-{case}-audit")).join("a.jsonl")).unwrap(),
        );
        let _person = person(&broker, true);
        let sessions = sessions(&broker);
        sessions.start(vec![server.config()]).await;
        settled(&sessions).await;
        tokio::time::timeout(WAIT, sessions.sign_in("notes"))
            .await
            .unwrap()
            .expect("signed in");
        let revocation = sessions.sign_out("notes").await.unwrap();
        match expected {
            Some(why) => {
                assert!(
                    matches!(&revocation, Revocation::Failed(reason) if reason.contains(why)),
                    "{case}: {revocation:?}"
                );
                let told = revocation.told();
                assert!(told.told.contains("did not revoke"), "{case}");
                // The server's words are apart from Countersign's sentence, never in it.
                assert!(!told.told.contains(why), "{case}: {told:?}");
                assert!(
                    told.reason.as_deref().is_some_and(|r| r.contains(why)),
                    "{case}: {told:?}"
                );
            }
            None => assert_eq!(revocation, Revocation::NotOffered, "{case}"),
        }
        assert!(
            !server.events().iter().any(|e| e["event"] == "revoke"),
            "{case}: {:?}",
            server.events()
        );
        // Signed out all the same.
        assert!(matches!(
            settled(&sessions).await,
            SessionState::SignInRequired { .. }
        ));
        sessions.shutdown().await;
    }
}

/// Signing out while a refresh is on its way ends signed out: the refresh's new tokens are
/// the ones revoked and forgotten. (Sign-out cleared the store first, then the refresh saved
/// its new tokens, and they went on being used after the person was told "Signed out".)
#[tokio::test]
async fn signing_out_during_a_refresh_leaves_no_tokens_behind() {
    let server = NotesServer::with_slow_refresh("out-while-refreshing", 2, 1_500).await;
    let broker = Broker::new(AuditLog::open(scratch("out-refresh-audit").join("a.jsonl")).unwrap());
    let _person = person(&broker, true);
    let sessions = sessions(&broker);
    sessions.start(vec![server.config()]).await;
    settled(&sessions).await;
    tokio::time::timeout(WAIT, sessions.sign_in("notes"))
        .await
        .unwrap()
        .expect("signed in");
    sessions.wait_ready("notes", WAIT).await;
    whoami(&sessions, "whoami").await.unwrap();
    // The access token expires; the next call refreshes it, slowly.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let calling = {
        let sessions = sessions.clone();
        tokio::spawn(async move { whoami(&sessions, "whoami").await })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    sessions.sign_out("notes").await.unwrap();
    let _ = calling.await.unwrap();
    assert_eq!(server.grants("refresh_token"), 1, "{:?}", server.events());
    assert!(
        whoami(&sessions, "whoami").await.is_err(),
        "a token outlived the sign-out: {:?}",
        server.events()
    );
    // What the refresh granted is what was revoked.
    let granted = server
        .events()
        .into_iter()
        .rfind(|e| e["event"] == "token" && e["ok"] == true)
        .unwrap();
    assert!(
        server
            .events()
            .iter()
            .any(|e| e["event"] == "revoke" && e["token"] == granted["refresh"]),
        "{:?}",
        server.events()
    );
    sessions.shutdown().await;
}

/// A server removed from the config leaves no sign-in behind: its tokens are revoked and
/// forgotten, and the same entry put back asks for a new sign-in. (They stayed in the secret
/// store, valid, and came back with the entry: an import of an agent's config, say.)
#[tokio::test(flavor = "multi_thread")]
async fn a_server_removed_from_the_config_leaves_no_sign_in_behind() {
    let server = NotesServer::start("removed", 3600).await;
    let dir = scratch("removed-app");
    let loaded = |servers| countersign_core::LoadedConfig {
        path: dir.join("config.json"),
        servers,
        errors: vec![],
        gateway: Default::default(),
    };
    let app = countersign_core::App::start(
        loaded(vec![server.config()]),
        AuditLog::open(dir.join("audit.jsonl")).unwrap(),
    )
    .await;
    let _person = person(app.broker(), true);
    settled(app.sessions()).await;
    tokio::time::timeout(WAIT, app.sign_in("notes"))
        .await
        .unwrap()
        .expect("signed in");
    app.sessions().wait_ready("notes", WAIT).await;
    whoami(app.sessions(), "whoami").await.unwrap();
    app.apply_config(loaded(vec![])).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while !server.events().iter().any(|e| e["event"] == "revoke") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never revoked: {:?}",
            server.events()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    app.apply_config(loaded(vec![server.config()])).await;
    assert!(
        matches!(
            settled(app.sessions()).await,
            SessionState::SignInRequired { .. }
        ),
        "the old sign-in came back"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_declined_sign_in_ends_in_words_and_nothing_is_exchanged() {
    let server = NotesServer::start("declined", 3600).await;
    let broker = Broker::new(AuditLog::open(scratch("declined-audit").join("a.jsonl")).unwrap());
    let _person = person(&broker, false);
    let sessions = sessions(&broker);
    sessions.start(vec![server.config()]).await;
    assert!(matches!(
        settled(&sessions).await,
        SessionState::SignInRequired { .. }
    ));
    match sessions.sign_in("notes").await {
        Err(SessionError::SignIn { message, .. }) => {
            assert!(message.contains("declined"), "{message}")
        }
        other => panic!("expected a declined sign-in, got {other:?}"),
    }
    assert_eq!(server.grants("authorization_code"), 0);
    assert!(
        !server.events().iter().any(|e| e["event"] == "authorize"),
        "the browser never opened"
    );
    assert!(matches!(
        sessions.state("notes"),
        Some(SessionState::SignInRequired { .. })
    ));
    sessions.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_through_the_gateway_uses_the_persons_sign_in_and_never_sees_its_tokens() {
    let server = NotesServer::start("gateway", 3600).await;
    let dir = scratch("gateway-rig");
    let broker = Broker::new(AuditLog::open(dir.join("audit.jsonl")).unwrap());
    let _person = person(&broker, true);
    let sessions = sessions(&broker);
    let mut config = server.config();
    config.tool_policy.insert("whoami".into(), ToolRule::Allow);
    sessions.start(vec![config.clone()]).await;
    let (gateway, addr) = gateway_for(config, &broker, &sessions, &dir).await;

    let agent = |token: String| agent(addr, token);

    // Before the person signed in: the agent is told where to sign in, in words.
    let before = agent(gateway.token().to_owned()).await;
    let said = match before {
        Err(e) => e.to_string(),
        Ok(client) => {
            let e = client
                .peer()
                .call_tool(CallToolRequestParams::new("whoami"))
                .await
                .expect_err("no sign-in yet");
            e.to_string()
        }
    };
    assert!(said.contains("sign in"), "{said}");

    assert!(matches!(
        settled(&sessions).await,
        SessionState::SignInRequired { .. }
    ));
    sessions.sign_in("notes").await.unwrap();

    let client = agent(gateway.token().to_owned())
        .await
        .expect("agent connects");
    let text = answered(client.peer()).await;
    assert!(text.contains("scopes: notes:read"), "{text}");
    for token in server.issued_tokens() {
        assert!(!text.contains(&token), "the agent saw {token}");
    }
    // Every request the server received carried the person's token, never the agent's.
    let carried: Vec<Value> = server
        .events()
        .into_iter()
        .filter(|e| e["event"] == "mcp" && !e["token"].is_null())
        .collect();
    assert!(!carried.is_empty());
    assert!(
        carried
            .iter()
            .all(|e| e["token"].as_str().unwrap().starts_with("at-")),
        "{carried:?}"
    );
    assert!(
        !server
            .events()
            .iter()
            .any(|e| e["token"] == gateway.token()),
        "the gateway's token reached the server"
    );

    // The person revokes Countersign's access at the provider: the agent's next call ends in
    // words, and the desktop asks the person to sign in again.
    reqwest::Client::new()
        .post(format!("{}/revoke-all", server.base))
        .send()
        .await
        .unwrap();
    refused_for_sign_in(client.peer(), "the sign-in was revoked").await;
    assert!(matches!(
        settled(&sessions).await,
        SessionState::SignInRequired { .. }
    ));
    let _ = client.cancel().await;
    sessions.shutdown().await;
}

/// A signed-in server's calls are posted by the gateway itself, each with the sign-in's token
/// as it is then: refreshed once it is about to expire; when the server refuses it anyway
/// (revoked early), the call goes rmcp's way, whose sign-in client refreshes it, and the next
/// is posted by the gateway again; short of a scope, the person is asked to sign in with more,
/// and the gateway then posts with the stepped-up token; after the person signs out, no call
/// carries the old token. The agent never sees a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_posts_a_signed_in_servers_calls_itself_with_the_sign_ins_token_as_it_is_then()
{
    let lifetime = Duration::from_secs(4);
    let server = NotesServer::start_keeping_sessions("gateway-direct", lifetime.as_secs()).await;
    let dir = scratch("gateway-direct-rig");
    let broker = Broker::new(AuditLog::open(dir.join("audit.jsonl")).unwrap());
    let _person = person(&broker, true);
    let sessions = sessions(&broker);
    let mut config = server.config();
    for tool in ["whoami", "write_note"] {
        config.tool_policy.insert(tool.into(), ToolRule::Allow);
    }
    sessions.start(vec![config.clone()]).await;
    assert!(matches!(
        settled(&sessions).await,
        SessionState::SignInRequired { .. }
    ));
    sessions.sign_in("notes").await.unwrap();
    let (gateway, addr) = gateway_for(config, &broker, &sessions, &dir).await;
    let streams_before = server
        .events()
        .iter()
        .filter(|e| e["event"] == "stream")
        .count();
    let client = agent(addr, gateway.token().to_owned())
        .await
        .expect("agent connects");
    // The gateway's upstream session has its standalone stream (where the direct way hands
    // rmcp what is not the call's).
    tokio::time::timeout(WAIT, async {
        while server
            .events()
            .iter()
            .filter(|e| e["event"] == "stream")
            .count()
            <= streams_before
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the upstream session opens its stream");
    let call = || answered(client.peer());
    // The server's tools/call requests: (posted by the gateway itself, token).
    let calls = || -> Vec<(bool, String)> {
        server
            .events()
            .iter()
            .filter(|e| e["event"] == "mcp" && e["method"] == "tools/call")
            .map(|e| {
                let ours = e["id"]
                    .as_str()
                    .is_some_and(|id| id.starts_with("countersign:"));
                (ours, e["token"].as_str().unwrap_or_default().to_owned())
            })
            .collect()
    };

    assert!(call().await.contains("scopes: notes:read"));
    let first = calls();
    let (ours, first_token) = first.last().cloned().unwrap();
    assert!(ours, "the gateway posted the call itself: {first:?}");

    // Expired: our post takes the sign-in's refreshed token.
    tokio::time::sleep(lifetime + Duration::from_millis(500)).await;
    let refreshes = server.grants("refresh_token");
    let answer = call().await;
    assert!(answer.contains("scopes: notes:read"), "{answer}");
    let (ours, second_token) = calls().last().cloned().unwrap();
    assert!(ours, "posted by the gateway");
    assert_ne!(second_token, first_token, "with a refreshed token");
    assert!(server.grants("refresh_token") > refreshes, "refreshed");

    // Refused early (the provider revoked the access tokens): rmcp's way refreshes.
    reqwest::Client::new()
        .post(format!("{}/revoke-access", server.base))
        .send()
        .await
        .unwrap();
    let before = calls().len();
    let answer = call().await;
    assert!(answer.contains("scopes: notes:read"), "{answer}");
    let after = calls()[before..].to_vec();
    assert!(
        after
            .first()
            .is_some_and(|(ours, token)| *ours && *token == second_token),
        "the gateway posted it first: {after:?}"
    );
    let (_, third_token) = after.last().cloned().unwrap();
    assert!(
        after.last().is_some_and(|(ours, _)| !ours) && third_token != second_token,
        "refused, it went rmcp's way with a new token: {after:?}"
    );
    assert!(call().await.contains("scopes: notes:read"));
    let (ours, token) = calls().last().cloned().unwrap();
    assert!(ours, "posted by the gateway again");
    assert_eq!(token, third_token, "with the token rmcp's way got");
    for token in server.issued_tokens() {
        assert!(!answer.contains(&token), "the agent saw {token}");
    }

    // Short of a scope (403 `insufficient_scope`): the gateway's post is refused and the call
    // ends in words at once, while the desktop asks the person to sign in with more (no second
    // post: no refresh grants a scope). Once they have, the gateway posts the call itself, with
    // the stepped-up token.
    let write = || {
        tokio::time::timeout(
            WAIT,
            client
                .peer()
                .call_tool(CallToolRequestParams::new("write_note")),
        )
    };
    let before = calls().len();
    let short = write().await.unwrap().expect_err("short of a scope");
    assert!(
        short
            .to_string()
            .contains("asks them on the desktop to sign in again"),
        "{short}"
    );
    let after = calls()[before..].to_vec();
    assert!(
        matches!(after.as_slice(), [(true, _)]),
        "posted once, by the gateway: {after:?}"
    );
    assert!(matches!(
        settled(&sessions).await,
        SessionState::SignInRequired { .. }
    ));
    sessions.sign_in("notes").await.expect("stepped up");
    sessions.wait_ready("notes", WAIT).await;
    let wrote = serde_json::to_string(&write().await.unwrap().expect("written")).unwrap();
    assert!(wrote.contains("notes:write"), "{wrote}");
    let (ours, stepped_up) = calls().last().cloned().unwrap();
    assert!(ours, "posted by the gateway");
    assert_ne!(stepped_up, third_token, "with the stepped-up token");

    // The person signs out: the next call carries no token of the sign-in's, and the agent is
    // told in words while the desktop asks the person to sign in again.
    sessions.sign_out("notes").await.unwrap();
    let before = calls().len();
    refused_for_sign_in(client.peer(), "signed out").await;
    let issued = server.issued_tokens();
    let after = calls()[before..].to_vec();
    assert!(
        after.iter().all(|(_, token)| !issued.contains(token)),
        "a call after the sign-out carried its token: {after:?}"
    );
    let _ = client.cancel().await;
    sessions.shutdown().await;
}

/// A saved sign-in's refresh token goes back only to the authorization server that granted
/// it. Here the server, after the person signed in with the provider (`127.0.0.1`), serves
/// metadata at an address of its own that claims that provider's issuer and names endpoints
/// on another host (`localhost`, the same process, so the test sees where the refresh went):
/// at the next start the token expired and would have been refreshed there. The issuer's own
/// metadata does not name that endpoint, so nothing is sent, and the person signs in again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_sign_in_is_not_refreshed_where_metadata_claiming_its_issuer_says() {
    // Claiming the issuer that granted it; or naming none, which rmcp would not compare.
    for (case, issuer) in [("claimed", None), ("issuerless", Some("null"))] {
        let server = NotesServer::start(&format!("restart-{case}"), 1).await;
        let vault = Vault::memory();
        let dir = scratch(&format!("restart-{case}-audit"));
        let broker = Broker::new(AuditLog::open(dir.join("audit.jsonl")).unwrap());
        let _person = person(&broker, true);
        let first = SessionManager::with_auth(
            broker.clone(),
            Backoff::default(),
            DEFAULT_PING_EVERY,
            Auth::new(vault.clone()),
        );
        first.start(vec![server.config()]).await;
        first.wait_until_settled("notes").await;
        first.sign_in("notes").await.unwrap();
        first.shutdown().await;

        let issuer = issuer
            .map(|i| format!(r#""issuer": {i},"#))
            .unwrap_or_default();
        let claimed = format!(
            r#"{{{issuer} "authorization_endpoint": "http://localhost:{{port}}/authorize",
            "token_endpoint": "http://localhost:{{port}}/token",
            "registration_endpoint": "http://localhost:{{port}}/register",
            "revocation_endpoint": "http://localhost:{{port}}/revoke"}}"#
        );
        let turned = reqwest::Client::new()
            .post(format!("{}/metadata", server.base))
            .json(&serde_json::json!({"members": claimed, "at": "/.well-known/as"}))
            .send()
            .await
            .unwrap();
        assert!(turned.status().is_success());
        // The access token has expired: the next start would refresh it.
        tokio::time::sleep(Duration::from_millis(1500)).await;

        let broker = Broker::new(AuditLog::open(dir.join("audit-2.jsonl")).unwrap());
        let again = SessionManager::with_auth(
            broker,
            Backoff::default(),
            DEFAULT_PING_EVERY,
            Auth::new(vault),
        );
        again.start(vec![server.config()]).await;
        let state = again.wait_until_settled("notes").await;
        assert!(
            matches!(state, Some(SessionState::SignInRequired { .. })),
            "{case}: {state:?}"
        );
        let elsewhere: Vec<_> = server
            .events()
            .into_iter()
            .filter(|e| {
                e["event"] == "token"
                    && e["host"]
                        .as_str()
                        .is_some_and(|h| h.starts_with("localhost"))
            })
            .collect();
        assert!(
            elsewhere.is_empty(),
            "{case}: tokens went where the claim said: {elsewhere:?}"
        );
        again.shutdown().await;
    }
}

/// After a restart the sign-in is found where it was kept: the new run connects with the
/// stored tokens (after discovering the server's metadata again), and nobody is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_finds_the_sign_in_where_it_was_kept() {
    let server = NotesServer::start("restart", 3600).await;
    let vault = Vault::memory();
    let dir = scratch("restart-audit");
    let broker = Broker::new(AuditLog::open(dir.join("audit.jsonl")).unwrap());
    let _person = person(&broker, true);
    let first = SessionManager::with_auth(
        broker.clone(),
        Backoff::default(),
        DEFAULT_PING_EVERY,
        Auth::new(vault.clone()),
    );
    first.start(vec![server.config()]).await;
    assert!(matches!(
        first.wait_until_settled("notes").await,
        Some(SessionState::SignInRequired { .. })
    ));
    first.sign_in("notes").await.unwrap();
    first.shutdown().await;

    let broker = Broker::new(AuditLog::open(dir.join("audit-2.jsonl")).unwrap());
    let mut asked = broker.subscribe();
    let again = SessionManager::with_auth(
        broker,
        Backoff::default(),
        DEFAULT_PING_EVERY,
        Auth::new(vault),
    );
    again.start(vec![server.config()]).await;
    assert!(matches!(
        again.wait_until_settled("notes").await,
        Some(SessionState::Ready { .. })
    ));
    let text = whoami(&again, "whoami").await.unwrap();
    assert!(text.contains("notes:read"), "{text}");
    assert!(asked.try_recv().is_err(), "nobody was asked");
    assert_eq!(server.grants("authorization_code"), 1, "one sign-in in all");
    again.shutdown().await;
}
