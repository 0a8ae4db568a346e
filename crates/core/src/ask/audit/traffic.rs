//! What agents did without the person, written within a budget: an agent holding a token
//! could otherwise call what its rules allow, or list tools, fast enough to rotate the
//! person's questions and answers out of the log (its 64 MiB held about 330,000 `tools/list`
//! records, a minute's work). Each agent's records on each server are written one by one in a
//! burst ([`BURST`]), then one more every [`REFILL_MS`]; the rest are counted by what they were
//! and written together as one `Counted` record at most every [`REFILL_MS`] (and as the app
//! quits). So a flood writes two records every ten seconds, each a few KiB at most, where it
//! wrote one a call.

use serde::{Deserialize, Serialize};

/// Records of one agent on one server written one by one before counting starts.
pub const BURST: u64 = 1_000;
/// After the burst, one more written (and the counts written) every this many ms.
pub const REFILL_MS: u64 = 10_000;
/// Kinds of records counted apart in one `Counted` record; the rest are counted together.
pub const KINDS: usize = 32;
/// A tool's name or a method as written down: an agent chooses it, and the MCP spec's names
/// are 128 characters at most.
pub const WHAT_BYTES: usize = 256;
/// Why the gate decided as it did, as written down: a remembered decision for exact arguments
/// names them, and the agent chose those.
pub const WHY_BYTES: usize = 1024;

/// A token bucket: how many more may be written now.
#[derive(Debug)]
pub(crate) struct Bucket {
    tokens: u64,
    since_ms: u64,
}

impl Bucket {
    pub(crate) fn full(burst: u64, now_ms: u64) -> Self {
        Bucket {
            tokens: burst,
            since_ms: now_ms,
        }
    }

    /// Takes one if there is one, after adding those earned since the last refill.
    pub(crate) fn take(&mut self, now_ms: u64, burst: u64, refill_ms: u64) -> bool {
        // A clock set back would otherwise earn nothing until it came back to where it was.
        self.since_ms = self.since_ms.min(now_ms);
        let earned = now_ms.saturating_sub(self.since_ms) / refill_ms;
        if earned > 0 {
            self.tokens = self.tokens.saturating_add(earned).min(burst);
            self.since_ms = self.since_ms.saturating_add(earned * refill_ms);
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }

    /// Gives one back (what it was taken for turned out not to need it).
    pub(crate) fn give_back(&mut self, burst: u64) {
        self.tokens = (self.tokens + 1).min(burst);
    }
}

/// Records of one kind counted rather than written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Count {
    /// The tool called (a call decided at the gate) or the method forwarded.
    pub what: String,
    /// For calls at the gate: whether they were allowed, and why. Absent for forwarded
    /// requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    pub n: u64,
}

/// One record of what ran (or was refused) without the person, before it is written or counted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kind<'a> {
    pub(crate) what: &'a str,
    pub(crate) allowed: Option<bool>,
    pub(crate) why: Option<&'a str>,
}

impl Kind<'_> {
    fn is(&self, count: &Count) -> bool {
        count.allowed == self.allowed
            && count.why.as_deref() == self.why.map(|why| clipped(why, WHY_BYTES)).as_deref()
            && count.what == clipped(self.what, WHAT_BYTES)
    }
}

/// `text` as it is written down: whole up to `max` bytes, else its start, length and digest.
pub(crate) fn clipped(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    super::kept_text(text, max)
}

/// What one agent did on one server past its budget, since `since_ms`.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Counting {
    pub(super) since_ms: u64,
    /// The name the agent gave with its first record counted (it may give others).
    pub(super) agent: Option<String>,
    pub(super) counts: Vec<Count>,
    /// Records of more kinds than [`KINDS`], counted together.
    pub(super) others: u64,
}

impl Counting {
    fn add(&mut self, kind: &Kind) {
        if let Some(count) = self.counts.iter_mut().find(|c| kind.is(c)) {
            count.n += 1;
        } else if self.counts.len() < KINDS {
            self.counts.push(Count {
                what: clipped(kind.what, WHAT_BYTES).into_owned(),
                allowed: kind.allowed,
                why: kind.why.map(|why| clipped(why, WHY_BYTES).into_owned()),
                n: 1,
            });
        } else {
            self.others += 1;
        }
    }

    /// Adds what `other` counted (counts that could not be written, counted again).
    pub(super) fn merge(&mut self, other: Counting) {
        self.since_ms = self.since_ms.min(other.since_ms);
        if self.agent.is_none() {
            self.agent = other.agent;
        }
        self.others += other.others;
        for count in other.counts {
            if let Some(mine) = self
                .counts
                .iter_mut()
                .find(|c| c.what == count.what && c.allowed == count.allowed && c.why == count.why)
            {
                mine.n += count.n;
            } else if self.counts.len() < KINDS {
                self.counts.push(count);
            } else {
                self.others += count.n;
            }
        }
    }
}

/// One agent's budget on one server.
#[derive(Debug)]
pub(super) struct Budget {
    bucket: Bucket,
    pub(super) counting: Option<Counting>,
}

/// What to do with one record.
#[derive(Debug, PartialEq)]
pub(super) enum Verdict {
    /// Write it.
    Write,
    /// It was counted.
    Counted,
}

