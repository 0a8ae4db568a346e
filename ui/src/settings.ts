//! The Settings view: start at login (off unless the person turns it on), how closing the window
//! behaves here, and the tool-call decisions the person chose to remember (allow or deny, for a
//! session, a time or always, for some or all of a tool's calls), each with its agent, scope,
//! last use and count of uses, each revocable. Per-server notification muting lives on each
//! server's page. Server, tool and argument text came from servers and agents: shown as text.

import type { AgentView } from "./bindings/AgentView";
import type { RememberedDecision } from "./bindings/RememberedDecision";
import type { Settings } from "./bindings/Settings";
import type { UnreadShown } from "./bindings/UnreadShown";
import { el, replace, uid } from "./dom";
import { commands, errorText } from "./ipc";
import { coveringText, dateTime, lastingText, plural } from "./format";
import { inlineText } from "./untrusted";

export class SettingsPane {
  readonly root: HTMLElement;
  private readonly body = el("div", { class: "settings-body" });
  private readonly allowedHeading = el("h3", { id: uid("remembered"), attrs: { tabindex: "-1" } }, "Remembered decisions");
  private readonly allowedList = el("div", { class: "allowed" });
  /** Remembered decisions this version cannot read, and the allows they hold back. */
  private readonly heldBack = el("div", { class: "held-back" });
  private readonly allowedStatus = el("p", { class: "muted", attrs: { role: "status" } });
  /** The agents' tokens, to tell apart two the person gave one name. */
  private agents: AgentView[] = [];

  constructor() {
    this.root = el("div", { class: "settings" },
      el("h2", {}, "Settings"),
      this.body,
      el("section", { class: "detail-section", attrs: { "aria-labelledby": this.allowedHeading.id } },
        this.allowedHeading,
        el("p", { class: "muted" },
          "Tool calls you chose to allow or deny without being asked (“Always allow”, “Remember…”). Each belongs to one agent and one tool as the server described it when you chose; revoke one to be asked again."),
        this.heldBack,
        this.allowedList,
        this.allowedStatus));
  }

  async reload(): Promise<void> {
    await Promise.all([this.loadDesktop(), this.loadAllowed()]);
  }

  private async loadDesktop(): Promise<void> {
    let info;
    try {
      info = await commands.desktopInfo();
    } catch (error) {
      replace(this.body, el("p", { class: "error-text" }, "Could not read the settings: ", inlineText(errorText(error), 400)));
      return;
    }
    const box = el("input", { id: "start-at-login", attrs: { type: "checkbox" } }) as HTMLInputElement;
    box.checked = info.startAtLogin;
    const status = el("span", { class: "muted", attrs: { role: "status" } });
    box.addEventListener("change", () => {
      const on = box.checked;
      box.disabled = true;
      commands.setStartAtLogin(on).then(
        () => (status.textContent = on ? " Countersign will start when you log in." : ""),
        (error: unknown) => {
          box.checked = !on;
          status.textContent = ` ${errorText(error)}`;
        },
      ).finally(() => (box.disabled = false));
    });
    replace(this.body,
      el("p", {}, box, el("label", { attrs: { for: "start-at-login" } }, "Start Countersign when I log in"), status),
      el("p", { class: "muted" }, info.tray
        ? "Closing the window keeps Countersign running in the tray; quit from the tray menu."
        : "No system tray was found: closing the window quits Countersign."));
  }

  private async loadAllowed(): Promise<void> {
    try {
      const [settings, agents] = await Promise.all([
        commands.getSettings(),
        // Only to tell tokens of one name apart: without it, the list still shows.
        commands.listAgents().catch(() => []),
      ]);
      this.agents = agents;
      this.drawHeldBack(settings);
      this.drawAllowed(settings.remembered);
    } catch (error) {
      replace(this.allowedList, el("p", { class: "error-text" },
        "Could not read the remembered decisions: ", inlineText(errorText(error), 400)));
    }
  }

