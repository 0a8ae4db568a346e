//! Where an answer can be cut short by a crash, for the fault matrix to cut it there.
//!
//! In debug builds, `COUNTERSIGN_KILL_AT=<step>` makes the process kill itself with SIGKILL
//! the first time an answer reaches that step, so a test can show what a crash at each step
//! leaves in the audit log and at the server. Release builds compile every point to nothing:
//! no environment variable can stop a shipped app.

/// The steps of an answer, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The person has answered; nothing is recorded yet.
    BeforeRecord,
    /// The outcome is on disk; nothing has gone to the server.
    AfterRecord,
    /// The transport has taken the answer; its delivery is not recorded yet.
    AfterSend,
    /// The delivery is recorded too.
    AfterDelivered,
}

impl Step {
    pub fn name(self) -> &'static str {
        match self {
            Step::BeforeRecord => "before-record",
            Step::AfterRecord => "after-record",
            Step::AfterSend => "after-send",
            Step::AfterDelivered => "after-delivered",
        }
    }
}

/// Kills the process here if `COUNTERSIGN_KILL_AT` names `step` (debug builds only).
#[inline]
pub fn reached(step: Step) {
    #[cfg(debug_assertions)]
    {
        static WANTED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        let wanted = WANTED.get_or_init(|| std::env::var("COUNTERSIGN_KILL_AT").ok());
        if wanted.as_deref() == Some(step.name()) {
            eprintln!(
                "countersign: killed at {} (COUNTERSIGN_KILL_AT)",
                step.name()
            );
            // SAFETY: kill has no memory effects; this process ends here, as a crash would.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
    }
    #[cfg(not(debug_assertions))]
    let _ = step;
}
