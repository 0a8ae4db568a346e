//! The tray icon: the number of waiting questions beside it (where the tray host draws
//! labels), and a menu listing them that opens the app or quits it. Where there is no tray (no library, no tray host on the desktop)
//! the app runs without one and closing its window quits it; the UI says so.

use tauri::menu::{Menu, MenuBuilder, MenuItemBuilder};
use tauri::tray::{MouseButton, MouseButtonState, TrayIcon, TrayIconBuilder, TrayIconEvent};
use tauri::{AppHandle, Manager};

use countersign_core::{Ask, notification};

const TRAY_ID: &str = "countersign";
/// Questions listed in the menu; the rest are "and N more".
const LISTED: usize = 8;
const MENU_TEXT_CHARS: usize = 60;

/// Creates the tray icon, or returns None (logged) where this system cannot have one. Never
/// panics: the appindicator library is looked for first, because the tray crate panics when
/// it is missing.
pub fn create(app: &AppHandle) -> Option<TrayIcon> {
    if !indicator_library_present() {
        tracing::warn!(
            "no tray: libayatana-appindicator3 (or libappindicator3) is not installed; closing the window will quit"
        );
        return None;
    }
    let menu = match menu(app, &[]) {
        Ok(menu) => menu,
        Err(e) => {
            tracing::warn!("no tray: cannot build its menu: {e}");
            return None;
        }
    };
    let build = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut builder = TrayIconBuilder::with_id(TRAY_ID)
            .menu(&menu)
            .tooltip("Countersign")
            .show_menu_on_left_click(false)
            .on_menu_event(|app, event| on_menu(app, event.id().as_ref()))
            .on_tray_icon_event(|tray, event| {
                if let TrayIconEvent::Click {
                    button: MouseButton::Left,
                    button_state: MouseButtonState::Up,
                    ..
                } = event
                {
                    crate::bring_forward(tray.app_handle());
                }
            });
        if let Some(icon) = app.default_window_icon() {
            builder = builder.icon(icon.clone());
        }
        // The indicator reads the icon from a file; keep it in our cache rather than a shared
        // /tmp/tray-icon another user may own.
        if let Ok(cache) = app.path().app_cache_dir() {
            builder = builder.temp_dir_path(cache.join("tray"));
        }
        builder.build(app)
    }));
    match build {
        Ok(Ok(tray)) => Some(tray),
        Ok(Err(e)) => {
            tracing::warn!("no tray: {e}");
            None
        }
        Err(_) => {
            tracing::warn!("no tray: the tray library failed to start");
            None
        }
    }
}

/// Redraws the count and the menu from the open questions.
pub fn update(app: &AppHandle, pending: &[Ask]) {
    let Some(tray) = app.tray_by_id(TRAY_ID) else {
        return;
    };
    let count = pending.len();
    // On Linux the title is the label beside the icon; elsewhere the tooltip carries it.
    let _ = tray.set_title((count > 0).then(|| count.to_string()));
    let _ = tray.set_tooltip(Some(waiting_text(count)));
    match menu(app, pending) {
        Ok(menu) => {
            let _ = tray.set_menu(Some(menu));
        }
        Err(e) => tracing::warn!("cannot rebuild the tray menu: {e}"),
    }
}

pub fn waiting_text(count: usize) -> String {
    match count {
        0 => "Countersign: no questions waiting".into(),
        1 => "Countersign: 1 question waiting".into(),
        n => format!("Countersign: {n} questions waiting"),
    }
}

fn menu(app: &AppHandle, pending: &[Ask]) -> tauri::Result<Menu<tauri::Wry>> {
    let mut builder = MenuBuilder::new(app)
        .item(&MenuItemBuilder::with_id("open", "Open Countersign").build(app)?)
        .separator();
    if pending.is_empty() {
        builder = builder.item(
            &MenuItemBuilder::with_id("none", "No questions waiting")
                .enabled(false)
                .build(app)?,
        );
    }
    for ask in pending.iter().take(LISTED) {
        builder = builder
            .item(&MenuItemBuilder::with_id(format!("ask:{}", ask.id), menu_text(ask)).build(app)?);
    }
    if pending.len() > LISTED {
        builder = builder.item(
            &MenuItemBuilder::with_id("more", format!("and {} more", pending.len() - LISTED))
                .enabled(false)
                .build(app)?,
        );
    }
    builder = builder.separator();
    // Pausing refuses every agent's request until resumed (the person's "stop everything").
    let gateway = app
        .try_state::<countersign_core::App>()
        .and_then(|core| core.gateway().map(|g| (g.addr().is_some(), g.is_paused())));
    if let Some((true, paused)) = gateway {
        let (id, label) = if paused {
            (RESUME, "Resume the agent gateway")
        } else {
            (PAUSE, "Pause the agent gateway")
        };
        builder = builder.item(&MenuItemBuilder::with_id(id, label).build(app)?);
    }
    builder
        .item(&MenuItemBuilder::with_id("quit", "Quit Countersign").build(app)?)
        .build()
}

/// The gateway's item says what it does, and does that: a menu drawn before the window's
/// Pause (the tray redraws after, and may fail to) must not resume what its label pauses.
const PAUSE: &str = "gateway:pause";
const RESUME: &str = "gateway:resume";

/// Whether the gateway item `id` pauses (else it resumes).
fn pauses(id: &str) -> bool {
    id == PAUSE
}

/// "server: first line", clipped, with `&` doubled so a server's text cannot set a mnemonic.
pub fn menu_text(ask: &Ask) -> String {
    let line = format!(
        "{}: {}",
        notification::visible(&ask.asker.server),
        notification::headline(ask)
    );
    let mut text: String = line.chars().take(MENU_TEXT_CHARS).collect();
    if line.chars().count() > MENU_TEXT_CHARS {
        text.push('…');
    }
    text.replace('&', "&&")
}

