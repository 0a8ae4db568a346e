//! The audit log is the truth: an answer it cannot record does not go out (the server gets
//! `cancel`), shown on a log that is a full device and on a file system that fills up while a
//! question is open; and History reads only the log's newest part.

use std::path::{Path, PathBuf};
use std::process::Command;

use countersign_core::ask::audit::{self, AuditLog, AuditRecord};
use countersign_core::{
    Answer, AskEvent, AskKind, Asker, Broker, CancelReason, Endpoint, NewAsk, Outcome,
};
use serde_json::json;

fn confirm_ask() -> NewAsk {
    let schema = json!({"type": "object", "properties": {
        "confirm": {"type": "boolean"},
        "note": {"type": "string"},
    }, "required": ["confirm"]});
    NewAsk {
        asker: Asker {
            server: "desk".into(),
            endpoint: Endpoint::Stdio {
                command: "desk".into(),
            },
            agent: None,
            declared: None,
            agent_id: None,
        },
        kind: AskKind::Form {
            message: "Delete everything?".into(),
            schema: countersign_core::ask::schema::parse_form_schema(&schema).unwrap(),
        },
        request: json!({"message": "Delete everything?", "requestedSchema": schema}),
        timeout: None,
        session: 1,
    }
}

fn yes() -> Answer {
    Answer::Accept {
        content: json!({"confirm": true}).as_object().cloned(),
    }
}

const REFUSED: Outcome = Outcome::Cancelled {
    reason: CancelReason::AuditFailed,
};

#[tokio::test]
async fn a_log_that_cannot_be_written_turns_every_question_into_cancel() {
    // /dev/full accepts the open and fails every write with ENOSPC.
    let broker = Broker::new(AuditLog::open("/dev/full").expect("/dev/full opens"));
    let mut events = broker.subscribe();
    let pending = broker.open(confirm_ask()).expect("opened");
    let id = pending.id();
    // The person sees it come and go, with the reason.
    assert!(matches!(events.recv().await.unwrap(), AskEvent::Added { ask } if ask.id == id));
    assert_eq!(
        events.recv().await.unwrap(),
        AskEvent::Resolved {
            id,
            outcome: REFUSED
        }
    );
    assert!(broker.answer(id, yes()).is_err(), "nothing left to accept");
    let outcome = pending.outcome().await;
    assert_eq!(outcome, REFUSED);
    assert_eq!(outcome.to_elicit_result(), json!({"action": "cancel"}));
}

/// A 64 KiB tmpfs mounted for the test (we run as root in CI), unmounted on drop.
struct TinyFs(PathBuf);

impl TinyFs {
    fn mount(name: &str) -> Option<TinyFs> {
        let dir = std::env::temp_dir().join(format!("cs-tinyfs-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(TinyFs(dir))
    }

    /// Writes zeros until the file system is full.
    fn fill(&self) {
        use std::io::Write;
        let mut filler = std::fs::File::create(self.0.join("filler")).unwrap();
        let block = [0u8; 4096];
        while filler.write_all(&block).is_ok() {}
        while filler.write_all(&block[..1]).is_ok() {}
    }
}

impl Drop for TinyFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn an_answer_on_a_full_file_system_goes_out_as_cancel() {
    let Some(fs) = TinyFs::mount("full") else {
        // Not root: the /dev/full test above covers the refusal; say so rather than pass silently.
        eprintln!("skipped: cannot mount a tmpfs (needs root)");
        return;
    };
    let path = fs.0.join("audit.jsonl");
    let broker = Broker::new(AuditLog::open(&path).unwrap());
    let mut events = broker.subscribe();
    let pending = broker.open(confirm_ask()).expect("opened");
    let id = pending.id();
    assert!(matches!(
        events.recv().await.unwrap(),
        AskEvent::Added { .. }
    ));
    assert_eq!(
        broker.pending().len(),
        1,
        "asked and recorded while there was room"
    );

    fs.fill();
    // The person says yes; the yes cannot be recorded, so what goes out is cancel, and the
    // person is told in the answer's result. (The note makes the record longer than what is
    // left of the log's last page, which tmpfs has already allocated.)
    let long_yes = Answer::Accept {
        content: json!({"confirm": true, "note": "n".repeat(8192)})
            .as_object()
            .cloned(),
    };
    assert_eq!(broker.answer(id, long_yes).unwrap(), REFUSED);
    assert_eq!(
        events.recv().await.unwrap(),
        AskEvent::Resolved {
            id,
            outcome: REFUSED
        }
    );
    assert_eq!(pending.outcome().await, REFUSED);

    // No accept made it into the log, not even a partial line; the chain is intact.
    let (records, skipped) = audit::read_history(&path).unwrap();
    assert_eq!(skipped, 0);
    assert!(
        !records.iter().any(|r| matches!(
            r,
            AuditRecord::Resolved {
                outcome: Outcome::Accepted { .. },
                ..
            }
        )),
        "{records:?}"
    );
    assert!(broker.audit().verify().unwrap().intact());

    // Room again: the next question is asked and answered as usual.
    std::fs::remove_file(fs.0.join("filler")).unwrap();
    let next = broker.open(confirm_ask()).expect("opened");
    let outcome = broker.answer(next.id(), yes()).unwrap();
    assert!(matches!(outcome, Outcome::Accepted { .. }), "{outcome:?}");
    assert!(broker.audit().verify().unwrap().intact());
}

fn write_log(path: &Path, records: usize) -> AuditLog {
    let log = AuditLog::open(path).unwrap();
    let broker = Broker::new(log.clone());
    for _ in 0..records {
        let pending = broker.open(confirm_ask()).expect("opened");
        broker.answer(pending.id(), Answer::Decline).unwrap();
    }
    log
}

#[test]
fn history_reads_only_the_newest_part_of_the_log() {
    let dir = std::env::temp_dir().join(format!("cs-recent-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("audit.jsonl");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let log = runtime.block_on(async { write_log(&path, 200) });
    let size = std::fs::metadata(&path).unwrap().len();

    let all = audit::read_recent(&path, 7, u64::MAX).unwrap();
    assert_eq!(all.records.len(), 400);
    assert!(!all.older);
    assert_eq!(log.recent().unwrap(), all, "small logs are read whole");

    // A budget of a tenth of the file reads about a tenth of the records: the newest.
    let some = audit::read_recent(&path, 7, size / 10).unwrap();
    assert!(some.older);
    assert!(
        (30..=50).contains(&some.records.len()),
        "{}",
        some.records.len()
    );
    assert_eq!(some.records.last(), all.records.last());
    assert_eq!(
        some.records.first(),
        all.records.get(400 - some.records.len())
    );
    let _ = std::fs::remove_dir_all(&dir);
}
