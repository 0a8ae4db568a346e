//! Remembered approvals: what the person chose beyond "once" for an agent's tool calls, how
//! long it lasts, which calls it covers, and the tool definition it was given for.
//!
//! Pure logic, time passed in: the gate (`gateway/policy.rs`) asks [`RememberedDecision::applies`]
//! and the broker checks a choice against the call it answers with [`Covering::check`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// How long a remembered decision lasts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Lasting {
    /// Until the agent's session through the gateway ends.
    Session,
    /// Until this moment (milliseconds since the Unix epoch): "for 15 minutes", "until
    /// tomorrow"; the dialog works out the moment in the person's own time zone.
    Until {
        #[ts(type = "number")]
        until_ms: u64,
    },
    Always,
}

/// Which calls of the tool a remembered decision covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Covering {
    /// Any arguments. A call that carries fields beyond rmcp's model (`gateway::sent`, judged
    /// beside its arguments) is covered only with the very fields the person saw on the call
    /// answered (`also_sent`, compact JSON, filled in by the backend): a yes to `deploy` is not
    /// a yes to `deploy` with an `x-force` the server may act on.
    AnyArguments {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        also_sent: Option<String>,
    },
    /// Only calls with exactly these arguments (as forwarded, compact JSON); filled in by the
    /// backend from the call being answered.
    ExactArguments {
        #[serde(default)]
        arguments: String,
    },
    /// Calls whose string argument `argument` is a path under `prefix` (both normalized, so
    /// `..` cannot climb out), and so is each of `also`.
    PathUnder {
        argument: String,
        prefix: String,
        /// The other arguments that were absolute paths in the call the person answered
        /// (filled in by the backend from that call): a `move_file`'s `destination` beside
        /// its `source`. Empty in decisions made before it was kept.
        #[serde(default)]
        also: Vec<String>,
    },
    /// Calls whose string argument `argument` is a URL on `host`, and so is each of `also`.
    /// `host` names the port when it is not the scheme's default (`localhost:3000`), as
    /// [`url_host`] reads it: a URL on another port is not covered. One kept by an older
    /// version names none, and covers URLs on the default port only.
    UrlHost {
        argument: String,
        host: String,
        /// The other arguments that were http(s) URLs in the call the person answered (filled
        /// in by the backend).
        #[serde(default)]
        also: Vec<String>,
    },
}

/// The person's choice in the approval dialog beyond "once".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct Remember {
    pub allow: bool,
    pub lasting: Lasting,
    pub covering: Covering,
}

/// One remembered decision, as kept in settings and listed in Settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct RememberedDecision {
    #[ts(type = "number")]
    pub id: u64,
    /// The agent it belongs to: the id of the gateway token the agent holds.
    pub agent: String,
    /// That token's name, for the person.
    pub agent_name: String,
    pub server: String,
    /// Which server it was given for (`TransportConfig::identity`): the same name configured
    /// to run or reach another server is not that server. Empty in decisions made before it
    /// was kept and not bound since (`SettingsStore::bind_endpoints`): they decide nothing.
    #[serde(default)]
    pub endpoint: String,
    pub tool: String,
    pub allow: bool,
    pub lasting: Lasting,
    pub covering: Covering,
    /// The upstream session a `Session` decision belongs to.
    #[ts(type = "number | null")]
    #[serde(default)]
    pub session: Option<u64>,
    /// The tool's definition as the person saw it, and its digest.
    #[ts(type = "Record<string, unknown>")]
    pub definition: Value,
    pub digest: String,
    #[ts(type = "number")]
    pub created_ms: u64,
    #[ts(type = "number | null")]
    #[serde(default)]
    pub last_used_ms: Option<u64>,
    #[ts(type = "number")]
    #[serde(default)]
    pub uses: u64,
    /// Why it decides nothing now, filled in as Settings lists it (`App::settings`); never
    /// kept, and never read to decide: the gate compares the endpoint itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub inert: Option<Inert>,
}

/// Why a remembered decision decides nothing now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub enum Inert {
    /// Made before decisions named their server, and not bound at the first start that did
    /// (no server of its name was configured then).
    Unbound,
    /// No server of its name is configured now.
    ServerGone,
    /// The server of its name now runs or reaches another server.
    ServerChanged,
}

#[cfg(test)]
impl RememberedDecision {
    /// For tests: `agent`'s decision to `allow` `tool` of `server` at `endpoint`, always, any
    /// arguments, for a tool whose digest is `d`.
    pub(crate) fn for_test(
        agent: &str,
        server: &str,
        endpoint: &str,
        tool: &str,
        allow: bool,
    ) -> Self {
        RememberedDecision {
            id: 0,
            agent: agent.into(),
            agent_name: agent.into(),
            server: server.into(),
            endpoint: endpoint.into(),
            tool: tool.into(),
            allow,
            lasting: Lasting::Always,
            covering: Covering::AnyArguments { also_sent: None },
            session: None,
            definition: Value::Object(Map::new()),
            digest: "d".into(),
            created_ms: 0,
            last_used_ms: None,
            uses: 0,
            inert: None,
        }
    }
}

/// One field of a tool's definition that changed since the person decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct DefinitionChange {
    pub field: String,
    /// As compact JSON text (`null` when absent), so the dialog shows it as text.
    pub before: String,
    pub after: String,
}

/// The call a decision is checked against.
pub struct Call<'a> {
    pub agent: &'a str,
    pub server: &'a str,
    /// The server's `TransportConfig::identity` as configured now.
    pub endpoint: &'a str,
    pub tool: &'a str,
    pub arguments: &'a Value,
    pub session: u64,
    pub digest: &'a str,
    pub now_ms: u64,
    /// Now on the clock a Deny ends by (`crate::ask::patient_ms`): never ahead of `now_ms`.
    pub patient_ms: u64,
}

impl RememberedDecision {
    pub fn is_expired(&self, now_ms: u64) -> bool {
        matches!(self.lasting, Lasting::Until { until_ms } if until_ms <= now_ms)
    }

