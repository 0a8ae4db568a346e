//! Whose process is on the other end of an agent's connection: only the person's own.
//!
//! An agent's token is a bearer credential, and it does not stay secret from other users of
//! the computer everywhere: hosts keep it in config files that may be readable by all (a home
//! folder left open), and an HTTP entry sends it to whatever listens on the gateway's port,
//! which any local user can take while the app is not running. So a token alone is not
//! enough: the process that connects must be the person's. The gateway binds 127.0.0.1 only,
//! so the agent's end of every connection is a socket on this computer, and Linux says who
//! made it: the kernel's socket diagnostics (`sock_diag(7)`, `NETLINK_SOCK_DIAG`) look up one
//! TCP socket by its four-tuple and report its owner's uid and its inode. This is asked once a
//! connection, as it is accepted; a request on a connection whose other end is not the
//! person's is refused before its token is read.
//!
//! Why not `/proc/net/tcp`, as the bridge reads for the listener: it lists every socket, and an
//! agent that connects per request (rmcp's default) would have the gateway read all of them,
//! `TIME_WAIT` ones included, for every call; the diagnostic asks for one.
//!
//! The lookup is trusted only while the gateway's own side of the connection is open: then
//! no other socket can hold the other end's four-tuple. A connection reset while it waited in
//! the accept queue is refused, since a new one from the same port may hold the tuple by then.
//!
//! A socket its process already closed is refused too. Its kernel remnant (a `TIME_WAIT` or
//! orphaned `FIN_WAIT2` socket) has no inode and reports uid 0, so another user could send a
//! request and close at once, and be taken for root. Root is not let in either: no agent
//! needs to run as root, and a root daemon that fetches URLs for others must not be a way in.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use super::refusals::Refusals;

/// `SOCK_DIAG_BY_FAMILY` (linux/sock_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `struct nlmsghdr`.
const NLMSG_HDR: usize = 16;
/// `struct inet_diag_req_v2`: family, protocol, ext, pad, states, then `inet_diag_sockid`.
const REQUEST_LEN: usize = NLMSG_HDR + 8 + SOCKID_LEN;
/// `struct inet_diag_sockid`: ports, source and destination (16 bytes each), interface, cookie.
const SOCKID_LEN: usize = 4 + 16 + 16 + 4 + 8;
/// `struct inet_diag_msg`: family, state, timer, retrans, the sockid, then expires, rqueue,
/// wqueue, uid and inode (4 bytes each).
const MESSAGE_LEN: usize = 4 + SOCKID_LEN + 20;

/// Who holds the agent's end of a connection, told once as the gateway accepts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Peer {
    /// A process of the user the gateway runs as.
    Own,
    /// A process of another user (root included).
    Other { uid: u32 },
    /// The agent's end was closed before it could be told whose it was.
    Closed,
    /// The kernel could not be asked.
    Unknown(String),
}

impl Peer {
    /// Who holds the other end of `accepted`, the gateway's side of a connection.
    pub(crate) fn of(accepted: &impl AsRawFd, ours: SocketAddr, theirs: SocketAddr) -> Self {
        // SAFETY: geteuid cannot fail and touches no memory of ours.
        let own = unsafe { libc::geteuid() };
        let found = socket_owner(theirs, ours);
        // Asked after the lookup: while the gateway's side is open, no other socket can hold
        // the other end's four-tuple, so the socket found was the one that connected. One
        // reset while it waited in the accept queue has let its tuple go, and a new
        // connection from the same port (the person's, say) could be found in its place.
        match tcp_state(accepted) {
            Ok(state) if state == TCP_CLOSE => return Self::Closed,
            Ok(_) => {}
            Err(e) => return Self::Unknown(e.to_string()),
        }
        match found {
            Ok(Some(owner)) => Self::judge(owner, own),
            // The connection is open at this end, yet the kernel knows no other end: its
            // socket diagnostics for TCP (the `tcp_diag` module) are missing.
            Ok(None) => Self::Unknown("the kernel's socket diagnostics found no socket".into()),
            Err(e) => Self::Unknown(e.to_string()),
        }
    }

