//! The approval gate as the forwarder applies it: who the agent is (its token), what the
//! request is (a tool call or a read, and the tool's definition as the person sees it), the
//! policy's decision, the question to the person when it asks, what the person chose to
//! remember, and the approval that outlives the call when nobody answers in time.

use std::borrow::Cow;

use super::upstream::ToolFacts;
use super::*;
use crate::ask::kill_point::{self, Step};
use crate::gateway::pending::AskedIn;
use crate::gateway::preview::Previews;
use crate::settings::ChangedSince;

impl Forwarder {
    pub(crate) async fn gate_and_call(
        &self,
        request: CallToolRequest,
        ctx: RequestContext<RoleServer>,
        as_sent: bool,
    ) -> Result<CallAnswer, McpError> {
        let up = self.upstream(&ctx).await?;
        let (facts, gated) = self.gate_call(&up, &request, &ctx).await?;
        match gated {
            Ok(asked) => {
                let result = self.forward_call(&up, request, &ctx, as_sent).await;
                if result.is_ok() {
                    self.carried_out(asked);
                }
                result
            }
            Err(Refusal::Denied(words)) => Ok(CallAnswer::Typed(denied(words))),
            Err(Refusal::AgentLeft) => Err(agent_cancelled()),
            Err(Refusal::Pending { id }) => Ok(CallAnswer::Typed(pending_result(
                &id,
                request.params.name.as_ref(),
                &self.server,
                facts.has_output_schema,
            ))),
        }
    }

