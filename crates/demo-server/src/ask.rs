//! Asking the person a question, whatever protocol the session speaks.
//!
//! Before 2026-07-28 a server asks by sending `elicitation/create` to the client
//! and waiting for the reply. From 2026-07-28 on (SEP-2322, multi round-trip
//! requests) a server may not send requests at all: it answers the tool call
//! with an `InputRequiredResult` carrying the question, and the client calls the
//! tool again with the answer in `inputResponses`. Tools describe *what* to ask
//! with a [`Question`]; [`ask`] decides *how* from the session's negotiated
//! protocol version and hands back either the answer or the round to return.
//!
//! In MRTR mode the server keeps nothing between the two calls (over HTTP they
//! may even reach different desk objects). What ties the answer to the question
//! is the `requestState`: sealed with HMAC and bound to the tool and its
//! arguments, so an answer is only used if this desk asked that very question,
//! and with a TTL, so an answer that comes back too late is refused just as a
//! late `elicitation/create` reply is.

use std::time::Duration;

use rmcp::{
    RoleServer,
    model::{
        CallToolRequestParams, CancelledNotificationParam, ClientCapabilities, ClientResult,
        ElicitRequest, ElicitRequestParams, ElicitResult, InputRequest, InputRequests,
        InputRequiredResult, ProtocolVersion, RequestStateError, SealOptions, ServerRequest,
    },
    service::{PeerRequestOptions, RequestContext, ServiceError},
};

use crate::store::TicketStore;

/// One elicitation a tool wants answered.
pub(crate) struct Question {
    /// Key of the question in `inputRequests` / `inputResponses` (MRTR only).
    pub key: &'static str,
    pub params: ElicitRequestParams,
    /// How long to wait for the person. Legacy: the request timeout, after which
    /// rmcp sends `notifications/cancelled`. MRTR: the TTL of the sealed state.
    pub timeout: Duration,
    /// What the answer must belong to: the tool name and the arguments that
    /// matter. The sealed state only opens again for the same binding.
    pub binding: String,
}

/// How the question ended.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The client replied (accept, decline or cancel).
    Replied(ElicitResult),
    /// Nobody answered in time; for legacy sessions the request was cancelled.
    TimedOut,
    /// The tool call itself was cancelled while the question was open; the
    /// question was withdrawn with `notifications/cancelled`.
    Withdrawn,
    /// The question could not be asked or the answer could not be used.
    Failed(String),
}

/// Either the answer, or (MRTR) the round the tool must return to get one.
#[derive(Debug)]
pub(crate) enum Round {
    Answered(Answer),
    NeedsInput(InputRequiredResult),
}

/// True when the request belongs to a session on protocol 2026-07-28 or later,
/// where server-to-client requests are forbidden and MRTR is the way to ask.
///
/// `RequestContext::protocol_version` reads the request's own `_meta` first
/// (what discover-lifecycle clients send on every request) and falls back to
/// the version negotiated by `initialize`.
pub(crate) fn uses_mrtr(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28)
}

/// Asks `question` the way the session requires. See the module docs.
pub(crate) async fn ask(
    store: &TicketStore,
    ctx: &RequestContext<RoleServer>,
    call: &CallToolRequestParams,
    question: Question,
) -> Round {
    if let Some(missing) = missing_capability(ctx.client_capabilities().as_ref(), &question.params)
    {
        return Round::Answered(Answer::Failed(missing));
    }
    if uses_mrtr(ctx) {
        mrtr_round(store, call, question)
    } else {
        Round::Answered(ask_with_request(ctx, question).await)
    }
}

/// Sends the question as an `elicitation/create` request without waiting for
/// the answer. Used by the `crash` helper, which dies while the question is open.
pub(crate) async fn send_and_forget(
    ctx: &RequestContext<RoleServer>,
    params: ElicitRequestParams,
) -> Result<(), ServiceError> {
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
    ctx.peer
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .map(drop)
}

/// Builds the `InputRequiredResult` for a question, as the first MRTR round.
pub(crate) fn input_required(store: &TicketStore, question: Question) -> InputRequiredResult {
    let state = store.sealer().seal_with(
        question.key.as_bytes(),
        &SealOptions::new()
            .associated_data(question.binding.as_bytes())
            .ttl(question.timeout),
    );
    let mut requests = InputRequests::new();
    requests.insert(
        question.key.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(question.params)),
    );
    InputRequiredResult::new(Some(requests), Some(state))
}

