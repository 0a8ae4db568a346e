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
/// The ask dialog: a native `<dialog>` (implicit role dialog) opened modally.
pub const DIALOG: &str = "dialog[open]";

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repo().join("target"))
}

/// One app under test, with its own files, and the WebDriver session on it.
pub struct App {
    pub client: Client,
    pub dir: PathBuf,
    driver: Child,
}

impl App {
    /// Starts tauri-driver (which starts the app) with `servers` as the `mcpServers` config.
    pub async fn start(test: &str, servers: Value) -> App {
        let dir = std::env::temp_dir().join(format!("cs-e2e-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("config.json");
        std::fs::write(&config, serde_json::to_vec_pretty(&json!({"mcpServers": servers})).unwrap()).unwrap();
        let app = target_dir().join("debug/countersign");
        assert!(app.exists(), "build the app first: {}", app.display());
        let driver = Command::new(tauri_driver())
            .env("COUNTERSIGN_CONFIG", &config)
            .env("XDG_DATA_HOME", dir.join("data"))
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("driver.log")).unwrap())
            .spawn()
            .expect("tauri-driver starts (run `make deps`)");
        let client = connect(&app).await;
        App { client, dir, driver }
    }

    pub fn audit_log(&self) -> PathBuf {
        self.dir.join("data/countersign/audit.jsonl")
    }

    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }

    /// Waits for an element matching `css`.
    pub async fn find(&self, css: &str) -> Element {
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no element {css}: {e}"))
    }

    pub async fn find_xpath(&self, xpath: &str) -> Element {
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::XPath(xpath))
            .await
            .unwrap_or_else(|e| panic!("no element {xpath}: {e}"))
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
    pub async fn run_tool(&self, tool: &str, arguments: &str) {
        let form = format!("form[aria-label=\"Run {tool}\"]");
        let panel = self.find(&form).await;
        if !panel.is_displayed().await.unwrap_or(false) {
            self.find_xpath(&format!(
                "//article[.//h4[normalize-space()='{tool}']]//button[normalize-space()='Run…']"
            ))
            .await
            .click()
            .await
            .unwrap();
        }
        let textarea = self.find(&format!("{form} textarea")).await;
        textarea.clear().await.unwrap();
        textarea.send_keys(arguments).await.unwrap();
        self.find(&format!("{form} button[type=submit]")).await.click().await.unwrap();
    }

    /// The text of a tool's last result once it has one.
    pub async fn tool_result(&self, tool: &str) -> String {
        let css = format!("form[aria-label=\"Run {tool}\"] .run-result");
        let deadline = Instant::now() + WAIT;
        loop {
            let text = self.find(&css).await.text().await.unwrap_or_default();
            if !text.trim().is_empty() {
                return text;
            }
            assert!(Instant::now() < deadline, "no result for {tool}");
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
            assert!(Instant::now() < deadline, "{tool}: result {text:?} never contained {needle:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn dialog(&self) -> Element {
        self.find(DIALOG).await
    }

    pub async fn press_in_dialog(&self, button: &str) {
        self.find_xpath(&format!("//dialog[@open]//button[normalize-space()='{button}']"))
            .await
            .click()
            .await
            .unwrap();
    }

    pub async fn press_escape(&self) {
        let focused = self.client.active_element().await.unwrap();
        focused.send_keys(&Key::Escape.to_string()).await.unwrap();
    }
}

fn tauri_driver() -> PathBuf {
    if let Some(home) = std::env::var_os("CARGO_HOME") {
        let p = Path::new(&home).join("bin/tauri-driver");
        if p.exists() {
            return p;
        }
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let p = home.join(".cargo/bin/tauri-driver");
    if p.exists() { p } else { PathBuf::from("tauri-driver") }
}

async fn connect(app: &Path) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert("tauri:options".into(), json!({"application": app}));
    let deadline = Instant::now() + WAIT;
    loop {
        match ClientBuilder::native().capabilities(caps.clone()).connect(DRIVER).await {
            Ok(client) => return client,
            Err(e) => {
                assert!(Instant::now() < deadline, "cannot reach tauri-driver: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// The demo server binary, for configs.
pub fn demo_server() -> String {
    target_dir().join("debug/countersign-demo-server").display().to_string()
}

/// Percentile of sorted samples.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}