    fn judge(owner: SocketOwner, own: u32) -> Self {
        if owner.inode == 0 {
            Self::Closed
        } else if owner.uid == own {
            Self::Own
        } else {
            Self::Other { uid: owner.uid }
        }
    }

    /// Why a request on this connection is refused; `None` for the person's own.
    pub(crate) fn refusal(&self) -> Option<String> {
        match self {
            Self::Own => None,
            Self::Other { uid } => Some(format!(
                "the connection comes from a process of another user (uid {uid}); only your own \
                 processes may use Countersign's gateway, whatever token they send"
            )),
            Self::Closed => Some(
                "the agent's end of the connection was closed before Countersign could tell \
                 whose process it is"
                    .into(),
            ),
            Self::Unknown(reason) => Some(format!(
                "Countersign cannot tell whose process connected ({reason}), so it is refused"
            )),
        }
    }
}

/// The gateway's listener: each connection it accepts is told whose it is ([`Peer`]), once. One
/// that is not the person's is answered 403 with why, kept for the Connect page, and closed at
/// once, never served: served, it could idle with a descriptor of the app's for as long as it
/// liked (axum sets no read timeout), and two thousand such would leave none for the person's
/// agents, servers and audit log.
pub(crate) struct AgentListener {
    listener: TcpListener,
    refusals: Arc<Refusals>,
    turning_away: Arc<AtomicUsize>,
    /// The person's connections being served now, and how many may be.
    open: Arc<AtomicUsize>,
    max_open: usize,
}

impl AgentListener {
    pub(crate) fn new(listener: TcpListener, refusals: Arc<Refusals>) -> Self {
        Self::with_max_open(listener, refusals, MAX_OPEN_CONNECTIONS)
    }

    pub(crate) fn with_max_open(
        listener: TcpListener,
        refusals: Arc<Refusals>,
        max_open: usize,
    ) -> Self {
        AgentListener {
            listener,
            refusals,
            turning_away: Arc::default(),
            open: Arc::default(),
            max_open,
        }
    }
}

/// Connections of the person's own served at once, at most: axum closes none that idle, and
/// a process that opened thousands (an agent gone wrong, or one sandboxed but for the port)
/// would leave the app no descriptor for its agents' next connection, its servers or its audit
/// log. Past it, a connection is told so and closed. (The app raises its descriptor limit to
/// well above this at start: `launch`.)
pub(crate) const MAX_OPEN_CONNECTIONS: usize = 1024;

/// Connections being told why they are refused at once, at most; past this a connection is
/// closed without a word.
const MAX_TURNING_AWAY: usize = 64;
/// How long a refused connection may take to be told, and to finish sending.
const TURN_AWAY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

