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
/// edit and takes a save of the same text for what it is. An edit applies after two polls
/// agree (see [`App::watch_config`]), so within a second.
pub const CONFIG_POLL: Duration = Duration::from_millis(500);

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
        let mut signed_in_elsewhere = Vec::new();
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
                signed_in_elsewhere = no_longer_reached(&state.running.servers, &loaded.servers);
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
        // Their sign-ins are revoked and forgotten in the background: an authorization server
        // may take its time, and the new config is the person's now.
        for (name, url, oauth) in signed_in_elsewhere {
            let auth = self.sessions.auth().clone();
            tokio::spawn(async move { auth.forget(&name, &url, &oauth).await });
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

    /// Reloads whenever the config file's text changes, until the app shuts down. A change is
    /// applied once it reads the same on two polls in a row: an editor (or `fs::write`) that
    /// truncates and then writes leaves an empty or half-written file for a moment, and that
    /// moment is not the person's edit. The text applied is the text compared, never a third
    /// read that could land mid-write again.
    pub async fn watch_config(&self, every: Duration) {
        let path = self.config_path();
        let mut text = SettledText::new(read_config_text(&path));
        loop {
            tokio::select! {
                _ = self.stopping.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            let Some(now) = text.observe(read_config_text(&path)) else {
                continue;
            };
            let loaded = match now {
                Some(bytes) => crate::config::parse_bytes(&path, &bytes),
                None => crate::config::load(&path),
            };
            let reload = self.apply_config(loaded).await;
            tracing::debug!(?reload, "config file changed");
        }
    }
}

fn read_config_text(path: &std::path::Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}

/// The config file's text as polled: a new text counts once two polls in a row read it.
struct SettledText {
    seen: Option<Vec<u8>>,
    settling: Option<Option<Vec<u8>>>,
}

impl SettledText {
    fn new(seen: Option<Vec<u8>>) -> Self {
        SettledText {
            seen,
            settling: None,
        }
    }

    /// Takes one poll's read (`None`: the file could not be read); returns the text to apply
    /// when it has settled on one that differs from the last applied.
    fn observe(&mut self, now: Option<Vec<u8>>) -> Option<Option<Vec<u8>>> {
        if now == self.seen {
            self.settling = None;
            None
        } else if self.settling.as_ref() == Some(&now) {
            self.settling = None;
            self.seen = now.clone();
            Some(now)
        } else {
            self.settling = Some(now);
            None
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

/// The remote servers of `running` that `loaded` no longer reaches by the same name and
/// address (removed, renamed or moved): the sign-ins kept for them are nobody's now.
fn no_longer_reached(
    running: &[ServerConfig],
    loaded: &[ServerConfig],
) -> Vec<(String, String, crate::config::OAuthConfig)> {
    let address = |server: &ServerConfig| match &server.transport {
        crate::config::TransportConfig::Http { url, .. } => Some(url.clone()),
        crate::config::TransportConfig::Stdio { .. } => None,
    };
    running
        .iter()
        .filter_map(|server| Some((server, address(server)?)))
        .filter(|(server, url)| {
            !loaded
                .iter()
                .any(|now| now.name == server.name && address(now).as_ref() == Some(url))
        })
        .map(|(server, url)| (server.name.clone(), url, server.oauth.clone()))
        .collect()
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

    /// A save that truncates and then writes: the empty moment is never applied, the text
    /// that follows is, once, and a file back to what was applied changes nothing.
    #[test]
    fn only_a_text_read_twice_in_a_row_is_applied() {
        let text = |s: &str| Some(s.as_bytes().to_vec());
        let mut settled = SettledText::new(text("{}"));
        assert_eq!(settled.observe(text("{}")), None);
        assert_eq!(settled.observe(text("")), None, "truncated, mid-save");
        assert_eq!(
            settled.observe(text("{\"a\":1}")),
            None,
            "first read of the edit"
        );
        assert_eq!(settled.observe(text("{\"a\":1}")), Some(text("{\"a\":1}")));
        assert_eq!(settled.observe(text("{\"a\":1}")), None, "applied once");
        assert_eq!(settled.observe(text("")), None);
        assert_eq!(settled.observe(text("{\"a\":1}")), None, "back as it was");
        assert_eq!(
            settled.observe(None),
            None,
            "gone for one poll: renamed over"
        );
        assert_eq!(
            settled.observe(None),
            Some(None),
            "gone for good is an edit too"
        );
    }
}
