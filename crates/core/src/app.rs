//! The application as the desktop shell sees it: one object holding the config, the broker
//! and the sessions, with every operation the UI offers. The shell's commands are one-line
//! calls into this, so all of it is testable without a window.

use tokio_util::sync::CancellationToken;

use crate::ask::audit::AuditLog;
use crate::ask::broker::Broker;
use crate::ask::{Answer, Ask, AskId, Outcome};
use crate::config::LoadedConfig;
use crate::mcp::connect::asker_for;
use crate::session::{SessionManager, SessionState};
use crate::settings::{Settings, SettingsStore};

pub mod history;
mod runner;

use history::history_from;
pub use history::{GatedEntry, History, HistoryEntry, RefusedEntry};

mod ipc;
mod reload;

pub use ipc::{Answered, AppError, ConfigInfo, ServerView};
pub use reload::{CONFIG_POLL, Reload};
#[cfg(test)]
use runner::check_arguments;
pub use runner::{RunProgress, ToolRun, ToolView};

/// Tokens made for rewrite previews not written yet (as many as the plans `agents::Clients` keeps).
const PENDING_ROUTES: usize = 16;

/// A rewrite preview's agent token, registered only when the rewrite is written.
#[derive(Clone)]
struct PendingRoute {
    plan: u64,
    name: String,
    token: String,
}

#[derive(Clone)]
pub struct App {
    config: std::sync::Arc<std::sync::Mutex<reload::ConfigState>>,
    /// Held while a config edit is applied (see `reload`).
    reloading: std::sync::Arc<tokio::sync::Mutex<()>>,
    config_changes: std::sync::Arc<tokio::sync::watch::Sender<u64>>,
    /// Fires at shutdown, for the app's own background work.
    stopping: CancellationToken,
    broker: Broker,
    sessions: SessionManager,
    settings: SettingsStore,
    runs: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<String>>>,
    /// Runs in flight, by run id: Cancel fires the token.
    running: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, CancellationToken>>>,
    progress: tokio::sync::broadcast::Sender<RunProgress>,
    gateway: Option<crate::gateway::Gateway>,
    /// Why there is no gateway, when there is none.
    gateway_error: Option<String>,
    discovery: Option<std::path::PathBuf>,
    /// The agents' config files (import, rewrite); `None` without a home directory.
    clients: Option<crate::agents::Clients>,
    /// Shown beside the config's problems (`ConfigInfo::notices`).
    notices: Vec<String>,
    pending_routes: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<PendingRoute>>>,
}

impl App {
    /// Starts a session for every configured server (all at once, in the background).
    /// Sign-ins are kept in memory only; [`Self::start_with_auth`] keeps them in the
    /// desktop's secret store.
    pub async fn start(config: LoadedConfig, audit: AuditLog) -> App {
        let auth = crate::mcp::oauth::Auth::new(crate::mcp::oauth::vault::Vault::memory());
        Self::start_with_auth(config, audit, auth).await
    }

    pub async fn start_with_auth(
        config: LoadedConfig,
        audit: AuditLog,
        auth: crate::mcp::oauth::Auth,
    ) -> App {
        let broker = Broker::new(audit);
        let sessions = SessionManager::with_auth(
            broker.clone(),
            crate::session::Backoff::default(),
            crate::session::DEFAULT_PING_EVERY,
            auth,
        );
        sessions.start(config.servers.clone()).await;
        let clients = crate::agents::Clients::detect(config.path.clone(), config.gateway.port);
        App {
            clients,
            config: std::sync::Arc::new(std::sync::Mutex::new(reload::ConfigState::new(config))),
            reloading: Default::default(),
            config_changes: std::sync::Arc::new(tokio::sync::watch::Sender::new(0)),
            stopping: CancellationToken::new(),
            broker,
            sessions,
            settings: SettingsStore::default(),
            runs: Default::default(),
            running: Default::default(),
            progress: tokio::sync::broadcast::channel(256).0,
            gateway: None,
            gateway_error: None,
            discovery: None,
            notices: Vec::new(),
            pending_routes: Default::default(),
        }
    }

    /// Adds notices for the person about Countersign's files (shown with the config's problems).
    pub fn with_notices(mut self, notices: Vec<String>) -> App {
        self.notices.extend(notices);
        self
    }

