//! The gateway in the real app: a TypeScript SDK agent (tests/peers/ts-agent.mjs) reaches the
//! demo desk through Countersign over HTTP with the bearer token, and the person approves its
//! tool calls with clicks and keys in the real webview.

use std::process::Stdio;
use std::time::{Duration, Instant};

use countersign_e2e::{App, DIALOG, WAIT, demo_server, eventually, fault_row, http_exchange, repo};
use fantoccini::Locator;
use fantoccini::elements::Element;
use serde_json::{Value, json};

const AGENT: &str = "e2e-agent";
/// Who an agent holding the shared token is, for the person.
const SHARED: &str = "Shared token (older setups)";

/// The app under test, where its gateway listens, and the token agents need.
struct Gateway {
    app: App,
    port: u16,
    token: String,
}

/// The app with the demo desk (untrusted, so every call asks) and its gateway on a port of its
/// own (not the default 47717, which a developer's running app may hold); returns once the
/// gateway listens, its token is written and the page is ready.
async fn start(test: &str) -> Gateway {
    let (app, port) = App::start_with_gateway(
        test,
        json!({"mcpServers": {"demo": {"command": demo_server()}}}),
        &[],
    )
    .await;
    // XDG_DATA_HOME is the test's own (see App::launch), so the token is there.
    let token_file = app.dir.join("data/countersign/gateway-token");
    eventually("the token file is written", async || {
        std::fs::read_to_string(&token_file).is_ok_and(|t| !t.trim().is_empty())
    })
    .await;
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_owned();
    app.find("#app[data-ready]").await;
    count_dialogs(&app).await;
    Gateway { app, port, token }
}

/// Counts, in the page, every time a dialog opens, so "no dialog appeared" means none at all,
/// not just none when we looked.
async fn count_dialogs(app: &App) {
    app.client
        .execute(
            r#"
            window.__dialogsShown = 0;
            let open = document.querySelector('dialog[open]') !== null;
            new MutationObserver(() => {
              const now = document.querySelector('dialog[open]') !== null;
              if (now && !open) window.__dialogsShown += 1;
              open = now;
            }).observe(document.body, {subtree: true, childList: true, attributes: true, attributeFilter: ['open']});
            "#,
            vec![],
        )
        .await
        .unwrap();
}

async fn dialogs_shown(app: &App) -> u64 {
    app.client
        .execute("return window.__dialogsShown", vec![])
        .await
        .unwrap()
        .as_u64()
        .expect("the dialog counter is installed")
}

