//! Which call a server's request belongs to, where the transport says: the call whose request
//! carried it on its response stream (see `RawRequests::origin_of`). Shared by the gateway's
//! agent sessions and the app's own.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use rmcp::model::RequestId;

use crate::lock;

/// Calls that ended early remembered for their late requests, per session, at most.
const ENDED_EARLY: usize = 64;

/// The calls in flight by the request each went out as, and the calls that ended early
/// (cancelled), each with `T` (how it ended), for the requests the server sent on their
/// streams before it heard.
pub(crate) struct CallOrigins<T> {
    sent: Mutex<HashMap<RequestId, u64>>,
    ended_early: Mutex<VecDeque<(RequestId, T)>>,
}

impl<T> Default for CallOrigins<T> {
    fn default() -> Self {
        CallOrigins {
            sent: Mutex::default(),
            ended_early: Mutex::default(),
        }
    }
}

impl<T: Clone> CallOrigins<T> {
    /// Call `call` went out as our request `request`.
    pub(crate) fn sent(&self, call: u64, request: &RequestId) {
        lock(&self.sent).insert(request.clone(), call);
    }

    /// The call in flight whose request `origin` names.
    pub(crate) fn call_of(&self, origin: Option<&RequestId>) -> Option<u64> {
        lock(&self.sent).get(origin?).copied()
    }

    /// Call `call` ended; if it ended `early`, that is remembered for its requests.
    pub(crate) fn ended(&self, call: u64, early: Option<T>) {
        let mut requests = Vec::new();
        lock(&self.sent).retain(|request, c| {
            let its = *c == call;
            if its {
                requests.push(request.clone());
            }
            !its
        });
        let Some(early) = early else {
            return;
        };
        let mut ended = lock(&self.ended_early);
        for request in requests {
            if ended.len() >= ENDED_EARLY {
                ended.pop_front();
            }
            ended.push_back((request, early.clone()));
        }
    }

    /// How the call whose request `origin` names ended, if it ended early.
    pub(crate) fn ended_early(&self, origin: Option<&RequestId>) -> Option<T> {
        let origin = origin?;
        lock(&self.ended_early)
            .iter()
            .rev()
            .find(|(request, _)| request == origin)
            .map(|(_, early)| early.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_found_by_its_request_while_in_flight_and_an_early_end_is_remembered_within_bounds()
    {
        let origins = CallOrigins::<&str>::default();
        let request = |n: i64| RequestId::Number(n);
        origins.sent(1, &request(10));
        origins.sent(1, &request(11)); // a second round of the same call
        origins.sent(2, &request(20));
        assert_eq!(origins.call_of(Some(&request(11))), Some(1));
        assert_eq!(origins.call_of(Some(&request(20))), Some(2));
        assert_eq!(origins.call_of(None), None);
        origins.ended(1, Some("cancelled"));
        origins.ended(2, None);
        assert_eq!(
            origins.call_of(Some(&request(10))),
            None,
            "no longer in flight"
        );
        assert_eq!(origins.call_of(Some(&request(20))), None);
        assert_eq!(origins.ended_early(Some(&request(10))), Some("cancelled"));
        assert_eq!(origins.ended_early(Some(&request(11))), Some("cancelled"));
        assert_eq!(origins.ended_early(Some(&request(20))), None, "answered");
        for n in 100..(100 + ENDED_EARLY as i64) {
            origins.sent(3, &request(n));
        }
        origins.ended(3, Some("gone"));
        assert_eq!(lock(&origins.ended_early).len(), ENDED_EARLY);
        assert_eq!(
            origins.ended_early(Some(&request(10))),
            None,
            "the oldest went"
        );
    }
}
