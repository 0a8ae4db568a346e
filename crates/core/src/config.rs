//! The person's configuration: which MCP servers to hold sessions to.
//!
//! JSON in the `mcpServers` shape agents already use, so an existing block can be pasted in,
//! plus Countersign's own keys per server. A broken entry is reported with file, line and
//! column and skipped; the other servers still load. Keys we do not know (other clients'
//! settings) are ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The environment variable that names the config file when `--config` is not given.
pub const CONFIG_ENV: &str = "COUNTERSIGN_CONFIG";

/// How long the person has to answer, unless a server's entry says otherwise.
pub const DEFAULT_ANSWER_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// How long any request to a server may take (person's think time excluded).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum TransportConfig {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// Which protocol lifecycle to use with a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ProtocolChoice {
    /// Probe with `server/discover` (2026-07-28, multi round-trip requests) and fall back
    /// to `initialize` (2025-11-25) for servers that do not speak it.
    #[default]
    Auto,
    /// Only `initialize`, offering 2025-11-25.
    Legacy,
}

/// A server entry's optional `oauth` block. The keys are the ones agent hosts already accept
/// (Claude Code's `clientId` and `callbackPort`, Gemini CLI's `clientId`, `clientSecret` and
/// `scopes`), so an imported entry keeps working.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthConfig {
    /// A client registered with the authorization server beforehand; used instead of
    /// registering.
    #[serde(default)]
    pub client_id: Option<String>,
    /// That client's secret, for servers that require one.
    #[serde(default)]
    pub client_secret: Option<String>,
    /// Scopes to ask for instead of the ones the server names.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// An HTTPS client ID metadata document describing Countersign, used where the
    /// authorization server supports them.
    #[serde(default)]
    pub client_metadata_url: Option<String>,
    /// A fixed port for the loopback redirect (for a client registered with one).
    #[serde(default)]
    pub callback_port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerConfig {
    pub name: String,
    pub transport: TransportConfig,
    /// Whether this server's tool annotations count for approval policy.
    pub trusted: bool,
    pub answer_timeout: Duration,
    pub request_timeout: Duration,
    pub protocol: ProtocolChoice,
    /// Explicit gateway rules for this server's tools, by tool name; they come first.
    pub tool_policy: BTreeMap<String, ToolRule>,
    /// The gateway's rule for agents reading this server's resources (`resources/read`,
    /// `resources/subscribe`) and prompts (`prompts/get`). Unset: a trusted server's are read
    /// without asking, an untrusted server's ask.
    pub read_policy: Option<ToolRule>,
    /// Whether an agent's roots reach this server through the gateway. Off unless the person
    /// says so: a server may take roots as its reach (the reference filesystem server lets them
    /// replace the directories it was started with), so an agent offering `/` would widen it.
    pub agent_roots: bool,
    /// How long an agent's tool call waits for the person's approval before the agent is
    /// told the approval is pending in Countersign (and can make the call again later).
    pub approval_wait: Duration,
    /// How long such a pending approval stays in the app before it expires.
    pub pending_expiry: Duration,
    /// How to sign in to an HTTP server that asks for OAuth (all optional).
    pub oauth: OAuthConfig,
}

/// What the gateway does with an agent's call of one tool, as the person configured it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub enum ToolRule {
    Allow,
    Deny,
    Ask,
}

/// The gateway agents reach their servers through (`"gateway"` at the top of the config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayConfig {
    pub enabled: bool,
    /// On 127.0.0.1 only.
    pub port: u16,
}

/// Unlikely to be taken on a workstation, and the same on every install so pasted agent
/// configs keep working.
/// Two minutes: long enough to read a question, short enough that no agent's connection is
/// held for an afternoon.
pub const DEFAULT_APPROVAL_WAIT: Duration = Duration::from_secs(120);
/// A day.
pub const DEFAULT_PENDING_EXPIRY: Duration = Duration::from_secs(24 * 60 * 60);
/// The longest name a server may have, in characters.
const MAX_SERVER_NAME_CHARS: usize = 128;

/// A server's name is how dialogs, notifications and agents tell it apart from the others, and
/// its path on the gateway (`/mcp/<name>`): one that looks like another (spaces around it,
/// invisible or control characters) or that no agent can reach (`.`, `..`) is refused in words.
fn check_server_name(name: &str) -> Result<(), String> {
    use unicode_general_category::{GeneralCategory, get_general_category};
    if name.trim().is_empty() {
        return Err("a server needs a non-empty name".into());
    }
    if name.trim() != name {
        return Err(format!(
            "the server name {:?} starts or ends with spaces, so it looks like {:?}",
            name,
            name.trim()
        ));
    }
    if name == "." || name == ".." {
        return Err(format!(
            "the server name {name:?} cannot be an address on the gateway (/mcp/{name} is read as \
             a folder)"
        ));
    }
    if name.chars().count() > MAX_SERVER_NAME_CHARS {
        return Err(format!(
            "a server's name may be at most {MAX_SERVER_NAME_CHARS} characters"
        ));
    }
    if name.chars().any(|c| {
        c.is_control()
            || matches!(
                get_general_category(c),
                GeneralCategory::Format
                    | GeneralCategory::LineSeparator
                    | GeneralCategory::ParagraphSeparator
            )
    }) {
        return Err(format!(
            "the server name {:?} holds control or invisible characters, so it can look like \
             another",
            name.escape_unicode().to_string()
        ));
    }
    Ok(())
}

/// Whether two different server names read the same (UTS #39 confusables: `tіckets` with a
/// Cyrillic `і` and `tickets`), so a dialog naming one could pass for the other.
pub(crate) fn names_look_alike(a: &str, b: &str) -> bool {
    use unicode_security::confusable_detection::skeleton;
    a != b && skeleton(a).eq(skeleton(b))
}

/// The longest any timeout of a server's may be: a year.
pub const MAX_TIMEOUT_SECS: u64 = 365 * 24 * 60 * 60;

pub const DEFAULT_GATEWAY_PORT: u16 = 47717;

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            enabled: true,
            port: DEFAULT_GATEWAY_PORT,
        }
    }
}

