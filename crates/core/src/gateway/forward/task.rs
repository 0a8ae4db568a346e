//! Tasks for agents (2025-11-25). An agent that uses tasks itself gets them passed through:
//! its task-augmented call passes the gate like any call and goes upstream with its `task`,
//! and its `tasks/*` requests go to its own upstream session; both reach the gateway on the
//! lane (`gateway::lane`), since rmcp's server side models only the 2026 form of tasks. The
//! progress of a call that created a task goes on reaching the agent, under its token, until
//! the task is seen to end (`Upstream::follow_task`). A tool the server lists as requiring
//! task execution, called plainly by an agent, is run as a task to its end on the agent's
//! behalf (`crate::mcp::task` has the requests and their reading, shared with the app's
//! runner).

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, CustomRequest,
    ServerResult,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use super::gate::Refusal;
use super::upstream::Upstream;
use super::{Forwarder, Leaving, ProgressTo, agent_cancelled, keep_raw};

/// The requests about tasks an agent may send, passed to its upstream session as sent.
pub(crate) const METHODS: &[&str] = &["tasks/get", "tasks/result", "tasks/cancel", "tasks/list"];

/// What of a server's 2025-11-25 `tasks` capability agents are offered: task-augmented tool
/// calls, and listing and cancelling tasks, which the gateway passes through. Nothing when the
/// server takes no task-augmented tool calls (tasks the server would put to the client are
/// not offered: the gateway's upstream session declares none).
pub(crate) fn offered(tasks: &Value) -> Option<Value> {
    let call = tasks
        .pointer("/requests/tools/call")
        .filter(|c| c.is_object())?;
    let mut offered = json!({"requests": {"tools": {"call": call}}});
    for key in ["list", "cancel"] {
        if let Some(value) = tasks.get(key).filter(|v| v.is_object()) {
            offered[key] = value.clone();
        }
    }
    Some(offered)
}

/// The agent's `task` as 2025-11-25 has it: how long the server keeps the task (`ttl`, in
/// milliseconds), and nothing else. Nothing the person did not see goes with the call: a
/// vendor's key in `task` could change what the server does with it.
fn task_as_asked(task: &Value) -> Value {
    match task.get("ttl").filter(|ttl| ttl.is_u64()) {
        Some(ttl) => json!({ "ttl": ttl }),
        None => json!({}),
    }
}

/// A result as the server sent it (as rmcp read it, when only rmcp saw it).
fn as_sent((typed, raw): (ServerResult, Option<Box<serde_json::value::RawValue>>)) -> Value {
    raw.as_deref()
        .and_then(crate::mcp::raw::tree)
        .unwrap_or_else(|| serde_json::to_value(&typed).unwrap_or(Value::Null))
}

