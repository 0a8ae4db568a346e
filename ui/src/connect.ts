//! The Connect agents view: whether Countersign's gateway is listening (and where), pausing and
//! resuming it, each server's gateway address, and the agents: each has its own token, made
//! here and shown once with the snippet to paste into each agent host (with a Copy button),
//! listed with when it was last used, and revoked here. Read on demand with `gateway_info`; a
//! new token lives only in the open panel that shows it.
//!
//! Below it, "Import from your agents": for each agent host's config file, importing its servers
//! into Countersign's config and rewriting the file to route them through Countersign, each
//! previewed first, and undoing a rewrite. The backend keeps the previews (as plans) and the
//! record of rewrites; this view only shows them. Everything read from those files is text.

import type { AgentConfigs } from "./bindings/AgentConfigs";
import type { AgentFile } from "./bindings/AgentFile";
import type { AgentView } from "./bindings/AgentView";
import type { ClientSetup } from "./bindings/ClientSetup";
import type { CreatedAgent } from "./bindings/CreatedAgent";
import type { GatewayInfo } from "./bindings/GatewayInfo";
import type { GatewayRefusal } from "./bindings/GatewayRefusal";
import type { ImportCandidate } from "./bindings/ImportCandidate";
import type { ImportPreview } from "./bindings/ImportPreview";
import type { ImportResult } from "./bindings/ImportResult";
import type { RewritePreview } from "./bindings/RewritePreview";
import type { RewriteView } from "./bindings/RewriteView";
import { el, append, replace, uid } from "./dom";
import { dateTime, plural } from "./format";
import { asAppError, commands, errorText } from "./ipc";
import { clippedText, inlineText, shortText, visibleText } from "./untrusted";

export class ConnectPane {
  readonly root: HTMLElement;
  private readonly content = el("div", { class: "connect-content" });
  private readonly status = el("p", { class: "muted", attrs: { role: "status" } });
  private readonly imports = new AgentImports();
  /** Kept across redraws, so a token just made stays on screen until the person closes it. */
  private readonly tokens = new AgentTokens();
  /** Bumped on every load, so a slow reply that a newer one overtook is dropped. */
  private generation = 0;

  constructor() {
    const refresh = el("button", {
      class: "button small",
      attrs: { type: "button" },
      on: { click: () => void this.reload() },
    }, "Refresh");
    this.root = el("div", { class: "connect" },
      el("div", { class: "section-head" }, el("h2", {}, "Connect agents"), refresh),
      el("p", { class: "muted" },
        "Agents reach your servers through Countersign, so every question a server asks and every ",
        "tool call that needs your approval comes to this window."),
      this.status,
      this.content,
      this.imports.root);
  }

  async reload(): Promise<void> {
    void this.imports.reload();
    const generation = ++this.generation;
    this.status.textContent = "Loading…";
    let info: GatewayInfo;
    try {
      info = await commands.gatewayInfo();
    } catch (error) {
      if (generation !== this.generation) return;
      this.status.textContent = "";
      replace(this.content, el("section", { class: "gateway-state", attrs: { "aria-label": "Gateway status" } },
        el("p", {},
          el("span", { class: "state state-failed" }, "Not running"), " ",
          inlineText(errorText(error), 400))));
      return;
    }
    if (generation !== this.generation) return;
    this.status.textContent = "";
    this.draw(info);
  }

  /** The gateway was paused or resumed (the tray's item, or this page's button): its state is
   * redrawn, the focus kept on the Pause / Resume button if it was there. */
  async gatewayChanged(): Promise<void> {
    const generation = ++this.generation;
    let info: GatewayInfo;
    try {
      info = await commands.gatewayInfo();
    } catch {
      return;
    }
    if (generation !== this.generation) return;
    const onButton = document.activeElement?.classList.contains("pause-button") === true
      && this.content.contains(document.activeElement);
    this.draw(info);
    if (onButton) this.content.querySelector<HTMLButtonElement>(".pause-button")?.focus();
  }

  private draw(info: GatewayInfo): void {
    replace(this.content,
      this.stateSection(info),
      this.serversSection(info),
      this.tokens.root,
      refusalsSection(info.refusals));
    this.tokens.update(info.agents);
  }

