//! What the desktop notification says, and when: a burst of questions becomes one notification
//! ("5 questions from github are waiting"), not a popup each. The notification on screen always
//! counts every announced question still waiting (a later burst replaces it with the new
//! total), and it is withdrawn once they are all answered.
//!
//! The shell decides whether an ask may notify at all (window focused, server muted) and
//! shows the notification; this module owns the wording and the coalescing, so both are testable
//! without a desktop.

use std::time::Duration;

use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::ask::{Ask, AskEvent, AskId, AskKind};

/// A burst ends when no new ask came for this long...
pub const QUIET: Duration = Duration::from_millis(300);
/// ...or this long after its first ask, so a steady trickle still notifies.
pub const MAX_WAIT: Duration = Duration::from_millis(1500);
/// Longest headline (one line of the server's message) put in a notification.
const HEADLINE_CHARS: usize = 120;
/// Headlines listed in a notification about several questions.
const LISTED: usize = 3;

/// One desktop notification: plain text (the sender escapes it for the platform).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub summary: String,
    pub body: String,
    /// The asks it is about, oldest first.
    pub asks: Vec<AskId>,
}

#[derive(Debug, Clone)]
struct Waiting {
    id: AskId,
    server: String,
    agent: Option<String>,
    headline: String,
}

/// What the notification on screen should become.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotificationUpdate {
    /// Show this, replacing the notification on screen if there is one.
    Show(Notification),
    /// Every question it announced is answered or withdrawn: take it away.
    Withdraw,
}

/// Collects asks into bursts. Time is passed in so tests need no clock.
#[derive(Debug, Clone)]
pub struct Coalescer {
    quiet: Duration,
    max_wait: Duration,
    /// Announced in the notification on screen and still waiting.
    announced: Vec<Waiting>,
    /// Arrived since, not yet announced.
    batch: Vec<Waiting>,
    first_at: Option<Instant>,
    last_at: Option<Instant>,
}

impl Default for Coalescer {
    fn default() -> Self {
        Self::new(QUIET, MAX_WAIT)
    }
}

impl Coalescer {
    pub fn new(quiet: Duration, max_wait: Duration) -> Self {
        Coalescer {
            quiet,
            max_wait,
            announced: Vec::new(),
            batch: Vec::new(),
            first_at: None,
            last_at: None,
        }
    }

    pub fn added(&mut self, ask: &Ask, now: Instant) {
        self.batch.push(Waiting {
            id: ask.id,
            server: visible(&ask.asker.server),
            agent: ask.asker.agent.as_deref().map(visible),
            headline: headline(ask),
        });
        self.first_at.get_or_insert(now);
        self.last_at = Some(now);
    }

    /// An ask answered or withdrawn: not announced if the notification has not gone out yet;
    /// `Withdraw` when it was the last one the notification on screen announced.
    pub fn resolved(&mut self, id: AskId) -> Option<NotificationUpdate> {
        self.batch.retain(|w| w.id != id);
        if self.batch.is_empty() {
            self.first_at = None;
            self.last_at = None;
        }
        let before = self.announced.len();
        self.announced.retain(|w| w.id != id);
        (before > 0 && self.announced.is_empty()).then_some(NotificationUpdate::Withdraw)
    }

    /// The person is looking at the window: forget the burst, and withdraw the notification.
    pub fn clear(&mut self) -> Option<NotificationUpdate> {
        self.batch.clear();
        self.first_at = None;
        self.last_at = None;
        let shown = !self.announced.is_empty();
        self.announced.clear();
        shown.then_some(NotificationUpdate::Withdraw)
    }

    /// When the current burst is due, if there is one.
    pub fn due_at(&self) -> Option<Instant> {
        let (first, last) = (self.first_at?, self.last_at?);
        Some((last + self.quiet).min(first + self.max_wait))
    }

    /// The notification for everything announced and still waiting plus the burst; the burst
    /// then starts afresh.
    pub fn flush(&mut self) -> Option<Notification> {
        let batch = std::mem::take(&mut self.batch);
        self.first_at = None;
        self.last_at = None;
        if batch.is_empty() {
            return None;
        }
        self.announced.extend(batch);
        wording(&self.announced)
    }
}

