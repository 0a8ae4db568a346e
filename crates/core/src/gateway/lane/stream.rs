//! A call the lane answers on a stream of its own: what goes on that stream before the answer
//! (the call's progress, and the server's requests to the agent that belong to the call, as
//! the Streamable HTTP transport has it), and the agent's answers to those requests, which
//! come back as POSTs of their own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
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

/// Bytes of notifications written on a call's stream and not yet taken by the agent, at most:
/// past it the server's further notifications for the call (its progress, most of all) are
/// dropped, where an agent that stopped reading would have them pile up in the gateway's
/// memory for as long as the server sends them. Requests to the agent are never dropped.
const BACKLOG: usize = 8 * 1024 * 1024;

/// Bytes written for an agent and not yet taken by it, held to a cap by whoever writes: what
/// the gateway keeps for an agent that stopped reading grows no further than the cap (a call's
/// stream here, an agent session's notifications in `forward::relay`).
#[derive(Default)]
pub(crate) struct Backlog(AtomicUsize);

impl Backlog {
    /// Counts `bytes` in if the backlog stays within `cap`; false, counting nothing, if not.
    pub(crate) fn admit(&self, bytes: usize, cap: usize) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|total| *total <= cap)
            })
            .is_ok()
    }

    /// Counts `bytes` in whatever the backlog (for what is never dropped).
    fn add(&self, bytes: usize) {
        self.0.fetch_add(bytes, Ordering::AcqRel);
    }

    /// `bytes` were taken by the agent, or could not be written after all.
    pub(crate) fn taken(&self, bytes: usize) {
        self.0.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Where one call's stream is written, and how its requests' answers come back.
#[derive(Clone)]
pub(crate) struct LaneStream {
    events: mpsc::UnboundedSender<Bytes>,
    /// Written and not yet taken ([`LaneEvents`]).
    backlog: Arc<Backlog>,
    asked: Arc<Asked>,
}

/// What is written on a call's stream, as the agent's answer takes it.
pub(crate) struct LaneEvents {
    rx: mpsc::UnboundedReceiver<Bytes>,
    backlog: Arc<Backlog>,
}

impl LaneEvents {
    pub(crate) async fn recv(&mut self) -> Option<Bytes> {
        let event = self.rx.recv().await?;
        self.backlog.taken(event.len());
        Some(event)
    }

    pub(crate) fn try_recv(&mut self) -> Option<Bytes> {
        let event = self.rx.try_recv().ok()?;
        self.backlog.taken(event.len());
        Some(event)
    }
}

impl LaneStream {
    pub(crate) fn new(asked: Arc<Asked>) -> (Self, LaneEvents) {
        let (events, rx) = mpsc::unbounded_channel();
        let backlog = Arc::new(Backlog::default());
        let taken = LaneEvents {
            rx,
            backlog: backlog.clone(),
        };
        let stream = LaneStream {
            events,
            backlog,
            asked,
        };
        (stream, taken)
    }

    /// Writes `event` on the stream, counted in the backlog; false once the stream has ended.
    fn send(&self, event: Bytes) -> bool {
        self.backlog.add(event.len());
        self.write(event)
    }

    /// Writes an event already counted in the backlog.
    fn write(&self, event: Bytes) -> bool {
        let len = event.len();
        let written = self.events.send(event).is_ok();
        if !written {
            self.backlog.taken(len);
        }
        written
    }

    /// Writes a notification, unless it would take the agent's untaken bytes past [`BACKLOG`].
    fn send_notification(&self, event: Bytes) {
        if !self.backlog.admit(event.len(), BACKLOG) {
            tracing::warn!(
                bytes = event.len(),
                "gateway: a notification dropped: the agent is not reading its call's stream"
            );
            return;
        }
        self.write(event);
    }

    pub(crate) fn notify(&self, notification: &ServerNotification) {
        let message = rmcp::model::ServerJsonRpcMessage::notification(notification.clone());
        if let Some(event) = event(&message) {
            self.send_notification(event);
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
            self.send_notification(event);
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
            .is_some_and(|event| self.send(event));
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
            self.stream.send(event);
        }
    }
}

/// One message as an SSE event (its raw parts, a progress notification's params, as the
/// server wrote them, line breaks and all).
fn event(message: &impl serde::Serialize) -> Option<Bytes> {
    let json = serde_json::to_vec(message).ok()?;
    let mut event = Vec::with_capacity(json.len() + 24);
    event.extend_from_slice(b"event: message\n");
    crate::gateway::faithful::push_sse_data(&mut event, &json);
    event.push(b'\n');
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

    /// A server's progress for a call whose agent does not read its stream stops piling up at
    /// the backlog; a request to the agent still goes, and what is taken makes room again.
    #[test]
    fn progress_an_agent_does_not_read_piles_up_no_further_than_the_backlog() {
        let (stream, mut events) = LaneStream::new(Arc::default());
        let params = serde_json::value::to_raw_value(
            &json!({"progressToken": 1, "progress": 1, "message": "x".repeat(1 << 20)}),
        )
        .unwrap();
        for _ in 0..32 {
            stream.notify_progress(&params);
        }
        let mut taken = 0;
        while let Some(event) = events.try_recv() {
            taken += event.len();
        }
        assert!(taken <= BACKLOG && taken > BACKLOG - (2 << 20), "{taken}");
        stream.notify_progress(&params);
        assert!(events.try_recv().is_some(), "taken: there is room again");
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
            events.try_recv().is_none(),
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