    /// The gate for a tool call: what the tool is as the person sees it, and the decision.
    pub(super) async fn gate_call(
        &self,
        up: &Arc<Upstream>,
        request: &CallToolRequest,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<(Arc<ToolFacts>, Result<Option<AskedIn>, Refusal>), McpError> {
        let tool = request.params.name.to_string();
        self.refuse_agent_input(
            "tools/call",
            ctx,
            &request.params.input_responses,
            &request.params.request_state,
        )?;
        let also_sent = crate::gateway::sent::Unmodeled::of(ctx);
        if let Some(key) = also_sent.and_then(crate::gateway::sent::Unmodeled::shadowing) {
            return Err(self.refuse(
                ctx,
                format!(
                    "Countersign: the call to {tool} also carries `{key}`, which a server that \
                     reads names without regard to case takes for one of the call's own; it is \
                     refused rather than judged as one call and run as another. Send the call \
                     without it."
                ),
                json!({"method": "tools/call", "name": tool, "field": key}),
            ));
        }
        let facts = up.tool_facts(&tool).await;
        let arguments = request
            .params
            .arguments
            .clone()
            .map(Value::Object)
            .unwrap_or_else(|| json!({}));
        let mut record = json!({"name": tool, "arguments": arguments});
        // Fields beyond rmcp's model go upstream with the call (`sent`), so the person judges
        // them with the arguments, the record has them, and a decision remembered for these
        // arguments alone does not cover a call that carries more.
        let arguments = match also_sent {
            Some(fields) => {
                crate::gateway::sent::add_unmodeled(&mut record, Some(fields));
                crate::gateway::sent::judged(arguments, fields)
            }
            None => arguments,
        };
        let gated = Gated {
            key: &tool,
            what: format!("this call to {tool}"),
            request: record,
            definition: Cow::Borrowed(&facts.definition),
            digest: Cow::Borrowed(&facts.digest),
            arguments,
            annotations: facts.annotations(),
            read: false,
            may_ask: true,
            // A preview would run without the fields beyond the model, so it is not offered.
            previewable: (also_sent.is_none()
                && crate::gateway::preview::takes_dry_run(facts.input_schema()))
            .then(|| request.clone()),
        };
        let decided = self.gate(up, ctx, gated).await;
        Ok((facts, decided))
    }

    /// The person's allow was carried out: the call went to the server, which answered.
    pub(super) fn carried_out(&self, asked: Option<AskedIn>) {
        if let Some(asked) = asked {
            kill_point::reached(Step::AfterSend);
            let _ = self
                .shared
                .broker
                .audit()
                .record_delivered_in(&asked.run, asked.id);
            kill_point::reached(Step::AfterDelivered);
        }
    }

    /// The gate for a read (`resources/read`, `resources/subscribe`, `prompts/get`) of
    /// `target` (a URI or a prompt's name); `params` are what will be forwarded. Without
    /// `may_ask`, a read the person would be asked about is refused (it is not the agent's
    /// request: see `replay`). Returns the person's question when they allowed it (see
    /// [`Self::carried_out`]).
    pub(super) async fn gate_read(
        &self,
        up: &Arc<Upstream>,
        ctx: &RequestContext<RoleServer>,
        method: &str,
        target: &str,
        params: Value,
        may_ask: bool,
    ) -> Result<Option<AskedIn>, McpError> {
        let definition = approval::definition(method, None, None, None, None);
        let digest = approval::digest(&definition);
        let gated = Gated {
            key: method,
            what: format!("{method} of {target}"),
            request: json!({"method": method, "params": params}),
            definition: Cow::Owned(definition),
            digest: Cow::Owned(digest),
            arguments: params,
            annotations: None,
            read: true,
            may_ask,
            previewable: None,
        };
        match self.gate(up, ctx, gated).await {
            Ok(asked) => Ok(asked),
            Err(Refusal::Denied(words)) => Err(McpError::invalid_request(words, None)),
            Err(Refusal::AgentLeft) => Err(agent_cancelled()),
            // Reads are never left pending; should one be, it is a no for now.
            Err(Refusal::Pending { id }) => Err(McpError::invalid_request(
                format!("approval {id} is pending in Countersign"),
                None,
            )),
        }
    }

    /// A completion reads what the read it completes would (the names under `file:///{path}`,
    /// say): refused, and recorded, where that read would be refused without asking: by the
    /// server's `readPolicy`, or by a "never" the person remembered for this agent that covers
    /// it. Where the read would be asked about it runs unasked, since hosts complete as the
    /// person types.
    pub(super) fn refuse_completion(
        &self,
        up: &Arc<Upstream>,
        ctx: &RequestContext<RoleServer>,
        method: &str,
        target: &str,
        params: Value,
    ) -> Result<(), McpError> {
        let config = &up.server;
        let who = Who::of(ctx);
        let definition = approval::definition(method, None, None, None, None);
        let digest = approval::digest(&definition);
        let call = approval::Call {
            agent: &who.id,
            server: &config.name,
            endpoint: &up.identity,
            tool: method,
            arguments: &params,
            session: up.session,
            digest: &digest,
            now_ms: crate::gateway::Gateway::now_ms(&self.shared),
            patient_ms: crate::gateway::Gateway::patient_ms(&self.shared),
        };
        let Decision::Deny { why, .. } = policy::decide_read(config, &call, &self.shared.settings)
        else {
            return Ok(());
        };
        let audit = self.shared.broker.audit();
        if let Err(e) = audit.record_gated(
            &config.name,
            Some(&who.name),
            &who.id,
            "completion/complete",
            false,
            &why,
        ) {
            tracing::error!(error = %e, "a refusal went unrecorded");
        }
        Err(McpError::invalid_request(
            format!(
                "Countersign did not complete arguments of {method} of {target} on {}: reading \
                 it is refused ({why}).",
                config.name
            ),
            None,
        ))
    }

    /// Decides one request by policy and carries the decision out: recorded when decided
    /// without asking, else put to the person, and what they chose to remember kept. An allow
    /// the person gave comes back with its question, to record once the request is forwarded.
    async fn gate(
        &self,
        up: &Arc<Upstream>,
        ctx: &RequestContext<RoleServer>,
        gated: Gated<'_>,
    ) -> Result<Option<AskedIn>, Refusal> {
        let config = &up.server;
        let who = Who::of(ctx);
        let audit = self.shared.broker.audit();
        let key = gated.key;
        // A decision made without asking, on record as this agent's (within its budget).
        let record_gated = |allowed: bool, why: &str| {
            audit.record_gated(&config.name, Some(&who.name), &who.id, key, allowed, why)
        };
        let what = &gated.what;
        // Paused (or left) before it was judged: nobody is asked, and nothing runs.
        let leaving = Leaving::of(ctx);
        if let Some(reason) = leaving.reason() {
            return Err(Refusal::left(reason, what, &config.name));
        }
        let digest = &gated.digest;
        let now_ms = crate::gateway::Gateway::now_ms(&self.shared);
        let call = approval::Call {
            agent: &who.id,
            server: &config.name,
            endpoint: &up.identity,
            tool: gated.key,
            arguments: &gated.arguments,
            session: up.session,
            digest,
            now_ms,
            patient_ms: crate::gateway::Gateway::patient_ms(&self.shared),
        };
        let settings = &self.shared.settings;
        let decision = if gated.read {
            policy::decide_read(config, &call, settings)
        } else {
            policy::decide(config, &call, gated.annotations, settings)
        };
        match decision {
            Decision::Allow { why, remembered } => {
                // The person denied this very call while it was pending, after every allow
                // remembered that covers it was made (or the allow is of no known age: a rule,
                // a trusted server's read-only tool): their latest word on it is no.
                if !gated.read
                    && let Some(denial) = self.use_up_pending_answer(&who, up, &gated, now_ms)
                    && denial.outweighs(remembered.and_then(|_| latest_allow_ms(settings, &call)))
                {
                    let why = format!("pending approval {}, answered by the person", denial.id);
                    if let Err(e) = record_gated(false, &why) {
                        tracing::error!(error = %e, "a denial went unrecorded");
                    }
                    return Err(Refusal::Denied(format!(
                        "The person using Countersign denied {what} on {} (pending approval {}).",
                        config.name, denial.id
                    )));
                }
                if let Some(id) = remembered {
                    settings.touch(id, now_ms);
                }
                // Unrecorded, it does not run.
                record_gated(true, &why).map(|()| None).map_err(|e| {
                    Refusal::Denied(format!(
                        "Countersign did not allow {what} on {}: {e}.",
                        config.name
                    ))
                })
            }
            Decision::Deny { why, remembered } => {
                if let Some(id) = remembered {
                    settings.touch(id, now_ms);
                }
                // The person's latest word on this call is no: an allow they gave it while it
                // was pending must not run it once the denial lapses.
                if !gated.read {
                    self.use_up_pending_answer(&who, up, &gated, now_ms);
                }
                if let Err(e) = record_gated(false, &why) {
                    tracing::error!(error = %e, "a denial went unrecorded");
                }
                Err(Refusal::Denied(match remembered {
                    Some(_) => format!(
                        "The person using Countersign denied {what} on {} ({why}).",
                        config.name
                    ),
                    None => format!(
                        "Countersign's rules do not allow {what} on {} ({why}).",
                        config.name
                    ),
                }))
            }
            Decision::Ask if !gated.may_ask => {
                let why = "it would need the person's yes";
                if let Err(e) = record_gated(false, why) {
                    tracing::error!(error = %e, "a refusal went unrecorded");
                }
                Err(Refusal::Denied(format!(
                    "Countersign did not make {what} on {} again: {why}.",
                    config.name
                )))
            }
            Decision::Ask => {
                let arguments = serde_json::to_string(&gated.arguments).unwrap_or_default();
                if !gated.read {
                    // The person may have answered this very call while it was pending.
                    if let Some(answered) = self
                        .pending_answer(up, &who, &gated, &arguments, now_ms, &leaving)
                        .await?
                    {
                        return answered;
                    }
                }
                let changed = settings.changed_since(&call, &gated.definition);
                let mut asker = asker_for(config);
                asker.agent = Some(who.name.clone());
                asker.agent_id = Some(who.id.clone());
                asker.declared = who.declared.clone();
                // Without a session of its own, the agent's calls share a pooled upstream.
                let kind = gated.ask_kind(changed, self.session.get().is_none());
                let pending = self
                    .shared
                    .broker
                    .open(NewAsk {
                        asker,
                        kind,
                        request: gated.request.clone(),
                        // A tool call's question may outlive the call (see `pending`).
                        timeout: Some(if gated.read {
                            config.answer_timeout
                        } else {
                            config.pending_expiry
                        }),
                        session: up.session,
                    })
                    // The server has its limit of questions waiting (recorded by the broker).
                    .map_err(|full| Refusal::Denied(full.to_string()))?;
                let asked = AskedIn {
                    run: audit.run().to_owned(),
                    id: pending.id(),
                };
                let offer = gated.previewable.clone().map(|request| {
                    Previews::offer(&self.shared, pending.id(), Arc::downgrade(up), request)
                });
                let waiting = WhileWaiting::link(ctx);
                let tokens = waiting.tokens();
                // The preview is on offer as long as the question waits, also once it outlives
                // the call.
                let mut outcome = Box::pin(async move {
                    let _offer = offer;
                    pending.outcome_or_withdraw(&tokens).await
                });
                let outcome = if gated.read {
                    outcome.await
                } else {
                    tokio::select! {
                        o = &mut outcome => o,
                        _ = tokio::time::sleep(config.approval_wait) => {
                            // Detached from the agent's call: the question stays for the person.
                            waiting.detach();
                            let approval = PendingApproval {
                                id: pending::fresh_id(),
                                agent: who.id.clone(),
                                agent_name: who.name.clone(),
                                declared: who.declared.clone(),
                                server: config.name.clone(),
                                endpoint: up.identity.clone(),
                                tool: gated.key.to_owned(),
                                arguments,
                                arguments_value: gated.arguments.clone(),
                                definition: gated.definition.clone().into_owned(),
                                digest: digest.to_string(),
                                created_ms: now_ms,
                                expires_ms: now_ms
                                    .saturating_add(config.pending_expiry.as_millis() as u64),
                                state: pending::PendingState::Waiting,
                                asked: Some(asked.clone()),
                                answered_ms: None,
                                decision: None,
                            };
                            if !self.shared.agents.holds(&who.id) {
                                // Revoked while asked: the question goes (dropping the wait
                                // withdraws it), and nothing waits for a retry.
                                return Err(Refusal::Denied(format!(
                                    "Countersign did not run {what} on {}: the agent's token \
                                     was revoked.",
                                    config.name
                                )));
                            }
                            let came_in = pending::CameIn {
                                session: up.session,
                                closed: up.closed.clone(),
                            };
                            return match pending::keep_waiting(
                                &self.shared,
                                approval,
                                outcome,
                                came_in,
                            ) {
                                Ok(id) => Err(Refusal::Pending { id }),
                                Err(why) => Err(Refusal::Denied(format!(
                                    "Countersign did not allow {what} on {}: nobody answered \
                                     in time, and {why}.",
                                    config.name
                                ))),
                            };
                        }
                    }
                };
                waiting.detach();
                let denied_by_person = || {
                    Refusal::Denied(format!(
                        "The person using Countersign denied {what} on {}.",
                        config.name
                    ))
                };
                // A yes is for the agent holding the token: one revoked while the person was
                // asked makes no call.
                let revoked = || {
                    Refusal::Denied(format!(
                        "Countersign did not run {what} on {}: the agent's token was revoked.",
                        config.name
                    ))
                };
                match outcome {
                    Outcome::Accepted { .. }
                    | Outcome::AlwaysAllowed
                    | Outcome::Remembered { .. }
                        if !self.shared.agents.holds(&who.id) =>
                    {
                        // (Nothing is remembered for it either: its decisions went with it.)
                        Err(revoked())
                    }
                    Outcome::Accepted { .. } | Outcome::AlwaysAllowed => Ok(Some(asked)),
                    Outcome::Remembered { decision } => {
                        let allow = decision.allow;
                        let session = (decision.lasting == Lasting::Session).then_some(up.session);
                        // Made when the person answered (a pending denial given before it
                        // gives way to it, one given after outweighs it).
                        let now_ms = crate::gateway::Gateway::now_ms(&self.shared);
                        keep_decision(
                            settings,
                            Decided {
                                agent: &who.id,
                                agent_name: &who.name,
                                server: &config.name,
                                endpoint: &up.identity,
                                tool: gated.key,
                                definition: &gated.definition,
                                digest,
                                read: gated.read,
                            },
                            decision,
                            session,
                            now_ms,
                        );
                        if allow {
                            Ok(Some(asked))
                        } else {
                            Err(denied_by_person())
                        }
                    }
                    Outcome::Declined
                    | Outcome::Cancelled {
                        reason: CancelReason::Person,
                    } => Err(denied_by_person()),
                    Outcome::Cancelled {
                        reason: CancelReason::Agent | CancelReason::AgentGone,
                    } => Err(Refusal::AgentLeft),
                    Outcome::Cancelled {
                        reason: CancelReason::Paused,
                    } => Err(Refusal::left(CancelReason::Paused, what, &config.name)),
                    Outcome::Cancelled { reason } => Err(Refusal::Denied(format!(
                        "Countersign did not allow {what} on {}: nobody approved it ({}).",
                        config.name,
                        reason.why()
                    ))),
                }
            }
        }
    }

    /// A call decided without asking uses up an answer the person gave to this very call
    /// while it waited: that is the retry a decision they chose to remember (or a rule) now
    /// decides, and the answer, left, would let the same call run once more, unasked, after
    /// the decision has lapsed or been revoked. Returns the answer if it was a denial (for an
    /// allow to weigh against; one whose use cannot be saved stays on file, and is returned
    /// all the same: it refuses, and refuses again).
    fn use_up_pending_answer(
        &self,
        who: &Who,
        up: &Upstream,
        gated: &Gated<'_>,
        now_ms: u64,
    ) -> Option<PendingDenial> {
        let store = &self.shared.pending;
        if store.is_empty() {
            return None;
        }
        let arguments = serde_json::to_string(&gated.arguments).unwrap_or_default();
        // (An answer found is taken out; a question still waiting stays the person's.)
        match store.find(&gated.same_call(who, up, &arguments), now_ms) {
            pending::Found::Answered {
                id,
                allow: false,
                answered_ms,
                ..
            }
            | pending::Found::Unsaved {
                id,
                allow: false,
                answered_ms,
            } => Some(PendingDenial { id, answered_ms }),
            _ => None,
        }
    }

    /// The person's answer to this very call, given while it was pending: used once. A call
    /// still pending waits a while more for it, then is told it is still pending. `None`:
    /// nothing pending for this call.
    async fn pending_answer(
        &self,
        up: &Upstream,
        who: &Who,
        gated: &Gated<'_>,
        arguments: &str,
        now_ms: u64,
        leaving: &Leaving,
    ) -> Result<Option<Result<Option<AskedIn>, Refusal>>, Refusal> {
        let store = &self.shared.pending;
        let config = &up.server;
        let same = gated.same_call(who, up, arguments);
        let find = || store.find(&same, now_ms);
        let deadline = tokio::time::Instant::now() + config.approval_wait;
        loop {
            let changed = store.changed();
            match find() {
                pending::Found::None => return Ok(None),
                pending::Found::Answered {
                    id, allow, asked, ..
                } => {
                    let why = format!("pending approval {id}, answered by the person");
                    self.shared
                        .broker
                        .audit()
                        .record_gated(
                            &config.name,
                            Some(&who.name),
                            &who.id,
                            gated.key,
                            allow,
                            &why,
                        )
                        .map_err(|e| {
                            Refusal::Denied(format!(
                                "Countersign did not allow {}: {e}.",
                                gated.what
                            ))
                        })?;
                    return Ok(Some(if allow {
                        Ok(asked)
                    } else {
                        Err(Refusal::Denied(format!(
                            "The person using Countersign denied {} on {} (pending approval {id}).",
                            gated.what, config.name
                        )))
                    }));
                }
                pending::Found::Unsaved { id, .. } => {
                    return Ok(Some(Err(Refusal::Denied(format!(
                        "Countersign did not carry out the person's answer to pending approval \
                         {id} for {}: it cannot note that the answer was used, and an answer is \
                         used once.",
                        gated.what
                    )))));
                }
                pending::Found::Waiting { id } => {
                    pending::ask_if_unasked(&self.shared, &id);
                    tokio::select! {
                        waited = tokio::time::timeout_at(deadline, changed) => {
                            if waited.is_err() {
                                return Ok(Some(Err(Refusal::Pending { id })));
                            }
                        }
                        // The retry goes with its request: an answer given after a pause
                        // runs nothing for it.
                        reason = leaving.left() => {
                            return Ok(Some(Err(Refusal::left(reason, &gated.what, &config.name))));
                        }
                    }
                }
            }
        }
    }

    /// Every request that reaches a server is on record; one that cannot be is not sent.
    pub(super) fn record_forwarded(
        &self,
        ctx: &RequestContext<RoleServer>,
        method: &str,
    ) -> Result<(), McpError> {
        let who = Who::of(ctx);
        self.shared
            .broker
            .audit()
            .record_forwarded(&self.server, Some(&who.name), Some(&who.id), method)
            .map_err(|e| McpError::internal_error(format!("Countersign: {e}"), None))
    }

    /// Input responses answer the server's questions, and only the person answers those, in
    /// Countersign's dialogs: an agent's own (and the request state they go with) are refused,
    /// and the refusal recorded.
    pub(super) fn refuse_agent_input(
        &self,
        method: &str,
        ctx: &RequestContext<RoleServer>,
        input_responses: &Option<rmcp::model::InputResponses>,
        request_state: &Option<String>,
    ) -> Result<(), McpError> {
        if input_responses.is_none() && request_state.is_none() {
            return Ok(());
        }
        let reason = format!(
            "Countersign: the agent sent its own inputResponses or requestState with {method}; \
             only the person answers the server's questions, in Countersign. Send the request \
             without them."
        );
        Err(self.refuse(
            ctx,
            reason,
            json!({
                "method": method,
                "inputResponses": input_responses,
                "requestState": request_state,
            }),
        ))
    }

    /// Refuses an agent's request for `reason`, recorded with `what` (and the agent's name).
    fn refuse(
        &self,
        ctx: &RequestContext<RoleServer>,
        reason: String,
        mut what: Value,
    ) -> McpError {
        let who = Who::of(ctx);
        what["agent"] = json!(who.name);
        // Within the agent's own budget: an agent cannot use up the server's, and so hide
        // the server's refusals, or another agent's.
        let refused = self.shared.broker.audit().record_refused_within(
            &format!("{}\0{}", self.server, who.id),
            &self.server,
            &reason,
            &what,
        );
        if let Err(e) = refused {
            tracing::error!(error = %e, "a refusal went unrecorded");
        }
        McpError::invalid_params(reason, None)
    }
}

/// One request at the gate: the key rules and remembered decisions use (a tool's name or
/// a read method), how the person's answer words it, and the request for the record.
struct Gated<'a> {
    key: &'a str,
    what: String,
    request: Value,
    /// The tool's definition as the person sees it (a read's is just its method), and its
    /// digest.
    definition: Cow<'a, Value>,
    digest: Cow<'a, str>,
    /// What will be forwarded, for the decisions that cover some arguments only: a call's
    /// arguments, or `[arguments, fields]` when it carries fields beyond rmcp's model
    /// (`sent::judged`).
    arguments: Value,
    annotations: Option<&'a Value>,
    read: bool,
    /// Whether the person may be asked; else what they would be asked about is refused.
    may_ask: bool,
    /// The call itself, when its tool takes a boolean `dryRun` (see `preview`).
    previewable: Option<CallToolRequest>,
}