    /// An allow for a time whose clock now reads before it was made: the clock was set back
    /// since, so how much of its time is left cannot be told. It allows nothing; a deny still
    /// denies. (The decision clock never runs backwards within a run, and such an allow is
    /// dropped at a start, `Settings::made_ahead_of`: this holds for one that reaches the gate
    /// another way, a test's clock say.)
    fn in_doubt(&self, now_ms: u64) -> bool {
        self.allow && matches!(self.lasting, Lasting::Until { .. }) && now_ms < self.created_ms
    }

    /// Whether this decision is about `call`'s agent, server and tool and still lasts for it,
    /// whatever the tool's definition now is.
    fn concerns(&self, call: &Call) -> bool {
        self.agent == call.agent
            && self.server == call.server
            && self.tool == call.tool
            && !self.is_expired(if self.allow {
                call.now_ms
            } else {
                call.patient_ms.min(call.now_ms)
            })
            && !self.in_doubt(call.now_ms)
            && match self.lasting {
                Lasting::Session => self.session == Some(call.session),
                _ => true,
            }
            && self.covering.covers_call(self.allow, call.arguments)
    }

    /// Whether it decides `call`: it concerns it, and the server and the tool are still what
    /// the person saw.
    pub fn applies(&self, call: &Call) -> bool {
        self.concerns(call) && self.digest == call.digest && self.endpoint == call.endpoint
    }

    /// It would decide `call` but the tool or the server changed since: the person is asked
    /// again.
    pub fn outdated_for(&self, call: &Call) -> bool {
        self.concerns(call) && (self.digest != call.digest || self.endpoint != call.endpoint)
    }

    /// For the audit log and History: which decision decided a call.
    pub fn describe(&self) -> String {
        let verb = if self.allow { "allow" } else { "deny" };
        let lasting = match &self.lasting {
            Lasting::Session => "for the agent's session".to_owned(),
            Lasting::Until { until_ms } => format!("until {until_ms} (ms since epoch)"),
            Lasting::Always => "always".to_owned(),
        };
        let covering = self.covering.describe();
        format!("remembered #{}: {verb} {lasting}, {covering}", self.id)
    }
}

/// Whether a lax reader takes keys `a` and `b` for the same: Go's `encoding/json` (which
/// servers written with mcp-go use) matches a struct's fields by name without regard to case,
/// Unicode's included (`ſ` is `s`, the Kelvin sign `k`), and the last key of the ones it
/// matches wins.
pub fn same_key_to_a_lax_reader(a: &str, b: &str) -> bool {
    let fold = |k: &str| k.to_uppercase().to_lowercase();
    a == b || fold(a) == fold(b)
}

/// The value of `arguments`' member `name`, when no other member is the same to a lax reader
/// ([`same_key_to_a_lax_reader`]): with a `PATH` beside `path`, the one a server would read is
/// not the one the decision checked.
fn only_argument<'a>(arguments: &'a Value, name: &str) -> Option<&'a Value> {
    let arguments = arguments.as_object()?;
    let mut alike = arguments
        .keys()
        .filter(|k| same_key_to_a_lax_reader(k, name));
    match (alike.next(), alike.next()) {
        (Some(_), None) => arguments.get(name),
        _ => None,
    }
}

/// The names of `arguments`' string members other than `argument` whose text is `like` (a
/// path, a URL), for the decision's description.
fn other_arguments(arguments: &Value, argument: &str, like: impl Fn(&str) -> bool) -> Vec<String> {
    let Some(arguments) = arguments.as_object() else {
        return Vec::new();
    };
    arguments
        .iter()
        .filter(|(name, value)| *name != argument && value.as_str().is_some_and(&like))
        .map(|(name, _)| name.clone())
        .collect()
}

/// Every string of the call's arguments a server may read as a path or an address, at any
/// depth: a `{"options": {"destination": …}}` is the server's to read as much as a top-level
/// one. (Keys are not read: a server that takes a path from a key is not covered here.)
fn argument_texts(arguments: &Value) -> Vec<&str> {
    fn walk<'a>(value: &'a Value, into: &mut Vec<&'a str>) {
        match value {
            Value::String(text) => into.push(text),
            Value::Array(items) => items.iter().for_each(|v| walk(v, into)),
            Value::Object(members) => members.values().for_each(|v| walk(v, into)),
            _ => {}
        }
    }
    let mut texts = Vec::new();
    if arguments.is_object() {
        walk(arguments, &mut texts);
    }
    texts
}

/// Text a server may take for a file path: absolute (`/…`: `//etc` is `/etc` to the kernel,
/// `/*/..` is `/` to Node's `path.resolve`, so a comment's `/* …` or `// …` counts too), from
/// the home directory (`~`), relative to where the server runs (`.`, `..`, `./…`, `../…`), or a
/// `file:` address, whatever else it holds (a line break and a space are as good in a file's
/// name as any other character) and after any spaces or line breaks it starts with (a server
/// that trims its input drops them); or, on one line, a word with a `/` that is no URL. A path
/// decision holds every such text of a call to its folder, and one it cannot place (relative,
/// or starting with a space) is not covered: so a text that only starts like a path (a file's
/// content, say) takes the call out of the decision, and the person is asked.
pub fn looks_like_path(text: &str) -> bool {
    let spaced = text.contains(char::is_whitespace);
    // What trimming drops: Unicode's white space (Rust's, Python's `strip`), controls, and the
    // byte order mark JavaScript's `trim` drops too.
    let start =
        text.trim_start_matches(|c: char| c.is_whitespace() || c.is_control() || c == '\u{feff}');
    let anchored = start.starts_with('/')
        || start.starts_with('~')
        || start == "."
        || start == ".."
        || start.starts_with("./")
        || start.starts_with("../")
        || start
            .get(..5)
            .is_some_and(|s| s.eq_ignore_ascii_case("file:"));
    anchored
        || (!text.contains(['\n', '\r'])
            && !spaced
            && text.contains('/')
            && url::Url::parse(text).is_err())
}

