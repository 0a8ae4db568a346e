//! One ask as the person sees it inside the dialog: who asks (server, how it is reached, for
//! which agent), the message, and either the form (Submit / Decline), the URL to open
//! (Open / Decline), a tool call to approve (Allow once / Always allow / Deny / Remember…, toolcall.ts),
//! or a server's request for the agent's model (Allow / Deny, sampling.ts).
//! A view only gathers the person's choice and hands it to the dialog; it never talks to the
//! backend itself. Its accept buttons work only while the dialog has armed it (arming.ts) and the
//! press behind them is one the dialog permits; they look and read as disabled otherwise.

import type { Answer } from "../bindings/Answer";
import type { Ask } from "../bindings/Ask";
import type { FieldError } from "../bindings/FieldError";
import type { PreviewResult } from "../bindings/PreviewResult";
import type { JsonValue } from "../bindings/serde_json/JsonValue";
import { el, append, replace, uid } from "../dom";
import { deadlineTime, endpointPhrase } from "../format";
import { clippedText, inlineText, shortText } from "../untrusted";
import { buildField, type FieldControl } from "./fields";
import { samplingPanel } from "./sampling";
import { toolCallPanel } from "./toolcall";
import { isWebAddress, warningText } from "./url";

export interface AskViewHost {
  /** The person chose; the dialog sends it and reports back through the view's methods. */
  answer(view: AskView, answer: Answer): void;
  /** Whether the press behind `event` may answer yes for `view` (see arming.ts). */
  mayAccept(view: AskView, event: Event): boolean;
  /** The tool call's dry run (preview.ts); answers nothing. */
  preview(view: AskView): Promise<PreviewResult>;
}

export class AskView {
  readonly ask: Ask;
  readonly root: HTMLElement;
  readonly titleId = uid("ask-title");
  readonly messageId = uid("ask-message");
  /** True while an answer is on its way to the backend. */
  busy = false;

  private readonly host: AskViewHost;
  private readonly controls: FieldControl[] = [];
  private readonly formErrors = el("div", { class: "form-errors", attrs: { role: "alert", hidden: true } });
  private readonly buttons: HTMLButtonElement[] = [];
  /** Submit, Open, Allow once, Always allow: the buttons that say yes. */
  private readonly acceptButtons: HTMLButtonElement[] = [];
  /** Buttons that answer nothing but wait for the arming (a tool call's Preview). */
  private readonly armedButtons: HTMLButtonElement[] = [];
  private initialFocus: HTMLElement | null = null;
  /** Set by the dialog once the view has been on screen long enough (arming.ts). */
  private armed = false;
  /** False while what is approved has not been shown whole (clipped tool-call arguments). */
  private shownWhole = true;

  constructor(ask: Ask, host: AskViewHost) {
    this.ask = ask;
    this.host = host;
    this.root = el("section", {
      class: "ask",
      attrs: { "aria-labelledby": this.titleId, "data-ask-id": ask.id },
    });
    append(this.root, this.header());
    if (ask.kind === "toolCall") {
      // The panel reports that the arguments were shown whole while it is being built, when
      // they are not clipped; it starts false only when they are.
      this.shownWhole = false;
      const panel = toolCallPanel(ask, {
        summaryId: this.messageId,
        errors: this.formErrors,
        send: (answer) => this.send(answer),
        accept: (event, answer) => this.accept(event, answer),
        shownWhole: () => {
          this.shownWhole = true;
          this.refreshAccept();
        },
        preview: (event) => this.armed && !this.busy && this.host.mayAccept(this, event)
          ? this.host.preview(this)
          : null,
      });
      this.buttons.push(...panel.buttons);
      this.acceptButtons.push(...panel.acceptButtons);
      this.armedButtons.push(...panel.armedButtons);
      this.initialFocus = panel.initialFocus;
      append(this.root, panel.root);
      this.refreshAccept();
      return;
    }
    if (ask.kind === "sampling") {
      // As for a tool call: Allow forwards all of it, so it waits for every clipped part.
      this.shownWhole = false;
      const panel = samplingPanel(ask, {
        summaryId: this.messageId,
        errors: this.formErrors,
        send: (answer) => this.send(answer),
        accept: (event, answer) => this.accept(event, answer),
        shownWhole: () => {
          this.shownWhole = true;
          this.refreshAccept();
        },
      });
      this.buttons.push(...panel.buttons);
      this.acceptButtons.push(...panel.acceptButtons);
      this.initialFocus = panel.initialFocus;
      append(this.root, panel.root);
      this.refreshAccept();
      return;
    }
    append(this.root, clippedText(ask.message, {
      id: this.messageId, chars: 600, lines: 10, class: "ask-message",
    }));
    append(this.root, ask.kind === "form" ? this.form(ask) : this.urlPanel(ask));
    this.refreshAccept();
  }

