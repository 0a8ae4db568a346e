//! Whether an issuer vouches for a token endpoint on another host than its sign-in page.
//!
//! Some providers keep their token endpoint on a host of its own (Google's sign-in page is on
//! `accounts.google.com`, its token endpoint on `oauth2.googleapis.com`). But the metadata that
//! says so comes by way of the MCP server, and rmcp checks its `issuer` only when it was read
//! from that issuer's own well-known address: a server can name metadata at any other address
//! that claims a provider's issuer and sign-in page and keeps the token endpoint for itself
//! (the "mix-up"). So such metadata counts only when the issuer's own metadata, read from the
//! issuer's own well-known addresses, names the same endpoints.

use std::time::Duration;

use futures::StreamExt;
use rmcp::transport::auth::AuthorizationMetadata;

use crate::reach::{Reach, reach};

/// How long the issuer's own metadata is waited for, and how large it may be.
const WAIT: Duration = Duration::from_secs(10);
const MAX_DOCUMENT: usize = 1024 * 1024;

/// The addresses at which `issuer` publishes its own metadata: RFC 8414's (the well-known
/// path inserted before the issuer's path), then OpenID Connect's, inserted and appended.
pub(super) fn issuer_documents(issuer: &url::Url) -> Vec<url::Url> {
    let path = issuer.path().trim_end_matches('/');
    let mut origin = issuer.clone();
    origin.set_query(None);
    origin.set_fragment(None);
    let at = |path: String| {
        let mut address = origin.clone();
        address.set_path(&path);
        address
    };
    let mut documents = vec![
        at(format!("/.well-known/oauth-authorization-server{path}")),
        at(format!("/.well-known/openid-configuration{path}")),
        at(format!("{path}/.well-known/openid-configuration")),
    ];
    documents.dedup();
    documents
}

/// An issuer identifier as compared: a root path's slash is no difference (RFC 8414 writes
/// `https://a.example`, many providers `https://a.example/`).
fn same_issuer(a: &str, b: &str) -> bool {
    a.strip_suffix('/').unwrap_or(a) == b.strip_suffix('/').unwrap_or(b)
}

