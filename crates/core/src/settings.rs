//! The person's preferences set in the app (not the server config, which they edit by hand):
//! which servers are muted, which tool calls are always allowed. (Start at login is the OS's autostart entry itself, not a copy
//! here.) Kept as JSON beside the config; written atomically so a
//! crash mid-write leaves the old file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase", default)]
pub struct Settings {
    /// Servers whose questions send no desktop notification (they still open a dialog).
    pub muted_servers: BTreeSet<String>,
    /// Tool calls the person chose "Always allow" for, per agent, server and tool.
    pub always_allow: BTreeSet<AllowedCall>,
}

/// One remembered "Always allow": this agent may call this tool on this server unasked.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct AllowedCall {
    /// The agent's `clientInfo.name` ("" when it gave none).
    pub agent: String,
    pub server: String,
    pub tool: String,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot save settings to {path}: {source}")]
pub struct SettingsError {
    path: String,
    source: std::io::Error,
}

/// The settings in memory and on disk. `path: None` keeps them in memory only.
#[derive(Debug, Clone, Default)]
pub struct SettingsStore {
    path: Option<PathBuf>,
    current: Arc<RwLock<Settings>>,
}

impl SettingsStore {
    /// Reads `path`; a missing file is the defaults, a broken one too, with a warning returned;
    /// the broken file is moved aside (`settings.json.bad`) so the next save does not destroy
    /// what the person may want to recover.
    pub fn load(path: Option<PathBuf>) -> (SettingsStore, Option<String>) {
        let (settings, warning) = match path.as_deref().map(std::fs::read) {
            None => (Settings::default(), None),
            Some(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => (Settings::default(), None),
            Some(Err(e)) => (
                Settings::default(),
                Some(format!("cannot read settings: {e}")),
            ),
            Some(Ok(bytes)) => match serde_json::from_slice(&bytes) {
                Ok(s) => (s, None),
                Err(e) => {
                    let broken = path.as_deref().unwrap_or(Path::new(""));
                    let aside = broken.with_extension("json.bad");
                    let kept = match std::fs::rename(broken, &aside) {
                        Ok(()) => format!("kept as {}", aside.display()),
                        Err(move_error) => format!("cannot move it aside: {move_error}"),
                    };
                    (
                        Settings::default(),
                        Some(format!(
                            "{}: {e}; using defaults ({kept})",
                            broken.display()
                        )),
                    )
                }
            },
        };
        let store = SettingsStore {
            path,
            current: Arc::new(RwLock::new(settings)),
        };
        (store, warning)
    }

    pub fn get(&self) -> Settings {
        self.current.read().expect("settings lock").clone()
    }

    pub fn is_muted(&self, server: &str) -> bool {
        self.current
            .read()
            .expect("settings lock")
            .muted_servers
            .contains(server)
    }

    pub fn is_always_allowed(&self, call: &AllowedCall) -> bool {
        self.current
            .read()
            .expect("settings lock")
            .always_allow
            .contains(call)
    }

    /// Applies `change`, saves, and returns the new settings. On a failed save the change is
    /// not kept, so what the app shows is what is on disk.
    pub fn update(&self, change: impl FnOnce(&mut Settings)) -> Result<Settings, SettingsError> {
        let mut current = self.current.write().expect("settings lock");
        let mut next = current.clone();
        change(&mut next);
        if let Some(path) = &self.path {
            save(path, &next).map_err(|source| SettingsError {
                path: path.display().to_string(),
                source,
            })?;
        }
        *current = next.clone();
        Ok(next)
    }
}

fn save(path: &Path, settings: &Settings) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(settings).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    // Who is always allowed to do what is the person's business: 0600.
    crate::private_fs::write_atomic(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cs-settings-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("settings.json")
    }

    #[test]
    fn defaults_when_missing_and_round_trip() {
        let path = temp("roundtrip");
        let (store, warning) = SettingsStore::load(Some(path.clone()));
        assert_eq!(warning, None);
        assert_eq!(store.get(), Settings::default());
        store
            .update(|s| {
                s.muted_servers.insert("github".into());
            })
            .unwrap();
        assert!(store.is_muted("github"));
        let (again, _) = SettingsStore::load(Some(path));
        assert!(again.is_muted("github"));
        assert!(!again.is_muted("demo"));
    }

    #[test]
    fn a_broken_file_gives_defaults_and_a_warning() {
        let path = temp("broken");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{ not json").unwrap();
        let (store, warning) = SettingsStore::load(Some(path.clone()));
        assert_eq!(store.get(), Settings::default());
        assert!(warning.unwrap().contains("using defaults"));
        assert_eq!(
            std::fs::read_to_string(path.with_extension("json.bad")).unwrap(),
            "{ not json"
        );
    }

    #[test]
    fn a_failed_save_keeps_the_old_settings() {
        let dir = temp("readonly");
        // A file where the directory should be: the save cannot create it.
        std::fs::create_dir_all(dir.parent().unwrap().parent().unwrap()).unwrap();
        std::fs::write(dir.parent().unwrap(), "file").unwrap();
        let (store, _) = SettingsStore::load(Some(dir));
        assert!(
            store
                .update(|s| {
                    s.muted_servers.insert("x".into());
                })
                .is_err()
        );
        assert!(!store.is_muted("x"));
        let _ = std::fs::remove_file(temp("readonly").parent().unwrap());
    }
}