impl Forwarder {
    /// An agent's task-augmented tool call: through the gate like any call, then sent with the
    /// agent's `task`; the agent gets the server's answer (the task it created) as sent. A
    /// refusal is an error in words: a tool result in place of the task would not be read.
    pub(crate) async fn gate_and_start_task(
        &self,
        request: CallToolRequest,
        task: Value,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Value, McpError> {
        let up = self.upstream(&ctx).await?;
        let (_, gated) = self.gate_call(&up, &request, &ctx).await?;
        let asked = match gated {
            Ok(asked) => asked,
            Err(Refusal::Denied(words)) => return Err(McpError::invalid_request(words, None)),
            Err(Refusal::AgentLeft) => return Err(agent_cancelled()),
            Err(Refusal::Pending { id }) => {
                return Err(McpError::invalid_request(
                    super::gate::pending_words(&id, &request.params.name, &self.server),
                    None,
                ));
            }
        };
        // Exactly what the gate judged, and the agent's `task` as the revision has it.
        let mut params = serde_json::to_value(&request.params)
            .map_err(|e| McpError::internal_error(format!("Countersign: {e}"), None))?;
        params["task"] = task_as_asked(&task);
        crate::gateway::sent::add_unmodeled(&mut params, crate::gateway::sent::Unmodeled::of(&ctx));
        let sent = self
            .pass(
                &up,
                "tools/call",
                Some(params),
                &ctx,
                up.server.request_timeout,
            )
            .await?;
        self.carried_out(asked);
        Ok(sent)
    }

    /// One of [`METHODS`] from an agent that uses tasks itself, sent to the agent's own
    /// upstream session and answered as the server sent it, for the agent's own tasks alone:
    /// one its calls did not create is refused unsent, `tasks/list` lists only its own, and
    /// what goes upstream is the task's id (or the list's cursor), not the agent's params.
    pub(crate) async fn forward_task(
        &self,
        method: &str,
        params: Option<Value>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Value, McpError> {
        let up = self.upstream(&ctx).await?;
        let params = own_task_params(&up, method, params.as_ref())?;
        // What a task did and what became of it is recorded; its status, polled every second
        // or so, is not.
        if matches!(method, "tasks/result" | "tasks/cancel") {
            self.record_forwarded(&ctx, method)?;
        }
        // `tasks/result` waits for the task's end, which may wait for the person.
        let timeout = match method {
            "tasks/result" => up.server.request_timeout + up.server.answer_timeout,
            _ => up.server.request_timeout,
        };
        let mut answer = self.pass(&up, method, Some(params), &ctx, timeout).await?;
        if method == "tasks/list"
            && let Some(tasks) = answer.get_mut("tasks").and_then(Value::as_array_mut)
        {
            tasks.retain(|t| {
                t.get("taskId")
                    .and_then(Value::as_str)
                    .is_some_and(|id| up.is_own_task(id))
            });
        }
        Ok(answer)
    }

    /// Sends `method` upstream as a request of the agent's: the server's questions meanwhile
    /// are asked on the desktop as during a call, and withdrawn as the agent's if it cancels
    /// or goes away.
    async fn pass(
        &self,
        up: &Upstream,
        method: &str,
        params: Option<Value>,
        ctx: &RequestContext<RoleServer>,
        timeout: std::time::Duration,
    ) -> Result<Value, McpError> {
        let call = up.relay.call_started(ProgressTo::lane(ctx));
        let leaving = Leaving::of(ctx);
        let request = ClientRequest::CustomRequest(CustomRequest::new(method.to_owned(), params));
        let sent = up.send(request, ctx, timeout, Some(call)).await;
        up.relay.call_ended(call, leaving.reason());
        sent.map(as_sent)
    }
}

/// The params of the agent's `method` as they go upstream: `tasks/list`'s cursor, or the id of
/// a task the agent's own calls created; refused for any other task, as if there were none.
fn own_task_params(up: &Upstream, method: &str, params: Option<&Value>) -> Result<Value, McpError> {
    if method == "tasks/list" {
        return Ok(match params.and_then(|p| p.get("cursor")) {
            Some(cursor @ Value::String(_)) => json!({"cursor": cursor}),
            _ => json!({}),
        });
    }
    let task = params
        .and_then(|p| p.get("taskId"))
        .and_then(Value::as_str)
        .ok_or_else(|| McpError::invalid_params(format!("{method} needs a taskId"), None))?;
    if !up.is_own_task(task) {
        return Err(McpError::invalid_params(
            format!("{method}: no task of that id was created by this agent on this server"),
            None,
        ));
    }
    Ok(json!({"taskId": task}))
}

/// A tool that must run as a task, run to its end on behalf of an agent that called it
/// plainly: the agent gets the task's result as the call's.
pub(super) async fn run_task(
    up: &Upstream,
    params: CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
    call: u64,
    timeout: std::time::Duration,
) -> Result<CallToolResult, McpError> {
    let mut request = crate::mcp::task::call_request(&params.name, params.arguments);
    // The fields beyond the model the person saw go with the call, as on every other way.
    if let ClientRequest::CustomRequest(custom) = &mut request
        && let Some(call) = custom.params.as_mut()
    {
        crate::gateway::sent::add_unmodeled(call, crate::gateway::sent::Unmodeled::of(ctx));
    }
    let created = as_sent(up.send(request, ctx, timeout, Some(call)).await?);
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
            keep_raw(ctx, serde_json::value::to_raw_value(&result).ok());
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
        Ok(answer) => crate::mcp::task::untied(as_sent(answer)),
        Err(error) => {
            up.relay.task_ended(&id);
            let peer = up.peer().clone();
            tokio::spawn(async move {
                let _ = peer
                    .send_request(crate::mcp::task::about("tasks/cancel", &id))
                    .await;
            });
            return Err(error);
        }
    };
    keep_raw(ctx, serde_json::value::to_raw_value(&result).ok());
    serde_json::from_value(result).map_err(not_a_result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_goes_upstream_with_its_time_to_live_and_nothing_else() {
        assert_eq!(
            task_as_asked(&json!({"ttl": 60000, "x-run-as": "root"})),
            json!({"ttl": 60000})
        );
        assert_eq!(task_as_asked(&json!({"ttl": "forever"})), json!({}));
        assert_eq!(task_as_asked(&json!({"ttl": -1})), json!({}));
        assert_eq!(task_as_asked(&json!({})), json!({}));
    }

    #[test]
    fn agents_are_offered_task_calls_listing_and_cancelling_and_nothing_else() {
        let server = json!({"list": {}, "cancel": {}, "requests": {
            "tools": {"call": {}}, "sampling": {"createMessage": {}}}, "vendor": {}});
        assert_eq!(
            offered(&server),
            Some(json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}))
        );
        assert_eq!(offered(&json!({"list": {}, "cancel": {}})), None);
        assert_eq!(
            offered(&json!({"requests": {"tools": {"call": true}}})),
            None
        );
    }
}
