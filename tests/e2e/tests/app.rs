//! The real app end to end: a config pointing at the demo server (and a TypeScript SDK
//! server), the person clicking and pressing keys in the real webview.

use std::time::Instant;

use countersign_e2e::{App, DIALOG, demo_server, percentile, repo};
use serde_json::{Value, json};

fn demo() -> Value {
    json!({"demo": {"command": demo_server()}})
}

/// The demo on 2025-11-25, where a server can withdraw its question (`notifications/cancelled`);
/// on 2026-07-28 a question lives in the client until answered.
fn legacy_demo() -> Value {
    json!({"demo": {"command": demo_server(), "protocol": "legacy"}})
}

async fn tickets(app: &App) -> String {
    app.run_until_result("list_tickets", "{}", "t1").await
}

#[tokio::test]
async fn e2e_submit_deletes_decline_and_escape_keep() {
    let app = App::start("delete", demo()).await;

    // Submit with the confirmation ticked: the ticket is gone.
    let dialog = app
        .run_until_dialog("delete_ticket", r#"{"id": "t3"}"#)
        .await;
    let name = dialog
        .attr("aria-labelledby")
        .await
        .unwrap()
        .unwrap_or_default();
    let heading = app
        .find(&format!("[id='{name}']"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        heading.contains("demo"),
        "the dialog names the server: {heading:?}"
    );
    let checkbox = app.find(&format!("{DIALOG} input[type=checkbox]")).await;
    // Focus starts in the first field; Space ticks it, as a person would.
    let focused = app.client.active_element().await.unwrap();
    assert_eq!(
        focused.element_id(),
        checkbox.element_id(),
        "focus starts in the first field"
    );
    focused.send_keys(" ").await.unwrap();
    app.press_in_dialog("Submit").await;
    app.gone(DIALOG).await;
    app.wait_result_contains("delete_ticket", "Deleted ticket t3.")
        .await;
    let list = tickets(&app).await;
    assert!(!list.contains("\"t3\""), "t3 is gone: {list}");

    // Decline: nothing deleted.
    app.run_until_dialog("delete_ticket", r#"{"id": "t2"}"#)
        .await;
    app.press_in_dialog("Decline").await;
    app.gone(DIALOG).await;
    app.wait_result_contains("delete_ticket", "Not deleted: you declined.")
        .await;

    // Escape: cancelled, nothing deleted.
    app.run_until_dialog("delete_ticket", r#"{"id": "t2"}"#)
        .await;
    app.press_escape().await;
    app.gone(DIALOG).await;
    app.wait_result_contains("delete_ticket", "Not deleted: the question was cancelled.")
        .await;
    let list = tickets(&app).await;
    assert!(list.contains("\"t2\""), "t2 is still there: {list}");
    app.close().await;
}

#[tokio::test]
async fn e2e_the_servers_cancellation_removes_the_dialog() {
    let app = App::start("slow", legacy_demo()).await;
    app.run_until_dialog("slow_question", r#"{"timeout_ms": 1500}"#)
        .await;
    app.gone(DIALOG).await;
    let notice = app.find(".toast[role=status]").await.text().await.unwrap();
    assert!(notice.contains("withdrew"), "{notice}");
    app.wait_result_contains("slow_question", "Timed out waiting for an answer.")
        .await;
    app.close().await;
}

#[tokio::test]
async fn e2e_typescript_sdk_cancellation_of_request_0_removes_the_dialog() {
    let node_server = repo().join("tests/peers/ts-elicit-server.mjs");
    assert!(node_server.exists(), "run `make deps` for the test peers");
    let app = App::start(
        "ts",
        json!({"ts": {"command": "node", "args": [node_server], "protocol": "legacy"}}),
    )
    .await;
    app.run_until_dialog("ask_with_timeout", r#"{"timeout_ms": 1500}"#)
        .await;
    app.gone(DIALOG).await;
    app.wait_result_contains("ask_with_timeout", "timed out")
        .await;
    app.close().await;
}

#[tokio::test]
async fn e2e_a_reload_mid_ask_redraws_it_from_the_backend() {
    let app = App::start("reload", demo()).await;
    app.run_until_dialog("delete_ticket", r#"{"id": "t4"}"#)
        .await;
    app.client.refresh().await.unwrap();
    app.find("#app[data-ready]").await;
    // The ask is back, and still answerable.
    let dialog = app.dialog().await;
    assert!(dialog.text().await.unwrap().contains("t4"));
    app.press_in_dialog("Decline").await;
    app.gone(DIALOG).await;
    // The reload dropped the page that started the call, so check the effect in history.
    let history: Vec<Value> = std::fs::read_to_string(app.audit_log())
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        history
            .iter()
            .any(|r| r["event"] == "resolved" && r["outcome"] == "declined"),
        "{history:?}"
    );
    let list = tickets(&app).await;
    assert!(list.contains("\"t4\""), "{list}");
    app.close().await;
}

/// The page holds the app's commands, so it never leaves the app's own pages nor opens a
/// window, whatever a script in it asks: a local page standing ready is never even fetched.
#[tokio::test]
async fn e2e_the_page_never_leaves_the_app() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let away = format!("http://{}/", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    let app = App::start("navigation", demo()).await;
    app.find("#app[data-ready]").await;
    app.client
        .execute(
            "window.open(arguments[0] + 'window'); location.href = arguments[0] + 'page';",
            vec![json!(away)],
        )
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the page reached {away}: {other:?}"),
    }
    let here = app.client.current_url().await.unwrap();
    assert_eq!(here.scheme(), "tauri", "{here}");
    assert_eq!(app.client.windows().await.unwrap().len(), 1);
    // Still the app, and still answering.
    app.run_until_dialog("delete_ticket", r#"{"id": "t4"}"#)
        .await;
    app.press_in_dialog("Decline").await;
    app.gone(DIALOG).await;
    app.close().await;
}

/// WebKit's web process killed mid-ask (as the out-of-memory killer would): the app reloads
/// the page, which draws the open question again from the backend, and it is answerable.
#[tokio::test]
async fn e2e_when_the_pages_process_dies_the_page_comes_back_with_the_question() {
    let app = App::start("web-process", demo()).await;
    app.run_until_dialog("delete_ticket", r#"{"id": "t4"}"#)
        .await;
    let pid = app.app_pid().expect("the app's pid").to_string();
    let killed = std::process::Command::new("pkill")
        .args(["-KILL", "-P", &pid, "-x", "WebKitWebProces"])
        .status()
        .unwrap();
    assert!(killed.success(), "no web process of the app to kill");
    countersign_e2e::eventually("the app notices", async || {
        app.log().contains("the window's page died")
    })
    .await;
    // WebKitWebDriver ends its session with the page, so the person's part is played with the
    // X server's own keyboard: the dialog is back, with the focus in it, and Escape answers it.
    let window = std::process::Command::new("xdotool")
        .args(["search", "--onlyvisible", "--name", "^Countersign$"])
        .output()
        .unwrap();
    let window = String::from_utf8_lossy(&window.stdout)
        .lines()
        .next()
        .expect("the Countersign window")
        .to_owned();
    // Escape, until the page is back and answers it (before that, the key does nothing).
    countersign_e2e::eventually(
        "the question answered from the page that came back",
        async || {
            let keyed = std::process::Command::new("xdotool")
                .args(["windowfocus", &window, "key", "Escape"])
                .status()
                .unwrap();
            assert!(keyed.success());
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            std::fs::read_to_string(app.audit_log())
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .any(|r| r["event"] == "resolved")
        },
    )
    .await;
    let resolved: Vec<Value> = std::fs::read_to_string(app.audit_log())
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|r: &Value| r["event"] == "resolved")
        .collect();
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0]["outcome"], "cancelled", "{resolved:?}");
    assert_eq!(resolved[0]["reason"], "person", "{resolved:?}");
    countersign_e2e::eventually("the answer on record as delivered", async || {
        std::fs::read_to_string(app.audit_log())
            .unwrap_or_default()
            .contains("\"event\":\"delivered\"")
    })
    .await;
    countersign_e2e::fault_row(
        "WebKit's web process killed (SIGKILL) with a question open",
        "the page comes back with the question, focus in it; Escape answers it",
        "cancel (the person's Escape), on record as delivered",
        "the question, then cancelled by the person",
        true,
    );
    // No WebDriver session is left to close; dropping the app stops it.
}

/// Benchmark, not assertion: how long from the backend opening an ask to the dialog being in
/// the DOM, and from a withdrawal to the dialog being gone, over 50 asks.
#[tokio::test]
async fn e2e_dialog_latency_benchmark() {
    const ASKS: usize = 50;
    let app = App::start("latency", legacy_demo()).await;
    // Record, in the page, when a dialog appears and disappears (same clock as the backend).
    const OBSERVER: &str = r#"
        if (!window.__dialogTimes) {
          window.__dialogTimes = [];
          // Each change of a dialog's `open`, as it happened: a dialog shown and withdrawn
          // between two WebDriver polls (or in one batch of mutations) still counts.
          new MutationObserver((changes) => {
            for (const m of changes) {
              if (m.target.tagName !== 'DIALOG') continue;
              // No old value: the attribute was just set.
              window.__dialogTimes.push([m.oldValue === null ? 'shown' : 'gone', Date.now()]);
            }
          }).observe(document.body, {subtree: true, attributes: true, attributeFilter: ['open'], attributeOldValue: true});
        }
    "#;
    // The observer goes on the app's page, not on the document before it: a script run while
    // the first load is still under way is lost with that document (CI, once the window was
    // made at the end of start-up rather than before it).
    app.find("#app[data-ready]").await;
    let mut times: Vec<(String, u64)> = Vec::new();
    let started = Instant::now();
    for _ in 0..ASKS {
        app.client.execute(OBSERVER, vec![]).await.unwrap();
        // The question lives 300 ms: watched from the page (above), not polled for.
        app.run_until_result("slow_question", r#"{"timeout_ms": 300}"#, "Timed out")
            .await;
        app.gone(DIALOG).await;
        let round: Vec<(String, u64)> = serde_json::from_value(
            app.client
                .execute(
                    "const t = window.__dialogTimes; window.__dialogTimes = []; return t;",
                    vec![],
                )
                .await
                .unwrap(),
        )
        .unwrap();
        times.extend(round);
    }
    let records: Vec<Value> = std::fs::read_to_string(app.audit_log())
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let asked: Vec<u64> = records
        .iter()
        .filter(|r| r["event"] == "asked")
        .map(|r| r["atMs"].as_u64().unwrap())
        .collect();
    let resolved: Vec<u64> = records
        .iter()
        .filter(|r| r["event"] == "resolved")
        .map(|r| r["atMs"].as_u64().unwrap())
        .collect();
    let shown: Vec<u64> = times
        .iter()
        .filter(|t| t.0 == "shown")
        .map(|t| t.1)
        .collect();
    let gone: Vec<u64> = times
        .iter()
        .filter(|t| t.0 == "gone")
        .map(|t| t.1)
        .collect();
    // Each page-side time is paired with the latest backend time before it.
    let diffs = |backend: &[u64], page: &[u64]| -> Vec<f64> {
        let mut d: Vec<f64> = page
            .iter()
            .filter_map(|p| {
                backend
                    .iter()
                    .filter(|b| *b <= p)
                    .max()
                    .map(|b| (p - b) as f64)
            })
            .collect();
        d.sort_by(f64::total_cmp);
        d
    };
    let show = diffs(&asked, &shown);
    let teardown = diffs(&resolved, &gone);
    println!(
        "e2e dialog latency over {} asks ({:.1} s): ask opened -> dialog in DOM p50 {} ms p99 {} ms max {} ms; withdrawn -> dialog gone p50 {} ms p99 {} ms max {} ms",
        show.len(),
        started.elapsed().as_secs_f64(),
        percentile(&show, 50.0),
        percentile(&show, 99.0),
        show.last().copied().unwrap_or(f64::NAN),
        percentile(&teardown, 50.0),
        percentile(&teardown, 99.0),
        teardown.last().copied().unwrap_or(f64::NAN),
    );
    assert_eq!(
        (show.len(), teardown.len()),
        (ASKS, ASKS),
        "every ask was shown and torn down, once"
    );
    app.close().await;
}

/// The README's picture of the ask dialog, from the real app (`make screenshot` writes it to
/// docs/; otherwise it lands beside the test's files).
#[tokio::test]
async fn e2e_screenshot_of_the_ask_dialog() {
    let app = App::start("screenshot", demo()).await;
    app.run_until_dialog("delete_ticket", r#"{"id": "t3"}"#)
        .await;
    // Let the dialog's opening settle and its yes buttons arm (after half a second) before the picture.
    tokio::time::sleep(std::time::Duration::from_millis(900)).await;
    let png = app.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let out = std::env::var_os("COUNTERSIGN_SCREENSHOT_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| app.dir.join("ask-dialog.png"));
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(&out, png).unwrap();
    println!("screenshot: {}", out.display());
    app.press_in_dialog("Decline").await;
    app.close().await;
}

/// Quitting (here: SIGTERM, as at logout) answers every open question `cancel` before the
/// process exits.
#[tokio::test]
async fn e2e_quitting_cancels_every_open_ask_first() {
    let app = App::start("quit", legacy_demo()).await;
    app.run_until_dialog("delete_ticket", r#"{"id": "t1"}"#)
        .await;
    app.terminate_app();
    let end = app.first_resolution().await;
    assert_eq!(end["outcome"], "cancelled", "{end}");
    assert_eq!(end["reason"], "shutdown", "{end}");
}

/// URL mode: the dialog shows the host; Open hands exactly that URL to the system opener
/// (a recording stub here) and the server receives accept.
#[tokio::test]
async fn e2e_url_consent_opens_exactly_that_url() {
    let stub_dir = std::env::temp_dir().join(format!("cs-opener-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&stub_dir);
    let (stub, record) = countersign_e2e::recording_opener(&stub_dir);

    let app = App::start_with_env("url", legacy_demo(), &[("COUNTERSIGN_OPENER", &stub)]).await;
    let text = app
        .run_until_dialog("connect_account", r#"{"service": "calendar"}"#)
        .await
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("auth.example.com"),
        "the host is shown: {text}"
    );
    assert!(!record.exists(), "nothing is opened before consent");
    app.press_in_dialog("Open").await;
    app.gone(DIALOG).await;
    let reply = app.wait_result_contains("connect_account", "accept").await;
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    // Its line written whole: the shell makes the file before `printf` fills it.
    while !std::fs::read_to_string(&record).is_ok_and(|t| t.ends_with('\n')) {
        assert!(Instant::now() < deadline, "the opener was never called");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let opened = std::fs::read_to_string(&record).unwrap();
    let lines: Vec<&str> = opened.lines().collect();
    assert_eq!(lines.len(), 1, "{opened}");
    assert!(
        lines[0].starts_with("https://auth.example.com/connect?session="),
        "{opened}"
    );
    assert!(reply.contains("calendar"), "{reply}");
    app.close().await;
    let _ = std::fs::remove_dir_all(&stub_dir);
}

/// The person agrees to open an address, and nothing on the desktop can open it (`xdg-open`
/// exits 3 then): they are told so, with the address whole to open themselves, not that it
/// opened.
#[tokio::test]
async fn e2e_an_address_the_browser_did_not_open_is_shown_to_open_by_hand() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("cs-no-browser-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let opener = dir.join("xdg-open");
    std::fs::write(&opener, "#!/bin/sh\nexit 3\n").unwrap();
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();

    let app = App::start_with_env(
        "no-browser",
        legacy_demo(),
        &[("COUNTERSIGN_OPENER", &opener)],
    )
    .await;
    app.run_until_dialog("connect_account", r#"{"service": "calendar"}"#)
        .await;
    app.press_in_dialog("Open").await;
    app.gone(DIALOG).await;
    let banner = app.find(".banner.not-opened[role=alert]").await;
    let text = banner.text().await.unwrap();
    assert!(text.contains("Your browser did not open"), "{text}");
    assert!(text.contains("exit status: 3"), "{text}");
    let url = app
        .find(".not-opened .copyable-url")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        url.starts_with("https://auth.example.com/connect?session="),
        "{url}"
    );
    app.snapshot("not-opened").await;
    app.find(".not-opened button").await.click().await.unwrap();
    app.gone(".not-opened").await;
    app.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server that asks for a password (which MCP forbids): the dialog warns and masks it, the
/// password reaches the server as typed, and the audit log and History keep only its length.
/// The same server then asks 21 questions at once: the 21st is refused with the limit.
#[tokio::test]
async fn e2e_a_password_form_warns_reaches_the_server_and_is_redacted() {
    const PASSWORD: &str = "correct horse 42";
    let server = repo().join("tests/peers/password-server.mjs");
    let server_log = std::env::temp_dir().join(format!(
        "cs-e2e-password-server-{}.jsonl",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&server_log);
    let app = App::start(
        "password",
        json!({"vault": {
            "command": "node", "args": [server], "protocol": "legacy",
            "env": {"PASSWORD_SERVER_LOG": server_log}
        }}),
    )
    .await;
    let dialog = app.run_until_dialog("sign_in", "{}").await;
    let warning = app
        .find(&format!("{DIALOG} .secret-warning"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        warning.contains("MCP forbids servers to ask for these"),
        "{warning}"
    );
    // Only the password is masked and warned about.
    assert_eq!(
        app.client
            .find_all(fantoccini::Locator::Css(&format!(
                "{DIALOG} .secret-warning"
            )))
            .await
            .unwrap()
            .len(),
        1
    );
    let password = app.find(&format!("{DIALOG} input[type=password]")).await;
    // The user name is the one plain text input.
    app.find(&format!("{DIALOG} input[type=text]"))
        .await
        .send_keys("ana")
        .await
        .unwrap();
    password.send_keys(PASSWORD).await.unwrap();
    let toggle = app
        .find_xpath("//dialog[@open]//button[@aria-label='Show Password']")
        .await;
    toggle.click().await.unwrap();
    assert_eq!(
        password.attr("type").await.unwrap().as_deref(),
        Some("text")
    );
    assert_eq!(
        password.prop("value").await.unwrap().as_deref(),
        Some(PASSWORD)
    );
    toggle.click().await.unwrap();
    assert_eq!(
        password.attr("type").await.unwrap().as_deref(),
        Some("password")
    );
    drop(dialog);
    // For a failure to show what was on screen.
    app.snapshot("password-before-submit").await;
    app.press_in_dialog("Submit").await;
    app.gone(DIALOG).await;
    app.wait_result_contains("sign_in", "Signed in as ana (password of 16 characters).")
        .await;

    // The server got the password as typed.
    let received = std::fs::read_to_string(&server_log).unwrap();
    let answer: Value = received
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["id"].as_str().is_some_and(|id| id.starts_with("pw-")))
        .unwrap_or_else(|| panic!("no answer reached the server: {received}"));
    assert_eq!(answer["result"]["content"]["password"], PASSWORD);

    // The log on disk has only its length.
    let log = std::fs::read_to_string(app.audit_log()).unwrap();
    assert!(!log.contains(PASSWORD), "the password is in the audit log");
    let resolved: Value = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["event"] == "resolved")
        .unwrap();
    assert_eq!(
        resolved["content"],
        json!({"user": "ana", "password": {"redacted": true, "length": 16}})
    );

    // History shows the redacted record, never the password.
    app.find("#tab-history").await.click().await.unwrap();
    let history = app.find(".history-table").await.text().await.unwrap();
    assert!(history.contains("\"redacted\":true"), "{history}");
    assert!(history.contains("\"length\":16"), "{history}");
    assert!(!history.contains(PASSWORD), "{history}");

    // 21 questions at once from one server: 20 wait, the 21st is refused in words.
    app.find("#tab-servers").await.click().await.unwrap();
    app.run_until_result("ask_many", r#"{"n": 21}"#, "Asked 21 questions.")
        .await;
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    let refusal = loop {
        let refused = std::fs::read_to_string(&server_log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|m| !m["error"].is_null());
        if let Some(refused) = refused {
            break refused;
        }
        assert!(
            Instant::now() < deadline,
            "the 21st question was not refused"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    // Which one is refused depends on the order the app takes them up, not the order sent.
    assert!(
        refusal["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("many-")),
        "{refusal}"
    );
    assert_eq!(
        refusal["error"]["message"],
        "Countersign: vault already has 20 questions waiting; answer or decline some first"
    );
    let log = std::fs::read_to_string(app.audit_log()).unwrap();
    assert!(
        log.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|r| r["event"] == "refused"
                && r["reason"]
                    .as_str()
                    .is_some_and(|s| s.contains("20 questions"))),
        "the refusal is recorded: {log}"
    );
    // The refusal can reach the server while a question counted among the 20 is still being
    // written to the log: each is on record a moment later.
    let asked = |log: &str| {
        log.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| {
                r["event"] == "asked"
                    && r["ask"]["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("Question"))
            })
            .count()
    };
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    let mut log = log;
    while asked(&log) < 20 && Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        log = std::fs::read_to_string(app.audit_log()).unwrap();
    }
    assert_eq!(asked(&log), 20, "{log}");
    let refused = std::fs::read_to_string(&server_log)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"error\""))
        .count();
    assert_eq!(refused, 1, "only the one past the limit is refused");
    app.close().await;
    let _ = std::fs::remove_file(&server_log);
}

/// A remote server protected by OAuth (`tests/peers/oauth-server.mjs`), in the real app with a
/// real Secret Service (GNOME Keyring on the test's session bus): the server's page says it
/// needs a sign-in; Sign in puts the authorization address in a URL dialog, Open hands it to
/// the system opener (here a browser stand-in that follows the authorization server's
/// redirect to the loopback address), and the tool runs with the token. The token is in the
/// keyring and nowhere under the app's files; an agent through the gateway reaches the server
/// with the person's sign-in; the token is refreshed after it expires; a tool that
/// needs more access leads to a second sign-in for the wider scope; Sign out removes it. `COUNTERSIGN_SIGN_IN_SHOT`
/// names where the picture of the dialog goes (`make screenshot`).
#[tokio::test]
async fn e2e_signing_in_to_an_oauth_server_keeps_the_token_in_the_keyring() {
    let dir = std::env::temp_dir().join(format!("cs-e2e-oauth-peer-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("run")).unwrap();
    let _keyring = countersign_e2e::keyring(&dir);
    let log = dir.join("oauth-server.jsonl");
    let (server, base) = countersign_e2e::oauth_server(&log, 3);
    let _server = server;
    let (browser, opened) = countersign_e2e::redirect_following_opener(&dir);

    let (app, port) = App::start_with_gateway(
        "oauth",
        json!({
            "mcpServers": {"notes": {
                "type": "http", "url": format!("{base}/mcp"), "protocol": "legacy",
                "toolPolicy": {"whoami": "allow"}
            }},
        }),
        &[("COUNTERSIGN_OPENER", &browser)],
    )
    .await;
    app.find_xpath("//button[contains(@class,'server-item')][contains(., 'notes')][contains(., 'Sign-in needed')]")
        .await
        .click()
        .await
        .unwrap();
    let group = app.find("[role=group][aria-label='Sign-in']").await;
    let said = group.text().await.unwrap();
    assert!(said.contains("notes asks you to sign in"), "{said}");
    assert!(said.contains("Kept in your desktop's keyring"), "{said}");
    app.find_xpath("//div[@aria-label='Sign-in']//button[normalize-space()='Sign in']")
        .await
        .click()
        .await
        .unwrap();

    // The address, in the same dialog as a server's URL question: host first, nothing opened.
    let dialog = app.dialog().await;
    let text = dialog.text().await.unwrap();
    let host = base.trim_start_matches("http://");
    assert!(text.contains("Sign in to notes"), "{text}");
    // Countersign's own question, as no server's question can say.
    assert!(text.contains("From Countersign"), "{text}");
    assert!(text.contains(host), "{text}");
    assert!(!opened.exists(), "nothing is opened before consent");
    tokio::time::sleep(std::time::Duration::from_millis(900)).await;
    let shot = std::env::var_os("COUNTERSIGN_SIGN_IN_SHOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| app.dir.join("sign-in.png"));
    std::fs::write(&shot, app.screenshot().await.unwrap()).unwrap();
    app.press_in_dialog("Open").await;
    app.gone(DIALOG).await;

    app.find_xpath("//div[@aria-label='Sign-in'][contains(., 'Signed in (notes:read)')]")
        .await;
    app.snapshot("signed-in").await;
    let result = app.run_until_result("whoami", "{}", "scopes").await;
    assert!(result.contains("scopes: notes:read"), "{result}");
    let opened_once = std::fs::read_to_string(&opened).unwrap();
    assert_eq!(opened_once.lines().count(), 1, "{opened_once}");
    assert!(
        opened_once.starts_with(&format!("{base}/authorize?")),
        "{opened_once}"
    );

    // An agent through the gateway (a TypeScript SDK client with the gateway's token) reaches
    // the server with the person's sign-in, and is never shown the server's token.
    let token = std::fs::read_to_string(app.dir.join("data/countersign/gateway-token")).unwrap();
    let agent = tokio::process::Command::new("node")
        .arg(repo().join("tests/peers/ts-agent.mjs"))
        .args(["--url", &format!("http://127.0.0.1:{port}/mcp/notes")])
        .args(["--token", token.trim(), "--call", "whoami"])
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&agent.stdout).into_owned();
    assert!(agent.status.success(), "{said}");
    assert!(said.contains("scopes: notes:read"), "{said}");
    for issued in countersign_e2e::logged(&log)
        .iter()
        .filter_map(|e| e["access"].as_str())
    {
        assert!(!said.contains(issued), "the agent saw the server's token");
    }

    // Tokens live 3 s here: past that, the next run refreshes, and nobody is asked.
    tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
    app.run_until_result("whoami", "{}", "scopes").await;
    let grants = |grant: &str| {
        countersign_e2e::logged(&log)
            .iter()
            .filter(|e| e["event"] == "token" && e["grant"] == grant && e["ok"] == true)
            .count()
    };
    assert!(grants("refresh_token") >= 1, "refreshed after expiry");
    assert!(!app.exists(DIALOG).await, "a refresh asks nobody");

    // A tool that needs more access: the page asks for a new sign-in, with the scope the
    // server named, and the tool then runs.
    app.run_until_result("write_note", "{}", "more access")
        .await;
    app.find_xpath("//div[@aria-label='Sign-in']//button[normalize-space()='Sign in']")
        .await
        .click()
        .await
        .unwrap();
    let text = app.dialog().await.text().await.unwrap();
    assert!(text.contains("notes%3Awrite"), "the wider scope: {text}");
    app.press_in_dialog("Open").await;
    app.gone(DIALOG).await;
    app.find_xpath("//div[@aria-label='Sign-in'][contains(., 'notes:write')]")
        .await;
    let result = app
        .run_until_result("write_note", "{}", "notes:write")
        .await;
    assert!(
        result.contains("scopes: notes:read notes:write"),
        "{result}"
    );
    assert_eq!(grants("authorization_code"), 2);

    // The token is in the keyring, under Countersign's name, and no token is in any file of
    // the app's.
    let issued: Vec<String> = countersign_e2e::logged(&log)
        .iter()
        .filter_map(|e| e["access"].as_str().map(str::to_owned))
        .collect();
    let kept = countersign_e2e::keyring_secrets(&dir);
    let latest = issued.last().unwrap();
    assert!(
        kept.contains(latest.as_str()),
        "the token is in the keyring: {kept}"
    );
    for token in &issued {
        let on_disk = countersign_e2e::files_containing(&app.dir, token.as_bytes());
        assert!(on_disk.is_empty(), "{token} was written to {on_disk:?}");
    }

    app.find_xpath("//div[@aria-label='Sign-in']//button[normalize-space()='Sign out']")
        .await
        .click()
        .await
        .unwrap();
    app.find_xpath("//div[@aria-label='Sign-in']//button[normalize-space()='Sign in']")
        .await;
    // The authorization server revoked them too, and the page says so.
    app.find_xpath(
        "//div[@aria-label='Sign-in']//span[@role='status'][contains(., '127.0.0.1 revoked Countersign')]",
    )
    .await;
    let kept = countersign_e2e::keyring_secrets(&dir);
    assert!(
        !kept.contains(&issued[0]),
        "signed out, the keyring forgot it: {kept}"
    );
    app.close().await;
}

/// The runner's form, as a person uses it: Run… puts focus in the ticket field (rendered from
/// delete_ticket's input schema by the dialog's own field renderer), the person types the id
/// and clicks Run, and the server's confirmation dialog then deletes exactly that ticket.
#[tokio::test]
async fn e2e_the_runner_form_is_typed_into_and_run() {
    let app = App::start("runner-form", demo()).await;
    let toggle = app
        .find_xpath(
            "//article[.//h4[normalize-space()='delete_ticket']]//button[normalize-space()='Run…']",
        )
        .await;
    toggle.click().await.unwrap();
    let field = app
        .find("form[aria-label=\"Run delete_ticket\"] .run-fields input")
        .await;
    let focused = app.client.active_element().await.unwrap();
    assert_eq!(
        focused.element_id(),
        field.element_id(),
        "focus starts in the first field"
    );
    assert!(
        !app.find("form[aria-label=\"Run delete_ticket\"] textarea")
            .await
            .is_displayed()
            .await
            .unwrap(),
        "the form, not JSON"
    );
    focused.send_keys("t4").await.unwrap();
    app.find("form[aria-label=\"Run delete_ticket\"] button[type=submit]")
        .await
        .click()
        .await
        .unwrap();
    app.dialog().await;
    let checkbox = app.find(&format!("{DIALOG} input[type=checkbox]")).await;
    checkbox.send_keys(" ").await.unwrap();
    app.press_in_dialog("Submit").await;
    app.gone(DIALOG).await;
    app.wait_result_contains("delete_ticket", "Deleted ticket t4.")
        .await;
    app.close().await;
}