  private stateSection(info: GatewayInfo): HTMLElement {
    const line = el("p", { class: "gateway-line", attrs: { role: "status" } });
    if (!info.enabled) {
      append(line, el("span", { class: "state state-stopped" }, "Off"),
        " The gateway is turned off in the config (", el("code", {}, "\"gateway\": {\"enabled\": false}"), ").");
    } else if (info.paused) {
      append(line, el("span", { class: "state state-connecting" }, "Paused"),
        " Every agent request is refused until you resume, and the calls in flight when you paused were stopped; agents stay connected.");
    } else if (info.listening) {
      append(line, el("span", { class: "state state-ready" }, "Listening"),
        " at ", el("code", {}, inlineText(info.url, 200)), " (this computer only).");
    } else {
      append(line, el("span", { class: "state state-failed" }, "Not running"), " ",
        inlineText(info.error ?? "The gateway is not listening.", 400));
    }

    const section = el("section", { class: "gateway-state", attrs: { "aria-label": "Gateway status" } }, line);
    // Pausing means something only while there is a listener to pause (or one paused).
    if (info.enabled && (info.listening || info.paused)) {
      const pauseStatus = el("span", { class: "muted", attrs: { role: "status" } });
      const button = el("button", {
        class: "button small",
        attrs: { type: "button" },
      }, info.paused ? "Resume" : "Pause");
      button.addEventListener("click", () => {
        button.disabled = true;
        commands.setGatewayPaused(!info.paused).then(
          (next) => {
            this.draw(next);
            this.content.querySelector<HTMLButtonElement>(".pause-button")?.focus();
          },
          (error: unknown) => {
            button.disabled = false;
            pauseStatus.textContent = `Could not ${info.paused ? "resume" : "pause"}: ${errorText(error)}`;
          },
        );
      });
      button.classList.add("pause-button");
      append(section, el("div", { class: "actions start" }, button, pauseStatus));
    }
    append(section, el("p", {}, "Shared token file: ", el("code", {}, inlineText(info.tokenPath, 300)),
      el("span", { class: "muted" }, " (older setups send this token; anyone who has it can use your servers)")));
    return section;
  }

  private serversSection(info: GatewayInfo): HTMLElement {
    const headingId = uid("gateway-servers");
    return el("section", { class: "detail-section", attrs: { "aria-labelledby": headingId } },
      el("h3", { id: headingId }, "Servers through the gateway"),
      info.servers.length === 0
        ? el("p", { class: "muted" }, "No servers are configured.")
        : el("ul", { class: "gateway-servers" }, ...info.servers.map((s) => el("li", {},
          el("span", { class: "server-item-name" }, inlineText(s.name, 80)), " ",
          el("code", {}, inlineText(s.url, 300))))));
  }
}

function clientCard(client: ClientSetup): HTMLElement {
  const headingId = uid("client");
  const pre = el("pre", {
    class: "output snippet",
    attrs: { tabindex: "0", dir: "ltr", "aria-label": `${client.title} snippet` },
  });
  append(pre, visibleText(client.snippet));
  const status = el("span", { class: "muted copy-status", attrs: { role: "status" } });
  const copy = el("button", {
    class: "button small",
    attrs: { type: "button" },
    on: { click: () => void copySnippet(client.snippet, pre, status) },
  }, "Copy");
  return el("article", { class: "client", attrs: { "aria-labelledby": headingId } },
    el("div", { class: "section-head" },
      el("h4", { id: headingId }, inlineText(client.title, 80)), copy, status),
    el("p", { class: "muted client-where" }, inlineText(client.whereTo, 400)),
    ...(client.note ? [el("p", { class: "muted client-note" }, client.note)] : []),
    // A server's name may come from a project's config: each shown as that name, never as
    // part of a sentence of Countersign's.
    ...(client.renamed.length > 0
      ? [el("p", { class: "muted client-renamed" }, "Named otherwise here, since the hosts cannot take the name: ",
          ...client.renamed.flatMap((r, i) => [
            i === 0 ? "" : "; ",
            el("code", {}, inlineText(r.server, 80)), " is ", el("code", {}, inlineText(r.here, 80))]),
          ".")]
      : []),
    pre);
}

/** "Agents": make an agent's own token (shown once, with its snippets), list them, revoke. */
class AgentTokens {
  readonly root: HTMLElement;
  private readonly nameInput: HTMLInputElement;
  private readonly createButton = el("button", { class: "button primary small", attrs: { type: "submit" } }, "Create token");
  private readonly createStatus = el("p", { class: "muted", attrs: { role: "status" } });
  /** The token just made, with its snippets; emptied by Done (and then gone for good). */
  private readonly created = el("div", { class: "agent-created" });
  private readonly list = el("div", { class: "agent-list" });
  private readonly listStatus = el("p", { class: "muted", attrs: { role: "status" } });

