//! A request of the gateway's posted to a Streamable HTTP server in rmcp's session
//! (`mcp::direct::HttpWay`), and its response read to the answer: progress to the agent,
//! the server's other messages to rmcp's session, a broken-off stream picked up again, and a
//! session the server ended or a token it refused sent rmcp's way (but for want of a scope,
//! which only the person can grant).

use super::*;

/// What a request we posted came to.
enum Got {
    Answer(Answer),
    Failed(rmcp::ServiceError),
    /// The server no longer knows rmcp's session, or refused the sign-in's token (expired,
    /// revoked): nothing was done, and rmcp's way (which opens a new session, refreshes the
    /// token or asks the person) is the one to take.
    RmcpsWay,
}

/// Times a response stream of ours is picked up again after it broke off before its answer.
const MAX_RESUMES: u32 = 3;
/// The longest wait a server may ask for before a stream is picked up again.
const MAX_RETRY_WAIT_MS: u64 = 5_000;

/// A failed POST of ours, as rmcp's session reports its own.
fn transport_error(
    e: rmcp::transport::streamable_http_client::StreamableHttpError<reqwest::Error>,
) -> rmcp::ServiceError {
    rmcp::ServiceError::TransportSend(rmcp::transport::DynamicTransportError::new::<
        rmcp::transport::StreamableHttpClientTransport<crate::mcp::raw::TapHttpClient>,
        RoleClient,
    >(e))
}

impl Upstream {
    /// The request posted in rmcp's HTTP session by us (`mcp::direct::HttpWay`); its answer
    /// is read off the response as sent. Should the server have ended the session, it goes
    /// rmcp's way instead, which opens a new one.
    pub(super) async fn send_posted(
        &self,
        request: ClientRequest,
        timeout: Duration,
        call: Option<u64>,
        progress_to: Option<(ProgressTo, ProgressToken)>,
    ) -> Result<(rmcp::model::RequestId, ProgressToken, Awaited<'_>), rmcp::ServiceError> {
        let is_call = matches!(request, ClientRequest::CallToolRequest(_));
        // A 2026-07-28 server (no handshake) reads SEP-2243's headers: the tool's annotations
        // are those of the listing the gate judged the call by (listed again should the
        // server have changed its tools since).
        // A call carrying fields beyond rmcp's model, or made a task for the agent, is a custom
        // request, and reads the same headers.
        let called = match &request {
            ClientRequest::CallToolRequest(call) => Some(call.params.name.as_ref()),
            ClientRequest::CustomRequest(custom) if custom.method == "tools/call" => custom
                .params
                .as_ref()
                .and_then(|params| params.get("name"))
                .and_then(serde_json::Value::as_str),
            _ => None,
        };
        let tool = match called {
            Some(name) if self.lifecycle.is_some() => Some(self.tool_facts(name).await),
            _ => None,
        };
        let (mut waiting, token, body) = self.as_ours(request)?;
        let per_request = match self.lifecycle {
            Some(_) => crate::mcp::standard_headers::of_request(
                &body,
                tool.as_ref().map(|facts| &facts.param_headers),
            ),
            None => Vec::new(),
        };
        let id = waiting.id.clone();
        let body = bytes::Bytes::from(body);
        let peer = self.peer().clone();
        let awaited = Box::pin(async move {
            let posted =
                tokio::time::timeout(timeout, self.post(body.clone(), per_request, &mut waiting));
            match posted.await {
                Ok(Got::Answer(answer)) => self.read_ours(answer, is_call),
                Ok(Got::Failed(e)) => Err(e),
                Ok(Got::RmcpsWay) => {
                    drop(waiting);
                    let request = match serde_json::from_slice(&body) {
                        Ok(rmcp::model::ClientJsonRpcMessage::Request(request)) => request.request,
                        _ => return Err(rmcp::ServiceError::UnexpectedResponse),
                    };
                    let (id, token, theirs) = self.send_through_rmcp(request, timeout).await?;
                    if let Some(call) = call {
                        self.relay.call_sent(call, &id);
                    }
                    self.relay.route_progress(&token, progress_to);
                    let answer = theirs.await;
                    self.relay.forget_progress(&token);
                    answer
                }
                Err(_) => {
                    tell_cancelled(&peer, &waiting.id, "request timeout", timeout);
                    Err(rmcp::ServiceError::Timeout { timeout })
                }
            }
        });
        Ok((id, token, awaited))
    }

    async fn post(
        &self,
        body: bytes::Bytes,
        per_request: Vec<(http::HeaderName, http::HeaderValue)>,
        waiting: &mut Waiting<'_>,
    ) -> Got {
        use crate::mcp::direct::Claim;
        use crate::mcp::http_post::Posted;
        use rmcp::model::ServerJsonRpcMessage;
        use rmcp::transport::streamable_http_client::{
            StreamableHttpError, StreamableHttpPostResponse,
        };
        let raw = &self.raw;
        let posted = match raw.direct.http.post(raw, body, per_request).await {
            Ok(posted) => posted,
            Err(StreamableHttpError::SessionExpired) => {
                raw.direct.http.close();
                return Got::RmcpsWay;
            }
            // The way stays open: once rmcp's way has a new token, the sign-in holds it for ours.
            Err(StreamableHttpError::AuthRequired(_)) => return Got::RmcpsWay,
            // Short of a scope, no refresh helps (rmcp's way would post the same token again to
            // the same refusal): only the person can grant more, and the error asks them.
            Err(e @ StreamableHttpError::InsufficientScope(_)) => {
                return Got::Failed(transport_error(e));
            }
            Err(e) => return Got::Failed(transport_error(e)),
        };
        match posted {
            Posted::Json(body, _) => match raw.direct.claim(&body) {
                Claim::Ours(_, answer) => Got::Answer(answer),
                Claim::Not | Claim::Progress => Got::Failed(rmcp::ServiceError::UnexpectedResponse),
            },
            Posted::Answered(StreamableHttpPostResponse::Json(
                ServerJsonRpcMessage::Error(error),
                _,
            )) => Got::Failed(rmcp::ServiceError::McpError(error.error)),
            Posted::Answered(_) => Got::Failed(rmcp::ServiceError::UnexpectedResponse),
            // Taken without an answer: it comes on rmcp's stream, where it is claimed.
            Posted::Accepted => self.answered_elsewhere(waiting).await,
            Posted::Sse(events, _) => self.read_events(events, waiting).await,
        }
    }

