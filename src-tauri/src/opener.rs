//! Hands a consented URL to the system browser. Only addresses that passed
//! `countersign_core::ask::url_policy` get here, as one argument (no shell). The opener command is
//! `xdg-open` unless `COUNTERSIGN_OPENER` names another (tests point it at a recorder).

pub fn open(url: &url::Url) {
    let opener = std::env::var_os("COUNTERSIGN_OPENER").unwrap_or_else(|| "xdg-open".into());
    let spawned = std::process::Command::new(&opener)
        .arg(url.as_str())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        // Reaped off the UI thread; the opener usually exits at once.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(e) => tracing::warn!(opener = ?opener, error = %e, "cannot open the browser"),
    }
}
