//! Writing other programs' files without losing them: the new text written beside the file
//! and renamed over it (a crash leaves the old file or the new one, never half of each), with
//! the file's permissions kept: an agent's file is not ours to make private. (Backups of it
//! are ours: `private_fs::copy_new`.)

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Lower-case hex SHA-256 of `bytes`: how an undo knows the file is still what we wrote.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The file a path names: a symlink (a dotfiles manager's, say) is followed, so the link
/// stays a link and its target gets the new text.
pub fn real_path(path: &Path) -> PathBuf {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
        }
        _ => path.to_owned(),
    }
}

/// `<path><infix><at_ms>`, or with `-2`, `-3`... when that name is taken: never overwrites.
pub fn free_name(path: &Path, infix: &str, at_ms: u64) -> PathBuf {
    let base = format!("{}{infix}{at_ms}", path.display());
    let mut candidate = PathBuf::from(&base);
    let mut n = 2;
    while std::fs::symlink_metadata(&candidate).is_ok() {
        candidate = PathBuf::from(format!("{base}-{n}"));
        n += 1;
    }
    candidate
}

/// Replaces the file at `path` with `bytes` atomically. `mode` defaults to the current file's
/// permissions, or 0644 (less the umask) for a new file.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: Option<u32>) -> std::io::Result<()> {
    write_atomic_over(path, bytes, mode, None).map(drop)
}

/// [`write_atomic`], but only over the file whose SHA-256 is `replaces` (hex): the new file
/// is swapped in and the one it replaced checked after the swap, so a host that wrote its file
/// after it was read (Claude Code writes `~/.claude.json` all the time) is not written over;
/// then the old file is swapped back and `Ok(false)` says nothing was written. Where the file
/// system cannot swap two files, checked just before the rename instead.
pub fn write_atomic_over(
    path: &Path,
    bytes: &[u8],
    mode: Option<u32>,
    replaces: Option<&str>,
) -> std::io::Result<bool> {
    let target = real_path(path);
    let dir = target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mode = mode.or_else(|| {
        std::fs::metadata(&target)
            .ok()
            .map(|m| m.permissions().mode() & 0o7777)
    });
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.countersign-tmp-{}-{}",
        std::process::id(),
        now_ms()
    ));
    let holds_theirs = std::cell::Cell::new(false);
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode.unwrap_or(0o644))
            .open(&tmp)?;
        if let Some(mode) = mode {
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        let Some(expected) = replaces else {
            return std::fs::rename(&tmp, &target).map(|()| true);
        };
        match exchange(&tmp, &target) {
            Ok(()) => {
                // `tmp` now holds what `target` held the instant before.
                // Whatever fails from here, `tmp` holds the host's file: never removed.
                holds_theirs.set(true);
                let replaced = std::fs::read(&tmp)?;
                if sha256_hex(&replaced) != expected {
                    exchange(&tmp, &target)?;
                    holds_theirs.set(false);
                    std::fs::remove_file(&tmp)?;
                    return Ok(false);
                }
                holds_theirs.set(false);
                std::fs::remove_file(&tmp)?;
                Ok(true)
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) => {
                if std::fs::read(&target)
                    .map(|b| sha256_hex(&b))
                    .ok()
                    .as_deref()
                    != Some(expected)
                {
                    std::fs::remove_file(&tmp)?;
                    return Ok(false);
                }
                std::fs::rename(&tmp, &target).map(|()| true)
            }
            Err(e) => Err(e),
        }
    })();
    match &written {
        Err(e) if holds_theirs.get() => {
            return Err(std::io::Error::new(
                e.kind(),
                format!(
                    "{e}; the file as it was just before is kept as {}",
                    tmp.display()
                ),
            ));
        }
        Err(_) => {
            let _ = std::fs::remove_file(&tmp);
        }
        Ok(_) => {}
    }
    let written = written?;
    // The rename is durable once the directory is; failing to sync it is not worth an error.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(written)
}

/// Swaps the files at `a` and `b` in one step (`renameat2(RENAME_EXCHANGE)`).
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let (a, b) = (c(a)?, c(b)?);
    // SAFETY: both are valid NUL-terminated paths; AT_FDCWD makes them relative to the cwd
    // (they are absolute here).
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `path` with the home directory written as `~`, for the person to read.
pub fn display(path: &Path, home: &Path) -> String {
    match path.strip_prefix(home) {
        Ok(rest) if !home.as_os_str().is_empty() && home != Path::new("/") => {
            if rest.as_os_str().is_empty() {
                "~".into()
            } else {
                format!("~/{}", rest.display())
            }
        }
        _ => path.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host wrote its file after Countersign read it: the write over it does not happen,
    /// and the host's file is as the host wrote it. Over the file as read, it does.
    #[test]
    fn a_write_over_a_file_happens_only_over_the_file_as_it_was_read() {
        let dir = crate::agents::tests::TempHome::new("files-over");
        let file = dir.path().join("host.json");
        std::fs::write(&file, "as read").unwrap();
        let read = sha256_hex(b"as read");
        std::fs::write(&file, "the host's own edit since").unwrap();
        assert!(!write_atomic_over(&file, b"ours", None, Some(&read)).unwrap());
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "the host's own edit since"
        );
        let now = sha256_hex(b"the host's own edit since");
        assert!(write_atomic_over(&file, b"ours", None, Some(&now)).unwrap());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "ours");
        // Nothing left beside it.
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, [std::ffi::OsString::from("host.json")]);
    }

    #[test]
    fn atomic_write_keeps_the_mode_and_follows_symlinks() {
        let dir = crate::agents::tests::TempHome::new("files");
        let file = dir.path().join("a.json");
        std::fs::write(&file, "old").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_atomic(&file, b"new", None).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );

        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        write_atomic(&link, b"through the link", None).unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "through the link");
        // No temporary files left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains("tmp")), "{names:?}");
    }

    #[test]
    fn free_names_never_overwrite_and_backups_are_private() {
        let dir = crate::agents::tests::TempHome::new("names");
        let file = dir.path().join("c.json");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        let first = free_name(&file, ".bak-", 7);
        assert!(first.to_string_lossy().ends_with("c.json.bak-7"));
        crate::private_fs::copy_new(&file, &first).unwrap();
        assert_eq!(
            std::fs::metadata(&first).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let second = free_name(&file, ".bak-", 7);
        assert!(second.to_string_lossy().ends_with("c.json.bak-7-2"));
        assert!(
            crate::private_fs::copy_new(&file, &first).is_err(),
            "an existing backup is never overwritten"
        );
    }

    #[test]
    fn paths_under_home_read_with_a_tilde() {
        let home = Path::new("/home/me");
        assert_eq!(
            display(Path::new("/home/me/.cursor/mcp.json"), home),
            "~/.cursor/mcp.json"
        );
        assert_eq!(display(Path::new("/home/meme/x"), home), "/home/meme/x");
        assert_eq!(display(Path::new("/etc/x"), home), "/etc/x");
        assert_eq!(sha256_hex(b"abc").len(), 64);
        assert_eq!(
            &sha256_hex(b"abc")[..16],
            "ba7816bf8f01cfea",
            "the standard test vector"
        );
    }
}
