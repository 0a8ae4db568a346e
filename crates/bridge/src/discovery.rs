//! Finding the running app's gateway: its address and the bearer token.
//!
//! The app writes `gateway.json` while its gateway listens and removes it when it quits, so a
//! missing file means "not running". A file left behind by a crashed app is caught by connecting
//! once before relaying anything: the agent hears "not running" at once, not a puzzling error on
//! some later request. That connection is also where the bridge checks that the listener is
//! the user's own (`owner`), before the token is even read.

use std::{env, io, net::SocketAddr, path::PathBuf, time::Duration};

use reqwest::Url;
use serde_json::Value;

use crate::owner;

/// Replaces the url from `gateway.json` (tests, unusual setups).
pub const URL_ENV: &str = "COUNTERSIGN_GATEWAY_URL";
/// Replaces where the token is read from.
pub const TOKEN_FILE_ENV: &str = "COUNTERSIGN_GATEWAY_TOKEN_FILE";
/// The agent's own token (the Connect page's Claude Desktop snippet sets it); without it the
/// older shared token file is read.
pub const TOKEN_ENV: &str = countersign_core::agents::connect::BRIDGE_TOKEN_ENV;

const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// A gateway that accepted a connection just now.
#[derive(Debug)]
pub struct Gateway {
    pub base: Url,
    /// What `base` resolved to; the HTTP client is pinned to these, the addresses checked.
    pub addrs: Vec<SocketAddr>,
    pub token: String,
    /// Where the token came from, for the message when the gateway refuses it.
    pub token_from: String,
}

/// Why there is nothing to relay to; the text is what the person reads.
#[derive(Debug)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The message for a gateway that does not answer at `url`.
pub fn not_running_at(url: &Url) -> String {
    format!(
        "Countersign is not running (no gateway at {}). Start the Countersign app and try again.",
        url.as_str().trim_end_matches('/')
    )
}

/// Where the gateway is, checked by connecting to it, and the token to show it.
pub async fn locate() -> Result<Gateway, Unavailable> {
    let base = base_url()?;
    let addrs = probe(&base).await?;
    owner::check(&addrs)
        .await
        .map_err(|refusal| Unavailable(refusal.to_string()))?;
    let (token, token_from) = read_token()?;
    Ok(Gateway {
        base,
        addrs,
        token,
        token_from,
    })
}

fn base_url() -> Result<Url, Unavailable> {
    if let Some(url) = env::var_os(URL_ENV) {
        return parse_url(&url.to_string_lossy(), URL_ENV);
    }
    let path = countersign_core::dirs::gateway_file().ok_or_else(no_data_dir)?;
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(Unavailable(format!(
                "Countersign is not running (no gateway: {} does not exist). Start the \
                 Countersign app and try again.",
                path.display()
            )));
        }
        Err(e) => {
            return Err(Unavailable(format!("cannot read {}: {e}", path.display())));
        }
    };
    let url = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|json| json.get("url")?.as_str().map(str::to_owned))
        .ok_or_else(|| {
            Unavailable(format!(
                "{} does not say where the gateway is (expected {{\"url\": \"http://...\"}})",
                path.display()
            ))
        })?;
    parse_url(&url, &path.display().to_string())
}

fn parse_url(text: &str, from: &str) -> Result<Url, Unavailable> {
    match Url::parse(text.trim()) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Ok(url),
        _ => Err(Unavailable(format!(
            "the gateway address {text:?} (from {from}) is not an http URL"
        ))),
    }
}

/// Connects once (writing nothing); the addresses `base` resolves to.
async fn probe(base: &Url) -> Result<Vec<SocketAddr>, Unavailable> {
    let addrs = base.socket_addrs(|| None).map_err(|e| {
        Unavailable(format!(
            "cannot resolve the gateway address {}: {e}",
            base.as_str()
        ))
    })?;
    // The gateway listens on 127.0.0.1 only. The owner check sees only this computer's
    // sockets: a listener on all addresses here would pass it for an address elsewhere, and
    // the token would cross a network in clear.
    if let Some(away) = addrs.iter().find(|addr| !addr.ip().is_loopback()) {
        return Err(Unavailable(format!(
            "the gateway address {} is not on this computer ({}): Countersign's gateway \
             listens on 127.0.0.1 only, and the token is not sent elsewhere",
            base.as_str().trim_end_matches('/'),
            away.ip()
        )));
    }
    let mut last_error = None;
    for &addr in &addrs {
        match tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect(addr)).await {
            Ok(Ok(_)) => return Ok(addrs),
            Ok(Err(e)) => last_error = Some(e),
            Err(_) => last_error = Some(io::Error::from(io::ErrorKind::TimedOut)),
        }
    }
    match last_error {
        Some(e) if e.kind() != io::ErrorKind::ConnectionRefused => Err(Unavailable(format!(
            "cannot reach Countersign's gateway at {}: {e}. Is the Countersign app running?",
            base.as_str().trim_end_matches('/')
        ))),
        _ => Err(Unavailable(not_running_at(base))),
    }
}

/// The agent's token from [`TOKEN_ENV`], else the shared token file; with where it came from.
fn read_token() -> Result<(String, String), Unavailable> {
    if let Some(token) = env::var_os(TOKEN_ENV) {
        let token = token.to_string_lossy().trim().to_owned();
        if token.is_empty() {
            return Err(Unavailable(format!(
                "{TOKEN_ENV} is set but empty: paste the agent's token from Countersign's \
                 Connect agents page"
            )));
        }
        return Ok((token, format!("the {TOKEN_ENV} environment variable")));
    }
    let path = match env::var_os(TOKEN_FILE_ENV) {
        Some(path) => PathBuf::from(path),
        None => countersign_core::dirs::gateway_token_path().ok_or_else(no_data_dir)?,
    };
    let token = std::fs::read_to_string(&path).map_err(|e| {
        Unavailable(format!(
            "cannot read Countersign's gateway token from {}: {e}",
            path.display()
        ))
    })?;
    let token = token.trim();
    if token.is_empty() {
        return Err(Unavailable(format!(
            "Countersign's gateway token file {} is empty",
            path.display()
        )));
    }
    Ok((token.to_owned(), path.display().to_string()))
}

fn no_data_dir() -> Unavailable {
    Unavailable("cannot tell where Countersign keeps its files (is HOME set?)".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_address_off_this_computer_is_refused_before_any_connection() {
        let away = Url::parse("http://203.0.113.5:47717").unwrap();
        let Err(Unavailable(why)) = probe(&away).await else {
            panic!("probed");
        };
        assert!(why.contains("not on this computer (203.0.113.5)"), "{why}");
        let unspecified = Url::parse("http://0.0.0.0:47717").unwrap();
        assert!(probe(&unspecified).await.is_err());
    }
}