impl Gated<'_> {
    /// This call, as a pending answer to it is found (`arguments` as forwarded).
    fn same_call<'a>(
        &'a self,
        who: &'a Who,
        up: &'a Upstream,
        arguments: &'a str,
    ) -> pending::SameCall<'a> {
        pending::SameCall {
            agent: &who.id,
            server: &up.server.name,
            endpoint: &up.identity,
            tool: self.key,
            arguments,
            digest: &self.digest,
        }
    }

    /// The question the person is asked about it.
    fn ask_kind(&self, changed: ChangedSince, sessionless: bool) -> AskKind {
        let text = |field: &str| {
            self.definition
                .get(field)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let (title, description) = if self.read {
            let (title, verb) = match self.key {
                "prompts/get" => ("Get a prompt", "get"),
                "resources/subscribe" => ("Watch a resource", "be told of changes to"),
                _ => ("Read a resource", "read"),
            };
            (
                Some(title.to_owned()),
                Some(format!(
                    "The agent asks to {verb} {}. What the server answers goes to the agent.",
                    self.what
                )),
            )
        } else {
            (text("title"), text("description"))
        };
        // rmcp forwards the serialization of this same value (key order kept, integers
        // exact), so these texts are what will run.
        let (arguments_text, also_sent_text) = crate::gateway::sent::shown(&self.arguments);
        AskKind::ToolCall {
            tool: self.key.to_owned(),
            title,
            description,
            annotations: self.annotations.cloned(),
            arguments_text,
            also_sent_text,
            // What a remembered choice is checked against: the judged value itself.
            arguments: self.arguments.clone(),
            changed: changed.tool,
            server_changed: changed.server,
            preview: self.previewable.is_some(),
            // Every listed tool has an input schema; one the gate found no listing for, none.
            unlisted: !self.read
                && self
                    .definition
                    .get("inputSchema")
                    .is_none_or(Value::is_null),
            sessionless,
        }
    }
}

