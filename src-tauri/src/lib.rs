//! The desktop shell: builds the core in `setup`, hands it to Tauri, forwards core events to
//! the webview, the tray and desktop notifications. It decides nothing; every command is a
//! call into `countersign_core::App`.

pub mod cli;
mod commands;
mod launch;
mod notifications;
mod opener;
#[cfg(target_os = "linux")]
mod released;
mod tray;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tauri::{Emitter, Manager, RunEvent, WindowEvent};

use countersign_core::{App, AskEvent};

/// The shell's own state: what the desktop offers and whether the person is looking.
pub struct Desktop {
    /// A tray icon exists and a tray host shows it (kept current by `tray::watch_host`).
    pub tray: Arc<AtomicBool>,
    /// The main window has keyboard focus: the person sees new questions, so no notification.
    pub focused: Arc<AtomicBool>,
    /// Counts the window's focus changes, so a wait begun when it lost the focus can tell
    /// whether it has been in the background all along.
    pub focus_changes: Arc<AtomicU64>,
}

/// Event names the UI listens to.
const ASK_EVENT: &str = "ask-event";
const SESSION_EVENT: &str = "session-event";
const RUN_PROGRESS_EVENT: &str = "run-progress";
/// The gateway started listening, or was paused or resumed (from the window or the tray):
/// read `gateway_info` again.
const GATEWAY_EVENT: &str = "gateway-event";
/// The config file was edited (applied or not): read `servers` and `config_info` again.
const CONFIG_EVENT: &str = "config-event";

/// The log's filter: `RUST_LOG` if set, else ours. rmcp's lines are held further by
/// [`rmcp_within_bounds`], whatever `RUST_LOG` says.
fn log_filter(rust_log: Option<&str>) -> tracing_subscriber::EnvFilter {
    rust_log
        .and_then(|directives| tracing_subscriber::EnvFilter::try_new(directives).ok())
        .unwrap_or_else(|| "countersign=info,countersign_core=info,rmcp=warn".into())
}

/// Whether a line of rmcp's may be written at all. Below these levels rmcp writes what a log
/// must never hold: its sign-in code, at debug, the authorization code and the token
/// response's other fields (an `id_token`); its service, at debug and trace, every message's
/// content (the answers to a form, a password among them, and the agents' arguments). A
/// filter of its own, beside `RUST_LOG`'s: a directive there for a narrower target (say
/// `rmcp::service=debug`) would win over any directive added to that filter.
fn rmcp_within_bounds(meta: &tracing::Metadata<'_>) -> bool {
    let target = meta.target();
    if target.starts_with("rmcp::transport::auth") {
        *meta.level() <= tracing::Level::WARN
    } else if target == "rmcp" || target.starts_with("rmcp::") {
        *meta.level() <= tracing::Level::INFO
    } else {
        true
    }
}

