// The backend as the UI sees it, in the Node test process: holds pending asks, servers, tools,
// history; records every command; answers `answer_ask` like the real broker (resolving the ask
// and then emitting `ask-event` resolved). Tests can override answers and tool runs.
//
// Replies go back through the page's mockIPC as {ok} or {err} (an AppError), because a thrown
// Error would lose its fields crossing Playwright's binding.

import { clientSetups } from "./fixtures.mjs";

export class FakeBackend {
  constructor(state = {}) {
    this.asks = [...(state.asks ?? [])];
    this.servers = structuredClone(state.servers ?? []);
    this.tools = state.tools ?? {};
    this.stderr = state.stderr ?? {};
    this.history = state.history ?? { asks: [], refused: [], gated: [], skipped: 0 };
    this.config = { notices: [], editRejected: false, ...(state.config ?? { path: "/home/me/.config/countersign/config.json", errors: [] }) };
    this.verification = state.verification ?? { files: ["/home/me/.local/share/countersign/audit.jsonl"], records: 0, unchained: 0, startsAfterRotation: false, problem: null };
    this.desktop = state.desktop ?? { tray: true, startAtLogin: false };
    /** `gateway_info`'s reply: a GatewayInfo, or with `gatewayError` set, that AppError. */
    this.gateway = structuredClone(state.gateway ?? null);
    this.gatewayError = state.gatewayError ?? null;
    this.settings = structuredClone(state.settings ?? { mutedServers: [], remembered: [] });
    /** `agent_configs`'s reply: AgentConfigs (fixtures.agentConfigs()); the agents' files. */
    this.agentConfigs = structuredClone(state.agentConfigs ?? null);
    /** Per client: `preview_import`'s ImportPreview / `preview_rewrite`'s RewritePreview. */
    this.importPreviews = structuredClone(state.importPreviews ?? {});
    this.rewritePreviews = structuredClone(state.rewritePreviews ?? {});
    /** Optional (cmd, args) => reply for the agent-config commands (e.g. an error). */
    this.onAgents = null;
    /** Optional (cmd, args) => reply for create_agent / list_agents / revoke_agent. */
    this.onAgentTokens = null;
    /** The tokens `create_agent` made, by agent id (the page must never get them again). */
    this.tokens = {};
    /** Optional (args) => reply for set_gateway_paused / revoke_decision (e.g. an error). */
    this.onGateway = null;
    /** Optional (args) => reply for set_muted / set_start_at_login (e.g. a save error). */
    this.onSetting = null;
    /** Every command as {cmd, args}, in order. */
    this.calls = [];
    /** Optional (id, answer) => reply ({ok} | {err}) replacing the default broker behaviour. */
    this.onAnswer = null;
    /** Run ids the app has seen (run_tool arrived, or run_arrived said it never will). */
    this.runsSeen = new Set();
    /** When set, run_tool calls are lost on the way, as an invoke WebKit never delivers. */
    this.loseRuns = false;
    /** Optional () => reply (or a promise of one) for list_servers, e.g. a listing held back
     * while a newer session-event overtakes it. */
    this.onListServers = null;
    /** Optional (args) => reply for run_tool. */
    this.onRunTool = null;
    /** Optional (args) => reply (or a promise of one) for preview_call; by default, as core:
     * a diff for a pending ask whose tool takes dryRun, else `{kind: "preview", error: notOffered}`. */
    this.onPreview = null;
    /** Set by the page helper: pushes an event into the page. */
    this.emit = async () => {};
  }

  /** The `answer_ask` calls, as {id, answer}. */
  get answers() {
    return this.calls.filter((c) => c.cmd === "answer_ask").map((c) => c.args);
  }

  /** A new pending ask, as the broker would add it: stored, then `added` emitted. */
  async addAsk(ask) {
    this.asks.push(ask);
    await this.emit("ask-event", { event: "added", ask });
  }