impl Listener for AgentListener {
    type Io = Accepted;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Accepted, SocketAddr) {
        loop {
            let (stream, addr) = Listener::accept(&mut self.listener).await;
            let peer = match stream.local_addr() {
                Ok(ours) => Peer::of(&stream, ours, addr),
                Err(e) => Peer::Unknown(e.to_string()),
            };
            let (status, refusal) = match peer.refusal() {
                Some(reason) => (axum::http::StatusCode::FORBIDDEN, Some(reason)),
                None if self.open.load(Ordering::Relaxed) >= self.max_open => (
                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    Some(format!(
                        "Countersign's gateway has {} connections open, as many as it serves at \
                         once; try again when some have closed",
                        self.max_open
                    )),
                ),
                None => (axum::http::StatusCode::OK, None),
            };
            if let Some(reason) = refusal {
                self.refusals
                    .record(status, &reason, &axum::http::HeaderMap::new(), "");
                if self.turning_away.fetch_add(1, Ordering::Relaxed) < MAX_TURNING_AWAY {
                    let turning_away = self.turning_away.clone();
                    tokio::spawn(async move {
                        turn_away(stream, status, &reason).await;
                        turning_away.fetch_sub(1, Ordering::Relaxed);
                    });
                } else {
                    self.turning_away.fetch_sub(1, Ordering::Relaxed);
                }
                continue;
            }
            // An answer often leaves in two writes (an SSE priming event, then the result);
            // with Nagle's algorithm against the agent's delayed ACK the second waits ~40 ms.
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(error = %e, "cannot set TCP_NODELAY");
            }
            self.open.fetch_add(1, Ordering::Relaxed);
            let counted = Counted(self.open.clone());
            return (
                Accepted {
                    stream,
                    peer,
                    _counted: counted,
                },
                addr,
            );
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// Answers a refused connection's request with `status` and why, unread, and closes it; what
/// it sent meanwhile is read and dropped, so the close does not reset the answer away.
async fn turn_away(mut stream: TcpStream, status: axum::http::StatusCode, reason: &str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = super::refusal_body(reason);
    let answer = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    );
    let _ = tokio::time::timeout(TURN_AWAY_WAIT, async {
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 8192];
        while stream.read(&mut sink).await? > 0 {}
        io::Result::Ok(())
    })
    .await;
}

/// A connection of the person's own, as served: the stream, and whose it is.
pub(crate) struct Accepted {
    stream: TcpStream,
    peer: Peer,
    _counted: Counted,
}

/// One of [`AgentListener`]'s open connections, counted while it lives.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl AsyncRead for Accepted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Accepted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

impl Connected<IncomingStream<'_, AgentListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, AgentListener>) -> Self {
        stream.io().peer.clone()
    }
}

/// `TCP_CLOSE` (linux/tcp_states.h): a socket no longer in the kernel's tables.
const TCP_CLOSE: u8 = 7;

/// The TCP state of `socket` (`TCP_INFO`'s first field).
fn tcp_state(socket: &impl AsRawFd) -> io::Result<u8> {
    // SAFETY: an all-zero tcp_info is valid; the kernel writes at most `len` bytes of it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: the pointers are to `info` and `len`, which outlive the call.
    let got = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &mut len,
        )
    };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info.tcpi_state)
}

/// What the kernel says of one TCP socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SocketOwner {
    pub uid: u32,
    /// 0 once no process holds the socket.
    pub inode: u32,
}

/// The owner of the TCP socket whose own address is `local` and whose peer is `remote`;
/// `None` when there is no such socket.
pub(crate) fn socket_owner(
    local: SocketAddr,
    remote: SocketAddr,
) -> io::Result<Option<SocketOwner>> {
    let family = match (local.ip(), remote.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) => libc::AF_INET,
        (IpAddr::V6(_), IpAddr::V6(_)) => libc::AF_INET6,
        _ => return Ok(None),
    };
    // A socket a lookup: nothing of an earlier answer can be read for this one.
    // SAFETY: plain system call; the descriptor is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just made and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let request = request(family as u8, local, remote);
    // SAFETY: an all-zero sockaddr_nl is valid; nl_pid 0 is the kernel.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: the buffer and address outlive the call, and their lengths are theirs.
    let sent = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            request.as_ptr().cast(),
            request.len(),
            0,
            (&raw const kernel).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    // The kernel answers a request for one socket while `sendto` runs, so the answer is
    // already queued: not waiting for it keeps a kernel that does not answer from stalling
    // the gateway's thread.
    let mut answer = [0u8; 1024];
    // SAFETY: the buffer outlives the call and its length is its own.
    let got = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            answer.as_mut_ptr().cast(),
            answer.len(),
            libc::MSG_DONTWAIT,
        )
    };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    read_answer(&answer[..got as usize], local, remote)
}

