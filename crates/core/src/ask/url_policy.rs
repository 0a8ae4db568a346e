//! Which URLs a URL-mode question may lead to. Only web addresses are ever handed to the
//! browser; `javascript:`, `data:`, `file:` and every other scheme are refused when the
//! question arrives, so the person is never asked to consent to them.

use serde::{Deserialize, Serialize};

/// What the person should know about an address before consenting. The dialog shows these
/// as sent from here; the UI does not judge addresses itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub enum UrlWarning {
    /// `http` to a host that is not this machine: readable and changeable on the way.
    PlainHttp,
    /// The host has internationalised labels (`xn--`), which can imitate another site.
    Punycode,
    /// A user name or password before the host, which can hide the real host.
    UserInfo,
    /// The host is this computer or its local network (a loopback, private or link-local
    /// address, `localhost`, `.local`): opening it has the person's browser reach a service
    /// there (a router's page, a local API), which a remote server cannot reach itself.
    Local,
}

/// An address that may be opened after consent, in the form the browser will use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebUrl {
    pub url: url::Url,
    /// The host as the browser will contact it (ASCII, so a look-alike shows as `xn--`),
    /// with the port when it is not the scheme's default.
    pub host: String,
    pub warnings: Vec<UrlWarning>,
}

/// Checks an address a server wants the person to open.
pub fn check(raw: &str) -> Result<WebUrl, String> {
    let url = url::Url::parse(raw).map_err(|e| format!("the address cannot be read: {e}"))?;
    let scheme = url.scheme();
    if scheme != "https" && scheme != "http" {
        return Err(format!(
            "a {scheme}: address is never opened, only http and https"
        ));
    }
    let Some(host) = url.host_str().filter(|h| !h.is_empty()).map(str::to_owned) else {
        return Err("the address has no host".into());
    };
    let mut warnings = Vec::new();
    if scheme == "http" && !is_loopback(&url) {
        warnings.push(UrlWarning::PlainHttp);
    }
    // `url` gives the host in ASCII (IDNA), so a look-alike shows as xn--.
    if host.split('.').any(|label| label.starts_with("xn--")) {
        warnings.push(UrlWarning::Punycode);
    }
    if !url.username().is_empty() || url.password().is_some() {
        warnings.push(UrlWarning::UserInfo);
    }
    if is_local(&url) {
        warnings.push(UrlWarning::Local);
    }
    let host = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    };
    Ok(WebUrl {
        url,
        host,
        warnings,
    })
}

/// This computer or its local network, by address or by name: every address that is not the
/// internet's (`crate::reach`: loopback, private incl. carrier-grade NAT where Tailscale puts a
/// tailnet, link-local, and IPv4 carried in IPv6), a name with no dot (`router`, `nas`: only a
/// local resolver answers those), and the names set aside for home and internal networks
/// (`.local`, `.lan`, `.home`, `.home.arpa`, `.internal`, `.intranet`, `.corp`, and routers'
/// `.box`, as in `fritz.box`).
fn is_local(url: &url::Url) -> bool {
    use crate::reach::{Reach, reach};
    match url.host() {
        Some(url::Host::Ipv4(ip)) => reach(ip.into()) != Reach::Public,
        Some(url::Host::Ipv6(ip)) => reach(ip.into()) != Reach::Public,
        Some(url::Host::Domain(d)) => {
            const LOCAL_ENDINGS: [&str; 9] = [
                ".localhost",
                ".local",
                ".lan",
                ".home",
                ".home.arpa",
                ".internal",
                ".intranet",
                ".corp",
                ".box",
            ];
            let d = d.trim_end_matches('.');
            !d.contains('.') || LOCAL_ENDINGS.iter().any(|ending| d.ends_with(ending))
        }
        None => false,
    }
}

fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost" || d.ends_with(".localhost"),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_web_addresses_pass() {
        for bad in [
            "javascript:alert(1)",
            "data:text/html,<script>alert(1)</script>",
            "file:///etc/passwd",
            "ftp://example.com/x",
            "mailto:a@example.com",
            "not a url",
            "https://",
        ] {
            assert!(check(bad).is_err(), "{bad}");
        }
        let ok = check("https://auth.example.com/connect?session=1").unwrap();
        assert_eq!(ok.host, "auth.example.com");
        assert!(ok.warnings.is_empty());
    }

    #[test]
    fn warnings_name_what_to_look_at() {
        assert_eq!(
            check("http://example.com/").unwrap().warnings,
            [UrlWarning::PlainHttp]
        );
        assert_eq!(
            check("http://127.0.0.1:8080/cb").unwrap().warnings,
            [UrlWarning::Local]
        );
        assert_eq!(
            check("http://localhost/cb").unwrap().warnings,
            [UrlWarning::Local]
        );
        // This computer or its network, however written: plain http to them is not the
        // network's to read, but a service there is the person's.
        for local in [
            "https://192.168.1.1/admin",
            "https://10.0.0.5/",
            "https://169.254.169.254/latest/meta-data/",
            "https://printer.local/",
            "https://[fd00::1]/",
            "https://[::ffff:127.0.0.1]/",
            "https://2130706433/",
            "https://0.0.0.0:8888/",
            "https://router/",
            "https://nas:5000/",
            "https://fritz.box/",
            "https://nas.lan/",
            "https://gw.home.arpa/",
            "https://vault.internal/",
            "https://100.101.102.103/",
            "https://[fec0::1]/",
            "https://[64:ff9b::a9fe:a9fe]/",
            "https://[2002:c0a8:101::1]/",
            "https://[fe80::1]/",
        ] {
            assert_eq!(
                check(local).unwrap().warnings,
                [UrlWarning::Local],
                "{local}"
            );
        }
        for public in [
            "https://8.8.8.8/",
            "https://100.128.0.1/",
            "https://example.com/",
        ] {
            assert!(check(public).unwrap().warnings.is_empty(), "{public}");
        }
        assert_eq!(
            check("http://127.0.0.1:8080/cb").unwrap().host,
            "127.0.0.1:8080"
        );
        assert_eq!(
            check("https://example.com:443/").unwrap().host,
            "example.com"
        );
        assert_eq!(
            check("http://[::1]/cb").unwrap().warnings,
            [UrlWarning::Local]
        );
        let idn = check("https://аррӏе.com/").unwrap();
        assert!(idn.host.starts_with("xn--"), "{}", idn.host);
        assert_eq!(idn.warnings, [UrlWarning::Punycode]);
        assert_eq!(
            check("https://bank.com@evil.example/").unwrap().warnings,
            [UrlWarning::UserInfo]
        );
    }
}
