//! What the window leaves behind once it is closed to the tray, or while it stays behind
//! another program's.
//!
//! Releasing the window ends WebKit's web process, but not its network process: WebKitGTK
//! keeps that for as long as the web context, which Tauri keeps for the app's life
//! (tauri-apps/tauri#14626, wry#590). In a tray app that is about 34 MiB held all day for a
//! window that is not there. So once no window has been open for [`AFTER`], the app ends it
//! (SIGTERM); WebKit starts a new one when the window is made again, as it does after that
//! process crashes (the page is served from the app, and keeps no cookies, cache or storage,
//! so nothing of it is lost). Only the app's own children are looked at, by the executable
//! they run. Then the code only the window ran is given back to the kernel
//! (`countersign_core::idle_memory`), as it is after a start in the tray and while the window
//! stays behind another program's. Measured in BENCHMARKS.md ("Memory").

use std::time::Duration;

use tauri::Manager;

/// How long the window must stay closed first: closing and opening it again at once keeps
/// the process it already has.
const AFTER: Duration = Duration::from_secs(5);
/// How long the window must stay behind another program's first: switching away and back
/// keeps what it runs.
const IN_THE_BACKGROUND: Duration = Duration::from_secs(30);
/// How often to look again while the window's web process is still winding down.
const TRIES: u32 = 6;
const NETWORK_PROCESS: &str = "WebKitNetworkProcess";
const WEB_PROCESS: &str = "WebKitWebProcess";

/// Ends WebKit's network process once no window is open and the web process is gone.
pub(crate) fn end_network_process_later(handle: &tauri::AppHandle) {
    // Under WebDriver (tauri-driver sets this) WebKit ends the automation session with the
    // network process, and the tests could not follow the window back.
    if std::env::var("TAURI_WEBVIEW_AUTOMATION").as_deref() == Ok("true") {
        tracing::info!("window closed: WebKit's network process kept for WebDriver");
        return;
    }
    let handle = handle.clone();
    tauri::async_runtime::spawn(async move {
        for _ in 0..TRIES {
            tokio::time::sleep(AFTER).await;
            let (tx, rx) = tokio::sync::oneshot::channel();
            let on_main = handle.clone();
            // On the main thread, where windows are made: none can be made between the look
            // and the signal.
            let queued = handle.run_on_main_thread(move || {
                let _ = tx.send(end_network_process_if_idle(&on_main));
            });
            if queued.is_err() {
                return;
            }
            match rx.await {
                Ok(Idle::Ended) => return give_back_idle_code("window closed"),
                Ok(Idle::WindowOpen) | Err(_) => return,
                Ok(Idle::WebProcessLeft) => continue,
            }
        }
    });
}

/// After a start in the tray: once it has settled, what it loaded but does not run is given
/// back, unless the window was opened meanwhile.
pub(crate) fn give_back_idle_code_later(handle: &tauri::AppHandle) {
    let handle = handle.clone();
    tauri::async_runtime::spawn(async move {
        tokio::time::sleep(AFTER).await;
        if handle.webview_windows().is_empty() {
            give_back_idle_code("started in the tray");
        }
    });
}

/// With the window open but behind another program's (without the keyboard focus, as a
/// minimised window is too) for [`IN_THE_BACKGROUND`]: what the app's process holds is then
/// mostly code it ran to draw the window and will run again only when the person comes back
/// to it, so it is given back as in the tray. Coming back reads it from the files again, some
/// of it from the disk, since the kernel drops from its cache a page only this process mapped
/// (about 20 ms of CPU, BENCHMARKS.md "Memory"). The page itself is WebKit's web process,
/// which is not ours to page out. Windows trims a minimised program's working set the same
/// way.
pub(crate) fn give_back_idle_code_in_the_background(
    handle: &tauri::AppHandle,
    focus_changes: std::sync::Arc<std::sync::atomic::AtomicU64>,
    change: u64,
) {
    let handle = handle.clone();
    tauri::async_runtime::spawn(async move {
        tokio::time::sleep(IN_THE_BACKGROUND).await;
        // No focus change since (it came back, or was closed): the window stayed behind.
        let behind = focus_changes.load(std::sync::atomic::Ordering::SeqCst) == change;
        if behind && !handle.webview_windows().is_empty() {
            give_back_idle_code("window in the background");
        }
    });
}

