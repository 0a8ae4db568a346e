//! The rounds of one request that needs the person before the server answers it: a result
//! asking for input (2026-07-28 multi round-trip) or an error asking for addresses to be opened
//! (`URLElicitationRequiredError`, -32042). Each is put to the person on the desktop, and the
//! same request is made again, with the answers when there are any. The app's tool calls and
//! the gateway's (tools, prompts and resources alike) go through here, so the caps, the order
//! of the checks and what the audit log says are the same for every way a request comes in.
//!
//! The caller makes each request itself (its transport, timeout and cancellation are its own)
//! and hands what came back to [`Rounds::after`], which says whether to make it again.

use std::collections::BTreeMap;

use rmcp::model::InputRequiredResult;
use serde_json::Value;

use super::handler::Elicitor;
use super::input::{InputAnswers, answer_input_requests};
use super::tap::Tap;
use super::url_required::{MAX_URL_ROUNDS, required_urls, satisfy};
use crate::ask::Withdrawal;

/// Times one request may be made before Countersign stops answering the server's rounds.
pub(crate) const MAX_ROUNDS: usize = 10;

/// What one making of the request came to.
pub(crate) enum Sent<T> {
    /// The server's answer: no more rounds.
    Answered(T),
    /// Input for the person, with the result as the server sent it (read for the questions'
    /// own words, see `answer_input_requests`).
    Input(InputRequiredResult, Option<Value>),
    /// Addresses the person must open before the same request is made again.
    Urls(Vec<Value>),
}

impl<T> Sent<T> {
    /// A server's error: the addresses it asks for when it is -32042, else the error itself.
    pub(crate) fn from_error(error: rmcp::ErrorData) -> Result<Self, rmcp::ErrorData> {
        match required_urls(&error) {
            Some(urls) => Ok(Sent::Urls(urls)),
            None => Err(error),
        }
    }
}

/// What to do after one making of the request.
pub(crate) enum Next<T, E> {
    Answered(T),
    /// Make the request again, with [`Rounds::answers`].
    Again,
    Halted(Halt<E>),
}

/// Why the request ends without an answer.
pub(crate) enum Halt<E> {
    /// The request's own error, or the caller's reason to stop (`still_wanted`).
    Failed(E),
    /// Withdrawn while the person was asked (the caller's `withdraw` fired).
    Withdrawn,
    /// The server asked what Countersign does not answer, the person said no, or it kept
    /// asking past the caps: in words that name the server, for the person or the agent.
    Refused(String),
}

/// The input answers the request carries when it is made again.
pub(crate) struct Answers {
    pub responses: BTreeMap<String, Value>,
    /// Echoed back exactly as the server sent it.
    pub request_state: Option<String>,
}

/// One request's rounds so far.
pub(crate) struct Rounds<'a> {
    elicitor: &'a Elicitor,
    tap: &'a Tap,
    withdraw: Withdrawal,
    made: usize,
    url_rounds: usize,
    answers: Option<Answers>,
    /// The last round's answers: delivered once the request carrying them is answered.
    delivering: Option<InputAnswers>,
}

impl<'a> Rounds<'a> {
    /// `withdraw` ends every question of these rounds (the request's cancellation, and why).
    pub(crate) fn new(elicitor: &'a Elicitor, tap: &'a Tap, withdraw: Withdrawal) -> Self {
        Rounds {
            elicitor,
            tap,
            withdraw,
            made: 0,
            url_rounds: 0,
            answers: None,
            delivering: None,
        }
    }

    /// The answers to carry in the request made again (the last input round's; `None` before
    /// any). A round of addresses leaves them as they were.
    pub(crate) fn answers(&self) -> Option<&Answers> {
        self.answers.as_ref()
    }

    /// Takes what one making of the request came to. The person is asked what the server
    /// asks; then `still_wanted` says whether the request may go on (the gateway's: the
    /// agent's token still held).
    pub(crate) async fn after<T, E>(
        &mut self,
        sent: Result<Sent<T>, E>,
        still_wanted: impl FnOnce() -> Result<(), E>,
    ) -> Next<T, E> {
        self.made += 1;
        let sent = match sent {
            Ok(sent) => sent,
            Err(e) => return Next::Halted(Halt::Failed(e)),
        };
        // A server that answered the request carrying the answers has them (the log's
        // `Delivered`); one that asks for addresses instead has not said so.
        if !matches!(sent, Sent::Urls(_))
            && let Some(delivered) = self.delivering.take()
        {
            delivered.delivered(self.elicitor);
        }
        let elicitor = self.elicitor;
        let server = &elicitor.asker.server;
        let asked = match sent {
            Sent::Answered(answer) => return Next::Answered(answer),
            // Refused before the person is asked anything the request could not be made with.
            _ if self.made >= MAX_ROUNDS => {
                return Next::Halted(Halt::Refused(format!(
                    "{server} still asked for more after {MAX_ROUNDS} rounds"
                )));
            }
            Sent::Urls(urls) => {
                self.url_rounds += 1;
                if self.url_rounds > MAX_URL_ROUNDS {
                    return Next::Halted(Halt::Refused(format!(
                        "{server} still asks for addresses to be opened after {MAX_URL_ROUNDS} rounds"
                    )));
                }
                satisfy(elicitor, self.tap, urls, &self.withdraw).await
            }
            Sent::Input(required, raw) => {
                let requests = required.input_requests.unwrap_or_default();
                let answered =
                    answer_input_requests(elicitor, requests, raw.as_ref(), &self.withdraw).await;
                answered
                    .map_err(|why| format!("{server}: {why}"))
                    .map(|mut answers| {
                        // The retried request carries them; the asks stay to be delivered.
                        self.answers = Some(Answers {
                            responses: std::mem::take(&mut answers.responses),
                            request_state: required.request_state,
                        });
                        self.delivering = Some(answers);
                    })
            }
        };
        if self.withdraw.fired().is_some() {
            return Next::Halted(Halt::Withdrawn);
        }
        if let Err(e) = still_wanted() {
            return Next::Halted(Halt::Failed(e));
        }
        match asked {
            Ok(()) => Next::Again,
            Err(why) => Next::Halted(Halt::Refused(why)),
        }
    }
}
