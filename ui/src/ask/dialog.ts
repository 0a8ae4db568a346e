//! The ask dialog and the queue behind it. The backend holds the pending asks; this mirrors
//! them: `sync` redraws from `pending_asks` (on load and reload), `ask-event` adds and removes
//! them as they come and go, and the person's answers go out through `answer_ask`.
//!
//! One modal `<dialog>` (opened with `showModal`, so the rest of the window is inert) shows one
//! ask at a time; with several waiting, a compact queue above it says which one of how many is
//! shown, steps to the previous / next, lists them all on demand (in a box of bounded height, so
//! the shown question's own buttons stay in view however many wait), and declines every question
//! from the shown one's server at once. A view the person is filling in is kept as it is while
//! others arrive or go. Escape and the close button cancel the shown ask; a withdrawal removes its
//! view at once (synchronously, in the event handler) and says why in a status line. Each shown
//! question is armed afresh (arming.ts) before its accept buttons work.
//!
//! With several tool calls waiting from the shown call's agent and server, "Decide together (N)"
//! opens the batch view (batch.ts) in the dialog's place: one line per call, Allow selected and
//! Deny all; Back or Escape return to the questions without answering. While it is open the queue
//! is hidden, calls of its agent and server that arrive join its list unticked (and re-arm it),
//! and calls that end leave it.

import type { Answer } from "../bindings/Answer";
import type { Ask } from "../bindings/Ask";
import type { AskEvent } from "../bindings/AskEvent";
import type { Outcome } from "../bindings/Outcome";
import type { PreviewResult } from "../bindings/PreviewResult";
import { el, append, replace, setAttr, uid, type Child } from "../dom";
import { asAppError, commands, errorText } from "../ipc";
import { coveringText, lastingText, plural, reasonText } from "../format";
import { Notice } from "../notice";
import { inlineText, visibleString } from "../untrusted";
import { ARM_DELAY_MS, Arming } from "./arming";
import { BatchView, batchKey, sameKey, type BatchHost } from "./batch";
import type { ToolCallAsk } from "./toolcall";
import { AskView, type AskViewHost } from "./view";

export type AnswerFn = (id: number, answer: Answer) => Promise<Outcome>;

export interface AskDialogOptions {
  /** How long a shown question waits before its accept buttons work (arming.ts). */
  armDelayMs?: number;
}

export class AskDialog implements AskViewHost {
  readonly dialog: HTMLDialogElement;
  private readonly views = new Map<number, AskView>();
  private readonly tabs = new Map<number, HTMLButtonElement>();
  /** Asks known to be over; a late `added` or a stale `pending_asks` reply must not revive them. */
  private readonly gone = new Set<number>();
  /** Asks answered together (Decline all): one notice for all of them instead of one each. */
  private readonly quiet = new Set<number>();
  private current: AskView | null = null;
  /** The batch view, while open: it takes the dialog's place (`current` is where Back returns). */
  private batch: BatchView | null = null;
  private readonly arming: Arming;

  private readonly queue: HTMLElement;
  private readonly count: HTMLElement;
  private readonly position: HTMLElement;
  private readonly listToggle: HTMLButtonElement;
  private readonly listBox: HTMLElement;
  private readonly tabList: HTMLElement;
  private readonly declineAll: HTMLButtonElement;
  private readonly decideTogether: HTMLButtonElement;
  private readonly body: HTMLElement;
  private readonly dialogNotice: Notice;
  /** When a key was last pressed in the dialog (`performance.now()`): is the person typing? */
  private lastKeyAt = -Infinity;