pub fn run() {
    #[cfg(target_os = "linux")]
    launch::keep_memory_private();
    launch::raise_open_files();
    launch::forget_inherited_appimage();
    #[cfg(target_os = "linux")]
    let without_gl = launch::start_gtk_without_gl();
    {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        tracing_subscriber::registry()
            .with(log_filter(std::env::var("RUST_LOG").ok().as_deref()))
            .with(tracing_subscriber::filter::filter_fn(rmcp_within_bounds))
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    // Plain text in log files and CI output; colours only on a terminal.
                    .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())),
            )
            .init();
    }
    // WebKit says "Disabled hardware acceleration because GTK failed to initialize GL": this
    // says why.
    #[cfg(target_os = "linux")]
    if without_gl {
        tracing::info!("drawing the window without the GPU (start with GDK_GL= to use it)");
    }
    let options = launch::Options::from_args(std::env::args().skip(1));

    let app = tauri::Builder::default()
        // First, so a second launch hands over before anything else starts: the running app
        // comes forward and the new process exits.
        .plugin(tauri_plugin_single_instance::init(|app, argv, _cwd| {
            // Start at login while the app already runs asks for nothing to be shown.
            if argv.iter().any(|a| a == launch::IN_TRAY) {
                return;
            }
            tracing::info!("second launch: bringing the window forward");
            bring_forward(app);
        }))
        .plugin(
            tauri_plugin_window_state::Builder::default()
                .with_state_flags(
                    tauri_plugin_window_state::StateFlags::SIZE
                        | tauri_plugin_window_state::StateFlags::POSITION
                        | tauri_plugin_window_state::StateFlags::MAXIMIZED,
                )
                .build(),
        )
        // At login, into the tray: the window (and WebKit's processes, most of the app's
        // memory) waits until the person opens it.
        .plugin(tauri_plugin_autostart::init(
            tauri_plugin_autostart::MacosLauncher::LaunchAgent,
            Some(vec![launch::IN_TRAY]),
        ))
        .setup(move |tauri_app| {
            // Before the servers start: a SIGTERM from then on quits cleanly.
            let signals = quit_signals();
            let core = match tauri::async_runtime::block_on(launch::start_core(&options)) {
                Ok(core) => core,
                // Not a fault: the person's Countersign is running, and this one has nothing
                // to do (the session bus that would have handed over to it is not there).
                Err(e @ launch::LaunchError::AlreadyRunning(_)) => {
                    tracing::warn!("{e}");
                    std::process::exit(0);
                }
                Err(e) => return Err(e.into()),
            };
            let handle = tauri_app.handle().clone();
            let icon = tray::create(&handle).is_some();
            let desktop = Desktop {
                tray: tray::watch_host(&handle, icon),
                focused: Arc::new(AtomicBool::new(false)),
                focus_changes: Arc::new(AtomicU64::new(0)),
            };
            // The window is made here, not from the config at start, so that a start in the
            // tray makes none; without a tray host to open it from, it is made anyway. At
            // login the tray host may come up after the app: it is given a moment.
            if options.in_tray && icon {
                if desktop.tray.load(Ordering::SeqCst) {
                    tracing::info!("started in the tray");
                    #[cfg(target_os = "linux")]
                    released::give_back_idle_code_later(&handle);
                } else {
                    open_unless_a_tray_host_comes(handle.clone(), desktop.tray.clone());
                }
            } else if let Some(window) = main_window(&handle) {
                focus_changed(&handle, &desktop, window.is_focused().unwrap_or(false));
            }
            forward_events(handle.clone(), &core);
            notify_new_asks(handle.clone(), &core, desktop.focused.clone());
            exit_on_signals(handle, signals);
            tauri_app.manage(core);
            tauri_app.manage(desktop);
            Ok(())
        })
        .on_window_event(on_window_event)
        .invoke_handler(tauri::generate_handler![
            commands::pending_asks,
            commands::answer_ask,
            commands::preview_call,
            commands::list_servers,
            commands::list_tools,
            commands::server_stderr,
            commands::sign_in,
            commands::sign_out,
            commands::run_tool,
            commands::cancel_run,
            commands::run_arrived,
            commands::history,
            commands::verify_audit,
            commands::config_info,
            commands::set_muted,
            commands::desktop_info,
            commands::set_start_at_login,
            commands::gateway_info,
            commands::create_agent,
            commands::list_agents,
            commands::revoke_agent,
            commands::set_gateway_paused,
            commands::get_settings,
            commands::revoke_decision,
            commands::forget_unread_decisions,
            commands::agent_configs,
            commands::check_agent_host,
            commands::preview_import,
            commands::import_servers,
            commands::preview_rewrite,
            commands::rewrite_agent_config,
            commands::undo_rewrite,
        ])
        .build(tauri::generate_context!());
    let app = match app {
        Ok(app) => app,
        Err(e) => {
            eprintln!("countersign: cannot start: {e}");
            std::process::exit(1);
        }
    };
    app.run(|handle, event| {
        // The window closed to the tray is released (see `on_window_event`), which Tauri takes
        // for the last window closing: the app stays. `exit()` (Quit, a signal) has a code.
        if let RunEvent::ExitRequested {
            code: None, api, ..
        } = &event
            && tray_shown(handle)
        {
            api.prevent_exit();
            return;
        }
        // Both: a window closing asks to exit, `exit()` may go straight to Exit. Shutdown is
        // idempotent.
        if let RunEvent::ExitRequested { .. } | RunEvent::Exit = event {
            // Fail closed: every open question is answered `cancel` before the process exits,
            // and child servers are stopped.
            if let Some(core) = handle.try_state::<App>() {
                tauri::async_runtime::block_on(core.shutdown());
            }
        }
    });
}