impl TransportConfig {
    /// Which server this is, for what the person decided about it: a digest of everything
    /// that says what runs or answers (command, arguments, environment and directory; URL and
    /// headers). A remembered "yes" is bound to it, so it is not taken for another server put
    /// under the same name. Only the digest is kept: environment and headers may hold
    /// credentials.
    ///
    /// The text digested is written out here field by field, not as serde writes this enum:
    /// a field added to the transport later (a setting that changes nothing of what runs)
    /// must not make every decision the person made lapse at once. It is the same text serde
    /// wrote when decisions were first bound (the test `identities_stay_as_first_bound`).
    pub fn identity(&self) -> String {
        use sha2::{Digest, Sha256};
        let text = match self {
            TransportConfig::Stdio {
                command,
                args,
                env,
                cwd,
            } => serde_json::json!({
                "type": "stdio", "command": command, "args": args, "env": env, "cwd": cwd,
            }),
            TransportConfig::Http { url, headers } => {
                serde_json::json!({"type": "http", "url": url, "headers": headers})
            }
        };
        let text = serde_json::to_vec(&text).unwrap_or_default();
        format!("sha256:{}", hex::encode(Sha256::digest(text)))
    }
}

impl ServerConfig {
    /// A stdio server with default settings.
    pub fn stdio(name: &str, command: &str, args: &[&str]) -> Self {
        ServerConfig {
            name: name.into(),
            transport: TransportConfig::Stdio {
                command: command.into(),
                args: args.iter().map(|a| (*a).to_owned()).collect(),
                env: BTreeMap::new(),
                cwd: None,
            },
            trusted: false,
            answer_timeout: DEFAULT_ANSWER_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            protocol: ProtocolChoice::Auto,
            tool_policy: BTreeMap::new(),
            read_policy: None,
            agent_roots: false,
            approval_wait: DEFAULT_APPROVAL_WAIT,
            pending_expiry: DEFAULT_PENDING_EXPIRY,
            oauth: OAuthConfig::default(),
        }
    }

    /// A Streamable HTTP server with default settings.
    pub fn http(name: &str, url: &str) -> Self {
        ServerConfig {
            transport: TransportConfig::Http {
                url: url.into(),
                headers: BTreeMap::new(),
            },
            ..Self::stdio(name, "", &[])
        }
    }
}

/// A problem in the config file, located for the person to fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
#[error("{}:{line}:{column}: {}{message}", file.display(), server.as_ref().map(|s| format!("server \"{s}\": ")).unwrap_or_default())]
pub struct ConfigError {
    #[ts(type = "string")]
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
    /// The server entry at fault; `None` when the file as a whole is.
    pub server: Option<String>,
    pub message: String,
}

/// What was read: the servers that loaded and the errors for the ones (or file) that did not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadedConfig {
    pub path: PathBuf,
    pub servers: Vec<ServerConfig>,
    pub gateway: GatewayConfig,
    pub errors: Vec<ConfigError>,
}

/// Where the config comes from, in order: `--config PATH`, `$COUNTERSIGN_CONFIG`, the platform
/// config dir. The flag wins over the variable so one launch can be pointed elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    Flag(PathBuf),
    Env(PathBuf),
    Platform(PathBuf),
}

impl ConfigSource {
    pub fn path(&self) -> &Path {
        match self {
            ConfigSource::Flag(p) | ConfigSource::Env(p) | ConfigSource::Platform(p) => p,
        }
    }
}

/// Picks the config file from the command-line flag, the environment and the platform dirs.
/// `None` only when there is no flag, no variable and no home directory.
pub fn locate(flag: Option<PathBuf>) -> Option<ConfigSource> {
    if let Some(path) = flag {
        return Some(ConfigSource::Flag(path));
    }
    if let Some(path) = std::env::var_os(CONFIG_ENV).filter(|v| !v.is_empty()) {
        return Some(ConfigSource::Env(PathBuf::from(path)));
    }
    crate::dirs::config_dir().map(|d| ConfigSource::Platform(d.join("config.json")))
}

/// The first-run config: one server, the demo ticket desk, launched with `demo_command`.
pub fn default_config_json(demo_command: &str) -> String {
    let value = serde_json::json!({
        "mcpServers": {
            "demo": {
                "command": demo_command,
                "args": [],
                "trusted": false,
            }
        }
    });
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    text
}

/// Loads the config from `source`. A missing file at the platform location is created with
/// the demo server (first run); a missing file the person named is an error.
pub fn load_or_create(source: &ConfigSource, demo_command: &str) -> LoadedConfig {
    let path = source.path();
    if matches!(source, ConfigSource::Platform(_)) && !path.exists() {
        let text = default_config_json(demo_command);
        // 0600 in a 0700 directory: configs hold API keys and tokens.
        let written = crate::private_fs::write_atomic(path, text.as_bytes());
        if let Err(e) = written {
            // Still run with the demo server; tell the person why nothing was saved.
            let mut loaded = parse(path, &text);
            loaded.errors.push(ConfigError {
                file: path.to_owned(),
                line: 0,
                column: 0,
                server: None,
                message: format!("could not create the default config: {e}"),
            });
            return loaded;
        }
    }
    load(path)
}

/// Loads the config at `path`.
pub fn load(path: &Path) -> LoadedConfig {
    match std::fs::read(path) {
        Ok(bytes) => parse_bytes(path, &bytes),
        Err(e) => LoadedConfig {
            path: path.to_owned(),
            servers: Vec::new(),
            gateway: GatewayConfig::default(),
            errors: vec![ConfigError {
                file: path.to_owned(),
                line: 0,
                column: 0,
                server: None,
                message: format!("cannot read the config: {e}"),
            }],
        },
    }
}

#[derive(Deserialize)]
struct RawFile<'a> {
    #[serde(
        rename = "mcpServers",
        borrow,
        default,
        deserialize_with = "each_key_once"
    )]
    mcp_servers: BTreeMap<String, &'a RawValue>,
    #[serde(borrow, default)]
    gateway: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGateway {
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default = "default_port")]
    port: u16,
}

fn yes() -> bool {
    true
}