    /// Starts the gateway as configured (after [`Self::with_settings`]: it remembers "Always
    /// allow" there), keeping its token at `token_path` and telling `countersign-bridge`
    /// where it listens through `discovery`. A failure is kept for the Connect page, not fatal.
    pub async fn with_gateway(
        mut self,
        token_path: std::path::PathBuf,
        discovery: Option<std::path::PathBuf>,
    ) -> App {
        let (gateway_config, servers) = {
            let state = self.config_state();
            (state.running.gateway.clone(), state.running.servers.clone())
        };
        let gateway = match crate::gateway::Gateway::new(
            gateway_config.clone(),
            servers,
            self.broker.clone(),
            self.settings.clone(),
            token_path,
        ) {
            Ok(gateway) => gateway,
            Err(e) => {
                tracing::warn!("{e}");
                self.gateway_error = Some(e.to_string());
                return self;
            }
        };
        gateway.set_auth(self.sessions.auth().clone());
        let sessions = self.sessions.clone();
        gateway.on_sign_in_needed(std::sync::Arc::new(move |server: &str, header: &str| {
            sessions.needs_sign_in(server, header)
        }));
        if gateway_config.enabled {
            match gateway.listen().await {
                Ok(_) => {
                    if let Some(path) = &discovery
                        && let Err(e) = gateway.write_discovery(path)
                    {
                        tracing::warn!(path = %path.display(), error = %e, "cannot write the gateway's address for countersign-bridge");
                    }
                }
                Err(e) => tracing::warn!("gateway: {e}"),
            }
        }
        self.gateway = Some(gateway);
        self.discovery = discovery;
        self
    }

    pub fn gateway(&self) -> Option<&crate::gateway::Gateway> {
        self.gateway.as_ref()
    }

    fn running_gateway(&self) -> Result<&crate::gateway::Gateway, AppError> {
        self.gateway.as_ref().ok_or_else(|| AppError::Gateway {
            message: self
                .gateway_error
                .clone()
                .unwrap_or_else(|| "the gateway is not running".into()),
        })
    }

    /// The Connect agents page.
    pub fn gateway_info(&self) -> Result<crate::gateway::GatewayInfo, AppError> {
        Ok(self.running_gateway()?.info())
    }

    /// Makes an agent with its own token, shown this once with the snippets that carry it;
    /// `bridge_command` is how this install runs the bridge.
    pub fn create_agent(
        &self,
        name: &str,
        bridge_command: &str,
    ) -> Result<crate::gateway::CreatedAgent, AppError> {
        Ok(self.running_gateway()?.create_agent(name, bridge_command)?)
    }

    pub fn agents(&self) -> Result<Vec<crate::gateway::AgentView>, AppError> {
        Ok(self.running_gateway()?.agents())
    }

    /// Revokes agent `id` (its next request gets 401); the agents left.
    pub fn revoke_agent(&self, id: &str) -> Result<Vec<crate::gateway::AgentView>, AppError> {
        let gateway = self.running_gateway()?;
        gateway.revoke_agent(id)?;
        Ok(gateway.agents())
    }

    pub fn set_gateway_paused(&self, paused: bool) -> Result<(), AppError> {
        self.running_gateway()?.set_paused(paused);
        Ok(())
    }

