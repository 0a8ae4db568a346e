//! Multi round-trip input (2026-07-28): the input requests of an `InputRequiredResult`,
//! answered by the person together. Shared by the app's sessions and the gateway.

use std::collections::BTreeMap;

use rmcp::model::InputRequest;
use serde_json::Value;

use super::handler::Elicitor;
use crate::ask::{AskId, Withdrawal};

/// One round's answers: what goes into the retried request, and the asks they came from.
pub(crate) struct InputAnswers {
    pub responses: BTreeMap<String, Value>,
    asks: Vec<AskId>,
}

impl InputAnswers {
    /// The retried request carrying these answers was answered, so the server has them:
    /// the log says they were delivered (see `AuditRecord::Delivered`).
    pub fn delivered(&self, elicitor: &Elicitor) {
        for &ask in &self.asks {
            elicitor.delivered(ask);
        }
    }
}

/// Fulfils one round of multi round-trip input requests, together. `raw` is the result as
/// the server sent it: an elicitation is judged from its params there, not from rmcp's typed
/// model (which drops schema keywords such as `pattern`, so a form could accept what the
/// server then rejects). A request Countersign cannot answer (sampling, roots, an unknown
/// kind) refuses the whole round before the person is asked anything. `withdraw` is the
/// originating call's cancellation (and why): rmcp gives MRTR rounds no token of their own.
pub(crate) async fn answer_input_requests(
    elicitor: &Elicitor,
    requests: impl IntoIterator<Item = (String, InputRequest)>,
    raw: Option<&Value>,
    withdraw: &Withdrawal,
) -> Result<InputAnswers, String> {
    let mut questions = Vec::new();
    for (key, request) in requests {
        let params = match request {
            InputRequest::Elicitation(request) => {
                let sent = raw
                    .and_then(|r| r.get("inputRequests"))
                    .and_then(|r| r.get(&key))
                    .filter(|r| {
                        r.get("method").and_then(Value::as_str) == Some("elicitation/create")
                    })
                    .and_then(|r| r.get("params"))
                    .cloned();
                match sent {
                    Some(params) => params,
                    None => serde_json::to_value(&request.params)
                        .map_err(|e| format!("cannot read the input request: {e}"))?,
                }
            }
            // A claim about the person's files that nobody made: refused, not answered empty.
            InputRequest::ListRoots(_) => {
                return Err("the server asked for roots, which Countersign does not offer".into());
            }
            InputRequest::CreateMessage(_) => {
                return Err(
                    "the server asked for sampling, which Countersign does not offer".into(),
                );
            }
            _ => return Err("the server asked for an unknown kind of input".into()),
        };
        questions.push((key, params));
    }
    // Every question is read before any is shown: one that cannot be asked (a `pattern`, say)
    // refuses the round, and an answer the person gave to another would be thrown away with it
    // after they were told it was sent.
    for (_, params) in &questions {
        if let Err(reason) = elicitor.can_ask(params) {
            return Err(format!("unsupported input request: {reason}"));
        }
    }
    let answers =
        futures::future::join_all(questions.into_iter().map(|(key, params)| async move {
            let mut opened = None;
            let answer = elicitor
                .elicit(params, withdraw, |ask| opened = Some(ask))
                .await
                .map_err(|e| format!("unsupported input request: {}", e.message));
            (key, answer, opened)
        }))
        .await;
    let mut asks = Vec::new();
    let mut responses = BTreeMap::new();
    for (key, answer, opened) in answers {
        responses.insert(key, answer?);
        asks.extend(opened);
    }
    Ok(InputAnswers { responses, asks })
}
