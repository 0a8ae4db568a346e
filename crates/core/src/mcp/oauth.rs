//! Signing in to remote servers as the MCP authorization spec describes: the server's 401
//! challenge, protected resource and authorization server metadata (with the spec's
//! fallbacks), client registration (pre-registered, client ID metadata document, dynamic, in
//! that order), the authorization code flow with PKCE through the person's browser and a
//! loopback redirect, refresh, and step-up on `insufficient_scope`.
//!
//! rmcp's `auth` module does the protocol (it passes the official conformance scenarios in
//! its own CI); this module decides what Countersign keeps and who is asked: tokens live in
//! the desktop's secret store (`vault`), the authorization address goes to the person as a
//! URL question through the same policy and dialog as a server's, and one sign-in serves
//! every session with the server, the app's and the gateway's alike.

pub mod loopback;
pub mod vault;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::transport::AuthClient;
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationRequest, CredentialStore,
    OAuthState,
};
use serde::Serialize;

use crate::config::OAuthConfig;
use crate::lock;
use crate::mcp::raw::{RawRequests, TapHttpClient};
use loopback::{Callback, Loopback};
use vault::{Vault, VaultStore};

/// How long a started sign-in waits for the browser to come back.
pub const SIGN_IN_WAIT: Duration = Duration::from_secs(600);
/// Sign-ins in a row that the server answered with `insufficient_scope`, with no request
/// succeeding between them, before Countersign stops offering another: a server that
/// refuses every scope it asks for would otherwise loop the person through the browser.
pub const MAX_STEP_UPS: u32 = 3;
/// The name Countersign registers under.
const CLIENT_NAME: &str = "Countersign";

/// Whether and how a server is signed in to, as the person is told (never a token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct SignInView {
    pub signed_in: bool,
    /// Where the tokens are kept.
    pub kept_in: vault::VaultKind,
    /// The scopes granted, as the authorization server said.
    pub scopes: Vec<String>,
}

/// The sign-ins of every server, shared by the app's sessions and the gateway's.
#[derive(Clone)]
pub struct Auth {
    vault: Vault,
    servers: Arc<Mutex<HashMap<String, Arc<ServerAuth>>>>,
}

/// One server's sign-in. Every session with the server holds a clone of `client`, so they
/// share one authorization manager: a refresh or a new sign-in reaches them all.
struct ServerAuth {
    client: AuthClient<TapHttpClient>,
    store: VaultStore,
    step_ups: Mutex<u32>,
}

/// A sign-in waiting for the person's browser to come back.
pub struct PendingSignIn {
    pub authorization_url: String,
    state: OAuthState,
    loopback: Loopback,
    server: Arc<ServerAuth>,
}

impl Auth {
    pub fn new(vault: Vault) -> Auth {
        Auth {
            vault,
            servers: Arc::default(),
        }
    }

    pub fn vault(&self) -> &Vault {
        &self.vault
    }

    /// The HTTP client a session with `url` uses: the server's shared sign-in around a tap.
    pub async fn client(
        &self,
        name: &str,
        url: &str,
        raw: Arc<RawRequests>,
        http: &reqwest::Client,
    ) -> Result<AuthClient<TapHttpClient>, String> {
        let server = self.server(name, url).await?;
        let mut client = server.client.clone();
        // The gateway posts calls itself with this sign-in's token as it is at each post.
        client.http_client = TapHttpClient::new(http.clone(), raw)
            .with_direct_way()
            .signed_in_by(client.auth_manager.clone());
        Ok(client)
    }

    async fn server(&self, name: &str, url: &str) -> Result<Arc<ServerAuth>, String> {
        let key = key(name, url);
        if let Some(found) = lock(&self.servers).get(&key) {
            return Ok(found.clone());
        }
        let store = VaultStore::new(self.vault.clone(), key.clone(), name);
        let mut manager = manager_for(url, &store).await?;
        // Tokens from an earlier run: the manager needs the server's metadata to refresh them.
        match manager.initialize_from_store().await {
            Ok(_) => {}
            Err(AuthError::CredentialStoreError(e)) => return Err(e),
            Err(e) => {
                tracing::warn!(server = name, error = %e, "the saved sign-in cannot be used; signing in again");
                manager = manager_for(url, &store).await?;
            }
        }
        let http = reqwest::Client::builder()
            .redirect(crate::mcp::connect::same_origin_redirects())
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        let server = Arc::new(ServerAuth {
            client: AuthClient::new(TapHttpClient::new(http, RawRequests::new()), manager),
            store,
            step_ups: Mutex::new(0),
        });
        Ok(lock(&self.servers).entry(key).or_insert(server).clone())
    }