fn wording(batch: &[Waiting]) -> Option<Notification> {
    let asks = batch.iter().map(|w| w.id).collect();
    match batch {
        [] => None,
        [one] => Some(Notification {
            summary: match &one.agent {
                Some(agent) => format!("{} asks (for {agent})", one.server),
                None => format!("{} asks", one.server),
            },
            body: one.headline.clone(),
            asks,
        }),
        many => {
            let mut servers: Vec<&str> = Vec::new();
            for w in many {
                if !servers.contains(&w.server.as_str()) {
                    servers.push(&w.server);
                }
            }
            let summary = match servers.as_slice() {
                [server] => format!("{} questions from {server} are waiting", many.len()),
                _ => format!(
                    "{} questions from {} are waiting",
                    many.len(),
                    servers.join(", ")
                ),
            };
            let mut lines: Vec<String> = many
                .iter()
                .take(LISTED)
                .map(|w| {
                    if servers.len() > 1 {
                        format!("{}: {}", w.server, w.headline)
                    } else {
                        w.headline.clone()
                    }
                })
                .collect();
            if many.len() > LISTED {
                lines.push(format!("and {} more", many.len() - LISTED));
            }
            Some(Notification {
                summary,
                body: lines.join("\n"),
                asks,
            })
        }
    }
}

/// The notification for a remote server that now wants the person to sign in (a session event, not
/// a question: nothing opens until they press Sign in on the server's page). `None` for any
/// other state. Server names are the person's own (from the config), never a server's text.
pub fn sign_in_notification(event: &crate::session::SessionEvent) -> Option<Notification> {
    let crate::session::SessionState::SignInRequired { reason } = &event.state else {
        return None;
    };
    Some(Notification {
        summary: format!("{} needs you to sign in", visible(&event.server)),
        body: format!(
            "{}. Open Countersign and press Sign in on its page.",
            visible(reason)
        ),
        asks: Vec::new(),
    })
}

/// Announces each server that now wants a sign-in, once per change to that state (a server
/// that keeps asking is not announced again until it was signed in or stopped), when
/// `may_notify` allows it for that server, until the channel closes.
pub async fn run_sign_ins(
    mut sessions: broadcast::Receiver<crate::session::SessionEvent>,
    may_notify: impl Fn(&str) -> bool,
    mut update: impl FnMut(NotificationUpdate),
) {
    let mut wanting = std::collections::HashSet::new();
    loop {
        match sessions.recv().await {
            Ok(event) => match sign_in_notification(&event) {
                Some(notification) => {
                    if wanting.insert(event.server.clone()) && may_notify(&event.server) {
                        update(NotificationUpdate::Show(notification));
                    }
                }
                None => {
                    wanting.remove(&event.server);
                }
            },
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => break,
        }
    }
}

/// What the ask wants, in one line: the first line of the message (clipped), or for a URL
/// question the host it wants opened.
pub fn headline(ask: &Ask) -> String {
    let call;
    let (message, host) = match &ask.kind {
        AskKind::Form { message, .. } => (message.as_str(), None),
        AskKind::Url { message, host, .. } => (message.as_str(), Some(host.as_str())),
        AskKind::ToolCall { tool, .. } => {
            call = match &ask.asker.agent {
                Some(agent) => format!("{agent} wants to run {tool}"),
                None => format!("Run {tool}?"),
            };
            (call.as_str(), None)
        }
        AskKind::Sampling { .. } => {
            call = match &ask.asker.agent {
                Some(agent) => format!(
                    "{} wants {agent}'s model to write a reply",
                    ask.asker.server
                ),
                None => format!("{} wants a model to write a reply", ask.asker.server),
            };
            (call.as_str(), None)
        }
    };
    let first = message
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let shown: Vec<char> = first.chars().filter(|&c| !hidden(c)).collect();
    let mut line: String = shown.iter().take(HEADLINE_CHARS).collect();
    if shown.len() > HEADLINE_CHARS {
        line.push('…');
    }
    // The host first: a clipped line must not be able to push it out of sight behind text
    // of the server's own that names another host.
    match host.filter(|h| !h.is_empty()) {
        Some(host) if line.is_empty() => format!("Open {host}"),
        Some(host) => format!("Open {host}: {line}"),
        None if line.is_empty() => "has a question".into(),
        None => line,
    }
}

