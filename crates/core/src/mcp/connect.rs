//! Opening a client session to a server: the child process (stdio) or the Streamable HTTP
//! client (signed in or not), the lifecycle each `protocol` choice uses, and who the server
//! is for the person. Shared by the app's own sessions and the gateway's per-agent ones.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientLifecycleMode, RoleClient, RunningService, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;

use super::child::ChildTransport;
use super::handler::Handler;
use super::oauth::Auth;
use super::raw::{RawRequests, TapHttpClient};
use super::tap::{Tap, Tapped};
use crate::ask::{Asker, Endpoint};
use crate::config::{ProtocolChoice, ServerConfig, TransportConfig};
use crate::lock;

/// Lines of stderr kept per server.
const STDERR_LINES: usize = 200;
/// A stderr line longer than this is cut (a server can write anything).
const STDERR_LINE_MAX: usize = 4096;

/// Why a session could not be opened.
pub(crate) enum ConnectError {
    /// Worth another attempt after a backoff.
    Retry(String),
    /// Retrying will not help until the config changes.
    Fatal(String),
    /// The server answered 401 (or 403 `insufficient_scope`) with this `WWW-Authenticate`.
    SignIn(String),
}

/// The lifecycle a session with this server uses, and the version it offers.
pub(crate) fn lifecycle_for(config: &ServerConfig) -> (ClientLifecycleMode, ProtocolVersion) {
    match config.protocol {
        ProtocolChoice::Auto => (
            ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::V_2025_11_25),
            },
            ProtocolVersion::V_2026_07_28,
        ),
        ProtocolChoice::Legacy => (
            ClientLifecycleMode::Initialize,
            ProtocolVersion::V_2025_11_25,
        ),
    }
}

/// Starts the server (stdio) or reaches it (HTTP) and completes the handshake. Shared by the
/// app's own sessions and the gateway's per-agent ones. `http` is the side's one HTTP client:
/// a client per session would each load the system's TLS roots and keep its own connection
/// pool (most of what an agent session weighed).
pub(crate) async fn open_client(
    config: &ServerConfig,
    handler: Handler,
    tap: Arc<Tap>,
    raw: Arc<RawRequests>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    auth: Option<&Auth>,
    http: &SharedHttp,
) -> Result<RunningService<RoleClient, Handler>, ConnectError> {
    let (lifecycle, _) = lifecycle_for(config);
    let timeout = config.request_timeout;
    let service = match &config.transport {
        TransportConfig::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            as_a_server(
                cmd.as_std_mut(),
                &config.name,
                std::env::vars_os().map(|(key, _)| key),
            );
            cmd.args(args).envs(env);
            if let Some(cwd) = cwd {
                cmd.current_dir(cwd);
            }
            let (child, child_stderr) = ChildTransport::spawn(cmd, raw.clone()).map_err(|e| {
                let reason = format!("cannot start \"{command}\": {e}");
                // Retrying cannot make a missing or forbidden program appear.
                match e.kind() {
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => {
                        ConnectError::Fatal(reason)
                    }
                    _ => ConnectError::Retry(reason),
                }
            })?;
            tokio::spawn(collect_stderr(stderr, child_stderr));
            let transport = Tapped { inner: child, tap };
            tokio::time::timeout(
                timeout,
                serve_client_with_lifecycle(handler, transport, lifecycle),
            )
            .await
        }
        TransportConfig::Http { url, headers } => {
            let mut transport_config =
                rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url.as_str());
            for (k, v) in headers {
                match (
                    reqwest::header::HeaderName::from_bytes(k.as_bytes()),
                    reqwest::header::HeaderValue::from_str(v),
                ) {
                    (Ok(k), Ok(v)) => {
                        transport_config.custom_headers.insert(k, v);
                    }
                    _ => {
                        return Err(ConnectError::Fatal(format!(
                            "header \"{k}\" is not a valid HTTP header"
                        )));
                    }
                }
            }
            // A server given its own Authorization header is not signed in to.
            let http = http.get().map_err(ConnectError::Fatal)?;
            let static_auth = headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("authorization"));
            match auth.filter(|_| !static_auth) {
                Some(auth) => {
                    let client = auth
                        .client(&config.name, url, raw, &http)
                        .await
                        .map_err(ConnectError::Retry)?;
                    let transport = Tapped {
                        inner: StreamableHttpClientTransport::with_client(client, transport_config),
                        tap,
                    };
                    tokio::time::timeout(
                        timeout,
                        serve_client_with_lifecycle(handler, transport, lifecycle),
                    )
                    .await
                }
                None => {
                    let client = TapHttpClient::new(http, raw).with_direct_way();
                    let transport = Tapped {
                        inner: StreamableHttpClientTransport::with_client(client, transport_config),
                        tap,
                    };
                    tokio::time::timeout(
                        timeout,
                        serve_client_with_lifecycle(handler, transport, lifecycle),
                    )
                    .await
                }
            }
        }
    };
    if let Ok(Err(e)) = &service
        && let Some(header) = e.auth_challenge()
    {
        return Err(ConnectError::SignIn(header.to_owned()));
    }
    match service {
        Err(_) => Err(ConnectError::Retry(format!(
            "no answer to the handshake within {} s",
            timeout.as_secs()
        ))),
        Ok(Err(e)) => Err(ConnectError::Retry(format!(
            "handshake failed: {}",
            in_words(&e.to_string())
        ))),
        Ok(Ok(service)) => Ok(service),
    }
}

