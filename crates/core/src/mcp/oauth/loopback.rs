//! The loopback redirect of a sign-in (RFC 8252): a listener on 127.0.0.1 that the browser is
//! sent back to with the authorization code. It answers one `GET /callback` and nothing else,
//! and the page it shows is fixed text: nothing from the request reaches it. Only a redirect
//! that carries this sign-in's `state` counts: anything on the machine can reach the port
//! (another user, a program, a page in a browser that lets pages reach loopback), and the first
//! request that looked like a redirect used to end the sign-in with the sender's words.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use axum::extract::{RawQuery, State};
use axum::response::{Html, IntoResponse};
use tokio::sync::mpsc;

/// What came back to the redirect: the whole URL as the browser asked for it, or the
/// authorization server's refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Callback {
    Code { url: String },
    Refused { error: String, description: String },
}

pub struct Loopback {
    pub redirect_uri: String,
    received: mpsc::Receiver<Callback>,
    stop: tokio_util::sync::CancellationToken,
    /// The `state` this sign-in sent: none counts until it is known.
    expected: Arc<OnceLock<String>>,
}

impl Loopback {
    /// Listens on 127.0.0.1 at `port` (0: any free port).
    pub async fn bind(port: u16) -> Result<Loopback, String> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port)))
            .await
            .map_err(|e| format!("cannot listen for the sign-in redirect on port {port}: {e}"))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("cannot read the redirect's port: {e}"))?;
        let redirect_uri = format!("http://127.0.0.1:{}/callback", addr.port());
        let (tx, received) = mpsc::channel(4);
        let stop = tokio_util::sync::CancellationToken::new();
        let expected = Arc::new(OnceLock::new());
        let app = axum::Router::new()
            .route("/callback", axum::routing::get(callback))
            .with_state((tx, redirect_uri.clone(), expected.clone()));
        let stopped = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stopped.cancelled_owned())
                .await;
        });
        Ok(Loopback {
            redirect_uri,
            received,
            stop,
            expected,
        })
    }

    /// The `state` the authorization request carries: the only redirect that counts is one
    /// that carries it back.
    pub fn expect_state(&self, state: &str) {
        let _ = self.expected.set(state.to_owned());
    }

    /// The first redirect with this sign-in's `state` that carries a code or an error.
    pub async fn next(&mut self) -> Option<Callback> {
        self.received.recv().await
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

type Shared = (mpsc::Sender<Callback>, String, Arc<OnceLock<String>>);

async fn callback(
    State((tx, redirect_uri, expected)): State<Shared>,
    RawQuery(raw): RawQuery,
) -> impl IntoResponse {
    let raw = raw.unwrap_or_default();
    let query: std::collections::HashMap<String, String> =
        url::form_urlencoded::parse(raw.as_bytes())
            .into_owned()
            .collect();
    // The authorization server sends the state back with a code and with a refusal alike
    // (RFC 6749, 4.1.2 and 4.1.2.1).
    let ours = query
        .get("state")
        .is_some_and(|state| expected.get() == Some(state));
    let got = if !ours {
        None
    } else if let Some(error) = query.get("error") {
        Some(Callback::Refused {
            error: error.clone(),
            description: query.get("error_description").cloned().unwrap_or_default(),
        })
    } else if query.contains_key("code") && query.contains_key("state") {
        Some(Callback::Code {
            url: format!("{redirect_uri}?{raw}"),
        })
    } else {
        None
    };
    match got {
        Some(got) => {
            let refused = matches!(got, Callback::Refused { .. });
            let _ = tx.try_send(got);
            Html(if refused { PAGE_REFUSED } else { PAGE_DONE })
        }
        None => Html(PAGE_UNKNOWN),
    }
}

const PAGE_DONE: &str = "<!doctype html><meta charset=utf-8><title>Countersign</title>\
<p>Signed in. You can close this tab and return to Countersign.</p>";
const PAGE_REFUSED: &str = "<!doctype html><meta charset=utf-8><title>Countersign</title>\
<p>The sign-in was not completed. Countersign shows why.</p>";
const PAGE_UNKNOWN: &str = "<!doctype html><meta charset=utf-8><title>Countersign</title>\
<p>This address only completes a sign-in started in Countersign.</p>";

#[cfg(test)]
mod tests {
    use super::*;

    /// The page the redirect shows for `url`.
    async fn page_at(client: &reqwest::Client, url: String) -> String {
        client.get(url).send().await.unwrap().text().await.unwrap()
    }

    #[tokio::test]
    async fn the_redirect_hands_over_the_code_and_shows_fixed_text() {
        let mut loopback = Loopback::bind(0).await.unwrap();
        loopback.expect_state("s1");
        assert!(loopback.redirect_uri.starts_with("http://127.0.0.1:"));
        let base = loopback.redirect_uri.clone();
        let client = reqwest::Client::new();
        // Missing code: not a callback, nothing handed over.
        let page = page_at(&client, format!("{base}?state=x")).await;
        assert!(page.contains("only completes a sign-in"));
        let page = page_at(&client, format!("{base}?code=abc&state=s1&x=%3Cscript%3E")).await;
        assert!(page.contains("Signed in"));
        assert!(
            !page.contains("script"),
            "nothing from the request is shown"
        );
        assert_eq!(
            loopback.next().await,
            Some(Callback::Code {
                url: format!("{base}?code=abc&state=s1&x=%3Cscript%3E")
            })
        );
        client
            .get(format!(
                "{base}?error=access_denied&error_description=no&state=s1"
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(
            loopback.next().await,
            Some(Callback::Refused {
                error: "access_denied".into(),
                description: "no".into()
            })
        );
    }

    /// Whatever reaches the port first without this sign-in's state (another user, a program,
    /// a web page) ends nothing: a refusal in its own words, a code of its own, or any of it
    /// before the state is known. The real redirect still comes through after them.
    #[tokio::test]
    async fn only_a_redirect_with_the_sign_ins_state_counts() {
        let mut loopback = Loopback::bind(0).await.unwrap();
        let base = loopback.redirect_uri.clone();
        let client = reqwest::Client::new();
        let early = page_at(&client, format!("{base}?code=c&state=s1")).await;
        assert!(early.contains("only completes a sign-in"), "{early}");
        loopback.expect_state("s1");
        for forged in [
            "error=access_denied&error_description=Your+account+is+locked",
            "error=access_denied&state=zz",
            "code=c&state=wrong",
            "code=c",
        ] {
            let page = page_at(&client, format!("{base}?{forged}")).await;
            assert!(
                page.contains("only completes a sign-in"),
                "{forged}: {page}"
            );
        }
        client
            .get(format!("{base}?code=real&state=s1"))
            .send()
            .await
            .unwrap();
        assert_eq!(
            loopback.next().await,
            Some(Callback::Code {
                url: format!("{base}?code=real&state=s1")
            })
        );
    }

    #[tokio::test]
    async fn the_listener_is_gone_once_the_sign_in_is() {
        let loopback = Loopback::bind(0).await.unwrap();
        let base = loopback.redirect_uri.clone();
        drop(loopback);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(
            reqwest::get(format!("{base}?code=a&state=b"))
                .await
                .is_err()
        );
    }
}
