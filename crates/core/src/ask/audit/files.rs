//! The audit log on disk: one file appended to until it reaches a size, then rotated
//! (`audit.jsonl` becomes `audit.jsonl.1`, older ones shift up, the oldest past the cap is
//! dropped), with the chain continuing into the new file. Reading goes backwards from the end,
//! so the newest records cost the same however long the log has grown.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::chain::{self, Head};
use crate::private_fs;

/// How large the log may grow: `keep` rotated files of about `file_bytes` each, plus the one
/// being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    pub file_bytes: u64,
    pub keep: usize,
}

impl Default for Rotation {
    /// 8 MiB files, 7 kept: at most 64 MiB of log, thousands of days of questions.
    fn default() -> Self {
        Rotation {
            file_bytes: 8 << 20,
            keep: 7,
        }
    }
}

/// `audit.jsonl.<n>`: the `n`th newest rotated file.
pub fn rotated(path: &Path, n: usize) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// The log's files that exist, newest first: the current one, then `.1`, `.2`... up to the
/// first one missing.
pub fn existing(path: &Path, keep: usize) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if path.exists() {
        files.push(path.to_owned());
    }
    for n in 1..=keep {
        let older = rotated(path, n);
        if !older.exists() {
            break;
        }
        files.push(older);
    }
    files
}

/// Appends linked lines; the one writer of the log (behind the log's mutex).
pub struct Writer {
    path: PathBuf,
    file: File,
    /// Bytes in the current file (0 for a device such as `/dev/full`: never rotated).
    len: u64,
    /// A regular file (rotation and repair apply only to those).
    regular: bool,
    head: Head,
    rotation: Rotation,
    /// A rotation moved the current file away but could not open the new one: the next try
    /// only opens it (shifting again would drop one more rotated file each time).
    moved_away: bool,
}

impl Writer {
    /// Opens (creating 0600) the log at `path`. A last line cut short by a crash is removed:
    /// it was never synced, so the answer it would have recorded never went out. The chain
    /// continues from the last whole line, in this file or the newest rotated one.
    pub fn open(path: &Path, rotation: Rotation) -> std::io::Result<Writer> {
        let file = private_fs::open_append(path)?;
        let meta = file.metadata()?;
        let regular = meta.is_file();
        let mut len = if regular { meta.len() } else { 0 };
        let mut head = None;
        if regular && len > 0 {
            // The writer is append-only; reading takes a handle of its own.
            let reader = File::open(path)?;
            let whole = whole_len(&reader, len)?;
            if whole < len {
                tracing::warn!(path = %path.display(), bytes = len - whole, "the audit log's last line was cut short (a crash while writing); removed");
                file.set_len(whole)?;
                len = whole;
            }
            head = Backwards::new(&reader, len)?.next().transpose()?;
        }
        if head.is_none()
            && let Ok(older) = File::open(rotated(path, 1))
        {
            let older_len = older.metadata()?.len();
            let whole = whole_len(&older, older_len)?;
            head = Backwards::new(&older, whole)?.next().transpose()?;
        }
        Ok(Writer {
            path: path.to_owned(),
            file,
            len,
            regular,
            head: head.map_or(Head::START, |line| Head::after(&line)),
            rotation,
            moved_away: false,
        })
    }

    pub fn head(&self) -> Head {
        self.head
    }

