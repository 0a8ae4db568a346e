//! Several tool calls at once: when more than one tool call from the same agent to the same server
//! waits, the person can decide them together. The batch view lists one line per call (the tool's
//! name and a one-line summary of its arguments, expandable to the full text), a checkbox per line
//! (none ticked at first), "Allow selected" (allows the ticked calls and denies every other call in
//! the list) and "Deny all". "Back" and Escape leave it without answering anything.
//!
//! Nothing is allowed that was not on the screen:
//! - A call that arrives while the list is open joins it unticked and marked as new, and the list
//!   re-arms: Allow selected works only 500 ms after the list last changed (arming.ts), so it never
//!   covers a line the person could not have seen, and never one they did not tick.
//! - A call withdrawn while the list is open leaves it at once and is never answered.
//! - A call whose arguments do not fit in the one line must be expanded (Show all) before its
//!   checkbox can be ticked, as Allow waits for "Show all" in the single dialog.
//! - A call whose tool changed since the person last decided about it is not offered here: what
//!   changed is shown only in its own dialog, so it is decided on its own.
//!
//! Grouped by agent and server, not by agent alone: a tool's name means something only on its
//! server (two servers may both have `delete_file`), the person may trust servers differently, and
//! "Decline all from <server>" already works per server; a yes that spans servers in one click
//! would be one the lines do not say enough about. An agent that gave no name is never batched:
//! nothing says its calls come from one agent.
//!
//! The view only gathers the person's choice; the dialog sends the answers (one per call).

import type { Answer } from "../bindings/Answer";
import type { Ask } from "../bindings/Ask";
import { el, append, replace, uid } from "../dom";
import { plural } from "../format";
import { inlineText, onceSeenToEnd, visibleText } from "../untrusted";
import type { Armable } from "./arming";
import { argumentsText, type ToolCallAsk } from "./toolcall";

/** Code points of the one-line argument summary; longer arguments must be expanded to be ticked. */
export const SUMMARY_CHARS = 100;

const ACCEPT: Answer = { action: "accept", content: null };
const DECLINE: Answer = { action: "decline" };

/** Who a batch is for: calls from this agent to this server. */
export interface BatchKey {
  /** The agent's token's id when known (two tokens may share a name), else its name. */
  agent: string;
  /** The agent's name, as the person gave it to its token: what the list says. */
  name: string;
  server: string;
}

/** The key of the batch `ask` may join, or null when it is decided on its own only. */
export function batchKey(ask: Ask): BatchKey | null {
  if (ask.kind !== "toolCall") return null;
  if (!ask.asker.agent) return null;
  if ((ask.changed ?? []).length > 0) return null;
  if (ask.serverChanged === true) return null;
  if (ask.unlisted === true) return null;
  return { agent: ask.asker.agentId ?? ask.asker.agent, name: ask.asker.agent, server: ask.asker.server };
}

export function sameKey(a: BatchKey | null, b: BatchKey | null): boolean {
  return a !== null && b !== null && a.agent === b.agent && a.server === b.server;
}

/** The arguments on one line: the forwarded text with its line breaks and indentation folded
 * (JSON strings hold no raw line breaks, so only layout is folded); empty when there are none. */
export function oneLine(text: string | null): string {
  if (text === null) return "";
  return text.replace(/\r?\n[ \t]*/g, " ").trim();
}

export interface BatchHost {
  /** The person's answers, one per call in the list at the moment of the click. */
  decide(batch: BatchView, answers: { id: number; answer: Answer }[]): void;
  /** The person left without answering (Back, Escape). */
  leave(batch: BatchView): void;
  /** Whether the press behind `event` may say yes (arming.ts). */
  mayAccept(batch: BatchView, event: Event): boolean;
  /** The list changed (a call came or went): arm it afresh. */
  changed(batch: BatchView): void;
}

interface Line {
  ask: ToolCallAsk;
  root: HTMLLIElement;
  box: HTMLInputElement;
  /** False while its arguments are clipped and have not been shown whole. */
  whole: boolean;
}

export class BatchView implements Armable {
  readonly key: BatchKey;
  readonly root: HTMLElement;
  readonly titleId = uid("batch-title");
  readonly messageId = uid("batch-message");
  busy = false;

