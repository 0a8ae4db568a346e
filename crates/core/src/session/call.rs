//! Calls: a tool call made, its multi round-trip rounds answered (judged from the result as
//! sent), its URL-required rounds put to the person, its progress passed on, and the server
//! told when the caller gives up. A tool that must run as a task is followed in task.rs.

use std::sync::Arc;

use rmcp::Peer;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest};
use rmcp::service::{PeerRequestOptions, RoleClient};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::{Live, SessionError, SessionManager, timeout_error};
use crate::ask::{CancelReason, Withdrawal};
use crate::mcp::rounds::{Halt, Next, Rounds, Sent};
use crate::mcp::tap::Tap;

impl SessionManager {
    /// Calls a tool, answering the server's questions through the broker, whether it asks
    /// with `elicitation/create` during the call or with multi round-trip input requests.
    /// `cancel` aborts the call: open asks are withdrawn as `agent` and the server is told.
    pub async fn call_tool(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, SessionError> {
        self.call_tool_with_progress(server, tool, arguments, cancel, None)
            .await
    }

    /// [`Self::call_tool`], with the server's progress notifications for the call sent to
    /// `progress` as they come.
    pub async fn call_tool_with_progress(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        cancel: CancellationToken,
        progress: Option<crate::mcp::tap::ProgressSink>,
    ) -> Result<CallToolResult, SessionError> {
        let (entry, live) = self.live(server)?;
        // The person's think time is part of a call that asks; the request timeout is not
        // meant to cut it short.
        let timeout = entry.config.request_timeout + entry.config.answer_timeout;
        let call = live.tap.call_started(cancel.clone());
        // A question the server asks during the call belongs to it (see `Tap::app_calls`).
        let _ended = CallEnded {
            tap: live.tap.clone(),
            call,
        };
        if live.raw.requires_task(tool) {
            return self
                .call_as_task(
                    &entry,
                    &live,
                    tool,
                    arguments,
                    &cancel,
                    progress.as_ref(),
                    timeout,
                )
                .await;
        }
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        let withdraw = Withdrawal::new().when(cancel.clone(), CancelReason::Agent);
        let mut rounds = Rounds::new(&live.elicitor, &live.tap, withdraw);
        loop {
            if let Some(answers) = rounds.answers() {
                params.input_responses = Some(answers.responses.clone());
                params.request_state = answers.request_state.clone();
            }
            // Dropping the request future (timeout, cancel) sends the server a cancellation.
            let once = call_once(&live, call, params.clone(), progress.as_ref());
            let sent = tokio::select! {
                r = tokio::time::timeout(timeout, once) => match r {
                    Err(_) => return Err(timeout_error(&entry)),
                    Ok(Err(rmcp::ServiceError::McpError(error))) => {
                        Sent::from_error(error).map_err(|e| {
                            self.request_error(&entry, rmcp::ServiceError::McpError(e))
                        })
                    }
                    Ok(Err(e)) => Err(self.request_error(&entry, e)),
                    Ok(Ok((CallToolResponse::Complete(result), _))) => Ok(Sent::Answered(result)),
                    Ok(Ok((CallToolResponse::InputRequired(required), raw))) => {
                        Ok(Sent::Input(required, raw))
                    }
                    Ok(Ok(_)) => Err(SessionError::Protocol {
                        server: entry.config.name.clone(),
                        message: "the server answered with a task, which Countersign does not poll"
                            .into(),
                    }),
                },
                _ = cancel.cancelled() => return Err(SessionError::Cancelled),
                _ = live.ended.cancelled() => return Err(live.ended_error(&entry)),
            };
            match rounds.after(sent, || Ok(())).await {
                Next::Answered(result) => {
                    self.succeeded(&entry);
                    return Ok(result);
                }
                Next::Again => {}
                Next::Halted(Halt::Failed(e)) => return Err(e),
                Next::Halted(Halt::Withdrawn) => return Err(SessionError::Cancelled),
                Next::Halted(Halt::Refused(message)) => {
                    return Err(SessionError::Protocol {
                        server: entry.config.name.clone(),
                        message,
                    });
                }
            }
        }
    }
}

/// Unregisters an app call from its tap however the call ends.
struct CallEnded {
    tap: Arc<Tap>,
    call: u64,
}

impl Drop for CallEnded {
    fn drop(&mut self) {
        self.tap.call_ended(self.call);
    }
}

/// Tells the server a request was abandoned, unless disarmed first (rmcp's own guard is
/// private to it).
struct Abandoned {
    peer: Peer<RoleClient>,
    id: Option<rmcp::model::RequestId>,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let peer = self.peer.clone();
            tokio::spawn(async move {
                let _ = peer
                    .notify_cancelled(rmcp::model::CancelledNotificationParam::new(
                        Some(id),
                        Some("the call was cancelled".into()),
                    ))
                    .await;
            });
        }
    }
}

/// One `tools/call`, with its raw result when it asks for input. Dropped before the answer
/// (timeout, cancel), the server is told the call is cancelled.
async fn call_once(
    live: &Live,
    call: u64,
    params: CallToolRequestParams,
    progress: Option<&crate::mcp::tap::ProgressSink>,
) -> Result<(CallToolResponse, Option<Value>), rmcp::ServiceError> {
    let handle = live
        .peer
        .send_request_with_option(
            ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await?;
    let id = handle.id.clone();
    live.tap.call_sent(call, &id);
    let token = handle.progress_token.clone();
    if let Some(sink) = progress {
        live.tap.route_progress(token.clone(), sink.clone());
    }
    let mut guard = Abandoned {
        peer: live.peer.clone(),
        id: Some(id.clone()),
    };
    let result = handle.await_response().await;
    guard.id = None;
    live.tap.forget_progress(&token);
    let raw = &live.raw;
    let kept = raw.take_result(&id);
    let response = match result? {
        rmcp::model::ServerResult::CallToolResult(r) => CallToolResponse::Complete(r),
        rmcp::model::ServerResult::InputRequiredResult(r) => CallToolResponse::InputRequired(r),
        rmcp::model::ServerResult::CreateTaskResult(r) => CallToolResponse::Task(r),
        rmcp::model::ServerResult::EmptyResult(_) => {
            CallToolResponse::Complete(CallToolResult::success(vec![]))
        }
        _ => return Err(rmcp::ServiceError::UnexpectedResponse),
    };
    Ok((response, kept))
}
