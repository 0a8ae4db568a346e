//! Drives the real Countersign app through tauri-driver (WebDriver on 127.0.0.1:4444) under
//! Xvfb: `scripts/e2e.sh` provides the display and the D-Bus session. Each test gets its own
//! config, data dir and app process; the fixed port means tests run one at a time.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator, elements::Element, key::Key};
use serde_json::{Value, json};

pub const WAIT: Duration = Duration::from_secs(30);
const DRIVER: &str = "http://127.0.0.1:4444";
const DRIVER_PORT: u16 = 4444;
/// The ask dialog: a native `<dialog>` (implicit role dialog) opened modally.
pub const DIALOG: &str = "dialog[open]";

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"))
}

/// One app under test, with its own files, and the WebDriver session on it.
pub struct App {
    pub client: Client,
    pub dir: PathBuf,
    driver: Child,
    env: Vec<(String, PathBuf)>,
}

impl App {
    /// Starts tauri-driver (which starts the app) with `servers` as the `mcpServers` config.
    pub async fn start(test: &str, servers: Value) -> App {
        Self::start_with_env(test, servers, &[]).await
    }

    /// Like `start`, with extra environment for the app.
    pub async fn start_with_env(test: &str, servers: Value, env: &[(&str, &Path)]) -> App {
        Self::start_with_config(test, json!({"mcpServers": servers}), env).await
    }

