//! Previews: while the person decides about a call whose tool takes a boolean `dryRun`, the
//! same call can be made once with `dryRun: true` and its result shown in the dialog (the
//! reference filesystem server's `edit_file` answers with the diff). What comes back is the
//! server's word: a server could ignore `dryRun`, and the dialog says so. Once means once: a
//! press again (or a page reloaded, which may send the command again) gets the first dry run's
//! answer, so a server that ignores `dryRun` runs the call at most once before the person
//! decides.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use rmcp::model::CallToolRequest;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Shared;
use super::forward::Upstream;
use crate::ask::AskId;

/// A preview's text is clipped to this many bytes: it is for reading, not keeping.
const MAX_TEXT: usize = 256 * 1024;

/// What the dry run answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct PreviewResult {
    /// The result's text content, joined (untrusted: shown as text).
    pub text: String,
    /// The server answered with `isError: true`.
    pub is_error: bool,
    /// The text was longer than is kept and was cut.
    pub clipped: bool,
}

/// Why there is no preview.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum PreviewError {
    #[error(
        "this question has no preview (it was answered, withdrawn, or its tool takes no dryRun)"
    )]
    NotOffered,
    #[error("the server's session has ended")]
    Gone,
    #[error("the dry run failed: {message}")]
    Failed { message: String },
}

/// Whether a tool's input schema has a boolean `dryRun` property.
pub(crate) fn takes_dry_run(schema: Option<&Value>) -> bool {
    schema
        .and_then(|s| s.get("properties"))
        .and_then(|p| p.get("dryRun"))
        .and_then(|d| d.get("type"))
        .and_then(Value::as_str)
        == Some("boolean")
}

/// The calls that can be previewed now, by the ask that waits for them.
#[derive(Default)]
pub(crate) struct Previews {
    offered: Mutex<HashMap<AskId, Offer>>,
    /// An ask's event goes out the moment it opens, an instant before its preview is offered:
    /// a request in that instant waits for the offer (see [`OFFER_GRACE`]).
    offers: tokio::sync::Notify,
}

/// One preview on offer: the session to make it in, the call, and its one answer once made.
#[derive(Clone)]
struct Offer {
    upstream: Weak<Upstream>,
    request: CallToolRequest,
    answer: Arc<tokio::sync::OnceCell<Result<PreviewResult, PreviewError>>>,
}

/// How long a preview request waits for its ask's offer.
const OFFER_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// A preview on offer; taken back when dropped. Owned, so it can go with the question
/// wherever that is waited for (a call that became a pending approval, say).
pub(crate) struct Offered {
    shared: Arc<Shared>,
    id: AskId,
}

impl Previews {
    /// Offers a preview of `request` while ask `id` waits.
    pub(crate) fn offer(
        shared: &Arc<Shared>,
        id: AskId,
        upstream: Weak<Upstream>,
        request: CallToolRequest,
    ) -> Offered {
        let previews = &shared.previews;
        previews.lock().insert(
            id,
            Offer {
                upstream,
                request,
                answer: Arc::default(),
            },
        );
        previews.offers.notify_waiters();
        Offered {
            shared: shared.clone(),
            id,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<AskId, Offer>> {
        self.offered.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes the call of ask `id` with `dryRun: true`, the first time; after, and to a
    /// request made while it runs, the answer it got.
    pub(crate) async fn run(&self, id: AskId) -> Result<PreviewResult, PreviewError> {
        let offer = self.offered(id).await?;
        offer
            .answer
            .get_or_init(|| dry_run(offer.upstream.clone(), offer.request.clone()))
            .await
            .clone()
    }
}

/// Makes `request` with `dryRun: true` on `upstream`.
async fn dry_run(
    upstream: Weak<Upstream>,
    mut request: CallToolRequest,
) -> Result<PreviewResult, PreviewError> {
    let upstream = upstream.upgrade().ok_or(PreviewError::Gone)?;
    ask_for_a_dry_run(
        request
            .params
            .arguments
            .get_or_insert_with(Default::default),
    );
    let result = upstream
        .dry_run(request)
        .await
        .map_err(|message| PreviewError::Failed { message })?;
    let mut text: String = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n");
    let clipped = crate::cut_to(&mut text, MAX_TEXT);
    Ok(PreviewResult {
        text,
        is_error: result.is_error == Some(true),
        clipped,
    })
}

impl Previews {
    /// The offer for ask `id`, waiting a moment for one that is about to be made.
    async fn offered(&self, id: AskId) -> Result<Offer, PreviewError> {
        let deadline = tokio::time::Instant::now() + OFFER_GRACE;
        loop {
            // Registered before the look, so an offer made in between is not missed.
            let mut offered = std::pin::pin!(self.offers.notified());
            offered.as_mut().enable();
            if let Some(found) = self.lock().get(&id).cloned() {
                return Ok(found);
            }
            if tokio::time::timeout_at(deadline, offered).await.is_err() {
                return Err(PreviewError::NotOffered);
            }
        }
    }
}

impl Drop for Offered {
    fn drop(&mut self) {
        self.shared.previews.lock().remove(&self.id);
    }
}

/// Sets `dryRun: true` in a call's arguments, and takes out any other spelling of it: a
/// `DryRun: false` the agent put beside it would be read last by a server that reads names
/// without regard to case, and the preview would run the call for real.
fn ask_for_a_dry_run(arguments: &mut serde_json::Map<String, Value>) {
    arguments.retain(|key, _| !crate::ask::approval::same_key_to_a_lax_reader(key, "dryRun"));
    arguments.insert("dryRun".into(), Value::Bool(true));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preview_asks_for_a_dry_run_in_the_one_spelling_a_server_reads() {
        let mut arguments =
            serde_json::json!({"path": "/a", "dryRun": false, "DryRun": false, "DRYRUN": 0})
                .as_object()
                .cloned()
                .unwrap();
        ask_for_a_dry_run(&mut arguments);
        assert_eq!(
            Value::Object(arguments),
            serde_json::json!({"path": "/a", "dryRun": true})
        );
    }
    use serde_json::json;

    #[test]
    fn only_a_boolean_dry_run_offers_a_preview() {
        assert!(takes_dry_run(Some(
            &json!({"type": "object", "properties": {"dryRun": {"type": "boolean", "default": false}}})
        )));
        assert!(!takes_dry_run(Some(
            &json!({"properties": {"dryRun": {"type": "string"}}})
        )));
        assert!(!takes_dry_run(Some(
            &json!({"properties": {"dry_run": {"type": "boolean"}}})
        )));
        assert!(!takes_dry_run(None));
    }
}