/// Who an agent is: the token it holds (its id keys every remembered decision; its name is
/// the person's), and the name it gives itself, which is only shown.
pub(super) struct Who {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) declared: Option<String>,
    /// The agent offers roots: its upstream session declares them, and passes its on, where
    /// the server's entry lets them through (`agentRoots`).
    pub(super) roots: bool,
    /// The agent offers sampling (as declared): its upstream session declares the same, and
    /// passes the server's requests on once the person allowed each.
    pub(super) sampling: Option<rmcp::model::SamplingCapability>,
}

impl Who {
    pub(super) fn of(ctx: &RequestContext<RoleServer>) -> Who {
        let declared = ctx.client_info().map(|i| i.name);
        let info = ctx.peer.peer_info();
        let roots = info
            .as_ref()
            .is_some_and(|i| i.capabilities.roots.is_some());
        let sampling = info.and_then(|i| i.capabilities.sampling.clone());
        match crate::gateway::registry::token_agent(ctx) {
            Some(agent) => Who {
                id: agent.id,
                name: agent.name,
                declared,
                roots,
                sampling,
            },
            // Only requests through the guard reach the forwarder; without its mark, the
            // agent is nobody in particular and nothing remembered applies to it.
            None => Who {
                id: String::new(),
                name: UNNAMED_AGENT.to_owned(),
                declared,
                roots,
                sampling,
            },
        }
    }
}

