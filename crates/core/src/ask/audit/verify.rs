//! Checking the audit log's chain: every link from the oldest surviving record to the newest,
//! across rotated files, and the first record that was changed, removed or moved.
//!
//! What it proves: an edit, a removal or a swap anywhere before the last record breaks a
//! link. The chain has no key, so someone who rewrites every line after a change can hide it;
//! a running app also checks the last record against the one it wrote (`anchor`), which
//! catches an edited or removed tail.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::AuditError;
use super::chain::{self, GENESIS, Hash, Head, Link};
use super::files;

/// The result of checking the log; `problem` is `None` when every link holds.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// The files read, oldest first.
    pub files: Vec<String>,
    /// Records whose links were checked.
    #[ts(type = "number")]
    pub records: u64,
    /// Records from before the log was chained (an older version wrote them): not covered.
    #[ts(type = "number")]
    pub unchained: u64,
    /// The oldest record follows one in a file that rotation has since dropped.
    pub starts_after_rotation: bool,
    pub problem: Option<ChainBreak>,
}

/// The first place the chain does not hold.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct ChainBreak {
    pub file: String,
    /// 1-based line in `file`.
    #[ts(type = "number")]
    pub line: u64,
    pub kind: BreakKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub enum BreakKind {
    /// The record was edited after it was written.
    Changed,
    /// Records are missing before this one.
    Removed,
    /// The record is not where it was written.
    Reordered,
    /// The line is not a record at all (cut short, or not JSON).
    Unreadable,
}

impl Verification {
    pub fn intact(&self) -> bool {
        self.problem.is_none()
    }
}

impl std::fmt::Display for Verification {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.problem {
            Some(p) => write!(f, "broken: {}:{}: {}", p.file, p.line, p.message),
            None => {
                write!(
                    f,
                    "intact: {} record{} in {} file{}",
                    self.records,
                    if self.records == 1 { "" } else { "s" },
                    self.files.len(),
                    if self.files.len() == 1 { "" } else { "s" }
                )?;
                if self.unchained > 0 {
                    write!(
                        f,
                        "; {} older record{} from before the chain began are not covered",
                        self.unchained,
                        if self.unchained == 1 { "" } else { "s" }
                    )?;
                }
                if self.starts_after_rotation {
                    write!(f, "; older files were rotated away")?;
                }
                Ok(())
            }
        }
    }
}

/// One line as read: where it is, its link, its hash.
struct Entry {
    file: usize,
    line: u64,
    link: Option<Link>,
    /// No newline at its end: cut short.
    torn: bool,
    hash: Hash,
}

/// The records this process wrote, for [`verify`]: the head of the chain before the log is
/// read (its last record must be there as written), and how many it had written once the log
/// was read (`seq`; anything numbered past that was added by someone else). Two readings, since
/// the app may write while it is checked.
pub struct Written<'a> {
    pub before: Head,
    pub after: &'a dyn Fn() -> u64,
}

