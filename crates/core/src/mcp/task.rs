//! Tasks (2025-11-25), as both callers use them: the app's runner (`session/task.rs`) and the
//! gateway on behalf of an agent (`gateway/forward.rs`). A tool the server lists with
//! `execution.taskSupport: "required"` is called with `task`; the server answers with a task,
//! whose result `tasks/result` brings once it ends.
//!
//! rmcp 3.11 models tasks only in their 2026 form (SEP-2663), so these requests go out as JSON
//! and their results are read as sent (`RawRequests` keeps results about tasks, and learns
//! which tools need them from `tools/list`).

use std::time::Duration;

use rmcp::model::{ClientRequest, CustomRequest};
use serde_json::{Map, Value, json};

/// How long a task is asked to be kept after it ends (`task.ttl`).
pub const TASK_TTL_MS: u64 = 10 * 60 * 1000;
/// Bounds on the server's suggested `pollInterval`, and the interval when it suggests none.
const MIN_POLL: Duration = Duration::from_millis(250);
const MAX_POLL: Duration = Duration::from_secs(5);
const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// The `_meta` key a task's messages carry.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// `tools/call` for `tool`, as a task.
pub fn call_request(tool: &str, arguments: Option<Map<String, Value>>) -> ClientRequest {
    request(
        "tools/call",
        json!({
            "name": tool,
            "arguments": arguments.unwrap_or_default(),
            "task": {"ttl": TASK_TTL_MS},
        }),
    )
}

/// `method` (`tasks/get`, `tasks/result`, `tasks/cancel`) about task `id`.
pub fn about(method: &str, id: &str) -> ClientRequest {
    request(method, json!({"taskId": id}))
}

fn request(method: &str, params: Value) -> ClientRequest {
    ClientRequest::CustomRequest(CustomRequest::new(method, Some(params)))
}

/// What a request sent upstream is to a task's life (its progress is routed as long as the
/// task lives).
#[derive(Debug, PartialEq)]
pub enum Step {
    /// A task-augmented `tools/call`: its answer may be a task.
    Creates,
    /// `tasks/get` about this task: the task ended if its answer says so.
    Follows(String),
    /// `tasks/result` or `tasks/cancel` about this task: once answered, the task has ended.
    Ends(String),
}

impl Step {
    pub fn of(request: &ClientRequest) -> Option<Step> {
        let ClientRequest::CustomRequest(request) = request else {
            return None;
        };
        let params = request.params.as_ref()?;
        let task = || {
            params
                .get("taskId")
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        match request.method.as_str() {
            "tools/call" if params.get("task").is_some() => Some(Step::Creates),
            "tasks/get" => task().map(Step::Follows),
            "tasks/result" | "tasks/cancel" => task().map(Step::Ends),
            _ => None,
        }
    }
}

/// Whether a task, as `tasks/get` answers it, has ended.
pub fn has_ended(task: &Value) -> bool {
    matches!(
        task.get("status").and_then(Value::as_str),
        Some("completed" | "failed" | "cancelled")
    )
}

/// What a task call was answered with.
pub enum Created {
    /// A task: its id, and how often to ask for its status.
    Task { id: String, poll: Duration },
    /// The result at once (a server may run it without a task after all).
    Result(Value),
}

impl Created {
    pub fn read(answer: Value) -> Result<Created, String> {
        let Some(task) = answer.get("task").filter(|t| t.is_object()) else {
            return Ok(Created::Result(answer));
        };
        let id = task
            .get("taskId")
            .and_then(Value::as_str)
            .ok_or("the server created a task without a taskId")?
            .to_owned();
        let poll = task
            .get("pollInterval")
            .and_then(Value::as_u64)
            .map_or(DEFAULT_POLL, Duration::from_millis)
            .clamp(MIN_POLL, MAX_POLL);
        Ok(Created::Task { id, poll })
    }

    /// The task as created (status, message), for showing.
    pub fn task(answer: &Value) -> Option<&Value> {
        answer.get("task")
    }
}

/// A task's result as a plain tool result: without the mark that ties it to the task (for a
/// caller that never asked for one).
pub fn untied(mut result: Value) -> Value {
    if let Some(meta) = result.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.remove(RELATED_TASK);
        if meta.is_empty()
            && let Some(object) = result.as_object_mut()
        {
            object.remove("_meta");
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_task_is_read_with_its_poll_interval_bounded() {
        let Created::Task { id, poll } = Created::read(
            json!({"task": {"taskId": "t-1", "status": "working", "pollInterval": 10}}),
        )
        .unwrap() else {
            panic!("a task");
        };
        assert_eq!((id.as_str(), poll), ("t-1", MIN_POLL));
        assert!(matches!(
            Created::read(json!({"content": []})).unwrap(),
            Created::Result(_)
        ));
        assert!(Created::read(json!({"task": {"status": "working"}})).is_err());
    }

    #[test]
    fn a_request_is_read_for_what_it_does_to_a_task() {
        assert_eq!(Step::of(&call_request("t", None)), Some(Step::Creates));
        assert_eq!(
            Step::of(&about("tasks/get", "t-1")),
            Some(Step::Follows("t-1".into()))
        );
        for ending in ["tasks/result", "tasks/cancel"] {
            assert_eq!(
                Step::of(&about(ending, "t-1")),
                Some(Step::Ends("t-1".into()))
            );
        }
        assert_eq!(Step::of(&request("tools/call", json!({"name": "t"}))), None);
        assert_eq!(Step::of(&request("tasks/get", json!({}))), None);
        assert!(has_ended(&json!({"status": "cancelled"})));
        assert!(!has_ended(&json!({"status": "input_required"})));
    }

    #[test]
    fn a_results_task_mark_is_taken_off() {
        let result = json!({"content": [], "_meta": {RELATED_TASK: {"taskId": "t-1"}}});
        assert_eq!(untied(result), json!({"content": []}));
        let kept = json!({"content": [], "_meta": {RELATED_TASK: {"taskId": "t"}, "x": 1}});
        assert_eq!(untied(kept), json!({"content": [], "_meta": {"x": 1}}));
    }
}