/// `SOCK_DIAG_BY_FAMILY` for the one TCP socket `local` → `remote`, in any state.
fn request(family: u8, local: SocketAddr, remote: SocketAddr) -> [u8; REQUEST_LEN] {
    let mut r = [0u8; REQUEST_LEN];
    r[0..4].copy_from_slice(&(REQUEST_LEN as u32).to_ne_bytes());
    r[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    r[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    r[8..12].copy_from_slice(&1u32.to_ne_bytes());
    let req = &mut r[NLMSG_HDR..];
    req[0] = family;
    req[1] = libc::IPPROTO_TCP as u8;
    req[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
    write_sockid(&mut req[8..], local, remote);
    // No cookie to match (INET_DIAG_NOCOOKIE).
    req[8 + SOCKID_LEN - 8..8 + SOCKID_LEN].fill(0xff);
    r
}

fn write_sockid(id: &mut [u8], local: SocketAddr, remote: SocketAddr) {
    id[0..2].copy_from_slice(&local.port().to_be_bytes());
    id[2..4].copy_from_slice(&remote.port().to_be_bytes());
    id[4..20].copy_from_slice(&address_bytes(local.ip()));
    id[20..36].copy_from_slice(&address_bytes(remote.ip()));
}

fn address_bytes(ip: IpAddr) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    match ip {
        IpAddr::V4(v4) => bytes[..4].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => bytes = v6.octets(),
    }
    bytes
}

/// The kernel's answer: the socket's `inet_diag_msg`, or `ENOENT` when there is none.
fn read_answer(
    answer: &[u8],
    local: SocketAddr,
    remote: SocketAddr,
) -> io::Result<Option<SocketOwner>> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("sock_diag: {what}"));
    let u32_at = |at: usize| -> io::Result<u32> {
        answer
            .get(at..at + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| bad("a short answer"))
    };
    let len = u32_at(0)? as usize;
    let kind = answer
        .get(4..6)
        .map(|b| u16::from_ne_bytes([b[0], b[1]]))
        .ok_or_else(|| bad("a short answer"))?;
    if len > answer.len() {
        return Err(bad("a truncated answer"));
    }
    if kind == libc::NLMSG_ERROR as u16 {
        let errno = -(u32_at(NLMSG_HDR)? as i32);
        return match errno {
            libc::ENOENT => Ok(None),
            errno => Err(io::Error::from_raw_os_error(errno)),
        };
    }
    if kind != SOCK_DIAG_BY_FAMILY || len < NLMSG_HDR + MESSAGE_LEN {
        return Err(bad("an answer of another kind"));
    }
    let message = &answer[NLMSG_HDR..len];
    // The socket as it is: an IPv6 one that reached 127.0.0.1 as `::ffff:127.0.0.1` (Java's
    // and .NET's dual-stack sockets) is answered in its own family for an IPv4 question.
    let address = |at: usize| match i32::from(message[0]) {
        libc::AF_INET => Some(IpAddr::from(
            <[u8; 4]>::try_from(&message[at..at + 4]).ok()?,
        )),
        libc::AF_INET6 => Some(IpAddr::from(
            <[u8; 16]>::try_from(&message[at..at + 16]).ok()?,
        )),
        _ => None,
    };
    let port = |at: usize| u16::from_be_bytes([message[at], message[at + 1]]);
    let found = address(8)
        .zip(address(24))
        .map(|(src, dst)| (src.to_canonical(), port(4), dst.to_canonical(), port(6)));
    if found
        != Some((
            local.ip().to_canonical(),
            local.port(),
            remote.ip().to_canonical(),
            remote.port(),
        ))
    {
        return Err(bad("an answer for another socket"));
    }
    let fields = NLMSG_HDR + 4 + SOCKID_LEN;
    Ok(Some(SocketOwner {
        uid: u32_at(fields + 12)?,
        inode: u32_at(fields + 16)?,
    }))
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, TcpListener, TcpStream};

    use super::*;

    /// Past its cap of open connections, a new one is told so and closed, not served; one
    /// closing makes room. (Thousands held open left the app no descriptor for anything.)
    #[tokio::test]
    async fn connections_past_the_cap_are_told_so_and_closed() {
        use std::io::{Read, Write};
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let mut agents = AgentListener::with_max_open(listener, Arc::default(), 2);
        let connect = move || std::thread::spawn(move || TcpStream::connect(addr).unwrap());
        let (first_client, second_client) = (connect(), connect());
        let (first, _) = agents.accept().await;
        let (second, _) = agents.accept().await;
        let _clients = (first_client.join().unwrap(), second_client.join().unwrap());
        let third = std::thread::spawn(move || {
            let mut third = TcpStream::connect(addr).unwrap();
            third
                .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
                .unwrap();
            let mut answer = String::new();
            let _ = third.read_to_string(&mut answer);
            answer
        });
        // The listener turns the third away while it waits for one it may serve.
        let accepting = tokio::spawn(async move {
            let (fourth, _) = agents.accept().await;
            (agents, fourth)
        });
        let answer = tokio::task::spawn_blocking(move || third.join().unwrap())
            .await
            .unwrap();
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.contains("2 connections open"), "{answer}");
        // One closes: the next is served.
        drop(second);
        let fourth_client = connect();
        let (_agents, fourth) = accepting.await.unwrap();
        assert_eq!(fourth.peer, Peer::Own);
        drop((first, fourth, fourth_client.join().unwrap()));
    }

    fn own_uid() -> u32 {
        // SAFETY: as above.
        unsafe { libc::geteuid() }
    }

    #[test]
    fn both_ends_of_a_local_connection_are_told_as_their_owners() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let ours = accepted.local_addr().unwrap();
        let theirs = accepted.peer_addr().unwrap();
        let owner = socket_owner(theirs, ours)
            .unwrap()
            .expect("the client's socket");
        assert_eq!(owner.uid, own_uid());
        assert_ne!(owner.inode, 0);
        assert_eq!(Peer::of(&accepted, ours, theirs), Peer::Own);
        // A four-tuple that names no socket: none, not an error.
        let gone = SocketAddr::from((Ipv4Addr::LOCALHOST, 1));
        assert_eq!(socket_owner(gone, ours).unwrap(), None);
        drop(client);
    }

    #[test]
    fn a_socket_closed_by_its_process_is_refused_though_the_kernel_says_root() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let ours = accepted.local_addr().unwrap();
        let theirs = accepted.peer_addr().unwrap();
        // The client closes first: its end lingers in the kernel with no process.
        drop(client);
        let mut owner = None;
        for _ in 0..100 {
            owner = socket_owner(theirs, ours).unwrap();
            if owner.is_some_and(|o| o.inode == 0) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let owner = owner.expect("the closed socket's remnant");
        assert_eq!(owner.inode, 0, "{owner:?}");
        assert_eq!(Peer::of(&accepted, ours, theirs), Peer::Closed);
        assert!(Peer::Closed.refusal().is_some());
    }

    #[test]
    fn an_ipv6_socket_that_reached_127_0_0_1_as_v4_mapped_is_told_too() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        // As Java's and .NET's dual-stack sockets connect.
        let client = TcpStream::connect(format!("[::ffff:127.0.0.1]:{port}")).unwrap();
        assert!(client.local_addr().unwrap().is_ipv6());
        let (accepted, theirs) = listener.accept().unwrap();
        let ours = accepted.local_addr().unwrap();
        assert!(theirs.is_ipv4());
        assert_eq!(Peer::of(&accepted, ours, theirs), Peer::Own);
    }

    /// Another user connects from port P, sends, and resets while the connection waits to be
    /// accepted; a connection of the person's from the same port then holds P's four-tuple.
    /// The reset connection is still accepted, its request readable; the lookup finds the
    /// person's socket, yet the connection is refused for its own end being gone.
    #[tokio::test]
    async fn a_connection_reset_before_it_was_accepted_is_not_taken_for_the_next_one_from_its_port()
    {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let gateway = listener.local_addr().unwrap();
        let first = tokio::net::TcpSocket::new_v4().unwrap();
        first.set_reuseaddr(true).unwrap();
        first.bind((Ipv4Addr::LOCALHOST, 0).into()).unwrap();
        let port = first.local_addr().unwrap();
        let first = first.connect(gateway).await.unwrap();
        first.writable().await.unwrap();
        first.try_write(b"POST /mcp/desk HTTP/1.1\r\n").unwrap();
        first.set_zero_linger().unwrap();
        drop(first);
        let second = tokio::net::TcpSocket::new_v4().unwrap();
        second.set_reuseaddr(true).unwrap();
        second.bind(port).unwrap();
        let _second = second.connect(gateway).await.unwrap();
        let (accepted, theirs) = listener.accept().unwrap();
        assert_eq!(theirs, port);
        let ours = accepted.local_addr().unwrap();
        let found = socket_owner(theirs, ours).unwrap();
        assert!(
            found.is_some_and(|o| o.inode != 0),
            "the second connection's socket holds the tuple: {found:?}"
        );
        assert_eq!(Peer::of(&accepted, ours, theirs), Peer::Closed);
    }

    #[test]
    fn only_the_own_uid_with_a_live_socket_is_let_in() {
        let live = |uid| SocketOwner { uid, inode: 7 };
        assert_eq!(Peer::judge(live(1000), 1000), Peer::Own);
        assert_eq!(Peer::judge(live(1001), 1000), Peer::Other { uid: 1001 });
        assert_eq!(Peer::judge(live(0), 1000), Peer::Other { uid: 0 });
        assert_eq!(
            Peer::judge(
                SocketOwner {
                    uid: 1000,
                    inode: 0
                },
                1000
            ),
            Peer::Closed
        );
        assert!(Peer::Own.refusal().is_none());
        let told = Peer::Other { uid: 1001 }.refusal().unwrap();
        assert!(told.contains("uid 1001"), "{told}");
        assert!(
            Peer::Unknown("EPERM".into())
                .refusal()
                .unwrap()
                .contains("EPERM")
        );
    }

    #[test]
    fn an_answer_for_another_socket_or_cut_short_is_an_error() {
        let a = SocketAddr::from((Ipv4Addr::LOCALHOST, 40000));
        let b = SocketAddr::from((Ipv4Addr::LOCALHOST, 47717));
        let mut answer = vec![0u8; NLMSG_HDR + MESSAGE_LEN];
        let n = answer.len() as u32;
        answer[0..4].copy_from_slice(&n.to_ne_bytes());
        answer[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        answer[NLMSG_HDR] = libc::AF_INET as u8;
        write_sockid(&mut answer[NLMSG_HDR + 4..], a, b);
        let fields = NLMSG_HDR + 4 + SOCKID_LEN;
        answer[fields + 12..fields + 16].copy_from_slice(&1000u32.to_ne_bytes());
        answer[fields + 16..fields + 20].copy_from_slice(&99u32.to_ne_bytes());
        assert_eq!(
            read_answer(&answer, a, b).unwrap(),
            Some(SocketOwner {
                uid: 1000,
                inode: 99
            })
        );
        assert!(read_answer(&answer, b, a).is_err());
        assert!(read_answer(&answer[..40], a, b).is_err());
        let mut error = vec![0u8; NLMSG_HDR + 4];
        let n = error.len() as u32;
        error[0..4].copy_from_slice(&n.to_ne_bytes());
        error[4..6].copy_from_slice(&(libc::NLMSG_ERROR as u16).to_ne_bytes());
        error[NLMSG_HDR..].copy_from_slice(&(-libc::EACCES).to_ne_bytes());
        assert_eq!(
            read_answer(&error, a, b).unwrap_err().raw_os_error(),
            Some(libc::EACCES)
        );
    }
}