/// The person's denial of a call while it was pending, found as the call is allowed without
/// asking.
struct PendingDenial {
    id: String,
    /// When they denied it; `None` in an answer kept before that was.
    answered_ms: Option<u64>,
}

impl PendingDenial {
    /// Whether it outweighs an allow remembered at `made_ms` (`None`: not remembered, or when
    /// unknown): only an allow remembered after it goes before it.
    fn outweighs(&self, made_ms: Option<u64>) -> bool {
        match (self.answered_ms, made_ms) {
            (Some(answered), Some(made)) => made <= answered,
            _ => true,
        }
    }
}

/// When the latest remembered allow that applies to `call` was made; `None` when none does
/// now.
fn latest_allow_ms(
    settings: &crate::settings::SettingsStore,
    call: &approval::Call,
) -> Option<u64> {
    settings
        .get()
        .remembered
        .iter()
        .filter(|d| d.allow && d.applies(call))
        .map(|d| d.created_ms)
        .max()
}

/// Why the gate did not let a request through.
pub(super) enum Refusal {
    /// In words the agent (and its model) can act on.
    Denied(String),
    /// The agent cancelled or went away while the person was asked.
    AgentLeft,
    /// The person has not answered yet: the approval waits in Countersign under `id`.
    Pending { id: String },
}