impl Gateway {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp/demo", self.port)
    }

    /// Starts the agent: it connects, lists the tools and calls `tool` once.
    fn agent(&self, tool: &str, args: Value) -> tokio::process::Child {
        self.agent_with_token(&self.token, tool, args)
    }

    fn agent_with_token(&self, token: &str, tool: &str, args: Value) -> tokio::process::Child {
        let script = repo().join("tests/peers/ts-agent.mjs");
        assert!(script.exists(), "run `make deps` for the test peers");
        tokio::process::Command::new("node")
            .arg(script)
            .args(["--url", &self.url(), "--token", token, "--name", AGENT])
            .args(["--call", tool, "--args", &args.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs (Node 20+ on PATH)")
    }
}

/// What the agent printed, one JSON value a line, once it has exited; and whether it succeeded.
async fn finished(agent: tokio::process::Child) -> (bool, Vec<Value>) {
    let output = tokio::time::timeout(WAIT, agent.wait_with_output())
        .await
        .expect("the agent finished in time")
        .unwrap();
    let lines = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    if !output.status.success() {
        eprintln!("agent stderr: {}", String::from_utf8_lossy(&output.stderr));
    }
    (output.status.success(), lines)
}

/// The tool result the agent received.
async fn call_result(agent: tokio::process::Child) -> Value {
    let (ok, lines) = finished(agent).await;
    assert!(ok, "the agent failed: {lines:?}");
    let call = lines
        .iter()
        .find(|l| l["step"] == "call")
        .unwrap_or_else(|| panic!("the agent made no call: {lines:?}"));
    call["result"].clone()
}

/// The result's text content, joined.
fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits for the approval dialog and checks what assistive technology and the person are told:
/// a dialog named "Approve a tool call" naming the agent, the server and the tool, with the
/// focus on Deny.
async fn approval(app: &App, tool: &str) -> Element {
    let dialog = app.dialog().await;
    eventually("the approval dialog is drawn", async || {
        app.exists(&format!("{DIALOG} .call-summary")).await
    })
    .await;
    assert_eq!(app.computed(&dialog, "role").await, "dialog");
    assert_eq!(app.computed(&dialog, "label").await, "Approve a tool call");
    let summary = app
        .find(&format!("{DIALOG} .call-summary"))
        .await
        .text()
        .await
        .unwrap();
    // The agent is who its token says; what it calls itself is shown beside.
    assert_eq!(
        summary,
        format!("{SHARED} wants to run {tool} on demo."),
        "the dialog names agent, tool and server"
    );
    let facts = app
        .find(&format!("{DIALOG} .call-facts"))
        .await
        .text()
        .await
        .unwrap();
    for fact in [SHARED, &format!("calls itself {AGENT}"), "demo", tool] {
        assert!(facts.contains(fact), "{fact} in {facts:?}");
    }
    let deny = app
        .find_xpath("//dialog[@open]//button[normalize-space()='Deny']")
        .await;
    let focused = app.client.active_element().await.unwrap();
    assert_eq!(
        focused.element_id(),
        deny.element_id(),
        "focus starts on Deny"
    );
    dialog
}

/// 1. Allow once, then the desk's own question (for the agent) answered: the ticket is deleted.
#[tokio::test]
async fn e2e_gateway_allow_once_then_the_desks_question_deletes_the_ticket() {
    let gw = start("gw-allow").await;
    let app = &gw.app;
    let started = Instant::now();
    let agent = gw.agent("delete_ticket", json!({"id": "t2"}));

    approval(app, "delete_ticket").await;
    let args = app
        .find(&format!("{DIALOG} .call-args"))
        .await
        .text()
        .await
        .unwrap();
    assert!(args.contains("\"t2\""), "the arguments are shown: {args}");
    // Let the dialog settle and its yes buttons arm (after half a second) before the picture (the README's, when asked for).
    tokio::time::sleep(Duration::from_millis(900)).await;
    let png = app.screenshot().await.unwrap();
    let out = std::env::var_os("COUNTERSIGN_APPROVAL_SCREENSHOT_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| app.dir.join("approval-dialog.png"));
    std::fs::write(&out, png).unwrap();
    println!("screenshot: {}", out.display());

    let approval_id = app
        .find(&format!("{DIALOG} section.ask:not([hidden])"))
        .await
        .attr("data-ask-id")
        .await
        .unwrap()
        .expect("the approval's id");
    app.press_in_dialog("Allow once").await;
    // The desk asks its own question, on behalf of the agent: the question shown, once the
    // approval's own reply has come (until then it stays in the page, and this one is hidden).
    let shown = app
        .find(&format!(
            "{DIALOG} section.ask:not([hidden]):not([data-ask-id='{approval}'])",
            approval = approval_id
        ))
        .await;
    let in_shown = async |css: &str| {
        shown
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css} in the question shown: {e}"))
    };
    let checkbox = in_shown("input[type=checkbox]").await;
    let meta = in_shown(".ask-meta").await.text().await.unwrap();
    assert!(
        meta.contains(&format!("for agent {SHARED} (calls itself {AGENT})")),
        "the question names the agent: {meta:?}"
    );
    let title = in_shown(".ask-title").await.text().await.unwrap();
    assert_eq!(title, "demo asks");
    checkbox.click().await.unwrap();
    assert!(checkbox.is_selected().await.unwrap(), "ticked");
    app.press_in_dialog("Submit").await;
    app.gone(DIALOG).await;

    // The desk's own reply is the proof: each agent session has its own upstream session, so a
    // second agent would list a fresh desk's tickets.
    let result = call_result(agent).await;
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(text(&result), "Deleted ticket t2.", "{result}");
    println!(
        "e2e gateway allow once: agent started -> ticket deleted in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    gw.app.close().await;
}

/// 2. Escape denies: the agent gets an error result saying so, and the dialog is gone. The desk
/// is untrusted, so `purge_spam`'s claim to be read-only does not spare the question.
#[tokio::test]
async fn e2e_gateway_escape_denies_the_call() {
    let gw = start("gw-deny").await;
    let app = &gw.app;
    let agent = gw.agent("purge_spam", json!({}));
    approval(app, "purge_spam").await;
    let hints = app
        .find(&format!("{DIALOG} .call-hints"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        hints.contains("read-only it changes nothing") && !hints.contains("not read-only"),
        "the claim is shown: {hints}"
    );
    app.press_escape().await;
    app.gone(DIALOG).await;
    let result = call_result(agent).await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(text(&result).contains("denied"), "{result}");
    gw.app.close().await;
}

/// 3. Always allow is remembered for this agent and tool, listed in Settings, and revocable.
#[tokio::test]
async fn e2e_gateway_always_allow_is_remembered_until_revoked() {
    let gw = start("gw-always").await;
    let app = &gw.app;

    let agent = gw.agent("list_tickets", json!({}));
    approval(app, "list_tickets").await;
    app.press_in_dialog("Always allow").await;
    app.gone(DIALOG).await;
    let result = call_result(agent).await;
    assert_ne!(result["isError"], true, "{result}");
    assert!(text(&result).contains("t1"), "{result}");
    assert_eq!(dialogs_shown(app).await, 1);

    // Again: no dialog at all.
    let result = call_result(gw.agent("list_tickets", json!({}))).await;
    assert_ne!(result["isError"], true, "{result}");
    assert!(text(&result).contains("t1"), "{result}");
    assert_eq!(dialogs_shown(app).await, 1, "the second call did not ask");

    // Settings lists it; Revoke.
    app.find("#tab-settings").await.click().await.unwrap();
    let row = format!(
        "//ul[contains(@class,'allowed-list')]/li[.//span[normalize-space()='{SHARED} may run list_tickets on demo']]"
    );
    app.find_xpath(&row).await;
    app.find_xpath(&format!("{row}//button[normalize-space()='Revoke']"))
        .await
        .click()
        .await
        .unwrap();
    app.find_xpath("//p[@role='status'][starts-with(normalize-space(), 'Revoked')]")
        .await;
    assert!(
        app.client.find(Locator::XPath(&row)).await.is_err(),
        "the row is gone"
    );

    // Asked again; denied this time.
    let agent = gw.agent("list_tickets", json!({}));
    approval(app, "list_tickets").await;
    app.press_in_dialog("Deny").await;
    app.gone(DIALOG).await;
    let result = call_result(agent).await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(text(&result).contains("denied"), "{result}");
    assert_eq!(dialogs_shown(app).await, 2);
    gw.app.close().await;
}

/// An agent that can take its call back: the TypeScript SDK's client, as in ts-agent.mjs, with
/// the call's `AbortSignal` fired when a line arrives on stdin (the SDK then sends
/// `notifications/cancelled`, without waiting for it to go out); it stays connected until stdin
/// closes, as an agent that carries on would (closing at once can abort that send). Run from
/// tests/peers so the SDK resolves.
const CANCELLING_AGENT: &str = r#"
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createInterface } from 'node:readline';
const [url, token, name, tool, args] = process.argv.slice(1);
const print = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const client = new Client({ name, version: '1.0.0' }, { capabilities: {} });
await client.connect(new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
}));
await client.listTools();
const abort = new AbortController();
const input = createInterface({ input: process.stdin });
input.once('line', () => abort.abort('changed my mind'));
const closed = new Promise((resolve) => input.once('close', resolve));
print({ step: 'calling' });
try {
  const result = await client.callTool({ name: tool, arguments: JSON.parse(args) }, undefined,
    { signal: abort.signal, timeout: 60000 });
  print({ step: 'call', result });
} catch (e) {
  print({ step: 'cancelled', message: String(e && e.message ? e.message : e) });
}
await closed;
await client.close();
process.exit(0);
"#;