fn default_port() -> u16 {
    DEFAULT_GATEWAY_PORT
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawServer {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    trusted: bool,
    answer_timeout_secs: Option<u64>,
    request_timeout_secs: Option<u64>,
    #[serde(default)]
    protocol: ProtocolChoice,
    /// Other clients' switch for an entry; honoured so a pasted block behaves the same.
    #[serde(default)]
    disabled: bool,
    #[serde(default, deserialize_with = "each_key_once")]
    tool_policy: BTreeMap<String, ToolRule>,
    read_policy: Option<ToolRule>,
    #[serde(default)]
    agent_roots: bool,
    approval_wait_secs: Option<u64>,
    pending_approval_secs: Option<u64>,
    #[serde(default)]
    oauth: Option<OAuthConfig>,
}

/// A server entry's keys: the ones agents' configs share, then Countersign's own.
const SERVER_KEYS: [&str; 18] = [
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "disabled",
    "trusted",
    "answerTimeoutSecs",
    "requestTimeoutSecs",
    "protocol",
    "toolPolicy",
    "readPolicy",
    "agentRoots",
    "approvalWaitSecs",
    "pendingApprovalSecs",
    "oauth",
];
/// The file's own keys at the top (other apps' keys may sit beside them).
const TOP_KEYS: [&str; 2] = ["mcpServers", "gateway"];

/// The key of `known` that `key` is a typo of: the same but for case, `_`, `-` or spaces
/// (`toolpolicy`, `tool_policy`), a letter off one of seven or eight (`disable`), two off a
/// longer one (`toolsPolicy`), or a longer one's stem with another ending (`toolPolicies`,
/// `answerTimeoutSeconds`). Such a key is never read, so ignoring it would drop the person's
/// rule (a deny, a server turned off, the gateway turned off) without a word. Keys other agents
/// use beside these (`trust`, `timeout`, `alwaysAllow`) are far enough off not to be taken for
/// them.
fn mistyped_key<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    if known.contains(&key) {
        return None;
    }
    let fold = |k: &str| -> String {
        k.chars()
            .filter(|c| !matches!(c, '_' | '-' | ' '))
            .flat_map(char::to_lowercase)
            .collect()
    };
    let folded = fold(key);
    known.iter().copied().find(|own| {
        let own_folded = fold(own);
        let off = match own.len() {
            9.. => 2,
            7..=8 => 1,
            _ => 0,
        };
        let stem = own_folded
            .get(..own_folded.len().saturating_sub(2))
            .filter(|_| own.len() >= 9);
        own_folded == folded
            || strsim::levenshtein(&own_folded, &folded) <= off
            || stem.is_some_and(|stem| folded.starts_with(stem) && folded.len() <= own.len() + 4)
    })
}

/// The first of `text`'s keys (a JSON object's) that is a typo of one of `known`, and the
/// message that says so.
fn mistyped_keys(text: &str, known: &[&str]) -> Option<String> {
    let keys: BTreeMap<String, serde::de::IgnoredAny> = serde_json::from_str(text).ok()?;
    keys.keys().find_map(|key| {
        mistyped_key(key, known)
            .map(|meant| format!("{key:?} is not a key Countersign reads; did you mean {meant:?}?"))
    })
}

/// A map whose keys each come once: JSON readers keep the last of a key written twice, so a
/// second `"rm": "allow"` below `"rm": "deny"` would quietly undo the rule the person sees
/// first, and a second server of one name hide the first.
fn each_key_once<'de, D, V>(deserializer: D) -> Result<BTreeMap<String, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    V: Deserialize<'de>,
{
    struct Once<V>(std::marker::PhantomData<V>);
    impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Once<V> {
        type Value = BTreeMap<String, V>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut read = BTreeMap::new();
            while let Some((key, value)) = map.next_entry::<String, V>()? {
                if read.contains_key(&key) {
                    return Err(serde::de::Error::custom(format!(
                        "{key:?} is written twice (a reader keeps only the last)"
                    )));
                }
                read.insert(key, value);
            }
            Ok(read)
        }
    }
    deserializer.deserialize_map(Once(std::marker::PhantomData))
}

/// Parses the config file's bytes, at start and on each edit alike: a file that is not UTF-8
/// text is refused whole (read leniently, a byte in an argument would become U+FFFD, and the
/// server be started with an argument the file does not hold).
pub fn parse_bytes(path: &Path, bytes: &[u8]) -> LoadedConfig {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse(path, text),
        Err(e) => {
            let valid = std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default();
            let (line, column) = line_col(valid, valid.len());
            LoadedConfig {
                path: path.to_owned(),
                errors: vec![ConfigError {
                    file: path.to_owned(),
                    line,
                    column,
                    server: None,
                    message: "the config is not UTF-8 text".into(),
                }],
                ..Default::default()
            }
        }
    }
}

