//! The IPC commands the UI invokes. Each is a call into the core's `App`; errors cross as
//! `{kind, message, ...}` (`AppError`), never bare strings.

use serde_json::Value;
use tauri::State;

use countersign_core::agents::{
    AgentConfigs, ClientKind, ImportPreview, ImportResult, RewritePreview, RewriteResult,
    UndoResult,
};
use countersign_core::app::{ConfigInfo, History, ServerView, ToolRun, ToolView};
use countersign_core::ask::audit::Verification;
use countersign_core::gateway::preview::PreviewResult;
use countersign_core::gateway::{AgentView, CreatedAgent, GatewayInfo};
use countersign_core::settings::Settings;
use countersign_core::{Answer, App, AppError, Ask, AskId, Outcome};

#[tauri::command]
pub fn pending_asks(app: State<'_, App>) -> Vec<Ask> {
    app.pending()
}

#[tauri::command]
pub fn answer_ask(
    handle: tauri::AppHandle,
    app: State<'_, App>,
    id: AskId,
    answer: Answer,
) -> Result<Outcome, AppError> {
    let answered = app.answer(id, answer)?;
    if let Some(url) = &answered.open {
        crate::opener::open(&handle, url);
    }
    Ok(answered.outcome)
}

/// A waiting tool call made once more with `dryRun: true`; answers nothing.
#[tauri::command]
pub async fn preview_call(app: State<'_, App>, id: AskId) -> Result<PreviewResult, AppError> {
    app.preview_call(id).await
}

#[tauri::command]
pub fn list_servers(app: State<'_, App>) -> Vec<ServerView> {
    app.servers()
}

#[tauri::command]
pub async fn list_tools(app: State<'_, App>, server: String) -> Result<Vec<ToolView>, AppError> {
    app.tools(&server).await
}

/// Runs until the person finished signing in in the browser, or why not.
#[tauri::command]
pub async fn sign_in(app: State<'_, App>, server: String) -> Result<(), AppError> {
    app.sign_in(&server).await
}

#[tauri::command]
pub async fn sign_out(
    app: State<'_, App>,
    server: String,
) -> Result<countersign_core::mcp::oauth::SignedOut, AppError> {
    app.sign_out(&server).await
}

#[tauri::command]
pub fn server_stderr(app: State<'_, App>, server: String) -> Vec<String> {
    app.stderr(&server)
}

#[tauri::command]
pub async fn run_tool(
    app: State<'_, App>,
    server: String,
    tool: String,
    arguments: Value,
    run_id: String,
) -> Result<ToolRun, AppError> {
    app.run_tool(&run_id, &server, &tool, arguments).await
}

/// Cancels a run in flight: the server is told, and its open question withdrawn.
/// Whether a run reached the app; if not, it never will (see `App::run_arrived`).
#[tauri::command]
pub fn run_arrived(app: State<'_, App>, run_id: String) -> bool {
    app.run_arrived(&run_id)
}

#[tauri::command]
pub fn cancel_run(app: State<'_, App>, run_id: String) -> bool {
    app.cancel_run(&run_id)
}

#[tauri::command]
pub fn history(app: State<'_, App>) -> Result<History, AppError> {
    app.history()
}

/// Checks the audit log's hash chain. `async`: it reads the whole log, off the main thread.
#[tauri::command(async)]
pub fn verify_audit(app: State<'_, App>) -> Result<Verification, AppError> {
    app.verify_audit()
}

#[tauri::command]
pub fn config_info(app: State<'_, App>) -> ConfigInfo {
    app.config_info()
}

/// Mutes or unmutes a server's desktop notifications (its questions still open a dialog).
/// `async`: it writes a file, which must not hold up the main thread.
#[tauri::command(async)]
pub fn set_muted(app: State<'_, App>, server: String, muted: bool) -> Result<(), AppError> {
    app.set_muted(&server, muted).map(|_| ())
}

/// What this desktop offers: whether closing the window keeps the app in the tray, and
/// whether it starts at login.
#[derive(Debug, Clone, serde::Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct DesktopInfo {
    /// A tray icon is shown (a tray host is running): closing the window hides it.
    pub tray: bool,
    pub start_at_login: bool,
}

#[tauri::command(async)]
pub fn desktop_info(handle: tauri::AppHandle, desktop: State<'_, crate::Desktop>) -> DesktopInfo {
    use tauri_plugin_autostart::ManagerExt;
    DesktopInfo {
        tray: desktop.tray.load(std::sync::atomic::Ordering::SeqCst),
        start_at_login: handle.autolaunch().is_enabled().unwrap_or(false),
    }
}