/// The audit log's records.
fn audit(app: &App) -> Vec<Value> {
    std::fs::read_to_string(app.audit_log())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// 4. The agent takes its call back while the person is being asked: the dialog is withdrawn,
/// with a notice saying why, and the call never reaches the desk.
#[tokio::test]
async fn e2e_gateway_an_agent_cancelling_its_call_withdraws_the_dialog() {
    use tokio::io::AsyncWriteExt;
    let gw = start("gw-cancel").await;
    let app = &gw.app;
    let mut agent = tokio::process::Command::new("node")
        .current_dir(repo().join("tests/peers"))
        .args(["--input-type=module", "-e", CANCELLING_AGENT])
        .args([gw.url().as_str(), &gw.token, AGENT, "delete_ticket"])
        .arg(json!({"id": "t1"}).to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs (Node 20+ on PATH)");
    approval(app, "delete_ticket").await;

    let cancelled = Instant::now();
    let mut stdin = agent.stdin.take().unwrap();
    stdin.write_all(b"cancel\n").await.unwrap();
    stdin.flush().await.unwrap();
    app.gone(DIALOG).await;
    drop(stdin);
    let took = cancelled.elapsed();
    println!(
        "e2e gateway: agent cancels -> dialog gone in {} ms",
        took.as_millis()
    );
    assert!(
        took < Duration::from_secs(5),
        "withdrawn promptly: {took:?}"
    );
    let notice = app.find(".toast[role=status]").await.text().await.unwrap();
    assert!(notice.contains("agent cancelled"), "{notice}");

    let (ok, lines) = finished(agent).await;
    assert!(ok, "{lines:?}");
    assert!(
        lines.iter().any(|l| l["step"] == "cancelled"),
        "the agent saw its call cancelled: {lines:?}"
    );
    let records = audit(app);
    let resolved: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "resolved")
        .collect();
    assert_eq!(resolved.len(), 1, "{records:?}");
    assert_eq!(resolved[0]["outcome"], "cancelled", "{records:?}");
    assert_eq!(resolved[0]["reason"], "agent", "{records:?}");
    assert_eq!(
        records.iter().filter(|r| r["event"] == "asked").count(),
        1,
        "the desk never asked its own question: {records:?}"
    );
    assert_eq!(dialogs_shown(app).await, 1);
    gw.app.close().await;
}

/// 4b. The agent's process dies while the person is being asked (no cancellation sent, the
/// connection just closes): the dialog is withdrawn within seconds, as "the agent
/// disconnected" (the gateway notices the call's response stream dropped; rmcp alone would
/// keep it open until the session idles out, 300 s).
#[tokio::test]
async fn e2e_gateway_an_agent_killed_mid_approval_withdraws_the_dialog() {
    let gw = start("gw-killed").await;
    let app = &gw.app;
    let mut agent = gw.agent("delete_ticket", json!({"id": "t1"}));
    approval(app, "delete_ticket").await;
    agent.start_kill().unwrap();
    agent.wait().await.unwrap();
    let killed = Instant::now();
    while app.exists(DIALOG).await {
        assert!(
            killed.elapsed() < Duration::from_secs(10),
            "the dialog of a dead agent is still open after 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "e2e gateway: agent killed -> dialog gone in {} ms",
        killed.elapsed().as_millis()
    );
    let records = audit(app);
    assert!(
        records.iter().any(|r| r["event"] == "resolved"
            && r["outcome"] == "cancelled"
            && r["reason"] == "agentGone"),
        "{records:?}"
    );
    fault_row(
        "the agent killed mid-call (its approval open)",
        &format!(
            "the dialog withdrawn in {} ms",
            killed.elapsed().as_millis()
        ),
        "nothing: the call was never forwarded",
        "the approval, then cancelled (agent gone)",
        true,
    );
    gw.app.close().await;
}

/// 5. A wrong token is refused with 401 before anything reaches the desk or the person.
#[tokio::test]
async fn e2e_gateway_a_wrong_token_gets_401_and_no_dialog() {
    let gw = start("gw-token").await;
    let app = &gw.app;
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": AGENT, "version": "1.0.0"}},
    })
    .to_string();
    let port = gw.port;
    let (status, headers, body) = tokio::task::spawn_blocking(move || {
        http_exchange(
            port,
            "POST",
            "/mcp/demo",
            &[
                ("Authorization", "Bearer not-the-token"),
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
            ],
            &initialize,
        )
    })
    .await
    .unwrap();
    assert_eq!(status, 401, "{body}");
    assert!(
        headers
            .iter()
            .any(|(k, v)| k == "www-authenticate" && v.starts_with("Bearer")),
        "{headers:?}"
    );

    // A real agent with the wrong token fails at connect and never reaches a call.
    let (ok, lines) = finished(gw.agent_with_token("not-the-token", "purge_spam", json!({}))).await;
    assert!(!ok, "{lines:?}");
    assert!(lines.iter().all(|l| l["step"] != "call"), "{lines:?}");

    // Give a dialog every chance to appear; none does, and nothing was asked.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(dialogs_shown(app).await, 0);
    assert!(!app.exists(DIALOG).await);
    let records = audit(app);
    assert!(records.iter().all(|r| r["event"] != "asked"), "{records:?}");
    gw.app.close().await;
}