impl Refusal {
    /// The request ended before it ran, for `reason` (`Leaving`): the person's pause is said
    /// in words; an agent that left hears nothing more.
    fn left(reason: CancelReason, what: &str, server: &str) -> Refusal {
        match reason {
            CancelReason::Paused => Refusal::Denied(format!(
                "Countersign did not run {what} on {server}: the person paused the gateway."
            )),
            _ => Refusal::AgentLeft,
        }
    }
}

/// What the agent is told when the person has not answered yet: a result, not an error, in
/// words its model can act on.
///
/// A tool with an output schema gets it as `isError: true`: a successful result would have to
/// carry structured content fitting that schema (SDK clients refuse one without), and only the
/// server could give that.
fn pending_result(id: &str, tool: &str, server: &str, has_output_schema: bool) -> CallToolResult {
    let words = vec![ContentBlock::text(pending_words(id, tool, server))];
    if has_output_schema {
        CallToolResult::error(words)
    } else {
        CallToolResult::success(words)
    }
}

pub(super) fn pending_words(id: &str, tool: &str, server: &str) -> String {
    format!(
        "Approval pending in Countersign (id {id}): the person has not yet decided whether \
         {tool} on {server} may run, and it has not run. Make the same call again later, with \
         the same arguments, to get their decision."
    )
}

