//! A call the lane answers on a stream of its own: what goes on that stream before the answer
//! (the call's progress, and the server's requests to the agent that belong to the call, as
//! the Streamable HTTP transport has it), and the agent's answers to those requests, which
//! come back as POSTs of their own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::lock;
use axum::body::Bytes;
use rmcp::ErrorData as McpError;
use rmcp::model::ServerNotification;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

/// The ids of the gateway's own requests to an agent on a lane stream start so; rmcp's session
/// numbers its requests, so the two never meet.
pub(super) const ASKED_PREFIX: &str = "countersign-lane-";

/// An agent's answer to one of the gateway's requests: its `result`, or its `error`.
pub(super) type AgentAnswer = Result<Value, McpError>;

/// The gateway's requests on an agent session's lane streams that wait for the agent's answer.
#[derive(Default)]
pub(crate) struct Asked {
    next: AtomicU64,
    waiting: Mutex<HashMap<String, oneshot::Sender<AgentAnswer>>>,
}

impl Asked {
    /// Whether a request waits for the agent's answer.
    pub(super) fn is_waiting(&self) -> bool {
        !lock(&self.waiting).is_empty()
    }

    /// Hands the agent's answer to the request `id` waiting for it; false when none waits (not
    /// ours, answered already, or given up).
    pub(super) fn answer(&self, id: &str, answer: AgentAnswer) -> bool {
        match lock(&self.waiting).remove(id) {
            Some(waiting) => waiting.send(answer).is_ok(),
            None => false,
        }
    }
}

/// Where one call's stream is written, and how its requests' answers come back.
#[derive(Clone)]
pub(crate) struct LaneStream {
    events: mpsc::UnboundedSender<Bytes>,
    asked: Arc<Asked>,
}

impl LaneStream {
    pub(crate) fn new(asked: Arc<Asked>) -> (Self, mpsc::UnboundedReceiver<Bytes>) {
        let (events, rx) = mpsc::unbounded_channel();
        (LaneStream { events, asked }, rx)
    }

    pub(crate) fn notify(&self, notification: &ServerNotification) {
        let message = rmcp::model::ServerJsonRpcMessage::notification(notification.clone());
        if let Some(event) = event(&message) {
            let _ = self.events.send(event);
        }
    }

    /// A progress notification whose params are as the server sent them (under the agent's
    /// token).
    pub(crate) fn notify_progress(&self, params: &serde_json::value::RawValue) {
        #[derive(serde::Serialize)]
        struct Progress<'a> {
            jsonrpc: &'static str,
            method: &'static str,
            params: &'a serde_json::value::RawValue,
        }
        let message = Progress {
            jsonrpc: "2.0",
            method: "notifications/progress",
            params,
        };
        if let Some(event) = event(&message) {
            let _ = self.events.send(event);
        }
    }

    /// Sends the agent request `method` on this stream and waits for the agent's answer (its
    /// result, or its own error); [`StreamEnded`] when the stream ends first (the call
    /// answered, or the agent gone). Given up (dropped) before the answer, the agent is told the
    /// request is cancelled.
    pub(crate) async fn request(
        &self,
        method: &str,
        params: Value,
    ) -> Result<AgentAnswer, StreamEnded> {
        let id = format!(
            "{ASKED_PREFIX}{}",
            self.asked.next.fetch_add(1, Ordering::Relaxed)
        );
        let (tx, rx) = oneshot::channel();
        lock(&self.asked.waiting).insert(id.clone(), tx);
        let mut waiting = Waiting {
            stream: self,
            id: &id,
            answered: false,
        };
        let sent = event(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .is_some_and(|event| self.events.send(event).is_ok());
        if !sent {
            return Err(StreamEnded);
        }
        let answer = tokio::select! {
            answer = rx => answer.map_err(|_| StreamEnded)?,
            () = self.events.closed() => return Err(StreamEnded),
        };
        waiting.answered = true;
        Ok(answer)
    }
}

/// The call's stream ended before the agent answered a request on it.
#[derive(Debug)]
pub(crate) struct StreamEnded;

impl std::fmt::Display for StreamEnded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the agent's call ended before it answered")
    }
}

/// A request on the stream until it is answered; given up, it is forgotten and withdrawn.
struct Waiting<'a> {
    stream: &'a LaneStream,
    id: &'a str,
    answered: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        lock(&self.stream.asked.waiting).remove(self.id);
        if !self.answered
            && let Some(event) = event(&json!({"jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": self.id, "reason": "the server no longer needs it"}}))
        {
            let _ = self.stream.events.send(event);
        }
    }
}

/// One message as an SSE event.
fn event(message: &impl serde::Serialize) -> Option<Bytes> {
    let mut event = b"event: message\ndata: ".to_vec();
    serde_json::to_writer(&mut event, message).ok()?;
    event.extend_from_slice(b"\n\n");
    Some(Bytes::from(event))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(event: &Bytes) -> Value {
        let text = std::str::from_utf8(event).unwrap();
        let data = text
            .strip_prefix("event: message\ndata: ")
            .and_then(|t| t.strip_suffix("\n\n"))
            .unwrap_or_else(|| panic!("{text}"));
        serde_json::from_str(data).unwrap()
    }

    #[tokio::test]
    async fn a_request_on_the_stream_is_answered_by_its_id_alone_and_withdrawn_when_given_up() {
        let asked = Arc::new(Asked::default());
        let (stream, mut events) = LaneStream::new(asked.clone());
        let asking = tokio::spawn({
            let stream = stream.clone();
            async move {
                stream
                    .request("sampling/createMessage", json!({"x": 1}))
                    .await
            }
        });
        let request = data(&events.recv().await.unwrap());
        assert_eq!(request["method"], "sampling/createMessage");
        assert_eq!(request["params"], json!({"x": 1}));
        let id = request["id"].as_str().unwrap().to_owned();
        assert!(id.starts_with(ASKED_PREFIX), "{id}");
        assert!(
            !asked.answer("countersign-lane-99", Ok(json!({}))),
            "no such request"
        );
        assert!(asked.answer(&id, Ok(json!({"model": "m"}))));
        assert_eq!(
            asking.await.unwrap().unwrap().unwrap(),
            json!({"model": "m"})
        );
        assert!(!asked.answer(&id, Ok(json!({}))), "answered once");
        assert!(
            events.try_recv().is_err(),
            "an answered request is not withdrawn"
        );

        // Given up before the agent answers: forgotten, and the agent told.
        let asking = tokio::spawn({
            let stream = stream.clone();
            async move { stream.request("sampling/createMessage", json!({})).await }
        });
        let id = data(&events.recv().await.unwrap())["id"].clone();
        asking.abort();
        let cancelled = data(&events.recv().await.unwrap());
        assert_eq!(cancelled["method"], "notifications/cancelled");
        assert_eq!(cancelled["params"]["requestId"], id);
        assert!(!asked.answer(id.as_str().unwrap(), Ok(json!({}))));

        // The stream ends (the agent went away): the request ends in an error.
        let asking = tokio::spawn({
            let stream = stream.clone();
            async move { stream.request("sampling/createMessage", json!({})).await }
        });
        let _ = events.recv().await.unwrap();
        drop(events);
        assert!(asking.await.unwrap().is_err());
    }
}