  constructor() {
    const headingId = uid("agents");
    const inputId = uid("agent-name");
    this.nameInput = el("input", {
      id: inputId,
      attrs: { type: "text", maxlength: 64, autocomplete: "off", spellcheck: "false", placeholder: "Claude Code, Cursor, …" },
    }) as HTMLInputElement;
    const form = el("form", { class: "agent-create actions start" },
      el("label", { attrs: { for: inputId } }, "Agent name"), this.nameInput, this.createButton);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      void this.create();
    });
    this.root = el("section", { class: "detail-section", attrs: { "aria-labelledby": headingId } },
      el("h3", { id: headingId }, "Agents"),
      el("p", { class: "muted" },
        "Each agent gets its own token, so Countersign knows which agent is asking whatever name the agent ",
        "gives itself, and you can cut one off without touching the others. Name the agent, create its token, ",
        "and paste the snippet for it into its config."),
      el("p", { class: "muted agent-move" },
        "Agents set up earlier use the shared token and keep working. To move one to its own token: create ",
        "a token for it here, paste its new snippet in place of the old entries, and once no agent uses the ",
        "shared token any more, revoke the shared token."),
      form,
      this.createStatus,
      this.created,
      this.list,
      this.listStatus);
  }

  update(agents: AgentView[]): void {
    const rows = agents.map((agent) => this.row(agent));
    replace(this.list, agents.length === 0
      ? el("p", { class: "muted" }, "No agent has a token: none can reach your servers through Countersign.")
      : el("ul", { class: "agent-tokens" }, ...rows));
  }

  private row(agent: AgentView): HTMLElement {
    const nameId = uid("agent-row");
    const when = agent.shared
      ? "made before agents had their own"
      : agent.createdMs !== null ? `created ${dateTime(agent.createdMs)}` : "";
    const used = agent.lastUsedMs !== null
      ? `last used ${dateTime(agent.lastUsedMs)}`
      : "not used since Countersign started";
    const status = el("span", { class: "muted", attrs: { role: "status" } });
    const revoke = el("button", {
      class: "button small",
      attrs: { type: "button", "aria-describedby": nameId },
    }, "Revoke");
    const line = el("li", { class: "agent-token" },
      el("span", { id: nameId, class: "server-item-name" }, inlineText(agent.name, 80)), " ",
      el("span", { class: "muted" }, `(${when}; ${used})`), " ",
      revoke, " ", status);
    revoke.addEventListener("click", () => this.confirmRevoke(agent, line, revoke, status));
    return line;
  }

  /** Revoking cuts an agent off at once: the person says so twice. */
  private confirmRevoke(agent: AgentView, line: HTMLElement, revoke: HTMLButtonElement, status: HTMLElement): void {
    revoke.disabled = true;
    const yes = el("button", { class: "button small", attrs: { type: "button" } }, "Revoke token");
    const keep = el("button", { class: "button small", attrs: { type: "button" } }, "Keep");
    const ask = el("span", { class: "agent-confirm", attrs: { role: "group", "aria-label": "Confirm revoke" } },
      "Revoke ", inlineText(agent.name, 80), "? ",
      agent.shared
        ? "Every agent still using the shared token is refused from its next request."
        : "This agent is refused from its next request.", " ",
      yes, " ", keep);
    keep.addEventListener("click", () => {
      ask.remove();
      revoke.disabled = false;
      revoke.focus();
    });
    yes.addEventListener("click", () => {
      yes.disabled = true;
      keep.disabled = true;
      commands.revokeAgent(agent.id).then(
        (agents) => {
          this.update(agents);
          this.listStatus.textContent = "";
          append(this.listStatus, "Revoked ", inlineText(agent.name, 80), ".");
        },
        (error: unknown) => {
          ask.remove();
          revoke.disabled = false;
          status.textContent = "";
          append(status, el("span", { class: "error-text" }, "Could not revoke: ", inlineText(errorText(error), 400)));
        },
      );
    });
    append(line, ask);
    keep.focus();
  }

  private async create(): Promise<void> {
    const name = this.nameInput.value.trim();
    if (name === "") {
      this.createStatus.textContent = "Give the agent a name first.";
      this.nameInput.focus();
      return;
    }
    this.createButton.disabled = true;
    this.createStatus.textContent = "Creating…";
    let made: CreatedAgent;
    try {
      made = await commands.createAgent(name);
    } catch (error) {
      this.createStatus.textContent = "";
      append(this.createStatus, el("span", { class: "error-text" }, "Could not create the token: ", inlineText(errorText(error), 400)));
      return;
    } finally {
      this.createButton.disabled = false;
    }
    this.createStatus.textContent = "";
    this.nameInput.value = "";
    this.showCreated(made);
    commands.listAgents().then((agents) => this.update(agents), () => {});
  }

  private showCreated(made: CreatedAgent): void {
    const headingId = uid("agent-created");
    const tokenCode = el("pre", { class: "output snippet agent-token-value", attrs: { tabindex: "0", dir: "ltr", "aria-label": "The new token" } });
    append(tokenCode, visibleText(made.token));
    const copyStatus = el("span", { class: "muted copy-status", attrs: { role: "status" } });
    const copy = el("button", {
      class: "button small",
      attrs: { type: "button" },
      on: { click: () => void copySnippet(made.token, tokenCode, copyStatus) },
    }, "Copy token");
    const done = el("button", { class: "button small", attrs: { type: "button" } }, "Done");
    done.addEventListener("click", () => {
      replace(this.created);
      this.nameInput.focus();
    });
    const heading = el("h4", { id: headingId, attrs: { tabindex: "-1" } }, "Token for ", inlineText(made.agent.name, 80));
    replace(this.created, el("article", { class: "client agent-new", attrs: { "aria-labelledby": headingId } },
      el("div", { class: "section-head" }, heading, copy, copyStatus),
      el("p", { class: "warn-note" },
        "This is the only time Countersign shows this token: you will not see it again. Copy it, or a ",
        "snippet below, now. It grants access to every configured server: keep it out of shared files ",
        "and repositories."),
      tokenCode,
      made.clients.length === 0
        ? el("p", { class: "muted" }, "No agent setups to show.")
        : el("div", { class: "clients" }, ...made.clients.map(clientCard)),
      el("div", { class: "actions start" }, done)));
    heading.focus();
  }
}