    /// Writes `record` (a JSON object's text) as the next line of the chain; with `sync`, it
    /// is on disk when this returns. On failure nothing of it stays in the file (a partial
    /// line is cut off) and the chain does not advance.
    pub fn append(&mut self, record: &[u8], sync: bool) -> std::io::Result<()> {
        let mut line = chain::link(&self.head, record).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, "a record is not an object")
        })?;
        let next = self.head.then(&line);
        line.push(b'\n');
        if self.regular && self.len > 0 && self.len + line.len() as u64 > self.rotation.file_bytes {
            self.rotate()?;
        }
        let before = self.len;
        // One write call per line: with O_APPEND, lines never interleave.
        let written = self
            .file
            .write_all(&line)
            .and_then(|()| if sync { self.file.sync_data() } else { Ok(()) });
        match written {
            Ok(()) => {
                self.head = next;
                if self.regular {
                    self.len += line.len() as u64;
                }
                Ok(())
            }
            Err(e) => {
                if self.regular {
                    let _ = self.file.set_len(before);
                }
                Err(e)
            }
        }
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        if !self.moved_away {
            let keep = self.rotation.keep.max(1);
            for n in (1..keep).rev() {
                match std::fs::rename(rotated(&self.path, n), rotated(&self.path, n + 1)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
            std::fs::rename(&self.path, rotated(&self.path, 1))?;
            self.moved_away = true;
        }
        self.file = open_new(&self.path)?;
        self.moved_away = false;
        self.len = 0;
        if let Some(dir) = self.path.parent()
            && let Ok(d) = File::open(dir)
        {
            let _ = d.sync_all();
        }
        tracing::info!(path = %self.path.display(), "rotated the audit log");
        Ok(())
    }
}

/// The new current file, after a rotation.
fn open_new(path: &Path) -> std::io::Result<File> {
    #[cfg(test)]
    if tests::FAILED_OPENS.with(|left| left.replace(left.get().saturating_sub(1)) > 0) {
        return Err(std::io::Error::other("an open made to fail by a test"));
    }
    private_fs::open_append(path)
}