/// Whether `own` (the issuer's own metadata) names every endpoint `claimed` would have
/// Countersign use: the sign-in page, the token endpoint, and the registration and revocation
/// endpoints where `claimed` names them.
pub(super) fn names_the_same_endpoints(
    own: &AuthorizationMetadata,
    claimed: &AuthorizationMetadata,
) -> bool {
    let revocation = |m: &AuthorizationMetadata| {
        m.additional_fields
            .get("revocation_endpoint")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    own.authorization_endpoint == claimed.authorization_endpoint
        && own.token_endpoint == claimed.token_endpoint
        && (claimed.registration_endpoint.is_none()
            || own.registration_endpoint == claimed.registration_endpoint)
        && (revocation(claimed).is_none() || revocation(own) == revocation(claimed))
}

/// The addresses `url`'s host names, with its port: itself when an address, else what it
/// resolves to.
async fn addresses_of(url: &url::Url) -> std::io::Result<Vec<std::net::SocketAddr>> {
    let port = url.port_or_known_default().unwrap_or(443);
    Ok(match url.host() {
        Some(url::Host::Ipv4(ip)) => vec![(ip, port).into()],
        Some(url::Host::Ipv6(ip)) => vec![(ip, port).into()],
        _ => tokio::net::lookup_host((url.host_str().unwrap_or_default(), port))
            .await?
            .collect(),
    })
}

/// How far in the MCP server's own address reaches: what it names as its issuer may reach as
/// far, no further (a server on this computer may have its authorization server here too, an
/// intranet server on the LAN; a server on the internet may not send Countersign to this
/// computer's or the LAN's services).
async fn reach_of_server(server: &url::Url) -> Reach {
    if let Some(url::Host::Domain(d)) = server.host()
        && d.eq_ignore_ascii_case("localhost")
    {
        return Reach::Loopback;
    }
    addresses_of(server)
        .await
        .unwrap_or_default()
        .iter()
        .map(|a| reach(a.ip()))
        .filter(|r| *r != Reach::Never)
        .max()
        .unwrap_or(Reach::Public)
}

/// Whether a request to `url` goes through a proxy set in the environment, which resolves
/// its host itself (as rmcp's metadata fetches, whose filter leaves proxied hosts alone).
fn proxied(url: &url::Url) -> bool {
    let names: &[&str] = if url.scheme() == "https" {
        &["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]
    } else {
        &["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
    };
    names
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
}

/// The addresses `issuer`'s host resolves to, each within what `server` may reach (see
/// [`reach_of_server`]); the request is pinned to them, so a second answer cannot differ.
/// `None` for a host a proxy will resolve.
async fn issuer_addresses(
    issuer: &url::Url,
    server: &url::Url,
) -> Result<Option<Vec<std::net::SocketAddr>>, String> {
    let host = issuer.host_str().unwrap_or_default();
    if matches!(issuer.host(), Some(url::Host::Domain(_))) && proxied(issuer) {
        return Ok(None);
    }
    let addrs = addresses_of(issuer)
        .await
        .map_err(|e| format!("the issuer it claims ({host}) cannot be found: {e}"))?;
    let allowed = reach_of_server(server).await.max(Reach::Public);
    match addrs.iter().find(|a| {
        let r = reach(a.ip());
        r == Reach::Never || r > allowed
    }) {
        Some(refused) => Err(format!(
            "the issuer it claims ({host}) is at {}, which a server at {} may not send \
             Countersign to",
            refused.ip(),
            server.host_str().unwrap_or_default()
        )),
        None if addrs.is_empty() => Err(format!("the issuer it claims ({host}) has no address")),
        None => Ok(Some(addrs)),
    }
}

/// Reads `issuer`'s own metadata and checks it names `claimed`'s endpoints. A document that
/// names another issuer says nothing for this one; no document, or one that names other
/// endpoints, is a no. Only an issuer within the MCP `server`'s reach is asked.
pub(super) async fn vouched_by_issuer(
    issuer: &url::Url,
    claimed: &AuthorizationMetadata,
    server: &url::Url,
) -> Result<(), String> {
    let addrs = issuer_addresses(issuer, server).await?;
    let mut http = reqwest::Client::builder()
        // The issuer's own address, not wherever it points.
        .redirect(reqwest::redirect::Policy::none())
        .timeout(WAIT);
    if let (Some(url::Host::Domain(domain)), Some(addrs)) = (issuer.host(), &addrs) {
        http = http.resolve_to_addrs(domain, addrs);
    }
    let http = http
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
    let issuer_host = issuer.host_str().unwrap_or_default();
    for address in issuer_documents(issuer) {
        let Some(own) = read_document(&http, address).await else {
            continue;
        };
        if !own
            .issuer
            .as_deref()
            .is_some_and(|own| same_issuer(own, issuer.as_str()))
        {
            continue;
        }
        return if names_the_same_endpoints(&own, claimed) {
            Ok(())
        } else {
            Err(format!(
                "its metadata claims the issuer {issuer_host}, whose own metadata names other \
                 endpoints"
            ))
        };
    }
    Err(format!(
        "its token endpoint is on another host than its sign-in page, and the issuer it \
         claims ({issuer_host}) was not found to name it in its own metadata"
    ))
}

/// One metadata document, if `address` answers with one (at most [`MAX_DOCUMENT`] bytes).
async fn read_document(http: &reqwest::Client, address: url::Url) -> Option<AuthorizationMetadata> {
    let response = http
        .get(address)
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    let mut body = std::pin::pin!(response.bytes_stream());
    let mut read = Vec::new();
    while let Some(chunk) = body.next().await {
        read.extend_from_slice(&chunk.ok()?);
        if read.len() > MAX_DOCUMENT {
            return None;
        }
    }
    serde_json::from_slice(&read).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(value: serde_json::Value) -> AuthorizationMetadata {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn an_issuers_own_metadata_is_read_where_the_issuer_publishes_it() {
        let at = |issuer: &str| {
            issuer_documents(&url::Url::parse(issuer).unwrap())
                .iter()
                .map(url::Url::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            at("https://accounts.google.com"),
            [
                "https://accounts.google.com/.well-known/oauth-authorization-server",
                "https://accounts.google.com/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            at("https://login.example/tenant/v2/"),
            [
                "https://login.example/.well-known/oauth-authorization-server/tenant/v2",
                "https://login.example/.well-known/openid-configuration/tenant/v2",
                "https://login.example/tenant/v2/.well-known/openid-configuration",
            ]
        );
    }

    #[tokio::test]
    async fn a_servers_reach_is_where_its_address_is() {
        let server = |s: &str| {
            let url = url::Url::parse(s).unwrap();
            async move { reach_of_server(&url).await }
        };
        assert_eq!(server("https://93.184.216.34/mcp").await, Reach::Public);
        assert_eq!(server("http://localhost:3000/mcp").await, Reach::Loopback);
        assert_eq!(server("http://10.1.2.3/mcp").await, Reach::Private);
        assert_eq!(server("http://[::1]:3000/mcp").await, Reach::Loopback);
    }

    /// A server on the internet cannot have Countersign ask this computer, the LAN or a cloud
    /// metadata service for an issuer's metadata: refused before anything is sent.
    #[tokio::test]
    async fn an_issuer_beyond_the_servers_reach_is_not_asked() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = asked.clone();
        tokio::spawn(async move {
            while listener.accept().await.is_ok() {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        let claimed = metadata(serde_json::json!({
            "issuer": format!("http://127.0.0.1:{port}/any/path"),
            "authorization_endpoint": format!("http://127.0.0.1:{port}/authorize"),
            "token_endpoint": "https://elsewhere.example/token",
        }));
        let issuer = url::Url::parse(&format!("http://127.0.0.1:{port}/any/path")).unwrap();
        for server in ["https://mcp.example.com/mcp", "http://10.0.0.5/mcp"] {
            let refused = vouched_by_issuer(&issuer, &claimed, &url::Url::parse(server).unwrap())
                .await
                .unwrap_err();
            assert!(refused.contains("which a server at"), "{refused}");
        }
        let link_local = url::Url::parse("http://169.254.169.254/latest").unwrap();
        let server = url::Url::parse("http://localhost:1/mcp").unwrap();
        assert!(
            vouched_by_issuer(&link_local, &claimed, &server)
                .await
                .is_err()
        );
        // A server on this computer may have its issuer here: it is asked (and names nothing).
        let local = vouched_by_issuer(&issuer, &claimed, &server)
            .await
            .unwrap_err();
        assert!(local.contains("was not found to name it"), "{local}");
        assert!(asked.load(std::sync::atomic::Ordering::SeqCst) > 0);
    }

    #[test]
    fn only_the_issuers_own_endpoints_are_vouched_for() {
        let own = metadata(serde_json::json!({
            "issuer": "https://accounts.google.com",
            "authorization_endpoint": "https://accounts.google.com/o/oauth2/v2/auth",
            "token_endpoint": "https://oauth2.googleapis.com/token",
            "revocation_endpoint": "https://oauth2.googleapis.com/revoke",
        }));
        assert!(names_the_same_endpoints(&own, &own));
        for (key, elsewhere) in [
            ("token_endpoint", "https://mcp.evil.example/token"),
            ("authorization_endpoint", "https://mcp.evil.example/auth"),
            ("revocation_endpoint", "https://mcp.evil.example/revoke"),
            ("registration_endpoint", "https://mcp.evil.example/register"),
        ] {
            let mut claimed = serde_json::to_value(&own).unwrap();
            claimed[key] = elsewhere.into();
            assert!(!names_the_same_endpoints(&own, &metadata(claimed)), "{key}");
        }
        // What the claim leaves out is not the claim's to vouch for.
        let mut fewer = serde_json::to_value(&own).unwrap();
        fewer.as_object_mut().unwrap().remove("revocation_endpoint");
        assert!(names_the_same_endpoints(&own, &metadata(fewer)));
        assert!(same_issuer("https://a.example/", "https://a.example"));
        assert!(!same_issuer("https://a.example/x", "https://a.example"));
    }
}
