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
mod vouch;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::transport::AuthClient;
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationMetadata,
    AuthorizationRequest, AuthorizationSession, CredentialStore, OAuthState,
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
    /// A sign-in finished and no `insufficient_scope` was counted since: only the first
    /// after each sign-in counts, so an agent making calls that need more cannot use up the
    /// person's sign-ins by itself.
    signed_in_since: std::sync::atomic::AtomicBool,
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
        // Tokens from an earlier run: the manager needs the server's metadata to refresh them,
        // and the refresh token goes where that says, so it is checked as at sign-in first.
        let held = store.load().await.map_err(|e| match e {
            AuthError::CredentialStoreError(e) => e,
            e => describe(&e),
        })?;
        let usable = match held.filter(|h| h.token_response.is_some()) {
            None => Ok(()),
            Some(held) => match manager.resolve_metadata().await {
                // Only the authorization server that granted them gets them back (rmcp compares
                // the two only when both name one).
                Ok(resolved) if resolved.metadata.issuer != held.issuer => Err(format!(
                    "the server now names another authorization server ({}) than the one that \
                     granted the saved sign-in ({})",
                    short(resolved.metadata.issuer.as_deref().unwrap_or("none")),
                    short(held.issuer.as_deref().unwrap_or("none"))
                )),
                Ok(resolved) => endpoints_vouched(&resolved.metadata, url)
                    .await
                    .map(|()| manager.set_metadata(resolved.metadata)),
                Err(e) => Err(describe(&e)),
            },
        };
        let restored = match usable {
            Ok(()) => manager.initialize_from_store().await.map(drop),
            Err(why) => Err(AuthError::InternalError(why)),
        };
        match restored {
            Ok(()) => {}
            Err(AuthError::CredentialStoreError(e)) => return Err(e),
            Err(e) => {
                tracing::warn!(server = name, error = %e, "the saved sign-in cannot be used; signing in again");
                store.set_aside().await;
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
            signed_in_since: std::sync::atomic::AtomicBool::new(false),
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
        let mut manager = manager_for(url, &server.store).await?;
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
        // rmcp's `start_authorization`, with the metadata looked at before anything is sent
        // where it says.
        let metadata = manager
            .resolve_metadata_from_challenge(request.challenge.as_deref())
            .await
            .map_err(|e| format!("cannot start the sign-in: {}", describe(&e)))?
            .metadata;
        endpoints_vouched(&metadata, url)
            .await
            .map_err(|why| format!("the sign-in is refused: {why}"))?;
        manager.set_metadata(metadata);
        let session = AuthorizationSession::new(manager, request)
            .await
            .map_err(|(_, e)| format!("cannot start the sign-in: {}", describe(&e)))?;
        let state = OAuthState::Session(session);
        let authorization_url = state
            .get_authorization_url()
            .await
            .map_err(|e| format!("cannot start the sign-in: {}", describe(&e)))?;
        // Exactly one `state`: an authorization endpoint that carries one of its own would
        // have the redirect listener wait for that public value instead of ours.
        let states: Vec<String> = url::Url::parse(&authorization_url)
            .map(|url| {
                url.query_pairs()
                    .filter(|(key, _)| key == "state")
                    .map(|(_, state)| state.into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let [sent_state] = <[String; 1]>::try_from(states).map_err(|states| {
            format!(
                "cannot start the sign-in: its address carries {} states, not one",
                states.len()
            )
        })?;
        loopback.expect_state(&sent_state);
        Ok(PendingSignIn {
            authorization_url,
            state,
            loopback,
            server,
        })
    }

    /// Forgets the server's tokens (from the secret store too), so its sessions need a new
    /// sign-in, then asks the authorization server to revoke them (RFC 7009), so a copy taken
    /// earlier stops working too. They are forgotten first: an authorization server that
    /// does not answer keeps nothing alive here.
    pub async fn sign_out(
        &self,
        name: &str,
        url: &str,
        config: &OAuthConfig,
    ) -> Result<Revocation, String> {
        let server = self.server(name, url).await?;
        // A refresh holds the manager while it saves what it got: had it run on after the
        // store was cleared, the new tokens would be saved, and used, after the sign-out.
        let mut manager = server.client.auth_manager.lock().await;
        let held = server
            .store
            .load()
            .await
            .map_err(|e| format!("cannot read the sign-in: {}", describe(&e)))?;
        server
            .store
            .clear()
            .await
            .map_err(|e| format!("cannot forget the sign-in: {}", describe(&e)))?;
        *manager = manager_for(url, &server.store).await?;
        drop(manager);
        *lock(&server.step_ups) = 0;
        let Some(held) = held.filter(|h| h.token_response.is_some()) else {
            return Ok(Revocation::NothingHeld);
        };
        let revoked =
            tokio::time::timeout(REVOCATION_WAIT, revoke(url, &server.store, &held, config))
                .await
                .unwrap_or_else(|_| {
                    Err(format!(
                        "it did not answer within {} s",
                        REVOCATION_WAIT.as_secs()
                    ))
                });
        Ok(match revoked {
            Ok(revocation) => revocation,
            Err(reason) => {
                tracing::warn!(
                    server = name,
                    reason,
                    "the sign-in's tokens were not revoked"
                );
                Revocation::Failed(reason)
            }
        })
    }

    /// Signs out of a server the person removed from the config, or gave another address:
    /// its tokens would otherwise stay in the secret store, unused but valid, and come back
    /// should an entry with that name and address return (an import, say).
    pub async fn forget(&self, name: &str, url: &str, config: &OAuthConfig) {
        match self.sign_out(name, url, config).await {
            Ok(Revocation::NothingHeld) => {}
            Ok(revocation) => {
                tracing::info!(
                    server = name,
                    told = ?revocation.told(),
                    "a removed server's sign-in forgotten"
                )
            }
            Err(e) => tracing::warn!(
                server = name,
                error = e,
                "a removed server's sign-in was not forgotten"
            ),
        }
        lock(&self.servers).remove(&key(name, url));
    }

    /// A request with the server's token went through: the step-up count starts over.
    pub fn succeeded(&self, name: &str, url: &str) {
        if let Some(server) = lock(&self.servers).get(&key(name, url)) {
            *lock(&server.step_ups) = 0;
        }
    }

    /// The server refused a request after a sign-in, before any went through: counted once
    /// for the sign-in it found wanting, however many requests it refused.
    pub fn refused_after_sign_in(&self, name: &str, url: &str) {
        if let Some(server) = lock(&self.servers).get(&key(name, url))
            && server
                .signed_in_since
                .swap(false, std::sync::atomic::Ordering::AcqRel)
        {
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
                // Its words, shown to the person: as short as the rest of what it says.
                return Err(if description.is_empty() {
                    format!("the authorization server refused: {}", short(&error))
                } else {
                    format!(
                        "the authorization server refused: {} ({})",
                        short(&error),
                        short(&description)
                    )
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
        self.server
            .signed_in_since
            .store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }
}

/// The metadata's `what` at `address`, if tokens may go there: https, or http on this computer.
fn secure_address(what: &str, address: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(address)
        .map_err(|e| format!("its {what} \"{}\" is not an address: {e}", short(address)))?;
    let local = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    if url.scheme() != "https" && !(url.scheme() == "http" && local) {
        return Err(format!(
            "its {what} {} is not https",
            url.host_str().unwrap_or("(no host)")
        ));
    }
    Ok(url)
}

fn same_host(a: &url::Url, b: &url::Url) -> bool {
    a.host_str()
        .zip(b.host_str())
        .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b))
}

/// Where the authorization server's metadata would have Countersign go, checked before it
/// goes there:
///
/// - Every endpoint is https, or on this computer (a loopback address or `localhost`): the
///   code, the PKCE verifier, a client secret and the tokens must not cross a network in
///   clear, nor may metadata read in clear steer them.
/// - The sign-in page's address sets none of the parameters Countersign adds (`state`,
///   PKCE's, the redirect, the client).
/// - An issuer on another host than the token endpoint vouches for it (below), so that a name
///   saved with the tokens cannot be claimed by metadata that sends them elsewhere.
/// - The code goes back where the person signed in. A server may name any authorization
///   server, including its own whose metadata names another provider's sign-in page and
///   keeps the token endpoint for itself (the "mix-up"): the person signs in at the provider
///   they trust and the code, with the verifier (and a configured client secret), would go to
///   the server, which can redeem it. So when the sign-in page is not on the issuer's host,
///   the token endpoint must be on the sign-in page's host. (Providers whose token endpoint
///   is elsewhere, such as Google's, keep their sign-in page on the issuer's host.) When it is
///   elsewhere, the issuer is returned: its own metadata must name those endpoints, since the
///   metadata at hand may only claim that issuer (see `vouch`).
pub(crate) fn endpoints_allowed(
    metadata: &AuthorizationMetadata,
) -> Result<Option<url::Url>, String> {
    let parse = secure_address;
    let page = parse("sign-in page", &metadata.authorization_endpoint)?;
    // Ours are added to its query: one of its own would stand beside ours, and the first
    // `state` may be the one the redirect is matched with.
    const OURS: [&str; 6] = [
        "state",
        "code_challenge",
        "code_challenge_method",
        "redirect_uri",
        "client_id",
        "response_type",
    ];
    if let Some((key, _)) = page
        .query_pairs()
        .find(|(key, _)| OURS.contains(&key.as_ref()))
    {
        return Err(format!(
            "its sign-in page's address sets `{}` itself",
            short(&key)
        ));
    }
    let token = parse("token endpoint", &metadata.token_endpoint)?;
    if let Some(registration) = &metadata.registration_endpoint {
        parse("registration endpoint", registration)?;
    }
    let issuer = match &metadata.issuer {
        Some(issuer) => Some(parse("issuer", issuer)?),
        None => None,
    };
    if same_host(&token, &page) {
        // One host takes the code and the tokens; an issuer named on another host must vouch
        // for it. Else a server's metadata claims a provider the person signed in with (its
        // issuer, the name saved with the tokens) and keeps both endpoints for itself: at the
        // next start the saved refresh token would go to it, and at sign-out both tokens.
        return Ok(issuer.filter(|issuer| !same_host(issuer, &token)));
    }
    match issuer.filter(|issuer| same_host(issuer, &page)) {
        Some(issuer) => Ok(Some(issuer)),
        None => Err(format!(
            "its sign-in page is at {} but the code would be sent to {}",
            page.host_str().unwrap_or_default(),
            token.host_str().unwrap_or_default()
        )),
    }
}

/// [`endpoints_allowed`], with the issuer's own word asked for where it is needed: before
/// the person signs in, before saved tokens are refreshed, and before they are revoked.
pub(crate) async fn endpoints_vouched(
    metadata: &AuthorizationMetadata,
    server_url: &str,
) -> Result<(), String> {
    match endpoints_allowed(metadata)? {
        None => Ok(()),
        Some(issuer) => {
            let server = url::Url::parse(server_url)
                .map_err(|e| format!("the server's address cannot be read: {e}"))?;
            vouch::vouched_by_issuer(&issuer, metadata, &server).await
        }
    }
}

/// What became of a signed-out server's tokens at its authorization server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revocation {
    /// There were none to revoke.
    NothingHeld,
    /// The authorization server revoked them.
    Revoked { host: String },
    /// It offers no revocation endpoint: they stay valid until they expire.
    NotOffered,
    /// It was asked and did not revoke them, or could not be asked, for this reason.
    Failed(String),
}

/// What the person is told once signed out: Countersign's own sentence, and apart from it the
/// reason the tokens were not revoked, which may quote the authorization server's words (shown
/// as its text, after the sentence, so they cannot turn it round: "…the tokens were revoked").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct SignedOut {
    pub told: String,
    pub reason: Option<String>,
}

impl Revocation {
    /// What the person is told once signed out.
    pub fn told(&self) -> SignedOut {
        let told = match self {
            Self::NothingHeld => "Signed out.".into(),
            // A host as the URL parser gives it (IDNA, ASCII): no sentence fits in one.
            Self::Revoked { host } => format!("Signed out; {host} revoked Countersign's tokens."),
            Self::NotOffered => "Signed out here. The authorization server offers no way to \
                revoke tokens, so they stay valid until they expire; revoke Countersign's access \
                at the provider if that matters."
                .into(),
            Self::Failed(_) => "Signed out here, but the authorization server did not revoke \
                the tokens; revoke Countersign's access at the provider if that matters."
                .into(),
        };
        let reason = match self {
            Self::Failed(reason) => Some(reason.clone()),
            _ => None,
        };
        SignedOut { told, reason }
    }
}

/// How long sign-out waits for the authorization server to revoke the tokens.
const REVOCATION_WAIT: Duration = Duration::from_secs(10);

/// Has the authorization server of `held` revoke its refresh and access tokens (RFC 7009).
/// They go only where they already went: the revocation endpoint must be on the token
/// endpoint's host, named by the same issuer as when they were granted.
async fn revoke(
    url: &str,
    store: &VaultStore,
    held: &rmcp::transport::auth::StoredCredentials,
    config: &OAuthConfig,
) -> Result<Revocation, String> {
    let manager = manager_for(url, store).await?;
    let metadata = manager
        .resolve_metadata()
        .await
        .map_err(|e| format!("its metadata could not be read: {}", describe(&e)))?
        .metadata;
    if held.issuer.is_none() && metadata.issuer.is_some() {
        return Err(
            "the sign-in does not say which authorization server granted it (it was made by \
             an earlier version of Countersign)"
                .into(),
        );
    }
    if metadata.issuer != held.issuer {
        return Err(format!(
            "the server now names another authorization server ({}) than the one that \
             granted the tokens ({})",
            short(metadata.issuer.as_deref().unwrap_or("none")),
            short(held.issuer.as_deref().unwrap_or("none"))
        ));
    }
    // The same issuer's name is no proof: the endpoints must be its own.
    endpoints_vouched(&metadata, url).await?;
    let Some(endpoint) = revocation_endpoint(&metadata)? else {
        return Ok(Revocation::NotOffered);
    };
    let tokens = serde_json::to_value(&held.token_response).unwrap_or_default();
    let http = reqwest::Client::builder()
        // A token is never sent on to wherever a redirect points.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
    // The refresh token first: revoking it ends the grant at most servers.
    for hint in ["refresh_token", "access_token"] {
        let Some(token) = tokens.get(hint).and_then(|t| t.as_str()) else {
            continue;
        };
        let mut form = vec![("token", token), ("token_type_hint", hint)];
        let mut request = http.post(endpoint.clone());
        // Client authentication as the server takes it (RFC 6749 2.3.1): a configured secret
        // by HTTP Basic, or in the form where the server takes only that; else the public
        // client's id in the form.
        match (&config.client_id, &config.client_secret) {
            (Some(id), Some(secret)) if secret_in_form(&metadata) => {
                form.push(("client_id", id));
                form.push(("client_secret", secret));
            }
            (Some(id), Some(secret)) => {
                request = request.basic_auth(
                    url::form_urlencoded::byte_serialize(id.as_bytes()).collect::<String>(),
                    Some(
                        url::form_urlencoded::byte_serialize(secret.as_bytes()).collect::<String>(),
                    ),
                );
            }
            _ => form.push(("client_id", &held.client_id)),
        }
        let form = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let answer = request
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(form)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "{} could not be reached: {e}",
                    endpoint.host_str().unwrap_or_default()
                )
            })?;
        let status = answer.status();
        if !status.is_success() {
            // Only as much as is shown: a refusal may be endless.
            let body = crate::mcp::http_post::read_prefix(answer.bytes_stream(), 1024).await;
            return Err(format!("it answered {status}: {}", short(body.trim())));
        }
    }
    Ok(Revocation::Revoked {
        host: endpoint.host_str().unwrap_or_default().to_owned(),
    })
}

