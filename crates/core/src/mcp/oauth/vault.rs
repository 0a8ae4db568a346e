//! Where sign-in tokens are kept: the desktop's secret store (the freedesktop Secret Service,
//! which GNOME Keyring, KWallet and KeePassXC provide), never a file of ours. Where no secret
//! store answers, tokens live in this process's memory only, and the app says so: the person
//! signs in again after a restart.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::lock;
use async_trait::async_trait;
use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use secret_service::{EncryptionType, SecretService};
use serde::Serialize;

/// How long start-up waits for the secret store to answer.
pub const DETECT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The attribute every item of ours carries, so a search never finds another program's.
const APPLICATION: &str = "countersign";

/// Which store holds tokens, as the person is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub enum VaultKind {
    /// The desktop's secret store.
    SecretService,
    /// No secret store answered: tokens are kept in memory until the app quits.
    Memory,
}

#[derive(Clone)]
pub struct Vault {
    kind: VaultKind,
    memory: Arc<Mutex<HashMap<String, String>>>,
}

impl Vault {
    /// The Secret Service on the session bus if one answers (within [`DETECT_WAIT`]: the app
    /// starts after this, and a hung bus must not hold its window back), else memory.
    pub async fn detect() -> Vault {
        let probe = async {
            let service = SecretService::connect(EncryptionType::Dh)
                .await
                .map_err(|e| format!("no secret store on the session bus: {e}"))?;
            service
                .get_default_collection()
                .await
                .map(|_| ())
                .map_err(|e| format!("the secret store has no default collection: {e}"))
        };
        let kind = match tokio::time::timeout(DETECT_WAIT, probe).await {
            Ok(Ok(())) => VaultKind::SecretService,
            Ok(Err(reason)) => {
                tracing::warn!(%reason, "sign-ins are kept in memory");
                VaultKind::Memory
            }
            Err(_) => {
                tracing::warn!(
                    "the secret store did not answer within {} s; sign-ins are kept in memory",
                    DETECT_WAIT.as_secs()
                );
                VaultKind::Memory
            }
        };
        Vault::of_kind(kind)
    }

    /// Memory only (tests, and machines without a secret store).
    pub fn memory() -> Vault {
        Vault::of_kind(VaultKind::Memory)
    }

    fn of_kind(kind: VaultKind) -> Vault {
        Vault {
            kind,
            memory: Arc::default(),
        }
    }

    pub fn kind(&self) -> VaultKind {
        self.kind
    }

    pub async fn get(&self, key: &str) -> Result<Option<String>, String> {
        match self.kind {
            VaultKind::Memory => Ok(lock(&self.memory).get(key).cloned()),
            VaultKind::SecretService => {
                let service = connect().await?;
                let found = service
                    .search_items(attributes(key))
                    .await
                    .map_err(|e| format!("cannot search the secret store: {e}"))?;
                let item = match (found.unlocked.first(), found.locked.first()) {
                    (Some(item), _) => item,
                    (None, Some(item)) => {
                        // Locked: the store asks the person to unlock it, as it does for
                        // every program that keeps passwords there.
                        item.unlock()
                            .await
                            .map_err(|e| format!("the secret store stayed locked: {e}"))?;
                        item
                    }
                    (None, None) => return Ok(None),
                };
                let secret = item
                    .get_secret()
                    .await
                    .map_err(|e| format!("cannot read from the secret store: {e}"))?;
                String::from_utf8(secret)
                    .map(Some)
                    .map_err(|_| "the secret store holds an unreadable sign-in".into())
            }
        }
    }

    pub async fn set(&self, key: &str, label: &str, value: &str) -> Result<(), String> {
        match self.kind {
            VaultKind::Memory => {
                lock(&self.memory).insert(key.to_owned(), value.to_owned());
                Ok(())
            }
            VaultKind::SecretService => {
                let service = connect().await?;
                let collection = service
                    .get_default_collection()
                    .await
                    .map_err(|e| format!("the secret store has no default collection: {e}"))?;
                collection
                    .ensure_unlocked()
                    .await
                    .map_err(|e| format!("the secret store stayed locked: {e}"))?;
                collection
                    .create_item(
                        label,
                        attributes(key),
                        value.as_bytes(),
                        true,
                        "application/json",
                    )
                    .await
                    .map(|_| ())
                    .map_err(|e| format!("cannot write to the secret store: {e}"))
            }
        }
    }

    pub async fn delete(&self, key: &str) -> Result<(), String> {
        match self.kind {
            VaultKind::Memory => {
                lock(&self.memory).remove(key);
                Ok(())
            }
            VaultKind::SecretService => {
                let service = connect().await?;
                let found = service
                    .search_items(attributes(key))
                    .await
                    .map_err(|e| format!("cannot search the secret store: {e}"))?;
                for item in found.unlocked.iter().chain(found.locked.iter()) {
                    item.delete()
                        .await
                        .map_err(|e| format!("cannot delete from the secret store: {e}"))?;
                }
                Ok(())
            }
        }
    }
}

async fn connect() -> Result<SecretService<'static>, String> {
    SecretService::connect(EncryptionType::Dh)
        .await
        .map_err(|e| format!("the secret store does not answer: {e}"))
}

fn attributes(key: &str) -> HashMap<&str, &str> {
    HashMap::from([("application", APPLICATION), ("server", key)])
}

/// rmcp's credential store for one server, kept in the vault. A copy stays in memory so a
/// request does not go to the session bus each time it needs its token.
#[derive(Clone)]
pub struct VaultStore {
    vault: Vault,
    key: String,
    label: String,
    cache: Arc<tokio::sync::Mutex<Option<Option<StoredCredentials>>>>,
}

impl VaultStore {
    pub fn new(vault: Vault, key: String, server: &str) -> Self {
        VaultStore {
            vault,
            key,
            label: format!("Countersign sign-in for {server}"),
            cache: Arc::default(),
        }
    }

    /// The saved sign-in is not to be used this run (its authorization server cannot be
    /// trusted with it now): for rmcp there is none, so the server's 401 asks the person to
    /// sign in again, whose sign-in replaces it. It stays in the vault until then.
    pub async fn set_aside(&self) {
        *self.cache.lock().await = Some(None);
    }

    /// What was last loaded or saved, when that is known without waiting.
    pub fn cached(&self) -> Option<Option<StoredCredentials>> {
        self.cache.try_lock().ok().and_then(|c| c.clone())
    }
}

fn store_error(message: String) -> AuthError {
    AuthError::CredentialStoreError(message)
}

#[async_trait]
impl CredentialStore for VaultStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let mut cache = self.cache.lock().await;
        if let Some(cached) = cache.as_ref() {
            return Ok(cached.clone());
        }
        let loaded = match self.vault.get(&self.key).await.map_err(store_error)? {
            None => None,
            // What cannot be read is as good as absent: the person signs in again.
            Some(text) => serde_json::from_str(&text).ok(),
        };
        *cache = Some(loaded.clone());
        Ok(loaded)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let text = serde_json::to_string(&credentials)
            .map_err(|e| store_error(format!("cannot write the sign-in: {e}")))?;
        let mut cache = self.cache.lock().await;
        self.vault
            .set(&self.key, &self.label, &text)
            .await
            .map_err(store_error)?;
        *cache = Some(Some(credentials));
        Ok(())
    }

    async fn clear(&self) -> Result<(), AuthError> {
        let mut cache = self.cache.lock().await;
        self.vault.delete(&self.key).await.map_err(store_error)?;
        *cache = Some(None);
        Ok(())
    }
}