/// Focus moves with Tab (or Shift+Tab) until `is_there` says it is where it should be.
async fn tab_to(app: &App, back: bool, what: &str, is_there: impl AsyncFn(&Element) -> bool) {
    use fantoccini::key::Key;
    for _ in 0..30 {
        let focused = app.client.active_element().await.unwrap();
        if is_there(&focused).await {
            return;
        }
        let key = if back {
            format!("{}{}", Key::Shift, Key::Tab)
        } else {
            Key::Tab.to_string()
        };
        focused.send_keys(&key).await.unwrap();
    }
    panic!("Tab never reached {what}");
}

async fn text_of(element: &Element) -> String {
    element.text().await.unwrap_or_default().trim().to_owned()
}

/// 7. The scope choices by keyboard alone: Remember…, "1 hour", these exact arguments, Allow
/// and remember. The same call then runs unasked, another asks; Settings lists the decision,
/// not an expired one, and Revoke makes the call ask again.
#[tokio::test]
async fn e2e_gateway_remember_by_keyboard_then_settings_lists_expires_and_revokes() {
    use fantoccini::key::Key;
    let gw = start("gw-remember").await;
    // An "always" decision that expired long ago, as an earlier run left it: not listed, and
    // its call asks.
    let settings = gw.app.dir.join("config/countersign/settings.json");
    let expired = json!({"remembered": [{
        "id": 41, "agent": "shared", "agentName": SHARED, "server": "demo", "tool": "list_tickets",
        "allow": true, "lasting": {"kind": "until", "untilMs": 1_000}, "covering": {"kind": "anyArguments"},
        "session": null, "definition": {}, "digest": "", "createdMs": 0, "lastUsedMs": null, "uses": 0
    }]});
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, expired.to_string()).unwrap();
    let Gateway { app, port, token } = gw;
    let app = app.restart().await;
    eventually("the gateway listens again", async || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })
    .await;
    app.find("#app[data-ready]").await;
    count_dialogs(&app).await;
    let gw = Gateway { app, port, token };
    let app = &gw.app;

    // session_info takes no arguments: `{}` is what is remembered exactly; any other
    // arguments are another call (which the desk would refuse, were it allowed to run).
    let args = json!({});
    let agent = gw.agent("session_info", args.clone());
    approval(app, "session_info").await;
    let focused = app.client.active_element().await.unwrap();
    assert_eq!(text_of(&focused).await, "Deny", "focus starts on Deny");
    // Back to Remember…, open it.
    tab_to(app, true, "Remember…", async |e| {
        text_of(e).await == "Remember…"
    })
    .await;
    app.client
        .active_element()
        .await
        .unwrap()
        .send_keys(&Key::Enter.to_string())
        .await
        .unwrap();
    // Into "For how long" (on its first choice), down to "1 hour".
    tab_to(app, false, "the first radio", async |e| {
        e.attr("type").await.ok().flatten().as_deref() == Some("radio")
    })
    .await;
    let radio = app.client.active_element().await.unwrap();
    radio
        .send_keys(&format!("{}{}", Key::Down, Key::Down))
        .await
        .unwrap();
    let chosen = app
        .find(&format!("{DIALOG} input[type=radio][value='1h']"))
        .await;
    assert!(
        chosen.is_selected().await.unwrap(),
        "1 hour chosen by arrow keys"
    );
    app.snapshot("remember-panel").await;
    // "For which calls" keeps its first choice (these exact arguments); on to the button.
    tab_to(app, false, "Allow and remember", async |e| {
        text_of(e).await == "Allow and remember"
    })
    .await;
    let allow = app.client.active_element().await.unwrap();
    eventually("Allow and remember arms", async || {
        allow.attr("aria-disabled").await.ok().flatten().as_deref() != Some("true")
    })
    .await;
    allow.send_keys(&Key::Enter.to_string()).await.unwrap();
    app.gone(DIALOG).await;
    let result = call_result(agent).await;
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(dialogs_shown(app).await, 1);
    // The same call again: unasked.
    let result = call_result(gw.agent("session_info", args.clone())).await;
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(dialogs_shown(app).await, 1, "the same call did not ask");
    // Other arguments: asked.
    let other = gw.agent("session_info", json!({"note": "other"}));
    approval(app, "session_info").await;
    app.press_in_dialog("Deny").await;
    app.gone(DIALOG).await;
    assert_eq!(call_result(other).await["isError"], true);
    // The expired decision does not let list_tickets through.
    let listing = gw.agent("list_tickets", json!({}));
    approval(app, "list_tickets").await;
    app.press_in_dialog("Deny").await;
    app.gone(DIALOG).await;
    assert_eq!(call_result(listing).await["isError"], true);

    // Settings: the hour-long decision with its arguments, not the expired one; Revoke.
    app.find("#tab-settings").await.click().await.unwrap();
    let row = format!(
        "//ul[contains(@class,'allowed-list')]/li[.//span[normalize-space()='{SHARED} may run session_info on demo']]"
    );
    let listed = app.find_xpath(&row).await.text().await.unwrap();
    app.snapshot("settings-remembered").await;
    assert!(listed.contains("Allowed"), "{listed}");
    assert!(
        listed.contains("exactly {}"),
        "exact arguments shown: {listed}"
    );
    assert!(
        app.client
            .find(Locator::XPath(
                "//ul[contains(@class,'allowed-list')]//li[contains(., 'list_tickets')]"
            ))
            .await
            .is_err(),
        "an expired decision is not listed"
    );
    app.find_xpath(&format!("{row}//button[normalize-space()='Revoke']"))
        .await
        .click()
        .await
        .unwrap();
    app.find_xpath("//p[@role='status'][starts-with(normalize-space(), 'Revoked')]")
        .await;
    let asked = gw.agent("session_info", args);
    approval(app, "session_info").await;
    app.press_in_dialog("Deny").await;
    app.gone(DIALOG).await;
    assert_eq!(call_result(asked).await["isError"], true);
    gw.app.close().await;
}
