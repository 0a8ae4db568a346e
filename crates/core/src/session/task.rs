//! Tasks (2025-11-25): a tool the server lists with `execution.taskSupport: "required"` is
//! called with `task`, and the server answers with a task instead of a result. Countersign then
//! waits for it with `tasks/result` (the server's questions meanwhile come as requests related
//! to the task, and are asked like any other), shows its status from `tasks/get` as progress,
//! and on Cancel sends `tasks/cancel`.
//!
//! The requests and their reading are shared with the gateway (`crate::mcp::task`).

use std::time::Duration;

use rmcp::model::{
    CallToolResult, ClientRequest, NumberOrString, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::{Entry, Live, SessionError, SessionManager, timeout_error};
use crate::mcp::tap::ProgressSink;
use crate::mcp::task::{Created, about, call_request};

impl SessionManager {
    /// Runs `tool` as a task to its end: the result, or the task's failure in words.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn call_as_task(
        &self,
        entry: &Entry,
        live: &Live,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        cancel: &CancellationToken,
        progress: Option<&ProgressSink>,
        timeout: Duration,
    ) -> Result<CallToolResult, SessionError> {
        let protocol = |message: String| SessionError::Protocol {
            server: entry.config.name.clone(),
            message,
        };
        let created = tokio::select! {
            r = tokio::time::timeout(timeout, request(live, call_request(tool, arguments))) => match r {
                Err(_) => return Err(timeout_error(entry)),
                Ok(r) => r.map_err(|e| self.request_error(entry, e))?,
            },
            _ = cancel.cancelled() => return Err(SessionError::Cancelled),
            _ = live.ended.cancelled() => return Err(live.ended_error(entry)),
        };
        let mut reported = Reported::default();
        if let Some(task) = Created::task(&created) {
            reported.show(task, progress);
        }
        let (id, poll) = match Created::read(created).map_err(protocol)? {
            Created::Task { id, poll } => (id, poll),
            Created::Result(result) => {
                return serde_json::from_value(result).map_err(|e| {
                    protocol(format!(
                        "answered a task call with neither a task nor a result: {e}"
                    ))
                });
            }
        };
        // Cancelled or given up on from here, the server is told to stop the task.
        let mut guard = CancelTask {
            live: Some((live.peer.clone(), live.raw.clone(), id.clone())),
        };
        let status = async {
            loop {
                tokio::time::sleep(poll).await;
                if let Ok(task) = request(live, about("tasks/get", &id)).await {
                    reported.show(&task, progress);
                }
            }
        };
        // `tasks/result` waits for the end; the server's questions meanwhile are requests
        // related to the task, answered like any other during this call.
        let outcome = tokio::select! {
            r = request(live, about("tasks/result", &id)) => r,
            _ = status => unreachable!("polling never ends by itself"),
            _ = cancel.cancelled() => return Err(SessionError::Cancelled),
            _ = live.ended.cancelled() => return Err(live.ended_error(entry)),
            _ = tokio::time::sleep(timeout) => return Err(timeout_error(entry)),
        };
        guard.live = None;
        let result = outcome.map_err(|e| self.request_error(entry, e))?;
        self.succeeded(entry);
        serde_json::from_value(result)
            .map_err(|e| protocol(format!("the task's result is not a tool result: {e}")))
    }
}

/// Sends `request` and returns its result as sent.
async fn request(live: &Live, request: ClientRequest) -> Result<Value, rmcp::ServiceError> {
    let handle = live
        .peer
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await?;
    let id = handle.id.clone();
    let typed = handle.await_response().await?;
    Ok(match live.raw.take_result(&id) {
        Some(raw) => raw,
        // Not about a task as far as the bytes said (a result without its related-task mark):
        // rmcp's reading of it is all there is.
        None => serde_json::to_value(&typed).unwrap_or(Value::Null),
    })
}

/// The status last shown, so each change is reported once.
#[derive(Default)]
struct Reported {
    last: Option<(String, String)>,
    steps: u32,
}

impl Reported {
    fn show(&mut self, task: &Value, progress: Option<&ProgressSink>) {
        let text = |k: &str| task.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let now = (text("status"), text("statusMessage"));
        if self.last.as_ref() == Some(&now) {
            return;
        }
        self.steps += 1;
        let (status, message) = &now;
        let words = match (status.as_str(), message.is_empty()) {
            ("input_required", true) => "waiting for your answer".to_owned(),
            ("input_required", false) => format!("waiting for your answer: {message}"),
            (status, true) => format!("task {status}"),
            (_, false) => message.clone(),
        };
        if let Some(sink) = progress {
            let mut update = ProgressNotificationParam::new(
                ProgressToken(NumberOrString::String("task".into())),
                f64::from(self.steps),
            );
            update.message = Some(words);
            let _ = sink.send(update);
        }
        self.last = Some(now);
    }
}

/// Tells the server to stop the task, unless disarmed first.
struct CancelTask {
    live: Option<(
        rmcp::Peer<rmcp::service::RoleClient>,
        std::sync::Arc<crate::mcp::raw::RawRequests>,
        String,
    )>,
}

impl Drop for CancelTask {
    fn drop(&mut self) {
        if let Some((peer, raw, id)) = self.live.take() {
            tokio::spawn(async move {
                let request = about("tasks/cancel", &id);
                if let Ok(handle) = peer
                    .send_request_with_option(request, PeerRequestOptions::no_options())
                    .await
                {
                    let sent = handle.id.clone();
                    let _ = handle.await_response().await;
                    // Its answer is kept as one about a task; nobody else will take it.
                    raw.take_result(&sent);
                }
            });
        }
    }
}
