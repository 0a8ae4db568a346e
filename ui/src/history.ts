//! The History view: every ask from the audit log with its outcome, newest first, the
//! requests Countersign refused (e.g. a schema outside the supported subset), and the agents'
//! tool calls the gateway's policy decided without asking, each with what decided it (a rule,
//! a remembered decision: `why`, written by the backend). Read on demand with
//! `history`; nothing is kept here between loads.

import type { History } from "./bindings/History";
import type { Verification } from "./bindings/Verification";
import type { HistoryEntry } from "./bindings/HistoryEntry";
import type { ToolCallAsk } from "./ask/toolcall";
import { el, append, replace } from "./dom";
import { commands, errorText } from "./ipc";
import { dateTime, outcomeText, plural } from "./format";
import { inlineText, shortText } from "./untrusted";

export class HistoryPane {
  readonly root: HTMLElement;
  private readonly content = el("div", { class: "history-content" });
  private readonly status = el("p", { class: "muted", attrs: { role: "status" } });
  private readonly verdict = el("p", { class: "history-verdict", attrs: { role: "status" } });

  constructor(
    private readonly load: () => Promise<History> = commands.history,
    private readonly verifyLog: () => Promise<Verification> = commands.verifyAudit,
  ) {
    const refresh = el("button", {
      class: "button small",
      attrs: { type: "button" },
      on: { click: () => void this.reload() },
    }, "Refresh");
    const verify = el("button", {
      class: "button small",
      attrs: { type: "button", title: "Check that no record of the audit log was changed, removed or moved" },
      on: { click: () => void this.verify() },
    }, "Verify");
    this.root = el("div", { class: "history" },
      el("div", { class: "section-head" }, el("h2", {}, "History"), verify, refresh),
      this.verdict,
      this.status,
      this.content);
  }

  /** Checks the audit log's hash chain and says what it found. */
  async verify(): Promise<void> {
    this.verdict.className = "history-verdict muted";
    this.verdict.textContent = "Checking the audit log…";
    let result: Verification;
    try {
      result = await this.verifyLog();
    } catch (error) {
      this.verdict.className = "history-verdict error";
      this.verdict.textContent = `Could not check the audit log: ${errorText(error)}`;
      return;
    }
    this.verdict.className = `history-verdict ${result.problem === null ? "ok" : "error"}`;
    this.verdict.textContent = verdictText(result);
  }

  async reload(): Promise<void> {
    this.status.textContent = "Loading…";
    let history: History;
    try {
      history = await this.load();
    } catch (error) {
      this.status.textContent = `Could not read the history: ${errorText(error)}`;
      return;
    }
    this.status.textContent = [
      history.skipped > 0 ? `${plural(history.skipped, "line", "lines")} of the log could not be read.` : "",
      history.older ? "Only the newest part of the log is shown." : "",
    ].filter((t) => t !== "").join(" ");
    const asks = [...history.asks].sort((a, b) => b.ask.receivedAtMs - a.ask.receivedAtMs);
    const refused = [...history.refused].sort((a, b) => b.atMs - a.atMs);

    const asksBlock = asks.length === 0
      ? el("p", { class: "muted" }, "No questions yet.")
      : el("table", { class: "history-table" },
          el("caption", {}, "Questions, newest first"),
          el("thead", {}, el("tr", {},
            ...["Received", "Server", "Question", "Outcome", "Closed"].map((h) => el("th", { attrs: { scope: "col" } }, h)))),
          el("tbody", {}, ...asks.map(row)));
    const refusedBlock = refused.length === 0
      ? null
      : el("table", { class: "history-table" },
          el("caption", {}, "Refused requests"),
          el("thead", {}, el("tr", {},
            ...["When", "Server", "Reason"].map((h) => el("th", { attrs: { scope: "col" } }, h)))),
          el("tbody", {}, ...refused.map((r) => el("tr", {},
            el("td", { class: "nowrap" }, dateTime(r.atMs)),
            el("td", {}, inlineText(r.server, 60)),
            el("td", {}, inlineText(r.reason, 400),
              r.unrecorded > 0
                ? el("span", { class: "muted" }, ` (and ${r.unrecorded} more from this server before it, counted but not written)`)
                : null)))));
    const gated = [...history.gated].sort((a, b) => b.atMs - a.atMs);
    const gatedBlock = gated.length === 0
      ? null
      : el("table", { class: "history-table" },
          el("caption", {}, "Agents' tool calls decided without asking you"),
          el("thead", {}, el("tr", {},
            ...["When", "Agent", "Server", "Tool", "Decision", "Because"].map((h) => el("th", { attrs: { scope: "col" } }, h)))),
          el("tbody", {}, ...gated.map((g) => el("tr", {},
            el("td", { class: "nowrap" }, dateTime(g.atMs)),
            el("td", {}, g.agent === null ? "an unnamed agent" : inlineText(g.agent, 60)),
            el("td", {}, inlineText(g.server, 60)),
            // Past its budget an agent's calls are counted by kind, not written one by one.
            g.others
              ? el("td", { class: "muted" }, "other tools and requests")
              : el("td", {}, inlineText(g.tool, 80)),
            el("td", {}, (g.others ? "Allowed or refused" : g.allowed ? "Allowed" : "Refused")
              + (g.count > 1 ? `, ${g.count} calls up to then` : "")),
            el("td", {}, g.others
              ? "more kinds of calls and requests than are counted apart, counted together"
              : inlineText(g.why, 200))))));
    replace(this.content, asksBlock, refusedBlock, gatedBlock);
  }
}

