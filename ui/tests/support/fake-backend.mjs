// The backend as the UI sees it, in the Node test process: holds pending asks, servers, tools,
// history; records every command; answers `answer_ask` like the real broker (resolving the ask
// and then emitting `ask-event` resolved). Tests can override answers and tool runs.
//
// Replies go back through the page's mockIPC as {ok} or {err} (an AppError), because a thrown
// Error would lose its fields crossing Playwright's binding.

export class FakeBackend {
  constructor(state = {}) {
    this.asks = [...(state.asks ?? [])];
    this.servers = structuredClone(state.servers ?? []);
    this.tools = state.tools ?? {};
    this.stderr = state.stderr ?? {};
    this.history = state.history ?? { asks: [], refused: [], skipped: 0 };
    this.config = state.config ?? { path: "/home/me/.config/countersign/config.json", errors: [] };
    this.desktop = state.desktop ?? { tray: true, startAtLogin: false };
    /** `gateway_info`'s reply: a GatewayInfo, or with `gatewayError` set, that AppError. */
    this.gateway = structuredClone(state.gateway ?? null);
    this.gatewayError = state.gatewayError ?? null;
    this.settings = structuredClone(state.settings ?? { mutedServers: [], alwaysAllow: [] });
    /** Optional (args) => reply for set_gateway_paused / revoke_always_allow (e.g. an error). */
    this.onGateway = null;
    /** Optional (args) => reply for set_muted / set_start_at_login (e.g. a save error). */
    this.onSetting = null;
    /** Every command as {cmd, args}, in order. */
    this.calls = [];
    /** Optional (id, answer) => reply ({ok} | {err}) replacing the default broker behaviour. */
    this.onAnswer = null;
    /** Optional (args) => reply for run_tool. */
    this.onRunTool = null;
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
      case "list_servers":
        return { ok: this.servers };
      case "list_tools": {
        const tools = this.tools[args.server];
        if (!tools) return { err: { kind: "session", message: `unknown server ${args.server}` } };
        return { ok: tools };
      }
      case "server_stderr":
        return { ok: this.stderr[args.server] ?? [] };
      case "run_tool":
        if (this.onRunTool) return this.onRunTool(args);
        return { ok: { isError: false, content: [{ type: "text", text: "ok" }], structuredContent: null } };
      case "history":
        return { ok: this.history };
      case "config_info":
        return { ok: this.config };
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
        // As core's Gateway::info: listening = bound and not paused.
        this.gateway.paused = args.paused;
        this.gateway.listening = this.gateway.enabled && this.gateway.error === null && !args.paused;
        return { ok: this.gateway };
      }
      case "get_settings":
        return { ok: this.settings };
      case "revoke_always_allow": {
        const reply = this.onGateway?.(args);
        if (reply) return reply;
        const c = args.call;
        this.settings.alwaysAllow = this.settings.alwaysAllow.filter((a) =>
          !(a.agent === c.agent && a.server === c.server && a.tool === c.tool));
        return { ok: this.settings };
      }
      default:
        return { err: { kind: "session", message: `unknown command ${cmd}` } };
    }
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
    if (answer.action === "alwaysAllow" && ask.kind !== "toolCall") {
      return { err: { kind: "answer", message: "malformed", error: { kind: "malformed", message: "only a tool call can be always allowed" } } };
    }
    const outcome =
      answer.action === "accept" ? { outcome: "accepted", content: answer.content }
      : answer.action === "alwaysAllow" ? { outcome: "alwaysAllowed" }
      : answer.action === "decline" ? { outcome: "declined" }
      : { outcome: "cancelled", reason: "person" };
    this.asks = this.asks.filter((a) => a.id !== id);
    // The real broker emits `resolved` for every outcome, the person's own included.
    setTimeout(() => void this.emit("ask-event", { event: "resolved", id, outcome }).catch(() => {}), 0);
    return { ok: outcome };
  }
}
