//! The config file edited while the app runs: a valid edit applies at once (servers added,
//! removed and changed, in the app's sessions and the gateway alike); an edit with any error
//! is not applied at all, and the person is told where the error is while everything runs on
//! as before. Half an edit applied could start a server the person was halfway through
//! changing, so it is all or nothing.

use std::time::Duration;

use super::App;
use crate::config::{ConfigError, LoadedConfig, ServerConfig};

/// How often the watcher reads the config file. A poll, not inotify: editors that save by
/// renaming a new file over the old one leave an inotify watch on the old file, while reading
/// a few kilobytes a second costs nothing, and comparing bytes (not timestamps) misses no
/// edit and takes a save of the same text for what it is.
pub const CONFIG_POLL: Duration = Duration::from_secs(1);

/// The config the app runs with, and what is wrong with the file now.
pub(super) struct ConfigState {
    pub(super) running: LoadedConfig,
    /// The errors of the last edit, which was therefore not applied; empty once one is.
    pub(super) rejected: Vec<ConfigError>,
    /// The gateway's section changed since start: its port is bound, so that waits for a
    /// restart.
    pub(super) gateway_changed: bool,
}

impl ConfigState {
    pub(super) fn new(running: LoadedConfig) -> Self {
        ConfigState {
            running,
            rejected: Vec::new(),
            gateway_changed: false,
        }
    }
}

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reload {
    /// The servers are as they were (the file changed elsewhere, or not in substance).
    Unchanged,
    Applied {
        added: Vec<String>,
        removed: Vec<String>,
        changed: Vec<String>,
    },
    /// Nothing applied: the file has these errors.
    Rejected { errors: Vec<ConfigError> },
}

impl App {
    /// Reads the config file again and applies it (see the module's doc).
    pub async fn reload_config(&self) -> Reload {
        let path = self.config_path();
        self.apply_config(crate::config::load(&path)).await
    }

    /// Applies `loaded` as the config the person saved.
    pub async fn apply_config(&self, loaded: LoadedConfig) -> Reload {
        // One at a time: two quick saves must apply in order.
        let _applying = self.reloading.lock().await;
        let reload = {
            let mut state = self.config_state();
            if !loaded.errors.is_empty() {
                tracing::warn!(errors = loaded.errors.len(), "config edit not applied");
                state.rejected = loaded.errors.clone();
                Reload::Rejected {
                    errors: loaded.errors,
                }
            } else {
                state.rejected.clear();
                state.gateway_changed |= loaded.gateway != state.running.gateway;
                let reload = difference(&state.running.servers, &loaded.servers);
                state.running = loaded;
                reload
            }
        };
        let Reload::Applied {
            added,
            removed,
            changed,
        } = &reload
        else {
            self.config_changes.send_modify(|n| *n += 1);
            return reload;
        };
        tracing::info!(?added, ?removed, ?changed, "config edit applied");
        for name in removed {
            self.sessions.stop(name).await;
        }
        let servers = self.config_state().running.servers.clone();
        let starting: Vec<ServerConfig> = servers
            .iter()
            .filter(|s| added.contains(&s.name) || changed.contains(&s.name))
            .cloned()
            .collect();
        self.sessions.start(starting).await;
        if let Some(gateway) = &self.gateway {
            gateway.set_servers(servers);
        }
        // Told once the sessions are started: a list read now shows each new server's
        // session, never a stopped one that is about to start.
        self.config_changes.send_modify(|n| *n += 1);
        reload
    }

    /// Counts reloads, applied or not: the shell redraws the servers and the config's
    /// problems on each.
    pub fn config_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.config_changes.subscribe()
    }

    /// Reloads whenever the config file's text changes, until the app shuts down.
    pub async fn watch_config(&self, every: Duration) {
        let path = self.config_path();
        let mut seen = std::fs::read(&path).ok();
        loop {
            tokio::select! {
                _ = self.stopping.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            let now = std::fs::read(&path).ok();
            if now != seen {
                seen = now;
                let reload = self.reload_config().await;
                tracing::debug!(?reload, "config file changed");
            }
        }
    }
}

/// Which servers `after` adds, removes and changes against `before`.
fn difference(before: &[ServerConfig], after: &[ServerConfig]) -> Reload {
    let find = |list: &[ServerConfig], name: &str| list.iter().find(|s| s.name == name).cloned();
    let added: Vec<String> = after
        .iter()
        .filter(|s| find(before, &s.name).is_none())
        .map(|s| s.name.clone())
        .collect();
    let removed: Vec<String> = before
        .iter()
        .filter(|s| find(after, &s.name).is_none())
        .map(|s| s.name.clone())
        .collect();
    let changed: Vec<String> = after
        .iter()
        .filter(|s| find(before, &s.name).is_some_and(|old| old != **s))
        .map(|s| s.name.clone())
        .collect();
    if added.is_empty() && removed.is_empty() && changed.is_empty() {
        Reload::Unchanged
    } else {
        Reload::Applied {
            added,
            removed,
            changed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn difference_names_what_was_added_removed_and_changed() {
        let a = ServerConfig::stdio("a", "a", &[]);
        let b = ServerConfig::stdio("b", "b", &[]);
        let mut b2 = b.clone();
        b2.trusted = true;
        let c = ServerConfig::stdio("c", "c", &[]);
        assert_eq!(
            difference(&[a.clone(), b.clone()], &[b2, c]),
            Reload::Applied {
                added: vec!["c".into()],
                removed: vec!["a".into()],
                changed: vec!["b".into()],
            }
        );
        let same = [a];
        assert_eq!(difference(&same, &same), Reload::Unchanged);
    }
}