  /** As core's Gateway::info: listening = bound and not paused. */
  setPaused(paused) {
    this.gateway.paused = paused;
    this.gateway.listening = this.gateway.enabled && this.gateway.error === null && !paused;
  }

  /** The tray's Pause / Resume item: the gateway changes, then `gateway-event` is emitted. */
  async pauseFromTray(paused) {
    this.setPaused(paused);
    await this.emit("gateway-event", null);
  }

  /** The person edited the config file: as core's App::apply_config, then `config-event`. */
  async editConfig({ servers, errors = [] }) {
    if (errors.length > 0) {
      this.config = { ...this.config, errors, editRejected: true };
    } else {
      this.servers = servers;
      this.config = { ...this.config, errors: [], editRejected: false };
    }
    await this.emit("config-event", null);
  }

  /** The ask ends without the person (withdrawn): removed, then `resolved` emitted. */
  async resolve(id, outcome) {
    this.asks = this.asks.filter((a) => a.id !== id);
    await this.emit("ask-event", { event: "resolved", id, outcome });
  }

  async handle(cmd, args) {
    this.calls.push({ cmd, args: structuredClone(args) });
    switch (cmd) {
      case "pending_asks":
        return { ok: this.asks };
      case "answer_ask":
        return this.answer(args.id, args.answer);
      case "preview_call": {
        if (this.onPreview) return this.onPreview(args);
        const ask = this.asks.find((a) => a.id === args.id);
        if (!ask || ask.kind !== "toolCall" || !ask.preview) {
          return { err: { kind: "preview", message: "this question has no preview (it was answered, withdrawn, or its tool takes no dryRun)", error: { kind: "notOffered" } } };
        }
        return { ok: { text: "--- a\n+++ b\n-old\n+new\n", isError: false, clipped: false } };
      }
      case "list_servers": {
        const reply = await this.onListServers?.();
        return reply ?? { ok: this.servers };
      }
      case "list_tools": {
        const tools = this.tools[args.server];
        if (!tools) return { err: { kind: "session", message: `unknown server ${args.server}` } };
        return { ok: tools };
      }
      case "server_stderr":
        return { ok: this.stderr[args.server] ?? [] };
      case "sign_in":
      case "sign_out": {
        // Optional (cmd, args) => reply (or a promise of one); by default, as core: signed in
        // (or out) at once.
        const reply = await this.onSignIn?.(cmd, args);
        if (reply) return reply;
        const server = this.servers.find((s) => s.name === args.server);
        if (server?.signIn) server.signIn.signedIn = cmd === "sign_in";
        if (server && cmd === "sign_out") {
          server.state = { state: "signInRequired", reason: "the server asks you to sign in" };
          server.stateRevision += 1;
          // As core words a revocation the authorization server carried out.
          return { ok: { told: `Signed out; ${server.endpoint?.host ?? "the server"} revoked Countersign's tokens.`, reason: null } };
        }
        return { ok: null };
      }
      case "run_arrived": {
        const arrived = this.runsSeen.has(args.runId);
        this.runsSeen.add(args.runId);
        return { ok: arrived };
      }
      case "cancel_run":
        return { ok: true };
      case "run_tool":
        if (this.loseRuns) return new Promise(() => {});
        if (this.runsSeen.has(args.runId)) return { err: { kind: "session", message: "this run was already started" } };
        this.runsSeen.add(args.runId);
        if (this.onRunTool) return this.onRunTool(args);
        return { ok: { isError: false, content: [{ type: "text", text: "ok" }], structuredContent: null } };
      case "history":
        return { ok: this.history };
      case "config_info":
        return { ok: this.config };
      case "verify_audit":
        return { ok: this.verification };
      case "desktop_info":
        return { ok: this.desktop };
      case "set_muted": {
        const reply = this.onSetting?.(args);
        if (reply) return reply;
        const server = this.servers.find((s) => s.name === args.server);
        if (server) server.muted = args.muted;
        return { ok: null };
      }
      case "set_start_at_login": {
        const reply = this.onSetting?.(args);
        if (reply) return reply;
        this.desktop.startAtLogin = args.on;
        return { ok: null };
      }
      case "gateway_info":
        if (this.gatewayError) return { err: this.gatewayError };
        if (!this.gateway) return { err: { kind: "gateway", message: "the gateway is not running" } };
        return { ok: this.gateway };
      case "set_gateway_paused": {
        const reply = this.onGateway?.(args);
        if (reply) return reply;
        if (!this.gateway) return { err: { kind: "gateway", message: "the gateway is not running" } };
        this.setPaused(args.paused);
        // As the shell: every change of pause is also a `gateway-event`, after the reply.
        setTimeout(() => void this.emit("gateway-event", null).catch(() => {}), 0);
        return { ok: structuredClone(this.gateway) };
      }
      case "create_agent":
      case "list_agents":
      case "revoke_agent":
        return this.agentTokens(cmd, args);
      case "get_settings":
        return { ok: this.settings };
      case "revoke_decision": {
        const reply = this.onGateway?.(args);
        if (reply) return reply;
        this.settings.remembered = this.settings.remembered.filter((d) => d.id !== args.id);
        return { ok: this.settings };
      }
      case "forget_unread_decisions": {
        const reply = this.onGateway?.(args);
        if (reply) return reply;
        delete this.settings.unreadShown;
        return { ok: this.settings };
      }
      case "agent_configs":
      case "check_agent_host":
      case "preview_import":
      case "import_servers":
      case "preview_rewrite":
      case "rewrite_agent_config":
      case "undo_rewrite":
        return this.agents(cmd, args);
      default:
        return { err: { kind: "session", message: `unknown command ${cmd}` } };
    }
  }