/// One HTTP client for a side's sessions, made when the first remote server is reached (with
/// only stdio servers, the TLS roots are never loaded). Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct SharedHttp(Arc<std::sync::OnceLock<Result<reqwest::Client, String>>>);

impl SharedHttp {
    fn get(&self) -> Result<reqwest::Client, String> {
        self.0
            .get_or_init(|| {
                reqwest::Client::builder()
                    .redirect(same_origin_redirects())
                    .build()
                    .map_err(|e| format!("cannot make an HTTP client: {e}"))
            })
            .clone()
    }
}

/// The most redirects one request follows (reqwest's own default).
const MAX_REDIRECTS: usize = 10;

/// How a server's redirect is followed: within its own origin only (a trailing slash, a moved
/// path). To another origin it would carry there the headers the person configured for this
/// server (an API key: reqwest drops only `Authorization` and cookies on the way), what agents
/// send and the person answers, and it would let a remote server have this machine post to its
/// local services. Such a redirect fails the request ("error following redirect").
pub(crate) fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else if same_origin {
            attempt.follow()
        } else {
            let to = attempt.url().origin().ascii_serialization();
            attempt.error(format!(
                "the server redirected to another origin ({to}), which Countersign does not \
                 follow; if that is the server's address, put it in the config"
            ))
        }
    })
}

/// Keeps the last `STDERR_LINES` lines the server writes to stderr, each cut at
/// `STDERR_LINE_MAX` bytes as it is read: a line is never held whole, so a server writing
/// without end and without a line break costs no more than one cut line.
async fn collect_stderr(
    tail: Arc<Mutex<VecDeque<String>>>,
    stderr: impl tokio::io::AsyncRead + Unpin,
) {
    use tokio::io::AsyncBufReadExt;
    let mut reader = tokio::io::BufReader::new(stderr);
    let mut line: Vec<u8> = Vec::new();
    let mut cut = false;
    loop {
        let (used, ended) = match reader.fill_buf().await {
            Ok(buf) if !buf.is_empty() => {
                let end = buf.iter().position(|&b| b == b'\n');
                let chunk = &buf[..end.unwrap_or(buf.len())];
                let room = STDERR_LINE_MAX.saturating_sub(line.len());
                cut |= chunk.len() > room;
                line.extend_from_slice(&chunk[..chunk.len().min(room)]);
                (end.map_or(buf.len(), |i| i + 1), end.is_some())
            }
            _ => break,
        };
        reader.consume(used);
        if ended {
            keep_stderr_line(&tail, std::mem::take(&mut line), std::mem::take(&mut cut));
        }
    }
    if !line.is_empty() {
        keep_stderr_line(&tail, line, cut);
    }
}

fn keep_stderr_line(tail: &Mutex<VecDeque<String>>, bytes: Vec<u8>, cut: bool) {
    // Not UTF-8 (or cut inside a character): shown with replacement characters, not lost.
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if text.ends_with('\r') {
        text.pop();
    }
    if cut {
        text.push('…');
    }
    let mut tail = lock(tail);
    if tail.len() == STDERR_LINES {
        tail.pop_front();
    }
    tail.push_back(text);
}