/// Checks the log at `path` and its rotated files (up to `rotation.keep`). With `written`, the
/// records this process wrote, the last records are checked against them too.
pub fn verify(
    path: &Path,
    rotation: files::Rotation,
    written: Option<Written<'_>>,
) -> Result<Verification, AuditError> {
    let keep = rotation.keep;
    let mut paths = files::existing(path, keep);
    paths.reverse();
    // A gap (`.2` missing while `.3` is there) is a removal too.
    if let Some(gap) = (1..keep)
        .find(|&n| !files::rotated(path, n).exists() && files::rotated(path, n + 1).exists())
    {
        let missing = files::rotated(path, gap).display().to_string();
        return Ok(Verification {
            files: names(&paths),
            records: 0,
            unchained: 0,
            starts_after_rotation: false,
            problem: Some(ChainBreak {
                file: missing.clone(),
                line: 0,
                kind: BreakKind::Removed,
                message: format!("the file {missing} is missing"),
            }),
        });
    }
    let entries = read_entries(&paths)?;
    let written_by_now = written.as_ref().map(|w| (w.after)());
    // The oldest file kept (`.keep`) is there once the log has rotated past its cap, and its
    // first record then follows records rotated away. Empty, with the chain starting in a
    // newer file, it says nothing: empty files put there would pass off records removed from
    // the start as rotated away. Nor do rotated files smaller than rotation leaves them (it
    // moves a file once it is full, less one line): the records kept from some point on, moved
    // into the oldest file with the others left near empty, would pass as rotation.
    let full = |n: usize| {
        std::fs::metadata(files::rotated(path, n)).is_ok_and(|m| m.len() >= rotation.file_bytes / 2)
    };
    let rotated_away = keep > 0
        && files::rotated(path, keep).exists()
        && entries.first().is_some_and(|e| e.file == 0)
        && (1..=keep).all(full);
    let mut result = check(&paths, &entries, rotated_away, written.map(|w| w.before));
    // Records numbered past what this process had written were added by someone else (a
    // `resolved` saying "accepted" for a question the person declined).
    if result.problem.is_none()
        && let Some(by_now) = written_by_now
        && let Some(e) = entries.iter().find(|e| {
            e.link
                .as_ref()
                .and_then(|l| l.seq)
                .is_some_and(|seq| seq >= by_now)
        })
    {
        result.problem = Some(ChainBreak {
            file: paths[e.file].display().to_string(),
            line: e.line,
            kind: BreakKind::Changed,
            message: format!(
                "line {} was added: Countersign has written only {by_now} records",
                e.line
            ),
        });
    }
    Ok(result)
}

fn names(paths: &[PathBuf]) -> Vec<String> {
    paths.iter().map(|p| p.display().to_string()).collect()
}

fn read_entries(paths: &[PathBuf]) -> Result<Vec<Entry>, AuditError> {
    let mut entries = Vec::new();
    for (index, path) in paths.iter().enumerate() {
        let read_error = |source| AuditError::Read {
            path: path.clone(),
            source,
        };
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(read_error(e)),
        };
        let mut reader = BufReader::new(file);
        let mut buf = Vec::new();
        let mut line = 0;
        loop {
            buf.clear();
            if reader.read_until(b'\n', &mut buf).map_err(read_error)? == 0 {
                break;
            }
            line += 1;
            let torn = buf.last() != Some(&b'\n');
            if !torn {
                buf.pop();
            }
            if buf.iter().all(u8::is_ascii_whitespace) && !torn {
                continue;
            }
            entries.push(Entry {
                file: index,
                line,
                link: serde_json::from_slice::<Link>(&buf).ok(),
                torn,
                hash: chain::hash(&buf),
            });
        }
    }
    Ok(entries)
}