  private drawAllowed(decisions: RememberedDecision[]): void {
    if (decisions.length === 0) {
      replace(this.allowedList, el("p", { class: "empty-state" }, "Nothing is remembered: every tool call that needs approval asks you."));
      return;
    }
    const whose = tokenNames(decisions, this.agents);
    replace(this.allowedList, el("ul", { class: "allowed-list" }, ...decisions.map((decision, index) => {
      const whatId = uid("remembered-what");
      const scopeId = uid("remembered-scope");
      const inert = inertLine(decision);
      const inertId = inert ? uid("remembered-inert") : null;
      const revoke = el("button", {
        class: "button small",
        attrs: { type: "button", "aria-describedby": [whatId, scopeId, inertId].filter(Boolean).join(" ") },
      }, "Revoke");
      revoke.addEventListener("click", () => this.revoke(decision, index, revoke));
      return el("li", { class: inert ? "inert" : undefined, attrs: { "data-id": decision.id } },
        el("div", { class: "remembered-text" },
          el("span", { id: whatId, class: "remembered-what" }, ...decisionSentence(decision, whose.get(decision.agent))),
          el("span", { id: scopeId, class: "remembered-scope muted" }, ...scopeLine(decision)),
          inert && inertId ? el("span", { id: inertId, class: "remembered-inert" }, ...inert) : null,
          el("span", { class: "remembered-use muted" }, useLine(decision))),
        revoke);
    })));
  }

  /** Says which servers' allows wait on decisions this version cannot read, with a way out. */
  private drawHeldBack(settings: Settings): void {
    const shown = settings.unreadShown ?? [];
    // Each server they name, once; "" for one that names none (every server).
    const servers = [...new Set(shown.map((d) => d.server ?? ""))];
    if (servers.length === 0) {
      replace(this.heldBack);
      return;
    }
    const textId = uid("held-back");
    const forget = el("button", { class: "button small", attrs: { type: "button", "aria-describedby": textId } }, "Forget them");
    forget.addEventListener("click", () => {
      forget.disabled = true;
      commands.forgetUnreadDecisions().then(
        (saved) => {
          this.drawHeldBack(saved);
          this.drawAllowed(saved.remembered);
          this.allowedStatus.textContent = "Forgotten: remembered and trusted allows run again.";
          this.allowedHeading.focus();
        },
        (error: unknown) => {
          forget.disabled = false;
          this.allowedStatus.textContent = `Could not forget them: ${errorText(error)}`;
        },
      );
    });
    const which = servers.includes("")
      ? ["any server"]
      : servers.flatMap((server, i) => [i === 0 ? "" : ", ", el("strong", {}, inlineText(server, 80))]);
    replace(this.heldBack, el("div", { class: "warn-note" },
      el("p", { id: textId },
        "Some remembered decisions cannot be read here (made by another version of Countersign, or kept in a file that could not be read); one may be a denial. Until you forget them, no remembered or trusted allow runs a tool call on ",
        ...which,
        " without asking you."),
      el("ul", { class: "unread-list", attrs: { "aria-label": "Decisions that cannot be read" } },
        ...shown.map((d) => el("li", {}, ...unreadSentence(d)))),
      forget));
  }

  private revoke(decision: RememberedDecision, index: number, button: HTMLButtonElement): void {
    button.disabled = true;
    commands.revokeDecision(decision.id).then(
      (settings) => {
        this.drawAllowed(settings.remembered);
        this.allowedStatus.textContent = "Revoked: the next such call asks you again.";
        // Keep keyboard focus in the list: the row now in the revoked one's place, else the heading.
        const buttons = this.allowedList.querySelectorAll<HTMLButtonElement>("button");
        (buttons[Math.min(index, buttons.length - 1)] ?? this.allowedHeading).focus();
      },
      (error: unknown) => {
        button.disabled = false;
        this.allowedStatus.textContent = `Could not revoke: ${errorText(error)}`;
      },
    );
  }
}