/// Who asks, for the dialog and the audit log: the server's command line or address with
/// whatever in them may be a credential left out (`shown_url`, `shown_command`), since the
/// log holds no secrets.
pub(crate) fn asker_for(config: &ServerConfig) -> Asker {
    let endpoint = match &config.transport {
        TransportConfig::Stdio { command, args, .. } => Endpoint::Stdio {
            command: shown_command(command, args),
        },
        TransportConfig::Http { url, .. } => {
            let parsed = url::Url::parse(url).ok();
            Endpoint::Http {
                host: parsed
                    .as_ref()
                    .and_then(|u| {
                        u.host_str().map(|h| match u.port() {
                            Some(p) => format!("{h}:{p}"),
                            None => h.to_owned(),
                        })
                    })
                    .unwrap_or_else(|| shown_url(url)),
                url: shown_url(url),
            }
        }
    };
    Asker {
        server: config.name.clone(),
        endpoint,
        agent: None,
        declared: None,
        agent_id: None,
    }
}

/// Words in a name (a flag's, a variable's) that say its value is a credential.
pub(crate) const CREDENTIAL_WORDS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASS",
    "PWD",
    "AUTH",
    "CREDENTIAL",
    "COOKIE",
    "BEARER",
    "JWT",
    "PRIVATE",
];

/// What stands for a left-out credential.
const LEFT_OUT: &str = "…";

/// A server's address without what may hold a credential: many services put the key in the
/// query (`?api_key=…`) or the user part (`user:password@`). Scheme, host, port and path are
/// kept; the query, the fragment and the user part become `…`.
pub(crate) fn shown_url(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        // Unreadable as a URL: cut where a query or a fragment would start, and before an `@`.
        let cut = url.find(['?', '#']).unwrap_or(url.len());
        let kept = &url[..cut];
        let kept = kept.rsplit_once('@').map_or(kept, |(_, host)| host);
        return if kept.len() < url.len() {
            format!("{kept}{LEFT_OUT}")
        } else {
            kept.to_owned()
        };
    };
    let user = !parsed.username().is_empty() || parsed.password().is_some();
    let query = parsed.query().is_some() || parsed.fragment().is_some();
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    parsed.set_query(None);
    parsed.set_fragment(None);
    let mut shown = parsed.to_string();
    if user && let Some(at) = shown.find("://") {
        shown.insert_str(at + 3, &format!("{LEFT_OUT}@"));
    }
    if query {
        shown.push('?');
        shown.push_str(LEFT_OUT);
    }
    shown
}

/// A command line without what may hold a credential: the value of a flag whose name says it
/// holds one (`--api-key sk-…`, `--token=…`), of a variable set on it (`env GITHUB_TOKEN=…`,
/// `docker run -e API_KEY=…`), of a header (`--header "Authorization: Bearer …"`, what
/// `mcp-remote` takes), and addresses as [`shown_url`] shows them.
pub(crate) fn shown_command(command: &str, args: &[String]) -> String {
    fn names_a_credential(name: &str) -> bool {
        let name = name.trim_start_matches('-').to_ascii_uppercase();
        CREDENTIAL_WORDS.iter().any(|word| name.contains(word))
    }
    let mut shown = vec![command.to_owned()];
    let mut value_of_a_credential = false;
    for arg in args {
        let arg = arg.as_str();
        shown.push(if std::mem::take(&mut value_of_a_credential) {
            LEFT_OUT.to_owned()
        } else if let Some((name, value)) = arg
            .split_once('=')
            // Not an address's query (`https://h/mcp?key=…`): [`shown_url`]'s.
            .filter(|(name, _)| !name.contains([':', '/', '?']))
        {
            if names_a_credential(name) || matches!(name, "-H" | "--header" | "--headers") {
                format!("{name}={LEFT_OUT}")
            } else if value.contains("://") {
                format!("{name}={}", shown_url(value))
            } else {
                arg.to_owned()
            }
        } else if arg.starts_with('-') && names_a_credential(arg)
            || matches!(arg, "-H" | "--header" | "--headers")
        {
            value_of_a_credential = true;
            arg.to_owned()
        } else if let Some((name, _)) = arg.split_once(':')
            && !name.contains(char::is_whitespace)
            && names_a_credential(name)
        {
            format!("{name}: {LEFT_OUT}")
        } else if arg.contains("://") {
            shown_url(arg)
        } else {
            arg.to_owned()
        });
    }
    shown.join(" ")
}

