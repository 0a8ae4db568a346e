//! The desk's shared state: the tickets, and the key that seals MRTR `requestState`.
//!
//! Every connection gets its own [`TicketDesk`](crate::TicketDesk), but they all
//! work on one store, so a deletion made through one session is visible to the
//! others and to in-process tests. The sealing key lives here for the same
//! reason: over Streamable HTTP a 2026-07-28 request is served by a fresh desk
//! each time, so the desk that asks and the desk that reads the answer are
//! different objects and must share the key.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rmcp::model::RequestStateCodec;
use serde::Serialize;

/// One ticket on the desk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ticket {
    pub id: String,
    pub title: String,
}

impl Ticket {
    fn new(id: &str, title: &str) -> Self {
        Self {
            id: id.to_owned(),
            title: title.to_owned(),
        }
    }
}

/// The tickets the desk starts with. `t5` is the spam that `purge_spam` removes.
pub const SEED_TICKETS: [(&str, &str); 5] = [
    ("t1", "Laptop will not boot"),
    ("t2", "Reset my VPN password"),
    ("t3", "Printer on fire"),
    ("t4", "Order more coffee"),
    ("t5", "Buy cheap spam now"),
];

/// Shared, cloneable handle to the tickets. Clones see the same tickets.
#[derive(Clone, Debug)]
pub struct TicketStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    tickets: Mutex<Vec<Ticket>>,
    sealer: RequestStateCodec,
}

impl TicketStore {
    /// A store holding [`SEED_TICKETS`], with a fresh random sealing key.
    pub fn seeded() -> Self {
        Self::with_tickets(
            SEED_TICKETS
                .iter()
                .map(|(id, title)| Ticket::new(id, title))
                .collect(),
        )
    }

    /// A store holding exactly `tickets`, with a fresh random sealing key.
    pub fn with_tickets(tickets: Vec<Ticket>) -> Self {
        Self {
            inner: Arc::new(Inner {
                tickets: Mutex::new(tickets),
                sealer: RequestStateCodec::new_unchecked(random_key()),
            }),
        }
    }

    /// Ids of the remaining tickets, in desk order.
    pub fn ids(&self) -> Vec<String> {
        self.lock().iter().map(|t| t.id.clone()).collect()
    }

    /// The remaining tickets, in desk order.
    pub fn tickets(&self) -> Vec<Ticket> {
        self.lock().clone()
    }

    pub fn contains(&self, id: &str) -> bool {
        self.lock().iter().any(|t| t.id == id)
    }

    pub fn get(&self, id: &str) -> Option<Ticket> {
        self.lock().iter().find(|t| t.id == id).cloned()
    }

    /// Removes the ticket; returns it if it was there.
    pub fn remove(&self, id: &str) -> Option<Ticket> {
        let mut tickets = self.lock();
        let index = tickets.iter().position(|t| t.id == id)?;
        Some(tickets.remove(index))
    }

    /// Removes every ticket whose title contains `needle` (case-insensitive).
    pub fn remove_matching(&self, needle: &str) -> Vec<Ticket> {
        let needle = needle.to_lowercase();
        let mut tickets = self.lock();
        let (gone, kept) = tickets
            .drain(..)
            .partition(|t: &Ticket| t.title.to_lowercase().contains(&needle));
        *tickets = kept;
        gone
    }

    pub(crate) fn sealer(&self) -> &RequestStateCodec {
        &self.inner.sealer
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Ticket>> {
        // A panic while holding the lock cannot leave a Vec half-edited in a way
        // that matters here, so a poisoned lock is still usable.
        self.inner
            .tickets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for TicketStore {
    fn default() -> Self {
        Self::seeded()
    }
}

/// 32 random bytes (two v4 UUIDs: 244 random bits), enough for HMAC-SHA256.
fn random_key() -> Vec<u8> {
    let mut key = Vec::with_capacity(RequestStateCodec::MIN_KEY_LENGTH);
    key.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    key.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_store_has_five_tickets() {
        let store = TicketStore::seeded();
        assert_eq!(store.ids(), ["t1", "t2", "t3", "t4", "t5"]);
        assert_eq!(
            store.get("t3").map(|t| t.title),
            Some("Printer on fire".into())
        );
    }

    #[test]
    fn clones_share_tickets() {
        let store = TicketStore::seeded();
        let other = store.clone();
        assert!(other.remove("t3").is_some());
        assert!(!store.contains("t3"));
        assert!(store.remove("t3").is_none());
    }

    #[test]
    fn remove_matching_is_case_insensitive() {
        let store = TicketStore::seeded();
        let gone = store.remove_matching("SPAM");
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].id, "t5");
        assert_eq!(store.ids(), ["t1", "t2", "t3", "t4"]);
    }
}
