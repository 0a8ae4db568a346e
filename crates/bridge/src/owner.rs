//! Who listens on the gateway's port: the token goes only to the user's own app.
//!
//! While the app is down its port is free, and any local user can listen there and collect the
//! bearer token from the next bridge that connects. So before the first byte goes out on a
//! connection, the bridge finds the listening socket that could have accepted it (in Linux's
//! `/proc/net/tcp` and `/proc/net/tcp6`) and requires its owner to be the bridge's own
//! effective uid.
//!
//! When: once per TCP connection, after it is established and before anything is written on it
//! (the discovery probe writes nothing; the HTTP client's connections are checked by
//! [`OwnerCheckLayer`] before the client gets them). A pooled connection that is reused goes to
//! the socket it was checked against, so it needs no new check; a reconnect is a new connection
//! and is checked again.
//!
//! What this does not close (TOCTOU): the table is read just after the connection is made. If
//! the listener that accepted it is closed in the microseconds between, and the user's own app
//! starts listening on the same port in exactly that moment, the check sees the app and passes
//! while the connection leads to the process that held the other listener. That needs the app to
//! start at a moment the other user does not control. A listener closed without such a
//! replacement leaves no listener, which is refused. Two users cannot listen on one port at once
//! on Linux (`SO_REUSEPORT` requires the same uid), so a foreign listener cannot hide beside the
//! app's.

use std::{
    future::Future,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    pin::Pin,
    task::{Context, Poll},
};

/// A socket's state in `/proc/net/tcp`: `TCP_LISTEN`.
const LISTEN: u8 = 0x0A;

/// Why the token is not sent. The text is what the person reads.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error(
        "another user's process (uid {uid}; you are uid {euid}) listens on {addr}, where \
         Countersign's gateway should be, so the token is not sent. While it listens there, \
         Countersign cannot: find out who runs it"
    )]
    OtherUser {
        addr: SocketAddr,
        uid: u32,
        euid: u32,
    },
    #[error(
        "no listening socket for {addr} in /proc/net/tcp, so whose process answered cannot be \
         told; the token is not sent. Start the Countersign app and try again"
    )]
    NoListener { addr: SocketAddr },
    #[error("cannot tell who listens on {addr} ({path}: {source}); the token is not sent")]
    Unreadable {
        addr: SocketAddr,
        path: &'static str,
        source: std::io::Error,
    },
}

/// One line of `/proc/net/tcp` or `/proc/net/tcp6`: what the check needs from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Socket {
    pub local: SocketAddr,
    pub state: u8,
    pub uid: u32,
}

/// The sockets in a `/proc/net/tcp{,6}` text; the header and lines it cannot read are skipped.
pub fn parse_table(text: &str) -> impl Iterator<Item = Socket> + '_ {
    text.lines().filter_map(parse_line)
}

/// `sl local_address rem_address st tx:rx tr:when retrnsmt uid ...`
fn parse_line(line: &str) -> Option<Socket> {
    let mut fields = line.split_whitespace();
    fields.next().filter(|sl| sl.ends_with(':'))?;
    let local = parse_addr(fields.next()?)?;
    let _remote = fields.next()?;
    let state = u8::from_str_radix(fields.next()?, 16).ok()?;
    let uid = fields.nth(3)?.parse().ok()?;
    Some(Socket { local, state, uid })
}

/// `0100007F:1F90` or 32 hex digits and a port. The kernel prints each 32-bit word of the
/// address (kept in network byte order) as a number in the host's byte order, so the bytes
/// are that number's native-endian bytes; the port is printed as a plain number.
fn parse_addr(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let hex = ip.get(i * 8..i * 8 + 8)?;
        Some(u32::from_str_radix(hex, 16).ok()?.to_ne_bytes())
    };
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Whether a socket listening on `local` could accept a connection to `target`: the same
/// address, or a wildcard of the family (`::` counts for IPv4 too, as a dual-stack socket
/// does), or the v4-mapped form of an IPv4 target.
fn takes(local: SocketAddr, target: SocketAddr) -> bool {
    if local.port() != target.port() {
        return false;
    }
    let target = target.ip().to_canonical();
    match (local.ip(), target) {
        (IpAddr::V6(v6), _) if v6.is_unspecified() => true,
        (IpAddr::V4(v4), IpAddr::V4(_)) if v4.is_unspecified() => true,
        (IpAddr::V6(v6), IpAddr::V4(t)) => v6.to_ipv4_mapped() == Some(t),
        (ip, t) => ip == t,
    }
}

