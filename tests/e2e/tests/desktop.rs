//! The app on the desktop: notifications on the session bus, the tray, one instance, URL
//! mode's refusals. Run by scripts/e2e.sh under Xvfb inside `dbus-run-session`, with
//! `desktop-double` standing in for the notification server and the tray host.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use countersign_e2e::*;
use serde_json::{Value, json};

fn ts_server() -> Value {
    let node_server = repo().join("tests/peers/ts-elicit-server.mjs");
    assert!(node_server.exists(), "run `make deps` for the test peers");
    json!({"ts": {"command": "node", "args": [node_server], "protocol": "legacy"}})
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cs-e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A question nobody asked for in the other tests' sense: the TS SDK server's confirm form.
async fn ask_confirm(app: &App, action: &str) {
    app.run_until_dialog("confirm_action", &format!(r#"{{"action": "{action}"}}"#))
        .await;
}

fn two_ts_servers() -> Value {
    let mut servers = ts_server();
    let second = servers["ts"].clone();
    servers["ts2"] = second;
    servers
}

/// Waits until the monitor has seen `n` Notify calls, then a while longer, and returns
/// them: a count asserted afterwards cannot be short because the notifier was slow.
async fn notify_calls_settled(monitor: &Background, n: usize) -> Vec<String> {
    eventually(&format!("{n} Notify calls on the bus"), async || {
        notify_calls(monitor).len() >= n
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    notify_calls(monitor)
}

#[tokio::test]
async fn e2e_notifications_only_when_unfocused_one_per_burst_none_when_muted() {
    let dir = scratch("notify-double");
    let server = desktop_double(&dir, "notifications", &["--notifications", "{log}"]);
    let app = App::start("notify", two_ts_servers()).await;
    app.find("#app[data-ready]").await;
    let monitor = notify_monitor(&app.dir);

    // The person is looking at the window: the dialog is enough. (A notice would be out in
    // 0.3 s; the next step proves the path works.)
    assert!(app.has_focus().await, "the window starts focused");
    ask_confirm(&app, "look here").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        notify_calls(&monitor).len(),
        0,
        "no notification while focused"
    );
    app.press_in_dialog("Decline").await;
    app.gone(DIALOG).await;

    // Away from the window: one notification naming the server and what it wants, the
    // server's text escaped for a daemon that renders markup.
    app.unfocus().await;
    ask_confirm(&app, "delete <b>the</b> backups & more").await;
    let calls = notify_calls_settled(&monitor, 1).await;
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert!(calls[0].contains(r#"string "ts asks""#), "{}", calls[0]);
    assert!(
        calls[0].contains("Confirm: delete &lt;b&gt;the&lt;/b&gt; backups &amp; more"),
        "{}",
        calls[0]
    );
    // Answered: the notice is withdrawn.
    app.press_in_dialog("Decline").await;
    app.gone(DIALOG).await;
    eventually("the notice is withdrawn", async || {
        logged(&server.log)
            .iter()
            .any(|r| r.get("closed").is_some())
    })
    .await;

    // Ten at once: one coalesced notification, not ten.
    app.run_until_dialog("ask_many", r#"{"count": 10}"#).await;
    let calls = notify_calls_settled(&monitor, 2).await;
    assert_eq!(calls.len(), 2, "one notice for the burst: {calls:#?}");
    assert!(
        calls[1].contains("10 questions from ts are waiting"),
        "{}",
        calls[1]
    );
    for _ in 0..10 {
        app.press_in_dialog("Decline").await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    app.gone(DIALOG).await;

    // ts muted from its page: its question opens a dialog and sends nothing; ts2's question
    // after it is announced (the path still works).
    app.find("#tab-servers").await.click().await.unwrap();
    app.find_xpath("//button[contains(@class, 'server-item')][.//span[normalize-space()='ts']]")
        .await
        .click()
        .await
        .unwrap();
    app.find_xpath("//label[contains(., 'Desktop notifications when ts asks')]")
        .await
        .click()
        .await
        .unwrap();
    eventually("the mute is saved", async || {
        std::fs::read_to_string(app.dir.join("config/countersign/settings.json"))
            .is_ok_and(|s| s.contains("\"ts\""))
    })
    .await;
    // The muted question stays open well past the 0.3 s a notice takes, then is answered.
    app.unfocus().await;
    ask_confirm(&app, "quietly").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    app.press_in_dialog("Decline").await;
    app.gone(DIALOG).await;
    app.find_xpath("//button[contains(@class, 'server-item')][.//span[normalize-space()='ts2']]")
        .await
        .click()
        .await
        .unwrap();
    app.unfocus().await;
    ask_confirm(&app, "loudly").await;
    let calls = notify_calls_settled(&monitor, 3).await;
    assert_eq!(calls.len(), 3, "{calls:#?}");
    assert!(calls[2].contains(r#"string "ts2 asks""#), "{}", calls[2]);
    assert!(
        !calls[2].contains("quietly"),
        "the muted question is not announced"
    );
    app.close().await;
}

#[tokio::test]
async fn e2e_clicking_the_notification_brings_the_window_forward() {
    let dir = scratch("click-double");
    let server = desktop_double(
        &dir,
        "notifications",
        &["--notifications", "{log}", "--click-after-ms", "1500"],
    );
    let app = App::start("click", ts_server()).await;
    app.find("#app[data-ready]").await;
    app.unfocus().await;
    ask_confirm(&app, "come here").await;
    eventually("the notification", async || !logged(&server.log).is_empty()).await;
    assert!(
        !app.has_focus().await,
        "a new question does not take the focus by itself"
    );
    eventually("the click brings the window forward", async || {
        app.has_focus().await
    })
    .await;
    let notice = &logged(&server.log)[0];
    assert_eq!(notice["actions"], json!(["default", "Open"]), "{notice}");
    app.close().await;
}

#[tokio::test]
async fn e2e_a_second_launch_exits_and_the_first_comes_forward() {
    let app = App::start("second", ts_server()).await;
    app.find("#app[data-ready]").await;
    let first = app.app_pid().expect("the app runs");
    app.unfocus().await;
    let started = Instant::now();
    let second = Command::new(target_dir().join("debug/countersign"))
        .env("COUNTERSIGN_CONFIG", app.dir.join("config.json"))
        .env("XDG_DATA_HOME", app.dir.join("data"))
        .env("XDG_CONFIG_HOME", app.dir.join("config"))
        .env("HOME", app.dir.join("home"))
        .output()
        .expect("second launch runs");
    assert!(second.status.success(), "{second:?}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the second launch lingered"
    );
    eventually("the first window comes forward", async || {
        app.has_focus().await
    })
    .await;
    assert_eq!(app.app_pid(), Some(first), "the first instance still runs");
    assert!(app.log().contains("second launch"), "{}", app.log());
    // Still the working app: it asks and answers.
    ask_confirm(&app, "still here").await;
    app.press_in_dialog("Decline").await;
    app.wait_result_contains("confirm_action", "decline").await;
    app.close().await;
}

/// The tray item's label (the pending count) as the tray host reads it.
async fn tray_label(item: &Value) -> String {
    let connection = zbus::Connection::session().await.unwrap();
    let proxy = zbus::fdo::PropertiesProxy::builder(&connection)
        .destination(item["sender"].as_str().unwrap().to_owned())
        .unwrap()
        .path(item["path"].as_str().unwrap().to_owned())
        .unwrap()
        .build()
        .await
        .unwrap();
    let value = proxy
        .get(
            zbus::names::InterfaceName::from_static_str_unchecked("org.kde.StatusNotifierItem"),
            "XAyatanaLabel",
        )
        .await
        .unwrap();
    String::try_from(value).unwrap()
}

/// The tray menu as `gdbus` prints its dbusmenu layout.
fn tray_menu(item: &Value) -> String {
    let out = Command::new("gdbus")
        .args([
            "call",
            "--session",
            "--dest",
            item["sender"].as_str().unwrap(),
            "--object-path",
            &menu_path(item),
            "--method",
            "com.canonical.dbusmenu.GetLayout",
            "--",
            "0",
            "-1",
            "[]",
        ])
        .output()
        .expect("gdbus (Debian package libglib2.0-bin) runs");
    assert!(
        out.status.success(),
        "GetLayout failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn menu_path(item: &Value) -> String {
    format!("{}/Menu", item["path"].as_str().unwrap())
}

/// Clicks the menu entry labelled `label` the way a tray host does (dbusmenu `Event`).
fn click_tray_menu(item: &Value, label: &str) {
    let layout = tray_menu(item);
    let at = layout
        .find(&format!("'label': <'{label}'>"))
        .unwrap_or_else(|| panic!("no {label} in {layout}"));
    let open = layout[..at].rfind("<(").expect("menu entry start");
    let id: String = layout[open + 2..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let status = Command::new("gdbus")
        .args([
            "call",
            "--session",
            "--dest",
            item["sender"].as_str().unwrap(),
            "--object-path",
            &menu_path(item),
            "--method",
            "com.canonical.dbusmenu.Event",
            "--",
            &id,
            "clicked",
            "<''>",
            "0",
        ])
        .status()
        .unwrap();
    assert!(status.success());
}

/// A tray host (desktop-double) and the app with the TS SDK server; returns them and the
/// tray item the app registered (`{"sender", "path"}`). Keep the host alive for the test.
async fn start_with_tray_host(test: &str) -> (Background, App, Value) {
    let host = desktop_double(
        &scratch(&format!("{test}-host")),
        "tray",
        &["--tray", "{log}"],
    );
    let app = App::start(test, ts_server()).await;
    app.find("#app[data-ready]").await;
    eventually("the tray item registers", async || {
        !logged(&host.log).is_empty()
    })
    .await;
    let item = logged(&host.log)[0].clone();
    (host, app, item)
}

#[tokio::test]
async fn e2e_with_a_tray_host_the_tray_counts_questions_and_quit_cancels_them() {
    let (_host, app, item) = start_with_tray_host("tray").await;
    assert_eq!(tray_label(&item).await, "");
    assert!(
        tray_menu(&item).contains("No questions waiting"),
        "{}",
        tray_menu(&item)
    );
    assert!(
        !app.exists("[aria-label='No system tray']").await,
        "with a tray host there is no warning"
    );

    ask_confirm(&app, "empty the bin").await;
    eventually("the tray counts the question", async || {
        tray_label(&item).await == "1"
    })
    .await;
    assert!(
        tray_menu(&item).contains("ts: Confirm: empty the bin"),
        "{}",
        tray_menu(&item)
    );

    // Quit from the tray: the open question is answered cancel before the app exits.
    click_tray_menu(&item, "Quit Countersign");
    let end = app.first_resolution().await;
    assert_eq!(end["outcome"], "cancelled", "{end}");
    assert_eq!(end["reason"], "shutdown", "{end}");
    eventually("the app quits", async || app.app_pid().is_none()).await;
}

#[tokio::test]
async fn e2e_without_a_tray_host_the_app_says_so_and_answers() {
    let app = App::start("no-tray", ts_server()).await;
    app.find("#app[data-ready]").await;
    let banner = app.find("[aria-label='No system tray']").await;
    assert!(
        banner
            .text()
            .await
            .unwrap()
            .contains("closing this window quits"),
        "the window says what closing does"
    );
    ask_confirm(&app, "ship it").await;
    app.find("dialog[open] input[type=checkbox]")
        .await
        .click()
        .await
        .unwrap();
    app.press_in_dialog("Submit").await;
    let reply = app.wait_result_contains("confirm_action", "accept").await;
    assert!(reply.contains(r#""confirm":true"#), "{reply}");
    app.close().await;
}

#[tokio::test]
async fn e2e_url_mode_refuses_javascript_and_file_and_warns_on_punycode() {
    let dir = scratch("opener");
    let (stub, record) = recording_opener(&dir);
    let app = App::start_with_env(
        "url-refusals",
        ts_server(),
        &[("COUNTERSIGN_OPENER", &stub)],
    )
    .await;
    app.find("#app[data-ready]").await;

    for url in [
        "javascript:alert(document.cookie)",
        "file:///etc/passwd",
        "data:text/html,<b>hi</b>",
    ] {
        let reply = app
            .run_until_result("open_url", &json!({"url": url}).to_string(), "action")
            .await;
        assert!(reply.contains(r#""action":"decline""#), "{url}: {reply}");
        assert!(!app.exists(DIALOG).await, "{url} was shown to the person");
    }
    // Each refusal is in the audit log with its reason.
    let audit = std::fs::read_to_string(app.audit_log()).unwrap();
    let refused: Vec<Value> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["event"] == "refused")
        .collect();
    assert_eq!(refused.len(), 3, "{audit}");
    assert!(
        refused[0].to_string().contains("javascript"),
        "{}",
        refused[0]
    );

    let look_alike = "https://xn--pple-43d.com/login";
    let dialog = app
        .run_until_dialog("open_url", &json!({"url": look_alike}).to_string())
        .await;
    let text = dialog.text().await.unwrap();
    assert!(
        text.contains("xn--pple-43d.com"),
        "the host is shown: {text}"
    );
    assert!(
        text.contains("international characters"),
        "the punycode warning: {text}"
    );
    app.press_in_dialog("Open").await;
    app.wait_result_contains("open_url", "accept").await;
    eventually("the opener is called", async || record.exists()).await;
    assert_eq!(
        std::fs::read_to_string(&record).unwrap(),
        format!("{look_alike}\n"),
        "only the consented web address was handed to the opener"
    );
    app.close().await;
}

#[tokio::test]
async fn e2e_without_the_tray_library_the_app_runs_and_answers() {
    // A file that is not a library, found first under the names the tray looks for: the
    // same failure as the library not being installed.
    let libs = scratch("no-indicator-lib");
    for name in ["libayatana-appindicator3.so.1", "libappindicator3.so.1"] {
        std::fs::write(libs.join(name), "not a library").unwrap();
    }
    let dir = scratch("tray-host-present");
    let host = desktop_double(&dir, "tray", &["--tray", "{log}"]);
    let app = App::start_with_env("no-tray-lib", ts_server(), &[("LD_LIBRARY_PATH", &libs)]).await;
    app.find("#app[data-ready]").await;
    assert!(
        app.exists("[aria-label='No system tray']").await,
        "without the library there is no tray, and the window says so"
    );
    assert!(app.log().contains("no tray"), "{}", app.log());
    ask_confirm(&app, "go on").await;
    app.press_in_dialog("Decline").await;
    app.wait_result_contains("confirm_action", "decline").await;
    assert!(logged(&host.log).is_empty(), "no tray item registered");
    assert!(!app.log().contains("panicked"), "{}", app.log());
    app.close().await;
}

#[tokio::test]
async fn e2e_start_at_login_writes_and_removes_the_autostart_entry() {
    let app = App::start("autostart", ts_server()).await;
    app.find("#app[data-ready]").await;
    app.find("#tab-settings").await.click().await.unwrap();
    let autostart = app.dir.join("home/.config/autostart");
    let entries = || -> Vec<PathBuf> {
        std::fs::read_dir(&autostart)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default()
    };
    assert!(entries().is_empty(), "off unless the person turns it on");
    let box_ = app.find("#start-at-login").await;
    assert!(!box_.is_selected().await.unwrap());
    app.find_xpath("//label[@for='start-at-login']")
        .await
        .click()
        .await
        .unwrap();
    // Written whole (its last line is `Terminal=`): the file is made first and filled after.
    eventually("the autostart entry is written", async || {
        entries().len() == 1
            && std::fs::read_to_string(&entries()[0])
                .is_ok_and(|e| e.contains("[Desktop Entry]") && e.contains("Terminal="))
    })
    .await;
    let entry = std::fs::read_to_string(&entries()[0]).unwrap();
    assert!(entry.contains("[Desktop Entry]"), "{entry}");
    assert!(
        entry.contains("debug/countersign"),
        "it starts this binary: {entry}"
    );
    assert!(entry.contains("--in-tray"), "into the tray: {entry}");
    // The page reads the state back from the system.
    app.client.refresh().await.unwrap();
    app.find("#app[data-ready]").await;
    app.find("#tab-settings").await.click().await.unwrap();
    eventually("the setting reads back as on", async || {
        app.find("#start-at-login")
            .await
            .is_selected()
            .await
            .unwrap()
    })
    .await;
    app.find_xpath("//label[@for='start-at-login']")
        .await
        .click()
        .await
        .unwrap();
    eventually("the autostart entry is removed", async || {
        entries().is_empty()
    })
    .await;
    app.close().await;
}

#[tokio::test]
async fn e2e_window_size_and_place_are_remembered() {
    let app = App::start("window-state", ts_server()).await;
    app.find("#app[data-ready]").await;
    app.client.set_window_rect(60, 40, 900, 640).await.unwrap();
    eventually("the window is moved", async || {
        app.client.get_window_rect().await.unwrap() == (60, 40, 900, 640)
    })
    .await;
    let app = app.restart().await;
    app.find("#app[data-ready]").await;
    assert_eq!(
        app.client.get_window_rect().await.unwrap(),
        (60, 40, 900, 640),
        "size and place come back"
    );
    app.close().await;
}

#[tokio::test]
async fn e2e_closing_the_window_with_a_tray_keeps_the_app_and_its_questions() {
    let (_host, app, item) = start_with_tray_host("close-tray").await;
    ask_confirm(&app, "keep me").await;
    let pid = app.app_pid();

    app.close_window();
    // The window is released, and WebKit's web process with it.
    eventually("the window's web process is gone", async || {
        web_processes(pid.unwrap()) == 0
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // WebKit would end WebDriver's session with the network process (see the next test).
    assert!(
        app.log()
            .contains("WebKit's network process kept for WebDriver"),
        "{}",
        app.log()
    );
    assert_eq!(app.app_pid(), pid, "the app keeps running in the tray");
    assert_eq!(tray_label(&item).await, "1", "the question still waits");
    assert!(
        app.log().contains("window closed to the tray"),
        "{}",
        app.log()
    );

    // Back from the tray: a new window, with the question still there and answerable.
    let opened = Instant::now();
    click_tray_menu(&item, "Open Countersign");
    let window = loop {
        if let Some(w) = app
            .client
            .windows()
            .await
            .ok()
            .and_then(|w| w.into_iter().next())
        {
            break w;
        }
        assert!(
            opened.elapsed() < Duration::from_secs(20),
            "no window came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    app.client.switch_to_window(window).await.unwrap();
    app.find("#app[data-ready]").await;
    let dialog = app.dialog().await;
    println!("window opened again and drawn in {:?}", opened.elapsed());
    assert!(dialog.text().await.unwrap().contains("keep me"));
    assert_eq!(app.visibility().await, "visible");
    app.press_in_dialog("Decline").await;
    app.gone(DIALOG).await;
    let resolved = std::fs::read_to_string(app.audit_log()).unwrap();
    assert!(resolved.contains(r#""outcome":"declined""#), "{resolved}");
    app.close().await;
}

/// The app started as start at login starts it (`--in-tray`), outside WebDriver (which needs
/// a window), on `dir`'s files; its log goes to `dir/app.log`.
fn start_in_tray(dir: &Path) -> Background {
    start_in_tray_with(dir, &[])
}

fn start_in_tray_with(dir: &Path, env: &[(&str, &str)]) -> Background {
    start_in_tray_on(dir, json!({"mcpServers": ts_server()}), env)
}

fn start_in_tray_on(dir: &Path, config: Value, env: &[(&str, &str)]) -> Background {
    std::fs::create_dir_all(dir.join("home")).unwrap();
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_vec(&config).unwrap(),
    )
    .unwrap();
    let log = dir.join("app.log");
    let child = Command::new(target_dir().join("debug/countersign"))
        .arg("--in-tray")
        .env("COUNTERSIGN_CONFIG", dir.join("config.json"))
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("HOME", dir.join("home"))
        .envs(env.iter().copied())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("the app starts");
    Background::new(child, log)
}

/// The child processes of `pid`: id and name.
fn children(pid: u32) -> Vec<(u32, String)> {
    let out = Command::new("pgrep")
        .args(["-l", "-P", &pid.to_string()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (id, name) = l.trim().split_once(' ')?;
            Some((id.parse().ok()?, name.to_owned()))
        })
        .collect()
}

/// The app's WebKit processes (web and network), by name.
fn webkit_children(pid: u32) -> Vec<String> {
    children(pid)
        .into_iter()
        .map(|(_, name)| name)
        .filter(|name| name.starts_with("WebKit"))
        .collect()
}

/// Waits until an app started in the tray has registered its tray item with `host` and says
/// it started there; returns the item.
async fn in_the_tray(host: &Background, app: &Background) -> Value {
    eventually("the tray item registers", async || {
        !logged(&host.log).is_empty()
    })
    .await;
    eventually("the app says it started in the tray", async || {
        app_log_says(app, "started in the tray")
    })
    .await;
    logged(&host.log)[0].clone()
}

fn app_log_says(app: &Background, what: &str) -> bool {
    std::fs::read_to_string(&app.log)
        .unwrap_or_default()
        .contains(what)
}

/// Start at login puts the app in the tray with no window, so no WebKit process runs until
/// the person opens it from the tray; without a tray host to open it from (none within a few
/// seconds, as at a login where the host comes up late), the window opens.
#[tokio::test]
async fn e2e_started_at_login_the_app_waits_in_the_tray_without_a_window() {
    // No tray host: the window is made, or the person could never reach the app.
    let alone = scratch("in-tray-alone");
    let app = start_in_tray(&alone);
    eventually("the window is made without a tray host", async || {
        web_processes(app.pid()) > 0
    })
    .await;
    let log = std::fs::read_to_string(&app.log).unwrap();
    assert!(log.contains("no tray host came"), "{log}");
    drop(app);

    let host = desktop_double(&scratch("in-tray-host"), "tray", &["--tray", "{log}"]);
    let dir = scratch("in-tray");
    let app = start_in_tray(&dir);
    let item = in_the_tray(&host, &app).await;
    // Its servers are up meanwhile (the tray menu is built), and nothing of WebKit runs.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(tray_menu(&item).contains("Open Countersign"));
    assert_eq!(webkit_children(app.pid()), Vec::<String>::new());
    // Nor a GL driver: GTK started with its GL off (`launch::start_gtk_without_gl`), and the
    // switch that did it is not passed on to the servers the app starts.
    assert_eq!(gl_drivers(app.pid()), Vec::<String>::new());
    assert!(app_log_says(&app, "drawing the window without the GPU"));
    let servers = children(app.pid());
    assert!(!servers.is_empty());
    for (pid, _) in servers {
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        assert!(
            !env.split(|b| *b == 0).any(|v| v.starts_with(b"GDK_GL=")),
            "server {pid} inherited GDK_GL"
        );
    }

    click_tray_menu(&item, "Open Countersign");
    eventually("the window is made when the person opens it", async || {
        web_processes(app.pid()) > 0
    })
    .await;
    let log = std::fs::read_to_string(&app.log).unwrap();
    assert!(log.contains("window made"), "{log}");
    app.terminate();
    drop(host);

    // At login the tray host may come up after the app: one that comes within the wait
    // keeps the app in the tray.
    let late = scratch("in-tray-late");
    let app = start_in_tray(&late);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let host = desktop_double(&scratch("in-tray-late-host"), "tray", &["--tray", "{log}"]);
    eventually("the app stays in the tray for the late host", async || {
        app_log_says(&app, "started in the tray")
    })
    .await;
    // Past the wait (5 s from start), still no window; and what the start loaded but the tray
    // does not run is given back to the kernel.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(webkit_children(app.pid()), Vec::<String>::new());
    eventually("the idle code is given back", async || {
        app_log_says(&app, r#"when="started in the tray""#)
            && app_log_says(&app, "idle code given back")
    })
    .await;
    app.terminate();
    drop(host);
}

/// Closed to the tray, the window leaves no WebKit process behind, not even the network
/// process WebKit itself would keep (`released.rs`), and a question that comes meanwhile is
/// answered in the window opened again from the tray. Outside WebDriver, whose session WebKit
/// ends with the network process, so the person's part is played with the X server's keyboard.
#[tokio::test]
async fn e2e_closed_to_the_tray_no_webkit_process_is_left_and_the_window_comes_back() {
    let host = desktop_double(&scratch("released-host"), "tray", &["--tray", "{log}"]);
    let dir = scratch("released");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let app = start_in_tray_on(
        &dir,
        json!({
            "mcpServers": {"demo": {"command": countersign_e2e::demo_server()}},
            "gateway": {"port": port},
        }),
        &[],
    );
    let item = in_the_tray(&host, &app).await;

    click_tray_menu(&item, "Open Countersign");
    eventually("the window and its WebKit processes are made", async || {
        let webkit = webkit_children(app.pid());
        webkit.iter().any(|n| n == "WebKitWebProces")
            && webkit.iter().any(|n| n == "WebKitNetworkPr")
    })
    .await;
    // The page is drawn in the web process, with the GL driver it found; the app's process,
    // which goes on waiting in the tray, loads none (`launch::keep_egl_drivers_out`).
    let (web, _) = children(app.pid())
        .into_iter()
        .find(|(_, name)| name == "WebKitWebProces")
        .unwrap();
    eventually("the web process loads its GL driver", async || {
        !gl_drivers(web).is_empty()
    })
    .await;
    assert_eq!(gl_drivers(app.pid()), Vec::<String>::new());
    let open_file_backed = file_backed_kib(app.pid());
    let closed = Command::new(target_dir().join("debug/close-window"))
        .arg("Countersign")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&closed.stdout).trim(), "1");
    eventually("no WebKit process is left", async || {
        webkit_children(app.pid()).is_empty()
    })
    .await;
    assert!(app_log_says(&app, "WebKit's network process ended"));
    // And the code only the window ran is given back to the kernel (`idle_memory`).
    eventually("the idle code is given back", async || {
        app_log_says(&app, r#"when="window closed""#)
    })
    .await;
    assert!(app_log_says(&app, "idle code given back"));
    let closed_file_backed = file_backed_kib(app.pid());
    assert!(
        closed_file_backed < open_file_backed / 2,
        "file-backed memory {open_file_backed} KiB with the window, {closed_file_backed} KiB after"
    );

    // A question while the window is closed: an agent's destructive call through the gateway.
    let token_file = dir.join("data/countersign/gateway-token");
    eventually("the gateway's token is written", async || {
        std::fs::read_to_string(&token_file).is_ok_and(|t| !t.trim().is_empty())
    })
    .await;
    let token = std::fs::read_to_string(&token_file).unwrap();
    let agent = tokio::process::Command::new("node")
        .arg(repo().join("tests/peers/ts-agent.mjs"))
        .args(["--url", &format!("http://127.0.0.1:{port}/mcp/demo")])
        .args(["--token", token.trim(), "--name", "released-agent"])
        .args(["--call", "delete_ticket", "--args", r#"{"id": "t4"}"#])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    eventually("the tray counts the question", async || {
        tray_label(&item).await == "1"
    })
    .await;
    assert_eq!(webkit_children(app.pid()), Vec::<String>::new());

    click_tray_menu(&item, "Open Countersign");
    let audit = dir.join("data/countersign/audit.jsonl");
    let resolved = || {
        std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["event"] == "resolved")
            .collect::<Vec<_>>()
    };
    // Escape, until the page is drawn and answers it (before that, the key does nothing).
    eventually(
        "the question answered in the window opened again",
        async || {
            let window = Command::new("xdotool")
                .args(["search", "--onlyvisible", "--name", "^Countersign$"])
                .output()
                .unwrap();
            if let Some(window) = String::from_utf8_lossy(&window.stdout).lines().next() {
                let keyed = Command::new("xdotool")
                    .args(["windowfocus", window, "key", "Escape"])
                    .status()
                    .unwrap();
                assert!(keyed.success());
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            !resolved().is_empty()
        },
    )
    .await;
    let resolved = resolved();
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0]["outcome"], "cancelled", "{resolved:?}");
    assert_eq!(resolved[0]["reason"], "person", "{resolved:?}");
    let out = tokio::time::timeout(countersign_e2e::WAIT, agent.wait_with_output())
        .await
        .expect("the agent has its answer")
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    let call = said
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["step"] == "call")
        .unwrap_or_else(|| panic!("the agent made no call: {said}"));
    assert_eq!(call["result"]["isError"], true, "{call}");
    assert!(call.to_string().contains("denied"), "{call}");
    let webkit = webkit_children(app.pid());
    assert!(
        webkit.iter().any(|n| n == "WebKitNetworkPr"),
        "WebKit made a new one: {webkit:?}"
    );
    assert_eq!(gl_drivers(app.pid()), Vec::<String>::new());
    app.terminate();
    drop(host);
}

/// A window left behind another program's gives back the code the app is not running, as the
/// tray does (`released::give_back_idle_code_in_the_background`), 30 s after it lost the
/// focus; switching away and back before then keeps it. The window still works: a question
/// that comes meanwhile is drawn, and answered once the person is back.
#[tokio::test]
async fn e2e_a_window_left_in_the_background_gives_back_idle_code() {
    let app = App::start("background", ts_server()).await;
    app.find("#app[data-ready]").await;
    let pid = app.app_pid().expect("the app runs");
    let given_back = || {
        app.log()
            .matches(r#"when="window in the background""#)
            .count()
    };
    assert!(app.has_focus().await, "the window starts focused");

    // Away and back within the wait: that wait ends nothing.
    let other = app.switch_away().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    app.refocus().await;
    drop(other);
    // Away for good: the wait starts once the app has seen the focus go, so after this.
    let away = Instant::now();
    let _other = app.switch_away().await;
    let open_file_backed = file_backed_kib(pid);
    tokio::time::sleep(Duration::from_secs(25)).await;
    eventually("the idle code is given back", async || given_back() > 0).await;
    let behind_file_backed = file_backed_kib(pid);
    assert!(
        away.elapsed() >= Duration::from_secs(30),
        "given back {:?} after the window lost the focus",
        away.elapsed()
    );
    assert!(
        behind_file_backed < open_file_backed / 2,
        "file-backed memory {open_file_backed} KiB in front, {behind_file_backed} KiB behind"
    );
    // And once: nothing else gives it back while the window stays behind.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(given_back(), 1, "given back once: {}", app.log());

    // A question while the window is behind: drawn, and answered when the person is back.
    ask_confirm(&app, "while you were away").await;
    app.refocus().await;
    app.press_in_dialog("Decline").await;
    app.gone(DIALOG).await;
    let resolution = app.first_resolution().await;
    assert_eq!(resolution["outcome"], "declined", "{resolution}");
    app.close().await;
}

/// A process's proportional set size of file-backed pages (code, read-only data), in KiB.
fn file_backed_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Pss_File:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The GL drivers (vendor libraries, not GL's dispatch libraries) a process has loaded.
fn gl_drivers(pid: u32) -> Vec<String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mut drivers: Vec<String> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|path| {
            let name = path.rsplit('/').next().unwrap_or(path);
            name.starts_with("libGLX_") || name.starts_with("libEGL_") || name.contains("_dri.so")
        })
        .map(str::to_owned)
        .collect();
    drivers.dedup();
    drivers
}

/// The person's own `GDK_GL` wins over the app's choice to start GTK without GL: even an
/// empty one, which is how the README says to have the window drawn on the GPU.
#[tokio::test]
async fn e2e_the_persons_gdk_gl_setting_brings_the_gl_driver_back() {
    let host = desktop_double(&scratch("gl-host"), "tray", &["--tray", "{log}"]);
    let app = start_in_tray_with(&scratch("gl"), &[("GDK_GL", "")]);
    eventually("the app says it started in the tray", async || {
        app_log_says(&app, "started in the tray")
    })
    .await;
    assert!(
        !gl_drivers(app.pid()).is_empty(),
        "GTK with GL loads a GL driver"
    );
    assert!(!app_log_says(&app, "without the GPU"));
    app.terminate();
    drop(host);
}

/// WebKit web processes of the app (children of `pid`).
fn web_processes(pid: u32) -> usize {
    children(pid)
        .iter()
        .filter(|(_, name)| name == "WebKitWebProces")
        .count()
}

#[tokio::test]
async fn e2e_closing_the_window_without_a_tray_quits_and_cancels_open_questions() {
    let app = App::start("close-no-tray", ts_server()).await;
    app.find("#app[data-ready]").await;
    ask_confirm(&app, "cancel me").await;
    app.close_window();
    let end = app.first_resolution().await;
    assert_eq!(end["outcome"], "cancelled", "{end}");
    assert_eq!(end["reason"], "shutdown", "{end}");
    eventually("the app quits", async || app.app_pid().is_none()).await;
}

/// Where the shown question's Submit and Decline buttons are, and the viewport: exactly one
/// of each is rendered (the other questions' views are hidden).
async fn shown_buttons(app: &App) -> Value {
    app.client
        .execute(
            r#"
            const shown = (text) => [...document.querySelectorAll('dialog[open] button')]
                .filter((b) => b.textContent.trim() === text && b.getClientRects().length > 0)
                .map((b) => { const r = b.getBoundingClientRect();
                              return {top: r.top, left: r.left, bottom: r.bottom, right: r.right}; });
            return {submit: shown('Submit'), decline: shown('Decline'),
                    width: window.innerWidth, height: window.innerHeight};
            "#,
            vec![],
        )
        .await
        .unwrap()
}

fn assert_in_view(buttons: &Value, when: &str) {
    let (width, height) = (
        buttons["width"].as_f64().unwrap(),
        buttons["height"].as_f64().unwrap(),
    );
    for name in ["submit", "decline"] {
        let rects = buttons[name].as_array().unwrap();
        assert_eq!(rects.len(), 1, "{when}: one {name} button shown: {buttons}");
        let r = &rects[0];
        let f = |k: &str| r[k].as_f64().unwrap();
        assert!(
            f("top") >= 0.0 && f("left") >= 0.0 && f("bottom") <= height && f("right") <= width,
            "{when}: {name} is outside the {width}x{height} viewport: {buttons}"
        );
    }
}

#[tokio::test]
async fn e2e_many_questions_are_a_queue_with_the_buttons_in_view_and_decline_all() {
    let app = App::start("many-questions", ts_server()).await;
    app.find("#app[data-ready]").await;

    // 25 at once from one server: 20 wait (the broker's cap), 5 are refused.
    app.run_until_dialog("ask_many", r#"{"count": 25}"#).await;
    eventually("20 questions in the queue", async || {
        match app
            .client
            .find(fantoccini::Locator::Css("dialog[open] .queue-position"))
            .await
        {
            Ok(e) => e.text().await.unwrap_or_default().trim() == "1 of 20",
            Err(_) => false,
        }
    })
    .await;
    // Let late arrivals (there must be none) and the dialog settle.
    tokio::time::sleep(Duration::from_secs(1)).await;

    // (a) A compact queue, not a wall of switcher buttons.
    let queue = app.find("dialog[open] nav.queue").await;
    assert!(queue.is_displayed().await.unwrap(), "the queue is shown");
    assert_eq!(
        app.find("dialog[open] .queue-count")
            .await
            .text()
            .await
            .unwrap()
            .trim(),
        "20 questions waiting"
    );
    assert_eq!(
        app.find("dialog[open] .queue-position")
            .await
            .text()
            .await
            .unwrap()
            .trim(),
        "1 of 20"
    );
    let visible_tabs = app
        .client
        .execute(
            "return [...document.querySelectorAll('dialog[open] .queue-tab')]
                 .filter((b) => b.getClientRects().length > 0).length",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        visible_tabs,
        json!(0),
        "no switcher buttons until asked for"
    );
    let decline_all = app
        .find_xpath("//dialog[@open]//button[contains(@class, 'decline-all')]")
        .await;
    let label = decline_all.text().await.unwrap();
    assert_eq!(
        label.split_whitespace().collect::<Vec<_>>().join(" "),
        "Decline all from ts (20)"
    );

    // (b) The shown question's own buttons are on screen: at the default size, at the
    // smallest window allowed, and with the list of all twenty open.
    assert_in_view(&shown_buttons(&app).await, "default size");
    app.snapshot("queue").await;
    println!("screenshot: {}", app.dir.join("queue.png").display());
    app.client.set_window_rect(0, 0, 720, 520).await.unwrap();
    // The window manager's part: done once the page's viewport has shrunk, then laid out.
    eventually("the window is made smaller", async || {
        shown_buttons(&app).await["width"]
            .as_f64()
            .is_some_and(|w| w <= 720.0)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_in_view(&shown_buttons(&app).await, "720x520");
    app.find_xpath("//dialog[@open]//button[normalize-space()='List all']")
        .await
        .click()
        .await
        .unwrap();
    eventually("the list opens", async || {
        app.find("dialog[open] .queue-list")
            .await
            .is_displayed()
            .await
            .unwrap_or(false)
    })
    .await;
    assert_in_view(&shown_buttons(&app).await, "720x520 with the list open");
    app.snapshot("queue-list-small").await;
    println!(
        "screenshot: {}",
        app.dir.join("queue-list-small.png").display()
    );

    // (c) The five over the cap were refused, in words naming the limit.
    let records = || -> Vec<Value> {
        std::fs::read_to_string(app.audit_log())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let refused = || -> Vec<Value> {
        records()
            .into_iter()
            .filter(|r| r["event"] == "refused")
            .collect()
    };
    eventually("the five over the cap are recorded", async || {
        refused().len() >= 5
    })
    .await;
    let refused = refused();
    assert_eq!(refused.len(), 5, "{refused:#?}");
    for r in &refused {
        assert_eq!(r["server"], "ts", "{r}");
        assert!(
            r["reason"]
                .as_str()
                .unwrap()
                .contains("already has 20 questions waiting"),
            "{r}"
        );
    }
    let reply = app
        .wait_result_contains("ask_many", "20 questions waiting")
        .await;
    println!("ask_many replied: {reply}");

    // (d) Decline all answers every waiting one (a no: it works at once, no arming).
    decline_all.click().await.unwrap();
    app.gone(DIALOG).await;
    eventually("20 declines on record", async || {
        records()
            .iter()
            .filter(|r| r["event"] == "resolved" && r["outcome"] == "declined")
            .count()
            == 20
    })
    .await;
    let resolved: Vec<Value> = records()
        .into_iter()
        .filter(|r| r["event"] == "resolved")
        .collect();
    assert_eq!(
        resolved.len(),
        20,
        "only the twenty, all declined: {resolved:#?}"
    );
    app.close().await;
}

/// The tray's Pause / Resume item changes the gateway, and the Connect page (open at the time)
/// and the tray's own menu both follow at once: the change is an event, not a redraw the tray
/// has to remember to do.
#[tokio::test]
async fn e2e_pausing_from_the_tray_shows_on_the_connect_page_and_in_the_menu() {
    let host = desktop_double(&scratch("pause-tray-host"), "tray", &["--tray", "{log}"]);
    let (app, _) =
        App::start_with_gateway("pause-tray", json!({"mcpServers": ts_server()}), &[]).await;
    app.find("#app[data-ready]").await;
    eventually("the tray item registers", async || {
        !logged(&host.log).is_empty()
    })
    .await;
    let item = logged(&host.log)[0].clone();
    eventually("the gateway listens", async || {
        app.log().contains("gateway listening")
    })
    .await;
    app.find_xpath("//button[@role='tab' and normalize-space()='Connect agents']")
        .await
        .click()
        .await
        .unwrap();
    let status = async || match app
        .client
        .find(fantoccini::Locator::Css(".gateway-state .gateway-line"))
        .await
    {
        Ok(e) => e.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    eventually("the page says the gateway listens", async || {
        status().await.starts_with("Listening")
    })
    .await;
    eventually("the tray offers to pause", async || {
        tray_menu(&item).contains("Pause the agent gateway")
    })
    .await;

    click_tray_menu(&item, "Pause the agent gateway");
    eventually("the page says paused", async || {
        status().await.starts_with("Paused")
    })
    .await;
    eventually("the tray offers to resume", async || {
        tray_menu(&item).contains("Resume the agent gateway")
    })
    .await;

    click_tray_menu(&item, "Resume the agent gateway");
    eventually("the page says listening again", async || {
        status().await.starts_with("Listening")
    })
    .await;
    app.close().await;
}

#[tokio::test]
async fn e2e_editing_the_config_file_applies_at_once_and_a_broken_edit_says_where() {
    let app = App::start("config-edit", ts_server()).await;
    app.find("#app[data-ready]").await;
    let config = app.dir.join("config.json");
    let mut servers = ts_server();
    servers["demo"] = json!({"command": demo_server()});
    std::fs::write(
        &config,
        serde_json::to_vec_pretty(&json!({"mcpServers": servers})).unwrap(),
    )
    .unwrap();
    // The new server shows up and connects, without a restart.
    app.find_xpath("//nav[@aria-label='Servers']//button[starts-with(normalize-space(.), 'demo')]//span[contains(@class, 'state-ready')]")
        .await;

    std::fs::write(
        &config,
        "{\n  \"mcpServers\": {\n    \"ts\": {\"command\": \"node\"},\n  }\n}\n",
    )
    .unwrap();
    let banner = app
        .find_xpath("//section[@role='alert'][contains(., 'Problems in the config file')]")
        .await;
    let text = banner.text().await.unwrap();
    assert!(text.contains("last edit was not applied"), "{text}");
    assert!(text.contains("config.json:4:"), "{text}");
    app.snapshot("config-edit-rejected").await;
    assert!(
        app.exists("ul.server-list-items li:nth-child(2)").await,
        "both servers still run"
    );

    // Fixed, without the demo server: the banner and the server go.
    std::fs::write(
        &config,
        serde_json::to_vec_pretty(&json!({"mcpServers": ts_server()})).unwrap(),
    )
    .unwrap();
    app.gone("section[aria-label='Config problems']").await;
    app.gone("ul.server-list-items li:nth-child(2)").await;
    fault_row(
        "the config file edited while the app runs",
        &format!(
            "an added server starts and a removed one stops, without a restart; a broken edit changes nothing and says where: “{}”",
            text.rsplit('/').next().unwrap_or("").trim()
        ),
        "the added server is started, the removed one stopped",
        "unchanged (no question)",
        true,
    );
    app.close().await;
}

/// A notification daemon that takes the call and never answers: the dialogs, the answers and
/// quitting go on as if it were not there.
#[tokio::test]
async fn e2e_a_notification_server_that_hangs_holds_up_nothing() {
    let dir = scratch("notify-hang");
    let server = desktop_double(
        &dir,
        "notifications",
        &["--notifications", "{log}", "--hang"],
    );
    let app = App::start("notify-hang", ts_server()).await;
    app.find("#app[data-ready]").await;
    app.unfocus().await;
    ask_confirm(&app, "first").await;
    eventually("the daemon has the app's call", async || {
        logged(&server.log).iter().any(|r| r.get("hung").is_some())
    })
    .await;
    app.press_in_dialog("Decline").await;
    app.wait_result_contains("confirm_action", "decline").await;
    // The stuck daemon still holds the first call; the next question is as quick.
    ask_confirm(&app, "second").await;
    app.press_in_dialog("Decline").await;
    app.gone(DIALOG).await;
    app.terminate_app();
    let deadline = Instant::now() + Duration::from_secs(10);
    while app.app_pid().is_some() {
        assert!(Instant::now() < deadline, "the app did not quit");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    fault_row(
        "the notification daemon hangs",
        "both questions shown and answered as usual; quitting works",
        "the person's declines",
        "both questions and their outcomes",
        true,
    );
}

/// A session bus with no notification daemon on it (nothing here can be activated as one):
/// the notification fails, is logged, and the question is shown and answered as usual.
#[tokio::test]
async fn e2e_without_a_notification_daemon_the_question_is_still_asked() {
    let app = App::start("no-daemon", ts_server()).await;
    app.find("#app[data-ready]").await;
    app.unfocus().await;
    ask_confirm(&app, "no daemon").await;
    eventually("the failed notification is logged", async || {
        app.log().contains("cannot show a desktop notification")
    })
    .await;
    app.press_in_dialog("Submit").await;
    app.wait_result_contains("confirm_action", "accept").await;
    fault_row(
        "no notification daemon on the bus",
        "no notification (the app logs why); the question is shown and answered",
        "accept",
        "the question and its outcome",
        true,
    );
    app.close().await;
}

/// No session bus at all (a bare X session, a container): no tray, no notifications, one
/// instance unchecked; the app starts, asks and answers.
#[tokio::test]
async fn e2e_without_a_session_bus_the_app_still_asks_and_answers() {
    let app = App::start_with_env(
        "no-bus",
        ts_server(),
        &[(
            "DBUS_SESSION_BUS_ADDRESS",
            Path::new("unix:path=/nonexistent/countersign-no-bus"),
        )],
    )
    .await;
    app.find("#app[data-ready]").await;
    ask_confirm(&app, "no bus").await;
    app.press_in_dialog("Submit").await;
    app.wait_result_contains("confirm_action", "accept").await;
    fault_row(
        "no session bus (no tray, no notifications)",
        "the app starts; the question is shown and answered",
        "accept",
        "the question and its outcome",
        true,
    );
    app.close().await;
}