  constructor(
    private readonly mainNotice: Notice,
    private readonly sendAnswer: AnswerFn = commands.answerAsk,
    options: AskDialogOptions = {},
  ) {
    const countId = uid("queue-count");
    const listId = uid("queue-list");
    this.count = el("p", { class: "queue-count", id: countId });
    this.position = el("span", { class: "queue-position", attrs: { "aria-live": "polite" } });
    const previous = el("button", {
      class: "button small",
      attrs: { type: "button", "aria-label": "Previous question" },
      on: { click: () => this.step(-1) },
    }, "‹ Previous");
    const next = el("button", {
      class: "button small",
      attrs: { type: "button", "aria-label": "Next question" },
      on: { click: () => this.step(1) },
    }, "Next ›");
    this.listToggle = el("button", {
      class: "button small",
      attrs: { type: "button", "aria-expanded": "false", "aria-controls": listId },
      on: { click: () => this.toggleList() },
    }, "List all");
    this.tabList = el("ol", { class: "queue-tabs", attrs: { "aria-labelledby": countId } });
    this.listBox = el("div", { class: "queue-list", id: listId, attrs: { hidden: true } }, this.tabList);
    this.declineAll = el("button", {
      class: "button small decline-all",
      attrs: { type: "button" },
      on: { click: () => void this.declineAllFrom(this.current?.ask.asker.server) },
    });
    this.decideTogether = el("button", {
      class: "button small decide-together",
      attrs: { type: "button", hidden: true },
      on: { click: () => this.openBatch() },
    });
    this.queue = el("nav", { class: "queue", attrs: { hidden: true, "aria-label": "Waiting questions" } },
      el("div", { class: "queue-bar" },
        this.count,
        el("div", { class: "queue-step" }, previous, this.position, next),
        this.listToggle,
        this.decideTogether,
        this.declineAll),
      this.listBox);
    const noticeRegion = el("div", { class: "notice dialog-notice", attrs: { role: "status" } });
    this.dialogNotice = new Notice(noticeRegion);
    this.body = el("div", { class: "ask-body" });
    this.dialog = el("dialog", { class: "ask-dialog" }, this.queue, noticeRegion, this.body);
    this.arming = new Arming(this.dialog, options.armDelayMs ?? ARM_DELAY_MS);
    // The queue bar and the notice above the shown question come and go with other questions
    // (which a server or an agent times), and move it: a click aimed at a field could land on
    // an accept button. Moved, it arms afresh.
    const moved = new ResizeObserver(() => {
      const shown = this.batch ?? this.current;
      if (shown !== null && this.dialog.open) this.arming.show(shown);
    });
    moved.observe(this.queue);
    moved.observe(noticeRegion);

    this.dialog.addEventListener("keydown", (event) => {
      this.lastKeyAt = performance.now();
      if (event.key === "Escape" && !event.isComposing) {
        event.preventDefault();
        if (this.batch !== null) {
          if (!this.batch.busy) this.closeBatch(true);
        } else {
          this.current?.cancel();
        }
      }
    });
    // The platform's own close request (Escape where keydown did not see it): cancel, stay open.
    this.dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      if (this.batch !== null) {
        if (!this.batch.busy) this.closeBatch(true);
      } else {
        this.current?.cancel();
      }
    });
    // Closed by anything but us while asks wait: show it again (answering is the only way out).
    // The event comes a task after the close: if a new question has reopened the dialog since,
    // it is open and focused where it should be, and focus must not be taken back from the person.
    this.dialog.addEventListener("close", () => {
      if (this.dialog.open) return;
      this.dialogNotice.clear();
      if (this.views.size > 0) queueMicrotask(() => this.open());
    });
  }

  /** How many asks wait. */
  get size(): number {
    return this.views.size;
  }

  /** Redraws from the backend's list of pending asks: drops what is gone, adds what is new. */
  sync(asks: Ask[]): void {
    this.keepingPlace(() => {
      const pending = new Set(asks.map((a) => a.id));
      for (const id of [...this.views.keys()]) {
        if (!pending.has(id)) this.remove(id);
      }
      const sorted = [...asks].sort((a, b) => a.receivedAtMs - b.receivedAtMs || a.id - b.id);
      for (const ask of sorted) this.add(ask, false);
    });
  }

  onEvent(event: AskEvent): void {
    this.keepingPlace(() => this.take(event));
  }

  /** Makes `change` (other questions come or gone, a notice shown), and if it moved the
   * question on screen, arms that one afresh at once: the observer (`moved`) would too, but
   * only at the next frame, and a click aimed elsewhere landing in between would answer it. */
  private keepingPlace(change: () => void): void {
    const shown = this.dialog.open ? this.batch ?? this.current : null;
    const before = shown?.root.getBoundingClientRect();
    change();
    if (shown === null || before === undefined || !this.dialog.open) return;
    if ((this.batch ?? this.current) !== shown) return; // another is shown: armed as shown
    const after = shown.root.getBoundingClientRect();
    if (after.top !== before.top || after.left !== before.left) this.arming.show(shown);
  }

  private take(event: AskEvent): void {
    if (event.event === "added") {
      this.add(event.ask, true);
    } else if (event.event === "resolved") {
      this.resolved(event.id, event.outcome);
    } else {
      // The server reports finished what an opened URL question sent the person to do.
      const target = this.dialog.open ? this.dialogNotice : this.mainNotice;
      target.show(el("strong", {}, inlineText(event.server, 80)), ": finished at ",
        inlineText(event.host, 120), ", the server reports.");
    }
  }

  /** Adds a view for `ask` (once); `announce` says so in the dialog when another is being shown. */
  private add(ask: Ask, announce: boolean): void {
    if (this.views.has(ask.id) || this.gone.has(ask.id)) return;
    const view = new AskView(ask, this);
    view.root.hidden = true;
    this.views.set(ask.id, view);
    append(this.body, view.root);

    const tab = el("button", {
      class: "queue-tab",
      attrs: { type: "button" },
      on: {
        click: () => {
          this.toggleList(false);
          this.show(view, true);
        },
      },
    }, inlineText(view.shortLabel));
    this.tabs.set(ask.id, tab);
    append(this.tabList, el("li", {}, tab));

    if (this.current === null && this.batch === null) {
      const typing = isTypingTarget(document.activeElement);
      this.show(view, false);
      this.open();
      if (typing) view.focusWithoutTyping();
      else view.focusInitial();
    } else if (this.batch !== null && this.batch.takes(ask) && !view.busy) {
      this.batch.add(ask as ToolCallAsk);
      this.dialogNotice.show("A new call from ", inlineText(ask.asker.server, 80),
        " joined the list, unticked.");
    } else if (announce) {
      this.dialogNotice.show("New question from ", inlineText(ask.asker.server, 80), ".");
    }
    this.updateQueue();
  }

  private resolved(id: number, outcome: Outcome): void {
    this.gone.add(id);
    const view = this.views.get(id);
    if (!view) return;
    // While the person's own answer is in flight, its outcome is theirs, not a withdrawal.
    const own = view.busy && (outcome.outcome !== "cancelled" || outcome.reason === "person");
    this.remove(id);
    if (!this.quiet.has(id)) this.notify(view, own ? ownText(outcome, view.ask.kind) : withdrawnText(outcome, view.ask.kind));
  }

  /** Whether the press behind `event` may say yes to `view`: see arming.ts. */
  mayAccept(view: AskView, event: Event): boolean {
    return this.batch === null && this.current === view && this.arming.permits(view, event);
  }

  /** A tool call's dry run for `view` (`preview_call`): not an answer, the ask stays open. */
  preview(view: AskView): Promise<PreviewResult> {
    return commands.previewCall(view.ask.id);
  }

  /** The person's choice from a view: send it, then tear down or show why it was refused. */
  answer(view: AskView, answer: Answer): void {
    void this.send(view, answer);
  }

  /** Sends `answer` for `view`'s ask; resolves with how the ask ended (the outcome that went
   * out, or "gone" when it had ended already), or null while it is still open. */
  private send(view: AskView, answer: Answer): Promise<Outcome | "gone" | null> {
    const id = view.ask.id;
    view.setBusy(true);
    return this.sendAnswer(id, answer).then(
      (outcome) => {
        this.gone.add(id);
        if (this.views.get(id) !== view) return outcome; // already torn down by its `resolved` event
        this.remove(id);
        if (!this.quiet.has(id)) this.notify(view, ownText(outcome, view.ask.kind));
        return outcome;
      },
      (error: unknown) => {
        if (this.views.get(id) !== view) return "gone";
        view.setBusy(false);
        const app = asAppError(error);
        if (app?.kind === "answer") {
          switch (app.error.kind) {
            case "invalid":
              view.showErrors(app.error.errors);
              return null;
            case "notPending":
              this.gone.add(id);
              this.remove(id);
              if (!this.quiet.has(id)) this.notify(view, "This question is no longer waiting.");
              return "gone";
            case "malformed":
              view.showFormErrors([app.error.message]);
              return null;
          }
        }
        view.showFormErrors([`The answer was not sent: ${errorText(error)}`]);
        return null;
      },
    );
  }

  /** Declines (denies, for tool calls) every question waiting from `server`, one answer each,
   * and says how it went in one line. A no, so it needs no arming. */
  private async declineAllFrom(server: string | undefined): Promise<void> {
    if (server === undefined) return;
    const views = [...this.views.values()].filter((v) => v.ask.asker.server === server && !v.busy);
    if (views.length === 0) return;
    for (const v of views) this.quiet.add(v.ask.id);
    const sent = await Promise.all(views.map((v) => this.send(v, { action: "decline" })));
    for (const v of views) this.quiet.delete(v.ask.id);
    const done = sent.filter((s) => s !== null).length;
    const failed = views.length - done;
    const target = this.dialog.open ? this.dialogNotice : this.mainNotice;
    target.show(el("strong", {}, inlineText(server, 80)), ": ",
      `Declined ${plural(done, "question", "questions")}.`,
      failed > 0 ? ` ${plural(failed, "was", "were")} not: see ${failed === 1 ? "it" : "them"} in the queue.` : null);
  }

  private show(view: AskView, focus: boolean): void {
    this.current = view;
    if (this.batch !== null) {
      // The batch keeps the dialog; `view` is where Back returns.
      this.updateQueue();
      return;
    }
    for (const v of this.views.values()) v.root.hidden = v !== view;
    this.arming.show(view);
    setAttr(this.dialog, "aria-labelledby", view.titleId);
    setAttr(this.dialog, "aria-describedby", view.messageId);
    for (const [id, tab] of this.tabs) {
      setAttr(tab, "aria-current", id === view.ask.id ? "true" : null);
    }
    this.updateQueue();
    if (focus) view.focusInitial();
  }

  /** Previous (-1) or next (+1) question, wrapping around; focus stays on the step button. */
  private step(by: number): void {
    const all = [...this.views.values()];
    if (all.length === 0) return;
    const at = this.current === null ? 0 : all.indexOf(this.current);
    this.show(all[(at + by + all.length) % all.length], false);
  }

  private toggleList(open = this.listBox.hidden): void {
    this.listBox.hidden = !open;
    this.listToggle.setAttribute("aria-expanded", String(open));
    if (open) this.tabs.get(this.current?.ask.id ?? -1)?.scrollIntoView({ block: "nearest" });
  }

  private open(): void {
    if (!this.dialog.isConnected || this.views.size === 0) return;
    if (!this.dialog.open) this.dialog.showModal();
    (this.batch ?? this.current)?.focusInitial();
  }

  /** Removes an ask's view at once; shows the next one, or closes the dialog when none is left. */
  private remove(id: number): void {
    const view = this.views.get(id);
    if (!view) return;
    // Withdrawn while the person typed in it: the next question must not take the rest of their
    // typing. (Once they answered, their answer is in flight: the view is busy.)
    const typing = !view.busy && view.root.contains(document.activeElement) && isTypingTarget(document.activeElement)
      && performance.now() - this.lastKeyAt < TYPING_MS;
    this.views.delete(id);
    this.arming.forget(view);
    view.root.remove();
    this.tabs.get(id)?.parentElement?.remove();
    this.tabs.delete(id);
    // Gone from the batch's list too: it is never answered from there.
    this.batch?.drop(id);
    if (this.batch !== null && this.batch.size === 0) {
      if (this.current === view) this.current = null;
      this.closeBatch(true);
    } else if (this.current === view) {
      this.current = null;
      this.showNextOrClose(typing);
    }
    this.updateQueue();
  }

  /** Shows the next question still waiting for the person (not one whose answer is on its way),
   * or closes the dialog when none is left. `typing`: the person was typing in the one that
   * went, so focus starts off the next one's fields. */
  private showNextOrClose(typing = false): void {
    const waiting = [...this.views.values()];
    const next = waiting.find((v) => !v.busy) ?? waiting[0];
    if (next !== undefined) {
      this.show(next, !typing);
      if (typing) next.focusWithoutTyping();
    } else {
      this.dialog.removeAttribute("aria-labelledby");
      this.dialog.removeAttribute("aria-describedby");
      this.toggleList(false);
      if (this.dialog.open) this.dialog.close();
    }
  }

  /** The calls the batch of `view` would list: that agent's calls to that server, not being answered. */
  private batchable(view: AskView | null): AskView[] {
    const key = view === null || view.busy ? null : batchKey(view.ask);
    if (key === null) return [];
    return [...this.views.values()].filter((v) => !v.busy && sameKey(key, batchKey(v.ask)));
  }

  /** "Decide together": the batch view of the shown call's agent and server takes the dialog. */
  private openBatch(): void {
    if (this.batch !== null) return;
    const key = this.current === null ? null : batchKey(this.current.ask);
    const members = this.batchable(this.current);
    if (key === null || members.length < 2) return;
    this.toggleList(false);
    const host: BatchHost = {
      decide: (batch, answers) => void this.decideBatch(batch, answers),
      leave: () => this.closeBatch(true),
      mayAccept: (batch, event) => this.batch === batch && this.arming.permits(batch, event),
      changed: (batch) => {
        if (this.batch === batch) this.arming.show(batch);
      },
    };
    const batch = new BatchView(key, members.map((v) => v.ask as ToolCallAsk), host);
    this.batch = batch;
    for (const v of this.views.values()) v.root.hidden = true;
    append(this.body, batch.root);
    this.dialogNotice.clear();
    this.arming.show(batch);
    setAttr(this.dialog, "aria-labelledby", batch.titleId);
    setAttr(this.dialog, "aria-describedby", batch.messageId);
    this.updateQueue();
    batch.focusInitial();
  }

  /** Leaves the batch view (answering nothing by itself): back to the question it was opened
   * from while that still waits, else the next. */
  private closeBatch(focus: boolean): void {
    const batch = this.batch;
    if (batch === null) return;
    this.batch = null;
    this.arming.forget(batch);
    batch.root.remove();
    const back = this.current !== null && this.views.get(this.current.ask.id) === this.current && !this.current.busy
      ? this.current : null;
    this.current = null;
    if (back !== null) this.show(back, focus);
    else this.showNextOrClose();
    this.updateQueue();
  }

  /** The batch's answers, one per call listed at the click, and one line saying how it went. */
  private async decideBatch(batch: BatchView, answers: { id: number; answer: Answer }[]): Promise<void> {
    if (this.batch !== batch || batch.busy) return;
    const chosen = answers.flatMap(({ id, answer }) => {
      const view = this.views.get(id);
      return view !== undefined && !view.busy ? [{ view, answer }] : [];
    });
    if (chosen.length === 0) return;
    batch.setBusy(true);
    for (const { view } of chosen) this.quiet.add(view.ask.id);
    const sent = await Promise.all(chosen.map(({ view, answer }) => this.send(view, answer)));
    for (const { view } of chosen) this.quiet.delete(view.ask.id);
    if (this.batch === batch) this.closeBatch(true);
    // Counted by what went out, not by what was pressed: an Allow the log could not record went
    // out as a no, and a call that had ended meanwhile got no answer at all.
    const allowed = sent.filter((s) => s !== null && s !== "gone" && s.outcome === "accepted").length;
    const denied = sent.filter((s) => s !== null && s !== "gone" && (s.outcome === "declined"
      || (s.outcome === "cancelled" && s.reason === "person"))).length;
    const otherwise = sent.filter((s) => s !== null && s !== "gone" && s.outcome === "cancelled" && s.reason !== "person").length;
    const gone = sent.filter((s) => s === "gone").length;
    const failed = sent.filter((s) => s === null).length;
    const target = this.dialog.open ? this.dialogNotice : this.mainNotice;
    target.show(el("strong", {}, inlineText(batch.key.server, 80)), ": ",
      allowed > 0 ? `Allowed ${plural(allowed, "call", "calls")} once, denied ${denied}.` : `Denied ${plural(denied, "call", "calls")}.`,
      otherwise > 0 ? ` ${plural(otherwise, "went", "went")} out as no: Countersign could not record ${otherwise === 1 ? "its answer" : "their answers"} (see History).` : null,
      gone > 0 ? ` ${plural(gone, "had", "had")} ended before the answer.` : null,
      failed > 0 ? ` ${plural(failed, "was", "were")} not answered: see ${failed === 1 ? "it" : "them"} in the queue.` : null);
  }

  private updateQueue(): void {
    const n = this.views.size;
    this.count.textContent = `${plural(n, "question", "questions")} waiting`;
    // The batch view has its own list and way back; the queue would step out of it.
    this.queue.hidden = n < 2 || this.batch !== null;
    document.title = n > 0 ? `Countersign — ${this.count.textContent}` : "Countersign";
    const current = this.current;
    if (current === null) return;
    const together = this.batch === null ? this.batchable(current).length : 0;
    this.decideTogether.hidden = together < 2;
    replace(this.decideTogether, `Decide together (${together})`);
    if (together >= 2 && current.ask.asker.agent) {
      setAttr(this.decideTogether, "title",
        `The ${together} calls waiting from ${visibleString(current.ask.asker.agent)} to ${visibleString(current.ask.asker.server)}, in one list`);
    }
    const all = [...this.views.values()];
    this.position.textContent = `${all.indexOf(current) + 1} of ${n}`;
    const server = current.ask.asker.server;
    const fromServer = all.filter((v) => v.ask.asker.server === server && !v.busy).length;
    // Worth a button only when that server has more than the one shown.
    this.declineAll.hidden = fromServer < 2;
    replace(this.declineAll, "Decline all from ", inlineText(server, 60, "server-name"), ` (${fromServer})`);
  }

  /** A status line about `view`'s ask: in the dialog while it stays open, else in the window. */
  private notify(view: AskView, text: Child | Child[]): void {
    const target = this.dialog.open ? this.dialogNotice : this.mainNotice;
    target.show(el("strong", {}, inlineText(view.ask.asker.server, 80)), ": ", ...(Array.isArray(text) ? text : [text]));
  }
}