/// The check itself, over the tables' text: every listener that could take a connection to
/// one of `targets` belongs to `euid`, and there is at least one.
pub fn judge(tables: &[&str], targets: &[SocketAddr], euid: u32) -> Result<(), Refusal> {
    let mut found = false;
    for &target in targets {
        let listeners = tables
            .iter()
            .flat_map(|table| parse_table(table))
            .filter(|s| s.state == LISTEN && takes(s.local, target));
        for listener in listeners {
            if listener.uid != euid {
                return Err(Refusal::OtherUser {
                    addr: target,
                    uid: listener.uid,
                    euid,
                });
            }
            found = true;
        }
    }
    match (found, targets.first()) {
        (false, Some(&addr)) => Err(Refusal::NoListener { addr }),
        _ => Ok(()),
    }
}

/// Reads the kernel's tables and [`judge`]s them against the bridge's effective uid.
#[cfg(target_os = "linux")]
pub async fn check(targets: &[SocketAddr]) -> Result<(), Refusal> {
    let Some(&first) = targets.first() else {
        return Ok(());
    };
    let mut tables = Vec::new();
    for path in ["/proc/net/tcp", "/proc/net/tcp6"] {
        match tokio::fs::read_to_string(path).await {
            Ok(text) => tables.push(text),
            // No IPv6 in this kernel: no v6 listener either.
            Err(e) if path.ends_with('6') && e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(Refusal::Unreadable {
                    addr: first,
                    path,
                    source,
                });
            }
        }
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let tables: Vec<&str> = tables.iter().map(String::as_str).collect();
    judge(&tables, targets, euid)
}

/// Elsewhere there is no `/proc/net/tcp`; the equivalents (macOS's `proc_pidfdinfo` per
/// process, Windows' `GetExtendedTcpTable`) are not implemented, and refusing would make the
/// bridge useless there. The check is skipped: the app's gateway is Linux-first, and on other
/// systems the token is as exposed as before this check existed.
#[cfg(not(target_os = "linux"))]
pub async fn check(_targets: &[SocketAddr]) -> Result<(), Refusal> {
    Ok(())
}

/// A connector layer for reqwest: every connection the client opens is [`check`]ed before the
/// client may write on it.
#[derive(Clone)]
pub struct OwnerCheckLayer {
    targets: std::sync::Arc<[SocketAddr]>,
}

impl OwnerCheckLayer {
    /// `targets`: every address the client may connect to (the client is pinned to them).
    pub fn new(targets: &[SocketAddr]) -> Self {
        Self {
            targets: targets.into(),
        }
    }
}

impl<S> tower_layer::Layer<S> for OwnerCheckLayer {
    type Service = OwnerCheck<S>;

    fn layer(&self, inner: S) -> OwnerCheck<S> {
        OwnerCheck {
            inner,
            targets: self.targets.clone(),
        }
    }
}

#[derive(Clone)]
pub struct OwnerCheck<S> {
    inner: S,
    targets: std::sync::Arc<[SocketAddr]>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, R> tower_service::Service<R> for OwnerCheck<S>
where
    S: tower_service::Service<R, Error = BoxError>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        let connecting = self.inner.call(request);
        let targets = self.targets.clone();
        Box::pin(async move {
            let connection = connecting.await?;
            // Checked after connecting: the listener that took this connection is in the table
            // now (unless it closed since, which is refused as "no listener").
            check(&targets).await?;
            Ok(connection)
        })
    }
}