    /// The gateway's changes (listening, paused, resumed; `None` without a gateway): the
    /// shell redraws the tray and tells the window from this, whoever made them.
    pub fn gateway_changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.gateway.as_ref().map(|g| g.changes())
    }

    /// Revokes one remembered decision: that agent's next such call is asked about again.
    pub fn revoke_decision(&self, id: u64) -> Result<Settings, AppError> {
        let now = crate::ask::decision_ms();
        let revoked = match &self.gateway {
            Some(gateway) => gateway.revoke_decision(id, now),
            // (A start with a gateway forgets the pending answers given with it then.)
            None => self.settings.revoke(id, now).map_err(|e| e.to_string()),
        };
        revoked
            .map(|settings| self.listed(settings))
            .map_err(|message| AppError::Settings { message })
    }

    /// Forgets the remembered decisions this version cannot read: the allows they held back
    /// run again.
    pub fn forget_unread_decisions(&self) -> Result<Settings, AppError> {
        self.settings
            .forget_unread()
            .map(|settings| self.listed(settings))
            .map_err(|e| AppError::Settings {
                message: e.to_string(),
            })
    }

    /// Uses `clients` (tests: a temporary home) instead of this user's files.
    pub fn with_clients(mut self, clients: crate::agents::Clients) -> App {
        self.clients = Some(clients);
        self
    }

    fn clients(&self) -> Result<&crate::agents::Clients, AppError> {
        self.clients.as_ref().ok_or_else(|| AppError::AgentConfig {
            message: "no home directory: agents' config files cannot be found".into(),
        })
    }

    /// The agents' config files and the rewrites that can be undone.
    pub fn agent_configs(&self) -> Result<crate::agents::AgentConfigs, AppError> {
        Ok(self.clients()?.overview())
    }

    /// Runs the host's own check of its MCP servers (`claude mcp list`, ...) and returns what
    /// it printed.
    pub async fn check_agent_host(
        &self,
        client: crate::agents::ClientKind,
    ) -> Result<crate::agents::HostCheck, AppError> {
        Ok(self.clients()?.check_host(client).await?)
    }

    /// What importing `client`'s servers into Countersign's config would do (writes nothing).
    pub fn preview_import(
        &self,
        client: crate::agents::ClientKind,
    ) -> Result<crate::agents::ImportPreview, AppError> {
        Ok(self.clients()?.preview_import(client)?)
    }

    /// Imports the chosen servers of a preview into the config file, which the app then
    /// reloads (see `reload`): they run at once.
    pub fn import_servers(
        &self,
        plan: u64,
        names: &[String],
    ) -> Result<crate::agents::ImportResult, AppError> {
        Ok(self.clients()?.import(plan, names)?)
    }

    /// The rewrite of `client`'s config that routes its servers through the gateway (writes
    /// nothing); `bridge_command` is how this install runs the bridge.
    pub fn preview_rewrite(
        &self,
        client: crate::agents::ClientKind,
        bridge_command: &str,
    ) -> Result<crate::agents::RewritePreview, AppError> {
        let clients = self.clients()?;
        let info = self.gateway_info()?;
        if !info.enabled {
            return Err(AppError::Gateway {
                message:
                    "the gateway is turned off in the config, so agents cannot be routed through it"
                        .into(),
            });
        }
        // The rewritten entries carry a token of their own, for an agent named after the host;
        // the agent exists only once the rewrite is written.
        let token = crate::gateway::token::fresh().map_err(|e| AppError::Agent {
            message: format!("cannot make a random token: {e}"),
        })?;
        let route = crate::agents::Route {
            base_url: info.url,
            token: token.clone(),
            bridge: bridge_command.to_owned(),
            served: info.servers.into_iter().map(|s| s.name).collect(),
        };
        let preview = clients.preview_rewrite(client, &route)?;
        if let Some(plan) = preview.plan {
            let mut pending = self
                .pending_routes
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            while pending.len() >= PENDING_ROUTES {
                pending.pop_front();
            }
            pending.push_back(PendingRoute {
                plan,
                name: client.title().to_owned(),
                token,
            });
        }
        Ok(preview)
    }

    /// Writes a previewed rewrite (backup first, recorded for the undo), registering the
    /// agent whose token it writes first; if the write fails, that agent is revoked again.
    pub fn rewrite_agent_config(
        &self,
        plan: u64,
    ) -> Result<crate::agents::RewriteResult, AppError> {
        let clients = self.clients()?;
        let gateway = self.running_gateway()?;
        let route = {
            let mut pending = self
                .pending_routes
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let at = pending.iter().position(|p| p.plan == plan);
            at.and_then(|at| pending.remove(at))
        };
        let Some(route) = route else {
            return Err(AppError::AgentConfig {
                message: "this preview is no longer available; open it again".into(),
            });
        };
        let agent = gateway.adopt_agent(&route.name, &route.token)?;
        match clients.rewrite_for(plan, Some(agent.id.clone())) {
            Ok(result) => Ok(result),
            Err(e) => {
                if let Err(revoke) = gateway.revoke_agent(&agent.id) {
                    tracing::warn!(agent = %agent.id, error = %revoke, "cannot revoke the token of a rewrite that failed");
                }
                // The plan may be tried again; its token goes with it.
                self.pending_routes
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push_back(route);
                Err(e.into())
            }
        }
    }

    /// Puts an agent's config back from the rewrite's backup; `force` also when it changed
    /// since. The agent token the rewrite wrote is revoked: nothing holds it any more.
    pub fn undo_rewrite(
        &self,
        id: &str,
        force: bool,
    ) -> Result<crate::agents::UndoResult, AppError> {
        let clients = self.clients()?;
        let agent = clients.rewrite_agent(id);
        let undone = clients.undo(id, force)?;
        if let (Some(agent), Some(gateway)) = (agent, self.gateway.as_ref())
            && let Err(e) = gateway.revoke_agent(&agent)
        {
            tracing::warn!(agent = %agent, error = %e, "cannot revoke the token of an undone rewrite");
        }
        Ok(undone)
    }

    /// Uses `settings` (loaded from disk by the caller) instead of in-memory defaults.
    pub fn with_settings(mut self, settings: SettingsStore) -> App {
        // Decisions kept before they named their server are bound to it as configured now.
        let servers = self.config_state().running.servers.clone();
        let identity_of = |name: &str| {
            servers
                .iter()
                .find(|s| s.name == name)
                .map(|s| s.transport.identity())
        };
        if let Err(e) = settings.bind_endpoints(identity_of) {
            tracing::warn!(error = %e, "cannot bind remembered decisions to their servers");
        }
        self.settings = settings;
        self
    }

    /// Fires when a change to the settings could not be saved, or is saved again: the
    /// shell redraws the notices (`config_info`) on it.
    pub fn settings_unsaved_changes(&self) -> tokio::sync::watch::Receiver<Option<String>> {
        self.settings.unsaved_changes()
    }

    /// The settings as the person sees them: expired decisions are gone.
    pub fn settings(&self) -> Settings {
        self.listed(self.settings.current(crate::ask::decision_ms()))
    }

    /// `settings` as Settings lists them: each remembered decision that decides nothing now
    /// says why, so the person is not left wondering why it still asks, and its times are as
    /// the person's clock reads them (`Settings::on_the_wall_clock`).
    fn listed(&self, settings: Settings) -> Settings {
        use crate::ask::approval::Inert;
        let ahead = crate::ask::decision_ms().saturating_sub(crate::ask::unix_ms());
        let mut settings = settings.on_the_wall_clock(ahead);
        if !settings.unread.is_empty() {
            settings.unread_shown = Some(settings.unread_shown());
        }
        let servers = &self.config_state().running.servers;
        for d in &mut settings.remembered {
            d.inert = match servers.iter().find(|s| s.name == d.server) {
                _ if d.endpoint.is_empty() => Some(Inert::Unbound),
                None => Some(Inert::ServerGone),
                Some(s) if s.transport.identity() != d.endpoint => Some(Inert::ServerChanged),
                Some(_) => None,
            };
        }
        settings
    }

    pub fn is_muted(&self, server: &str) -> bool {
        self.settings.is_muted(server)
    }

    /// Mutes or unmutes a server's notifications; the name need not be configured now (a
    /// server removed from the config and added back stays muted).
    pub fn set_muted(&self, server: &str, muted: bool) -> Result<Settings, AppError> {
        self.settings
            .update(|s| {
                if muted {
                    s.muted_servers.insert(server.to_owned());
                } else {
                    s.muted_servers.remove(server);
                }
            })
            .map(|settings| self.listed(settings))
            .map_err(|e| AppError::Settings {
                message: e.to_string(),
            })
    }

    pub fn broker(&self) -> &Broker {
        &self.broker
    }

    pub fn sessions(&self) -> &SessionManager {
        &self.sessions
    }

    pub fn config_info(&self) -> ConfigInfo {
        let state = self.config_state();
        let mut notices = self.notices.clone();
        if let Some(why) = self.settings.unsaved() {
            notices.push(format!(
                "Countersign could not save your last change to its settings: {why}. This \
                 note goes once a change is saved."
            ));
        }
        if state.gateway_changed {
            notices.push(
                "The gateway's settings in the config file changed: they apply when Countersign \
                 restarts."
                    .into(),
            );
        }
        ConfigInfo {
            path: state.running.path.display().to_string(),
            edit_rejected: !state.rejected.is_empty(),
            errors: if state.rejected.is_empty() {
                state.running.errors.clone()
            } else {
                state.rejected.clone()
            },
            notices,
        }
    }

    fn config_state(&self) -> std::sync::MutexGuard<'_, reload::ConfigState> {
        self.config.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn config_path(&self) -> std::path::PathBuf {
        self.config_state().running.path.clone()
    }

    pub fn pending(&self) -> Vec<Ask> {
        self.broker.pending()
    }

    /// The person's answer to question `id`, and what the shell must do now. Consent to a URL
    /// question (accept without content) is answered first and recorded; only then, and only
    /// for a web address that passed the policy when it arrived, is it returned to be opened.
    pub fn answer(&self, id: AskId, answer: Answer) -> Result<Answered, AppError> {
        let url = match &answer {
            Answer::Accept { content: None } => self
                .broker
                .pending()
                .into_iter()
                .find(|a| a.id == id)
                .and_then(|a| match a.kind {
                    crate::ask::AskKind::Url { url, .. } => {
                        crate::ask::url_policy::check(&url).ok().map(|w| w.url)
                    }
                    _ => None,
                }),
            _ => None,
        };
        let outcome = self.broker.answer(id, answer)?;
        // A consent the log could not record went out as cancel: nothing opens.
        let open = url.filter(|_| matches!(outcome, Outcome::Accepted { .. }));
        Ok(Answered { outcome, open })
    }

    /// The call approval `id` waits for, made once more with `dryRun: true`, for the person to
    /// read before deciding (see `gateway::preview`). It answers nothing: the question stays
    /// open, and what comes back is the server's word.
    pub async fn preview_call(
        &self,
        id: AskId,
    ) -> Result<crate::gateway::preview::PreviewResult, AppError> {
        Ok(self.running_gateway()?.preview(id).await?)
    }

    /// Desktop notifications until the app ends: questions the person is not looking at
    /// (`focused` says whether they are), a burst coalesced into one, and servers that want a
    /// sign-in; muted servers send none. `update` shows or withdraws the notification.
    pub fn notifications(
        &self,
        focused: impl Fn() -> bool + Clone + Send + 'static,
        update: impl Fn(crate::notification::NotificationUpdate) + Clone + Send + 'static,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        use crate::notification::{Coalescer, run, run_sign_ins};
        let (asks, sessions) = (self.broker.subscribe(), self.sessions.subscribe());
        let (app, sign_in_app) = (self.clone(), self.clone());
        let (sign_in_focused, sign_in_update, focused_now) =
            (focused.clone(), update.clone(), focused.clone());
        async move {
            let questions = run(
                asks,
                move |ask| !focused() && !app.is_muted(&ask.asker.server),
                focused_now,
                update,
                Coalescer::default(),
            );
            let sign_ins = run_sign_ins(
                sessions,
                move |server| !sign_in_focused() && !sign_in_app.is_muted(server),
                sign_in_update,
            );
            futures::join!(questions, sign_ins);
        }
    }

    pub fn servers(&self) -> Vec<ServerView> {
        let servers = self.config_state().running.servers.clone();
        servers
            .iter()
            .map(|config| {
                let (state, state_revision) = self
                    .sessions
                    .state_revision(&config.name)
                    .unwrap_or((SessionState::Stopped, 0));
                ServerView {
                    name: config.name.clone(),
                    endpoint: asker_for(config).endpoint,
                    trusted: config.trusted,
                    state,
                    state_revision,
                    muted: self.settings.is_muted(&config.name),
                    sign_in: match &config.transport {
                        crate::config::TransportConfig::Http { url, .. } => Some(
                            self.sessions
                                .auth()
                                .known_view(&config.name, url)
                                .unwrap_or_else(|| crate::mcp::oauth::SignInView {
                                    signed_in: false,
                                    kept_in: self.sessions.auth().vault().kind(),
                                    scopes: Vec::new(),
                                }),
                        ),
                        crate::config::TransportConfig::Stdio { .. } => None,
                    },
                }
            })
            .collect()
    }

    /// Signs the person in to a remote server: the authorization address arrives as a URL
    /// question (the browser opens only on consent), and this returns once the browser came
    /// back with the sign-in, or with why not.
    pub async fn sign_in(&self, server: &str) -> Result<(), AppError> {
        Ok(self.sessions.sign_in(server).await?)
    }

    /// Forgets the sign-in to a remote server, in the secret store too, and has its
    /// authorization server revoke the tokens; returns what the person is told of that.
    pub async fn sign_out(&self, server: &str) -> Result<crate::mcp::oauth::SignedOut, AppError> {
        Ok(self.sessions.sign_out(server).await?.told())
    }

    pub fn stderr(&self, server: &str) -> Vec<String> {
        self.sessions.stderr_tail(server)
    }

    /// The audit log read back: every ask with its outcome, newest first.
    pub fn history(&self) -> Result<History, AppError> {
        let recent = self.broker.audit().recent().map_err(|e| AppError::Audit {
            message: e.to_string(),
        })?;
        let mut history = history_from(recent.records, recent.skipped, self.broker.audit().run());
        history.older = recent.older;
        Ok(history)
    }

    /// Checks the audit log's hash chain: the first record changed, removed or moved, if any.
    pub fn verify_audit(&self) -> Result<crate::ask::audit::Verification, AppError> {
        self.broker.audit().verify().map_err(|e| AppError::Audit {
            message: e.to_string(),
        })
    }

    /// Cancels every open question, then closes the gateway's and the app's sessions and
    /// waits for child servers to exit.
    pub async fn shutdown(&self) {
        self.stopping.cancel();
        self.broker.shutdown();
        if let Some(gateway) = &self.gateway {
            gateway.shutdown().await;
        }
        if let Some(path) = &self.discovery {
            let _ = std::fs::remove_file(path);
        }
        self.sessions.shutdown().await;
        if let Err(e) = self.broker.audit().record_what_was_counted() {
            tracing::warn!(error = %e, "cannot write what was counted but not written");
        }
    }
}