/// Text a server may take for an address to fetch: one line that reads as a URL with a host
/// (or a `file:` one, `//host/…` relative to a scheme, or an address written without a scheme,
/// [`looks_like_bare_address`]). A host decision holds every such text of a call to its host.
/// Read as URL readers read it: WHATWG's parser (browsers, Node's `fetch`, Python's
/// `urlsplit`) drops tabs and line breaks anywhere and spaces and controls around, so
/// `"https://evil.example/\n"` is a URL to evil.example there. Such a text counts as a URL
/// (and is on no host: `url_host` takes only a text every reader reads alike).
fn looks_like_url(text: &str) -> bool {
    let read: String = text
        .trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    // `//host/…` is an address relative to a scheme: a reader with a base URL (a browser,
    // `urljoin`) fetches it from that host.
    let web = strip_prefix_ignoring_case(&read, "http://")
        .or_else(|| strip_prefix_ignoring_case(&read, "https://"))
        .is_some()
        || (read.starts_with("//") && !read.starts_with("///"));
    web || looks_like_bare_address(&read)
        || url::Url::parse(&read)
            .is_ok_and(|u| u.host_str().is_some_and(|h| !h.is_empty()) || u.scheme() == "file")
}

/// An address written without a scheme, which many tools complete with `https://` (and git
/// reads `git@host:path` as SSH to that host): a host (a name with a dot and a top-level domain
/// of letters or `xn--`, perhaps ending in a dot; `localhost`; an IPv4 address in any of the
/// forms readers take, `127.1` or `0x7f.0.0.1`; a bracketed IPv6 one), perhaps after `user@` or
/// `user:password@`, followed by a path, query or fragment (`\` too, as WHATWG reads it) or a
/// `:` and more (a port, or git's path); or alone when it starts `www.` or is bracketed. Such a
/// text is on no host for a decision ([`url_host`]): the person is asked. A bare name with a dot
/// (`notes.txt`) or a mail address is not one, so file names leave host decisions alone.
fn looks_like_bare_address(text: &str) -> bool {
    if text.is_empty() || text.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return false;
    }
    let end = text.find(['/', '?', '#', '\\']).unwrap_or(text.len());
    let (authority, rest) = text.split_at(end);
    let host_port = match authority.rsplit_once('@') {
        Some((user, host))
            if !user.is_empty()
                && user.chars().all(|c| {
                    c.is_alphanumeric()
                        || matches!(c, '.' | '_' | '-' | ':' | '%' | '+' | '~' | '!')
                }) =>
        {
            host
        }
        Some(_) => return false,
        None => authority,
    };
    if let Some(inner) = host_port.strip_prefix('[') {
        return inner.split_once(']').is_some_and(|(address, _)| {
            address.contains(':')
                && address
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.'))
        });
    }
    let (host, port) = match host_port.split_once(':') {
        Some((host, port)) => (host, port),
        None => (host_port, ""),
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    let labels: Vec<&str> = host.split('.').collect();
    let number = |l: &str| match l.get(..2) {
        Some(x) if x.eq_ignore_ascii_case("0x") => l[2..].chars().all(|c| c.is_ascii_hexdigit()),
        _ => !l.is_empty() && l.chars().all(|c| c.is_ascii_digit()),
    };
    let ip = (2..=4).contains(&labels.len()) && labels.iter().all(|l| number(l));
    let label = |l: &&str| {
        !l.is_empty()
            && !l.starts_with('-')
            && l.chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_'))
    };
    let top_level = |t: &str| {
        (t.chars().count() >= 2 && t.chars().all(char::is_alphabetic))
            || (t.len() > 4 && t.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("xn--")))
    };
    let named = labels.len() >= 2
        && labels.iter().all(label)
        && labels.last().is_some_and(|t| top_level(t));
    if !(ip || named || host.eq_ignore_ascii_case("localhost")) {
        return false;
    }
    !rest.is_empty()
        || !port.is_empty()
        || (named
            && host
                .get(..4)
                .is_some_and(|w| w.eq_ignore_ascii_case("www.")))
}

/// A judged call's own arguments, and the fields beyond rmcp's model beside them if it carries
/// any: the gate judges such a call as `[arguments, fields]` (`gateway::sent::judged`), where a
/// plain call's arguments are an object.
pub(crate) fn judged_parts(judged: &Value) -> (&Value, Option<&Value>) {
    match judged.as_array().map(Vec::as_slice) {
        Some([arguments, fields]) => (arguments, Some(fields)),
        _ => (judged, None),
    }
}

/// The fields beyond the model a judged call carries, as compact JSON.
fn also_sent_with(judged: &Value) -> Option<String> {
    judged_parts(judged).1.map(compact)
}