/// An error as the person reads it: rmcp names the transport's Rust type in brackets
/// (`Transport [countersign_core::...<rmcp::...>] error: HTTP 500`), which says nothing to
/// them; such a bracket is left out.
pub(crate) fn in_words(error: &str) -> String {
    let mut out = String::with_capacity(error.len());
    let mut rest = error;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']').map(|c| open + c) else {
            break;
        };
        let inside = &rest[open + 1..close];
        out.push_str(&rest[..open]);
        if !inside.contains("::") {
            out.push_str(&rest[open..=close]);
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    let mut out = out.split_whitespace().collect::<Vec<_>>().join(" ");
    // reqwest's words for a refused redirect say nothing of why, and rmcp does not pass on the
    // policy's own (`same_origin_redirects`).
    if out.contains(REFUSED_REDIRECT) {
        out.push_str(REDIRECT_HINT);
    }
    out
}

const REFUSED_REDIRECT: &str = "error following redirect";
const REDIRECT_HINT: &str = " (Countersign follows a server's redirects only within its own \
    origin: if the server has moved, put its new address in the config)";

/// Set on every server the app starts, to the server's name: a `countersign-bridge` that finds
/// it was started by Countersign as a server (or by something such a server started), which
/// would reach Countersign through Countersign, and refuses to run. The config's own check
/// sees only the command's name; this sees through `sh -c`, `npx`, `env` and links.
pub const STARTED_AS_SERVER_ENV: &str = "COUNTERSIGN_STARTED_AS_SERVER";

