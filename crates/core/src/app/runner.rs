//! The person's own runs: a server's tools as the window lists them (with the form their
//! input schema makes, where it fits), a run checked against the schema before anything goes
//! out, made once per run id, cancellable, its progress passed on.

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{App, AppError};

/// Run ids remembered to refuse a repeated run; a run id is a UUID the UI makes per click.
const REMEMBERED_RUNS: usize = 4096;

/// A server's tool, as received (fields rmcp does not model are kept in `raw`).
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct ToolView {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Value,
    pub annotations: Option<Value>,
    /// The input schema as a form, when it fits what the question dialog renders (the
    /// elicitation subset); `None`: the arguments are written as JSON.
    pub form: Option<crate::ask::schema::FormSchema>,
}

/// What a tool run returned.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct ToolRun {
    pub is_error: bool,
    /// The result's `content` array as received.
    pub content: Value,
    pub structured_content: Option<Value>,
}

/// A run's progress, as the server reported it (its numbers and words, untrusted).
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct RunProgress {
    pub run_id: String,
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// A run's progress message is a line for the person to read: a server's megabytes would be
/// held in the event channel (up to its 256 events) and sent to the window whole.
const MAX_PROGRESS_MESSAGE: usize = 4 * 1024;

fn clip_progress_message(mut message: String) -> String {
    if crate::cut_to(&mut message, MAX_PROGRESS_MESSAGE) {
        message.push('…');
    }
    message
}

impl App {
    pub async fn tools(&self, server: &str) -> Result<Vec<ToolView>, AppError> {
        let tools = self.sessions.list_tools(server).await?;
        Ok(tools
            .into_iter()
            .map(|tool| ToolView {
                name: tool.name.to_string(),
                title: tool.title.clone(),
                description: tool.description.as_ref().map(|d| d.to_string()),
                input_schema: Value::Object((*tool.input_schema).clone()),
                form: crate::ask::schema::parse_form_schema(&Value::Object(
                    (*tool.input_schema).clone(),
                ))
                .ok(),
                annotations: tool
                    .annotations
                    .as_ref()
                    .and_then(|a| serde_json::to_value(a).ok()),
            })
            .collect())
    }

    /// Cancels a run in flight (the server is told, and its open question withdrawn);
    /// `false` if it already ended.
    pub fn cancel_run(&self, run_id: &str) -> bool {
        let token = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(run_id)
            .cloned();
        token.map(|t| t.cancel()).is_some()
    }

    /// Whether the run `run_id` reached the app. If it has not, it never will: its id is
    /// taken now, so a command that arrives late is refused, and the window can tell the
    /// person that nothing ran and running again is safe.
    pub fn run_arrived(&self, run_id: &str) -> bool {
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        if runs.iter().any(|r| r == run_id) {
            return true;
        }
        if runs.len() == REMEMBERED_RUNS {
            runs.pop_front();
        }
        runs.push_back(run_id.to_owned());
        false
    }

    /// Progress of the person's runs, for the window.
    pub fn subscribe_progress(&self) -> tokio::sync::broadcast::Receiver<RunProgress> {
        self.progress.subscribe()
    }

    /// Runs a tool for the person. The arguments are checked against the tool's input schema
    /// first; a question the server asks meanwhile arrives as an ask like any other. A `run_id`
    /// seen before is refused: the webview may re-send a command it had in flight when it
    /// reloads, and a tool call must not run twice because of that.
    pub async fn run_tool(
        &self,
        run_id: &str,
        server: &str,
        tool: &str,
        arguments: Value,
    ) -> Result<ToolRun, AppError> {
        tracing::info!(%server, %tool, %run_id, "running a tool for the person");
        {
            let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
            if runs.iter().any(|r| r == run_id) {
                return Err(AppError::Session {
                    message: "this run was already started".into(),
                });
            }
            if runs.len() == REMEMBERED_RUNS {
                runs.pop_front();
            }
            runs.push_back(run_id.to_owned());
        }
        let tools = self.tools(server).await?;
        let Some(found) = tools.iter().find(|t| t.name == tool) else {
            return Err(AppError::Session {
                message: format!("server \"{server}\" has no tool \"{tool}\""),
            });
        };
        let Value::Object(arguments) = arguments else {
            return Err(AppError::InvalidArguments {
                message: "the arguments must be a JSON object".into(),
                errors: vec!["the arguments must be a JSON object".into()],
            });
        };
        check_arguments(&found.input_schema, &Value::Object(arguments.clone()))?;
        let cancel = CancellationToken::new();
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(run_id.to_owned(), cancel.clone());
        let (sink, mut reports) =
            tokio::sync::mpsc::unbounded_channel::<rmcp::model::ProgressNotificationParam>();
        let events = self.progress.clone();
        let id = run_id.to_owned();
        let forward = tokio::spawn(async move {
            while let Some(p) = reports.recv().await {
                let _ = events.send(RunProgress {
                    run_id: id.clone(),
                    progress: p.progress,
                    total: p.total,
                    message: p.message.map(clip_progress_message),
                });
            }
        });
        let result = self
            .sessions
            .call_tool_with_progress(server, tool, Some(arguments), cancel, Some(sink))
            .await;
        forward.abort();
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(run_id);
        tracing::info!(%server, %tool, %run_id, ok = result.is_ok(), "tool run finished");
        let result = result?;
        Ok(ToolRun {
            is_error: result.is_error.unwrap_or(false),
            content: serde_json::to_value(&result.content).unwrap_or(Value::Null),
            structured_content: result.structured_content.clone(),
        })
    }
}

pub(super) fn check_arguments(schema: &Value, arguments: &Value) -> Result<(), AppError> {
    // A tool's own schema may be anything a server wrote; a broken one is reported, not trusted.
    let errors = crate::ask::schema::argument_errors(schema, arguments).map_err(|e| {
        AppError::InvalidArguments {
            message: format!("the tool's input schema is not valid JSON Schema: {e}"),
            errors: vec![],
        }
    })?;
    if errors.is_empty() {
        Ok(())
    } else {
        Err(AppError::InvalidArguments {
            message: "the arguments do not fit the tool's input schema".into(),
            errors,
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_runs_progress_message_is_a_line_not_a_megabyte() {
        assert_eq!(super::clip_progress_message("half way".into()), "half way");
        let clipped = super::clip_progress_message("é".repeat(super::MAX_PROGRESS_MESSAGE));
        assert!(clipped.len() <= super::MAX_PROGRESS_MESSAGE + '…'.len_utf8());
        assert!(clipped.ends_with('…'));
    }
}