  /** A short name for the switcher: server and the start of the message (or the tool). */
  get shortLabel(): string {
    const ask = this.ask;
    const what = ask.kind === "url" ? "open a page"
      : ask.kind === "toolCall" ? `run ${ask.tool}`
      : ask.kind === "sampling" ? "ask the agent's model"
      : ask.message;
    return `${shortText(ask.asker.server, 40)}: ${shortText(what || "a question", 60)}`;
  }

  /** Focus where the person starts: the first field, else the message (an empty form: an Enter
   * meant for something else must not submit it), else the URL, and Deny for a tool call. */
  focusInitial(): void {
    this.initialFocus?.focus();
  }

  /** Where focus starts when the question opened under the person's typing elsewhere in the
   * window: its message, not its first field, so the rest of what they type (and an Enter after
   * it) does not go to the server. Tab reaches the fields. */
  focusWithoutTyping(): void {
    const field = this.controls[0]?.focusTarget;
    if (field !== undefined && this.initialFocus === field) this.messageFocus()?.focus();
    else this.focusInitial();
  }

  /** The person cancels (Escape, the close button). */
  cancel(): void {
    this.send({ action: "cancel" });
  }

  setBusy(busy: boolean): void {
    this.busy = busy;
    for (const b of this.buttons) b.disabled = busy;
    this.root.setAttribute("aria-busy", String(busy));
  }

  /** The dialog arms the view once it has been on screen for a moment, and disarms it when it
   * gives way to another. */
  setArmed(armed: boolean): void {
    this.armed = armed;
    this.refreshAccept();
  }

  /** Whether a yes would be taken now (armed, and nothing approved is hidden). */
  get acceptReady(): boolean {
    return this.armed && this.shownWhole && !this.busy;
  }

  /** Accept buttons read as disabled (`aria-disabled`, so they keep their place in the tab order
   * and focus is not thrown out) until a yes would be taken. */
  private refreshAccept(): void {
    const ready = this.armed && this.shownWhole;
    for (const b of this.acceptButtons) {
      b.setAttribute("aria-disabled", String(!ready));
      b.classList.toggle("unarmed", !ready);
    }
    for (const b of this.armedButtons) {
      b.setAttribute("aria-disabled", String(!this.armed));
      b.classList.toggle("unarmed", !this.armed);
    }
  }

  /** A yes from an accept button's click: only when ready and the press behind it permitted. */
  private accept(event: Event, answer: Answer): void {
    if (!this.acceptReady || !this.host.mayAccept(this, event)) {
      event.preventDefault();
      return;
    }
    this.send(answer);
  }

  /** The backend refused the answer: each message beside its field, the rest at the top. */
  showErrors(errors: FieldError[]): void {
    this.clearErrors();
    const formLevel: string[] = [];
    let firstFocus: HTMLElement | null = null;
    for (const error of errors) {
      const control = error.field === "" ? undefined : this.controls.find((c) => c.field.name === error.field);
      if (control) {
        control.setError(error.message);
        firstFocus ??= control.focusTarget;
      } else {
        formLevel.push(error.field === "" ? error.message : `${shortText(error.field, 80)}: ${error.message}`);
      }
    }
    if (formLevel.length > 0) this.showFormErrors(formLevel);
    firstFocus?.focus();
  }

  /** A problem with the answer as a whole (or the IPC call), shown above the form. */
  showFormErrors(messages: string[]): void {
    replace(this.formErrors, el("ul", {}, ...messages.map((m) => el("li", {}, inlineText(m)))));
    this.formErrors.hidden = false;
  }

  private clearErrors(): void {
    for (const c of this.controls) c.setError(null);
    this.formErrors.replaceChildren();
    this.formErrors.hidden = true;
  }

  private send(answer: Answer): void {
    if (this.busy) return;
    this.host.answer(this, answer);
  }

  private header(): HTMLElement {
    const { asker } = this.ask;
    // A tool call names agent, server and endpoint in its own panel (toolcall.ts).
    const call = this.ask.kind === "toolCall";
    const close = el("button", {
      class: "close-button",
      attrs: {
        type: "button",
        "aria-label": "Close",
        title: call ? "Close (Escape): denies the call"
          : this.ask.kind === "sampling" ? "Close (Escape): denies the request"
          : "Close (Escape): cancels the question",
      },
      on: { click: () => this.cancel() },
    }, "×");
    this.buttons.push(close);

    const meta = el("p", { class: "ask-meta" });
    const sep = () => el("span", { class: "sep", attrs: { "aria-hidden": "true" } }, " · ");
    if (!call) {
      const where = endpointPhrase(asker.endpoint);
      append(meta,
        el("span", { class: "meta-label" }, `${where.label} `),
        inlineText(where.value, 120, "endpoint"));
      if (asker.agent) {
        const declared = asker.declared ?? null;
        append(meta, sep(), el("span", { class: "agent" }, "for agent ", inlineText(asker.agent, 80, "agent-name"),
          declared !== null && declared !== "" && declared !== asker.agent
            ? el("span", { class: "declared" }, " (calls itself ", inlineText(declared, 80, "declared-name"), ")")
            : null));
      }
    }
    if (this.ask.deadlineMs !== null) {
      if (meta.hasChildNodes()) append(meta, sep());
      append(meta, el("span", { class: "deadline" }, `closes at ${deadlineTime(this.ask.deadlineMs)}`));
    }
    // Countersign's own sign-in says so, in words no server's question can take: a server's
    // URL question is titled by the server, whatever its message says.
    const ours = this.ask.kind === "url" && this.ask.signIn;
    if (ours) {
      meta.prepend(el("span", { class: "badge ours" }, "From Countersign"), sep());
    }
    return el("header", { class: "ask-head" },
      el("div", { class: "ask-title-row" },
        el("h2", { class: "ask-title", id: this.titleId },
          ...(call ? ["Approve a tool call"]
            : ours ? ["Sign in to ", inlineText(asker.server, 80, "server-name")]
              : [inlineText(asker.server, 80, "server-name"), " asks"])),
        close),
      meta.hasChildNodes() ? meta : null);
  }