/// Readies `cmd` to run as server `name`: marked ([`STARTED_AS_SERVER_ENV`]), and without the
/// agents' tokens the app inherited (`inherited`: its own variables' names): the Gemini CLI
/// and Codex snippets export theirs to the whole login session, so the app, started in it, has
/// them, and no server is to see an agent's token. A server's own `env` in the config is set
/// after this, as the person wrote it.
fn as_a_server(
    cmd: &mut std::process::Command,
    name: &str,
    inherited: impl Iterator<Item = std::ffi::OsString>,
) {
    for key in inherited {
        if key.as_encoded_bytes().starts_with(b"COUNTERSIGN_TOKEN") {
            cmd.env_remove(key);
        }
    }
    cmd.env(STARTED_AS_SERVER_ENV, name);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_is_marked_as_one_and_never_inherits_an_agents_token() {
        let mut cmd = std::process::Command::new("true");
        let inherited = [
            "PATH",
            "COUNTERSIGN_TOKEN",
            "COUNTERSIGN_TOKEN_CODEX",
            "COUNTERSIGN_TOKEN_GEMINI",
            "HOME",
        ];
        as_a_server(
            &mut cmd,
            "desk",
            inherited.iter().map(std::ffi::OsString::from),
        );
        assert!(
            cmd.get_envs()
                .any(|(k, v)| k == STARTED_AS_SERVER_ENV && v == Some("desk".as_ref()))
        );
        let mut removed: Vec<_> = cmd
            .get_envs()
            .filter(|(_, value)| value.is_none())
            .map(|(key, _)| key.to_string_lossy().into_owned())
            .collect();
        removed.sort();
        assert_eq!(
            removed,
            [
                "COUNTERSIGN_TOKEN",
                "COUNTERSIGN_TOKEN_CODEX",
                "COUNTERSIGN_TOKEN_GEMINI"
            ]
        );
    }

    /// A server writing stderr without a line break is read in bounded memory: each line is
    /// cut at `STDERR_LINE_MAX` as it comes, and lines that are not UTF-8 are kept, not lost.
    #[tokio::test]
    async fn stderr_lines_are_cut_as_they_are_read() {
        let (mut writer, reader) = tokio::io::duplex(1024);
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let reading = tokio::spawn(collect_stderr(tail.clone(), reader));
        use tokio::io::AsyncWriteExt;
        writer.write_all(b"starting\r\n").await.unwrap();
        // 8 MiB without a line break, then the end of that line.
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..128 {
            writer.write_all(&chunk).await.unwrap();
        }
        writer.write_all(b"\nbad \xff byte\nlast").await.unwrap();
        drop(writer);
        reading.await.unwrap();
        let lines: Vec<String> = lock(&tail).iter().cloned().collect();
        assert_eq!(
            lines.len(),
            4,
            "{:?}",
            lines.iter().map(|l| l.len()).collect::<Vec<_>>()
        );
        assert_eq!(lines[0], "starting");
        assert_eq!(lines[1], format!("{}…", "x".repeat(STDERR_LINE_MAX)));
        assert_eq!(lines[2], "bad \u{FFFD} byte");
        assert_eq!(lines[3], "last");
    }

    #[test]
    fn what_may_hold_a_credential_is_left_out_of_who_asks() {
        use super::{shown_command, shown_url};
        assert_eq!(
            shown_url("https://user:pw@mcp.example.com:8443/v1/mcp?api_key=SEKRIT#x"),
            "https://…@mcp.example.com:8443/v1/mcp?…"
        );
        assert_eq!(
            shown_url("https://mcp.example.com/mcp"),
            "https://mcp.example.com/mcp"
        );
        assert_eq!(shown_url("not a url?key=SEKRIT"), "not a url…");
        assert_eq!(shown_url("nope://me:SEKRIT@[x"), "[x…");
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            shown_command(
                "npx",
                &args(&[
                    "-y",
                    "mcp-remote",
                    "https://host/mcp?token=SEKRIT",
                    "--api-key",
                    "SEKRIT",
                    "--auth-token=SEKRIT",
                    "/home/me/projects",
                    "--path",
                    "/srv",
                ])
            ),
            "npx -y mcp-remote https://host/mcp?… --api-key … --auth-token=… /home/me/projects --path /srv"
        );
        // Variables set on the command line, headers, and addresses in a variable.
        assert_eq!(
            shown_command(
                "docker",
                &args(&[
                    "run",
                    "-i",
                    "-e",
                    "GITHUB_PERSONAL_ACCESS_TOKEN=SEKRIT",
                    "-e",
                    "LOG=1",
                    "img"
                ])
            ),
            "docker run -i -e GITHUB_PERSONAL_ACCESS_TOKEN=… -e LOG=1 img"
        );
        assert_eq!(
            shown_command(
                "env",
                &args(&[
                    "API_KEY=SEKRIT",
                    "DB=postgres://me:SEKRIT@db/x",
                    "node",
                    "srv.js"
                ])
            ),
            "env API_KEY=… DB=postgres://…@db/x node srv.js"
        );
        assert_eq!(
            shown_command(
                "npx",
                &args(&[
                    "mcp-remote",
                    "https://h/mcp",
                    "--header",
                    "X-Tenant: SEKRIT",
                    "-H",
                    "SEKRIT"
                ])
            ),
            "npx mcp-remote https://h/mcp --header … -H …"
        );
        assert_eq!(
            shown_command(
                "srv",
                &args(&[
                    "--header=X-Tenant: SEKRIT",
                    "Authorization: Bearer SEKRIT",
                    "x-api-key:SEKRIT",
                    "a:b"
                ])
            ),
            "srv --header=… Authorization: … x-api-key: … a:b"
        );
        // What the dialog and the audit log are told of who asks.
        let asker = super::asker_for(&crate::ServerConfig::http(
            "remote",
            "https://mcp.example.com/mcp?api_key=SEKRIT",
        ));
        assert!(!format!("{asker:?}").contains("SEKRIT"), "{asker:?}");
    }

    #[test]
    fn rust_type_names_are_left_out_of_what_the_person_reads() {
        assert_eq!(
            super::in_words(
                "Send message error Transport [countersign_core::mcp::handler::Tapped<rmcp::transport::worker::WorkerTransport<X>>] error: HTTP 500, when send initialize request"
            ),
            "Send message error Transport error: HTTP 500, when send initialize request"
        );
        assert_eq!(
            super::in_words("see [RFC 9728] and [x"),
            "see [RFC 9728] and [x"
        );
    }

    #[test]
    fn a_refused_redirect_says_why() {
        let said = super::in_words(
            "Client error: error following redirect for url (http://a.example/mcp), when send initialize request",
        );
        assert!(
            said.ends_with("only within its own origin: if the server has moved, put its new address in the config)"),
            "{said}"
        );
        assert!(!super::in_words("HTTP 500").contains("origin"));
    }
}