fn check(
    paths: &[PathBuf],
    entries: &[Entry],
    rotated_away: bool,
    anchor: Option<Head>,
) -> Verification {
    let mut result = Verification {
        files: names(paths),
        records: 0,
        unchained: 0,
        starts_after_rotation: false,
        problem: None,
    };
    let at = |e: &Entry, kind: BreakKind, message: String| ChainBreak {
        file: paths[e.file].display().to_string(),
        line: e.line,
        kind,
        message,
    };
    let mut previous: Option<&Entry> = None;
    let mut expected: Option<u64> = None;
    for (i, e) in entries.iter().enumerate() {
        let n = e.line;
        let problem = match (&e.link, e.torn) {
            (_, true) => Some(at(
                e,
                BreakKind::Unreadable,
                format!("line {n} is cut short (a crash while it was written, or an edit)"),
            )),
            (None, false) => Some(at(
                e,
                BreakKind::Unreadable,
                format!("line {n} is not a record"),
            )),
            (
                Some(Link {
                    seq: None,
                    prev: None,
                }),
                false,
            ) => {
                if expected.is_some() {
                    Some(at(
                        e,
                        BreakKind::Changed,
                        format!(
                            "line {n} has no link to the record before it (inserted, or its link was removed)"
                        ),
                    ))
                } else {
                    result.unchained += 1;
                    None
                }
            }
            (
                Some(Link {
                    seq: Some(seq),
                    prev: Some(prev),
                }),
                false,
            ) => {
                let seq = *seq;
                match chain::parse_hex(prev) {
                    None => Some(at(
                        e,
                        BreakKind::Changed,
                        format!("line {n} was changed: its link is not a hash"),
                    )),
                    Some(prev) => match expected {
                        None => first_link(e, seq, prev, previous, rotated_away, &mut result)
                            .map(|(entry, kind, message)| at(entry, kind, message)),
                        Some(want) => {
                            let linked = previous.is_some_and(|p| p.hash == prev);
                            if seq == want && linked {
                                None
                            } else if seq == want {
                                let p = previous.unwrap_or(e);
                                Some(at(
                                    p,
                                    BreakKind::Changed,
                                    format!(
                                        "line {} was changed: the record after it was linked to different text",
                                        p.line
                                    ),
                                ))
                            } else if seq > want
                                && entries[i + 1..].iter().any(|later| {
                                    later.link.as_ref().and_then(|l| l.seq) == Some(want)
                                })
                            {
                                Some(at(
                                    e,
                                    BreakKind::Reordered,
                                    format!(
                                        "line {n} holds record {seq}, but record {want} comes first: records were moved"
                                    ),
                                ))
                            } else if seq > want {
                                let gone = if seq - want == 1 {
                                    format!("record {want} was")
                                } else {
                                    format!("records {want} to {} were", seq - 1)
                                };
                                Some(at(
                                    e,
                                    BreakKind::Removed,
                                    format!("{gone} removed before line {n}"),
                                ))
                            } else {
                                Some(at(
                                    e,
                                    BreakKind::Reordered,
                                    format!(
                                        "line {n} holds record {seq}, which belongs before record {want}: records were moved or repeated"
                                    ),
                                ))
                            }
                        }
                    },
                }
            }
            (Some(_), false) => Some(at(
                e,
                BreakKind::Changed,
                format!("line {n} was changed: half of its link is missing"),
            )),
        };
        if problem.is_some() {
            result.problem = problem;
            return result;
        }
        if let Some(Link { seq: Some(seq), .. }) = &e.link {
            expected = Some(seq.saturating_add(1));
            result.records += 1;
        }
        previous = Some(e);
    }
    if let Some(anchor) = anchor.filter(|a| a.hash != GENESIS) {
        let last_seq = anchor.seq.saturating_sub(1);
        match entries
            .iter()
            .find(|e| e.link.as_ref().and_then(|l| l.seq) == Some(last_seq))
        {
            Some(e) if e.hash != anchor.hash => {
                result.problem = Some(at(
                    e,
                    BreakKind::Changed,
                    format!(
                        "line {} was changed: it is not the record Countersign wrote",
                        e.line
                    ),
                ));
            }
            Some(_) => {}
            None if expected.is_some_and(|want| want <= last_seq) => {
                let (file, line) = entries.last().map_or_else(
                    || {
                        (
                            paths
                                .last()
                                .map(|p| p.display().to_string())
                                .unwrap_or_default(),
                            0,
                        )
                    },
                    |e| (paths[e.file].display().to_string(), e.line),
                );
                result.problem = Some(ChainBreak {
                    file,
                    line,
                    kind: BreakKind::Removed,
                    message: format!(
                        "the log ends at record {} but Countersign wrote up to record {last_seq}: the last records were removed",
                        expected.unwrap_or(0).saturating_sub(1)
                    ),
                });
            }
            // Rotated away, or an empty log Countersign never wrote to: nothing to compare.
            None => {}
        }
    }
    result
}