impl Budget {
    pub(super) fn new(now_ms: u64) -> Self {
        Budget {
            bucket: Bucket::full(BURST, now_ms),
            counting: None,
        }
    }

    /// What was counted, when it is due to be written (it began [`REFILL_MS`] ago or more).
    pub(super) fn due(&mut self, now_ms: u64) -> Option<Counting> {
        // Also when the clock was set back since counting began: never held until it returns.
        self.counting
            .take_if(|c| now_ms < c.since_ms || now_ms - c.since_ms >= REFILL_MS)
    }

    /// Writes `kind` if the budget has room (or it `may_count` not), else counts it.
    pub(super) fn judge(
        &mut self,
        kind: &Kind,
        agent: Option<&str>,
        now_ms: u64,
        may_count: bool,
    ) -> Verdict {
        if self.bucket.take(now_ms, BURST, REFILL_MS) || !may_count {
            return Verdict::Write;
        }
        self.counting
            .get_or_insert_with(|| Counting {
                since_ms: now_ms,
                agent: agent.map(str::to_owned),
                ..Counting::default()
            })
            .add(kind);
        Verdict::Counted
    }

    /// Puts back what could not be written, to be written with what is counted next.
    pub(super) fn put_back(&mut self, counting: Counting) {
        match &mut self.counting {
            Some(mine) => mine.merge(counting),
            None => self.counting = Some(counting),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call<'a>(what: &'a str) -> Kind<'a> {
        Kind {
            what,
            allowed: Some(true),
            why: Some("rule"),
        }
    }

    #[test]
    fn a_burst_is_written_then_one_a_refill_and_the_rest_counted_by_kind() {
        let t = 5_000_000;
        let mut budget = Budget::new(t);
        for _ in 0..BURST {
            assert_eq!(
                budget.judge(&call("read"), Some("a"), t, true),
                Verdict::Write
            );
        }
        for _ in 0..3 {
            assert_eq!(
                budget.judge(&call("read"), Some("a"), t, true),
                Verdict::Counted
            );
        }
        let listed = Kind {
            what: "tools/list",
            allowed: None,
            why: None,
        };
        assert_eq!(
            budget.judge(&listed, Some("b"), t + 1, true),
            Verdict::Counted
        );
        assert_eq!(budget.due(t + REFILL_MS - 1), None);
        let due = budget.due(t + REFILL_MS).unwrap();
        assert_eq!(due.agent.as_deref(), Some("a"));
        assert_eq!(
            due.counts
                .iter()
                .map(|c| (&c.what[..], c.n))
                .collect::<Vec<_>>(),
            [("read", 3), ("tools/list", 1)]
        );
        assert_eq!(budget.due(t + REFILL_MS), None, "written once");
        // One more written per refill, not a burst again.
        let later = t + REFILL_MS;
        assert_eq!(
            budget.judge(&call("read"), None, later, true),
            Verdict::Write
        );
        assert_eq!(
            budget.judge(&call("read"), None, later, true),
            Verdict::Counted
        );
    }

    /// A clock set back neither holds counts in memory until it returns nor stops the budget
    /// filling again.
    #[test]
    fn a_clock_set_back_holds_nothing_back() {
        let t = 10 * REFILL_MS;
        let mut budget = Budget::new(t);
        for _ in 0..=BURST {
            budget.judge(&call("x"), None, t, true);
        }
        let back = t - 5 * REFILL_MS;
        assert!(
            budget.due(back).is_some(),
            "written, not held until the clock returns"
        );
        assert_eq!(budget.judge(&call("x"), None, back, true), Verdict::Counted);
        assert_eq!(
            budget.judge(&call("x"), None, back + REFILL_MS, true),
            Verdict::Write,
            "the budget fills again from the new time"
        );
    }

    #[test]
    fn many_kinds_are_counted_together_past_a_number_and_names_are_clipped() {
        let t = 1;
        let mut budget = Budget::new(t);
        for _ in 0..BURST {
            budget.judge(&call("x"), None, t, true);
        }
        let names: Vec<String> = (0..KINDS + 10).map(|i| format!("tool-{i}")).collect();
        for name in &names {
            budget.judge(&call(name), None, t, true);
        }
        let long = "é".repeat(100_000);
        budget.judge(&call(&long), None, t, true);
        let due = budget.due(t + REFILL_MS).unwrap();
        assert_eq!(due.counts.len(), KINDS);
        assert_eq!(due.others, 11);
        let clipped = clipped(&long, WHAT_BYTES);
        assert!(clipped.len() < WHAT_BYTES + 128, "{}", clipped.len());
        assert!(clipped.contains("(cut: 200000 bytes, SHA-256 "));
        // Put back after a failed write, and counted again with what came since.
        budget.judge(&call("tool-0"), None, t + REFILL_MS, true);
        budget.judge(&call("tool-0"), None, t + REFILL_MS, true);
        budget.put_back(due);
        let again = budget.due(t + 2 * REFILL_MS).unwrap();
        let tool_0 = again.counts.iter().find(|c| c.what == "tool-0").unwrap();
        assert_eq!(
            tool_0.n, 2,
            "one of the two was written: a token had come back"
        );
        assert_eq!(again.others, 11);
        assert_eq!(again.since_ms, t);
    }
}