/// The refusal behind an HTTP client error, if that is why it failed.
pub fn refusal_in<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refusal> {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(refusal) = e.downcast_ref::<Refusal>() {
            return Some(refusal);
        }
        next = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured on x86_64 (little-endian): 127.0.0.1:47717 listening as uid 1000, a wildcard
    // listener as root, an established connection as uid 65534, and a malformed line.
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:BA65 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 39438 1 0000000000000000 100 0 0 10 0
   1: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1234 1 0000000000000000 100 0 0 10 0
   2: 0100007F:BA65 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000 65534        0 5555 1 0000000000000000 20 4 30 10 -1
   3: garbage
";
    // ::1 port 8080 as uid 65534; a dual-stack wildcard on 2024 as uid 1000; the v4-mapped
    // 127.0.0.1 port 9000 as uid 1000.
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 65534        0 777 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000000000000:07E8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 778 1 0000000000000000 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:2328 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 779 1 0000000000000000 100 0 0 10 0
";

    fn addr(text: &str) -> SocketAddr {
        text.parse().expect("socket address")
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn lines_give_address_state_and_owner() {
        let sockets: Vec<Socket> = parse_table(TCP).collect();
        assert_eq!(
            sockets,
            vec![
                Socket {
                    local: addr("127.0.0.1:47717"),
                    state: LISTEN,
                    uid: 1000
                },
                Socket {
                    local: addr("0.0.0.0:2024"),
                    state: LISTEN,
                    uid: 0
                },
                Socket {
                    local: addr("127.0.0.1:47717"),
                    state: 0x01,
                    uid: 65534
                },
            ]
        );
        let v6: Vec<SocketAddr> = parse_table(TCP6).map(|s| s.local).collect();
        assert_eq!(
            v6,
            vec![
                addr("[::1]:8080"),
                addr("[::]:2024"),
                addr("[::ffff:127.0.0.1]:9000")
            ]
        );
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn the_listener_must_be_the_users_own() {
        let tables = [TCP, TCP6];
        // Listening as uid 1000; the established socket of another uid is not a listener.
        assert!(judge(&tables, &[addr("127.0.0.1:47717")], 1000).is_ok());
        assert!(matches!(
            judge(&tables, &[addr("127.0.0.1:47717")], 0),
            Err(Refusal::OtherUser {
                uid: 1000,
                euid: 0,
                ..
            })
        ));
        assert!(matches!(
            judge(&tables, &[addr("[::1]:8080")], 1000),
            Err(Refusal::OtherUser { uid: 65534, .. })
        ));
        // The v4-mapped listener takes connections to 127.0.0.1.
        assert!(judge(&tables, &[addr("127.0.0.1:9000")], 1000).is_ok());
        assert!(judge(&tables, &[addr("127.0.0.1:9000")], 0).is_err());
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn a_wildcard_listener_of_another_user_is_refused_even_beside_the_users_own() {
        // Port 2024: 0.0.0.0 as root, [::] as 1000. Either could take the connection.
        let tables = [TCP, TCP6];
        assert!(matches!(
            judge(&tables, &[addr("127.0.0.1:2024")], 1000),
            Err(Refusal::OtherUser { uid: 0, .. })
        ));
        assert!(matches!(
            judge(&tables, &[addr("127.0.0.1:2024")], 0),
            Err(Refusal::OtherUser { uid: 1000, .. })
        ));
        assert!(judge(&tables, &[addr("[::1]:2024")], 1000).is_ok());
    }

    #[test]
    fn no_listener_is_refused() {
        let tables = [TCP, TCP6];
        assert!(matches!(
            judge(&tables, &[addr("127.0.0.1:1")], 1000),
            Err(Refusal::NoListener { .. })
        ));
        assert!(matches!(
            judge(&[], &[addr("127.0.0.1:47717")], 1000),
            Err(Refusal::NoListener { .. })
        ));
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn of_several_addresses_one_listening_is_enough_if_none_is_foreign() {
        // "localhost": ::1 has nothing on 47717 (a connection there is refused by the kernel).
        let tables = [TCP, TCP6];
        let both = [addr("[::1]:47717"), addr("127.0.0.1:47717")];
        assert!(judge(&tables, &both, 1000).is_ok());
        let foreign = [addr("127.0.0.1:47717"), addr("[::1]:8080")];
        assert!(judge(&tables, &foreign, 1000).is_err());
    }

    #[test]
    fn a_refusal_is_found_behind_wrapping_errors() {
        #[derive(Debug, thiserror::Error)]
        #[error("connect failed")]
        struct Wrapper(#[source] BoxError);
        let refusal = Refusal::NoListener {
            addr: addr("127.0.0.1:1"),
        };
        let wrapped = Wrapper(Box::new(refusal));
        assert!(matches!(
            refusal_in(&wrapped),
            Some(Refusal::NoListener { .. })
        ));
        assert!(refusal_in(&std::io::Error::other("x")).is_none());
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_listener_of_this_process_passes() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let local = listener.local_addr().expect("address");
        assert!(check(&[local]).await.is_ok());
        drop(listener);
        assert!(matches!(
            check(&[local]).await,
            Err(Refusal::NoListener { .. })
        ));
    }
}
