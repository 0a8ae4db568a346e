//! The MCP client side of one session: what Countersign declares and how a server's
//! questions reach the broker.
//!
//! Legacy `elicitation/create` (2025-06-18, 2025-11-25), the same request parsed by rmcp as a
//! custom request (schemas outside rmcp's model), and multi round-trip input requests
//! (2026-07-28) all go through [`Elicitor::elicit`]. A server's `notifications/cancelled`
//! is caught by [`Tapped`](super::tap::Tapped), a transport wrapper, because rmcp drops cancellations on
//! sessions negotiated through `server/discover` and never tells the handler otherwise.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::ErrorData as McpError;
// Roots are deprecated by SEP-2577 (2026-07-28), but 2025-11-25 servers still ask for them.
#[allow(deprecated)]
use rmcp::model::ListRootsResult;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CustomRequest, CustomResult, ElicitRequestParams,
    ElicitResult, ElicitationCapability, FormElicitationCapability, Implementation,
    ProtocolVersion, UrlElicitationCapability,
};
use rmcp::service::{RequestContext, RoleClient};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::ask::broker::{Broker, NewAsk, OpenError};
use crate::ask::kill_point::{self, Step};
use crate::ask::schema;
use crate::ask::{AskId, AskKind, Asker, Withdrawal};
use crate::mcp::raw::RawRequests;
use crate::mcp::tap::Tap;

/// The method name of a server-to-client elicitation.
pub(super) const ELICITATION_CREATE: &str = "elicitation/create";
/// A server saying the person finished what a URL question (or a URL-required error) sent
/// them to do (2025-11-25); rmcp does not model it.
pub(super) const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";

/// Whether a server's request asks the person (typed by rmcp, or raw where its model fell short).
pub(crate) fn is_elicitation(request: &rmcp::model::ServerRequest) -> bool {
    match request {
        rmcp::model::ServerRequest::ElicitRequest(_) => true,
        rmcp::model::ServerRequest::CustomRequest(custom) => custom.method == ELICITATION_CREATE,
        _ => false,
    }
}

/// What Countersign tells servers about itself.
pub fn client_config(protocol_version: ProtocolVersion) -> ClientConfig {
    let mut capabilities = ClientCapabilities::default();
    let mut elicitation = ElicitationCapability::default();
    // Countersign validates every answer against the schema before sending it.
    elicitation.form = Some(FormElicitationCapability::new().with_schema_validation(true));
    elicitation.url = Some(UrlElicitationCapability::new());
    capabilities.elicitation = Some(elicitation);
    let mut info = Implementation::default();
    info.name = "countersign".into();
    info.title = Some("Countersign".into());
    info.version = env!("CARGO_PKG_VERSION").into();
    let mut config = ClientConfig::default();
    config.protocol_version = protocol_version;
    config.capabilities = capabilities;
    config.client_info = info;
    config
}

/// The largest elicitation a server may send, as JSON (its message, schema and all).
pub const MAX_QUESTION_BYTES: usize = 1024 * 1024;

