//! Multi round-trip input (2026-07-28): the input requests of an `InputRequiredResult`,
//! answered by the person together. Shared by the app's sessions and the gateway.

use std::collections::BTreeMap;

use rmcp::model::InputRequest;
use serde_json::Value;

use super::handler::Elicitor;
use crate::ask::Withdrawal;

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
) -> Result<BTreeMap<String, Value>, String> {
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
    let answers =
        futures::future::join_all(questions.into_iter().map(|(key, params)| async move {
            let answer = elicitor
                .elicit(params, withdraw, |_| {})
                .await
                .map_err(|e| format!("unsupported input request: {}", e.message));
            (key, answer)
        }))
        .await;
    answers
        .into_iter()
        .map(|(key, answer)| answer.map(|value| (key, value)))
        .collect()
}
