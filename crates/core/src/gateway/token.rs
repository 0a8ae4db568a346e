//! Bearer tokens: how they are made and compared, and the older shared token, kept in a file
//! only the user can read and the same across runs so agent configs pasted once keep working
//! (each agent now has its own: `registry`).

use std::path::Path;

use crate::private_fs;

/// 32 random bytes, hex: enough that guessing is hopeless, plain enough to paste.
pub fn fresh() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(hex::encode(bytes))
}

/// Reads the token at `path`, creating it (0600, atomically) if missing or empty. A file that
/// others can read is tightened to 0600, since the token grants every configured server.
pub fn load_or_create(path: &Path) -> std::io::Result<String> {
    load_or_create_new(path).map(|(token, _)| token)
}

/// [`load_or_create`], and whether the token was made now (none was on file).
pub fn load_or_create_new(path: &Path) -> std::io::Result<(String, bool)> {
    let text = private_fs::read_ours(path).and_then(|bytes| {
        String::from_utf8(bytes)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    });
    match text {
        Ok(text) if !text.trim().is_empty() => {
            private_fs::tighten_path(path);
            return Ok((text.trim().to_owned(), false));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let token = fresh()?;
    private_fs::write_atomic(path, format!("{token}\n").as_bytes())?;
    Ok((token, true))
}

/// Compares without an early exit, so response timing does not reveal a matching prefix.
pub fn matches(given: &[u8], token: &[u8]) -> bool {
    if given.len() != token.len() {
        return false;
    }
    given
        .iter()
        .zip(token)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn created_private_and_kept_across_runs() {
        let dir = std::env::temp_dir().join(format!("cs-token-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("gateway-token");
        let first = load_or_create(&path).unwrap();
        assert_eq!(first.len(), 64);
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(load_or_create(&path).unwrap(), first);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(load_or_create(&path).unwrap(), first);
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn compares_whole_tokens_only() {
        assert!(matches(b"abc", b"abc"));
        assert!(!matches(b"abd", b"abc"));
        assert!(!matches(b"ab", b"abc"));
        assert!(!matches(b"", b"abc"));
    }
}