/// The first linked record: it follows the unchained records before it, or starts the chain,
/// or (when rotation dropped the files before it) follows a record no longer kept.
fn first_link<'e>(
    e: &'e Entry,
    seq: u64,
    prev: Hash,
    previous: Option<&'e Entry>,
    rotated_away: bool,
    result: &mut Verification,
) -> Option<(&'e Entry, BreakKind, String)> {
    let n = e.line;
    match previous {
        Some(p) if seq == 0 && p.hash == prev => None,
        Some(p) if seq == 0 => Some((
            p,
            BreakKind::Changed,
            format!(
                "line {} was changed: the record after it was linked to different text",
                p.line
            ),
        )),
        Some(_) => Some((
            e,
            BreakKind::Removed,
            format!("records before line {n} were removed (it is record {seq})"),
        )),
        None if seq == 0 && prev == GENESIS => None,
        None if rotated_away => {
            result.starts_after_rotation = true;
            None
        }
        None => Some((
            e,
            BreakKind::Removed,
            if seq == 0 {
                format!(
                    "line {n} is the first record but links to another: records before it were removed"
                )
            } else {
                format!("records before line {n} were removed (it is record {seq})")
            },
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ask::audit::files::{Rotation, Writer};
    use crate::private_fs::tests::Scratch;

    /// A log of `n` records, returning its path and the head as written.
    fn log(s: &Scratch, n: usize, rotation: Rotation) -> (PathBuf, Head) {
        let path = s.0.join("audit.jsonl");
        let mut w = Writer::open(&path, rotation).unwrap();
        for i in 0..n {
            let record = format!(r#"{{"event":"resolved","id":{i},"outcome":"declined"}}"#);
            w.append(record.as_bytes(), false).unwrap();
        }
        (path, w.head())
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn write_lines(path: &Path, lines: &[String]) {
        std::fs::write(path, lines.join("\n") + "\n").unwrap();
    }

    /// The log checked as a running app would whose chain's head is `head` (and had written
    /// nothing more by the time it was read), or as the command line does (`None`).
    fn checked(path: &Path, rotation: Rotation, head: Option<Head>) -> Verification {
        let seq = head.map_or(0, |h| h.seq);
        let after = move || seq;
        verify(
            path,
            rotation,
            head.map(|before| Written {
                before,
                after: &after,
            }),
        )
        .unwrap()
    }

    fn broken(path: &Path, anchor: Option<Head>) -> ChainBreak {
        let v = checked(path, Rotation::default(), anchor);
        assert!(!v.intact(), "{v}");
        v.problem.unwrap()
    }

    #[test]
    fn an_untouched_log_is_intact_across_rotation() {
        let s = Scratch::new("verify-ok");
        let rotation = Rotation {
            file_bytes: 1000,
            keep: 5,
        };
        let (path, head) = log(&s, 30, rotation);
        let v = checked(&path, rotation, Some(head));
        assert!(v.intact(), "{v}");
        assert_eq!(v.records, 30);
        assert!(v.files.len() > 2, "{v:?}");
        assert!(v.to_string().starts_with("intact: 30 records in"));
        // Rotating past the cap drops the oldest file: the chain starts after it.
        let (path, head) = log(&s, 60, rotation);
        let v = checked(&path, rotation, Some(head));
        assert!(v.intact(), "{v}");
        assert!(v.starts_after_rotation);
        // The records kept from some point on moved into the oldest file, the others left
        // empty: that is no rotation, and the records before were removed.
        let mut kept: Vec<String> = (1..=5)
            .rev()
            .flat_map(|n| lines(&files::rotated(&path, n)))
            .chain(lines(&path))
            .collect();
        kept.drain(..kept.len() / 2);
        write_lines(&files::rotated(&path, 5), &kept);
        for n in 1..5 {
            std::fs::write(files::rotated(&path, n), "").unwrap();
        }
        std::fs::write(&path, "").unwrap();
        let v = checked(&path, rotation, None);
        assert_eq!(
            v.problem.as_ref().map(|p| p.kind),
            Some(BreakKind::Removed),
            "{v}"
        );
    }

    #[test]
    fn an_edited_record_is_reported_at_its_line() {
        let s = Scratch::new("verify-edit");
        let (path, _) = log(&s, 6, Rotation::default());
        let mut l = lines(&path);
        l[2] = l[2].replace("declined", "accepted");
        write_lines(&path, &l);
        let p = broken(&path, None);
        assert_eq!((p.line, p.kind), (3, BreakKind::Changed), "{}", p.message);
        assert!(p.message.contains("line 3 was changed"), "{}", p.message);
    }

    #[test]
    fn a_removed_record_is_reported_where_it_was() {
        let s = Scratch::new("verify-remove");
        let (path, _) = log(&s, 6, Rotation::default());
        let mut l = lines(&path);
        l.remove(2);
        write_lines(&path, &l);
        let p = broken(&path, None);
        assert_eq!((p.line, p.kind), (3, BreakKind::Removed), "{}", p.message);
        assert!(p.message.contains("record 2 was removed"), "{}", p.message);
        // The first record too.
        let s = Scratch::new("verify-remove-first");
        let (path, _) = log(&s, 3, Rotation::default());
        let mut l = lines(&path);
        l.remove(0);
        write_lines(&path, &l);
        let p = broken(&path, None);
        assert_eq!((p.line, p.kind), (1, BreakKind::Removed), "{}", p.message);
        // Empty rotated files beside it do not make that a rotation.
        let keep = Rotation::default().keep;
        for n in 1..=keep {
            std::fs::write(files::rotated(&path, n), "").unwrap();
        }
        let p = broken(&path, None);
        assert_eq!(p.kind, BreakKind::Removed, "{}", p.message);
    }

    #[test]
    fn swapped_records_are_reported_as_moved() {
        let s = Scratch::new("verify-swap");
        let (path, _) = log(&s, 6, Rotation::default());
        let mut l = lines(&path);
        l.swap(2, 3);
        write_lines(&path, &l);
        let p = broken(&path, None);
        assert_eq!((p.line, p.kind), (3, BreakKind::Reordered), "{}", p.message);
        assert!(p.message.contains("records were moved"), "{}", p.message);
    }

    #[test]
    fn the_running_app_also_catches_an_edited_or_removed_last_record() {
        let s = Scratch::new("verify-tail");
        let (path, head) = log(&s, 4, Rotation::default());
        let original = lines(&path);
        let mut l = original.clone();
        l[3] = l[3].replace("declined", "accepted");
        write_lines(&path, &l);
        // Without the app's head, the last record has nothing after it to give it away.
        assert!(checked(&path, Rotation::default(), None).intact());
        let p = broken(&path, Some(head));
        assert_eq!((p.line, p.kind), (4, BreakKind::Changed), "{}", p.message);
        write_lines(&path, &original[..3]);
        let p = broken(&path, Some(head));
        assert_eq!(p.kind, BreakKind::Removed, "{}", p.message);
        // A record added after the app's last one, correctly chained (a `resolved` saying
        // "accepted" for a question the person declined): added, says the running app.
        write_lines(&path, &original);
        let mut forger = Writer::open(&path, Rotation::default()).unwrap();
        forger
            .append(
                br#"{"event":"resolved","id":3,"outcome":"accepted"}"#,
                false,
            )
            .unwrap();
        assert!(checked(&path, Rotation::default(), None).intact());
        let p = broken(&path, Some(head));
        assert_eq!((p.line, p.kind), (5, BreakKind::Changed), "{}", p.message);
        assert!(p.message.contains("line 5 was added"), "{}", p.message);
    }

    #[test]
    fn older_unchained_records_are_counted_and_junk_is_unreadable() {
        let s = Scratch::new("verify-legacy");
        let path = s.0.join("audit.jsonl");
        std::fs::write(&path, "{\"event\":\"old\"}\n{\"event\":\"old\"}\n").unwrap();
        let mut w = Writer::open(&path, Rotation::default()).unwrap();
        w.append(br#"{"event":"new"}"#, false).unwrap();
        let v = checked(&path, Rotation::default(), Some(w.head()));
        assert!(v.intact(), "{v}");
        assert_eq!((v.unchained, v.records), (2, 1));
        assert!(v.to_string().contains("2 older records"), "{v}");
        // An old-style line slipped in after the chain began is not covered: it is reported.
        let mut l = lines(&path);
        l.push("{\"event\":\"old\"}".into());
        write_lines(&path, &l);
        assert_eq!(broken(&path, None).kind, BreakKind::Changed);
        l.pop();
        l.insert(1, "not json".into());
        write_lines(&path, &l);
        let p = broken(&path, None);
        assert_eq!((p.line, p.kind), (2, BreakKind::Unreadable));
    }
}