  /** Agents and their tokens, as core's `gateway::agents` answers. */
  agentTokens(cmd, args) {
    const reply = this.onAgentTokens?.(cmd, args);
    if (reply) return reply;
    if (!this.gateway) return { err: { kind: "gateway", message: "the gateway is not running" } };
    const agents = this.gateway.agents;
    switch (cmd) {
      case "create_agent": {
        const name = args.name.trim();
        if (name === "") return { err: { kind: "agent", message: "give the agent a name" } };
        if (Array.from(name).length > 64) return { err: { kind: "agent", message: "an agent's name can be at most 64 characters" } };
        const id = `a${Object.keys(this.tokens).length + 1}`.padEnd(16, "0");
        const token = `tok-${id}-SECRET`;
        this.tokens[id] = token;
        const agent = { id, name, createdMs: Date.UTC(2026, 0, 2, 10, 0, 0), lastUsedMs: null, shared: false };
        agents.push(agent);
        return { ok: { agent, token, clients: clientSetups(token, this.gateway.servers.map((s) => s.name)) } };
      }
      case "list_agents":
        return { ok: agents };
      case "revoke_agent": {
        const at = agents.findIndex((a) => a.id === args.id);
        if (at < 0) return { err: { kind: "agent", message: `there is no agent with id "${args.id}" (it may have been revoked already)` } };
        agents.splice(at, 1);
        return { ok: agents };
      }
    }
  }