/// Turns start at login on or off (the OS's autostart entry is the setting itself).
#[tauri::command(async)]
pub fn set_start_at_login(handle: tauri::AppHandle, on: bool) -> Result<(), AppError> {
    use tauri_plugin_autostart::ManagerExt;
    let autolaunch = handle.autolaunch();
    let result = if on {
        autolaunch.enable()
    } else {
        autolaunch.disable()
    };
    result.map_err(|e| AppError::Settings {
        message: format!("cannot change start at login: {e}"),
    })
}

/// The Connect agents page: where the gateway listens and what to paste into each agent.
#[tauri::command(async)]
pub fn gateway_info(app: State<'_, App>) -> Result<GatewayInfo, AppError> {
    app.gateway_info()
}

/// Makes an agent with its own token; the reply is the only time the token is shown.
/// `async`: it writes a file.
#[tauri::command(async)]
pub fn create_agent(app: State<'_, App>, name: String) -> Result<CreatedAgent, AppError> {
    app.create_agent(&name, &crate::launch::bridge_command())
}

#[tauri::command(async)]
pub fn list_agents(app: State<'_, App>) -> Result<Vec<AgentView>, AppError> {
    app.agents()
}

/// Revokes an agent's token (its next request is refused); returns the agents left.
#[tauri::command(async)]
pub fn revoke_agent(app: State<'_, App>, id: String) -> Result<Vec<AgentView>, AppError> {
    app.revoke_agent(&id)
}

/// Pauses (every agent request refused) or resumes the gateway.
#[tauri::command(async)]
pub fn set_gateway_paused(app: State<'_, App>, paused: bool) -> Result<GatewayInfo, AppError> {
    app.set_gateway_paused(paused)?;
    app.gateway_info()
}

/// The person's settings, including the remembered tool-call decisions (expired ones gone).
#[tauri::command]
pub fn get_settings(app: State<'_, App>) -> Settings {
    app.settings()
}

/// Revokes one remembered decision; returns the settings as saved.
#[tauri::command(async)]
pub fn revoke_decision(app: State<'_, App>, id: u64) -> Result<Settings, AppError> {
    app.revoke_decision(id)
}

/// Forgets the remembered decisions this version cannot read; returns the settings as saved.
#[tauri::command(async)]
pub fn forget_unread_decisions(app: State<'_, App>) -> Result<Settings, AppError> {
    app.forget_unread_decisions()
}

/// The agents' config files Countersign knows and the rewrites that can be undone.
#[tauri::command(async)]
pub fn agent_configs(app: State<'_, App>) -> Result<AgentConfigs, AppError> {
    app.agent_configs()
}

/// Runs an agent host's own check of its MCP servers and returns what it printed.
#[tauri::command]
pub async fn check_agent_host(
    app: State<'_, App>,
    client: ClientKind,
) -> Result<countersign_core::agents::HostCheck, AppError> {
    app.check_agent_host(client).await
}

/// What importing an agent's servers would do; writes nothing.
#[tauri::command(async)]
pub fn preview_import(app: State<'_, App>, client: ClientKind) -> Result<ImportPreview, AppError> {
    app.preview_import(client)
}

/// Imports the chosen servers of the preview `plan` into Countersign's config (backup first).
#[tauri::command(async)]
pub fn import_servers(
    app: State<'_, App>,
    plan: u64,
    names: Vec<String>,
) -> Result<ImportResult, AppError> {
    app.import_servers(plan, &names)
}

/// The agent's config as it would be with its servers routed through the gateway; writes
/// nothing.
#[tauri::command(async)]
pub fn preview_rewrite(
    app: State<'_, App>,
    client: ClientKind,
) -> Result<RewritePreview, AppError> {
    app.preview_rewrite(client, &crate::launch::bridge_command())
}

/// Writes the previewed rewrite `plan` (backup first, recorded for the undo).
#[tauri::command(async)]
pub fn rewrite_agent_config(app: State<'_, App>, plan: u64) -> Result<RewriteResult, AppError> {
    app.rewrite_agent_config(plan)
}

/// Restores an agent's config from a rewrite's backup; `force` when it changed since.
#[tauri::command(async)]
pub fn undo_rewrite(app: State<'_, App>, id: String, force: bool) -> Result<UndoResult, AppError> {
    app.undo_rewrite(&id, force)
}