  private form(ask: Extract<Ask, { kind: "form" }>): HTMLElement {
    const form = el("form", { class: "ask-form", attrs: { novalidate: true, autocomplete: "off" } });
    append(form, this.formErrors);
    const fields = ask.schema.fields;
    if (fields.some((f) => f.required && f.kind !== "boolean")) {
      append(form, el("p", { class: "req-legend", attrs: { "aria-hidden": "true" } }, "* required"));
    }
    for (const field of fields) {
      const control = buildField(field);
      this.controls.push(control);
      append(form, control.root);
    }
    const decline = el("button", {
      class: "button",
      attrs: { type: "button" },
      on: { click: () => this.send({ action: "decline" }) },
    }, "Decline");
    const submit = el("button", { class: "button primary", attrs: { type: "submit" } }, "Submit");
    // Every submission comes through a click on Submit (Enter in a field clicks it too), so
    // this is where a yes is refused: a refused click does not submit.
    submit.addEventListener("click", (event) => {
      if (!this.acceptReady || !this.host.mayAccept(this, event)) event.preventDefault();
    });
    this.buttons.push(decline, submit);
    this.acceptButtons.push(submit);
    append(form, el("div", { class: "actions" }, decline, submit));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (this.acceptReady) this.submit();
    });
    this.initialFocus = this.controls[0]?.focusTarget ?? this.messageFocus();
    return form;
  }

  /** The message, focusable by script only: where an empty form starts. */
  private messageFocus(): HTMLElement | null {
    const message = this.root.querySelector<HTMLElement>(`#${this.messageId}`);
    message?.setAttribute("tabindex", "-1");
    return message;
  }

  private submit(): void {
    if (this.busy) return;
    this.clearErrors();
    // 1. Native constraints (required, lengths, bounds, formats, counts): nothing is sent while any fails.
    const problems: { control: FieldControl; message: string }[] = [];
    for (const control of this.controls) {
      const message = control.check();
      if (message) {
        control.setError(message);
        problems.push({ control, message });
      }
    }
    if (problems.length > 0) {
      this.showFormErrors(problems.map(({ control, message }) =>
        message.startsWith(`“${control.label}”`) ? message : `“${control.label}”: ${message}`));
      const first = problems[0].control;
      first.report();
      first.focusTarget.focus();
      return;
    }
    // 2. The answer: optional fields left empty are left out.
    // No prototype: a field named `__proto__` is a field like any other, not the object's
    // prototype (which would drop the answer to it).
    const content: { [key: string]: JsonValue } = Object.create(null);
    for (const control of this.controls) {
      const reading = control.read();
      if (reading.present) content[control.field.name] = reading.value;
    }
    this.send({ action: "accept", content });
  }

  private urlPanel(ask: Extract<Ask, { kind: "url" }>): HTMLElement {
    const openable = isWebAddress(ask.url) && ask.host !== "";
    const box = el("div", { class: "url-box", attrs: { tabindex: "-1" } },
      el("p", { class: "url-lead" }, "Opens in your browser, on"),
      el("p", { class: "url-host" }, inlineText(ask.host || "an address that cannot be opened")),
      el("p", { class: "url-full" }, el("code", {}, inlineText(ask.url))));
    if (ask.warnings.length > 0) {
      append(box, el("ul", { class: "url-warnings" },
        ...ask.warnings.map((w) => el("li", {}, inlineText(warningText(w, ask.host))))));
    }
    const decline = el("button", {
      class: "button",
      attrs: { type: "button" },
      on: { click: () => this.send({ action: "decline" }) },
    }, "Decline");
    const open = el("button", {
      class: "button primary",
      attrs: { type: "button", disabled: !openable },
      on: { click: (event) => this.accept(event, { action: "accept", content: null }) },
    }, "Open");
    this.buttons.push(decline);
    if (openable) {
      this.buttons.push(open);
      this.acceptButtons.push(open);
    }
    // Focus on the address itself, so an Enter typed into another app cannot open it.
    this.initialFocus = box;
    return el("div", { class: "url-panel" }, box, this.formErrors, el("div", { class: "actions" }, decline, open));
  }
}