    /// Starts a sign-in: discovers the server's authorization server from `challenge` (the
    /// `WWW-Authenticate` of its 401 or 403, when there was one), registers, and returns the
    /// address the person opens. Refused after [`MAX_STEP_UPS`] sign-ins the server found
    /// insufficient in a row.
    pub async fn begin(
        &self,
        name: &str,
        url: &str,
        config: &OAuthConfig,
        challenge: Option<&str>,
    ) -> Result<PendingSignIn, String> {
        let server = self.server(name, url).await?;
        if *lock(&server.step_ups) >= MAX_STEP_UPS {
            return Err(format!(
                "the server refused the access of {MAX_STEP_UPS} sign-ins in a row; sign out to start over"
            ));
        }
        let loopback = Loopback::bind(config.callback_port.unwrap_or(0)).await?;
        let manager = manager_for(url, &server.store).await?;
        let mut request = AuthorizationRequest::new(loopback.redirect_uri.clone())
            .with_client_name(CLIENT_NAME)
            // The spec's scope choice: the challenge's `scope`, else the resource's
            // `scopes_supported`, else none (rmcp's default unites them).
            .with_initial_scope_selection();
        if let Some(id) = &config.client_id {
            request = request.with_preregistered_client(id.clone());
            if let Some(secret) = &config.client_secret {
                request = request.with_client_secret(secret.clone());
            }
        }
        if let Some(document) = &config.client_metadata_url {
            request = request.with_client_metadata_url(document.clone());
        }
        if !config.scopes.is_empty() {
            request = request.with_scopes(config.scopes.iter().cloned());
        }
        if let Some(challenge) = challenge {
            request = request.with_challenge(challenge.to_owned());
        }
        let mut state = OAuthState::Unauthorized(manager);
        state
            .start_authorization(request)
            .await
            .map_err(|e| format!("cannot start the sign-in: {}", describe(&e)))?;
        let authorization_url = state
            .get_authorization_url()
            .await
            .map_err(|e| format!("cannot start the sign-in: {}", describe(&e)))?;
        let sent_state = url::Url::parse(&authorization_url)
            .ok()
            .and_then(|url| {
                url.query_pairs()
                    .find(|(key, _)| key == "state")
                    .map(|(_, state)| state.into_owned())
            })
            .ok_or("cannot start the sign-in: its address carries no state")?;
        loopback.expect_state(&sent_state);
        Ok(PendingSignIn {
            authorization_url,
            state,
            loopback,
            server,
        })
    }

    /// Forgets the server's tokens (from the secret store too); its sessions need a new
    /// sign-in.
    pub async fn sign_out(&self, name: &str, url: &str) -> Result<(), String> {
        let server = self.server(name, url).await?;
        server
            .store
            .clear()
            .await
            .map_err(|e| format!("cannot forget the sign-in: {}", describe(&e)))?;
        let fresh = manager_for(url, &server.store).await?;
        *server.client.auth_manager.lock().await = fresh;
        *lock(&server.step_ups) = 0;
        Ok(())
    }

    /// A request with the server's token went through: the step-up count starts over.
    pub fn succeeded(&self, name: &str, url: &str) {
        if let Some(server) = lock(&self.servers).get(&key(name, url)) {
            *lock(&server.step_ups) = 0;
        }
    }

    /// The server answered `insufficient_scope` to a signed-in request.
    pub fn insufficient(&self, name: &str, url: &str) {
        if let Some(server) = lock(&self.servers).get(&key(name, url)) {
            *lock(&server.step_ups) += 1;
        }
    }

    /// Whether the server is signed in to, from what this run already knows (no bus or
    /// network traffic); `None` before any session with it started.
    pub fn known_view(&self, name: &str, url: &str) -> Option<SignInView> {
        let server = lock(&self.servers).get(&key(name, url)).cloned()?;
        let credentials = server.store.cached()?;
        Some(SignInView {
            signed_in: credentials
                .as_ref()
                .is_some_and(|c| c.token_response.is_some()),
            kept_in: self.vault.kind(),
            scopes: credentials.map(|c| c.granted_scopes).unwrap_or_default(),
        })
    }
}

impl PendingSignIn {
    /// Waits for the browser to come back (at most `wait`), exchanges the code, keeps the
    /// tokens, and hands them to every session with the server.
    pub async fn finish(mut self, wait: Duration) -> Result<(), String> {
        let callback = tokio::time::timeout(wait, self.loopback.next())
            .await
            .map_err(|_| format!("no sign-in came back within {} s", wait.as_secs()))?
            .ok_or("the sign-in redirect closed")?;
        let url = match callback {
            Callback::Code { url } => url,
            Callback::Refused { error, description } => {
                return Err(if description.is_empty() {
                    format!("the authorization server refused: {error}")
                } else {
                    format!("the authorization server refused: {error} ({description})")
                });
            }
        };
        let callback = AuthorizationCallback::from_redirect_url(&url)
            .map_err(|e| format!("the sign-in came back unreadable: {}", describe(&e)))?;
        self.state
            .handle_callback_with_issuer(
                &callback.code,
                &callback.csrf_token,
                callback.issuer.as_deref(),
            )
            .await
            .map_err(|e| format!("the sign-in failed: {}", describe(&e)))?;
        let manager = self
            .state
            .into_authorization_manager()
            .ok_or("the sign-in ended in an unexpected state")?;
        *self.server.client.auth_manager.lock().await = manager;
        Ok(())
    }
}

async fn manager_for(url: &str, store: &VaultStore) -> Result<AuthorizationManager, String> {
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| format!("cannot prepare the sign-in: {}", describe(&e)))?;
    manager.set_credential_store(store.clone());
    Ok(manager)
}

/// Tokens are kept per server name and address: a changed address never receives the
/// tokens another address issued.
fn key(name: &str, url: &str) -> String {
    format!("{name}\n{url}")
}

/// An error in words, with nothing secret in it (rmcp's errors name endpoints and OAuth
/// error codes, never tokens).
fn describe(e: &AuthError) -> String {
    e.to_string()
}