/// `argument` and `also`, as a decision's description names them.
fn names(argument: &str, also: &[String]) -> String {
    std::iter::once(argument)
        .chain(also.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Covering {
    /// In words, for the audit log and History.
    pub fn describe(&self) -> String {
        match self {
            Covering::AnyArguments { also_sent: None } => "any arguments".to_owned(),
            Covering::AnyArguments {
                also_sent: Some(fields),
            } => format!("any arguments, with {fields} also sent"),
            Covering::ExactArguments { arguments } => format!("exactly {arguments}"),
            Covering::PathUnder {
                argument,
                prefix,
                also,
            } => format!("{} under {prefix}", names(argument, also)),
            Covering::UrlHost {
                argument,
                host,
                also,
            } => format!("{} on {host}", names(argument, also)),
        }
    }

    /// Whether a call with `arguments` is covered.
    pub fn covers(&self, arguments: &Value) -> bool {
        match self {
            Covering::AnyArguments { also_sent } => also_sent_with(arguments) == *also_sent,
            Covering::ExactArguments { arguments: exact } => compact(arguments) == *exact,
            Covering::PathUnder {
                argument,
                prefix,
                also,
            } => {
                let Some(prefix) = normalize_path(prefix) else {
                    return false;
                };
                let within = format!("{}/", prefix.trim_end_matches('/'));
                let under = |text: &str| {
                    normalize_path(text).is_some_and(|p| p == prefix || p.starts_with(&within))
                };
                // The named arguments, and every other text of the call a server may read as
                // a path (one the call on screen did not have, too): a `destination` elsewhere,
                // or one relative to wherever the server runs, is not covered.
                std::iter::once(argument).chain(also).all(|name| {
                    only_argument(arguments, name)
                        .and_then(Value::as_str)
                        .is_some_and(under)
                }) && argument_texts(arguments)
                    .into_iter()
                    .filter(|t| looks_like_path(t))
                    .all(under)
            }
            Covering::UrlHost {
                argument,
                host,
                also,
            } => {
                let host = host.to_ascii_lowercase();
                let on_host = |text: &str| url_host(text).is_some_and(|h| h == host);
                std::iter::once(argument).chain(also).all(|name| {
                    only_argument(arguments, name)
                        .and_then(Value::as_str)
                        .is_some_and(on_host)
                }) && argument_texts(arguments)
                    .into_iter()
                    .filter(|t| looks_like_url(t))
                    .all(on_host)
            }
        }
    }

    /// Whether a decision with this covering, an allow or a no, covers a call judged as
    /// `judged`. A no covers at least what it covered without the fields beyond the model: a
    /// "never" is not dodged by adding one (an `x-anything`), nor by leaving out the one its
    /// call carried. An allow covers only what the person saw.
    pub fn covers_call(&self, allow: bool, judged: &Value) -> bool {
        if allow {
            return self.covers(judged);
        }
        match self {
            Covering::AnyArguments { .. } => true,
            _ => self.covers(judged) || self.covers(judged_parts(judged).0),
        }
    }

    /// Checks the person's choice against the call it answers (the choice must cover that
    /// call, or it is not what the person saw) and fills in exact arguments.
    pub fn check(self, arguments: &Value) -> Result<Covering, String> {
        let covering = match self {
            Covering::ExactArguments { .. } => Covering::ExactArguments {
                arguments: compact(arguments),
            },
            Covering::AnyArguments { .. } => Covering::AnyArguments {
                also_sent: also_sent_with(arguments),
            },
            Covering::PathUnder {
                argument, prefix, ..
            } => {
                let prefix = normalize_path(&prefix)
                    .ok_or_else(|| format!("{prefix:?} is not an absolute path"))?;
                let also = other_arguments(arguments, &argument, looks_like_path);
                Covering::PathUnder {
                    argument,
                    prefix,
                    also,
                }
            }
            Covering::UrlHost { argument, host, .. } => {
                let also = other_arguments(arguments, &argument, looks_like_url);
                Covering::UrlHost {
                    argument,
                    host: host.to_ascii_lowercase(),
                    also,
                }
            }
        };
        if covering.covers(arguments) {
            Ok(covering)
        } else {
            Err("the choice does not cover the call it answers".into())
        }
    }
}

impl Lasting {
    /// An `Until` the person chose by the wall clock (`wall_ms` now), put on the clock
    /// decisions last by (`decision_ms` now, ahead of the wall clock after it was set back):
    /// "for 15 minutes" stays 15 minutes.
    /// (Less than a second apart, the two clocks only round differently: left as chosen.)
    pub fn onto_decision_clock(self, wall_ms: u64, decision_ms: u64) -> Lasting {
        let ahead = decision_ms.saturating_sub(wall_ms);
        match self {
            Lasting::Until { until_ms } if ahead >= 1_000 => Lasting::Until {
                until_ms: until_ms.saturating_add(ahead),
            },
            lasting => lasting,
        }
    }

    /// A `Until` in the past or present lasts no time at all.
    pub fn check(self, now_ms: u64) -> Result<Lasting, String> {
        match self {
            Lasting::Until { until_ms } if until_ms <= now_ms => {
                Err("that moment has already passed".into())
            }
            lasting => Ok(lasting),
        }
    }
}

/// A path with `.` and `..` resolved lexically, repeated and trailing slashes removed;
/// `None` for a relative path (it means nothing without the server's working directory) or one
/// that climbs above the root. Symbolic links are the server's to resolve, not ours: a prefix
/// covers what it names, not where links there lead.
pub fn normalize_path(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    Some(format!("/{}", parts.join("/")))
}

/// The host (lowercase, IDNs in their `xn--` form), with its port when the URL names one other
/// than its scheme's default (`localhost:3000`), of an http(s) URL that every reader reads
/// alike; `None` for any other. WHATWG's parser (the `url` crate's, browsers') reads
/// `http://good.example\@evil.example/` as on `good.example`, where curl and Python read
/// `evil.example`; it also drops tabs and line breaks and takes `http:good.example`. So only
/// `http(s)://` followed by a plain authority (letters, digits, `-`, `.`, a port, a bracketed
/// IPv6 address: no `\`, `@`, `%`, spaces or controls) has a host here, and a host decision
/// covers nothing else.
pub fn url_host(text: &str) -> Option<String> {
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return None;
    }
    let rest = strip_prefix_ignoring_case(text, "http://")
        .or_else(|| strip_prefix_ignoring_case(text, "https://"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let plain = |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '[' | ']');
    if authority.is_empty() || !authority.chars().all(plain) {
        return None;
    }
    let url = url::Url::parse(text).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let host = url.host_str()?.to_ascii_lowercase();
    // The `url` crate leaves out the scheme's default port: `https://a.example:443` is on
    // `a.example`.
    Some(match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    })
}

fn strip_prefix_ignoring_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// What the person is shown of a tool: its name, title, description, annotations and input
/// schema, as the server listed them.
pub fn definition(
    name: &str,
    title: Option<&str>,
    description: Option<&str>,
    annotations: Option<Value>,
    input_schema: Option<Value>,
) -> Value {
    let mut d = Map::new();
    d.insert("name".into(), Value::from(name));
    d.insert(
        "title".into(),
        title.map(Value::from).unwrap_or(Value::Null),
    );
    d.insert(
        "description".into(),
        description.map(Value::from).unwrap_or(Value::Null),
    );
    d.insert("annotations".into(), annotations.unwrap_or(Value::Null));
    d.insert("inputSchema".into(), input_schema.unwrap_or(Value::Null));
    Value::Object(d)
}

/// SHA-256 of the definition with object keys sorted, so a server listing the same tool with
/// its keys in another order is not a change.
pub fn digest(definition: &Value) -> String {
    hex::encode(Sha256::digest(compact(&sorted(definition)).as_bytes()))
}

/// The fields of the definition that differ between what the person saw and now.
pub fn changes(before: &Value, after: &Value) -> Vec<DefinitionChange> {
    ["title", "description", "annotations", "inputSchema", "name"]
        .into_iter()
        .filter_map(|field| {
            let (b, a) = (
                before.get(field).unwrap_or(&Value::Null),
                after.get(field).unwrap_or(&Value::Null),
            );
            (sorted(b) != sorted(a)).then(|| DefinitionChange {
                field: field.to_owned(),
                before: compact(b),
                after: compact(a),
            })
        })
        .collect()
}

fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lax reader's sameness of keys: case, Unicode's included, and nothing more.
    #[test]
    fn keys_a_lax_reader_takes_for_the_same() {
        for (a, b) in [
            ("NAME", "name"),
            ("taſk", "task"),
            ("tas\u{212A}", "task"),
            ("DryRun", "dryRun"),
        ] {
            assert!(same_key_to_a_lax_reader(a, b), "{a} {b}");
        }
        for (a, b) in [("names", "name"), ("na me", "name"), ("", "name")] {
            assert!(!same_key_to_a_lax_reader(a, b), "{a} {b}");
        }
    }

    /// A path (or host) decision covers every argument that was a path (a URL) in the call
    /// the person answered, whatever the dialog sent: `move_file`'s `destination` is held to
    /// the folder as well as its `source`.
    #[test]
    fn a_path_or_host_decision_holds_every_such_argument_of_the_call_answered() {
        let moving = json!({"source": "/p/a", "destination": "/p/b", "note": "tidy up"});
        let under = Covering::PathUnder {
            argument: "source".into(),
            prefix: "/p".into(),
            also: Vec::new(),
        }
        .check(&moving)
        .unwrap();
        assert_eq!(
            under,
            Covering::PathUnder {
                argument: "source".into(),
                prefix: "/p".into(),
                also: vec!["destination".into()],
            }
        );
        assert!(under.covers(&json!({"source": "/p/c", "destination": "/p/d/e", "note": "x"})));
        assert!(!under.covers(&json!({"source": "/p/c", "destination": "/etc/cron.d/x"})));
        assert!(!under.covers(&json!({"source": "/p/c", "destination": "../../etc/x"})));
        assert!(!under.covers(&json!({"source": "/p/c"})));
        // Whatever the call on screen had: a path argument it left out, or one in an array, is
        // held to the folder too; one relative to wherever the server runs is not covered.
        let old = Covering::PathUnder {
            argument: "source".into(),
            prefix: "/p".into(),
            also: Vec::new(),
        };
        assert!(old.covers(&json!({"source": "/p/c", "note": "tidy up", "n": 3})));
        for outside in [
            json!({"source": "/p/c", "destination": "/etc/cron.d/x"}),
            json!({"source": "/p/c", "destination": "//etc/x"}),
            json!({"source": "/p/c", "destination": "~/.ssh/authorized_keys"}),
            json!({"source": "/p/c", "destination": "../../etc/x"}),
            json!({"source": "/p/c", "destination": "docs/../../x"}),
            json!({"source": "/p/c", "destination": "file:///etc/x"}),
            json!({"source": "/p/c", "more": ["/p/d", "/etc/x"]}),
        ] {
            assert!(!old.covers(&outside), "{outside}");
        }
        // A text that starts with `/` is a path whatever else it holds, even a code comment:
        // `//etc/x` is `/etc/x` to the kernel and `/*/../etc` is `/etc` to Node's
        // `path.resolve`, so telling a comment from a path would let one through. Asking is
        // the safe side.
        assert!(!old.covers(&json!({"source": "/p/c", "content": "/* licence */\nfn main() {}"})));
        assert!(!old.covers(&json!({"source": "/p/c", "content": "// a comment"})));
        // A sentence, a URL, several lines not starting like a path are no path.
        assert!(old.covers(&json!({"source": "/p/c", "content": "see /p/x and\n/etc/y"})));
        assert!(old.covers(&json!({"source": "/p/c", "link": "https://example.com/a/b"})));
        // A folder that does not hold every path of the call on screen is not what was seen.
        let narrow = Covering::PathUnder {
            argument: "source".into(),
            prefix: "/p".into(),
            also: Vec::new(),
        };
        assert!(
            narrow
                .check(&json!({"source": "/p/a", "destination": "/q/b"}))
                .is_err()
        );
        let fetching = json!({"url": "https://a.example/x", "callback": "https://a.example/cb"});
        let on = Covering::UrlHost {
            argument: "url".into(),
            host: "A.example".into(),
            also: Vec::new(),
        }
        .check(&fetching)
        .unwrap();
        assert!(
            on.covers(&json!({"url": "https://a.example/y", "callback": "https://a.example/z"}))
        );
        assert!(
            !on.covers(&json!({"url": "https://a.example/y", "callback": "https://evil.test/"}))
        );
        assert!(!on.covers(&json!({"url": "https://a.example/y", "also": ["https://evil.test/"]})));
        assert!(!on.covers(&json!({"url": "https://a.example/y", "then": "file:///etc/passwd"})));
        assert!(on.covers(
            &json!({"url": "https://a.example/y", "callback": "https://a.example/c", "note": "see a.example"})
        ));
        assert!(
            on.describe().contains("url, callback on a.example"),
            "{}",
            on.describe()
        );
    }

    /// A decision about one argument does not cover a call that carries another by the same
    /// name to a lax reader: the server would read that one.
    /// Fields beyond the model beside the arguments (judged as `[arguments, fields]`): an
    /// allow covers only what the person saw; a "never" is not dodged by adding one, nor by
    /// leaving out the one its call carried.
    #[test]
    fn a_no_is_not_dodged_by_a_field_beyond_the_model() {
        let plain = json!({"path": "/etc/passwd"});
        let with_field = json!([{"path": "/etc/passwd"}, {"x-anything": 1}]);
        let under_etc = Covering::PathUnder {
            argument: "path".into(),
            prefix: "/etc".into(),
            also: Vec::new(),
        };
        let any = Covering::AnyArguments { also_sent: None };
        let any_with = Covering::AnyArguments {
            also_sent: Some(r#"{"x-anything":1}"#.into()),
        };
        let exact = Covering::ExactArguments {
            arguments: compact(&plain),
        };
        for covering in [&under_etc, &any, &exact] {
            assert!(covering.covers_call(false, &with_field), "{covering:?}");
            assert!(!covering.covers_call(true, &with_field), "{covering:?}");
            assert!(covering.covers_call(true, &plain), "{covering:?}");
        }
        assert!(any_with.covers_call(false, &plain));
        assert!(!any_with.covers_call(true, &plain));
        assert!(any_with.covers_call(true, &with_field));
    }

    #[test]
    fn a_path_or_host_decision_covers_no_call_with_a_second_argument_of_its_name() {
        let under = Covering::PathUnder {
            argument: "path".into(),
            prefix: "/p".into(),
            also: Vec::new(),
        };
        assert!(under.covers(&json!({"path": "/p/a"})));
        assert!(!under.covers(&json!({"path": "/p/a", "PATH": "/etc/shadow"})));
        assert!(!under.covers(&json!({"Path": "/etc/shadow", "path": "/p/a"})));
        let on = Covering::UrlHost {
            argument: "url".into(),
            host: "example.com".into(),
            also: Vec::new(),
        };
        assert!(on.covers(&json!({"url": "https://example.com/x"})));
        assert!(!on.covers(&json!({"url": "https://example.com/x", "URL": "https://evil.test/"})));
    }

    /// A path or an address nested in an object or a list of objects is the server's to read
    /// too: it must be under the folder, or on the host, like a top-level one.
    #[test]
    fn a_path_or_host_decision_holds_nested_paths_and_addresses_too() {
        let under = Covering::PathUnder {
            argument: "path".into(),
            prefix: "/p".into(),
            also: Vec::new(),
        };
        assert!(!under.covers(&json!({"path": "/p/a", "opts": {"dest": "/etc/cron.d/x"}})));
        assert!(!under.covers(&json!({"path": "/p/a", "edits": [{"file": "/etc/passwd"}]})));
        assert!(!under.covers(&json!({"path": "/p/a", "deep": [[{"x": {"to": "../../etc"}}]]})));
        // A line break or a space is as good in a file's name as any other character.
        assert!(!under.covers(&json!({"path": "/p/a", "opts": {"dest": "/etc/cron.d/x\n"}})));
        assert!(!under.covers(&json!({"path": "/p/a", "out": "../../x y"})));
        assert!(!under.covers(&json!({"path": "/p/a", "out": "./a b"})));
        assert!(
            under.covers(&json!({"path": "/p/a", "opts": {"dest": "/p/b", "n": 1, "note": "hi"}}))
        );
        let on = Covering::UrlHost {
            argument: "url".into(),
            host: "example.com".into(),
            also: Vec::new(),
        };
        assert!(!on.covers(
            &json!({"url": "https://example.com/", "then": {"post_to": "https://evil.test/"}})
        ));
        assert!(on.covers(
            &json!({"url": "https://example.com/", "then": {"post_to": "https://example.com/b"}})
        ));
        // An address relative to a scheme is on whatever host it names: not this decision's.
        assert!(
            !on.covers(
                &json!({"url": "https://example.com/", "then": {"post_to": "//evil.test/x"}})
            )
        );
        // Nor is one written without a scheme, which many tools complete with `https://`.
        for bare in [
            "evil.test/x",
            "evil.test:8443",
            "evil.test?q=1",
            "www.evil.test",
            "Evil.Test/",
            "git@evil.test:me/repo.git",
            "10.0.0.1:8080",
            "localhost:3000/admin",
            "xn--bcher-kva.example/x",
            "bücher.example/x",
            "example.com/x",
            "user:pw@evil.test/x",
            "evil.test./x",
            "[2001:db8::1]/x",
            "[::1]",
            "evil.xn--p1ai/x",
            "127.1/x",
            "0x7f.0.0.1/x",
            "evil_x.test/x",
            "evil.test\\x",
            " evil.test/x",
            "evil.test/x\n",
        ] {
            assert!(
                !on.covers(&json!({"url": "https://example.com/", "then": {"post_to": bare}})),
                "{bare}"
            );
        }
        // File names, versions, mail addresses and words are no addresses.
        for not_an_address in [
            "notes.txt",
            "src/main.rs",
            "v1.2.3/notes",
            "1.2.3.4.5/x",
            "me@example.com",
            "ratio 3.5/4",
            "a.b",
            "https",
            "..",
            "see: the docs",
        ] {
            assert!(
                on.covers(
                    &json!({"url": "https://example.com/", "then": {"note": not_an_address}})
                ),
                "{not_an_address}"
            );
        }
    }
    use serde_json::json;

    fn decision(lasting: Lasting, covering: Covering) -> RememberedDecision {
        let definition = definition("delete", None, Some("Deletes"), None, None);
        RememberedDecision {
            id: 1,
            agent: "a1".into(),
            agent_name: "Claude Code".into(),
            server: "fs".into(),
            endpoint: "e".into(),
            tool: "delete".into(),
            allow: true,
            lasting,
            covering,
            session: Some(7),
            digest: digest(&definition),
            definition,
            created_ms: 0,
            last_used_ms: None,
            uses: 0,
            inert: None,
        }
    }

    fn call<'a>(arguments: &'a Value, digest: &'a str, session: u64, now_ms: u64) -> Call<'a> {
        Call {
            agent: "a1",
            server: "fs",
            endpoint: "e",
            tool: "delete",
            arguments,
            session,
            digest,
            now_ms,
            patient_ms: now_ms,
        }
    }

    #[test]
    fn paths_are_normalized_so_dot_dot_cannot_climb_out() {
        let under = Covering::PathUnder {
            argument: "path".into(),
            prefix: "/p".into(),
            also: Vec::new(),
        };
        assert!(under.covers(&json!({"path": "/p/a.txt"})));
        assert!(under.covers(&json!({"path": "/p//x/./y"})));
        assert!(under.covers(&json!({"path": "/p"})));
        assert!(!under.covers(&json!({"path": "/p/../etc/passwd"})));
        assert!(!under.covers(&json!({"path": "/q/x"})));
        assert!(!under.covers(&json!({"path": "/pp/x"})));
        assert!(!under.covers(&json!({"path": "p/a.txt"})));
        assert!(!under.covers(&json!({"path": "/.."})));
        assert!(!under.covers(&json!({"other": "/p/a"})));
        assert!(!under.covers(&json!({"path": 3})));
        assert_eq!(normalize_path("/a/b/../c/"), Some("/a/c".into()));
    }

    #[test]
    fn url_hosts_match_exactly_not_by_suffix() {
        let on = Covering::UrlHost {
            argument: "url".into(),
            host: "api.github.com".into(),
            also: Vec::new(),
        };
        assert!(on.covers(&json!({"url": "https://API.github.com/repos"})));
        assert!(!on.covers(&json!({"url": "https://api.github.com.evil.example/"})));
        assert!(!on.covers(&json!({"url": "https://evil.example/?api.github.com"})));
        assert!(!on.covers(&json!({"url": "https://api.github.com@evil.example/"})));
        assert!(!on.covers(&json!({"url": "file:///api.github.com"})));
        // Read alike by every reader, or not covered: WHATWG reads each of these as on
        // api.github.com, curl or Python as elsewhere (or not at all).
        for ambiguous in [
            "http://api.github.com\\@evil.example/",
            "https://api.github.com\\.evil.example/",
            "https://api.git\thub.com/",
            " https://api.github.com/",
            "https:api.github.com/x",
            "https:/api.github.com/x",
            "https://api.github.com%2F@evil.example/",
            "https://user@api.github.com/",
            "https://api.github.com/\n",
        ] {
            assert!(
                !on.covers(&json!({"url": ambiguous})),
                "{ambiguous:?} is covered"
            );
            assert!(
                !on.covers(&json!({"url": "https://api.github.com/", "to": ambiguous})),
                "{ambiguous:?} beside is covered"
            );
        }
        assert!(on.covers(&json!({"url": "HTTPS://api.github.com:443/x?y#z"})));
        // WHATWG drops the line break: it goes to evil.example.
        for beside in [
            "https://evil.example/\n",
            "\nhttps://evil.example/",
            "https://evil.\texample/",
        ] {
            assert!(
                !on.covers(&json!({"url": "https://api.github.com/", "to": beside})),
                "{beside:?} beside is covered"
            );
        }
        let idn = Covering::UrlHost {
            argument: "url".into(),
            host: "xn--mnchen-3ya.de".into(),
            also: Vec::new(),
        };
        assert!(idn.covers(&json!({"url": "https://münchen.de/"})));
        let v6 = Covering::UrlHost {
            argument: "url".into(),
            host: "[::1]".into(),
            also: Vec::new(),
        };
        // A host decision is for its port: `[::1]` is the default one.
        assert!(v6.covers(&json!({"url": "http://[::1]/"})));
        assert!(!v6.covers(&json!({"url": "http://[::1]:8080/"})));
    }

    /// Every text that starts with `/` (after spaces or line breaks, which a server that trims
    /// its input drops) is held to the folder: `//etc` is `/etc` to the kernel, `/*/..` is `/`
    /// to Node's `path.resolve`, and a comment is not told from a path.
    #[test]
    fn every_text_starting_with_a_slash_is_held_to_the_folder() {
        let under = Covering::PathUnder {
            argument: "path".into(),
            prefix: "/p".into(),
            also: Vec::new(),
        };
        for outside in [
            json!({"path": "/p/a", "opts": {"dest": "//etc/cron.d/x\n"}}),
            json!({"path": "/p/a", "out": "/*/../etc/x y"}),
            json!({"path": "/p/a", "x": "  /etc/passwd"}),
            json!({"path": "/p/a", "x": "\n/etc/passwd"}),
            json!({"path": "/p/a", "x": "\u{feff}/etc/passwd"}),
            json!({"path": "/p/a", "x": "\t~/.ssh/authorized_keys"}),
            json!({"path": "/p/a", "x": " ../../etc/x"}),
            json!({"path": "/p/a", "x": "// note"}),
            // Not placed: a server that does not trim reads it relative to where it runs.
            json!({"path": "/p/a", "x": " /p/b"}),
        ] {
            assert!(!under.covers(&outside), "{outside}");
        }
        assert!(under.covers(&json!({"path": "/p/a", "x": "/p/b c\n", "y": "//p/d"})));
        assert!(under.covers(&json!({"path": "/p/a", "x": "a note", "y": " "})));
    }

    /// A host decision is for the host and port the person saw (the scheme's default port
    /// named or not): "any URLs on localhost:3000" is not the Docker API on localhost:2375.
    /// One kept by an older version names no port: it covers the default one only.
    #[test]
    fn a_host_decision_is_for_its_port() {
        let on = |host: &str| Covering::UrlHost {
            argument: "url".into(),
            host: host.into(),
            also: Vec::new(),
        };
        let dev = on("localhost:3000");
        assert!(dev.covers(&json!({"url": "http://localhost:3000/x"})));
        assert!(!dev.covers(&json!({"url": "http://localhost:2375/x"})));
        assert!(!dev.covers(&json!({"url": "http://localhost/x"})));
        assert!(!dev.covers(
            &json!({"url": "http://localhost:3000/x", "then": "http://localhost:2375/containers/create"})
        ));
        let site = on("a.example");
        assert!(site.covers(&json!({"url": "https://a.example/x"})));
        assert!(site.covers(&json!({"url": "https://a.example:443/x"})));
        assert!(site.covers(&json!({"url": "http://a.example:80/x"})));
        assert!(!site.covers(&json!({"url": "https://a.example:8443/x"})));
        assert!(!site.covers(&json!({"url": "https://a.example:80/x"})));
        // Kept by an older version, without its port: asked again on another.
        assert!(!on("localhost").covers(&json!({"url": "http://localhost:3000/x"})));
        // The choice is checked, and kept, with its port.
        let call = json!({"url": "http://localhost:3000/"});
        assert_eq!(
            on("LocalHost:3000").check(&call).unwrap(),
            on("localhost:3000")
        );
        assert!(on("localhost").check(&call).is_err());
        assert_eq!(url_host("http://[::1]:8080/"), Some("[::1]:8080".into()));
        assert_eq!(url_host("HTTPS://A.example:443/"), Some("a.example".into()));
    }

    #[test]
    fn a_choice_must_cover_the_call_it_answers_and_exact_takes_its_arguments() {
        let args = json!({"path": "/home/me/x", "n": 9007199254740993u64});
        let exact = Covering::ExactArguments {
            arguments: String::new(),
        }
        .check(&args)
        .unwrap();
        assert_eq!(
            exact,
            Covering::ExactArguments {
                arguments: r#"{"path":"/home/me/x","n":9007199254740993}"#.into()
            }
        );
        assert!(exact.covers(&args));
        assert!(!exact.covers(&json!({"path": "/home/me/x", "n": 1})));
        assert!(
            Covering::PathUnder {
                argument: "path".into(),
                prefix: "/etc".into(),
                also: Vec::new(),
            }
            .check(&args)
            .is_err()
        );
        assert!(
            Covering::PathUnder {
                argument: "path".into(),
                prefix: "relative".into(),
                also: Vec::new(),
            }
            .check(&args)
            .is_err()
        );
        assert!(Lasting::Until { until_ms: 5 }.check(5).is_err());
        assert!(Lasting::Until { until_ms: 6 }.check(5).is_ok());
        // Chosen by a wall clock set back three hours: as long on the decisions' clock.
        let hours = 3 * 3_600_000;
        assert_eq!(
            Lasting::Until {
                until_ms: 1_000 + 900_000
            }
            .onto_decision_clock(1_000, 1_000 + hours),
            Lasting::Until {
                until_ms: 1_000 + hours + 900_000
            }
        );
        assert_eq!(
            Lasting::Always.onto_decision_clock(1_000, 1_000 + hours),
            Lasting::Always
        );
        assert_eq!(
            Lasting::Until { until_ms: 5_000 }.onto_decision_clock(1_000, 1_003),
            Lasting::Until { until_ms: 5_000 }
        );
    }

    /// The computer's clock set forward past a "for 15 minutes": the allow ends (asked
    /// again), the Deny does not, by the patient clock, so an allow it held back stays held.
    #[test]
    fn a_clock_set_forward_ends_allows_not_denials() {
        let quarter = Lasting::Until { until_ms: 900_000 };
        let allow = decision(quarter.clone(), Covering::AnyArguments { also_sent: None });
        let deny = RememberedDecision {
            allow: false,
            ..allow.clone()
        };
        let args = json!({});
        let digest = allow.digest.clone();
        let mut stepped = call(&args, &digest, 7, 86_400_000);
        stepped.patient_ms = 600_000;
        assert!(!allow.applies(&stepped));
        assert!(deny.applies(&stepped));
        // Its time really up: gone too.
        stepped.patient_ms = 900_000;
        assert!(!deny.applies(&stepped));
    }

    #[test]
    fn a_decision_lasts_as_chosen_and_only_for_the_tool_the_person_saw() {
        let args = json!({"path": "/p/a"});
        let mut d = decision(
            Lasting::Until { until_ms: 100 },
            Covering::AnyArguments { also_sent: None },
        );
        let digest = d.digest.clone();
        assert!(d.applies(&call(&args, &digest, 1, 99)));
        assert!(!d.applies(&call(&args, &digest, 1, 100)));
        // Made at 50: read with a clock set back before that, an allow's time left is unknown,
        // and it allows nothing; a deny still denies.
        d.created_ms = 50;
        assert!(d.applies(&call(&args, &digest, 1, 50)));
        assert!(!d.applies(&call(&args, &digest, 1, 49)));
        d.allow = false;
        assert!(d.applies(&call(&args, &digest, 1, 49)));
        let session = decision(Lasting::Session, Covering::AnyArguments { also_sent: None });
        assert!(session.applies(&call(&args, &digest, 7, 0)));
        assert!(!session.applies(&call(&args, &digest, 8, 0)));
        let always = decision(Lasting::Always, Covering::AnyArguments { also_sent: None });
        let mut other = call(&args, &digest, 1, u64::MAX);
        other.agent = "a2";
        assert!(!always.applies(&other));
        // The tool changed: it no longer applies, and the gate knows why.
        let changed = digest_of_changed();
        assert!(!always.applies(&call(&args, &changed, 1, 0)));
        assert!(always.outdated_for(&call(&args, &changed, 1, 0)));
    }

    /// A decision is for the server the person saw: the same name configured to run another
    /// command (or reach another URL) is asked about again; one made before decisions were
    /// bound to a server (no endpoint) decides nothing.
    #[test]
    fn a_decision_is_only_for_the_server_it_was_given_for() {
        let args = json!({"path": "/p/a"});
        let always = decision(Lasting::Always, Covering::AnyArguments { also_sent: None });
        let digest = always.digest.clone();
        assert!(always.applies(&call(&args, &digest, 1, 0)));
        let mut elsewhere = call(&args, &digest, 1, 0);
        elsewhere.endpoint = "another";
        assert!(!always.applies(&elsewhere));
        assert!(always.outdated_for(&elsewhere));
        let unbound = RememberedDecision {
            endpoint: String::new(),
            ..always
        };
        assert!(!unbound.applies(&call(&args, &digest, 1, 0)));
    }

    fn digest_of_changed() -> String {
        digest(&definition(
            "delete",
            None,
            Some("Deletes everything"),
            Some(json!({"destructiveHint": false})),
            None,
        ))
    }

    #[test]
    fn a_digest_is_the_sha256_of_the_sorted_compact_definition_in_lowercase_hex() {
        // Remembered decisions on disk hold digests: the way they are made must not drift.
        let d = definition(
            "delete",
            None,
            Some("Deletes"),
            None,
            Some(json!({"type": "object"})),
        );
        assert_eq!(
            digest(&d),
            "ed3b778d008712079b77b5c2167901b11bd1293d7f9a2b686cc1875dfd31a718"
        );
    }

    #[test]
    fn changes_name_the_fields_and_key_order_is_not_a_change() {
        let before = definition(
            "t",
            None,
            Some("a"),
            Some(json!({"readOnlyHint": true, "title": "x"})),
            None,
        );
        let reordered = definition(
            "t",
            None,
            Some("a"),
            Some(json!({"title": "x", "readOnlyHint": true})),
            None,
        );
        assert_eq!(digest(&before), digest(&reordered));
        assert!(changes(&before, &reordered).is_empty());
        let after = definition("t", None, Some("b"), None, None);
        let changed = changes(&before, &after);
        let fields: Vec<&str> = changed.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["description", "annotations"]);
        assert_eq!(changed[0].before, "\"a\"");
        assert_eq!(changed[0].after, "\"b\"");
    }
}