/// Whether `value`, written as JSON, takes more than `max` bytes (counting stops past it).
fn larger_than(value: &Value, max: usize) -> bool {
    struct Count(usize, usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            if self.0 > self.1 {
                return Err(std::io::Error::other("larger"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(&mut Count(0, max), value).is_err()
}

/// Turns a server's question into an ask and the person's outcome into the reply.
#[derive(Clone)]
pub struct Elicitor {
    pub broker: Broker,
    pub asker: Asker,
    pub answer_timeout: Duration,
    pub session: u64,
}

impl Elicitor {
    /// Asks the person. `params` are the request's params as received (JSON);
    /// a `withdraw` token fires when the server (or the agent) no longer wants the answer,
    /// and the ask ends with its reason.
    /// Returns the `ElicitResult` as JSON, or -32602 for a request outside the supported
    /// schema subset, which is recorded and never shown.
    pub async fn elicit(
        &self,
        params: Value,
        withdraw: &Withdrawal,
        on_open: impl FnOnce(AskId),
    ) -> Result<Value, McpError> {
        let kind = match self.parse(&params) {
            Ok(kind) => kind,
            Err(reason) => {
                // Refused either way; a failure to record it is logged by the log.
                let _ = self
                    .broker
                    .audit()
                    .record_refused(&self.asker.server, &reason, &params);
                return Err(McpError::invalid_params(reason, None));
            }
        };
        let kind = match kind {
            AskKind::Url {
                message,
                url,
                elicitation_id,
                ..
            } => match crate::ask::url_policy::check(&url) {
                // The address as it will be opened, which is what the dialog shows in full:
                // the raw text can read otherwise (`https://evil.example\@bank.example/` opens
                // evil.example; a look-alike host opens as its `xn--` form).
                Ok(web) => AskKind::Url {
                    message,
                    url: web.url.to_string(),
                    elicitation_id,
                    host: web.host,
                    warnings: web.warnings,
                    sign_in: false,
                },
                Err(reason) => {
                    // A well-formed request for an address we never open: a no, recorded,
                    // not shown.
                    let _ =
                        self.broker
                            .audit()
                            .record_refused(&self.asker.server, &reason, &params);
                    return Ok(serde_json::json!({"action": "decline"}));
                }
            },
            form => form,
        };
        let pending = self
            .broker
            .open(NewAsk {
                asker: self.asker.clone(),
                kind,
                request: params,
                timeout: Some(self.answer_timeout),
                session: self.session,
            })
            .map_err(too_many_open)?;
        on_open(pending.id());
        Ok(pending
            .outcome_or_withdraw(withdraw)
            .await
            .to_elicit_result())
    }

    /// Records that the answer to `ask` reached where it goes (see `AuditRecord::Delivered`).
    pub(crate) fn delivered(&self, ask: AskId) {
        kill_point::reached(Step::AfterSend);
        let _ = self.broker.audit().record_delivered(ask);
        kill_point::reached(Step::AfterDelivered);
    }

    /// Whether `params` is a question that can be asked; a refusal is recorded.
    pub(crate) fn can_ask(&self, params: &Value) -> Result<(), String> {
        self.parse(params).map(|_| ()).inspect_err(|reason| {
            // Refused either way; a failure to record it is logged by the log.
            let _ = self
                .broker
                .audit()
                .record_refused(&self.asker.server, reason, params);
        })
    }

    fn parse(&self, params: &Value) -> Result<AskKind, String> {
        let Some(obj) = params.as_object() else {
            return Err("elicitation params must be an object".into());
        };
        // Each open question is held whole (and shown, and logged) until it ends, twenty at a
        // time per server: a question is capped like a sampling request.
        if larger_than(params, MAX_QUESTION_BYTES) {
            return Err(format!(
                "a question of more than {} KiB is more than the person can be shown",
                MAX_QUESTION_BYTES / 1024
            ));
        }
        let message = match obj.get("message") {
            Some(Value::String(m)) => m.clone(),
            _ => return Err("elicitation needs a string \"message\"".into()),
        };
        match obj.get("mode").and_then(Value::as_str).unwrap_or("form") {
            "form" => {
                let raw = obj
                    .get("requestedSchema")
                    .ok_or("form elicitation needs \"requestedSchema\"")?;
                let mut schema = schema::parse_form_schema(raw)
                    .map_err(|e| format!("unsupported requestedSchema: {e}"))?;
                schema::flag_by_message(&mut schema, &message);
                Ok(AskKind::Form { message, schema })
            }
            "url" => {
                let url = match obj.get("url") {
                    Some(Value::String(u)) => u.clone(),
                    _ => return Err("URL elicitation needs a string \"url\"".into()),
                };
                let elicitation_id = obj
                    .get("elicitationId")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                // Host and warnings are filled in by the URL policy, in `elicit`.
                Ok(AskKind::Url {
                    message,
                    url,
                    elicitation_id,
                    host: String::new(),
                    warnings: Vec::new(),
                    sign_in: false,
                })
            }
            other => Err(format!("unknown elicitation mode \"{other}\"")),
        }
    }
}

/// A server over its limit of waiting questions gets -32603 (the client cannot take the request
/// now) with the limit in words and in `data.limit`; the broker has recorded the refusal.
pub(crate) fn too_many_open(error: OpenError) -> McpError {
    let data = match &error {
        OpenError::TooManyOpen { limit, .. } | OpenError::TooManyOpenForAgent { limit, .. } => {
            serde_json::json!({"limit": limit})
        }
        OpenError::TooManyAsked { .. } | OpenError::TooManyAskedByAgent { .. } => {
            serde_json::json!({
                "burst": crate::ask::broker::QUESTIONS_BURST,
                "refillMs": crate::ask::broker::QUESTION_REFILL_MS,
            })
        }
    };
    McpError::internal_error(error.to_string(), Some(data))
}

/// The rmcp client handler for one session.
pub struct Handler {
    pub elicitor: Elicitor,
    pub tap: Arc<Tap>,
    /// The requests as they were on the wire, where the transport can see them.
    pub raw: Arc<RawRequests>,
    pub config: ClientConfig,
}

impl Handler {
    async fn elicit_request(
        &self,
        params: Value,
        context: &RequestContext<RoleClient>,
    ) -> Result<Value, McpError> {
        // Withdrawn by rmcp's own token (initialize sessions) or by the tap (all sessions);
        // through the gateway also when the agent cancels the call it belongs to.
        // The call it belongs to, when the server asked on that call's own stream.
        let origin = self.raw.origin_of(&context.id);
        let agent = match &self.tap.relay {
            Some(relay) => relay.agent_cancel(origin.as_ref()),
            // The app's own sessions: the person's runs.
            None => self.tap.app_calls(origin.as_ref()),
        };
        let mut withdraw = agent.clone();
        withdraw.add_server(context.ct.clone(), self.tap.closed.clone());
        let tap = self.tap.clone();
        let request_id = context.id.clone();
        // A URL question's completion is watched from before the person can open it.
        let completion = (params.get("mode").and_then(Value::as_str) == Some("url"))
            .then(|| params.get("elicitationId").and_then(Value::as_str))
            .flatten()
            .map(|id| (id.to_owned(), self.tap.completion(id)));
        let host = params
            .get("url")
            .and_then(Value::as_str)
            .and_then(|u| crate::ask::url_policy::check(u).ok())
            .map(|w| w.host);
        let mut opened = None;
        let result = self
            .elicitor
            .elicit(params, &withdraw, |ask| {
                opened = Some(ask);
                tap.link(&request_id, ask, agent)
            })
            .await;
        self.tap.unlink(&context.id);
        if let Some((id, done)) = completion {
            let accepted = result
                .as_ref()
                .is_ok_and(|r| r.get("action").and_then(Value::as_str) == Some("accept"));
            match (accepted, opened, host) {
                (true, Some(ask), Some(host)) => {
                    self.watch_completion(id, done, ask, host);
                }
                _ => self.tap.forget_completion(&id),
            }
        }
        result
    }

    /// Tells the person when the server reports finished what they opened, for as long as
    /// they had to answer (or until the session ends).
    fn watch_completion(&self, id: String, done: CancellationToken, ask: AskId, host: String) {
        let tap = self.tap.clone();
        let broker = self.elicitor.broker.clone();
        let server = self.elicitor.asker.server.clone();
        let wait = self.elicitor.answer_timeout;
        tokio::spawn(async move {
            tokio::select! {
                _ = done.cancelled() => broker.url_completed(ask, server, host),
                _ = tokio::time::sleep(wait) => {}
                _ = tap.closed.cancelled() => {}
            }
            tap.forget_completion(&id);
        });
    }
}

impl ClientHandler for Handler {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        // rmcp's typed model drops keywords it does not know; judge what was really sent.
        let params = match self.raw.take(&context.id) {
            Some(raw) => raw,
            None => serde_json::to_value(&request).map_err(|e| {
                McpError::internal_error(format!("cannot read the request: {e}"), None)
            })?,
        };
        let result = self.elicit_request(params, &context).await?;
        serde_json::from_value(result)
            .map_err(|e| McpError::internal_error(format!("cannot build the reply: {e}"), None))
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<CustomResult, McpError> {
        if request.method != ELICITATION_CREATE {
            return Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("Countersign does not handle {}", request.method),
                None,
            ));
        }
        // rmcp could not model this request (e.g. a schema outside the subset): it arrives raw.
        let params = self
            .raw
            .take(&context.id)
            .or(request.params)
            .unwrap_or(Value::Null);
        let result = self.elicit_request(params, &context).await?;
        Ok(CustomResult::new(result))
    }

    /// Through the gateway, to an agent that offers it, once the person allowed it; else
    /// refused with the reason (`crate::mcp::sampling`).
    #[allow(deprecated)]
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, McpError> {
        crate::mcp::sampling::create_message(self, params, context).await
    }

    /// Roots are a claim about the person's files: Countersign makes none of its own, and
    /// passes on only an agent's (gateway sessions of agents that declared roots, to servers
    /// whose entry lets them through). Only where this session declared roots: a server that
    /// asks anyway is refused, not handed the agent's.
    #[allow(deprecated)]
    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, McpError> {
        let origin = self.raw.origin_of(&context.id);
        let declared = self.config.capabilities.roots.is_some();
        match self
            .tap
            .relay
            .as_ref()
            .filter(|_| declared)
            .and_then(|r| r.agent_roots(origin.as_ref()))
        {
            Some(roots) => roots.await.map_err(|e| {
                McpError::internal_error(format!("the agent did not give its roots: {e}"), None)
            }),
            None => Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "Countersign offers no roots",
                None,
            )),
        }
    }

    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::ask::audit::{AuditLog, AuditRecord};
    use crate::ask::{CancelReason, Endpoint};
    use serde_json::json;

    fn elicitor(test: &str) -> (Elicitor, std::path::PathBuf) {
        let path =
            std::env::temp_dir().join(format!("cs-handler-{test}-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let elicitor = Elicitor {
            broker: Broker::new(AuditLog::open(&path).unwrap()),
            asker: Asker {
                server: "s".into(),
                endpoint: Endpoint::Stdio {
                    command: "s".into(),
                },
                agent: None,
                declared: None,
                agent_id: None,
            },
            answer_timeout: Duration::from_secs(5),
            session: 1,
        };
        (elicitor, path)
    }

    /// A question built to hold a thread (two million choices, hundreds of thousands of
    /// required fields) or the app's memory (megabytes of text, twenty at a time) is refused
    /// in words before anything compares its parts, and recorded.
    #[tokio::test]
    async fn a_question_too_large_to_ask_is_refused_before_it_is_read() {
        let (e, path) = elicitor("too-large");
        let choices: Vec<String> = (0..2_001).map(|i| format!("c{i}")).collect();
        let fields: serde_json::Map<String, Value> = (0..101)
            .map(|i| (format!("f{i}"), json!({"type": "boolean"})))
            .collect();
        for (params, why) in [
            (
                json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
                    "pick": {"type": "string", "enum": choices}}}}),
                "2001 choices are more than a person can be offered (2000)",
            ),
            (
                json!({"message": "m", "requestedSchema": {"type": "object", "properties": fields}}),
                "101 fields are more than a person can be asked to fill in (100)",
            ),
            (
                json!({"message": "x".repeat(MAX_QUESTION_BYTES), "requestedSchema": {"type": "object"}}),
                "a question of more than 1024 KiB is more than the person can be shown",
            ),
        ] {
            let refused = e
                .elicit(params, &Withdrawal::new(), |_| panic!("asked: {why}"))
                .await
                .unwrap_err();
            assert!(refused.message.contains(why), "{refused:?}");
        }
        assert!(e.broker.pending().is_empty());
        let log = std::fs::read_to_string(&path).unwrap();
        assert_eq!(log.matches("\"refused\"").count(), 3, "{log}");
        // Just inside every cap, it is asked.
        let choices: Vec<String> = (0..2_000).map(|i| format!("c{i}")).collect();
        let mut fields: serde_json::Map<String, Value> = (0..99)
            .map(|i| (format!("f{i}"), json!({"type": "boolean"})))
            .collect();
        fields.insert("pick".into(), json!({"type": "string", "enum": choices}));
        let required: Vec<String> = fields.keys().cloned().collect();
        let inside = json!({"message": "m", "requestedSchema": {"type": "object",
            "properties": fields, "required": required}});
        let broker = e.broker.clone();
        let mut events = broker.subscribe();
        let asked = tokio::spawn(async move { e.elicit(inside, &Withdrawal::new(), |_| {}).await });
        let Ok(crate::ask::AskEvent::Added { ask }) = events.recv().await else {
            panic!("not asked")
        };
        broker.answer(ask.id, crate::ask::Answer::Decline).unwrap();
        assert_eq!(asked.await.unwrap().unwrap()["action"], "decline");
    }

    #[tokio::test]
    async fn urls_that_are_never_opened_are_declined_without_asking() {
        let (elicitor, path) = elicitor("bad-url");
        let never = CancellationToken::new();
        for url in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "data:text/html,hi",
        ] {
            let params =
                json!({"mode": "url", "message": "Sign in", "url": url, "elicitationId": "e1"});
            let reply = elicitor
                .elicit(
                    params,
                    &Withdrawal::new().when(never.clone(), CancelReason::Server),
                    |_| panic!("{url} was shown"),
                )
                .await
                .unwrap();
            assert_eq!(reply, json!({"action": "decline"}));
        }
        assert!(elicitor.broker.pending().is_empty());
        let (records, _) = crate::ask::audit::read_history(&path).unwrap();
        assert_eq!(records.len(), 3);
        assert!(records.iter().all(
            |r| matches!(r, AuditRecord::Refused { reason, .. } if reason.contains("never opened"))
        ));
    }

    /// The dialog shows in full the address that will be opened, not the server's text of it,
    /// which can read as another host: a backslash is a slash to a browser, and a look-alike
    /// host opens as its `xn--` form.
    #[tokio::test]
    async fn a_url_is_shown_as_it_will_be_opened() {
        let (elicitor, _) = elicitor("url-as-opened");
        let never = CancellationToken::new();
        for (sent, opened, host) in [
            (
                "https://evil.example\\@accounts.google.com/login",
                "https://evil.example/@accounts.google.com/login",
                "evil.example",
            ),
            (
                "https://аррӏе.com/\tsign-in",
                "https://xn--80ak6aa92e.com/sign-in",
                "xn--80ak6aa92e.com",
            ),
        ] {
            let asking = {
                let elicitor = elicitor.clone();
                let never = never.clone();
                let params = json!({"mode": "url", "message": "Sign in", "url": sent, "elicitationId": "e1"});
                tokio::spawn(async move {
                    elicitor
                        .elicit(
                            params,
                            &Withdrawal::new().when(never, CancelReason::Server),
                            |_| {},
                        )
                        .await
                })
            };
            let ask = loop {
                if let Some(ask) = elicitor.broker.pending().into_iter().next() {
                    break ask;
                }
                tokio::task::yield_now().await;
            };
            let AskKind::Url {
                url,
                host: shown_host,
                ..
            } = &ask.kind
            else {
                panic!("{:?}", ask.kind)
            };
            assert_eq!(
                (url.as_str(), shown_host.as_str()),
                (opened, host),
                "{sent}"
            );
            elicitor
                .broker
                .answer(ask.id, crate::ask::Answer::Decline)
                .unwrap();
            asking.await.unwrap().unwrap();
        }
    }

    #[tokio::test]
    async fn a_malformed_request_is_invalid_params_with_the_reason() {
        let (elicitor, _) = elicitor("malformed");
        let never = CancellationToken::new();
        for (params, reason) in [
            (json!({"mode": "form"}), "message"),
            (json!({"message": "m", "mode": "telepathy"}), "telepathy"),
            (
                json!({"message": "m", "requestedSchema": {"type": "object", "properties": {"a": {"type": "object"}}}}),
                "properties.a",
            ),
        ] {
            let err = elicitor
                .elicit(
                    params,
                    &Withdrawal::new().when(never.clone(), CancelReason::Server),
                    |_| panic!("shown"),
                )
                .await
                .unwrap_err();
            assert_eq!(err.code, rmcp::model::ErrorCode::INVALID_PARAMS);
            assert!(err.message.contains(reason), "{}", err.message);
        }
    }

    /// "Enter your GitHub token" with a field named `value`: the server gets the token, the
    /// audit log only its length, as for a field named `token`.
    #[tokio::test]
    async fn a_secret_the_message_names_is_kept_out_of_the_log() {
        let (elicitor, path) = elicitor("secret-message");
        let never = CancellationToken::new();
        let params = json!({"message": "Enter your GitHub token",
            "requestedSchema": {"type": "object", "properties": {"value": {"type": "string"}}}});
        let asking = {
            let elicitor = elicitor.clone();
            let never = never.clone();
            tokio::spawn(async move {
                elicitor
                    .elicit(
                        params,
                        &Withdrawal::new().when(never, CancelReason::Server),
                        |_| {},
                    )
                    .await
            })
        };
        let ask = loop {
            if let Some(ask) = elicitor.broker.pending().pop() {
                break ask;
            }
            tokio::task::yield_now().await;
        };
        let content = json!({"value": "ghp_0123456789abcdef"})
            .as_object()
            .cloned();
        elicitor
            .broker
            .answer(ask.id, crate::ask::Answer::Accept { content })
            .unwrap();
        let reply = asking.await.unwrap().unwrap();
        assert_eq!(reply["content"]["value"], "ghp_0123456789abcdef");
        let log = std::fs::read_to_string(&path).unwrap();
        assert!(!log.contains("ghp_0123456789abcdef"), "{log}");
        assert!(
            log.contains(r#""value":{"redacted":true,"length":20}"#),
            "{log}"
        );
    }

    #[tokio::test]
    async fn a_question_past_the_servers_limit_is_an_error_naming_it() {
        let (mut elicitor, path) = elicitor("limit");
        elicitor.broker = Broker::with_max_open_per_server(AuditLog::open(&path).unwrap(), 1);
        let never = CancellationToken::new();
        let params = json!({"message": "Name?", "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}}});
        let first = {
            let elicitor = elicitor.clone();
            let params = params.clone();
            let never = never.clone();
            tokio::spawn(async move {
                elicitor
                    .elicit(
                        params,
                        &Withdrawal::new().when(never, CancelReason::Server),
                        |_| {},
                    )
                    .await
            })
        };
        while elicitor.broker.pending().is_empty() {
            tokio::task::yield_now().await;
        }
        let err = elicitor
            .elicit(
                params,
                &Withdrawal::new().when(never.clone(), CancelReason::Server),
                |_| panic!("shown past the limit"),
            )
            .await
            .unwrap_err();
        assert_eq!(err.code, rmcp::model::ErrorCode::INTERNAL_ERROR);
        assert_eq!(
            err.message,
            "Countersign: s already has 1 question waiting; answer or decline some first"
        );
        assert_eq!(err.data, Some(json!({"limit": 1})));
        assert_eq!(elicitor.broker.pending().len(), 1);
        first.abort();
    }
}