/// Whether the authorization server takes a client's secret only in the form
/// (`client_secret_post`), by the methods it names for revocation, else for its token
/// endpoint; HTTP Basic is every server's default.
fn secret_in_form(metadata: &AuthorizationMetadata) -> bool {
    let methods = |key: &str| {
        metadata
            .additional_fields
            .get(key)
            .and_then(serde_json::Value::as_array)
            .map(|methods| {
                methods
                    .iter()
                    .filter_map(serde_json::Value::as_str)
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
    };
    methods("revocation_endpoint_auth_methods_supported")
        .or_else(|| methods("token_endpoint_auth_methods_supported"))
        .is_some_and(|m| {
            m.iter().any(|m| m == "client_secret_post")
                && !m.iter().any(|m| m == "client_secret_basic")
        })
}

/// The metadata's `revocation_endpoint`, if it names one the tokens may go to: https (or
/// this computer) and on the token endpoint's host.
fn revocation_endpoint(metadata: &AuthorizationMetadata) -> Result<Option<url::Url>, String> {
    let Some(named) = metadata
        .additional_fields
        .get("revocation_endpoint")
        .filter(|named| !named.is_null())
    else {
        return Ok(None);
    };
    let named = named
        .as_str()
        .ok_or("its revocation endpoint is not an address")?;
    let endpoint = secure_address("revocation endpoint", named)?;
    let token = secure_address("token endpoint", &metadata.token_endpoint)?;
    if !same_host(&endpoint, &token) {
        return Err(format!(
            "its revocation endpoint is at {} but the tokens were granted by {}",
            endpoint.host_str().unwrap_or_default(),
            token.host_str().unwrap_or_default()
        ));
    }
    Ok(Some(endpoint))
}

fn short(text: &str) -> String {
    text.chars().take(120).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(issuer: Option<&str>, page: &str, token: &str) -> AuthorizationMetadata {
        serde_json::from_value(serde_json::json!({
            "issuer": issuer,
            "authorization_endpoint": page,
            "token_endpoint": token,
            "registration_endpoint": null,
        }))
        .unwrap()
    }

    #[test]
    fn revocation_goes_to_the_token_endpoints_host_with_the_client_auth_it_takes() {
        let with = |extra: serde_json::Value| {
            let mut m = metadata(
                Some("https://a.example"),
                "https://a.example/authorize",
                "https://a.example/token",
            );
            m.additional_fields = serde_json::from_value(extra).unwrap();
            m
        };
        let endpoint = |extra| revocation_endpoint(&with(extra));
        assert_eq!(
            endpoint(serde_json::json!({"revocation_endpoint": "https://a.example/revoke"}))
                .unwrap()
                .map(|u| u.to_string()),
            Some("https://a.example/revoke".into())
        );
        assert_eq!(endpoint(serde_json::json!({})).unwrap(), None);
        assert_eq!(
            endpoint(serde_json::json!({"revocation_endpoint": null})).unwrap(),
            None
        );
        let refused = endpoint(serde_json::json!({"revocation_endpoint": "https://b.example/r"}));
        assert!(refused.unwrap_err().contains("at b.example"));
        let clear = endpoint(serde_json::json!({"revocation_endpoint": "http://a.example/r"}));
        assert!(clear.unwrap_err().contains("not https"));
        // HTTP Basic unless the server takes the secret only in the form.
        assert!(!secret_in_form(&with(serde_json::json!({}))));
        assert!(secret_in_form(&with(serde_json::json!({
            "token_endpoint_auth_methods_supported": ["client_secret_post"]}))));
        assert!(!secret_in_form(&with(serde_json::json!({
            "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"]}))));
        // Revocation's own list first.
        assert!(!secret_in_form(&with(serde_json::json!({
            "token_endpoint_auth_methods_supported": ["client_secret_post"],
            "revocation_endpoint_auth_methods_supported": ["client_secret_basic"]}))));
    }

    #[test]
    fn the_code_goes_only_where_the_person_signed_in_and_never_in_clear() {
        let allowed = |issuer: Option<&str>, page: &str, token: &str| {
            endpoints_allowed(&metadata(issuer, page, token))
        };
        // Providers as they are: one host; Google's token endpoint elsewhere, its page on
        // the issuer's host; Cognito's page and token endpoint on one host, not the issuer's.
        assert!(
            allowed(
                Some("https://a.example"),
                "https://a.example/authorize",
                "https://a.example/token"
            )
            .is_ok()
        );
        assert!(
            allowed(
                Some("https://accounts.google.com"),
                "https://accounts.google.com/o/oauth2/v2/auth",
                "https://oauth2.googleapis.com/token"
            )
            .is_ok()
        );
        assert!(
            allowed(
                Some("https://cognito-idp.eu-west-1.amazonaws.com/pool"),
                "https://x.auth.eu-west-1.amazoncognito.com/oauth2/authorize",
                "https://x.auth.eu-west-1.amazoncognito.com/oauth2/token"
            )
            .is_ok()
        );
        assert!(
            allowed(
                Some("http://127.0.0.1:4000"),
                "http://127.0.0.1:4000/authorize",
                "http://localhost:4000/token"
            )
            .is_ok(),
            "the page on the issuer's host: its code, its token endpoint"
        );
        assert!(
            allowed(
                Some("http://127.0.0.1:4000"),
                "http://127.0.0.1:4000/authorize",
                "http://127.0.0.1:4000/token"
            )
            .is_ok()
        );
        // Which of them the issuer must vouch for: Google's (its token endpoint off its page's
        // host), Cognito's and any whose one host is not the issuer's. Else metadata claiming
        // the issuer of a provider the person signed in with, with both endpoints its own,
        // would get the tokens saved from that provider at the next start.
        let vouching = |issuer: &str, page: &str, token: &str| {
            allowed(Some(issuer), page, token)
                .unwrap()
                .map(|issuer| issuer.to_string())
        };
        assert_eq!(
            vouching(
                "https://a.example",
                "https://a.example/authorize",
                "https://a.example/token"
            ),
            None
        );
        assert_eq!(
            vouching(
                "https://login.real.example",
                "https://evil.example/authorize",
                "https://evil.example/token"
            )
            .as_deref(),
            Some("https://login.real.example/")
        );
        assert_eq!(
            vouching(
                "https://cognito-idp.eu-west-1.amazonaws.com/pool",
                "https://x.auth.eu-west-1.amazoncognito.com/oauth2/authorize",
                "https://x.auth.eu-west-1.amazoncognito.com/oauth2/token"
            )
            .as_deref(),
            Some("https://cognito-idp.eu-west-1.amazonaws.com/pool")
        );
        // The mix-up: the server's own issuer, the provider's page, the server's token endpoint.
        let mixed = allowed(
            Some("https://evil.example"),
            "https://login.real.example/authorize",
            "https://evil.example/token",
        );
        assert_eq!(
            mixed.unwrap_err(),
            "its sign-in page is at login.real.example but the code would be sent to evil.example"
        );
        assert!(
            allowed(
                None,
                "https://login.real.example/authorize",
                "https://evil.example/token"
            )
            .is_err()
        );
        // In clear, off this computer.
        let clear = allowed(
            Some("https://a.example"),
            "https://a.example/authorize",
            "http://a.example/token",
        );
        assert_eq!(
            clear.unwrap_err(),
            "its token endpoint a.example is not https"
        );
        assert!(
            allowed(
                Some("http://a.example"),
                "https://a.example/authorize",
                "https://a.example/token"
            )
            .is_err()
        );
        assert!(
            allowed(
                Some("https://a.example"),
                "javascript:alert(1)",
                "https://a.example/token"
            )
            .is_err()
        );
        let own_state = allowed(
            Some("https://a.example"),
            "https://a.example/authorize?tenant=x&state=public",
            "https://a.example/token",
        );
        assert_eq!(
            own_state.unwrap_err(),
            "its sign-in page's address sets `state` itself"
        );
        assert!(
            allowed(
                Some("https://a.example"),
                "https://a.example/authorize?tenant=x",
                "https://a.example/token"
            )
            .is_ok()
        );
        let mut registering = metadata(
            Some("https://a.example"),
            "https://a.example/authorize",
            "https://a.example/token",
        );
        registering.registration_endpoint = Some("http://203.0.113.7/register".into());
        assert!(endpoints_allowed(&registering).is_err());
    }
}
