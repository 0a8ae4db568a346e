//! The desktop shell: builds the core in `setup`, hands it to Tauri, forwards core events to
//! the webview and brings the window forward when a question arrives. It decides nothing;
//! every command is a call into `countersign_core::App`.

mod commands;
mod launch;
mod opener;

use tauri::{Emitter, Manager, RunEvent};

use countersign_core::{App, AskEvent};

/// Event names the UI listens to.
const ASK_EVENT: &str = "ask-event";
const SESSION_EVENT: &str = "session-event";

pub fn run() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "countersign=info,countersign_core=info,rmcp=warn".into()),
        )
        .init();
    let options = launch::Options::from_args(std::env::args().skip(1));

    let app = tauri::Builder::default()
        .setup(move |tauri_app| {
            let core = tauri::async_runtime::block_on(launch::start_core(&options))?;
            forward_events(tauri_app.handle().clone(), &core);
            exit_on_signals(tauri_app.handle().clone());
            tauri_app.manage(core);
            Ok(())
        })
        .invoke_handler(tauri::generate_handler![
            commands::pending_asks,
            commands::answer_ask,
            commands::list_servers,
            commands::list_tools,
            commands::server_stderr,
            commands::run_tool,
            commands::history,
            commands::config_info,
        ])
        .build(tauri::generate_context!("../tauri.conf.json"));
    let app = match app {
        Ok(app) => app,
        Err(e) => {
            eprintln!("countersign: cannot start: {e}");
            std::process::exit(1);
        }
    };
    app.run(|handle, event| {
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

/// Drains the core's event channels into webview events. A new question brings the window
/// forward: the ask dialog lives in the main window (one webview, so a reload redraws every
/// open ask from backend state, and the person never hunts for a second window).
fn forward_events(handle: tauri::AppHandle, core: &App) {
    let mut asks = core.broker().subscribe();
    let ask_handle = handle.clone();
    tauri::async_runtime::spawn(async move {
        loop {
            match asks.recv().await {
                Ok(event) => {
                    if matches!(event, AskEvent::Added { .. }) {
                        bring_forward(&ask_handle);
                    }
                    let _ = ask_handle.emit(ASK_EVENT, &event);
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
    let mut sessions = core.sessions().subscribe();
    tauri::async_runtime::spawn(async move {
        loop {
            match sessions.recv().await {
                Ok(event) => {
                    let _ = handle.emit(SESSION_EVENT, &event);
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
    });
}

/// SIGTERM (logout, `kill`) and SIGINT (Ctrl-C in a terminal) quit like the person quitting,
/// so open questions are answered `cancel` and servers stopped, instead of the process just
/// vanishing.
fn exit_on_signals(handle: tauri::AppHandle) {
    #[cfg(unix)]
    tauri::async_runtime::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::warn!(
                "cannot listen for SIGTERM/SIGINT; they will end the app without cleanup"
            );
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        tracing::info!("signal received; quitting");
        handle.exit(0);
    });
}

fn bring_forward(handle: &tauri::AppHandle) {
    // Window calls from another thread wait for the main thread; queue the work there instead
    // so the event forwarder never blocks a runtime worker.
    let main = handle.clone();
    let _ = handle.run_on_main_thread(move || {
        if let Some(window) = main.get_webview_window("main") {
            let _ = window.show();
            let _ = window.unminimize();
            let _ = window.set_focus();
        }
    });
}