    /// Like `start_with_env`, with the whole config file (for keys beside `mcpServers`, such
    /// as `gateway`).
    pub async fn start_with_config(test: &str, config: Value, env: &[(&str, &Path)]) -> App {
        let dir = std::env::temp_dir().join(format!("cs-e2e-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("config.json"),
            serde_json::to_vec_pretty(&config).unwrap(),
        )
        .unwrap();
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_path_buf()))
            .collect();
        Self::launch(dir, env).await
    }

    /// Like `start_with_config`, with the gateway on a port of its own (not the default 47717,
    /// which a developer's running app may hold); returns once the gateway listens there. A
    /// port free when picked can be taken before the app binds it (another test's child, say):
    /// the app then says it cannot listen, and it is started again on another.
    pub async fn start_with_gateway(
        test: &str,
        mut config: Value,
        env: &[(&str, &Path)],
    ) -> (App, u16) {
        for _ in 0..3 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            config["gateway"]["port"] = json!(port);
            let app = Self::start_with_config(test, config.clone(), env).await;
            let mut taken = false;
            eventually("the gateway listens", async || {
                let log = app.log();
                taken = log.contains(&format!("cannot listen on 127.0.0.1:{port}"));
                taken
                    || (log.contains("gateway listening")
                        && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok())
            })
            .await;
            if !taken {
                return (app, port);
            }
        }
        panic!("port after port was taken before the app bound it");
    }

    /// Quits the app like a logout (SIGTERM; it saves its window state and answers open
    /// questions) and starts it again on the same files.
    pub async fn restart(self) -> App {
        self.terminate_app();
        self.wait_gone().await;
        let (dir, env) = (self.dir.clone(), self.env.clone());
        drop(self);
        Self::launch(dir, env).await
    }

    /// Waits until the app's process is gone (it quit, or died).
    pub async fn wait_gone(&self) {
        let deadline = Instant::now() + WAIT;
        while self.app_pid().is_some() {
            assert!(Instant::now() < deadline, "the app is still running");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits for the app to die on its own (a crash the test arranged), then starts it again on
    /// the same files, without the environment variable `without`.
    pub async fn restart_after_crash(self, without: &str) -> App {
        self.wait_gone().await;
        let dir = self.dir.clone();
        let env = self
            .env
            .iter()
            .filter(|(k, _)| k != without)
            .cloned()
            .collect();
        drop(self);
        Self::launch(dir, env).await
    }

    async fn launch(dir: PathBuf, env: Vec<(String, PathBuf)>) -> App {
        let app = target_dir().join("debug/countersign");
        assert!(app.exists(), "build the app first: {}", app.display());
        std::fs::create_dir_all(dir.join("home")).unwrap();
        let mut driver = Command::new(tauri_driver());
        // Its own process group, so a failed test can stop the driver, WebKitWebDriver and the
        // app together (a leftover would hold the fixed ports for the next test).
        std::os::unix::process::CommandExt::process_group(&mut driver, 0);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("driver.log"))
            .unwrap();
        let mut driver = driver
            .env("COUNTERSIGN_CONFIG", dir.join("config.json"))
            .env("XDG_DATA_HOME", dir.join("data"))
            .env("XDG_CONFIG_HOME", dir.join("config"))
            // Some libraries (the autostart entry) write under $HOME/.config regardless.
            .env("HOME", dir.join("home"))
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_path())))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("tauri-driver starts (run `make deps`)");
        let client = match connect(&app).await {
            Ok(client) => client,
            Err(e) => {
                // No App owns the driver yet: stop it here, or it holds the port for the rest.
                stop_group(&mut driver);
                let log = std::fs::read_to_string(dir.join("driver.log")).unwrap_or_default();
                panic!("{e}; the app's log:\n{log}");
            }
        };
        App {
            client,
            dir,
            driver,
            env,
        }
    }

    /// Sends SIGTERM to the app (found in the driver's process group), as a logout would.
    pub fn terminate_app(&self) {
        let group = self.driver.id().to_string();
        let status = Command::new("pkill")
            .args(["-TERM", "-g", &group, "-x", "countersign"])
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "the app process was not found"
        );
    }

    pub fn audit_log(&self) -> PathBuf {
        self.dir.join("data/countersign/audit.jsonl")
    }

    /// Waits for the audit log's first `resolved` record and returns it.
    pub async fn first_resolution(&self) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let records: Vec<Value> = std::fs::read_to_string(self.audit_log())
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            if let Some(end) = records.iter().find(|r| r["event"] == "resolved") {
                return end.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no ask was resolved: {records:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn close(self) {
        let _ = self.client.clone().close().await;
        // Drop stops the processes.
    }

    /// A picture of the page (PNG). WebKit's WebDriver takes it at the page's next paint, and
    /// a still page drawn without GPU compositing (how the app draws, see `launch.rs`) does
    /// not paint: the picture would wait until something changed (the sign-in test's, for the
    /// ten minutes until its sign-in timed out). So the page is made to repaint one corner
    /// pixel, unseen, every 50 ms for the next two seconds, while the picture is asked for.
    pub async fn screenshot(&self) -> Result<Vec<u8>, fantoccini::error::CmdError> {
        self.client
            .execute(
                r#"
                const dot = document.createElement('div');
                dot.style.cssText = 'position:fixed;left:0;top:0;width:1px;height:1px;pointer-events:none';
                document.documentElement.append(dot);
                let n = 0;
                const tick = setInterval(() => {
                    dot.style.background = n % 2 ? 'rgba(0,0,0,0.004)' : 'rgba(0,0,0,0.002)';
                    if (++n === 40) { clearInterval(tick); dot.remove(); }
                }, 50);
                "#,
                vec![],
            )
            .await?;
        self.client.screenshot().await
    }

    /// Saves a screenshot of the window next to the test's files, for a failure to show.
    pub async fn snapshot(&self, name: &str) {
        if let Ok(png) = self.screenshot().await {
            let _ = std::fs::write(self.dir.join(format!("{name}.png")), png);
        }
    }

    /// Waits for an element matching `css`.
    pub async fn find(&self, css: &str) -> Element {
        match self
            .client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
        {
            Ok(element) => element,
            Err(e) => panic!("no element {css}: {e}\n{}", self.page_said().await),
        }
    }

    pub async fn find_xpath(&self, xpath: &str) -> Element {
        match self
            .client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::XPath(xpath))
            .await
        {
            Ok(element) => element,
            Err(e) => panic!("no element {xpath}: {e}\n{}", self.page_said().await),
        }
    }

    /// What the page showed, for a failure's message: a test that waited in vain says what
    /// it saw instead.
    async fn page_said(&self) -> String {
        match self
            .client
            .execute("return document.body.innerText.slice(0, 3000);", vec![])
            .await
        {
            Ok(text) => format!("the page said:\n{}", text.as_str().unwrap_or_default()),
            Err(e) => format!("the page could not be read: {e}"),
        }
    }

    pub async fn exists(&self, css: &str) -> bool {
        self.client.find(Locator::Css(css)).await.is_ok()
    }

    /// Waits until nothing matches `css`.
    pub async fn gone(&self, css: &str) {
        let deadline = Instant::now() + WAIT;
        while self.exists(css).await {
            assert!(Instant::now() < deadline, "{css} is still there");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Opens a tool's run panel like a person: click "Run…", type the arguments, press Run.
    /// The tool list can be redrawn under us (it loads after the page), so each step is
    /// checked and the whole retried on a stale page.
    pub async fn run_tool(&self, tool: &str, arguments: &str) {
        let form = format!("form[aria-label=\"Run {tool}\"]");
        for _attempt in 0..5 {
            let panel = self.find(&form).await;
            if !panel.is_displayed().await.unwrap_or(false) {
                let toggle = self
                    .find_xpath(&format!(
                        "//article[.//h4[normalize-space()='{tool}']]//button[normalize-space()='Run…']"
                    ))
                    .await;
                let _ = toggle.click().await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let textarea = self.find(&format!("{form} textarea")).await;
            if !textarea.is_displayed().await.unwrap_or(false) {
                // The form view (the tool's schema fits it): these tests write JSON.
                if let Ok(toggle) = self
                    .client
                    .find(Locator::Css(&format!("{form} button.json-toggle")))
                    .await
                    && toggle.is_displayed().await.unwrap_or(false)
                {
                    let _ = toggle.click().await;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                continue;
            }
            if textarea.clear().await.is_err() || textarea.send_keys(arguments).await.is_err() {
                continue;
            }
            // Forget the previous run's status: a quick run can finish before we look, with
            // the same words as the last one.
            let _ = self
                .client
                .execute(
                    "const s = document.querySelector(arguments[0]); if (s) s.textContent = '';",
                    vec![serde_json::json!(format!("{form} .run-status"))],
                )
                .await;
            if self
                .find(&format!("{form} button[type=submit]"))
                .await
                .click()
                .await
                .is_err()
            {
                continue;
            }
            // The submit handler marks the run as started before it invokes the backend.
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                if !self.run_status(tool).await.is_empty() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        self.snapshot("run-tool").await;
        panic!(
            "could not run {tool} (screenshot in {})",
            self.dir.display()
        );
    }

    async fn run_status(&self, tool: &str) -> String {
        let css = format!("form[aria-label=\"Run {tool}\"] .run-status");
        match self.client.find(Locator::Css(&css)).await {
            Ok(e) => e.text().await.unwrap_or_default().trim().to_owned(),
            Err(_) => String::new(),
        }
    }

    /// Runs a tool and waits until `css` appears. A run is never made twice: if `css` does not
    /// come, the test fails and says whether the app received the run (its log, and the page's
    /// own check, `run_arrived`).
    ///
    /// Runs made again here once hid a harness race, not lost commands: a question the server
    /// withdraws within 300 ms (`slow_question`) can open and close between two WebDriver
    /// polls, which read as a run that never arrived (2 of 150 in a row; the app had received
    /// every one). Short-lived dialogs are watched from the page instead (see the latency
    /// benchmark).
    pub async fn run_until(&self, tool: &str, arguments: &str, css: &str) -> Element {
        let runs_before = self.runs_received();
        self.run_tool(tool, arguments).await;
        match self
            .client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
        {
            Ok(element) => element,
            Err(_) => self.no_run(tool, css, runs_before).await,
        }
    }

    /// How many runs the app has logged receiving.
    fn runs_received(&self) -> usize {
        self.log().matches("running a tool for the person").count()
    }

    async fn no_run(&self, tool: &str, waited_for: &str, runs_before: usize) -> ! {
        self.snapshot("no-run").await;
        panic!(
            "{tool}: {waited_for} never came; the app received {} run(s) since the click, and the page says “{}” (screenshot in {})",
            self.runs_received() - runs_before,
            self.run_status(tool).await,
            self.dir.display()
        );
    }

    /// Runs a tool that asks, until its dialog is shown.
    pub async fn run_until_dialog(&self, tool: &str, arguments: &str) -> Element {
        self.run_until(tool, arguments, DIALOG).await
    }

    /// Runs a tool that does not ask, until its result contains `needle`.
    pub async fn run_until_result(&self, tool: &str, arguments: &str, needle: &str) -> String {
        let runs_before = self.runs_received();
        self.run_tool(tool, arguments).await;
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            let status = self.run_status(tool).await;
            if !status.is_empty() && status != "Running…" {
                return self.wait_result_contains(tool, needle).await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.no_run(tool, "a result", runs_before).await
    }

    /// The text of a tool's last result once its run has finished.
    pub async fn tool_result(&self, tool: &str) -> String {
        let css = format!("form[aria-label=\"Run {tool}\"] .run-result");
        let deadline = Instant::now() + WAIT;
        loop {
            let status = self.run_status(tool).await;
            let text = self.find(&css).await.text().await.unwrap_or_default();
            if !status.is_empty() && status != "Running…" && !text.trim().is_empty() {
                return text;
            }
            if Instant::now() >= deadline {
                self.snapshot("no-result").await;
                panic!(
                    "no result for {tool} (screenshot in {})",
                    self.dir.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until a tool's result contains `needle`.
    pub async fn wait_result_contains(&self, tool: &str, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let text = self.tool_result(tool).await;
            if text.contains(needle) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "{tool}: result {text:?} never contained {needle:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn dialog(&self) -> Element {
        self.find(DIALOG).await
    }

    /// Clicks a dialog's button once it works: a yes (Submit, Allow once, ...) arms only after
    /// the question has been shown for a moment, and a click before that does nothing.
    pub async fn press_in_dialog(&self, button: &str) {
        self.armed_button(button).await.click().await.unwrap();
    }

    /// A dialog's button once it works (see `press_in_dialog`), to click when the click's own
    /// reply may never come (the app dies at that click, on purpose).
    pub async fn armed_button(&self, button: &str) -> Element {
        // Found afresh on each look, and only where it is shown: the question just answered
        // stays in the page (hidden, its buttons disabled) until the app's reply comes, and a
        // button found there once would never arm.
        let xpath = format!(
            "//dialog[@open]//button[normalize-space()='{button}'][not(ancestor-or-self::*[@hidden])]"
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(found) = self.client.find(Locator::XPath(&xpath)).await
                && found.attr("aria-disabled").await.ok().flatten().as_deref() != Some("true")
                && found.is_enabled().await.unwrap_or(false)
            {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "the dialog's button {button} never armed\n{}",
                self.page_said().await
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn press_escape(&self) {
        let focused = self.client.active_element().await.unwrap();
        focused.send_keys(&Key::Escape.to_string()).await.unwrap();
    }
}

impl Drop for App {
    fn drop(&mut self) {
        stop_group(&mut self.driver);
    }
}

/// Kills the driver's process group (the driver, WebKitWebDriver, the app) and waits until every
/// member is gone: an app still dying holds its single-instance name on the bus, and the next
/// test's app would hand over to it and exit.
fn stop_group(driver: &mut Child) {
    let group = driver.id().to_string();
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .status();
    let _ = driver.wait();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline
        && Command::new("pgrep")
            .args(["-g", &group])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn tauri_driver() -> PathBuf {
    if let Some(home) = std::env::var_os("CARGO_HOME") {
        let p = Path::new(&home).join("bin/tauri-driver");
        if p.exists() {
            return p;
        }
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let p = home.join(".cargo/bin/tauri-driver");
    if p.exists() {
        p
    } else {
        PathBuf::from("tauri-driver")
    }
}

/// A WebDriver session on the app. A session request whose app exits at once (a second
/// instance handing over, a crash) never returns, so each attempt has its own deadline.
async fn connect(app: &Path) -> Result<Client, String> {
    let mut caps = serde_json::Map::new();
    caps.insert("tauri:options".into(), json!({"application": app}));
    let deadline = Instant::now() + WAIT;
    loop {
        let mut builder = ClientBuilder::native();
        builder.capabilities(caps.clone());
        match tokio::time::timeout(WAIT, builder.connect(DRIVER)).await {
            Ok(Ok(client)) => return Ok(client),
            Ok(Err(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok(Err(e)) => return Err(format!("cannot reach tauri-driver: {e}")),
            Err(_) => return Err(format!("no WebDriver session on the app within {WAIT:?}")),
        }
    }
}

/// The demo server binary, for configs.
pub fn demo_server() -> String {
    target_dir()
        .join("debug/countersign-demo-server")
        .display()
        .to_string()
}

/// Percentile of sorted samples.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// A child process killed (with its group) when dropped.
pub struct Background {
    child: Child,
    pub log: PathBuf,
}

impl Background {
    /// `child`, writing to `log`.
    pub fn new(child: Child, log: PathBuf) -> Self {
        Self { child, log }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops it as a logout does (SIGTERM) and waits for it to exit.
    pub fn terminate(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `desktop-double` (see src/bin/desktop-double.rs) with `args`, logging to
/// `dir/<name>.jsonl`, and waits until its bus names are owned.
pub fn desktop_double(dir: &Path, name: &str, args: &[&str]) -> Background {
    use std::io::BufRead;
    std::fs::create_dir_all(dir).unwrap();
    let log = dir.join(format!("{name}.jsonl"));
    let _ = std::fs::remove_file(&log);
    let mut command = Command::new(target_dir().join("debug/desktop-double"));
    for arg in args {
        command.arg(arg.replace("{log}", &log.display().to_string()));
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("desktop-double starts (cargo build --workspace --all-targets)");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "desktop-double did not start");
    Background { child, log }
}

/// The JSON lines a desktop double has logged so far. Only whole lines: a line being written
/// as the file is read (a `writeln!` may take several writes) is left for the next read.
pub fn logged(log: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let whole = text.rfind('\n').map_or("", |end| &text[..end]);
    whole
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `dbus-monitor` on the session bus for `Notify` calls: the only proof on Linux that a
/// notification was sent (`show()` returning Ok proves nothing).
pub fn notify_monitor(dir: &Path) -> Background {
    std::fs::create_dir_all(dir).unwrap();
    let log = dir.join("dbus-monitor.txt");
    let child = Command::new("dbus-monitor")
        .args([
            "--session",
            "type='method_call',interface='org.freedesktop.Notifications',member='Notify'",
        ])
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("dbus-monitor (Debian package dbus) runs");
    // It has subscribed once its own NameAcquired signal is printed.
    let deadline = Instant::now() + WAIT;
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("NameAcquired")
    {
        assert!(Instant::now() < deadline, "dbus-monitor never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    Background { child, log }
}

/// The `Notify` calls `dbus-monitor` printed, each as its lines of arguments.
pub fn notify_calls(monitor: &Background) -> Vec<String> {
    let text = std::fs::read_to_string(&monitor.log).unwrap_or_default();
    text.split("method call")
        .filter(|block| block.contains("member=Notify"))
        .map(str::to_owned)
        .collect()
}

impl App {
    /// Whether the webview's document has the keyboard focus.
    pub async fn has_focus(&self) -> bool {
        self.client
            .execute("return document.hasFocus()", vec![])
            .await
            .ok()
            .and_then(|v| v.as_bool())
            .unwrap_or(false)
    }

    /// Moves the X keyboard focus away from the app (to the root window), as switching to
    /// another program would; waits until the page has lost it.
    pub async fn unfocus(&self) {
        let root = Command::new("xdotool")
            .args(["search", "--maxdepth", "0", "--name", ""])
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .map(str::to_owned)
            });
        let status = Command::new("xdotool")
            .args(["windowfocus", root.as_deref().unwrap_or("0")])
            .status()
            .expect("xdotool (Debian package xdotool) runs");
        assert!(status.success(), "xdotool windowfocus failed");
        let deadline = Instant::now() + WAIT;
        while self.has_focus().await {
            assert!(Instant::now() < deadline, "the window kept the focus");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Switches to another program: its window (`other-program`) takes the X keyboard focus
    /// until the returned handle is dropped; waits until the page has lost it.
    pub async fn switch_away(&self) -> OtherProgram {
        let mut other = OtherProgram(
            Command::new(target_dir().join("debug/other-program"))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("other-program is built (cargo build -p countersign-e2e --bins)"),
        );
        // It says `focused`, or exits within its own deadline.
        let mut said = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(other.0.stdout.take().unwrap()),
            &mut said,
        )
        .unwrap();
        assert_eq!(said.trim(), "focused", "other-program took no focus");
        let deadline = Instant::now() + WAIT;
        while self.has_focus().await {
            assert!(Instant::now() < deadline, "the window kept the focus");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        other
    }

    /// Gives the X keyboard focus back to the app's window, as switching back to it would;
    /// waits until the page has it.
    pub async fn refocus(&self) {
        let window = Command::new("xdotool")
            .args(["search", "--onlyvisible", "--name", "^Countersign$"])
            .output()
            .expect("xdotool (Debian package xdotool) runs");
        let window = String::from_utf8_lossy(&window.stdout)
            .lines()
            .next()
            .map(str::to_owned)
            .expect("the app's window is on the display");
        let status = Command::new("xdotool")
            .args(["windowfocus", &window])
            .status()
            .expect("xdotool runs");
        assert!(status.success(), "xdotool windowfocus failed");
        let deadline = Instant::now() + WAIT;
        while !self.has_focus().await {
            assert!(
                Instant::now() < deadline,
                "the window did not get the focus back"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Closes the window the way a window manager's close button does (there is none under
    /// Xvfb): a `WM_DELETE_WINDOW` message, sent by `close-window` (src/bin/close-window.rs).
    pub fn close_window(&self) {
        let out = Command::new(target_dir().join("debug/close-window"))
            .arg("Countersign")
            .output()
            .expect("close-window runs (cargo build --workspace --all-targets)");
        let asked = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(
            out.status.success() && asked != "0",
            "no Countersign window to close: {out:?}"
        );
    }

    /// `document.visibilityState`: "hidden" once the window is no longer shown.
    pub async fn visibility(&self) -> String {
        self.client
            .execute("return document.visibilityState", vec![])
            .await
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }

    /// The app's process id (found in the driver's process group).
    pub fn app_pid(&self) -> Option<u32> {
        let out = Command::new("pgrep")
            .args(["-g", &self.driver.id().to_string(), "-x", "countersign"])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    }

    /// The app's log (its stderr, passed through by tauri-driver).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("driver.log")).unwrap_or_default()
    }
}

/// Another program's window, holding the focus it took until dropped.
pub struct OtherProgram(Child);

impl Drop for OtherProgram {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Polls `check` until it holds; panics after `WAIT`, naming `what`.
pub async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A stub system opener in `dir` that appends every URL it is handed to a file; returns
/// (stub, record).
pub fn recording_opener(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let record = dir.join("opened.txt");
    let stub = dir.join("opener.sh");
    std::fs::write(
        &stub,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$1\" >> '{}'\n",
            record.display()
        ),
    )
    .unwrap();
    Command::new("chmod").arg("+x").arg(&stub).status().unwrap();
    (stub, record)
}

/// One HTTP/1.1 exchange with a server on 127.0.0.1 (this crate has no HTTP client; fantoccini
/// keeps its own): the status, the headers (names lower-cased) and the body.
pub fn http_exchange(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("nothing listens on 127.0.0.1:{port}: {e}"));
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();

    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut fill = |buf: &mut Vec<u8>| {
        let n = stream.read(&mut chunk).expect("the response arrives");
        buf.extend_from_slice(&chunk[..n]);
        n
    };
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        assert!(fill(&mut buf) > 0, "the connection closed mid-response");
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {head}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let mut rest = buf[head_end + 4..].to_vec();
    let body = if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        // Until the last (empty) chunk.
        while !rest.windows(5).any(|w| w == b"0\r\n\r\n") {
            assert!(fill(&mut rest) > 0, "the connection closed mid-body");
        }
        let mut out = Vec::new();
        let mut at = 0;
        loop {
            let line_end = at + rest[at..].windows(2).position(|w| w == b"\r\n").unwrap();
            let size = usize::from_str_radix(
                String::from_utf8_lossy(&rest[at..line_end])
                    .split(';')
                    .next()
                    .unwrap()
                    .trim(),
                16,
            )
            .unwrap();
            if size == 0 {
                break;
            }
            out.extend_from_slice(&rest[line_end + 2..line_end + 2 + size]);
            at = line_end + 2 + size + 2;
        }
        out
    } else {
        let length: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while rest.len() < length {
            assert!(fill(&mut rest) > 0, "the connection closed mid-body");
        }
        rest.truncate(length);
        rest
    };
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

impl App {
    /// What assistive technology is told about `element`: WebDriver's computed `role` or
    /// `label` (WebKitWebDriver has both; fantoccini does not wrap them).
    pub async fn computed(&self, element: &Element, what: &str) -> String {
        let session = self
            .client
            .session_id()
            .await
            .unwrap()
            .expect("a WebDriver session");
        let path = format!(
            "/session/{session}/element/{}/computed{what}",
            element.element_id()
        );
        let (status, _, body) = tokio::task::spawn_blocking(move || {
            http_exchange(
                DRIVER_PORT,
                "GET",
                &path,
                &[("Accept", "application/json")],
                "",
            )
        })
        .await
        .unwrap();
        let reply: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        assert_eq!(status, 200, "computed {what}: {body}");
        reply["value"].as_str().unwrap_or_default().to_owned()
    }
}

/// GNOME Keyring as the Secret Service on this session bus (the one `scripts/e2e.sh` runs in),
/// its keyrings under `dir/keyring`, unlocked with a test password; stopped on drop.
pub fn keyring(dir: &Path) -> Background {
    let home = dir.join("keyring");
    std::fs::create_dir_all(home.join("run")).unwrap();
    std::fs::set_permissions(
        home.join("run"),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let mut child = Command::new("gnome-keyring-daemon")
        .args([
            "--foreground",
            "--replace",
            "--unlock",
            "--components=secrets",
        ])
        .env("HOME", &home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_RUNTIME_DIR", home.join("run"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("gnome-keyring-daemon (run `make deps`)");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"test-password").unwrap();
    // Ready once it, not the keyring it replaces, owns the name on the bus: a check for any
    // owner passed while the old one (D-Bus activated earlier in the session, by the portal)
    // still held it, and the app, asking in the gap between the two, had another activated
    // with no login collection (seen once, in CI at 5aa46e4).
    let deadline = Instant::now() + WAIT;
    while keyring_owner() != Some(child.id()) {
        assert!(
            Instant::now() < deadline,
            "the keyring never answered on the bus"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Background {
        child,
        log: home.join("none"),
    }
}

/// The process that owns the Secret Service name, if any (asked of the bus, without starting
/// one: a D-Bus activation would start a keyring with the wrong home).
fn keyring_owner() -> Option<u32> {
    let out = Command::new("dbus-send")
        .args([
            "--session",
            "--print-reply",
            "--dest=org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus.GetConnectionUnixProcessID",
            "string:org.freedesktop.secrets",
        ])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .skip_while(|w| *w != "uint32")
        .nth(1)?
        .parse()
        .ok()
}

/// What the keyring holds for Countersign, as `secret-tool` prints it (attributes and secrets).
pub fn keyring_secrets(_dir: &Path) -> String {
    let out = Command::new("secret-tool")
        .args(["search", "--all", "--unlock", "application", "countersign"])
        .output()
        .expect("secret-tool (run `make deps`)");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `tests/peers/oauth-server.mjs` (a server that wants OAuth, with its authorization server),
/// logging to `log`, its access tokens living `expires_in` seconds; its base URL.
pub fn oauth_server(log: &Path, expires_in: u64) -> (Background, String) {
    let mut child = Command::new("node")
        .arg(repo().join("tests/peers/oauth-server.mjs"))
        .env("OAUTH_SERVER_LOG", log)
        .env("OAUTH_EXPIRES_IN", expires_in.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("node");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let base = line
        .trim()
        .strip_prefix("listening ")
        .expect("the server prints its address")
        .to_owned();
    (
        Background {
            child,
            log: log.to_path_buf(),
        },
        base,
    )
}

/// A system opener that records the address it is handed (`dir/opened.txt`) and then does
/// what the person's browser does after they log in at the authorization server: follows its
/// redirect, to the sign-in's loopback address. Returns (opener, record).
pub fn redirect_following_opener(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let record = dir.join("opened.txt");
    let stub = dir.join("browser.sh");
    std::fs::write(
        &stub,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$1\" >> '{}'\nexec node -e '\
             fetch(process.argv[1], {{redirect: \"manual\"}})\
             .then((r) => fetch(r.headers.get(\"location\")))\
             .then((r) => r.text()).catch((e) => console.error(e))' \"$1\"\n",
            record.display()
        ),
    )
    .unwrap();
    Command::new("chmod").arg("+x").arg(&stub).status().unwrap();
    (stub, record)
}

/// Files under `dir` whose bytes contain `needle`.
pub fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if let Ok(bytes) = std::fs::read(&path)
            && bytes.windows(needle.len()).any(|w| w == needle)
        {
            found.push(path.display().to_string());
        }
    }
    found
}

/// One row of the fault matrix (README, "Tests"): printed, and appended as a JSON line to
/// `$COUNTERSIGN_FAULT_ROWS` when set, where `scripts/fault-table.mjs` makes one table of
/// every row, the core's and the real app's.
pub fn fault_row(fault: &str, person: &str, server: &str, audit: &str, pass: bool) {
    let row =
        json!({"fault": fault, "person": person, "server": server, "audit": audit, "pass": pass});
    println!("fault row: {row}");
    if let Some(path) = std::env::var_os("COUNTERSIGN_FAULT_ROWS") {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("the fault rows file");
        writeln!(file, "{row}").unwrap();
    }
}
