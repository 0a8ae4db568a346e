//! Desktop notifications for new questions. The core decides the wording and coalesces a
//! burst (`countersign_core::notice`); this shows the result and, where the notification
//! server supports actions, brings the window forward when the person clicks it.
//!
//! notify-rust directly rather than tauri-plugin-notification 2.8 (which wraps it): the
//! plugin drops the handle, so a click could not bring the ask forward, a burst's notice
//! could not replace the previous one, and errors were silently lost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use countersign_core::notice::{self, Notice};

/// The notice currently on screen, replaced in place by the next burst's.
#[derive(Default)]
struct Shown {
    id: u32,
    /// Cleared when the notification server reports it closed (or the watcher ends).
    open: Arc<AtomicBool>,
}

#[derive(Clone, Default)]
pub struct Notifier {
    shown: Arc<Mutex<Option<Shown>>>,
    /// Warn once when there is no notification server, not on every question.
    warned: Arc<AtomicBool>,
}

impl Notifier {
    /// Shows `notice` off the async runtime (a D-Bus round trip); `on_click` runs when the
    /// person clicks it.
    pub fn show(&self, notice: Notice, on_click: impl Fn() + Send + 'static) {
        let this = self.clone();
        std::thread::spawn(move || this.show_blocking(notice, on_click));
    }

    fn show_blocking(&self, notice: Notice, on_click: impl Fn() + Send + 'static) {
        let mut n = notify_rust::Notification::new();
        n.appname("Countersign")
            .summary(&notice.summary)
            .body(&body_for_platform(&notice.body))
            .icon("dialog-question")
            .timeout(notify_rust::Timeout::Default);
        #[cfg(all(unix, not(target_os = "macos")))]
        {
            n.action("default", "Open");
            n.hint(notify_rust::Hint::Category("im.received".into()));
        }
        let mut shown = self.shown.lock().expect("notifier lock");
        let replace = shown
            .as_ref()
            .filter(|s| s.open.load(Ordering::SeqCst))
            .map(|s| s.id);
        if let Some(id) = replace {
            n.id(id);
        }
        match n.show() {
            Ok(handle) => {
                self.warned.store(false, Ordering::SeqCst);
                tracing::info!(asks = notice.asks.len(), summary = %notice.summary, "notification sent");
                if replace.is_some() {
                    // The open one's watcher still reports clicks for this id.
                    return;
                }
                let open = Arc::new(AtomicBool::new(true));
                *shown = Some(Shown {
                    id: handle.id(),
                    open: open.clone(),
                });
                drop(shown);
                watch_clicks(handle, open, on_click);
            }
            Err(e) => {
                if !self.warned.swap(true, Ordering::SeqCst) {
                    tracing::warn!("cannot show a desktop notification: {e}");
                }
            }
        }
    }
}

#[cfg(all(unix, not(target_os = "macos")))]
fn body_for_platform(body: &str) -> String {
    notice::escape_freedesktop_markup(body)
}

#[cfg(not(all(unix, not(target_os = "macos"))))]
fn body_for_platform(body: &str) -> String {
    body.to_owned()
}

#[cfg(all(unix, not(target_os = "macos")))]
fn watch_clicks(
    handle: notify_rust::NotificationHandle,
    open: Arc<AtomicBool>,
    on_click: impl Fn() + Send + 'static,
) {
    // Blocks this (dedicated) thread until the notification is clicked or closed.
    handle.wait_for_action(|action| {
        if action == "default" {
            on_click();
        }
    });
    open.store(false, Ordering::SeqCst);
}

#[cfg(not(all(unix, not(target_os = "macos"))))]
fn watch_clicks(
    _handle: notify_rust::NotificationHandle,
    open: Arc<AtomicBool>,
    _on_click: impl Fn() + Send + 'static,
) {
    open.store(false, Ordering::SeqCst);
}