/** Requests the gateway refused lately: an agent host says only "Failed to connect", so this is
 * where the person learns which client it was, when, what was wrong and what to do. The client
 * name and path are whatever the request said (untrusted, shown as text). */
function refusalsSection(refusals: GatewayRefusal[]): HTMLElement {
  const headingId = uid("refusals");
  const section = el("section", { class: "detail-section refusals", attrs: { "aria-labelledby": headingId } },
    el("h3", { id: headingId }, "Refused connections"));
  if (refusals.length === 0) {
    append(section, el("p", { class: "empty-state" }, "None since Countersign started."));
    return section;
  }
  append(section,
    el("p", { class: "muted" }, "The newest first. An agent that cannot connect usually says only “Failed to connect”; this is why."),
    el("ul", { class: "refusal-list" }, ...refusals.map((r) => el("li", {},
      el("span", { class: "refusal-when muted" }, dateTime(r.atMs)), " ",
      el("code", { class: "refusal-status" }, String(r.status)), " ",
      el("span", { class: "refusal-client" }, r.client === null ? "a client that gave no name" : inlineText(r.client, 120)),
      " → ", el("code", {}, inlineText(r.path, 120)),
      el("div", { class: "refusal-reason" }, inlineText(r.reason, 300))))));
  return section;
}

/** "Import from your agents": one card per agent host's config file. */
class AgentImports {
  readonly root: HTMLElement;
  private readonly body = el("div", { class: "clients agent-files" });
  private readonly cards = new Map<string, AgentCard>();
  private generation = 0;

  constructor() {
    const headingId = uid("agent-imports");
    this.root = el("section", { class: "detail-section agent-imports", attrs: { "aria-labelledby": headingId } },
      el("h3", { id: headingId }, "Import from your agents"),
      el("p", { class: "muted" },
        "Countersign can add the servers your agents already use to its own config, and rewrite an agent's ",
        "config so that it reaches them through Countersign. You see every change before anything is written, ",
        "and each write keeps a backup."),
      this.body);
  }

  /** Reads the files and the recorded rewrites; redraws the cards only when there are none yet
   * (an open preview or a result in a card stays). */
  async reload(): Promise<void> {
    const generation = ++this.generation;
    let configs: AgentConfigs;
    try {
      configs = await commands.agentConfigs();
    } catch (error) {
      if (generation !== this.generation) return;
      this.cards.clear();
      replace(this.body, el("p", { class: "error-text", attrs: { role: "alert" } },
        "Could not look for your agents' config files: ", inlineText(errorText(error), 400)));
      return;
    }
    if (generation !== this.generation) return;
    const known = configs.files.every((f) => this.cards.has(f.client)) && this.cards.size === configs.files.length;
    if (!known) {
      this.cards.clear();
      for (const file of configs.files) {
        this.cards.set(file.client, new AgentCard(file, () => void this.reload()));
      }
      replace(this.body, ...[...this.cards.values()].map((c) => c.root));
    }
    for (const file of configs.files) {
      const card = this.cards.get(file.client);
      card?.update(file, configs.rewrites.filter((r) => r.client === file.client), configs.rewritesError);
    }
  }
}