/// `text` without the characters [`hidden`] names, as a notification or the tray's menu shows a
/// name: server and agent names are the person's own (the config, a token's name), but a name
/// imported from an agent host's file is that file's, and a sign-in's reason quotes the server.
pub fn visible(text: &str) -> String {
    text.chars().filter(|&c| !hidden(c)).collect()
}

/// Characters a server's text may not carry into a notification or a menu: controls, line
/// and paragraph separators (which `lines()` does not split on), and format characters: the
/// bidirectional overrides that could reorder what the person reads, and the invisible ones
/// (zero-width spaces and joiners, tag characters), which some daemons draw as boxes and others
/// not at all, and which can carry text a model reads but the person does not see. The dialog
/// names each of them; a server's name may hold none (`config`).
fn hidden(c: char) -> bool {
    use unicode_general_category::{GeneralCategory, get_general_category};
    c.is_control()
        || matches!(
            get_general_category(c),
            GeneralCategory::Format
                | GeneralCategory::LineSeparator
                | GeneralCategory::ParagraphSeparator
        )
}

/// The freedesktop body is a markup subset on many daemons: escape it so a server's text is
/// shown as text, never as markup or a link.
pub fn escape_freedesktop_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// Turns ask events into notification updates until the channel closes. `may_notify` is asked
/// once per new ask (window focused? server muted?); `focused` lets the shell drop a burst
/// the person is already looking at.
pub async fn run(
    mut events: broadcast::Receiver<AskEvent>,
    may_notify: impl Fn(&Ask) -> bool,
    focused: impl Fn() -> bool,
    mut update: impl FnMut(NotificationUpdate),
    mut coalescer: Coalescer,
) {
    loop {
        let due = coalescer.due_at();
        tokio::select! {
            event = events.recv() => match event {
                Ok(AskEvent::Added { ask }) => {
                    if may_notify(&ask) {
                        coalescer.added(&ask, Instant::now());
                    }
                }
                Ok(AskEvent::Resolved { id, .. }) => {
                    if let Some(withdraw) = coalescer.resolved(id) {
                        update(withdraw);
                    }
                }
                Ok(AskEvent::UrlCompleted { .. }) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => break,
            },
            _ = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                if focused() {
                    if let Some(withdraw) = coalescer.clear() {
                        update(withdraw);
                    }
                } else if let Some(notification) = coalescer.flush() {
                    update(NotificationUpdate::Show(notification));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_sign_in_is_announced_once_per_change_and_never_for_a_muted_server() {
        use crate::session::{SessionEvent, SessionState};
        let (tx, rx) = broadcast::channel(16);
        let want = |server: &str| SessionEvent {
            server: server.into(),
            state: SessionState::SignInRequired {
                reason: "the server asks you to sign in".into(),
            },
            revision: 1,
        };
        let reconnecting = |server: &str| SessionEvent {
            server: server.into(),
            state: SessionState::Connecting,
            revision: 2,
        };
        for event in [
            want("notes"),
            want("notes"),
            want("muted"),
            reconnecting("notes"),
            want("notes"),
        ] {
            tx.send(event).unwrap();
        }
        drop(tx);
        let mut shown = Vec::new();
        run_sign_ins(
            rx,
            |server| server != "muted",
            |update| match update {
                NotificationUpdate::Show(n) => shown.push(n.summary),
                NotificationUpdate::Withdraw => shown.push("withdraw".into()),
            },
        )
        .await;
        assert_eq!(
            shown,
            ["notes needs you to sign in", "notes needs you to sign in"]
        );
    }

    #[test]
    fn a_server_that_wants_a_sign_in_is_announced_and_nothing_else_is() {
        use crate::session::{SessionEvent, SessionState};
        let notification = sign_in_notification(&SessionEvent {
            server: "notes".into(),
            state: SessionState::SignInRequired {
                reason: "the server asks you to sign in".into(),
            },
            revision: 1,
        })
        .unwrap();
        assert_eq!(notification.summary, "notes needs you to sign in");
        assert!(notification.body.contains("press Sign in"));
        assert!(notification.asks.is_empty());
        assert!(
            sign_in_notification(&SessionEvent {
                server: "notes".into(),
                state: SessionState::Connecting,
                revision: 2,
            })
            .is_none()
        );
    }
    use crate::ask::schema::FormSchema;
    use crate::ask::{Asker, Endpoint};
    use std::sync::{Arc, Mutex};

    fn ask(id: AskId, server: &str, message: &str) -> Ask {
        Ask {
            id,
            asker: Asker {
                server: server.into(),
                endpoint: Endpoint::Stdio {
                    command: "x".into(),
                },
                agent: None,
                declared: None,
                agent_id: None,
            },
            kind: AskKind::Form {
                message: message.into(),
                schema: FormSchema { fields: vec![] },
            },
            request: serde_json::Value::Null,
            received_at_ms: 0,
            deadline_ms: None,
        }
    }

    #[test]
    fn one_ask_names_the_server_and_the_first_line() {
        let mut c = Coalescer::default();
        let now = Instant::now();
        c.added(
            &ask(
                1,
                "github",
                "\n  Delete repo acme/x?\nThis cannot be undone.",
            ),
            now,
        );
        assert_eq!(c.due_at(), Some(now + QUIET));
        let n = c.flush().unwrap();
        assert_eq!(n.summary, "github asks");
        assert_eq!(n.body, "Delete repo acme/x?");
        assert_eq!(n.asks, vec![1]);
        assert_eq!(c.flush(), None);
    }

    #[test]
    fn a_burst_is_one_notice_counting_them() {
        let mut c = Coalescer::default();
        let now = Instant::now();
        for i in 0..5 {
            c.added(&ask(i, "github", &format!("q{i}")), now);
        }
        let n = c.flush().unwrap();
        assert_eq!(n.summary, "5 questions from github are waiting");
        assert_eq!(n.body, "q0\nq1\nq2\nand 2 more");
    }

    #[test]
    fn several_servers_are_all_named() {
        let mut c = Coalescer::default();
        let now = Instant::now();
        c.added(&ask(1, "github", "a"), now);
        c.added(&ask(2, "demo", "b"), now);
        let n = c.flush().unwrap();
        assert_eq!(n.summary, "2 questions from github, demo are waiting");
        assert_eq!(n.body, "github: a\ndemo: b");
    }

    #[test]
    fn an_answered_ask_is_not_announced() {
        let mut c = Coalescer::default();
        c.added(&ask(1, "demo", "a"), Instant::now());
        assert_eq!(c.resolved(1), None, "nothing was on screen");
        assert_eq!(c.due_at(), None);
        assert_eq!(c.flush(), None);
    }

    #[test]
    fn a_later_burst_counts_what_still_waits_and_the_notice_goes_when_all_are_answered() {
        let mut c = Coalescer::default();
        let now = Instant::now();
        for i in 0..5 {
            c.added(&ask(i, "github", "q"), now);
        }
        assert_eq!(
            c.flush().unwrap().summary,
            "5 questions from github are waiting"
        );
        c.added(&ask(10, "demo", "Delete?"), now);
        let n = c.flush().unwrap();
        assert_eq!(n.summary, "6 questions from github, demo are waiting");
        assert_eq!(n.asks.len(), 6);
        for i in 0..5 {
            assert_eq!(c.resolved(i), None, "one still waits");
        }
        assert_eq!(c.resolved(10), Some(NotificationUpdate::Withdraw));
        assert_eq!(c.resolved(10), None);
    }

    #[test]
    fn focus_withdraws_the_notice_on_screen() {
        let mut c = Coalescer::default();
        c.added(&ask(1, "demo", "a"), Instant::now());
        assert_eq!(c.clear(), None, "nothing shown yet");
        c.added(&ask(2, "demo", "b"), Instant::now());
        c.flush().unwrap();
        assert_eq!(c.clear(), Some(NotificationUpdate::Withdraw));
    }

    #[test]
    fn a_steady_trickle_still_notifies_after_max_wait() {
        let mut c = Coalescer::default();
        let start = Instant::now();
        let mut now = start;
        for i in 0..20 {
            c.added(&ask(i, "demo", "q"), now);
            now += QUIET / 2;
        }
        assert_eq!(c.due_at(), Some(start + MAX_WAIT));
    }

    /// The names in a notification's summary (server, agent) carry no line break, control or
    /// bidi override either: a name can come from an agent host's file.
    #[test]
    fn a_summary_shows_names_without_hidden_characters() {
        let mut one = Coalescer::new(QUIET, MAX_WAIT);
        let mut a = ask(1, "fs\u{202E}txt.exe", "q");
        a.asker.agent = Some("Claude\nCode\u{2066}".into());
        one.added(&a, Instant::now());
        let shown = one.flush().unwrap();
        assert_eq!(shown.summary, "fstxt.exe asks (for ClaudeCode)");
        let reason = "denied\u{202E}: see https://evil.test\u{2028}now".to_owned();
        let wants = crate::session::SessionEvent {
            server: "web\u{7}".into(),
            state: crate::session::SessionState::SignInRequired { reason },
            revision: 1,
        };
        let notice = sign_in_notification(&wants).unwrap();
        assert_eq!(notice.summary, "web needs you to sign in");
        assert!(
            notice.body.starts_with("denied: see https://evil.testnow."),
            "{}",
            notice.body
        );
    }

    #[test]
    fn headline_is_one_clipped_line_without_hidden_characters() {
        let long = "x".repeat(500);
        let h = headline(&ask(1, "s", &long));
        assert_eq!(h.chars().count(), HEADLINE_CHARS + 1);
        assert!(h.ends_with('…'));
        assert_eq!(headline(&ask(1, "s", "a\u{7}b\u{1b}[31m")), "ab[31m");
        assert_eq!(headline(&ask(1, "s", "")), "has a question");
        // Bidi overrides and the separators `lines()` does not split on are dropped.
        assert_eq!(
            headline(&ask(1, "s", "pay \u{202E}cod.exe\u{2028}more\u{2066}x")),
            "pay cod.exemorex"
        );
        // And the invisible format characters (the dialog names them).
        assert_eq!(
            headline(&ask(1, "s", "run r\u{200B}m\u{2060} -rf\u{E0041}\u{FEFF} ~")),
            "run rm -rf ~"
        );
        let mut url = ask(1, "s", "Connect your account");
        url.kind = AskKind::Url {
            message: "Connect your account".into(),
            url: "https://auth.example.com/x".into(),
            elicitation_id: "e".into(),
            host: "auth.example.com".into(),
            warnings: vec![],
            sign_in: false,
        };
        assert_eq!(
            headline(&url),
            "Open auth.example.com: Connect your account"
        );
    }

    #[test]
    fn markup_is_escaped() {
        assert_eq!(
            escape_freedesktop_markup(r#"<a href="x">hi</a> & 'b'"#),
            "&lt;a href=&quot;x&quot;&gt;hi&lt;/a&gt; &amp; &apos;b&apos;"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_driver_sends_one_notice_for_ten_asks_and_none_when_refused() {
        let (tx, rx) = broadcast::channel(64);
        let shown = Arc::new(Mutex::new(Vec::new()));
        let sink = shown.clone();
        let task = tokio::spawn(run(
            rx,
            |a: &Ask| a.asker.server != "muted",
            || false,
            move |u| match u {
                NotificationUpdate::Show(n) => sink.lock().unwrap().push(n),
                NotificationUpdate::Withdraw => panic!("nothing was answered"),
            },
            Coalescer::default(),
        ));
        for i in 0..10 {
            tx.send(AskEvent::Added {
                ask: Box::new(ask(i, "demo", "Delete?")),
            })
            .unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tx.send(AskEvent::Added {
            ask: Box::new(ask(99, "muted", "x")),
        })
        .unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
        {
            let shown = shown.lock().unwrap();
            assert_eq!(shown.len(), 1, "{shown:?}");
            assert_eq!(shown[0].summary, "10 questions from demo are waiting");
            assert_eq!(shown[0].asks.len(), 10);
        }
        // A later ask: the notification is replaced with everything still waiting.
        tx.send(AskEvent::Added {
            ask: Box::new(ask(11, "demo", "Again?")),
        })
        .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            shown.lock().unwrap()[1].summary,
            "11 questions from demo are waiting"
        );
        drop(tx);
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_shown_when_the_window_got_focus_meanwhile() {
        let (tx, rx) = broadcast::channel(8);
        let shown = Arc::new(Mutex::new(0));
        let sink = shown.clone();
        let task = tokio::spawn(run(
            rx,
            |_: &Ask| true,
            || true,
            move |_| *sink.lock().unwrap() += 1,
            Coalescer::default(),
        ));
        tx.send(AskEvent::Added {
            ask: Box::new(ask(1, "demo", "q")),
        })
        .unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(*shown.lock().unwrap(), 0);
        drop(tx);
        task.await.unwrap();
    }
}