#[cfg(test)]
mod files_are_private;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A config in `dir` with no servers and the gateway off.
    fn no_servers(dir: &std::path::Path) -> LoadedConfig {
        LoadedConfig {
            path: dir.join("config.json"),
            servers: Vec::new(),
            gateway: crate::config::GatewayConfig {
                enabled: false,
                port: 0,
            },
            errors: Vec::new(),
        }
    }

    /// The shell opens only what `answer` returns: a URL question's address, once consent is
    /// recorded, and only a web address the policy passes.
    #[tokio::test]
    async fn an_answer_says_which_address_to_open_and_only_for_recorded_consent() {
        use crate::ask::broker::NewAsk;
        use crate::ask::{AskKind, Asker, Endpoint};
        let dir = std::env::temp_dir().join(format!("cs-app-answer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config = no_servers(&dir);
        let app = App::start(config, AuditLog::open(dir.join("audit.jsonl")).unwrap()).await;
        let desk = || Asker {
            server: "desk".into(),
            endpoint: Endpoint::Stdio {
                command: "desk".into(),
            },
            agent: None,
            declared: None,
            agent_id: None,
        };
        let ask = |url: &str| {
            app.broker()
                .open(NewAsk {
                    asker: desk(),
                    kind: AskKind::Url {
                        message: "Sign in".into(),
                        url: url.into(),
                        elicitation_id: "e1".into(),
                        host: String::new(),
                        warnings: Vec::new(),
                        sign_in: false,
                    },
                    request: json!({}),
                    timeout: None,
                    session: 1,
                })
                .unwrap()
        };
        let consent = Answer::Accept { content: None };

        let pending = ask("https://example.com/login?x=1");
        let answered = app.answer(pending.id(), consent.clone()).unwrap();
        assert!(matches!(answered.outcome, Outcome::Accepted { .. }));
        assert_eq!(
            answered.open.map(|u| u.to_string()),
            Some("https://example.com/login?x=1".into())
        );

        // Declined: nothing opens.
        let pending = ask("https://example.com/login");
        let answered = app.answer(pending.id(), Answer::Decline).unwrap();
        assert_eq!(answered.open, None);

        // An address the policy refuses is never handed to the opener, consent or not.
        let pending = ask("file:///etc/passwd");
        let answered = app.answer(pending.id(), consent.clone()).unwrap();
        assert_eq!(answered.open, None);

        // A form question answered without content opens nothing either.
        let form = app
            .broker()
            .open(NewAsk {
                asker: desk(),
                kind: AskKind::Form {
                    message: "Go?".into(),
                    schema: crate::ask::schema::parse_form_schema(
                        &json!({"type": "object", "properties": {}}),
                    )
                    .unwrap(),
                },
                request: json!({}),
                timeout: None,
                session: 1,
            })
            .unwrap();
        assert_eq!(
            app.answer(form.id(), consent)
                .map(|a| a.open)
                .unwrap_or(None),
            None
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn undoing_a_route_through_revokes_the_token_it_wrote() {
        use crate::agents::ClientKind;
        use crate::agents::tests::setup;
        let ours = r#"{"mcpServers": {"desk": {"command": "desk-mcp"}}}"#;
        let s = setup("app-undo-revokes", ours);
        s.client_file(
            ClientKind::ClaudeDesktop,
            r#"{"mcpServers": {"desk": {"command": "desk-mcp"}}}"#,
        );
        let config = LoadedConfig {
            path: s.config.clone(),
            servers: vec![crate::config::ServerConfig::stdio("desk", "desk-mcp", &[])],
            gateway: crate::config::GatewayConfig {
                enabled: true,
                port: 0,
            },
            errors: Vec::new(),
        };
        let dir = s.home.path().join("data");
        let audit = AuditLog::open(dir.join("audit.jsonl")).unwrap();
        let app = App::start(config, audit)
            .await
            .with_clients(s.clients.clone())
            .with_gateway(dir.join("gateway-token"), None)
            .await;
        let preview = app
            .preview_rewrite(ClientKind::ClaudeDesktop, "countersign-bridge")
            .unwrap();
        let result = app.rewrite_agent_config(preview.plan.unwrap()).unwrap();
        let named = |name: &str| {
            app.gateway()
                .unwrap()
                .agents()
                .iter()
                .any(|a| a.name == name)
        };
        assert!(
            named("Claude Desktop"),
            "the rewrite made an agent for the host"
        );
        app.undo_rewrite(&result.rewrite.id, false).unwrap();
        assert!(!named("Claude Desktop"), "the undo revoked it");
    }

    /// A decision that could not be saved is told with the notices about Countersign's files,
    /// and the shell is woken to redraw them; a later save takes the note away.
    #[tokio::test]
    async fn a_decision_that_could_not_be_saved_is_told() {
        use crate::ask::approval::RememberedDecision;
        let dir = std::env::temp_dir().join(format!("cs-app-unsaved-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config = no_servers(&dir);
        let audit = AuditLog::open(dir.join("audit.jsonl")).unwrap();
        let data = dir.join("data");
        let (settings, _) = SettingsStore::load(Some(data.join("settings.json")));
        let app = App::start(config, audit)
            .await
            .with_settings(settings.clone());
        let mut redraw = app.settings_unsaved_changes();
        assert!(app.config_info().notices.is_empty());
        // Where the settings' folder should be, a file: nothing can be saved.
        let _ = std::fs::remove_dir_all(&data);
        std::fs::write(&data, b"").unwrap();
        let never = RememberedDecision::for_test("a", "desk", "", "rm", false);
        settings
            .remember(never, 0)
            .expect("kept until Countersign quits");
        tokio::time::timeout(std::time::Duration::from_secs(5), redraw.changed())
            .await
            .unwrap()
            .unwrap();
        let notices = app.config_info().notices;
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert!(notices[0].contains("could not save"), "{notices:?}");
        assert!(
            notices[0].contains("kept until Countersign quits"),
            "{notices:?}"
        );
        std::fs::remove_file(&data).unwrap();
        settings.update(|_| {}).unwrap();
        assert!(app.config_info().notices.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn decisions_kept_before_they_named_their_server_are_bound_to_it_at_start() {
        use crate::ask::approval::RememberedDecision;
        let dir = std::env::temp_dir().join(format!("cs-app-bind-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let desk = crate::config::ServerConfig::stdio("desk", "desk-mcp", &["--x"]);
        let config = LoadedConfig {
            path: dir.join("config.json"),
            servers: vec![desk.clone()],
            gateway: crate::config::GatewayConfig {
                enabled: false,
                port: 0,
            },
            errors: Vec::new(),
        };
        let settings = SettingsStore::default();
        for server in ["desk", "gone"] {
            let old = RememberedDecision::for_test("a", server, "", "t", true);
            settings.remember(old, 0).unwrap();
        }
        let audit = AuditLog::open(dir.join("audit.jsonl")).unwrap();
        let app = App::start(config, audit)
            .await
            .with_settings(settings.clone());
        let endpoints: Vec<(String, String)> = app
            .settings()
            .remembered
            .into_iter()
            .map(|d| (d.server, d.endpoint))
            .collect();
        assert_eq!(
            endpoints,
            [
                ("desk".to_owned(), desk.transport.identity()),
                ("gone".to_owned(), String::new())
            ]
        );

        // Settings says which decide nothing now, and why; what is kept says nothing of it.
        use crate::ask::approval::Inert;
        for (server, endpoint) in [("desk", "sha256:another"), ("removed", "sha256:x")] {
            let bound = RememberedDecision::for_test("a", server, endpoint, "t", true);
            settings.remember(bound, 0).unwrap();
        }
        let inert: Vec<(String, String, Option<Inert>)> = app
            .settings()
            .remembered
            .into_iter()
            .map(|d| (d.server, d.endpoint, d.inert))
            .collect();
        assert_eq!(
            inert,
            [
                ("desk".into(), desk.transport.identity(), None),
                ("gone".into(), String::new(), Some(Inert::Unbound)),
                (
                    "desk".into(),
                    "sha256:another".into(),
                    Some(Inert::ServerChanged)
                ),
                ("removed".into(), "sha256:x".into(), Some(Inert::ServerGone)),
            ]
        );
        assert!(settings.get().remembered.iter().all(|d| d.inert.is_none()));
        let revoked = app
            .revoke_decision(settings.get().remembered[1].id)
            .unwrap();
        assert_eq!(revoked.remembered[1].inert, Some(Inert::ServerChanged));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn agent_config_errors_cross_with_their_own_kinds() {
        use crate::agents::ClientError;
        let changed: AppError = ClientError::Changed {
            message: "it changed".into(),
        }
        .into();
        assert_eq!(
            serde_json::to_value(&changed).unwrap(),
            json!({"kind": "changedOnDisk", "message": "it changed"})
        );
        let missing: AppError = ClientError::NotFound {
            path: "~/.cursor/mcp.json".into(),
        }
        .into();
        assert_eq!(
            serde_json::to_value(&missing).unwrap(),
            json!({"kind": "agentConfig", "message": "~/.cursor/mcp.json: not found"})
        );
    }

    #[test]
    fn a_preview_that_cannot_be_shown_crosses_with_why() {
        use crate::gateway::preview::PreviewError;
        let not_offered: AppError = PreviewError::NotOffered.into();
        let crossed = serde_json::to_value(&not_offered).unwrap();
        assert_eq!(crossed["kind"], "preview");
        assert_eq!(crossed["error"], json!({"kind": "notOffered"}));
        assert!(crossed["message"].as_str().unwrap().contains("no preview"));
        let failed: AppError = PreviewError::Failed {
            message: "boom".into(),
        }
        .into();
        assert_eq!(
            serde_json::to_value(&failed).unwrap()["error"],
            json!({"kind": "failed", "message": "boom"})
        );
    }

    #[test]
    fn arguments_are_checked_against_the_input_schema() {
        let schema =
            json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]});
        assert!(check_arguments(&schema, &json!({"id": "t3"})).is_ok());
        match check_arguments(&schema, &json!({"id": 3})) {
            Err(AppError::InvalidArguments { errors, .. }) => {
                assert_eq!(errors.len(), 1);
                assert!(errors[0].starts_with("/id"), "{}", errors[0]);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            check_arguments(&schema, &json!({})),
            Err(AppError::InvalidArguments { .. })
        ));
        assert!(matches!(
            check_arguments(&json!({"type": 12}), &json!({})),
            Err(AppError::InvalidArguments { errors, .. }) if errors.is_empty()
        ));
    }
}