/** One agent host's file: Import servers…, Route through Countersign…, earlier rewrites. */
class AgentCard {
  readonly root: HTMLElement;
  private readonly where = el("p", { class: "muted client-where" });
  private readonly importButton = el("button", { class: "button small", attrs: { type: "button" } }, "Import servers…");
  private readonly routeButton = el("button", { class: "button small", attrs: { type: "button" } }, "Route through Countersign…");
  /** The host's own check of its servers (`claude mcp list`, ...), when its tool is installed. */
  private readonly checkButton = el("button", { class: "button small", attrs: { type: "button", hidden: true } }, "Test connection");
  private readonly checkOut = el("div", { class: "agent-check" });
  /** The open preview or the last result. */
  private readonly flow = el("div", { class: "agent-flow" });
  private readonly earlier = el("div", { class: "agent-rewrites" });
  /** The rewrite whose result (with its Undo) is shown in `flow`, so it is not listed twice. */
  private shownRewrite: string | null = null;
  private rewrites: RewriteView[] = [];

  constructor(private file: AgentFile, private readonly changed: () => void) {
    const headingId = uid("agent-file");
    this.importButton.addEventListener("click", () => void this.previewImport());
    this.routeButton.addEventListener("click", () => void this.previewRewrite());
    this.checkButton.addEventListener("click", () => void this.check());
    this.root = el("article", { class: "client agent-file", attrs: { "aria-labelledby": headingId } },
      el("div", { class: "section-head" }, el("h4", { id: headingId }, file.title)),
      this.where,
      el("div", { class: "actions start" }, this.importButton, this.routeButton, this.checkButton),
      this.checkOut,
      this.flow,
      this.earlier);
  }

  /** Runs the host's own check and shows what it printed, as text. */
  private async check(): Promise<void> {
    const command = this.file.check;
    if (!command) return;
    this.checkButton.disabled = true;
    replace(this.checkOut, el("p", { class: "muted", attrs: { role: "status" } }, "Running ", el("code", {}, command), "…"));
    try {
      const result = await commands.checkAgentHost(this.file.client);
      const seconds = (result.tookMs / 1000).toFixed(1);
      const verdict = result.timedOut
        ? `stopped after ${seconds} s: it did not finish`
        : result.exitCode === 0 ? `finished in ${seconds} s`
        : result.exitCode === null ? `ended without an exit code after ${seconds} s`
        : `failed (exit code ${result.exitCode}) after ${seconds} s`;
      replace(this.checkOut,
        el("p", { attrs: { role: "status" } }, el("code", {}, inlineText(result.command, 100)), ` ${verdict}. What ${this.file.title} says:`),
        el("pre", { class: "output agent-check-output" }, visibleText(result.output.trim() === "" ? "(nothing)" : result.output)));
    } catch (error) {
      replace(this.checkOut, el("p", { class: "error-text", attrs: { role: "alert" } }, "Could not test the connection: ", inlineText(errorText(error), 600)));
    } finally {
      this.checkButton.disabled = false;
    }
  }

  update(file: AgentFile, rewrites: RewriteView[], rewritesError: string | null): void {
    this.file = file;
    this.rewrites = rewrites;
    replace(this.where, el("code", {}, inlineText(file.path, 300)), file.found ? "" : " (not found)");
    this.importButton.disabled = !file.found;
    this.routeButton.disabled = !file.found;
    this.checkButton.hidden = !file.check;
    if (file.check) this.checkButton.title = `Runs ${file.check}: ${file.title}'s own check of its MCP servers`;
    this.drawEarlier(rewritesError);
  }

  private drawEarlier(rewritesError: string | null): void {
    const listed = this.rewrites.filter((r) => r.id !== this.shownRewrite);
    if (rewritesError) {
      replace(this.earlier, el("p", { class: "error-text" }, "Earlier rewrites cannot be listed: ", inlineText(rewritesError, 400)));
      return;
    }
    if (listed.length === 0) {
      replace(this.earlier);
      return;
    }
    replace(this.earlier,
      el("p", { class: "agent-rewrites-title" }, "Rewritten by Countersign:"),
      el("ul", { class: "rewrite-list" }, ...listed.map((r) => {
        const status = el("span", { class: "muted", attrs: { role: "status" } });
        const line = el("li", {},
          `${dateTime(r.atMs)}, backup `, el("code", {}, inlineText(r.backupPath, 300)),
          r.changedSince ? el("span", { class: "muted" }, " (the file has changed since)") : "",
          r.backupFound ? "" : el("span", { class: "error-text" }, " (the backup is gone)"),
          " ");
        const undo = el("button", { class: "button small", attrs: { type: "button" } }, "Undo");
        undo.addEventListener("click", () => void this.undo(r.id, false, status, undo));
        append(line, undo, " ", status);
        return line;
      })));
  }