/// Sets up a new window's webview: loaded again when its page dies. WebKit runs the page in a process of its own; when that dies (killed, out of
/// memory, a crash), the window would stay blank. The page is loaded again instead: it draws
/// every open question from the backend, which never stopped. A page that keeps dying is left
/// alone after a few tries, rather than loaded in a loop.
#[cfg(target_os = "linux")]
fn prepare_webview(window: &tauri::WebviewWindow) {
    const TRIES: usize = 5;
    const WITHIN: std::time::Duration = std::time::Duration::from_secs(60);
    let hooked = window.with_webview(|webview| {
        use webkit2gtk::WebViewExt;
        let recent = std::cell::RefCell::new(std::collections::VecDeque::new());
        webview
            .inner()
            .connect_web_process_terminated(move |view, reason| {
                let mut recent = recent.borrow_mut();
                let now = std::time::Instant::now();
                recent.retain(|t: &std::time::Instant| now.duration_since(*t) < WITHIN);
                if recent.len() >= TRIES {
                    tracing::error!(
                        ?reason,
                        "the window's page keeps dying; not loading it again"
                    );
                    return;
                }
                recent.push_back(now);
                tracing::warn!(?reason, "the window's page died; loading it again");
                view.reload();
            });
    });
    if let Err(e) = hooked {
        tracing::warn!("cannot watch the window's page: {e}");
    }
}

#[cfg(not(target_os = "linux"))]
fn prepare_webview(_window: &tauri::WebviewWindow) {}