    async fn answered_elsewhere(&self, waiting: &mut Waiting<'_>) -> Got {
        tokio::select! {
            answer = &mut waiting.answer => match answer {
                Ok(answer) => Got::Answer(answer),
                Err(_) => Got::Failed(rmcp::ServiceError::TransportClosed),
            },
            _ = self.closed.cancelled() => Got::Failed(rmcp::ServiceError::TransportClosed),
        }
    }

    /// The response stream of a request of ours, to its answer. Progress goes to the agent
    /// from here, before the answer; the server's requests and other notifications are taken
    /// here too, tied to this request ([`Upstream::took`]).
    async fn read_events(
        &self,
        mut events: crate::mcp::http_post::SseEvents,
        waiting: &mut Waiting<'_>,
    ) -> Got {
        use crate::mcp::direct::Claim;
        use futures::StreamExt;
        let raw = &self.raw;
        let mut last_event_id = None;
        let mut retry = None;
        let mut resumed = 0;
        loop {
            loop {
                // The answer may also come on one of rmcp's streams, where it is claimed.
                let next = tokio::select! {
                    biased;
                    event = events.next() => event,
                    answer = &mut waiting.answer => {
                        crate::mcp::http_post::read_to_end(events);
                        return match answer {
                            Ok(answer) => Got::Answer(answer),
                            Err(_) => Got::Failed(rmcp::ServiceError::TransportClosed),
                        };
                    }
                    _ = self.closed.cancelled() => {
                        return Got::Failed(rmcp::ServiceError::TransportClosed);
                    }
                };
                let Some(Ok(mut event)) = next else { break };
                // The ids are this stream's: rmcp's stream has its own to resume from.
                if let Some(id) = event.id.take() {
                    last_event_id = Some(id);
                }
                retry = event.retry.take().or(retry);
                // A priming event (SEP-1699: an id and no message, which rmcp's servers start
                // every stream with) has nothing for anyone; rmcp skips it too.
                let Some(data) = event.data.as_deref().filter(|d| !d.trim().is_empty()) else {
                    continue;
                };
                if let Claim::Ours(_, answer) = raw.direct.claim(data.as_bytes()) {
                    crate::mcp::http_post::read_to_end(events);
                    return Got::Answer(answer);
                }
                // Progress goes to the agent as the server sent it (but for the token).
                if data.contains("notifications/progress")
                    && self.relay.progress_sent(data.as_bytes())
                {
                    continue;
                }
                self.took(data.as_bytes(), &waiting.id);
            }
            // Broken off before the answer: picked up where it was, as rmcp would, a few times.
            let Some(from) = last_event_id.clone().filter(|_| resumed < MAX_RESUMES) else {
                return Got::Failed(rmcp::ServiceError::TransportClosed);
            };
            resumed += 1;
            let wait = retry.unwrap_or(0).min(MAX_RETRY_WAIT_MS);
            tokio::time::sleep(Duration::from_millis(wait)).await;
            match raw.direct.http.resume(from).await {
                Ok(more) => events = more,
                Err(e) => return Got::Failed(transport_error(e)),
            }
        }
    }

    /// One of the server's messages on the response stream of our request `origin`, neither
    /// its answer nor progress. A request of the server's (a question: elicitation, sampling,
    /// roots; or a ping) belongs to ours and is answered here, as rmcp's session answers those
    /// on its own requests' streams; a notification goes where the tap sends rmcp's (the
    /// agent, or a withdrawal to the question it withdraws). Anything else has no one to go to
    /// on a stream of ours and is dropped, as rmcp drops what it cannot read.
    fn took(&self, data: &[u8], origin: &rmcp::model::RequestId) {
        use rmcp::model::{JsonRpcMessage, ServerJsonRpcMessage};
        let raw = &self.raw;
        // Its params as sent are kept for whoever answers it, and whose call it is.
        raw.observe(data);
        raw.note_origin(data, origin);
        match serde_json::from_slice::<ServerJsonRpcMessage>(data) {
            Ok(JsonRpcMessage::Request(request)) => raw.direct.ask(request.id, request.request),
            Ok(JsonRpcMessage::Notification(notification)) => {
                self.tap.notified(&notification.notification)
            }
            Ok(_) => {
                tracing::debug!(server = %self.server.name, "a stray answer on a response stream of ours was dropped")
            }
            Err(e) => {
                tracing::debug!(server = %self.server.name, error = %e, "an unreadable message on a response stream of ours was dropped")
            }
        }
    }
}