  private busy(on: boolean): void {
    this.importButton.disabled = on || !this.file.found;
    this.routeButton.disabled = on || !this.file.found;
  }

  private showError(prefix: string, error: unknown): void {
    replace(this.flow, el("p", { class: "error-text", attrs: { role: "alert" } }, prefix, inlineText(errorText(error), 600)));
  }

  private async previewImport(): Promise<void> {
    this.busy(true);
    replace(this.flow, el("p", { class: "muted", attrs: { role: "status" } }, "Reading ", inlineText(this.file.path, 300), "…"));
    let preview: ImportPreview;
    try {
      preview = await commands.previewImport(this.file.client);
    } catch (error) {
      this.showError("Could not read the servers: ", error);
      return;
    } finally {
      this.busy(false);
    }
    this.drawImport(preview);
  }

  private drawImport(preview: ImportPreview): void {
    const close = el("button", { class: "button small", attrs: { type: "button" } }, "Cancel");
    close.addEventListener("click", () => replace(this.flow));
    if (preview.candidates.length === 0) {
      close.textContent = "Close";
      replace(this.flow, el("div", { class: "agent-preview" },
        el("p", {}, "No servers in ", el("code", {}, inlineText(preview.path, 300)), "."),
        ...preview.notes.map((n) => el("p", { class: "muted" }, inlineText(n))),
        el("div", { class: "actions start" }, close)));
      return;
    }
    const boxes: { box: HTMLInputElement; candidate: ImportCandidate }[] = [];
    const go = el("button", { class: "button primary small", attrs: { type: "button" } });
    const status = el("p", { class: "muted", attrs: { role: "status" } });
    const count = () => boxes.filter((b) => b.box.checked).length;
    const label = () => {
      const n = count();
      go.textContent = `Import ${plural(n, "server", "servers")}`;
      go.disabled = n === 0;
    };
    const rows = preview.candidates.map((candidate) => {
      const where = candidate.project === null ? "" : ` (for the project ${candidate.project})`;
      const box = el("input", { attrs: { type: "checkbox", "aria-label": shortText(`Import ${candidate.name}${where}`, 300) } }) as HTMLInputElement;
      const importable = candidate.importAs !== null;
      // A project's server runs from the project's folder, often its own code (a cloned
      // repository's settings can name it): imported only when the person ticks it.
      box.checked = importable && candidate.project === null;
      box.disabled = !importable;
      box.addEventListener("change", label);
      boxes.push({ box, candidate });
      return el("tr", {},
        el("td", {}, box),
        el("th", { attrs: { scope: "row" } }, inlineText(candidate.name, 80),
          // Claude Code's per-project (`local` scope) servers say which project.
          candidate.project === null ? null
            : el("div", { class: "muted candidate-project" }, "project ", el("code", {}, inlineText(candidate.project, 200)),
              ": runs in that folder; tick it only if you trust what is there")),
        // What an import starts at once, with its directory and environment: all of it can be read.
        el("td", {}, clippedText(candidate.transport, { tag: "div", chars: 300, lines: 4, class: "mono candidate-transport" })),
        el("td", {}, ...candidateState(candidate)));
    });
    label();
    go.addEventListener("click", () => {
      const names = boxes.filter((b) => b.box.checked).map((b) => b.candidate.key);
      go.disabled = true;
      close.disabled = true;
      status.textContent = "Importing…";
      commands.importServers(preview.plan, names).then(
        (result) => this.imported(result),
        (error: unknown) => {
          status.textContent = "";
          append(status, el("span", { class: "error-text" }, "Could not import: ", inlineText(errorText(error), 600)));
          close.disabled = false;
          label();
        },
      );
    });
    replace(this.flow, el("div", { class: "agent-preview" },
      el("table", { class: "history-table import-table" },
        el("caption", {}, "Servers in ", el("code", {}, inlineText(preview.path, 300))),
        el("thead", {}, el("tr", {},
          el("th", { attrs: { scope: "col" } }, "Import"),
          el("th", { attrs: { scope: "col" } }, "Server"),
          el("th", { attrs: { scope: "col" } }, "Runs"),
          el("th", { attrs: { scope: "col" } }, "In Countersign"))),
        el("tbody", {}, ...rows)),
      ...preview.notes.map((n) => el("p", { class: "muted" }, inlineText(n))),
      el("p", { class: "muted" }, "Chosen servers are added to ", el("code", {}, inlineText(preview.configPath, 300)),
        "; a copy of it is kept first."),
      el("div", { class: "actions start" }, go, close),
      status));
  }

