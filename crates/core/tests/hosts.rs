//! The agent hosts' own command-line tools (Claude Code, Gemini CLI and Codex, installed at
//! pinned versions by `scripts/install-deps.sh` into `tests/hosts`), each in a throwaway home
//! with only its offline MCP commands: the Connect page's snippet for a new agent is run as a
//! person would paste it, twice, for a server whose name has a space and a dot; then the host's
//! own check (run through the app's "Test connection") says the server is connected through the
//! gateway, the gateway saw that agent, and the token is in no project file. A host given a
//! wrong token fails, and the Connect page's refusal list says why. And a server each host added
//! itself is imported, the host's file routed through the gateway (the host's own check then says
//! connected through it: the rewritten entry is one the host reads) and undone: byte for byte,
//! or for Claude Code, which rewrites its file whenever it runs, the entry put back as it was.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use countersign_core::agents::{ClientKind, Clients, Places};
use countersign_core::config::GatewayConfig;
use countersign_core::gateway::Gateway;
use countersign_core::settings::SettingsStore;
use countersign_core::{AuditLog, Broker, ServerConfig};

/// The server as the person named it, and as the hosts accept it.
const SERVER: &str = "my desk.v2";
const HOST_NAME: &str = "my-desk-v2";

fn hosts_bin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/hosts/node_modules/.bin")
        .canonicalize()
        .expect("the hosts' tools: run scripts/install-deps.sh (npm ci in tests/hosts)")
}

