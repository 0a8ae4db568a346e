//! Desktop notifications for new questions. The core decides the wording and coalesces a
//! burst (`countersign_core::notification`); this shows the result on one long-lived thread (so
//! notifications go out in order, and a slow notification server holds up only this thread) and,
//! where the server supports actions, brings the window forward when the person clicks.
//!
//! notify-rust directly rather than tauri-plugin-notification 2.8 (which wraps it): the
//! plugin sends every notification as a new one (a burst would stack instead of being replaced
//! in place), does not escape a server's text where the notification server reads markup, and
//! loses send errors (README, "Dependencies").

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use countersign_core::notification::{Notification, NotificationUpdate};

type OnClick = Arc<dyn Fn() + Send + Sync>;

/// Hands updates to the notification thread. Only the latest waiting one is kept: each says
/// all there is to show (or that nothing is), so one the thread has not reached yet is moot,
/// and a notification server that never answers holds one update, not every one since.
#[derive(Clone)]
pub struct Notifier {
    next: Arc<(Mutex<Option<NotificationUpdate>>, Condvar)>,
}

impl Notifier {
    /// Starts the notification thread; `on_click` runs when the person clicks a notification.
    pub fn start(on_click: impl Fn() + Send + Sync + 'static) -> Notifier {
        let next: Arc<(Mutex<Option<NotificationUpdate>>, Condvar)> = Arc::default();
        let on_click: OnClick = Arc::new(on_click);
        let waiting = next.clone();
        let spawned = std::thread::Builder::new()
            .name("notifications".into())
            .spawn(move || {
                let mut desk = Desk::default();
                loop {
                    let (slot, ready) = &*waiting;
                    let mut next = slot.lock().unwrap_or_else(|e| e.into_inner());
                    let update = loop {
                        match next.take() {
                            Some(update) => break update,
                            None => next = ready.wait(next).unwrap_or_else(|e| e.into_inner()),
                        }
                    };
                    drop(next);
                    desk.apply(update, &on_click);
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("no desktop notifications: cannot start their thread: {e}");
        }
        Notifier { next }
    }

    pub fn update(&self, update: NotificationUpdate) {
        let (slot, ready) = &*self.next;
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(update);
        ready.notify_one();
    }
}

/// The notification on screen, replaced in place by the next one.
struct Shown {
    id: u32,
    /// Cleared when the notification server reports it closed (or its watcher ends).
    open: Arc<AtomicBool>,
}

#[derive(Default)]
struct Desk {
    shown: Option<Shown>,
    /// Whether the server renders markup in bodies (then a server's text must be escaped);
    /// asked once.
    markup: Option<bool>,
    /// Warn once when there is no notification server, not on every question.
    warned: bool,
}

impl Desk {
    fn apply(&mut self, update: NotificationUpdate, on_click: &OnClick) {
        match update {
            NotificationUpdate::Show(notification) => self.show(notification, on_click),
            NotificationUpdate::Withdraw => {
                if let Some(shown) = self.shown.take()
                    && shown.open.load(Ordering::SeqCst)
                {
                    close(shown.id);
                }
            }
        }
    }

    fn show(&mut self, notification: Notification, on_click: &OnClick) {
        let body = self.body(&notification.body);
        let mut n = notify_rust::Notification::new();
        n.appname("Countersign")
            .summary(&notification.summary)
            .body(&body)
            .icon("dialog-question")
            .timeout(notify_rust::Timeout::Default);
        #[cfg(all(unix, not(target_os = "macos")))]
        {
            n.action("default", "Open");
            n.hint(notify_rust::Hint::Category("im.received".into()));
        }
        let replacing = self
            .shown
            .as_ref()
            .filter(|s| s.open.load(Ordering::SeqCst))
            .map(|s| s.id);
        if let Some(id) = replacing {
            n.id(id);
        }
        match n.show() {
            Ok(handle) => {
                self.warned = false;
                tracing::info!(asks = notification.asks.len(), summary = %notification.summary, "notification sent");
                // A server may answer a replacement with a new id; the old id's watcher
                // would then never see this notification's click.
                if replacing == Some(handle.id()) {
                    return;
                }
                let open = Arc::new(AtomicBool::new(true));
                self.shown = Some(Shown {
                    id: handle.id(),
                    open: open.clone(),
                });
                watch_clicks(handle, open, on_click.clone());
            }
            Err(e) => {
                self.shown = None;
                if !std::mem::replace(&mut self.warned, true) {
                    tracing::warn!("cannot show a desktop notification: {e}");
                }
            }
        }
    }

    #[cfg(all(unix, not(target_os = "macos")))]
    fn body(&mut self, body: &str) -> String {
        let markup = *self.markup.get_or_insert_with(|| {
            notify_rust::get_capabilities()
                .map(|caps| caps.iter().any(|c| c == "body-markup"))
                // Unknown: escape, so text can at worst show an entity, never become markup.
                .unwrap_or(true)
        });
        if markup {
            countersign_core::notification::escape_freedesktop_markup(body)
        } else {
            body.to_owned()
        }
    }

    #[cfg(not(all(unix, not(target_os = "macos"))))]
    fn body(&mut self, body: &str) -> String {
        body.to_owned()
    }
}

/// Clears the notification's `open` flag however its watcher ends, panics included.
struct ClearOnDrop(Arc<AtomicBool>);

impl Drop for ClearOnDrop {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

#[cfg(all(unix, not(target_os = "macos")))]
fn watch_clicks(handle: notify_rust::NotificationHandle, open: Arc<AtomicBool>, on_click: OnClick) {
    // `wait_for_action` blocks until the notification is clicked or closed: a thread per notification on
    // screen (one at a time, as notifications replace each other).
    let spawned = std::thread::Builder::new()
        .name("notification-clicks".into())
        .spawn(move || {
            let _clear = ClearOnDrop(open);
            handle.wait_for_action(|action| {
                if action == "default" {
                    on_click();
                }
            });
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot watch for notification clicks: {e}");
    }
}

#[cfg(not(all(unix, not(target_os = "macos"))))]
fn watch_clicks(
    _handle: notify_rust::NotificationHandle,
    open: Arc<AtomicBool>,
    _on_click: OnClick,
) {
    open.store(false, Ordering::SeqCst);
}

#[cfg(target_os = "linux")]
fn close(id: u32) {
    let closed = zbus::blocking::Connection::session().and_then(|bus| {
        bus.call_method(
            Some("org.freedesktop.Notifications"),
            "/org/freedesktop/Notifications",
            Some("org.freedesktop.Notifications"),
            "CloseNotification",
            &(id,),
        )
    });
    if let Err(e) = closed {
        tracing::debug!("cannot withdraw notification {id}: {e}");
    }
}

#[cfg(not(target_os = "linux"))]
fn close(_id: u32) {}
