//! The IPC commands the UI invokes. Each is a call into the core's `App`; errors cross as
//! `{kind, message, ...}` (`AppError`), never bare strings.

use serde_json::Value;
use tauri::State;

use countersign_core::app::{ConfigInfo, History, ServerView, ToolRun, ToolView};
use countersign_core::{Answer, App, AppError, Ask, AskId, Outcome};

#[tauri::command]
pub fn pending_asks(app: State<'_, App>) -> Vec<Ask> {
    app.pending()
}

#[tauri::command]
pub fn answer_ask(app: State<'_, App>, id: AskId, answer: Answer) -> Result<Outcome, AppError> {
    if let Answer::Accept { content: None } = &answer {
        // Consent to a URL question: the address opens only after the answer is recorded.
        let (outcome, url) = app.consent_to_url(id)?;
        if let Some(url) = url {
            crate::opener::open(&url);
        }
        return Ok(outcome);
    }
    app.answer(id, answer)
}

#[tauri::command]
pub fn list_servers(app: State<'_, App>) -> Vec<ServerView> {
    app.servers()
}

#[tauri::command]
pub async fn list_tools(app: State<'_, App>, server: String) -> Result<Vec<ToolView>, AppError> {
    app.tools(&server).await
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

#[tauri::command]
pub fn history(app: State<'_, App>) -> Result<History, AppError> {
    app.history()
}

#[tauri::command]
pub fn config_info(app: State<'_, App>) -> ConfigInfo {
    app.config_info()
}
