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

/// Reads `issuer`'s own metadata and checks it names `claimed`'s endpoints. A document that
/// names another issuer says nothing for this one; no document, or one that names other
/// endpoints, is a no.
pub(super) async fn vouched_by_issuer(
    issuer: &url::Url,
    claimed: &AuthorizationMetadata,
) -> Result<(), String> {
    let http = reqwest::Client::builder()
        // The issuer's own address, not wherever it points.
        .redirect(reqwest::redirect::Policy::none())
        .timeout(WAIT)
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