/** What can be told of a decision this version cannot read, as nodes of untrusted text: each
 * part it does not hold (or holds in a form not known here) is said to be unknown. */
function unreadSentence(d: UnreadShown): Node[] {
  if (d.lostIn) {
    return [
      document.createTextNode("Whatever was kept in "),
      el("code", {}, inlineText(d.lostIn, 200)),
      document.createTextNode(", which could not be read"),
    ];
  }
  const verb = d.allow === true ? " may run " : d.allow === false ? " may not run " : " may or may not run ";
  return [
    d.agentName ? inlineText(d.agentName, 80, "agent-name") : el("em", {}, "An unknown agent"),
    document.createTextNode(verb),
    d.tool ? el("code", {}, inlineText(d.tool, 120)) : el("em", {}, "an unknown tool"),
    document.createTextNode(" on "),
    d.server ? inlineText(d.server, 80, "server-name") : el("em", {}, "any server"),
  ];
}

/** For each token whose name another token also has (among these decisions or the agents),
 * what tells it apart: when it was created, as the Connect page shows it. */
function tokenNames(decisions: RememberedDecision[], agents: AgentView[]): Map<string, string> {
  const idsByName = new Map<string, Set<string>>();
  for (const { id, name } of [...decisions.map((d) => ({ id: d.agent, name: d.agentName })), ...agents]) {
    idsByName.set(name, (idsByName.get(name) ?? new Set()).add(id));
  }
  const told = new Map<string, string>();
  for (const d of decisions) {
    if ((idsByName.get(d.agentName)?.size ?? 0) < 2) continue;
    const created = agents.find((a) => a.id === d.agent)?.createdMs;
    told.set(d.agent, created == null ? "another token of that name" : `token created ${dateTime(created)}`);
  }
  return told;
}

/** "<agent> may run <tool> on <server>" (or "may not run"), as nodes of untrusted text; `token`
 * tells the agent's token from another of the same name. */
function decisionSentence(d: RememberedDecision, token?: string): Node[] {
  return [
    d.agentName ? inlineText(d.agentName, 80, "agent-name") : el("em", {}, "An agent with no name"),
    ...(token ? [el("span", { class: "muted" }, ` (${token})`)] : []),
    document.createTextNode(d.allow ? " may run " : " may not run "),
    el("code", {}, inlineText(d.tool, 120)),
    document.createTextNode(" on "),
    inlineText(d.server, 80, "server-name"),
  ];
}

/** "Allowed · always · any arguments". */
function scopeLine(d: RememberedDecision): Node[] {
  return [
    el("span", { class: d.allow ? "badge" : "badge badge-destructive" }, d.allow ? "Allowed" : "Denied"),
    document.createTextNode(` ${lastingText(d.lasting)} · `),
    inlineText(coveringText(d.covering), 200, "mono"),
  ];
}

/** "Last used <when>, 3 uses" / "Not used yet". */
/** Why a decision decides nothing now (its server is gone or is another one), or null. */
function inertLine(d: RememberedDecision): Node[] | null {
  const text = (s: string) => document.createTextNode(s);
  switch (d.inert) {
    case "serverChanged":
      return [text("Decides nothing now: "), inlineText(d.server, 80, "server-name"),
        text(" is configured differently since (another command, arguments, environment, directory, URL or headers). Its next such call asks you.")];
    case "serverGone":
      return [text("Decides nothing now: no server named "), inlineText(d.server, 80, "server-name"), text(" is configured.")];
    case "unbound":
      return [text("Decides nothing: it was made before Countersign tied each decision to the server it was made for, and no server of its name was configured to tie it to.")];
    default:
      return null;
  }
}

function useLine(d: RememberedDecision): string {
  const uses = plural(d.uses, "use", "uses");
  return d.lastUsedMs === null ? `Not used yet (${uses})` : `Last used ${dateTime(d.lastUsedMs)}, ${uses}`;
}