/// Who decided about what, for a decision to remember.
pub(crate) struct Decided<'a> {
    pub agent: &'a str,
    pub agent_name: &'a str,
    pub server: &'a str,
    /// The server's identity (`TransportConfig::identity`) as the person was asked.
    pub endpoint: &'a str,
    pub tool: &'a str,
    pub definition: &'a Value,
    pub digest: &'a str,
    /// A read's (`tool` is then its method), not a tool call's.
    pub read: bool,
}

/// Keeps what the person chose to remember. A failure to save is logged and told to the person
/// (`SettingsStore::unsaved`); the decision was taken for this call all the same, and a Deny
/// is kept in memory even so (its id is given, so a pending answer goes with it).
pub(crate) fn keep_decision(
    settings: &crate::settings::SettingsStore,
    decided: Decided,
    decision: approval::Remember,
    session: Option<u64>,
    now_ms: u64,
) -> Option<u64> {
    // A read's decision is kept under its method's name: one for a tool the server (or an
    // agent calling a tool it does not list) names after a read method would decide reads,
    // which the person never saw; and such a tool is never decided by one (`policy::decide`).
    if !decided.read && crate::gateway::policy::READ_METHODS.contains(&decided.tool) {
        tracing::warn!(
            tool = decided.tool,
            "a decision about a tool named after a read method is not kept"
        );
        return None;
    }
    let kept = RememberedDecision {
        id: 0,
        agent: decided.agent.to_owned(),
        agent_name: decided.agent_name.to_owned(),
        server: decided.server.to_owned(),
        endpoint: decided.endpoint.to_owned(),
        tool: decided.tool.to_owned(),
        allow: decision.allow,
        session,
        lasting: decision.lasting,
        covering: decision.covering,
        definition: decided.definition.clone(),
        digest: decided.digest.to_owned(),
        created_ms: now_ms,
        last_used_ms: Some(now_ms),
        uses: 1,
        inert: None,
    };
    settings
        .remember(kept, now_ms)
        // A failure is logged and told by the store.
        .ok()
        .map(|kept| kept.id)
}

