//! Refused connections, kept for the Connect page: an agent host told only "Failed to
//! connect" leaves the person guessing, so the gateway remembers the last few requests it
//! refused (which client, when, what was wrong, what to do).

use std::collections::VecDeque;
use std::sync::Mutex;

use axum::http::{HeaderMap, StatusCode, header};
use serde::Serialize;

/// The newest refusals kept; older ones are forgotten (a web page hammering the port cannot
/// make the app hold more).
const KEEP: usize = 20;
/// Client names and paths are untrusted and clipped to this many characters.
const MAX_TEXT: usize = 120;

/// One refused request, as the Connect page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct GatewayRefusal {
    #[ts(type = "number")]
    pub at_ms: u64,
    /// The HTTP status it got (401, 403, 404, 503).
    pub status: u16,
    /// What was wrong and what to do, in words.
    pub reason: String,
    /// The client's own `User-Agent` (untrusted, clipped), when it sent one.
    pub client: Option<String>,
    /// The path it asked for (clipped).
    pub path: String,
}

#[derive(Default)]
pub(crate) struct Refusals {
    kept: Mutex<VecDeque<GatewayRefusal>>,
    logged: Mutex<Logged>,
}

/// A refusal is written to the log at most once in [`LOG_EVERY_MS`], with how many went
/// unwritten before it: a web page can send thousands a second, and each would be a line.
const LOG_EVERY_MS: u64 = 10_000;

#[derive(Default)]
struct Logged {
    last_ms: Option<u64>,
    unwritten: u64,
}

impl Logged {
    /// Whether a refusal at `now_ms` is written, and how many before it were not.
    fn due(&mut self, now_ms: u64) -> Option<u64> {
        if self
            .last_ms
            .is_some_and(|last| now_ms.saturating_sub(last) < LOG_EVERY_MS)
        {
            self.unwritten += 1;
            return None;
        }
        self.last_ms = Some(now_ms);
        Some(std::mem::take(&mut self.unwritten))
    }
}

impl Refusals {
    pub(crate) fn record(&self, status: StatusCode, reason: &str, headers: &HeaderMap, path: &str) {
        let client = headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(clip);
        let refusal = GatewayRefusal {
            at_ms: crate::ask::unix_ms(),
            status: status.as_u16(),
            reason: reason.to_owned(),
            client,
            path: clip(path),
        };
        let due = self
            .logged
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .due(refusal.at_ms);
        if let Some(unwritten) = due {
            tracing::info!(status = refusal.status, reason, client = ?refusal.client, unwritten, "gateway refused a request (and `unwritten` more since the last line)");
        }
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.push_front(refusal);
        kept.truncate(KEEP);
    }

    /// Newest first.
    pub(crate) fn list(&self) -> Vec<GatewayRefusal> {
        self.kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}

fn clip(text: &str) -> String {
    text.chars().take(MAX_TEXT).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_of_refusals_is_one_log_line_in_ten_seconds_with_a_count() {
        let mut logged = Logged::default();
        assert_eq!(logged.due(1_000), Some(0));
        for n in 0..1_000 {
            assert_eq!(logged.due(1_000 + n), None);
        }
        assert_eq!(logged.due(1_000 + LOG_EVERY_MS), Some(1_000));
        assert_eq!(logged.due(1_000 + LOG_EVERY_MS + 1), None);
    }

    #[test]
    fn the_newest_are_kept_clipped() {
        let refusals = Refusals::default();
        let mut headers = HeaderMap::new();
        headers.insert(header::USER_AGENT, "x".repeat(500).parse().unwrap());
        for n in 0..30 {
            refusals.record(
                StatusCode::UNAUTHORIZED,
                &format!("r{n}"),
                &headers,
                "/mcp/demo",
            );
        }
        let list = refusals.list();
        assert_eq!(list.len(), KEEP);
        assert_eq!(list[0].reason, "r29");
        assert_eq!(list[0].client.as_ref().unwrap().len(), MAX_TEXT);
    }
}