fn mrtr_round(store: &TicketStore, call: &CallToolRequestParams, question: Question) -> Round {
    // No state means this desk has not asked yet. Answers sent without a state
    // answer a question nobody asked and are ignored: ask properly.
    let Some(state) = call.request_state.as_deref() else {
        return Round::NeedsInput(input_required(store, question));
    };
    match store.sealer().open_with(state, question.binding.as_bytes()) {
        Ok(key) if key == question.key.as_bytes() => {}
        Ok(_) => {
            return Round::Answered(Answer::Failed(
                "the requestState belongs to a different question".into(),
            ));
        }
        Err(RequestStateError::Expired) => return Round::Answered(Answer::TimedOut),
        Err(error) => {
            return Round::Answered(Answer::Failed(format!(
                "the requestState was not issued by this desk for this call ({error})"
            )));
        }
    }
    let Some(response) = call
        .input_responses
        .as_ref()
        .and_then(|responses| responses.get(question.key))
    else {
        return Round::Answered(Answer::Failed(format!(
            "the retry carried no answer for \"{}\"",
            question.key
        )));
    };
    match serde_json::from_value::<ElicitResult>(response.clone()) {
        Ok(result) => Round::Answered(Answer::Replied(result)),
        Err(error) => Round::Answered(Answer::Failed(format!(
            "the answer for \"{}\" is not an elicitation result: {error}",
            question.key
        ))),
    }
}

async fn ask_with_request(ctx: &RequestContext<RoleServer>, question: Question) -> Answer {
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(question.params));
    let options = PeerRequestOptions::with_timeout(question.timeout);
    let handle = match ctx.peer.send_request_with_option(request, options).await {
        Ok(handle) => handle,
        Err(error) => return Answer::Failed(format!("could not send the question: {error}")),
    };
    let (id, peer) = (handle.id.clone(), handle.peer.clone());
    tokio::select! {
        response = handle.await_response() => match response {
            Ok(ClientResult::ElicitResult(result)) => Answer::Replied(result),
            Ok(other) => Answer::Failed(format!("the client replied with something other than an elicitation result: {other:?}")),
            // `await_response` has already sent `notifications/cancelled`, and
            // the pending slot is gone, so a late reply is dropped by rmcp.
            Err(ServiceError::Timeout { .. }) => Answer::TimedOut,
            Err(ServiceError::McpError(error)) => Answer::Failed(format!(
                "the client answered the question with an error ({}: {})",
                error.code.0, error.message
            )),
            Err(error) => Answer::Failed(format!("the question failed: {error}")),
        },
        () = ctx.ct.cancelled() => {
            let cancel = CancelledNotificationParam::new(
                Some(id),
                Some("the tool call that asked this was cancelled".into()),
            );
            if let Err(error) = peer.notify_cancelled(cancel).await {
                tracing::debug!(%error, "could not withdraw the question");
            }
            Answer::Withdrawn
        }
    }
}

/// Refuses to ask in a mode the client did not declare. Unknown capabilities
/// (no `initialize` params and no per-request `_meta`) do not block asking.
fn missing_capability(
    capabilities: Option<&ClientCapabilities>,
    params: &ElicitRequestParams,
) -> Option<String> {
    let capabilities = capabilities?;
    let Some(elicitation) = capabilities.elicitation.as_ref() else {
        return Some("your client does not support elicitation".into());
    };
    // An empty `elicitation: {}` means form mode only (2025-06-18 shape).
    let form = elicitation.form.is_some() || elicitation.url.is_none();
    match params {
        ElicitRequestParams::FormElicitationParams { .. } if !form => {
            Some("your client does not support form elicitation".into())
        }
        ElicitRequestParams::UrlElicitationParams { .. } if elicitation.url.is_none() => {
            Some("your client does not support URL elicitation".into())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ElicitationCapability, FormElicitationCapability, UrlElicitationCapability};

    use super::*;

    fn url_params() -> ElicitRequestParams {
        ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message: "m".into(),
            url: "https://auth.example.com/".into(),
            elicitation_id: "e".into(),
        }
    }

    fn caps(elicitation: Option<ElicitationCapability>) -> ClientCapabilities {
        let mut caps = ClientCapabilities::default();
        caps.elicitation = elicitation;
        caps
    }

    #[test]
    fn url_mode_needs_url_capability() {
        let form_only = caps(Some(
            ElicitationCapability::new().with_form(FormElicitationCapability::default()),
        ));
        assert!(missing_capability(Some(&form_only), &url_params()).is_some());
        let both = caps(Some(
            ElicitationCapability::new()
                .with_form(FormElicitationCapability::default())
                .with_url(UrlElicitationCapability::new()),
        ));
        assert!(missing_capability(Some(&both), &url_params()).is_none());
        assert!(missing_capability(Some(&caps(None)), &url_params()).is_some());
        assert!(missing_capability(None, &url_params()).is_none());
    }
}