/// Ties a question to the agent's call while the call waits for it, and lets go when the
/// call stops waiting (the question then outlives it, see `pending`).
struct WhileWaiting {
    detached: CancellationToken,
    cancelled: CancellationToken,
    gone: CancellationToken,
    paused: CancellationToken,
}

impl WhileWaiting {
    fn link(ctx: &RequestContext<RoleServer>) -> Self {
        let leaving = Leaving::of(ctx);
        let link = WhileWaiting {
            detached: CancellationToken::new(),
            cancelled: CancellationToken::new(),
            gone: CancellationToken::new(),
            paused: CancellationToken::new(),
        };
        let (detached, cancelled, gone, paused) = (
            link.detached.clone(),
            link.cancelled.clone(),
            link.gone.clone(),
            link.paused.clone(),
        );
        tokio::spawn(async move {
            tokio::select! {
                biased;
                _ = detached.cancelled() => {}
                reason = leaving.left() => match reason {
                    CancelReason::AgentGone => gone.cancel(),
                    CancelReason::Paused => paused.cancel(),
                    _ => cancelled.cancel(),
                },
            }
        });
        link
    }

    /// How the question is withdrawn: the agent cancelling or going away, or the person
    /// pausing the gateway.
    fn tokens(&self) -> Withdrawal {
        Withdrawal::new()
            .when(self.cancelled.clone(), CancelReason::Agent)
            .when(self.gone.clone(), CancelReason::AgentGone)
            .when(self.paused.clone(), CancelReason::Paused)
    }

    fn detach(&self) {
        self.detached.cancel();
    }
}