  private imported(result: ImportResult): void {
    const line = el("p", { class: "agent-result", attrs: { role: "status", tabindex: "-1" } });
    if (result.imported.length === 0) {
      append(line, "Nothing was imported.");
    } else {
      append(line, `Imported ${plural(result.imported.length, "server", "servers")} into `,
        el("code", {}, inlineText(result.configPath, 300)), "; Countersign starts them now (see Servers).");
    }
    const details: HTMLElement[] = [];
    const renamed = result.imported.filter((s) => s.importAs !== s.name);
    if (renamed.length > 0) {
      details.push(el("p", { class: "muted" }, "Renamed: ",
        ...renamed.flatMap((s, i) => [i > 0 ? ", " : "", inlineText(s.name, 80), " as ", inlineText(s.importAs, 100)])));
    }
    for (const s of result.skipped) {
      details.push(el("p", { class: "muted" }, "Not imported: ", inlineText(s.name, 80), " (", inlineText(s.reason, 300), ")"));
    }
    if (result.backupPath) {
      details.push(el("p", { class: "muted" }, "The config as it was is kept as ", el("code", {}, inlineText(result.backupPath, 300)), "."));
    }
    replace(this.flow, line, ...details);
    line.focus();
  }

  private async previewRewrite(): Promise<void> {
    this.busy(true);
    replace(this.flow, el("p", { class: "muted", attrs: { role: "status" } }, "Reading ", inlineText(this.file.path, 300), "…"));
    let preview: RewritePreview;
    try {
      preview = await commands.previewRewrite(this.file.client);
    } catch (error) {
      this.showError("Could not prepare the rewrite: ", error);
      return;
    } finally {
      this.busy(false);
    }
    this.drawRewrite(preview);
  }

  private drawRewrite(preview: RewritePreview): void {
    const close = el("button", { class: "button small", attrs: { type: "button" } }, "Cancel");
    close.addEventListener("click", () => replace(this.flow));
    const kept = preview.kept.length === 0 ? [] : [
      el("p", {}, "Left as they are:"),
      el("ul", { class: "route-kept" }, ...preview.kept.map((k) =>
        el("li", {}, inlineText(k.name, 80), ": ", inlineText(k.reason, 300)))),
    ];
    const plan = preview.plan;
    if (plan === null || preview.changes.length === 0) {
      close.textContent = "Close";
      replace(this.flow, el("div", { class: "agent-preview" },
        el("p", {}, "Nothing in ", el("code", {}, inlineText(preview.path, 300)),
          " can be routed through Countersign now."),
        ...kept,
        el("div", { class: "actions start" }, close)));
      return;
    }
    const pre = el("pre", {
      class: "output snippet new-text",
      attrs: { tabindex: "0", dir: "ltr", "aria-label": `New text of ${preview.path}` },
    });
    append(pre, visibleText(preview.newText));
    const go = el("button", { class: "button primary small", attrs: { type: "button" } }, `Rewrite ${preview.path}`);
    const status = el("p", { class: "muted", attrs: { role: "status" } });
    go.addEventListener("click", () => {
      go.disabled = true;
      close.disabled = true;
      status.textContent = "Writing…";
      commands.rewriteAgentConfig(plan).then(
        (result) => {
          this.shownRewrite = result.rewrite.id;
          const undoStatus = el("span", { class: "muted", attrs: { role: "status" } });
          const undo = el("button", { class: "button small", attrs: { type: "button" } }, "Undo");
          undo.addEventListener("click", () => void this.undo(result.rewrite.id, false, undoStatus, undo));
          const line = el("p", { class: "agent-result", attrs: { role: "status", tabindex: "-1" } },
            "Rewrote ", el("code", {}, inlineText(result.rewrite.path, 300)), `: ${plural(result.routed, "server goes", "servers go")} `,
            `through Countersign. Restart ${preview.title} to use it.`);
          replace(this.flow, line,
            el("p", { class: "muted" }, "The file as it was is kept as ", el("code", {}, inlineText(result.rewrite.backupPath, 300)), "."),
            el("div", { class: "actions start" }, undo, undoStatus));
          line.focus();
          this.changed();
        },
        (error: unknown) => {
          status.textContent = "";
          append(status, el("span", { class: "error-text" }, "Could not rewrite: ", inlineText(errorText(error), 600)));
          close.disabled = false;
          // A changed file needs a new preview; anything else may be tried again.
          go.disabled = asAppError(error)?.kind === "changedOnDisk";
        },
      );
    });
    replace(this.flow, el("div", { class: "agent-preview" },
      el("p", {}, "These entries will reach their servers through Countersign:"),
      el("ul", { class: "route-changes" }, ...preview.changes.map((c) => el("li", {},
        inlineText(c.name, 80),
        c.server !== c.name ? el("span", {}, " (Countersign's ", inlineText(c.server, 80), ")") : "",
        ": ", clippedText(c.from, { tag: "div", chars: 300, lines: 4, class: "mono change-from" }),
        " → ", clippedText(c.to, { tag: "div", chars: 300, lines: 4, class: "mono change-to" }),
        c.note ? el("span", { class: "muted" }, " (", inlineText(c.note, 200), ")") : ""))),
      ...kept,
      ...preview.warnings.map((w) => el("p", { class: "warn-note" }, inlineText(w, 400))),
      el("p", {}, "New text of ", el("code", {}, inlineText(preview.path, 300)), ":"),
      pre,
      el("p", { class: "muted" }, "Before writing, the current file is copied to ",
        el("code", {}, inlineText(preview.backupPath, 300)), "."),
      el("div", { class: "actions start" }, go, close),
      status));
  }