  /** The agents' config files, as core's `clients` module answers (plans by number). */
  agents(cmd, args) {
    const reply = this.onAgents?.(cmd, args);
    if (reply) return reply;
    const configs = this.agentConfigs;
    if (!configs) return { err: { kind: "agentConfig", message: "no home directory: agents' config files cannot be found" } };
    const notFound = (client) => {
      const file = configs.files.find((f) => f.client === client);
      return { err: { kind: "agentConfig", message: `${file?.path ?? client}: not found` } };
    };
    switch (cmd) {
      case "agent_configs":
        return { ok: configs };
      case "check_agent_host": {
        const check = this.hostChecks?.[args.client];
        return check ?? { err: { kind: "agentConfig", message: `${args.client}'s tool is not installed (not found on PATH)` } };
      }
      case "preview_import":
        return this.importPreviews[args.client] ? { ok: this.importPreviews[args.client] } : notFound(args.client);
      case "import_servers": {
        const preview = Object.values(this.importPreviews).find((p) => p.plan === args.plan);
        if (!preview) return { err: { kind: "agentConfig", message: "this preview is no longer available; open it again" } };
        const chosen = preview.candidates.filter((c) => c.importAs !== null && args.names.includes(c.key));
        if (chosen.length === 0) return { err: { kind: "agentConfig", message: "choose at least one server that can be imported" } };
        return { ok: {
          configPath: configs.configPath,
          backupPath: `${configs.configPath}.bak-1767225600000`,
          imported: chosen.map((c) => ({ name: c.name, importAs: c.importAs })),
          skipped: [],
        } };
      }
      case "preview_rewrite":
        return this.rewritePreviews[args.client] ? { ok: this.rewritePreviews[args.client] } : notFound(args.client);
      case "rewrite_agent_config": {
        const preview = Object.values(this.rewritePreviews).find((p) => p.plan === args.plan);
        if (!preview) return { err: { kind: "agentConfig", message: "this preview is no longer available; open it again" } };
        const rewrite = {
          id: `${preview.client}-${configs.rewrites.length + 1}`,
          client: preview.client,
          title: preview.title,
          path: preview.path,
          backupPath: preview.backupPath,
          atMs: Date.UTC(2026, 0, 1, 12, 0, 0),
          changedSince: false,
          backupFound: true,
        };
        configs.rewrites.unshift(rewrite);
        return { ok: { rewrite, routed: preview.changes.length } };
      }
      case "undo_rewrite": {
        const rewrite = configs.rewrites.find((r) => r.id === args.id);
        if (!rewrite) return { err: { kind: "agentConfig", message: "there is no such rewrite to undo (it may have been undone already)" } };
        const entriesOnly = this.entriesOnlyUndo?.[args.id] ?? null;
        if (rewrite.changedSince && !args.force && entriesOnly === null) {
          return { err: { kind: "changedOnDisk", message: `${rewrite.path} has changed since Countersign rewrote it; undo anyway to put ${rewrite.backupPath} back (the changed file is kept beside it)` } };
        }
        configs.rewrites = configs.rewrites.filter((r) => r.id !== args.id);
        return { ok: {
          path: rewrite.path,
          restoredFrom: rewrite.backupPath,
          keptAs: rewrite.changedSince ? `${rewrite.path}.countersign-replaced-1767229200000` : null,
          entriesOnly,
        } };
      }
    }
    return { err: { kind: "session", message: `unknown command ${cmd}` } };
  }

  answer(id, answer) {
    if (this.onAnswer) {
      const reply = this.onAnswer(id, answer);
      if (reply) return reply;
    }
    if (!this.asks.some((a) => a.id === id)) {
      return { err: { kind: "answer", message: "not pending", error: { kind: "notPending" } } };
    }
    const ask = this.asks.find((a) => a.id === id);
    let decision = null;
    if (answer.action === "remember") {
      const checked = checkRemember(ask, answer.decision);
      if (checked.error) {
        return { err: { kind: "answer", message: checked.error, error: { kind: "malformed", message: checked.error } } };
      }
      decision = checked.decision;
    }
    const outcome =
      answer.action === "accept" ? { outcome: "accepted", content: answer.content }
      : answer.action === "remember" ? { outcome: "remembered", decision }
      : answer.action === "decline" ? { outcome: "declined" }
      : { outcome: "cancelled", reason: "person" };
    this.asks = this.asks.filter((a) => a.id !== id);
    // The real broker emits `resolved` for every outcome, the person's own included.
    setTimeout(() => void this.emit("ask-event", { event: "resolved", id, outcome }).catch(() => {}), 0);
    return { ok: outcome };
  }
}

/** As core's broker checks a remembered choice: only for tool calls, an `until` in the future,
 * a covering that covers the call on screen (paths normalized); exact arguments filled in. */
