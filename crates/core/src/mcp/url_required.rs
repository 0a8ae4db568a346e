//! A server's `URLElicitationRequiredError` (-32042, 2025-11-25): a call that cannot go on until
//! the person opens one or more addresses (an OAuth consent at a third party, a payment page).
//! Each address becomes a URL question through the same policy and dialog as URL mode; once
//! the person has opened them all, the call is made again when the server reports them
//! complete (`notifications/elicitation/complete`), or when the person says they are done. A
//! decline, a cancel or an address that is never opened ends the call, in words. The app's
//! runner and the gateway (for every agent, whether it declared URL mode or not) both go
//! through here.

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::ask::{CancelReason, Withdrawal};
use crate::mcp::handler::Elicitor;
use crate::mcp::tap::Tap;

/// The error code of `URLElicitationRequiredError`.
pub const URL_ELICITATION_REQUIRED: i32 = -32042;
/// Times one call may come back with -32042 before Countersign stops retrying it.
pub const MAX_URL_ROUNDS: usize = 3;
/// Addresses one error may ask for at most.
const MAX_URLS: usize = 8;

/// The URL questions a -32042 error carries (`data.elicitations`), or `None` for any other
/// error.
pub fn required_urls(error: &rmcp::ErrorData) -> Option<Vec<Value>> {
    if error.code.0 != URL_ELICITATION_REQUIRED {
        return None;
    }
    Some(
        error
            .data
            .as_ref()
            .and_then(|d| d.get("elicitations"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
    )
}

/// Puts each address to the person, then waits until the server reports them complete or the
/// person says they are done. `Err` says, for the person or the agent, why the call ends.
pub async fn satisfy(
    elicitor: &Elicitor,
    tap: &Tap,
    elicitations: Vec<Value>,
    withdraw: &Withdrawal,
) -> Result<(), String> {
    let server = elicitor.asker.server.clone();
    if elicitations.is_empty() {
        return Err(format!(
            "{server} says the call needs an address opened, but names none"
        ));
    }
    if elicitations.len() > MAX_URLS {
        return Err(format!(
            "{server} asks for {} addresses to be opened at once; Countersign opens at most {MAX_URLS}",
            elicitations.len()
        ));
    }
    let mut ids = Vec::new();
    let mut completions = Vec::new();
    let result = async {
        for mut params in elicitations {
            // An address to open, whatever mode the server wrote: a form here would ask the
            // person for answers that go nowhere (only whether they opened it is used).
            if let Some(object) = params.as_object_mut() {
                object.insert("mode".into(), Value::String("url".into()));
            }
            let id = params
                .get("elicitationId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            // Watched before the person can finish, so a quick completion is not missed.
            if !id.is_empty() {
                completions.push(tap.completion(&id));
                ids.push(id);
            }
            let mut opened = None;
            let answer = elicitor
                .elicit(params, withdraw, |ask| opened = Some(ask))
                .await
                .map_err(|e| format!("{server} asked to open an address that cannot be shown: {}", e.message))?;
            // No response goes to the server: the answer takes effect here, in the call made
            // again or ended.
            if let Some(ask) = opened {
                elicitor.delivered(ask);
            }
            match answer.get("action").and_then(Value::as_str) {
                Some("accept") => {}
                Some("decline") => {
                    return Err(format!(
                        "{server} needs an address opened before this call, and it was declined (or is never opened)"
                    ));
                }
                _ => {
                    return Err(format!(
                        "{server} needs an address opened before this call, and the question was cancelled"
                    ));
                }
            }
        }
        if completions.iter().all(CancellationToken::is_cancelled) && !completions.is_empty() {
            return Ok(());
        }
        // Until the server says so, the person can: a question of Countersign's own, taken
        // away as soon as every address is reported complete.
        let all_complete = CancellationToken::new();
        let watcher = {
            let all_complete = all_complete.clone();
            let completions = completions.clone();
            tokio::spawn(async move {
                if completions.is_empty() {
                    return;
                }
                for token in completions {
                    token.cancelled().await;
                }
                all_complete.cancel();
            })
        };
        let mut waiting = withdraw.clone();
        waiting.add(all_complete.clone(), CancelReason::Server);
        let mut opened = None;
        let done = elicitor
            .elicit(
                json!({
                    "mode": "form",
                    "message": format!(
                        "When you have finished in your browser, press Submit and Countersign makes {server}'s call again. (This question goes away by itself if {server} reports it finished.)"
                    ),
                    "requestedSchema": {"type": "object", "properties": {}},
                }),
                &waiting,
                |ask| opened = Some(ask),
            )
            .await;
        if let Some(ask) = opened {
            elicitor.delivered(ask);
        }
        watcher.abort();
        if all_complete.is_cancelled() {
            return Ok(());
        }
        match done.ok().as_ref().and_then(|d| d.get("action")).and_then(Value::as_str) {
            Some("accept") => Ok(()),
            _ => Err(format!(
                "{server} needs an address opened before this call, and it was not finished"
            )),
        }
    }
    .await;
    for id in ids {
        tap.forget_completion(&id);
    }
    result
}