fn on_menu(app: &AppHandle, id: &str) {
    match id {
        // Quitting goes through the exit path, which answers every open question `cancel`
        // before the process ends.
        "quit" => app.exit(0),
        PAUSE | RESUME => {
            if let Some(core) = app.try_state::<countersign_core::App>() {
                // The change comes back as an event, which redraws the tray and the window.
                let _ = core.set_gateway_paused(pauses(id));
            }
        }
        // Every question is in the main window; opening it shows them all.
        _ if id == "open" || id.starts_with("ask:") => crate::bring_forward(app),
        _ => {}
    }
}

#[cfg(target_os = "linux")]
fn indicator_library_present() -> bool {
    ["libayatana-appindicator3.so.1", "libappindicator3.so.1"]
        .iter()
        .any(|name| {
            let name = std::ffi::CString::new(*name).expect("no NUL");
            // SAFETY: dlopen with a valid C string; the handle is closed at once (the tray
            // crate opens the library again itself).
            unsafe {
                let handle = libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
                if handle.is_null() {
                    false
                } else {
                    libc::dlclose(handle);
                    true
                }
            }
        })
}

#[cfg(not(target_os = "linux"))]
fn indicator_library_present() -> bool {
    true
}

/// Whether the tray can be seen: `icon` (the tray icon was created) and a tray host runs.
/// Linux tray hosts are StatusNotifierItem hosts, found through the watcher's bus name; the
/// answer is kept current from the bus's name-owner changes on a thread of its own, and each
/// change is sent to the UI as a `desktop-event`. Without a host an indicator icon is
/// invisible, so a closed window could not be got back.
#[cfg(target_os = "linux")]
pub fn watch_host(app: &AppHandle, icon: bool) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    use std::sync::atomic::{AtomicBool, Ordering};
    const WATCHER: &str = "org.kde.StatusNotifierWatcher";
    let shown = std::sync::Arc::new(AtomicBool::new(false));
    if !icon {
        return shown;
    }
    let bus = zbus::blocking::Connection::session()
        .and_then(|c| zbus::blocking::fdo::DBusProxy::new(&c).map(|p| (c, p)));
    let Ok((_connection, dbus)) = bus else {
        tracing::warn!("no session bus: no tray host can be found");
        return shown;
    };
    let Ok(name) = zbus::names::BusName::try_from(WATCHER) else {
        return shown;
    };
    // Subscribe first, then read, so a host starting in between is not missed.
    let changes = dbus.receive_name_owner_changed_with_args(&[(0, WATCHER)]);
    shown.store(dbus.name_has_owner(name).unwrap_or(false), Ordering::SeqCst);
    tracing::info!(tray_host = shown.load(Ordering::SeqCst), "tray");
    let (flag, app) = (shown.clone(), app.clone());
    let watching = std::thread::Builder::new()
        .name("tray-host".into())
        .spawn(move || {
            let Ok(changes) = changes else { return };
            for change in changes {
                let Ok(args) = change.args() else { continue };
                let present = args.new_owner().is_some();
                if flag.swap(present, Ordering::SeqCst) != present {
                    tracing::info!(tray_host = present, "tray host changed");
                    let _ = tauri::Emitter::emit(&app, "desktop-event", ());
                    // A window closed to the tray could not be got back without it.
                    if !present && tauri::Manager::get_webview_window(&app, "main").is_none() {
                        crate::bring_forward(&app);
                    }
                }
            }
        });
    if let Err(e) = watching {
        tracing::warn!("cannot watch for a tray host: {e}");
    }
    shown
}

#[cfg(not(target_os = "linux"))]
pub fn watch_host(_app: &AppHandle, icon: bool) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    std::sync::Arc::new(std::sync::atomic::AtomicBool::new(icon))
}

#[cfg(test)]
mod tests {
    use super::*;
    use countersign_core::{AskKind, Asker, Endpoint};

    #[test]
    fn menu_text_is_clipped_and_cannot_set_a_mnemonic() {
        let ask = Ask {
            id: 1,
            asker: Asker {
                server: "R&D\u{202E}\n".into(),
                endpoint: Endpoint::Stdio {
                    command: "x".into(),
                },
                agent: None,
                declared: None,
                agent_id: None,
            },
            kind: AskKind::Form {
                message: format!("Delete {}?", "x".repeat(100)),
                schema: countersign_core::ask::schema::FormSchema { fields: vec![] },
            },
            request: serde_json::Value::Null,
            received_at_ms: 0,
            deadline_ms: None,
        };
        let text = menu_text(&ask);
        assert!(text.starts_with("R&&D: Delete xxx"), "{text}");
        assert!(!text.contains(['\u{202E}', '\n']), "{text}");
        assert_eq!(text.replace("&&", "&").chars().count(), MENU_TEXT_CHARS + 1);
    }

    /// Clicked on a menu drawn before the state changed, an item still does what it says:
    /// "Pause" never resumes (a toggle did, when the window had paused meanwhile).
    #[test]
    fn the_gateway_item_does_what_its_label_says() {
        assert!(pauses(PAUSE));
        assert!(!pauses(RESUME));
        assert_ne!(PAUSE, RESUME);
    }

    #[test]
    fn waiting_text_counts() {
        assert_eq!(waiting_text(0), "Countersign: no questions waiting");
        assert_eq!(waiting_text(1), "Countersign: 1 question waiting");
        assert_eq!(waiting_text(7), "Countersign: 7 questions waiting");
    }
}