  private readonly lines = new Map<number, Line>();
  private readonly list: HTMLUListElement;
  private readonly message: HTMLElement;
  private readonly tally: HTMLElement;
  private readonly allow: HTMLButtonElement;
  private readonly denyAll: HTMLButtonElement;
  private readonly back: HTMLButtonElement;
  private armed = false;

  constructor(key: BatchKey, asks: ToolCallAsk[], private readonly host: BatchHost) {
    this.key = key;
    this.message = el("p", { class: "ask-message batch-summary", id: this.messageId });
    this.list = el("ul", { class: "batch-list", attrs: { "aria-labelledby": this.titleId } });
    this.tally = el("p", { class: "field-hint batch-tally", attrs: { "aria-live": "polite" } });
    const allowNoteId = uid("batch-note");
    this.back = el("button", {
      class: "button",
      attrs: { type: "button", title: "Back to the questions, answering nothing (Escape)" },
      on: { click: () => this.host.leave(this) },
    }, "Back");
    this.denyAll = el("button", {
      class: "button",
      attrs: { type: "button" },
      on: { click: () => this.decide(false) },
    }, "Deny all");
    this.allow = el("button", {
      class: "button primary",
      attrs: { type: "button", "aria-describedby": allowNoteId },
      on: {
        click: (event) => {
          if (!this.acceptReady || !this.host.mayAccept(this, event)) {
            event.preventDefault();
            return;
          }
          this.decide(true);
        },
      },
    }, "Allow selected");
    this.root = el("section", { class: "ask batch", attrs: { "aria-labelledby": this.titleId } },
      el("header", { class: "ask-head" },
        el("div", { class: "ask-title-row" },
          el("h2", { class: "ask-title", id: this.titleId }, "Decide together"))),
      this.message,
      el("p", { class: "field-hint" },
        "Tick the calls to allow. Allow selected allows the ticked calls once and denies every other call in this list; Deny all denies them all. Back (Escape) answers nothing."),
      this.list,
      el("div", { class: "actions" },
        el("p", { class: "field-hint batch-note", id: allowNoteId }, this.tally),
        this.back, this.denyAll, this.allow));
    for (const ask of asks) this.addLine(ask, false);
    this.refresh();
  }

  /** The ids of the calls listed now. */
  get ids(): number[] {
    return [...this.lines.keys()];
  }

  get size(): number {
    return this.lines.size;
  }

  /** Whether `ask` belongs in this list. */
  takes(ask: Ask): boolean {
    return sameKey(this.key, batchKey(ask));
  }

  /** A call that arrived while the list is open: added unticked, marked new. */
  add(ask: ToolCallAsk): void {
    if (this.lines.has(ask.id)) return;
    this.addLine(ask, true);
    this.refresh();
    this.host.changed(this);
  }

  /** A call that is over (withdrawn, or answered elsewhere): gone from the list, never answered. */
  drop(id: number): void {
    const line = this.lines.get(id);
    if (!line) return;
    const hadFocus = line.root.contains(document.activeElement);
    this.lines.delete(id);
    line.root.remove();
    this.refresh();
    if (hadFocus) this.focusInitial();
    this.host.changed(this);
  }

  /** Focus where the person starts: the first line (its checkbox, or its Show all while clipped);
   * a stray Space ticks at most, a stray Enter does nothing. */
  focusInitial(): void {
    const first = this.lines.values().next().value;
    if (first === undefined) {
      this.back.focus();
      return;
    }
    const target = first.box.disabled ? first.root.querySelector<HTMLElement>("button") : first.box;
    (target ?? this.back).focus();
  }

  setArmed(armed: boolean): void {
    this.armed = armed;
    this.refresh();
  }

  setBusy(busy: boolean): void {
    this.busy = busy;
    this.denyAll.disabled = busy;
    this.back.disabled = busy;
    for (const line of this.lines.values()) line.box.disabled = busy || !line.whole;
    this.root.setAttribute("aria-busy", String(busy));
    this.refresh();
  }

