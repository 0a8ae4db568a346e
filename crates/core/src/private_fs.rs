//! Files only the user can read. Countersign's directories are created 0700 and its files
//! (audit log, config, settings, backups, the gateway's token and address) 0600 from the
//! moment they exist: a file created with the umask's 0644 and chmodded afterwards can be
//! opened by another user in between, and an open descriptor survives the chmod. What an
//! older version left looser is tightened once at start, and the person is told.
//!
//! Agents' own config files are not ours: rewriting one keeps its mode (`agents::files`).

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Countersign's directories: the user alone may list or enter them.
pub const DIR_MODE: u32 = 0o700;
/// Countersign's files: the user alone may read or write them.
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` and any missing parents, each new one 0700 (existing ones are left as they
/// are: a parent like `~/.config` is not ours to change).
pub fn create_dir_all(dir: &Path) -> std::io::Result<()> {
    DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)
}

fn create_parent(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => create_dir_all(dir),
        _ => Ok(()),
    }
}

/// Opens `path` for appending, creating it 0600 (and its directory 0700) if missing. Not
/// through a symlink, and only a file of this user's: one planted while a directory of ours was
/// open to others (linked to `~/.bashrc`, say) would have what servers write appended to it.
pub fn open_append(path: &Path) -> std::io::Result<File> {
    create_parent(path)?;
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    ours(&file, path)?;
    Ok(file)
}

/// Reads `path`, which must be a file of this user's: the gateway's token, the agents' token
/// digests, settings and pending approvals decide who may do what, and a file another user
/// left in a directory of ours (while it was open to others) would let them decide it.
pub fn read_ours(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = File::open(path)?;
    ours(&file, path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn ours(file: &File, path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let owner = file.metadata()?.uid();
    if owner != euid() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} belongs to another user (uid {owner}), so Countersign does not use it",
                path.display()
            ),
        ));
    }
    Ok(())
}

/// Takes the lock on `path` (created 0600, not through a symlink, the user's own) that only
/// one Countersign holds at a time; `None` while another process holds it. The lock goes with
/// the returned file, and with the process: the kernel lets it go at exit, crash or not, and no
/// child inherits it (the file is close-on-exec). Two apps on the same files would each write
/// their own copy of settings and agents over the other's (a revoked token back, a "never"
/// lost), and cut each other's audit records.
pub fn lock_exclusive(path: &Path) -> std::io::Result<Option<File>> {
    create_parent(path)?;
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    ours(&file, path)?;
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(Some(file));
    }
    let error = std::io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(None),
        _ => Err(error),
    }
}

/// Creates `path`, which must not exist yet, 0600: for backups, which must never overwrite.
pub fn create_new(path: &Path) -> std::io::Result<File> {
    create_parent(path)?;
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
}

/// Copies `from` into a new 0600 file `to` (which must not exist yet), synced.
pub fn copy_new(from: &Path, to: &Path) -> std::io::Result<()> {
    let bytes = std::fs::read(from)?;
    let mut file = create_new(to)?;
    file.write_all(&bytes)?;
    file.sync_all()
}

/// Replaces `path` with `bytes`, 0600, atomically: a temporary file beside it, created 0600,
/// is written, synced and renamed over it, so a crash leaves the old file or the new one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static N: AtomicU64 = AtomicU64::new(0);
    create_parent(path)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut file = create_new(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    // The rename is durable once the directory is; failing to sync it is not worth an error.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(d) = File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

/// A file or directory that others could read or enter, and was made private.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tightened {
    pub path: PathBuf,
    pub was: u32,
    pub now: u32,
}

impl std::fmt::Display for Tightened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} could be read by other users (mode {:04o}); it is now {:04o}",
            self.path.display(),
            self.was,
            self.now
        )
    }
}

/// Makes each of `dirs` 0700 and every file directly in it 0600 (removing group and other
/// bits, keeping the owner's), when they are looser. Symlinks are not followed: what they
/// point to is not ours. Returns what was changed; errors are logged and skipped, since a
/// file we cannot tighten should not stop the app.
pub fn tighten(dirs: &[PathBuf]) -> Vec<Tightened> {
    let mut changed = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for dir in dirs {
        if !seen.insert(dir.clone()) {
            continue;
        }
        changed.extend(tighten_path(dir));
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            changed.extend(tighten_path(&entry.path()));
        }
    }
    changed
}

/// Fails when one of Countersign's directories `dirs` exists but belongs to another user than
/// `euid` (a shared or planted `XDG_*_HOME`): its owner could read the token and the audit log
/// written there, or swap the config. Missing ones are fine: they are created 0700, ours.
pub fn refuse_foreign(dirs: &[PathBuf], euid: u32) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    for dir in dirs {
        match std::fs::metadata(dir) {
            Ok(meta) if meta.uid() != euid => {
                return Err(format!(
                    "{} belongs to another user (uid {}, not {euid}): Countersign keeps its \
                     token, config and audit log only in a directory of yours",
                    dir.display(),
                    meta.uid()
                ));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot check {}: {e}", dir.display())),
        }
    }
    Ok(())
}

/// The effective user id of this process.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and touches nothing.
    unsafe { libc::geteuid() }
}

/// Removes group and other bits from the file or directory at `path` (not a symlink's
/// target), logging it; `None` when it was private already or cannot be changed.
pub fn tighten_path(path: &Path) -> Option<Tightened> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !(meta.is_dir() || meta.is_file()) {
        return None;
    }
    let was = meta.permissions().mode() & 0o7777;
    if was & 0o077 == 0 {
        return None;
    }
    let now = was & !0o077;
    match std::fs::set_permissions(path, std::fs::Permissions::from_mode(now)) {
        Ok(()) => {
            let t = Tightened {
                path: path.to_owned(),
                was,
                now,
            };
            tracing::warn!("made private: {t}");
            Some(t)
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot make private");
            None
        }
    }
}

/// The mode bits of `path` (tests and checks).
pub fn mode(path: &Path) -> std::io::Result<u32> {
    Ok(std::fs::symlink_metadata(path)?.permissions().mode() & 0o7777)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One holder at a time, another file description of the same process included; the lock
    /// goes when its holder does, and a link in its place is not followed.
    #[test]
    fn one_countersign_holds_the_lock_at_a_time() {
        let scratch = Scratch::new("lock");
        let path = scratch.0.join("data/countersign.lock");
        let first = lock_exclusive(&path).unwrap().expect("the first takes it");
        assert!(
            lock_exclusive(&path).unwrap().is_none(),
            "a second is refused"
        );
        assert_eq!(mode(&path).unwrap() & 0o777, 0o600);
        drop(first);
        assert!(
            lock_exclusive(&path).unwrap().is_some(),
            "free once the first is gone"
        );
        let link = scratch.0.join("data/linked.lock");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(lock_exclusive(&link).is_err(), "a link is not followed");
        std::fs::remove_dir_all(&scratch.0).unwrap();
    }

    /// A file of another user's: made so as root (its owner a uid no one has), else one of
    /// root's.
    fn foreign_file(dir: &Path) -> PathBuf {
        if euid() != 0 {
            return PathBuf::from("/etc/passwd");
        }
        let path = dir.join("planted");
        std::fs::write(&path, "{}").unwrap();
        std::os::unix::fs::chown(&path, Some(4242), Some(4242)).unwrap();
        path
    }

    #[test]
    fn what_another_user_planted_is_neither_read_nor_appended_to() {
        let dir = std::env::temp_dir().join(format!("cs-planted-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        create_dir_all(&dir).unwrap();
        let foreign = foreign_file(&dir);
        let refused = read_ours(&foreign).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(refused.to_string().contains("another user"), "{refused}");
        // Linked from a name of ours: refused all the same.
        let token = dir.join("gateway-token");
        std::os::unix::fs::symlink(&foreign, &token).unwrap();
        assert!(read_ours(&token).is_err());
        // A log linked to a file of the user's own (their shell's startup file): not appended.
        let bashrc = dir.join("bashrc");
        std::fs::write(&bashrc, "# mine\n").unwrap();
        let log = dir.join("audit.jsonl");
        std::os::unix::fs::symlink(&bashrc, &log).unwrap();
        assert!(open_append(&log).is_err());
        assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# mine\n");
        // The user's own files read and append as before.
        assert_eq!(read_ours(&bashrc).unwrap(), b"# mine\n");
        assert!(open_append(&dir.join("own.jsonl")).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_of_another_user_is_refused() {
        let scratch = Scratch::new("foreign-dir");
        let ours = scratch.0.join("ours");
        create_dir_all(&ours).unwrap();
        let missing = scratch.0.join("missing");
        let me = euid();
        assert_eq!(refuse_foreign(&[ours.clone(), missing.clone()], me), Ok(()));
        // Seen from another user, the same directory is foreign.
        let err = refuse_foreign(&[missing, ours.clone()], me + 1).unwrap_err();
        assert!(
            err.starts_with(&format!(
                "{} belongs to another user (uid {me}",
                ours.display()
            )),
            "{err}"
        );
    }

    /// A scratch directory removed on drop.
    pub(crate) struct Scratch(pub PathBuf);

    impl Scratch {
        pub(crate) fn new(name: &str) -> Scratch {
            static N: AtomicU64 = AtomicU64::new(0);
            let dir = std::env::temp_dir().join(format!(
                "cs-private-{name}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Sets the process umask to 022 (the common default, which would make plain creates
    /// 0644/0755); nextest runs each test in its own process.
    pub(crate) fn umask_022() {
        // SAFETY: umask only swaps the process's file-creation mask; it cannot fail.
        unsafe {
            libc::umask(0o022);
        }
    }

    #[test]
    fn created_private_under_umask_022() {
        umask_022();
        let s = Scratch::new("create");
        let dir = s.0.join("a/b");
        let log = dir.join("log");
        let mut f = open_append(&log).unwrap();
        f.write_all(b"x").unwrap();
        assert_eq!(mode(&s.0.join("a")).unwrap(), 0o700);
        assert_eq!(mode(&dir).unwrap(), 0o700);
        assert_eq!(mode(&log).unwrap(), 0o600);

        let atomic = dir.join("settings.json");
        write_atomic(&atomic, b"{}").unwrap();
        assert_eq!(mode(&atomic).unwrap(), 0o600);
        // Over an existing loose file too: the new file is ours.
        std::fs::set_permissions(&atomic, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_atomic(&atomic, b"{\"a\":1}").unwrap();
        assert_eq!(mode(&atomic).unwrap(), 0o600);
        assert_eq!(std::fs::read(&atomic).unwrap(), b"{\"a\":1}");

        let copy = dir.join("settings.json.bak-1");
        copy_new(&atomic, &copy).unwrap();
        assert_eq!(mode(&copy).unwrap(), 0o600);
        assert!(copy_new(&atomic, &copy).is_err(), "never overwrites");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains("tmp")), "{names:?}");
    }

    #[test]
    fn loose_files_and_dirs_are_tightened_once() {
        let s = Scratch::new("tighten");
        let dir = s.0.join("countersign");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let config = dir.join("config.json");
        std::fs::write(&config, "{}").unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
        let fine = dir.join("gateway-token");
        std::fs::write(&fine, "t").unwrap();
        std::fs::set_permissions(&fine, std::fs::Permissions::from_mode(0o600)).unwrap();
        let elsewhere = s.0.join("elsewhere");
        std::fs::write(&elsewhere, "x").unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join("link")).unwrap();

        let changed = tighten(&[dir.clone(), dir.clone()]);
        let paths: Vec<_> = changed.iter().map(|t| t.path.clone()).collect();
        assert_eq!(paths.len(), 2, "{changed:?}");
        assert!(paths.contains(&dir) && paths.contains(&config));
        assert_eq!(mode(&dir).unwrap(), 0o700);
        assert_eq!(mode(&config).unwrap(), 0o600);
        assert_eq!(
            mode(&elsewhere).unwrap(),
            0o644,
            "a symlink's target is not ours"
        );
        assert!(
            changed[0]
                .to_string()
                .contains("could be read by other users")
        );
        assert!(tighten(&[dir]).is_empty(), "once");
    }
}