/** The person's own answer, confirmed. Which calls a remembered one covers holds the agent's
 * words (its arguments, a path it named): shown as its text, clipped. */
function ownText(outcome: Outcome, kind: Ask["kind"]): string | Child[] {
  const call = kind === "toolCall" || kind === "sampling";
  switch (outcome.outcome) {
    case "accepted":
      return kind === "toolCall" ? "Allowed once." : kind === "sampling" ? "Allowed: sent to the agent."
        : kind === "url" ? "Handed to your browser." : "Sent.";
    case "alwaysAllowed":
      return "Always allowed (revocable in Settings).";
    case "remembered": {
      const { allow, lasting, covering } = outcome.decision;
      return [`${allow ? "Allowed" : "Denied"} and remembered: ${lastingText(lasting)}, `,
        inlineText(coveringText(covering), 200), " (revocable in Settings)."];
    }
    case "declined":
      return call ? "Denied." : "Declined.";
    case "cancelled":
      if (outcome.reason === "person") return call ? "Denied." : "Cancelled.";
      return reasonText(outcome.reason);
  }
}

/** The ask ended without this window's answer (withdrawn, or answered elsewhere). */
function withdrawnText(outcome: Outcome, kind: Ask["kind"]): string {
  const call = kind === "toolCall";
  switch (outcome.outcome) {
    case "accepted":
      return call ? "This call was allowed." : kind === "sampling" ? "This request was allowed." : "This question was answered.";
    case "alwaysAllowed":
      return "This call was allowed (Always allow).";
    case "remembered":
      return outcome.decision.allow ? "This call was allowed (remembered)." : "This call was denied (remembered).";
    case "declined":
      return call ? "This call was denied." : kind === "sampling" ? "This request was denied." : "This question was declined.";
    case "cancelled":
      return reasonText(outcome.reason);
  }
}

/** A key pressed this recently in a field that goes away means the person is typing there. */
const TYPING_MS = 2000;

/** Whether `element` takes typed text (a text field, a text area, an editable region): the
 * person may be typing there when a question arrives. */
function isTypingTarget(element: Element | null): boolean {
  if (element instanceof HTMLTextAreaElement) return true;
  if (element instanceof HTMLInputElement) {
    return !["button", "submit", "reset", "checkbox", "radio", "range", "color", "file", "image"].includes(element.type);
  }
  return element instanceof HTMLElement && element.isContentEditable;
}
