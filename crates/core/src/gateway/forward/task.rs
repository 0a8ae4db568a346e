//! Tasks for agents: a tool the server lists as requiring task execution (2025-11-25), called
//! plainly by an agent, is run as a task to its end on the agent's behalf (`crate::mcp::task` has the
//! requests and their reading, shared with the app's runner).

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolRequestParams, CallToolResult, ServerResult};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

use super::keep_raw;
use super::upstream::Upstream;

/// A tool that must run as a task, run to its end on behalf of an agent that called it
/// plainly: the agent gets the task's result as the call's. (rmcp's server side does not carry
/// an agent's own `task` request through, so every agent is served this way.)
pub(super) async fn run_task(
    up: &Upstream,
    params: CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
    call: u64,
    timeout: std::time::Duration,
) -> Result<CallToolResult, McpError> {
    let answer = |(typed, raw): (ServerResult, Option<Value>)| {
        raw.unwrap_or_else(|| serde_json::to_value(&typed).unwrap_or(Value::Null))
    };
    let request = crate::mcp::task::call_request(&params.name, params.arguments);
    let created = answer(up.send(request, ctx, timeout, Some(call)).await?);
    let not_a_result = |e: serde_json::Error| {
        McpError::internal_error(
            format!(
                "{}: the task's result is not a tool result: {e}",
                up.server.name
            ),
            None,
        )
    };
    let id = match crate::mcp::task::Created::read(created)
        .map_err(|m| McpError::internal_error(format!("{}: {m}", up.server.name), None))?
    {
        crate::mcp::task::Created::Task { id, .. } => id,
        crate::mcp::task::Created::Result(result) => {
            keep_raw(ctx, Some(result.clone()));
            return serde_json::from_value(result).map_err(not_a_result);
        }
    };
    // `tasks/result` waits for the end; the server's questions meanwhile are asked on the
    // desktop as any during this call. An agent that leaves first stops the task.
    let sent = up
        .send(
            crate::mcp::task::about("tasks/result", &id),
            ctx,
            timeout,
            Some(call),
        )
        .await;
    let result = match sent {
        Ok(answer_) => crate::mcp::task::untied(answer(answer_)),
        Err(error) => {
            let peer = up.peer().clone();
            tokio::spawn(async move {
                let _ = peer
                    .send_request(crate::mcp::task::about("tasks/cancel", &id))
                    .await;
            });
            return Err(error);
        }
    };
    keep_raw(ctx, Some(result.clone()));
    serde_json::from_value(result).map_err(not_a_result)
}