/// `PATH` for the hosts: their tools, the Node that runs them, the system.
fn path() -> OsString {
    let node = PathBuf::from(
        std::process::Command::new("sh")
            .args(["-c", "command -v node"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default(),
    );
    let mut dirs = vec![hosts_bin()];
    dirs.extend(node.parent().map(Path::to_path_buf));
    dirs.extend(["/usr/local/bin", "/usr/bin", "/bin"].map(PathBuf::from));
    std::env::join_paths(dirs).unwrap()
}

/// A home of its own (under the target dir: Codex will not set itself up under /tmp), with a
/// project folder the host runs in.
struct Home {
    home: PathBuf,
    project: PathBuf,
}

impl Home {
    fn new(tag: &str) -> Home {
        let home = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("hosts-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let project = home.join("project");
        std::fs::create_dir_all(&project).unwrap();
        Home { home, project }
    }

    /// Runs `script` with bash as the person would in a terminal in the project; its output.
    async fn run(&self, script: &str) -> (bool, String) {
        let child = tokio::process::Command::new("bash")
            .args(["-c", script])
            .current_dir(&self.project)
            .env("HOME", &self.home)
            .env("PATH", path())
            .env("NO_COLOR", "1")
            .env("CI", "1")
            // Nothing but the local MCP commands: no updates, no telemetry.
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("GEMINI_CLI_NO_RELAUNCH", "true")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(Duration::from_secs(120), child)
            .await
            .expect("the host's command ended in time")
            .expect("bash runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    }

    /// The app's "Test connection" for `client`, with this home and the hosts' tools.
    async fn test_connection(&self, client: ClientKind) -> String {
        let clients = Clients::new(
            Places::under_home(&self.home),
            self.home.join("countersign.json"),
            None,
            0,
        )
        .with_path(path());
        let check = clients.check_host(client).await.expect("the check runs");
        assert!(!check.timed_out, "{check:?}");
        check.output
    }

    /// Fails if any file in the project holds `secret`.
    fn assert_no_project_file_holds(&self, secret: &str) {
        fn walk(dir: &Path, secret: &str) {
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, secret);
                } else if let Ok(bytes) = std::fs::read(&path) {
                    assert!(
                        !String::from_utf8_lossy(&bytes).contains(secret),
                        "the token is in {}",
                        path.display()
                    );
                }
            }
        }
        walk(&self.project, secret);
    }
}

struct Rig {
    gateway: Gateway,
    _desk: countersign_demo_server::HttpServer,
    addr: SocketAddr,
}

async fn rig(tag: &str) -> Rig {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("hosts-rig-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let desk = countersign_demo_server::serve_http(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        countersign_demo_server::TicketStore::seeded(),
    )
    .await
    .unwrap();
    let broker = Broker::new(AuditLog::open(dir.join("audit.jsonl")).unwrap());
    let gateway = Gateway::new(
        GatewayConfig::default(),
        vec![ServerConfig::http(SERVER, &desk.url())],
        broker,
        SettingsStore::default(),
        dir.join("gateway-token"),
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = gateway.serve(listener);
    Rig {
        gateway,
        _desk: desk,
        addr,
    }
}

impl Rig {
    /// A new agent for `host`: its token, and the Connect page's snippet for that host.
    fn agent(&self, name: &str, host: &str) -> (String, String, String) {
        let created = self
            .gateway
            .create_agent(name, "countersign-bridge")
            .expect("an agent");
        let setup = created
            .clients
            .iter()
            .find(|c| c.client == host)
            .expect("a snippet for the host");
        (created.agent.id, created.token, setup.snippet.clone())
    }

    fn used(&self, id: &str) -> bool {
        self.gateway
            .agents()
            .iter()
            .any(|a| a.id == id && a.last_used_ms.is_some())
    }

    fn url(&self) -> String {
        format!("http://{}/mcp/my%20desk.v2", self.addr)
    }
}

fn connected_line<'a>(said: &'a str, name: &str) -> Vec<&'a str> {
    said.lines()
        .filter(|l| l.contains(&format!("{name}: ")))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_pasted_twice_connects_through_the_gateway() {
    let rig = rig("claude").await;
    let home = Home::new("claude");
    let (id, token, snippet) = rig.agent("Claude Code", "claudeCode");
    for paste in 1..=2 {
        let (ok, said) = home.run(&snippet).await;
        assert!(ok, "paste {paste} failed:\n{said}");
    }
    let said = home.test_connection(ClientKind::ClaudeCode).await;
    let lines = connected_line(&said, HOST_NAME);
    assert_eq!(lines.len(), 1, "one entry after two pastes:\n{said}");
    assert!(lines[0].contains(&rig.url()), "{said}");
    assert!(
        lines[0].contains("Connected") && !lines[0].contains("Failed"),
        "{said}"
    );
    assert!(rig.used(&id), "the gateway saw Claude Code's token");
    home.assert_no_project_file_holds(&token);

    // A wrong token: Claude Code says only that it failed; the Connect page says why.
    let (ok, said) = home
        .run(&format!(
            "claude mcp add --scope user --transport http wrong {} --header 'Authorization: Bearer not-a-token'",
            rig.url()
        ))
        .await;
    assert!(ok, "{said}");
    let said = home.test_connection(ClientKind::ClaudeCode).await;
    let wrong = connected_line(&said, "wrong");
    assert!(wrong.len() == 1 && !wrong[0].contains("✓"), "{said}");
    let refusals = rig.gateway.info().refusals;
    assert!(
        refusals
            .iter()
            .any(|r| r.status == 401 && r.client.as_deref().is_some_and(|c| c.contains("claude"))),
        "{refusals:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_cli_pasted_twice_connects_through_the_gateway() {
    let rig = rig("gemini").await;
    let home = Home::new("gemini");
    // Gemini CLI leaves servers out in folders the person has not trusted.
    std::fs::create_dir_all(home.home.join(".gemini")).unwrap();
    std::fs::write(
        home.home.join(".gemini/trustedFolders.json"),
        serde_json::json!({ home.project.display().to_string(): "TRUST_FOLDER" }).to_string(),
    )
    .unwrap();
    let (id, token, snippet) = rig.agent("Gemini CLI", "gemini");
    for paste in 1..=2 {
        let (ok, said) = home.run(&snippet).await;
        assert!(ok, "paste {paste} failed:\n{said}");
    }
    // `gemini mcp list` reads the folder it runs in: the check runs in the project, from a
    // login shell (which has the token's variable from the profile).
    let (ok, said) = home.run(". ~/.profile; gemini mcp list").await;
    assert!(ok, "{said}");
    let lines = connected_line(&said, HOST_NAME);
    assert_eq!(lines.len(), 1, "one entry after two pastes:\n{said}");
    assert!(lines[0].contains(&rig.url()), "{said}");
    assert!(
        lines[0].contains("Connected") && !lines[0].contains("Disconnected"),
        "{said}"
    );
    assert!(rig.used(&id), "the gateway saw Gemini CLI's token");
    // User scope, and the token only in the private env file: not in the project's nor in
    // Gemini's own settings (which Gemini writes readable by every local user).
    home.assert_no_project_file_holds(&token);
    let settings = std::fs::read_to_string(home.home.join(".gemini/settings.json")).unwrap();
    assert!(settings.contains(HOST_NAME));
    assert!(!settings.contains(&token), "{settings}");
    assert!(
        settings.contains("${COUNTERSIGN_TOKEN_GEMINI}"),
        "{settings}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_pasted_twice_names_the_variable_not_the_token() {
    let rig = rig("codex").await;
    let home = Home::new("codex");
    let (_, token, snippet) = rig.agent("Codex", "codex");
    for paste in 1..=2 {
        let (ok, said) = home.run(&snippet).await;
        assert!(ok, "paste {paste} failed:\n{said}");
    }
    // `codex mcp list` lists what Codex has configured (it does not connect).
    let said = home.test_connection(ClientKind::Codex).await;
    assert_eq!(
        said.lines().filter(|l| l.starts_with(HOST_NAME)).count(),
        1,
        "one entry after two pastes:\n{said}"
    );
    assert!(said.contains(&rig.url()), "{said}");
    let config = std::fs::read_to_string(home.home.join(".codex/config.toml")).unwrap();
    assert!(config.contains("COUNTERSIGN_TOKEN_CODEX"), "{config}");
    assert!(
        !config.contains(&token),
        "Codex's config names the variable only"
    );
    // The token is in a file only the person reads, which the profile sources (once).
    let profile = std::fs::read_to_string(home.home.join(".profile")).unwrap();
    assert_eq!(
        profile.lines().count(),
        1,
        "the profile line is added once:\n{profile}"
    );
    assert!(!profile.contains(&token));
    let env = home.home.join(".config/countersign/agent-env");
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&env).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    assert_eq!(
        std::fs::read_to_string(&env).unwrap(),
        format!("export COUNTERSIGN_TOKEN_CODEX={token}\n")
    );
    let (ok, said) = home
        .run(". ~/.profile; printf %s \"$COUNTERSIGN_TOKEN_CODEX\"")
        .await;
    assert!(ok && said == token, "{said}");
    home.assert_no_project_file_holds(&token);
}

/// Import and route-through with the host's own file as the host wrote it: the server the host
/// reaches directly is imported into Countersign's config, the host's file rewritten to reach it
/// through the gateway, the host's own check says connected through the gateway, and undo gives
/// the file back byte for byte.
async fn routed_through_and_undone(client: ClientKind, host: &str, add: &str, check: &str) {
    let desk = countersign_demo_server::serve_http(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        countersign_demo_server::TicketStore::seeded(),
    )
    .await
    .unwrap();
    let home = Home::new(&format!("route-{host}"));
    if client == ClientKind::Gemini {
        std::fs::create_dir_all(home.home.join(".gemini")).unwrap();
        std::fs::write(
            home.home.join(".gemini/trustedFolders.json"),
            serde_json::json!({ home.project.display().to_string(): "TRUST_FOLDER" }).to_string(),
        )
        .unwrap();
    }
    let (ok, said) = home.run(&add.replace("DESK_URL", &desk.url())).await;
    assert!(ok, "{said}");
    let config = home.home.join("countersign.json");
    let dir = home.home.join("countersign-data");
    std::fs::create_dir_all(&dir).unwrap();
    // Before the gateway exists, the import only needs the port it will have.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let clients = Clients::new(
        Places::under_home(&home.home),
        config.clone(),
        Some(dir.join("rewrites.json")),
        port,
    );
    let preview = clients
        .preview_import(client)
        .expect("the host's file reads");
    let desk_keys: Vec<String> = preview
        .candidates
        .iter()
        .filter(|c| c.name == "desk")
        .map(|c| c.key.clone())
        .collect();
    assert_eq!(desk_keys.len(), 1, "{preview:?}");
    clients.import(preview.plan, &desk_keys).expect("imported");
    let loaded = countersign_core::config::load(&config);
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let gateway = Gateway::new(
        GatewayConfig::default(),
        loaded.servers,
        Broker::new(AuditLog::open(dir.join("audit.jsonl")).unwrap()),
        SettingsStore::default(),
        dir.join("gateway-token"),
    )
    .unwrap();
    let addr = gateway.serve(listener);
    let agent = gateway
        .create_agent(client.title(), "countersign-bridge")
        .unwrap();
    let file = Places::under_home(&home.home).file(client);
    let before = std::fs::read(&file).unwrap();
    let route = countersign_core::agents::Route {
        base_url: format!("http://{addr}"),
        token: agent.token.clone(),
        bridge: "countersign-bridge".into(),
        served: vec!["desk".into()],
    };
    let rewrite = clients.preview_rewrite(client, &route).expect("a preview");
    assert_eq!(rewrite.changes.len(), 1, "{rewrite:?}");
    let done = clients
        .rewrite(rewrite.plan.expect("a plan"))
        .expect("rewritten");
    // What Countersign wrote is private: its config, the host file's backup, the record.
    let backup = home
        .home
        .join(done.rewrite.backup_path.trim_start_matches("~/"));
    for written in [&config, &backup, &dir.join("rewrites.json")] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(written).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", written.display());
    }
    let (ok, said) = home.run(check).await;
    assert!(ok, "{said}");
    let line = said
        .lines()
        .find(|l| l.contains("desk"))
        .unwrap_or_else(|| panic!("{said}"))
        .to_owned();
    assert!(line.contains(&format!("http://{addr}/mcp/desk")), "{said}");
    if client != ClientKind::Codex {
        assert!(
            line.contains("Connected") && !line.contains("Disconnected"),
            "{said}"
        );
        assert!(
            gateway
                .agents()
                .iter()
                .any(|a| a.id == agent.agent.id && a.last_used_ms.is_some()),
            "the gateway saw the routed host"
        );
    }
    let undone = clients.undo(&done.rewrite.id, false).expect("undone");
    let after = std::fs::read(&file).unwrap();
    if undone.entries_only.is_some() {
        // Claude Code writes its own state into ~/.claude.json whenever it runs (its check
        // included): only the routed entry went back, and the host's own changes stay.
        assert_eq!(client, ClientKind::ClaudeCode);
        let servers = |bytes: &[u8]| {
            serde_json::from_slice::<serde_json::Value>(bytes).unwrap()["mcpServers"].clone()
        };
        assert_eq!(
            servers(&after),
            servers(&before),
            "the host's own entry, as it wrote it"
        );
    } else {
        assert_eq!(after, before, "byte for byte");
    }
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_codes_own_entry_is_imported_routed_and_undone() {
    routed_through_and_undone(
        ClientKind::ClaudeCode,
        "claude",
        "claude mcp add --scope user --transport http desk DESK_URL",
        "claude mcp list",
    )
    .await;
}

/// `claude mcp add`'s default scope is the project's (`local`): such a server is imported and
/// routed too, and Claude Code in that project connects through the gateway.
#[tokio::test(flavor = "multi_thread")]
async fn claude_codes_per_project_entry_is_imported_routed_and_undone() {
    routed_through_and_undone(
        ClientKind::ClaudeCode,
        "claude-local",
        "claude mcp add --transport http desk DESK_URL",
        "claude mcp list",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_clis_own_entry_is_imported_routed_and_undone() {
    routed_through_and_undone(
        ClientKind::Gemini,
        "gemini",
        "gemini mcp add --scope user --transport http desk DESK_URL",
        "gemini mcp list",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn codexs_own_entry_is_imported_routed_and_undone() {
    routed_through_and_undone(
        ClientKind::Codex,
        "codex",
        "codex mcp add desk --url DESK_URL",
        "codex mcp list",
    )
    .await;
}

/// One JSON-RPC conversation with `codex app-server` (newline-delimited JSON on stdio).
struct AppServer {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    next: u64,
}

impl AppServer {
    async fn start(home: &Home, token: &str) -> AppServer {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(hosts_bin().join("codex"))
            .arg("app-server")
            .current_dir(&home.project)
            .env("HOME", &home.home)
            .env("PATH", path())
            // As a login shell has it once the Connect snippet's ~/.profile line is in.
            .env("COUNTERSIGN_TOKEN_CODEX", token)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("codex app-server");
        let stdin = child.stdin.take().unwrap();
        let lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut server = AppServer {
            child,
            stdin,
            lines,
            next: 0,
        };
        server
            .request(
                "initialize",
                serde_json::json!({"clientInfo": {"name": "countersign-test", "version": "1"}}),
            )
            .await
            .expect("initialized");
        server
            .send(serde_json::json!({"method": "initialized"}))
            .await;
        server
    }

    async fn send(&mut self, message: serde_json::Value) {
        use tokio::io::AsyncWriteExt;
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
    }

    /// Sends `method` and waits for its answer: the result, or the error as text.
    async fn request(
        &mut self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let id = self.next;
        self.next += 1;
        self.send(serde_json::json!({"method": method, "id": id, "params": params}))
            .await;
        let answer = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let line = self
                    .lines
                    .next_line()
                    .await
                    .unwrap()
                    .expect("app-server still running");
                let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
                    continue;
                };
                if message.get("method").is_none() && message["id"] == id {
                    return message;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{method} answered in time"));
        match answer.get("result") {
            Some(result) => Ok(result.clone()),
            None => Err(answer["error"].to_string()),
        }
    }
}

/// Codex through its app server (no model needed): a gated `delete_ticket` on the server the
/// Connect snippet added is put to the person on the desktop; denied, Codex is told and nothing
/// is deleted; allowed (and confirmed in the server's own question), the ticket is deleted.
#[tokio::test(flavor = "multi_thread")]
async fn codex_app_server_calls_a_gated_tool_that_the_person_denies_then_allows() {
    use countersign_core::ask::AskKind;
    use countersign_core::config::ToolRule;
    use countersign_core::{Answer, AskEvent};

    let store = countersign_demo_server::TicketStore::seeded();
    let desk =
        countersign_demo_server::serve_http(SocketAddr::from(([127, 0, 0, 1], 0)), store.clone())
            .await
            .unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("hosts-rig-codex-gated-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let broker = Broker::new(AuditLog::open(dir.join("audit.jsonl")).unwrap());
    let mut server = ServerConfig::http(SERVER, &desk.url());
    server
        .tool_policy
        .insert("delete_ticket".into(), ToolRule::Ask);
    let gateway = Gateway::new(
        GatewayConfig::default(),
        vec![server],
        broker.clone(),
        SettingsStore::default(),
        dir.join("gateway-token"),
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    gateway.serve(listener);
    let created = gateway.create_agent("Codex", "countersign-bridge").unwrap();
    let snippet = created
        .clients
        .iter()
        .find(|c| c.client == "codex")
        .unwrap()
        .snippet
        .clone();
    let home = Home::new("codex-app-server");
    let (ok, said) = home.run(&snippet).await;
    assert!(ok, "{said}");

    let mut codex = AppServer::start(&home, &created.token).await;
    let thread = codex
        .request("thread/start", serde_json::json!({}))
        .await
        .expect("a thread")["thread"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let events = broker.subscribe();
    let call = |id: &str| {
        serde_json::json!({"server": HOST_NAME, "threadId": thread, "tool": "delete_ticket",
                           "arguments": {"id": id}})
    };
    // The person answers on the desktop while Codex waits: the approval, then the server's
    // own confirmation (allowed calls only).
    let person = |allow: bool| {
        let broker = broker.clone();
        let mut events = events.resubscribe();
        tokio::spawn(async move {
            let mut asked = Vec::new();
            loop {
                let ask = match tokio::time::timeout(Duration::from_secs(60), events.recv()).await {
                    Ok(Ok(AskEvent::Added { ask })) => *ask,
                    Ok(Ok(_)) => continue,
                    _ => return asked,
                };
                match &ask.kind {
                    AskKind::ToolCall { tool, .. } => {
                        asked.push(format!("approve {tool} for {:?}", ask.asker.agent));
                        let answer = if allow {
                            Answer::Accept { content: None }
                        } else {
                            Answer::Decline
                        };
                        broker.answer(ask.id, answer).unwrap();
                        if !allow {
                            return asked;
                        }
                    }
                    AskKind::Form { .. } => {
                        asked.push("confirm".into());
                        let mut content = serde_json::Map::new();
                        content.insert("confirm".into(), true.into());
                        broker
                            .answer(
                                ask.id,
                                Answer::Accept {
                                    content: Some(content),
                                },
                            )
                            .unwrap();
                        return asked;
                    }
                    other => panic!("unexpected question {other:?}"),
                }
            }
        })
    };

    let desktop = person(false);
    let denied = codex.request("mcpServer/tool/call", call("t1")).await;
    let asked = desktop.await.unwrap();
    assert_eq!(asked, ["approve delete_ticket for Some(\"Codex\")"]);
    let text = format!("{denied:?}");
    assert!(text.contains("denied") || text.contains("Denied"), "{text}");
    assert!(store.contains("t1"), "nothing deleted");

    let desktop = person(true);
    let allowed = codex
        .request("mcpServer/tool/call", call("t2"))
        .await
        .expect("the call's result");
    let asked = desktop.await.unwrap();
    assert_eq!(
        asked,
        ["approve delete_ticket for Some(\"Codex\")", "confirm"]
    );
    assert_ne!(allowed["isError"], true, "{allowed}");
    assert!(
        allowed.to_string().contains("Deleted ticket t2"),
        "{allowed}"
    );
    assert!(!store.contains("t2"));
    let _ = codex.child.kill().await;
}

/// Gemini CLI's project scope (`gemini mcp add --scope project`, the folder's own
/// `.gemini/settings.json`): its server is offered for import with the project, and imported;
/// route-through leaves it alone, saying why (the token would go into a committed file).
#[tokio::test(flavor = "multi_thread")]
async fn gemini_clis_project_settings_are_imported_not_routed() {
    let home = Home::new("gemini-project");
    let (ok, said) = home.run("gemini mcp add --scope user --transport http user-desk http://127.0.0.1:9/mcp && gemini mcp add --scope project --transport http team-desk https://team.example/mcp").await;
    assert!(ok, "{said}");
    let config = home.home.join("countersign.json");
    let clients = Clients::new(Places::under_home(&home.home), config.clone(), None, 47717);
    let preview = clients.preview_import(ClientKind::Gemini).expect("read");
    let team = preview
        .candidates
        .iter()
        .find(|c| c.name == "team-desk")
        .unwrap_or_else(|| panic!("{preview:?}"));
    let folder = home.project.canonicalize().unwrap().display().to_string();
    assert_eq!(team.project.as_deref(), Some(folder.as_str()));
    clients
        .import(preview.plan, std::slice::from_ref(&team.key))
        .expect("imported");
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(written.contains("https://team.example/mcp"), "{written}");
    let route = countersign_core::agents::Route {
        base_url: "http://127.0.0.1:47717".into(),
        token: "TOKEN".into(),
        bridge: "countersign-bridge".into(),
        served: vec!["team-desk".into()],
    };
    let rewrite = clients.preview_rewrite(ClientKind::Gemini, &route).unwrap();
    assert!(
        rewrite
            .kept
            .iter()
            .any(|k| k.name == "team-desk" && k.reason.contains("gets committed")),
        "{rewrite:?}"
    );
}