  private get ticked(): Line[] {
    return [...this.lines.values()].filter((l) => l.box.checked && l.whole);
  }

  private get acceptReady(): boolean {
    return this.armed && !this.busy && this.ticked.length > 0;
  }

  private decide(allow: boolean): void {
    if (this.busy || this.lines.size === 0) return;
    const answers = [...this.lines.values()].map((line) => ({
      id: line.ask.id,
      answer: allow && line.box.checked && line.whole ? ACCEPT : DECLINE,
    }));
    this.host.decide(this, answers);
  }

  private addLine(ask: ToolCallAsk, arrived: boolean): void {
    const args = ask.argumentsText ? ask.argumentsText : argumentsText(ask.arguments);
    // What the call sends beyond its arguments is part of what a tick allows.
    const text = ask.alsoSentText ? `${args ?? "{}"}\nAlso sent with the call: ${ask.alsoSentText}` : args;
    const summary = oneLine(text);
    const clipped = Array.from(summary).length > SUMMARY_CHARS;
    const toolId = uid("batch-tool");
    const summaryId = uid("batch-args");
    const revealId = uid("batch-reveal");
    const box = el("input", {
      class: "batch-box",
      attrs: { type: "checkbox", "aria-describedby": clipped ? revealId : null },
    });
    box.disabled = clipped;
    box.addEventListener("change", () => this.refresh());
    const label = el("label", { class: "batch-choice" },
      box, " ",
      el("code", { class: "tool-name", id: toolId }, inlineText(ask.tool, 80)), " ",
      summary === ""
        ? el("span", { class: "batch-args muted", id: summaryId }, "no arguments")
        : el("span", { class: "batch-args mono", id: summaryId }, inlineText(summary, SUMMARY_CHARS)));
    const root = el("li", { class: "batch-line", attrs: { "data-ask-id": ask.id } }, label);
    const line: Line = { ask, root, box, whole: !clipped };
    if (arrived) {
      append(root, el("span", { class: "badge batch-new" }, "new: arrived while this list was open"));
    }
    if (text !== null && text !== "") {
      const full = el("pre", {
        class: "untrusted output json batch-full",
        attrs: { dir: "auto", hidden: true },
      });
      append(full, visibleText(text));
      const reveal = clipped
        ? el("span", { class: "field-hint batch-reveal", id: revealId }, "Show all of its arguments to tick it.")
        : null;
      const toggle = el("button", {
        class: "link-button batch-toggle",
        attrs: { type: "button", "aria-expanded": "false", "aria-describedby": `${toolId} ${summaryId}` },
      }, clipped ? `Show all (${Array.from(text).length} characters)` : "Show all");
      let watched = false;
      toggle.addEventListener("click", () => {
        const open = full.hidden;
        full.hidden = !open;
        toggle.setAttribute("aria-expanded", String(open));
        replace(toggle, open ? "Show less" : "Show all");
        if (open && !line.whole && !watched) {
          watched = true;
          // Seen whole once its end was in view: the list shows it at most 24em high.
          onceSeenToEnd(full, () => {
            line.whole = true;
            box.disabled = this.busy;
            box.removeAttribute("aria-describedby");
            reveal?.remove();
            this.refresh();
          });
        }
      });
      append(root, toggle, reveal, full);
    }
    this.lines.set(ask.id, line);
    append(this.list, root);
  }

  private refresh(): void {
    const n = this.lines.size;
    replace(this.message,
      inlineText(this.key.name, 80, "agent-name"), ` wants to run ${plural(n, "tool call", "tool calls")} on `,
      inlineText(this.key.server, 80, "server-name"), ".");
    const ticked = this.ticked.length;
    replace(this.tally, ticked === 0
      ? "Nothing ticked: tick the calls to allow."
      : `${ticked} of ${n} ticked: Allow selected allows ${ticked === 1 ? "it" : "them"} and denies ${n - ticked === 0 ? "none" : `the other ${n - ticked}`}.`);
    const ready = this.armed && ticked > 0;
    this.allow.setAttribute("aria-disabled", String(!ready || this.busy));
    this.allow.classList.toggle("unarmed", !ready);
    this.allow.disabled = this.busy;
  }
}