/// Has the kernel reclaim the pages of code and read-only data, on a blocking thread (some
/// milliseconds for tens of MiB); what the tray goes on running comes back as it runs.
fn give_back_idle_code(when: &'static str) {
    tauri::async_runtime::spawn_blocking(
        move || match countersign_core::idle_memory::page_out_code() {
            Ok(paged) => tracing::info!(
                when,
                mappings = paged.mappings,
                file_backed_mib_before = paged.file_kib_before / 1024,
                file_backed_mib_after = paged.file_kib_after / 1024,
                "idle code given back to the kernel"
            ),
            Err(e) => {
                tracing::info!(when, error = %e, "idle code kept: the kernel would not take it")
            }
        },
    );
}

#[derive(Debug, PartialEq)]
enum Idle {
    /// Ended (or there was none).
    Ended,
    /// A window is open (again): its network process stays.
    WindowOpen,
    /// A web process still runs: look again later.
    WebProcessLeft,
}

fn end_network_process_if_idle(handle: &tauri::AppHandle) -> Idle {
    if !handle.webview_windows().is_empty() {
        return Idle::WindowOpen;
    }
    let me = std::process::id();
    if !children_running(me, WEB_PROCESS).is_empty() {
        return Idle::WebProcessLeft;
    }
    for pid in children_running(me, NETWORK_PROCESS) {
        // SAFETY: kill(2) only sends a signal. The pid was read from /proc just now as our
        // own child's; were it to exit and be reaped meanwhile, the kernel hands pids out in
        // turn through the whole range, so it would not be another process's yet.
        if unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) } == 0 {
            tracing::info!(pid, "window closed: WebKit's network process ended");
        }
    }
    Idle::Ended
}

/// The pids of `parent`'s children whose executable is named `name`.
fn children_running(parent: u32, name: &str) -> Vec<u32> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| parent_of(pid) == Some(parent))
        .filter(|&pid| {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|exe| exe.file_name().is_some_and(|f| f == name))
        })
        .collect()
}

/// A process's parent, from `/proc/<pid>/stat` (its fourth field, after the name in brackets,
/// which may itself hold spaces and brackets).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// A copy of `sleep` named `name` in a scratch directory.
    fn sleeper_named(name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "countersign-released-{}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join(name);
        std::fs::copy("/bin/sleep", &exe).unwrap();
        (dir, exe)
    }

    #[test]
    fn only_the_apps_own_children_are_found_by_their_executable() {
        let (dir, exe) = sleeper_named(NETWORK_PROCESS);
        let mut own = Command::new(&exe).arg("30").spawn().unwrap();
        // The same executable, but another process's child (a shell's, which waits for it).
        let mut other = Command::new("sh")
            .arg("-c")
            .arg(format!("'{}' 30 & wait", exe.display()))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        // A child of ours running something else, its command line naming it.
        let mut renamed = Command::new("sh")
            .arg("-c")
            .arg(format!("exec -a {NETWORK_PROCESS} sleep 30"))
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));

        let found = children_running(std::process::id(), NETWORK_PROCESS);
        assert_eq!(found, vec![own.id()], "only our own child running it");
        assert!(children_running(std::process::id(), WEB_PROCESS).is_empty());

        for child in [&mut own, &mut other, &mut renamed] {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("pkill").arg("-f").arg(&exe).status();
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_parent_is_read_past_a_name_with_spaces_and_brackets() {
        let (dir, exe) = sleeper_named("a (b) c");
        let mut child = Command::new(&exe).arg("30").spawn().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(parent_of(child.id()), Some(std::process::id()));
        assert_eq!(
            children_running(std::process::id(), "a (b) c"),
            vec![child.id()]
        );
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(dir);
    }
}