/// The length of `file` up to and including its last newline.
fn whole_len(file: &File, len: u64) -> std::io::Result<u64> {
    let mut end = len;
    let mut chunk = vec![0u8; CHUNK];
    while end > 0 {
        let start = end.saturating_sub(CHUNK as u64);
        let part = &mut chunk[..(end - start) as usize];
        file.read_exact_at(part, start)?;
        if let Some(i) = memchr::memrchr(b'\n', part) {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

const CHUNK: usize = 64 << 10;

/// The lines of a file's first `len` bytes, newest first, without their newlines. A last
/// line with no newline is returned like the others (callers decide what a torn line is).
pub struct Backwards<'a> {
    file: &'a File,
    /// Bytes before this offset are not read yet.
    pos: u64,
    /// Read but not yet returned: the tail of the unread part's last line.
    pending: Vec<u8>,
}

impl<'a> Backwards<'a> {
    pub fn new(file: &'a File, len: u64) -> std::io::Result<Backwards<'a>> {
        let mut end = len;
        if len > 0 {
            let mut last = [0u8; 1];
            file.read_exact_at(&mut last, len - 1)?;
            if last[0] == b'\n' {
                end -= 1;
            }
        }
        Ok(Backwards {
            file,
            pos: end,
            pending: Vec::new(),
        })
    }

    /// Bytes not yet returned, from the start of the file.
    pub fn remaining(&self) -> u64 {
        self.pos + self.pending.len() as u64
    }

    fn read_line(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(i) = memchr::memrchr(b'\n', &self.pending) {
                let line = self.pending.split_off(i + 1);
                self.pending.truncate(i);
                return Ok(Some(line));
            }
            if self.pos == 0 {
                if self.pending.is_empty() {
                    return Ok(None);
                }
                return Ok(Some(std::mem::take(&mut self.pending)));
            }
            let start = self.pos.saturating_sub(CHUNK as u64);
            let mut chunk = vec![0u8; (self.pos - start) as usize];
            self.file.read_exact_at(&mut chunk, start)?;
            chunk.extend_from_slice(&self.pending);
            self.pending = chunk;
            self.pos = start;
        }
    }
}

impl Iterator for Backwards<'_> {
    type Item = std::io::Result<Vec<u8>>;

    fn next(&mut self) -> Option<Self::Item> {
        // Our writer never writes blank lines; skip them rather than call them records.
        loop {
            match self.read_line() {
                Ok(Some(line)) if line.iter().all(u8::is_ascii_whitespace) => continue,
                other => return other.transpose(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::private_fs::tests::Scratch;

    thread_local! {
        /// How many of this thread's next opens of a new file after a rotation fail.
        pub(super) static FAILED_OPENS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }

    /// A rotation whose new file cannot be opened (no descriptors left, say) fails its record
    /// and is finished by the next append: the rotated files are shifted once, not once per
    /// try, which dropped one more of them at each (and then every append failed for good).
    #[test]
    fn a_rotation_that_cannot_open_its_new_file_shifts_the_old_ones_only_once() {
        let s = Scratch::new("rotate-open-fails");
        let path = s.0.join("audit.jsonl");
        // One line a file: every record after the first rotates.
        let rotation = Rotation {
            file_bytes: 150,
            keep: 3,
        };
        let mut w = Writer::open(&path, rotation).unwrap();
        let mut n = 0;
        let mut append = |w: &mut Writer| {
            n += 1;
            w.append(format!(r#"{{"event":"t","n":{n}}}"#).as_bytes(), false)
        };
        while !rotated(&path, 3).exists() {
            append(&mut w).unwrap();
        }
        let read = |p: PathBuf| std::fs::read(p).unwrap_or_default();
        let before = [
            read(path.clone()),
            read(rotated(&path, 1)),
            read(rotated(&path, 2)),
        ];
        FAILED_OPENS.with(|left| left.set(3));
        for _ in 0..3 {
            assert!(append(&mut w).is_err(), "no file to write it to");
        }
        append(&mut w).expect("written once the new file opens");
        let after = [
            read(rotated(&path, 1)),
            read(rotated(&path, 2)),
            read(rotated(&path, 3)),
        ];
        assert_eq!(after, before, "each rotated file moved up by one");
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
    }

    #[test]
    fn backwards_yields_newest_first_across_chunks() {
        let s = Scratch::new("backwards");
        let path = s.0.join("f");
        let long = "x".repeat(CHUNK + 10);
        std::fs::write(&path, format!("a\n{long}\n\nb\nc")).unwrap();
        let file = File::open(&path).unwrap();
        let len = file.metadata().unwrap().len();
        let lines: Vec<Vec<u8>> = Backwards::new(&file, len)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            lines,
            vec![
                b"c".to_vec(),
                b"b".to_vec(),
                long.into_bytes(),
                b"a".to_vec()
            ]
        );
        assert_eq!(whole_len(&file, len).unwrap(), len - 1);
    }

    #[test]
    fn rotation_shifts_files_and_drops_the_oldest_past_the_cap() {
        let s = Scratch::new("rotate");
        let path = s.0.join("audit.jsonl");
        let rotation = Rotation {
            file_bytes: 200,
            keep: 2,
        };
        let mut w = Writer::open(&path, rotation).unwrap();
        for n in 0..20 {
            w.append(format!(r#"{{"event":"t","n":{n}}}"#).as_bytes(), false)
                .unwrap();
        }
        let files = existing(&path, 2);
        assert_eq!(files.len(), 3, "{files:?}");
        assert!(!rotated(&path, 3).exists());
        for f in &files {
            assert!(std::fs::metadata(f).unwrap().len() <= 200);
            assert_eq!(crate::private_fs::mode(f).unwrap(), 0o600);
        }
        // Reopening continues the chain where it stood.
        let head = w.head();
        drop(w);
        assert_eq!(Writer::open(&path, rotation).unwrap().head(), head);
        assert_eq!(head.seq, 20);
    }

    #[test]
    fn a_torn_last_line_is_cut_and_the_chain_continues_from_the_whole_one() {
        let s = Scratch::new("torn");
        let path = s.0.join("audit.jsonl");
        let mut w = Writer::open(&path, Rotation::default()).unwrap();
        w.append(br#"{"event":"a"}"#, true).unwrap();
        let head = w.head();
        drop(w);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(br#"{"seq":1,"prev":"00"#).unwrap();
        let w = Writer::open(&path, Rotation::default()).unwrap();
        assert_eq!(w.head(), head);
        assert!(std::fs::read(&path).unwrap().ends_with(b"}\n"));
    }
}