function checkRemember(ask, decision) {
  if (ask.kind !== "toolCall") return { error: "only a tool call's answer can be remembered" };
  if (decision.lasting.kind === "until" && !(decision.lasting.untilMs > Date.now())) {
    return { error: "that moment has already passed" };
  }
  const c = decision.covering;
  const args = ask.arguments ?? {};
  let covering = c;
  if (c.kind === "exactArguments") {
    covering = { kind: "exactArguments", arguments: JSON.stringify(args) };
  } else if (c.kind === "pathUnder") {
    const prefix = normalizePath(c.prefix);
    if (prefix === null) return { error: `${JSON.stringify(c.prefix)} is not an absolute path` };
    // As the backend: the named argument and every other text of the call that reads as a path
    // are held to the folder.
    const texts = argumentTexts(args);
    const under = (text) => {
      const path = typeof text === "string" ? normalizePath(text) : null;
      return path !== null && (path === prefix || path.startsWith(prefix === "/" ? "/" : `${prefix}/`));
    };
    if (!under(args[c.argument]) || !texts.filter(([, t]) => looksLikePath(t)).every(([, t]) => under(t))) {
      return { error: "the choice does not cover the call it answers" };
    }
    const also = Object.keys(args).filter((k) => k !== c.argument && typeof args[k] === "string" && looksLikePath(args[k]));
    covering = { ...c, prefix, also };
  } else if (c.kind === "urlHost") {
    const hostOf = (text) => {
      try {
        const url = new URL(text);
        // As core's `url_host`: only a URL every reader reads alike has a host.
        const authority = /^https?:\/\/([^/?#]*)/i.exec(text)?.[1];
        const alike = !/[\s\p{Cc}]/u.test(text) && authority !== undefined && /^[\p{Alphabetic}\p{N}._\-:[\]]+$/u.test(authority);
        // With its port when not the scheme's default, as core's `url_host` reads it.
        return alike && (url.protocol === "http:" || url.protocol === "https:") ? url.host.toLowerCase() : null;
      } catch {
        return null;
      }
    };
    const urlish = (t) => {
      try {
        const u = new URL(t);
        return u.hostname !== "" || u.protocol === "file:";
      } catch {
        return false;
      }
    };
    const host = c.host.toLowerCase();
    if (hostOf(args[c.argument]) !== host || !argumentTexts(args).filter(([, t]) => urlish(t)).every(([, t]) => hostOf(t) === host)) {
      return { error: "the choice does not cover the call it answers" };
    }
    const also = Object.keys(args).filter((k) => k !== c.argument && typeof args[k] === "string" && urlish(args[k]));
    covering = { ...c, host, also };
  }
  return { decision: { ...decision, covering } };
}

function normalizePath(path) {
  if (!path.startsWith("/")) return null;
  const parts = [];
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") {
      if (parts.length === 0) return null;
      parts.pop();
    } else parts.push(part);
  }
  return `/${parts.join("/")}`;
}

/** The call's top-level strings and the strings of its top-level arrays, by argument name. */
function argumentTexts(args) {
  const strings = (value) => typeof value === "string" ? [value]
    : value !== null && typeof value === "object" ? Object.values(value).flatMap(strings) : [];
  return Object.entries(args).flatMap(([name, value]) => strings(value).map((text) => [name, text]));
}

/** As core's `looks_like_path`. */
function looksLikePath(text) {
  // Anything starting like a path, after any white space or controls (a server that trims drops
  // them), whatever else it holds.
  const start = text.replace(/^[\s\p{Cc}\uFEFF]*/u, "");
  if (start.startsWith("/") || start.startsWith("~") || start === "." || start === ".."
    || start.startsWith("./") || start.startsWith("../") || start.slice(0, 5).toLowerCase() === "file:") {
    return true;
  }
  if (/[\n\r]/.test(text) || /\s/u.test(text) || !text.includes("/")) return false;
  try {
    new URL(text);
    return false;
  } catch {
    return true;
  }
}
