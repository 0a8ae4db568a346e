//! Hands a consented URL to the system browser. Only addresses that passed
//! `countersign_core::ask::url_policy` get here, as one argument (no shell). The opener command is
//! `xdg-open` unless `COUNTERSIGN_OPENER` names another (tests point it at a recorder).
//!
//! The answer has gone to the server by then (the person consented), so an opener that cannot
//! run, or says it could not open the address (`xdg-open` exits 3 when nothing on the desktop
//! opens web addresses), is told to the person ([`NOT_OPENED_EVENT`]) with the address, to
//! open themselves: never "Opened in your browser." for a page that never opened.

use tauri::Emitter;

/// The event that tells the page an address was not opened.
pub const NOT_OPENED_EVENT: &str = "browser-not-opened";

/// An opener that fails later than this is taken to have opened the page and failed after
/// (some wait for the browser they started to close).
const FAILS_WITHIN: std::time::Duration = std::time::Duration::from_secs(60);

/// What the page is told when an address could not be opened.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NotOpened {
    pub url: String,
    pub reason: String,
}

pub fn open(handle: &tauri::AppHandle, url: &url::Url) {
    let opener = std::env::var_os("COUNTERSIGN_OPENER").unwrap_or_else(|| "xdg-open".into());
    let not_opened = {
        let handle = handle.clone();
        let url = url.to_string();
        move |reason: String| {
            tracing::warn!(%reason, "the browser was not opened");
            let _ = handle.emit(NOT_OPENED_EVENT, NotOpened { url, reason });
        }
    };
    let spawned = std::process::Command::new(&opener)
        .arg(url.as_str())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            return not_opened(format!(
                "{} could not be run: {e}",
                opener.to_string_lossy()
            ));
        }
    };
    let started = std::time::Instant::now();
    // Waited for off the UI thread; the opener usually exits at once.
    let waited = std::thread::Builder::new()
        .name("opener".into())
        .spawn(move || match child.wait() {
            Ok(status) if !status.success() && started.elapsed() < FAILS_WITHIN => not_opened(
                format!("{} said it could not ({status})", opener.to_string_lossy()),
            ),
            _ => {}
        });
    if let Err(e) = waited {
        tracing::warn!(error = %e, "cannot wait for the browser's opener");
    }
}