/// Drains the core's event channels into webview events and the tray. A new question marks
/// the window as wanting attention but does not take the keyboard: a dialog that grabbed
/// focus mid-typing could be answered by keys meant for another program. The notification,
/// the tray and the person's own click bring it forward.
fn forward_events(handle: tauri::AppHandle, core: &App) {
    let mut asks = core.broker().subscribe();
    let ask_handle = handle.clone();
    let broker = core.broker().clone();
    tauri::async_runtime::spawn(async move {
        loop {
            match asks.recv().await {
                Ok(event) => {
                    if matches!(event, AskEvent::Added { .. }) {
                        request_attention(&ask_handle);
                    }
                    let _ = ask_handle.emit(ASK_EVENT, &event);
                    // Tray calls wait for the main thread; queue the redraw there rather than
                    // block this worker (at quit the main thread is busy cancelling asks).
                    let pending = broker.pending();
                    let tray_handle = ask_handle.clone();
                    let _ =
                        ask_handle.run_on_main_thread(move || tray::update(&tray_handle, &pending));
                }
                // Only after thousands of unread events; the backend state is still right and
                // a reload of the window redraws from it.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "ask events lagged");
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
    });
    if let Some(mut changes) = core.gateway_changes() {
        // Drawn once from the current state too: the gateway may have started listening
        // before this subscribed.
        changes.mark_changed();
        let gateway_handle = handle.clone();
        let broker = core.broker().clone();
        tauri::async_runtime::spawn(async move {
            while changes.changed().await.is_ok() {
                let _ = gateway_handle.emit(GATEWAY_EVENT, ());
                let pending = broker.pending();
                let tray_handle = gateway_handle.clone();
                let _ =
                    gateway_handle.run_on_main_thread(move || tray::update(&tray_handle, &pending));
            }
        });
    }
    let mut config_changes = core.config_changes();
    let config_handle = handle.clone();
    tauri::async_runtime::spawn(async move {
        while config_changes.changed().await.is_ok() {
            let _ = config_handle.emit(CONFIG_EVENT, ());
        }
    });
    // A decision that could not be saved is told with the notices about Countersign's files.
    let mut unsaved = core.settings_unsaved_changes();
    let unsaved_handle = handle.clone();
    tauri::async_runtime::spawn(async move {
        while unsaved.changed().await.is_ok() {
            let _ = unsaved_handle.emit(CONFIG_EVENT, ());
        }
    });
    let watcher = core.clone();
    tauri::async_runtime::spawn(async move {
        watcher
            .watch_config(countersign_core::app::CONFIG_POLL)
            .await
    });
    let mut sessions = core.sessions().subscribe();
    let session_handle = handle.clone();
    tauri::async_runtime::spawn(async move {
        loop {
            match sessions.recv().await {
                Ok(event) => {
                    let _ = session_handle.emit(SESSION_EVENT, &event);
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
    });
    let mut progress = core.subscribe_progress();
    tauri::async_runtime::spawn(async move {
        loop {
            match progress.recv().await {
                Ok(event) => {
                    let _ = handle.emit(RUN_PROGRESS_EVENT, &event);
                }
                // Progress is a hint: a missed step is drawn by the next one.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
    });
}

#[cfg(unix)]
type QuitSignals = Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>;
#[cfg(not(unix))]
type QuitSignals = ();

/// Listens for SIGTERM and SIGINT from now on: registered at once, not in a task that runs
/// later, since until it is registered a SIGTERM ends the app without cleanup (the package
/// test's SIGTERM just after the demo server connected did, in 2 of 10 runs).
fn quit_signals() -> QuitSignals {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        // The signal driver belongs to Tauri's runtime, so it is registered inside it.
        let signals = tauri::async_runtime::block_on(async {
            Some((
                signal(SignalKind::terminate()).ok()?,
                signal(SignalKind::interrupt()).ok()?,
            ))
        });
        if signals.is_none() {
            tracing::warn!(
                "cannot listen for SIGTERM/SIGINT; they will end the app without cleanup"
            );
        }
        signals
    }
}

/// SIGTERM (logout, `kill`) and SIGINT (Ctrl-C in a terminal) quit like the person quitting,
/// so open questions are answered `cancel` and servers stopped, instead of the process just
/// vanishing.
#[cfg_attr(not(unix), allow(unused_variables))]
fn exit_on_signals(handle: tauri::AppHandle, signals: QuitSignals) {
    #[cfg(unix)]
    if let Some((mut term, mut int)) = signals {
        tauri::async_runtime::spawn(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            tracing::info!("signal received; quitting");
            handle.exit(0);
        });
    }
}

/// Desktop notifications, as the core decides them: the shell says whether the window has
/// focus and shows what it is given.
fn notify_new_asks(handle: tauri::AppHandle, core: &App, focused: Arc<AtomicBool>) {
    let clicked = handle.clone();
    let notifier = notifications::Notifier::start(move || bring_forward(&clicked));
    tauri::async_runtime::spawn(core.notifications(
        move || focused.load(Ordering::SeqCst),
        move |update| notifier.update(update),
    ));
}

fn on_window_event(window: &tauri::Window, event: &WindowEvent) {
    match event {
        WindowEvent::Focused(focused) => {
            if let Some(desktop) = window.try_state::<Desktop>() {
                focus_changed(window.app_handle(), &desktop, *focused);
            }
        }
        // With a tray to get it back from, closing the window keeps the app (and the
        // questions it answers) running, and releases the window: its webview (WebKit's web
        // process, most of the app's memory) is made again when the person opens it, and the
        // page draws every open question from the backend. Without a tray, closing quits, as
        // the UI says.
        WindowEvent::CloseRequested { .. } if tray_shown(window.app_handle()) => {
            tracing::info!("window closed to the tray");
        }
        WindowEvent::Destroyed => {
            if let Some(desktop) = window.try_state::<Desktop>() {
                desktop.focused.store(false, Ordering::SeqCst);
                // A wait begun when it lost the focus (`focus_changed`) now gives back
                // nothing: the window is gone, not behind, and closing has its own.
                desktop.focus_changes.fetch_add(1, Ordering::SeqCst);
            }
            // Closed to the tray: what WebKit keeps for the window goes too.
            #[cfg(target_os = "linux")]
            if tray_shown(window.app_handle()) {
                released::end_network_process_later(window.app_handle());
            }
        }
        _ => {}
    }
}

/// The window gained or lost the keyboard focus. Behind another program's window for a while,
/// it gives back the code it is not running, as it does in the tray.
#[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
fn focus_changed(handle: &tauri::AppHandle, desktop: &Desktop, focused: bool) {
    desktop.focused.store(focused, Ordering::SeqCst);
    let change = desktop.focus_changes.fetch_add(1, Ordering::SeqCst) + 1;
    #[cfg(target_os = "linux")]
    if !focused {
        released::give_back_idle_code_in_the_background(
            handle,
            desktop.focus_changes.clone(),
            change,
        );
    }
}

fn request_attention(handle: &tauri::AppHandle) {
    let main = handle.clone();
    let _ = handle.run_on_main_thread(move || {
        if let Some(window) = main.get_webview_window("main")
            && !window.is_focused().unwrap_or(false)
        {
            let _ = window.request_user_attention(Some(tauri::UserAttentionType::Informational));
        }
    });
}

/// How long a start in the tray waits for a tray host before it opens the window.
const TRAY_HOST_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// A start in the tray with no tray host yet: stays there if one comes within
/// `TRAY_HOST_WAIT`, else opens the window, since the person could not reach the app.
fn open_unless_a_tray_host_comes(handle: tauri::AppHandle, shown: Arc<AtomicBool>) {
    tauri::async_runtime::spawn(async move {
        let deadline = tokio::time::Instant::now() + TRAY_HOST_WAIT;
        while tokio::time::Instant::now() < deadline {
            if shown.load(Ordering::SeqCst) {
                tracing::info!("started in the tray");
                #[cfg(target_os = "linux")]
                released::give_back_idle_code_later(&handle);
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        tracing::info!("no tray host came: opening the window");
        bring_forward(&handle);
    });
}

fn tray_shown(handle: &tauri::AppHandle) -> bool {
    handle
        .try_state::<Desktop>()
        .is_some_and(|d| d.tray.load(Ordering::SeqCst))
}

/// The main window, made from the config when there is none: at start, unless the app started
/// in the tray, and again after it was released (closed to the tray). On the main thread.
fn main_window(handle: &tauri::AppHandle) -> Option<tauri::WebviewWindow> {
    if let Some(window) = handle.get_webview_window("main") {
        return Some(window);
    }
    let config = handle
        .config()
        .app
        .windows
        .iter()
        .find(|w| w.label == "main")?
        .clone();
    let started = std::time::Instant::now();
    let builder = tauri::WebviewWindowBuilder::from_config(handle, &config).map(|b| {
        // The page holds the app's commands (a question's Allow, new agent tokens): it never
        // leaves the app's own pages, whatever a script or a link in it asks, and opens no
        // windows. Addresses the person opens go to the browser (`opener`), never here.
        b.on_navigation(is_the_apps_page).on_new_window(|url, _| {
            tracing::warn!(%url, "the page asked for a new window: refused");
            tauri::webview::NewWindowResponse::Deny
        })
    });
    match builder.and_then(|b| b.build()) {
        Ok(window) => {
            prepare_webview(&window);
            tracing::info!(took = ?started.elapsed(), "window made");
            Some(window)
        }
        Err(e) => {
            tracing::error!("cannot open the window: {e}");
            None
        }
    }
}

/// Whether `url` is one of the app's own pages (served by Tauri from the bundle: the
/// `tauri://localhost` scheme on Linux and macOS, `http(s)://tauri.localhost` elsewhere).
fn is_the_apps_page(url: &tauri::Url) -> bool {
    let ours = match url.scheme() {
        "tauri" => url.host_str() == Some("localhost"),
        "http" | "https" => url.host_str() == Some("tauri.localhost"),
        _ => false,
    };
    if !ours {
        tracing::warn!(%url, "the page tried to leave the app: refused");
    }
    ours && url.port().is_none() && url.username().is_empty() && url.password().is_none()
}

/// Shows, raises and focuses the main window (making it again if it was released): only on
/// the person's own action (a click on the notification or the tray, a second launch), or
/// when the tray it was closed to goes away or a start in the tray finds none.
pub(crate) fn bring_forward(handle: &tauri::AppHandle) {
    // Window calls from another thread wait for the main thread; queue the work there instead
    // so the event forwarder never blocks a runtime worker.
    let main = handle.clone();
    let _ = handle.run_on_main_thread(move || {
        if let Some(window) = main_window(&main) {
            let _ = window.show();
            let _ = window.unminimize();
            let _ = window.set_focus();
        }
    });
}

#[cfg(test)]
mod navigation_tests {
    #[test]
    fn the_page_stays_on_the_apps_own_pages() {
        let page = |u: &str| super::is_the_apps_page(&tauri::Url::parse(u).unwrap());
        assert!(page("tauri://localhost"));
        assert!(page("tauri://localhost/index.html#history"));
        assert!(page("http://tauri.localhost/"));
        for away in [
            "https://example.com/",
            "http://127.0.0.1:47717/mcp/demo",
            "tauri://localhost.evil.example/",
            "http://tauri.localhost.evil.example/",
            "http://tauri.localhost:8080/",
            "http://user@tauri.localhost/",
            "file:///etc/passwd",
            "data:text/html,<p>x</p>",
            "about:blank",
            "javascript:alert(1)",
        ] {
            assert!(!page(away), "{away}");
        }
    }
}

#[cfg(test)]
mod log_filter_tests {
    use tracing_subscriber::layer::SubscriberExt;

    fn logs(rust_log: Option<&str>, target_debug: fn() -> bool) -> bool {
        let subscriber = tracing_subscriber::registry()
            .with(super::log_filter(rust_log))
            .with(tracing_subscriber::filter::filter_fn(
                super::rmcp_within_bounds,
            ));
        tracing::subscriber::with_default(subscriber, target_debug)
    }

    /// Asked for everything, the log still leaves out rmcp's sign-in debug lines (they hold
    /// the authorization code) and its service's debug and trace lines (they hold every
    /// message: a form's answers, a password among them), however narrowly they are asked
    /// for; its info lines and our own debug lines are written as asked.
    #[test]
    fn rmcps_lines_that_hold_secrets_never_reach_the_log() {
        let auth = || tracing::enabled!(target: "rmcp::transport::auth", tracing::Level::DEBUG);
        let auth_warn = || tracing::enabled!(target: "rmcp::transport::auth", tracing::Level::WARN);
        let service = || tracing::enabled!(target: "rmcp::service", tracing::Level::DEBUG);
        let service_info = || tracing::enabled!(target: "rmcp::service", tracing::Level::INFO);
        let ours = || tracing::enabled!(target: "countersign_core::gateway", tracing::Level::DEBUG);
        for asked in [
            Some("trace"),
            Some("rmcp=trace"),
            Some("rmcp::transport::auth=trace"),
            Some("rmcp::transport::auth::manager=trace"),
            Some("rmcp::service=trace"),
        ] {
            assert!(!logs(asked, auth), "{asked:?}");
            assert!(!logs(asked, service), "{asked:?}");
        }
        assert!(logs(Some("trace"), auth_warn));
        assert!(logs(Some("rmcp=info"), service_info));
        assert!(logs(Some("countersign_core=debug"), ours));
        assert!(!logs(None, service_info));
    }
}