/// Parses config text; `path` is only used to name the file in errors.
pub fn parse(path: &Path, text: &str) -> LoadedConfig {
    let mut loaded = LoadedConfig {
        path: path.to_owned(),
        ..Default::default()
    };
    let file: RawFile = match serde_json::from_str(text) {
        Ok(f) => f,
        Err(e) => {
            loaded.errors.push(ConfigError {
                file: path.to_owned(),
                line: e.line(),
                column: e.column(),
                server: None,
                message: strip_position(&e),
            });
            return loaded;
        }
    };
    if let Some(message) = mistyped_keys(text, &TOP_KEYS) {
        loaded.errors.push(ConfigError {
            file: path.to_owned(),
            line: 1,
            column: 1,
            server: None,
            message: format!("{message} (the gateway stays off until this is fixed)"),
        });
        // It may be the gateway block, saying "off".
        loaded.gateway.enabled = false;
    }
    if let Some(raw) = file.gateway {
        match serde_json::from_str::<RawGateway>(raw.get()) {
            Ok(g) if g.port == 0 => {
                let offset = (raw.get().as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
                let (line, column) = line_col(text, offset);
                loaded.errors.push(ConfigError {
                    file: path.to_owned(),
                    line,
                    column,
                    server: None,
                    message:
                        "gateway: \"port\" must be a fixed port (1-65535) that agents can be told; \
                         the gateway stays off until it is"
                            .into(),
                });
                loaded.gateway.enabled = false;
            }
            Ok(g) => {
                loaded.gateway = GatewayConfig {
                    // Not on if a mistyped key beside it may have said off.
                    enabled: g.enabled && loaded.gateway.enabled,
                    port: g.port,
                }
            }
            Err(e) => {
                let offset = (raw.get().as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
                let inner = offset_of(raw.get(), e.line(), e.column());
                let (line, column) = line_col(text, offset + inner);
                loaded.errors.push(ConfigError {
                    file: path.to_owned(),
                    line,
                    column,
                    server: None,
                    message: format!(
                        "gateway: {}; the gateway stays off until this is fixed",
                        strip_position(&e)
                    ),
                });
                // Whatever the block meant, it did not say "on" in a way that could be read:
                // a misspelt `"enabeld": false` must not leave agents' tokens working.
                loaded.gateway.enabled = false;
            }
        }
    }
    for (name, raw) in file.mcp_servers {
        // The entry's text is a slice of `text`, so its offset locates errors inside it.
        let offset = (raw.get().as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
        let locate_at = |inner_offset: usize| line_col(text, offset + inner_offset);
        let entry_error = |inner_offset: usize, message: String| {
            let (line, column) = locate_at(inner_offset);
            ConfigError {
                file: path.to_owned(),
                line,
                column,
                server: Some(name.clone()),
                message,
            }
        };
        if let Some(message) = mistyped_keys(raw.get(), &SERVER_KEYS) {
            loaded.errors.push(entry_error(0, message));
            continue;
        }
        let server: RawServer = match serde_json::from_str(raw.get()) {
            Ok(s) => s,
            Err(e) => {
                let inner = offset_of(raw.get(), e.line(), e.column());
                loaded.errors.push(entry_error(inner, strip_position(&e)));
                continue;
            }
        };
        if server.disabled {
            continue;
        }
        let gateway_port = loaded.gateway.port;
        match build_server(&name, server)
            .and_then(|s| check_not_the_gateway(&s.transport, gateway_port).map(|()| s))
            .and_then(|s| match loaded.servers.iter().find(|o| names_look_alike(&o.name, &name)) {
                Some(other) => Err(format!(
                    "the server name {name:?} reads the same as {:?} (letters of another script \
                     that look alike), so a question from one could pass for the other's; \
                     rename one",
                    other.name
                )),
                None => Ok(s),
            })
        {
            Ok(s) => loaded.servers.push(s),
            Err(message) => loaded.errors.push(entry_error(0, message)),
        }
    }
    loaded
}

/// Whether `command` runs `countersign-bridge`, which reaches Countersign's own gateway.
pub(crate) fn runs_the_bridge(command: &str) -> bool {
    Path::new(command)
        .file_name()
        .is_some_and(|n| n == "countersign-bridge")
}

/// Whether `url` is a server path of Countersign's own gateway on `gateway_port` (an HTTP URL
/// on this machine's loopback under `/mcp/`).
pub(crate) fn is_gateway_url(url: &str, gateway_port: u16) -> bool {
    let Ok(url) = url::Url::parse(url) else {
        return false;
    };
    let local = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback() || ip.is_unspecified(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback() || ip.is_unspecified(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    local && url.port_or_known_default() == Some(gateway_port) && url.path().starts_with("/mcp/")
}

/// Why `transport` may not be one of Countersign's servers: it is Countersign's own gateway,
/// whose every request would come back to the gateway (pasted from an agent's config, say).
fn check_not_the_gateway(transport: &TransportConfig, gateway_port: u16) -> Result<(), String> {
    let ours = match transport {
        TransportConfig::Stdio { command, .. } => runs_the_bridge(command),
        TransportConfig::Http { url, .. } => is_gateway_url(url, gateway_port),
    };
    if ours {
        return Err(
            "this entry reaches Countersign's own gateway, so every request would come \
                    back to Countersign; put the server's own command or URL here (agents use \
                    the gateway's address)"
                .into(),
        );
    }
    Ok(())
}

fn build_server(name: &str, raw: RawServer) -> Result<ServerConfig, String> {
    check_server_name(name)?;
    let kind = raw.kind.as_deref().map(str::to_ascii_lowercase);
    let transport = match (kind.as_deref(), raw.command, raw.url) {
        (None | Some("stdio"), Some(command), None) => {
            if command.trim().is_empty() {
                return Err("\"command\" is empty".into());
            }
            TransportConfig::Stdio {
                command,
                args: raw.args,
                env: raw.env,
                cwd: raw.cwd,
            }
        }
        (
            None | Some("http") | Some("streamable-http") | Some("streamablehttp"),
            None,
            Some(url),
        ) => {
            let parsed = url::Url::parse(&url).map_err(|e| format!("\"url\" is not a URL: {e}"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(format!(
                    "\"url\" must be http or https, not {}",
                    parsed.scheme()
                ));
            }
            for (key, value) in &raw.headers {
                if reqwest::header::HeaderName::from_bytes(key.as_bytes()).is_err()
                    || reqwest::header::HeaderValue::from_str(value).is_err()
                {
                    return Err(format!("header \"{key}\" is not a valid HTTP header"));
                }
            }
            TransportConfig::Http {
                url,
                headers: raw.headers,
            }
        }
        (Some("sse"), _, _) => {
            return Err(
                "the old SSE transport is not supported; use \"type\": \"http\" (Streamable HTTP)"
                    .into(),
            );
        }
        (Some(other), _, _)
            if !matches!(
                other,
                "stdio" | "http" | "streamable-http" | "streamablehttp"
            ) =>
        {
            return Err(format!(
                "unknown \"type\": \"{other}\" (use \"stdio\" or \"http\")"
            ));
        }
        (_, Some(_), Some(_)) => return Err("give either \"command\" or \"url\", not both".into()),
        _ => return Err("a server needs \"command\" (stdio) or \"url\" (http)".into()),
    };
    let oauth = raw.oauth.unwrap_or_default();
    if oauth != OAuthConfig::default() {
        if !matches!(transport, TransportConfig::Http { .. }) {
            return Err("\"oauth\" is for remote (http) servers only".into());
        }
        if oauth.client_secret.is_some() && oauth.client_id.is_none() {
            return Err("\"oauth\": \"clientSecret\" needs the \"clientId\" it belongs to".into());
        }
        if let Some(document) = &oauth.client_metadata_url
            && !url::Url::parse(document).is_ok_and(|u| u.scheme() == "https" && u.path() != "/")
        {
            return Err(
                "\"oauth\": \"clientMetadataUrl\" must be an https address with a path".into(),
            );
        }
    }
    let secs = |v: Option<u64>, default: Duration| -> Result<Duration, String> {
        match v {
            None => Ok(default),
            Some(0) => Err("timeouts must be at least one second".into()),
            // A timeout meant as "never" (u64::MAX) would overflow the moment it is added to
            // the clock, and fail every call it governs.
            Some(s) if s > MAX_TIMEOUT_SECS => Err(format!(
                "timeouts must be at most {MAX_TIMEOUT_SECS} seconds ({} days)",
                MAX_TIMEOUT_SECS / 86_400
            )),
            Some(s) => Ok(Duration::from_secs(s)),
        }
    };
    Ok(ServerConfig {
        name: name.to_owned(),
        transport,
        trusted: raw.trusted,
        answer_timeout: secs(raw.answer_timeout_secs, DEFAULT_ANSWER_TIMEOUT)?,
        request_timeout: secs(raw.request_timeout_secs, DEFAULT_REQUEST_TIMEOUT)?,
        protocol: raw.protocol,
        tool_policy: raw.tool_policy,
        read_policy: raw.read_policy,
        agent_roots: raw.agent_roots,
        approval_wait: secs(raw.approval_wait_secs, DEFAULT_APPROVAL_WAIT)?,
        pending_expiry: secs(raw.pending_approval_secs, DEFAULT_PENDING_EXPIRY)?,
        oauth,
    })
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Byte offset of serde_json's 1-based (line, column) in `text`.
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    let col_bytes: usize = text[line_start..]
        .chars()
        .take(column.saturating_sub(1))
        .map(char::len_utf8)
        .sum();
    line_start + col_bytes
}

/// serde_json appends " at line L column C" relative to the entry; we report our own. It
/// also quotes the value it did not expect (`invalid type: string "Bearer sk-…"`), and a value
/// in the wrong place is often a credential (`"headers": "Authorization: Bearer …"`): the
/// message, logged and shown in Settings, says only what kind of value it was.
fn strip_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let text = match text.rfind(" at line ") {
        Some(i) => &text[..i],
        None => &text,
    };
    for prefix in ["invalid type: ", "invalid value: ", "invalid length "] {
        if let Some(rest) = text.strip_prefix(prefix)
            && let Some(end) = rest.rfind(", expected ")
        {
            let kind = rest[..end]
                .split([' ', '"', '`'])
                .next()
                .unwrap_or_default();
            let kind = match kind {
                "floating" => "a number",
                "integer" => "an integer",
                "string" => "a string",
                "boolean" => "a boolean",
                "map" => "an object",
                "sequence" => "a list",
                "null" => "null",
                _ if prefix == "invalid length " => "a list of another length",
                _ => "a value of another kind",
            };
            return format!("{prefix}{kind}{}", &rest[end..]);
        }
    }
    text.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server's identity changes with anything that says what runs or answers, and only
    /// with that.
    #[test]
    fn a_servers_identity_is_what_runs_or_answers() {
        let base = ServerConfig::stdio("fs", "npx", &["server-fs", "/home/me/scratch"]);
        let same = |f: &dyn Fn(&mut ServerConfig)| {
            let mut other = base.clone();
            f(&mut other);
            other.transport.identity() == base.transport.identity()
        };
        assert!(same(&|s| s.name = "renamed".into()));
        assert!(same(&|s| s.trusted = true));
        type Parts<'a> = (
            &'a mut Vec<String>,
            &'a mut BTreeMap<String, String>,
            &'a mut Option<PathBuf>,
        );
        fn stdio(s: &mut ServerConfig) -> Parts<'_> {
            match &mut s.transport {
                TransportConfig::Stdio { args, env, cwd, .. } => (args, env, cwd),
                TransportConfig::Http { .. } => unreachable!(),
            }
        }
        assert!(!same(&|s| stdio(s).0[1] = "/home/me".into()));
        assert!(!same(&|s| {
            stdio(s).1.insert("ROOT".into(), "/".into());
        }));
        assert!(!same(&|s| *stdio(s).2 = Some("/tmp".into())));
        let site = ServerConfig::http("web", "https://mcp.example.com/mcp");
        let mut moved = site.clone();
        moved.transport = TransportConfig::Http {
            url: "https://mcp.example.net/mcp".into(),
            headers: BTreeMap::new(),
        };
        assert_ne!(site.transport.identity(), moved.transport.identity());
        let mut other_account = site.clone();
        if let TransportConfig::Http { headers, .. } = &mut other_account.transport {
            headers.insert("Authorization".into(), "Bearer other".into());
        }
        assert_ne!(
            site.transport.identity(),
            other_account.transport.identity()
        );
        assert!(site.transport.identity().starts_with("sha256:"));
    }

    /// Identities are what decisions were bound to when first made, or every decision would
    /// lapse with a release. These digests are of the transport as serde wrote it then
    /// (checked when this test was written); a field added to the transport changes none.
    #[test]
    fn identities_stay_as_first_bound() {
        let mut local = ServerConfig::stdio("fs", "npx", &["-y", "server-fs", "/home/me"]);
        if let TransportConfig::Stdio { env, cwd, .. } = &mut local.transport {
            env.insert("TOKEN".into(), "s3cret".into());
            *cwd = Some("/srv/é".into());
        }
        let bare = ServerConfig::stdio("x", "/usr/bin/x", &[]);
        let mut remote = ServerConfig::http("web", "https://mcp.example.com/mcp");
        if let TransportConfig::Http { headers, .. } = &mut remote.transport {
            headers.insert("Authorization".into(), "Bearer t".into());
        }
        let golden = [
            (
                &local,
                "sha256:0607e486f899ff06092a4556020469990c7d11a532c72c3e9ec817bcf36c800a",
            ),
            (
                &bare,
                "sha256:4da1887cd39870decbd27dd9c7b2146007bbd5967405bb3fae91425828829548",
            ),
            (
                &remote,
                "sha256:1982e39f59ec627da28f7bacd35a6b75c584eafd8c249311bdaf2eed6ee08b91",
            ),
        ];
        for (config, digest) in golden {
            assert_eq!(config.transport.identity(), digest, "{}", config.name);
        }
    }

    #[test]
    fn agents_roots_reach_a_server_only_where_its_entry_says_so() {
        let text = r#"{"mcpServers": {"files": {"command": "x", "agentRoots": true}, "other": {"command": "y"}}}"#;
        let loaded = parse(&p(), text);
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        let by_name = |n: &str| loaded.servers.iter().find(|s| s.name == n).unwrap();
        assert!(by_name("files").agent_roots);
        assert!(!by_name("other").agent_roots);
        // A typo is not silently taken for the default.
        let loaded = parse(
            &p(),
            r#"{"mcpServers": {"files": {"command": "x", "agent_roots": true}}}"#,
        );
        assert!(loaded.servers.is_empty(), "{:?}", loaded.servers);
        assert!(
            loaded.errors[0].message.contains("agentRoots"),
            "{:?}",
            loaded.errors
        );
    }

    /// A value in the wrong place is named by its kind, never quoted: it is often a
    /// credential, and the message is logged and shown.
    #[test]
    fn a_gateway_block_that_cannot_be_read_leaves_the_gateway_off() {
        for block in [
            r#"{"enabled": "false"}"#,
            r#"{"enabeld": false}"#,
            r#"{"enabled": false, "port": 0}"#,
            r#"{"port": 0}"#,
        ] {
            let text = format!(r#"{{"gateway": {block}, "mcpServers": {{}}}}"#);
            let loaded = parse(&p(), &text);
            assert!(!loaded.gateway.enabled, "{block}");
            assert_eq!(loaded.errors.len(), 1, "{block}: {:?}", loaded.errors);
        }
        let loaded = parse(&p(), r#"{"gateway": {"port": 47000}}"#);
        assert!(loaded.gateway.enabled && loaded.errors.is_empty());
    }

    /// A key that is a typo of Countersign's own is never read, so the person's rule would be
    /// dropped without a word: the entry is refused, and says what was meant. Other agents' keys
    /// beside Countersign's are left alone.
    #[test]
    fn a_mistyped_key_of_countersigns_own_is_refused_with_what_was_meant() {
        for (entry, meant) in [
            (
                r#"{"command": "x", "toolpolicy": {"rm": "deny"}}"#,
                "toolPolicy",
            ),
            (
                r#"{"command": "x", "tool_policy": {"rm": "deny"}}"#,
                "toolPolicy",
            ),
            (
                r#"{"command": "x", "toolsPolicy": {"rm": "deny"}}"#,
                "toolPolicy",
            ),
            (r#"{"command": "x", "read-policy": "deny"}"#, "readPolicy"),
            (r#"{"command": "x", "Trusted": false}"#, "trusted"),
            (r#"{"url": "https://a.example/mcp", "OAuth": {}}"#, "oauth"),
            (
                r#"{"command": "x", "approvalWaitSec": 5}"#,
                "approvalWaitSecs",
            ),
            (
                r#"{"command": "x", "toolPolicies": {"rm": "deny"}}"#,
                "toolPolicy",
            ),
            (r#"{"command": "x", "readPolicies": "deny"}"#, "readPolicy"),
            (
                r#"{"command": "x", "answerTimeoutSeconds": 5}"#,
                "answerTimeoutSecs",
            ),
            (r#"{"command": "x", "disable": true}"#, "disabled"),
            (r#"{"command": "x", "Disabled": true}"#, "disabled"),
        ] {
            let loaded = parse(&p(), &format!(r#"{{"mcpServers": {{"s": {entry}}}}}"#));
            assert!(loaded.servers.is_empty(), "{entry}");
            assert!(
                loaded.errors[0]
                    .message
                    .ends_with(&format!("did you mean {meant:?}?")),
                "{entry}: {:?}",
                loaded.errors
            );
        }
        // Other agents' keys, and Countersign's own spelt right.
        let loaded = parse(
            &p(),
            r#"{"mcpServers": {"s": {"command": "x", "trust": true, "timeout": 5,
                "alwaysAllow": [], "autoApprove": [], "description": "d", "toolPolicy": {},
                "transportType": "stdio", "envFile": ".env", "includeTools": [],
                "excludeTools": [], "requestOptions": {}, "httpUrl": "x", "enabled": true}}}"#,
        );
        assert_eq!(loaded.servers.len(), 1, "{:?}", loaded.errors);
        assert!(loaded.errors.is_empty());
        // At the top: a misspelt gateway block may say "off", so the gateway is off.
        for text in [
            r#"{"gatway": {"enabled": false}, "mcpServers": {}}"#,
            r#"{"Gateway": {"enabled": false}, "gateway": {"port": 47100}}"#,
            r#"{"mcp_servers": {"s": {"command": "x"}}}"#,
        ] {
            let loaded = parse(&p(), text);
            assert!(!loaded.gateway.enabled, "{text}");
            assert_eq!(loaded.errors.len(), 1, "{text}: {:?}", loaded.errors);
        }
        let loaded = parse(&p(), r#"{"globalShortcut": "x", "mcpServers": {}}"#);
        assert!(loaded.gateway.enabled && loaded.errors.is_empty());
    }

    /// An agent's entry pasted into Countersign's config would send every request back to
    /// the gateway, which would forward it to itself again.
    #[test]
    fn an_entry_that_reaches_countersigns_own_gateway_is_refused() {
        let loaded = parse(
            &p(),
            r#"{"gateway": {"port": 47100}, "mcpServers": {
                "a": {"url": "http://127.0.0.1:47100/mcp/a", "headers": {"Authorization": "Bearer cs_x"}},
                "b": {"url": "http://LOCALHOST:47100/mcp/other"},
                "c": {"type": "http", "url": "http://[::1]:47100/mcp/c/"},
                "d": {"command": "/usr/local/bin/countersign-bridge", "args": ["d"]},
                "e": {"url": "http://127.0.0.2:47100/mcp/e"},
                "f": {"url": "http://127.0.0.1:47101/mcp/f"},
                "g": {"url": "http://127.0.0.1:47100/other"},
                "h": {"command": "countersign-demo-server"}
            }}"#,
        );
        let refused: Vec<&str> = loaded
            .errors
            .iter()
            .map(|e| e.server.as_deref().unwrap_or_default())
            .collect();
        assert_eq!(refused, ["a", "b", "c", "d", "e"], "{:?}", loaded.errors);
        assert!(
            loaded.errors[0]
                .message
                .contains("reaches Countersign's own gateway")
        );
        assert!(!loaded.errors[0].message.contains("cs_x"));
        let kept: Vec<&str> = loaded.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(kept, ["f", "g", "h"]);
    }

    #[test]
    fn a_rule_or_a_server_written_twice_is_refused_not_read_as_the_last() {
        let loaded = parse(
            &p(),
            r#"{"mcpServers": {"fs": {"command": "x", "toolPolicy": {"rm": "deny", "rm": "allow"}}}}"#,
        );
        assert!(loaded.servers.is_empty());
        assert!(
            loaded.errors[0].message.contains("\"rm\" is written twice"),
            "{:?}",
            loaded.errors
        );
        let loaded = parse(
            &p(),
            r#"{"mcpServers": {"fs": {"command": "x"}, "fs": {"command": "y"}}}"#,
        );
        assert!(loaded.servers.is_empty());
        assert!(
            loaded.errors[0].message.contains("\"fs\" is written twice"),
            "{:?}",
            loaded.errors
        );
    }

    #[test]
    fn a_file_that_is_not_utf8_is_refused_whole_not_read_leniently() {
        let loaded = parse_bytes(
            &p(),
            b"{\"mcpServers\": {\"s\": {\"command\": \"caf\xe9\"}}}",
        );
        assert!(loaded.servers.is_empty());
        assert_eq!(loaded.errors.len(), 1);
        assert!(
            loaded.errors[0].message.contains("UTF-8"),
            "{:?}",
            loaded.errors
        );
        assert_eq!(parse_bytes(&p(), br#"{"mcpServers": {}}"#).errors.len(), 0);
    }

    #[test]
    fn a_name_that_looks_like_another_or_cannot_be_reached_is_refused() {
        for name in [
            "github ",
            " github",
            "..",
            ".",
            "git\u{202e}hub",
            "a\u{7}b",
            "a\u{200b}b",
        ] {
            let text = serde_json::json!({"mcpServers": {name: {"command": "x"}}}).to_string();
            let loaded = parse(&p(), &text);
            assert!(loaded.servers.is_empty(), "{name:?}");
            assert_eq!(loaded.errors.len(), 1, "{name:?}");
        }
        for name in ["my desk.v2", "github", "ünïcode", "a.b"] {
            let text = serde_json::json!({"mcpServers": {name: {"command": "x"}}}).to_string();
            assert_eq!(parse(&p(), &text).servers.len(), 1, "{name:?}");
        }
        // A name that reads the same as another's in other letters (a Cyrillic `і`, a Greek
        // `ο`, `rn` for `m`): the second is refused, the first kept.
        for twin in ["t\u{456}ckets", "tick\u{435}ts", "ticket\u{455}"] {
            let text = format!(
                r#"{{"mcpServers": {{"tickets": {{"command": "x"}}, "{twin}": {{"command": "y"}}}}}}"#
            );
            let loaded = parse(&p(), &text);
            let names: Vec<_> = loaded.servers.iter().map(|s| s.name.as_str()).collect();
            assert_eq!(names, ["tickets"], "{twin:?}");
            assert!(
                loaded.errors[0]
                    .message
                    .contains("reads the same as \"tickets\""),
                "{:?}",
                loaded.errors
            );
        }
        let text = r#"{"mcpServers": {"modem": {"command": "x"}, "rnodem": {"command": "y"}}}"#;
        assert_eq!(parse(&p(), text).servers.len(), 1);
        // Names that differ to the eye stay two servers.
        let text = r#"{"mcpServers": {"tickets": {"command": "x"}, "Tickets-2": {"command": "y"}, "tikets": {"command": "z"}}}"#;
        assert_eq!(parse(&p(), text).servers.len(), 3);
    }

    #[test]
    fn a_timeout_meant_as_never_is_refused_not_overflowed() {
        for key in [
            "requestTimeoutSecs",
            "answerTimeoutSecs",
            "approvalWaitSecs",
            "pendingApprovalSecs",
        ] {
            let text = format!(
                r#"{{"mcpServers": {{"s": {{"command": "x", "{key}": {}}}}}}}"#,
                u64::MAX
            );
            let loaded = parse(&p(), &text);
            assert!(loaded.servers.is_empty(), "{key}");
            assert!(
                loaded.errors[0].message.contains("at most"),
                "{key}: {:?}",
                loaded.errors
            );
        }
        let text = format!(
            r#"{{"mcpServers": {{"s": {{"command": "x", "pendingApprovalSecs": {MAX_TIMEOUT_SECS}}}}}}}"#
        );
        assert_eq!(parse(&p(), &text).servers.len(), 1);
    }

    #[test]
    fn a_misplaced_value_is_not_quoted_in_the_error() {
        for (entry, expected) in [
            (
                r#"{"url": "https://a.example/mcp", "headers": "Authorization: Bearer sk-live-123"}"#,
                "invalid type: a string, expected a map",
            ),
            (
                r#"{"command": "x", "env": "KEY=sk-live-123"}"#,
                "invalid type: a string, expected a map",
            ),
            (
                r#"{"command": "x", "args": "sk-live-123"}"#,
                "invalid type: a string, expected a sequence",
            ),
            (
                r#"{"command": "x", "env": "sk-live-123, expected a map"}"#,
                "invalid type: a string, expected a map",
            ),
            (
                r#"{"command": "x", "env": {"KEY": 123456789}}"#,
                "invalid type: an integer, expected a string",
            ),
        ] {
            let text = format!(r#"{{"mcpServers": {{"s": {entry}}}}}"#);
            let loaded = parse(&p(), &text);
            let message = &loaded.errors.first().expect("an error").message;
            assert!(
                !message.contains("sk-live") && !message.contains("123456789"),
                "{message}"
            );
            assert!(message.contains(expected), "{message}");
        }
        // The file as a whole, too.
        let loaded = parse(&p(), r#"{"mcpServers": "Authorization: Bearer sk-live-1"}"#);
        let message = &loaded.errors.first().expect("an error").message;
        assert!(!message.contains("sk-live"), "{message}");
        assert!(message.contains("expected a map"), "{message}");
    }

    fn p() -> PathBuf {
        PathBuf::from("/tmp/c.json")
    }

    #[test]
    fn reads_stdio_and_http_entries_with_own_keys() {
        let text = r#"{
  "mcpServers": {
    "desk": {"command": "desk", "args": ["--x"], "env": {"A": "1"}, "cwd": "/tmp", "trusted": true, "answerTimeoutSecs": 30},
    "remote": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer x"}, "autoApprove": []}
  }
}"#;
        let loaded = parse(&p(), text);
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        assert_eq!(loaded.servers.len(), 2);
        let desk = &loaded.servers[0];
        assert_eq!(desk.name, "desk");
        assert!(desk.trusted);
        assert_eq!(desk.answer_timeout, Duration::from_secs(30));
        assert!(
            matches!(&desk.transport, TransportConfig::Stdio { command, args, .. } if command == "desk" && args == &["--x"])
        );
        let remote = &loaded.servers[1];
        assert!(
            matches!(&remote.transport, TransportConfig::Http { url, headers } if url.ends_with("/mcp") && headers.len() == 1)
        );
        assert_eq!(remote.answer_timeout, DEFAULT_ANSWER_TIMEOUT);
    }

    #[test]
    fn oauth_blocks_as_agent_hosts_write_them_load_and_wrong_ones_are_named() {
        let text = r#"{
  "mcpServers": {
    "claude-code": {"type": "http", "url": "https://a.example/mcp", "oauth": {"clientId": "cid", "callbackPort": 8976}},
    "gemini": {"httpUrl": "x", "type": "http", "url": "https://b.example/mcp", "oauth": {"enabled": true, "clientId": "g", "clientSecret": "s", "scopes": ["read"], "redirectUri": "http://localhost:7777/oauth/callback"}},
    "cimd": {"type": "http", "url": "https://c.example/mcp", "oauth": {"clientMetadataUrl": "https://countersign.example/client.json"}},
    "stdio": {"command": "x", "oauth": {"clientId": "c"}},
    "secret-alone": {"type": "http", "url": "https://d.example/mcp", "oauth": {"clientSecret": "s"}},
    "plain-cimd": {"type": "http", "url": "https://e.example/mcp", "oauth": {"clientMetadataUrl": "http://countersign.example/client.json"}}
  }
}"#;
        let loaded = parse(&p(), text);
        let by = |n: &str| loaded.servers.iter().find(|s| s.name == n);
        let claude = by("claude-code").unwrap();
        assert_eq!(claude.oauth.client_id.as_deref(), Some("cid"));
        assert_eq!(claude.oauth.callback_port, Some(8976));
        let gemini = by("gemini").unwrap();
        assert_eq!(gemini.oauth.client_secret.as_deref(), Some("s"));
        assert_eq!(gemini.oauth.scopes, vec!["read".to_owned()]);
        assert!(by("cimd").unwrap().oauth.client_metadata_url.is_some());
        let error = |n: &str| {
            loaded
                .errors
                .iter()
                .find(|e| e.server.as_deref() == Some(n))
                .map(|e| e.message.clone())
                .unwrap_or_default()
        };
        assert!(error("stdio").contains("remote (http) servers only"));
        assert!(error("secret-alone").contains("needs the \"clientId\""));
        assert!(error("plain-cimd").contains("https"));
        assert_eq!(loaded.servers.len(), 3);
    }

    #[test]
    fn a_broken_entry_is_located_and_the_rest_load() {
        let text = "{\n  \"mcpServers\": {\n    \"good\": {\"command\": \"ok\"},\n    \"bad\": {\"command\": 42},\n    \"worse\": {\"args\": []}\n  }\n}\n";
        let loaded = parse(&p(), text);
        assert_eq!(loaded.servers.len(), 1);
        assert_eq!(loaded.servers[0].name, "good");
        assert_eq!(loaded.errors.len(), 2);
        let bad = loaded
            .errors
            .iter()
            .find(|e| e.server.as_deref() == Some("bad"))
            .unwrap();
        assert_eq!(bad.line, 4);
        assert!(bad.column > 12, "column {}", bad.column);
        assert!(bad.message.contains("invalid type"), "{}", bad.message);
        let worse = loaded
            .errors
            .iter()
            .find(|e| e.server.as_deref() == Some("worse"))
            .unwrap();
        assert_eq!((worse.line, worse.column), (5, 14));
        assert!(
            worse
                .to_string()
                .starts_with("/tmp/c.json:5:14: server \"worse\": ")
        );
    }

    #[test]
    fn a_broken_file_names_line_and_column() {
        let loaded = parse(
            &p(),
            "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"\n  }\n",
        );
        assert!(loaded.servers.is_empty());
        assert_eq!(loaded.errors.len(), 1);
        assert!(loaded.errors[0].line >= 4);
        assert!(loaded.errors[0].server.is_none());
    }

    #[test]
    fn rejects_ambiguous_and_unsupported_entries() {
        let text = r#"{"mcpServers": {
            "both": {"command": "x", "url": "http://a"},
            "sse": {"type": "sse", "url": "http://a/sse"},
            "ftp": {"type": "http", "url": "ftp://a"},
            "zero": {"command": "x", "answerTimeoutSecs": 0},
            "off": {"command": "x", "disabled": true}
        }}"#;
        let loaded = parse(&p(), text);
        assert!(loaded.servers.is_empty());
        let names: Vec<_> = loaded
            .errors
            .iter()
            .filter_map(|e| e.server.clone())
            .collect();
        assert_eq!(names, ["both", "ftp", "sse", "zero"]);
    }

    #[test]
    fn first_run_writes_the_demo_config() {
        let dir = std::env::temp_dir().join(format!("cs-config-{}", std::process::id()));
        let path = dir.join("nested/config.json");
        let _ = std::fs::remove_dir_all(&dir);
        let loaded = load_or_create(&ConfigSource::Platform(path.clone()), "/opt/demo");
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        assert_eq!(loaded.servers.len(), 1);
        assert_eq!(loaded.servers[0].name, "demo");
        assert!(path.exists());
        // A named file that is missing is an error, not a silent default.
        let missing = load_or_create(&ConfigSource::Flag(dir.join("nope.json")), "/opt/demo");
        assert!(missing.servers.is_empty());
        assert_eq!(missing.errors.len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