function row(entry: HistoryEntry): HTMLTableRowElement {
  const { ask } = entry;
  const server = el("td", {}, inlineText(ask.asker.server, 60));
  if (ask.asker.agent) {
    const declared = ask.asker.declared ?? null;
    append(server, el("div", { class: "muted" }, "for ", inlineText(ask.asker.agent, 60),
      declared !== null && declared !== "" && declared !== ask.asker.agent
        ? el("span", {}, " (calls itself ", inlineText(declared, 60), ")")
        : null));
  }
  const question = el("td", { class: "history-question" });
  if (ask.kind === "toolCall") {
    append(question, "Run ", el("code", {}, inlineText(ask.tool, 120)));
    if (ask.title) append(question, " ", el("span", { class: "muted" }, inlineText(ask.title, 120)));
    const args = argumentsLine(ask);
    if (args !== null) append(question, el("div", { class: "muted mono" }, inlineText(args, 200)));
  } else if (ask.kind === "sampling") {
    append(question, "Have the agent's model reply");
    const last = ask.messages[ask.messages.length - 1];
    if (last) append(question, el("div", { class: "muted" }, inlineText(last.text, 200)));
  } else {
    append(question, inlineText(ask.message, 200));
    if (ask.kind === "url") append(question, el("div", { class: "muted" }, "Open ", inlineText(shortText(ask.url, 200))));
  }
  // Text from backend values and, for a remembered decision, the agent's arguments: as text.
  const outcome = el("td", {}, inlineText(entry.interrupted
    ? "No answer: Countersign stopped before recording one, so none was sent"
    : outcomeText(entry.outcome, ask.kind), 300));
  if (entry.outcome?.outcome === "accepted" && entry.outcome.content !== null) {
    append(outcome, el("div", { class: "muted mono" }, inlineText(JSON.stringify(entry.outcome.content), 200)));
  }
  if (!entry.delivered) {
    if (ask.kind !== "toolCall" && personAnswered(entry.outcome)) {
      append(outcome, el("div", { class: "warn-text" },
        "Not on record as sent: Countersign stopped, or the server went away, first. The server may not have received it."));
    } else if (ask.kind === "toolCall" && allowed(entry.outcome)) {
      append(outcome, el("div", { class: "warn-text" },
        "Not on record as carried out: the call may not have run (Countersign stopped or the agent went away first, or the agent has not made the call again)."));
    }
  }
  return el("tr", {},
    el("td", { class: "nowrap" }, dateTime(ask.receivedAtMs)),
    server,
    question,
    outcome,
    el("td", { class: "nowrap" }, entry.resolvedAtMs === null ? "—" : dateTime(entry.resolvedAtMs)));
}

/** An answer the person gave, which goes back to the server (a withdrawal goes nowhere). */
function personAnswered(outcome: HistoryEntry["outcome"]): boolean {
  if (outcome === null) return false;
  return outcome.outcome === "accepted" || outcome.outcome === "declined"
    || (outcome.outcome === "cancelled" && outcome.reason === "person");
}

/** An agent's call the person let through. */
function allowed(outcome: HistoryEntry["outcome"]): boolean {
  if (outcome === null) return false;
  return outcome.outcome === "accepted" || outcome.outcome === "alwaysAllowed"
    || (outcome.outcome === "remembered" && outcome.decision.allow);
}

/** What checking the log found, in a sentence or two. */
export function verdictText(v: Verification): string {
  if (v.problem !== null) {
    const p = v.problem;
    return `The audit log was tampered with or damaged: ${p.message} (${p.file}, line ${p.line}). Records before it are intact.`;
  }
  let text = `The audit log is intact: ${plural(v.records, "record", "records")} in ${plural(v.files.length, "file", "files")}, each linked to the one before.`;
  if (v.unchained > 0) text += ` ${plural(v.unchained, "older record", "older records")} from before the chain began cannot be checked.`;
  if (v.startsAfterRotation) text += " Older files were rotated away.";
  return text;
}

/** A call's arguments on one line, or `null` when it had none. From the text that was forwarded
 * (`argumentsText`), so big integers read as sent; re-serializing the parsed `arguments` (JavaScript
 * numbers) is only for records written before that text was kept. */
function argumentsLine(ask: ToolCallAsk): string | null {
  if (ask.argumentsText) {
    const args = compactJson(ask.argumentsText);
    return ask.alsoSentText ? `${args}, also sent ${compactJson(ask.alsoSentText)}` : args;
  }
  const args = ask.arguments;
  if (args === undefined || args === null) return null;
  try {
    return JSON.stringify(args) ?? null;
  } catch {
    return null;
  }
}

/** JSON text without the whitespace between tokens; strings, numbers and key order untouched. */
export function compactJson(text: string): string {
  let out = "";
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      out += c;
      if (c === "\\") {
        i += 1;
        if (i < text.length) out += text[i];
      } else if (c === '"') {
        inString = false;
      }
    } else if (c === '"') {
      inString = true;
      out += c;
    } else if (c !== " " && c !== "\n" && c !== "\r" && c !== "\t") {
      out += c;
    }
  }
  return out;
}