  /** Undoes rewrite `id`; when the file changed since, says so and offers "Undo anyway". */
  private async undo(id: string, force: boolean, status: HTMLElement, button: HTMLButtonElement): Promise<void> {
    button.disabled = true;
    status.textContent = "Restoring…";
    try {
      const result = await commands.undoRewrite(id, force);
      if (this.shownRewrite === id) this.shownRewrite = null;
      const n = result.entriesOnly;
      const line = n === null
        ? el("p", { class: "agent-result", attrs: { role: "status", tabindex: "-1" } },
          "Restored ", el("code", {}, inlineText(result.path, 300)), " from ", el("code", {}, inlineText(result.restoredFrom, 300)),
          `. Restart ${this.file.title} to use it.`)
        // The host changed the rest of the file since: only Countersign's entries went back.
        : el("p", { class: "agent-result", attrs: { role: "status", tabindex: "-1" } },
          `Put back the ${plural(n, "entry", "entries")} Countersign had changed in `, el("code", {}, inlineText(result.path, 300)),
          ", as in ", el("code", {}, inlineText(result.restoredFrom, 300)),
          `; the rest of the file, changed since, is kept as it is. Restart ${this.file.title} to use it.`);
      replace(this.flow, line,
        result.keptAs ? el("p", { class: "muted" }, "The file as it was before the undo is kept as ",
          el("code", {}, inlineText(result.keptAs, 300)), ".") : "");
      line.focus();
      this.changed();
    } catch (error) {
      status.textContent = "";
      append(status, el("span", { class: "error-text" }, inlineText(errorText(error), 600)));
      if (asAppError(error)?.kind === "changedOnDisk" && !force) {
        const anyway = el("button", { class: "button small", attrs: { type: "button" } }, "Undo anyway");
        anyway.addEventListener("click", () => {
          anyway.remove();
          void this.undo(id, true, status, button);
        });
        append(status, " ", anyway);
      } else {
        button.disabled = false;
      }
    }
  }
}

/** What the import does with one server, in words. */
function candidateState(c: ImportCandidate): (Node | string)[] {
  const parts: (Node | string)[] = [];
  switch (c.status) {
    case "new":
      parts.push("New");
      break;
    case "renamed":
      parts.push("Name taken: will be imported as ", inlineText(c.importAs ?? "", 100));
      break;
    case "alreadyThere":
      parts.push("Already there");
      break;
    case "routed":
      parts.push("Already routed through Countersign");
      break;
    case "skipped":
      parts.push("Skipped");
      break;
  }
  if (c.note && c.status !== "routed") parts.push(el("span", { class: "muted" }, " (", inlineText(c.note, 300), ")"));
  for (const w of c.warnings) parts.push(el("span", { class: "warn-text" }, inlineText(w, 300)));
  return parts;
}

/** Copies through the clipboard API; where that is refused, selects the text for Ctrl+C. */
async function copySnippet(text: string, pre: HTMLElement, status: HTMLElement): Promise<void> {
  try {
    if (!navigator.clipboard) throw new Error("no clipboard");
    await navigator.clipboard.writeText(text);
    status.textContent = "Copied.";
  } catch {
    pre.focus();
    const range = document.createRange();
    range.selectNodeContents(pre);
    const selection = window.getSelection();
    selection?.removeAllRanges();
    selection?.addRange(range);
    status.textContent = "Could not copy: the text is selected, press Ctrl+C.";
  }
}
