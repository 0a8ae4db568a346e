//! A sampling request inside the ask dialog: a server, through the gateway, wants the agent's
//! model to write a reply. Before anything reaches the agent, the person sees what its model
//! would be given (the system prompt, every message with its role, the tools offered), the
//! token limit, the context the server asks the agent to add, and everything else the model is
//! sent (the tools whole, with the descriptions it reads as instructions; the model
//! preferences), and chooses Allow or Deny;
//! Escape and the close button deny too (the dialog answers `cancel`). All of it is the server's
//! text: shown as text (untrusted.ts), long parts clipped with "Show all". Allow sends the
//! request as sent, so it works only once every clipped part has been shown whole (core
//! refuses a request longer than can be shown at all).

import type { Answer } from "../bindings/Answer";
import type { Ask } from "../bindings/Ask";
import { el, append, uid } from "../dom";
import { clippedText, inlineText } from "../untrusted";

export type SamplingAsk = Extract<Ask, { kind: "sampling" }>;

export interface SamplingPanel {
  root: HTMLElement;
  /** Disabled while an answer is on its way. */
  buttons: HTMLButtonElement[];
  /** Allow. */
  acceptButtons: HTMLButtonElement[];
  initialFocus: HTMLElement;
}

export interface SamplingParts {
  /** Id for the one-sentence summary (the dialog's `aria-describedby`). */
  summaryId: string;
  /** Where answer errors show (the view's alert region). */
  errors: HTMLElement;
  /** A no (Deny): sent at once. */
  send: (answer: Answer) => void;
  /** A yes from a click: the view decides whether it counts. */
  accept: (event: Event, answer: Answer) => void;
  /** Everything the model would be given has been shown whole (called while building when
   * nothing is clipped). */
  shownWhole: () => void;
}

/** What `includeContext` asks of the agent, in words; null when it asks for nothing. */
function contextText(context: string | null): string | null {
  switch (context) {
    case null:
    case "none":
      return null;
    case "thisServer":
      return "It asks the agent to add what it has from its session with this server.";
    case "allServers":
      return "It asks the agent to add what it has from all of its servers, not only this one.";
    default:
      return `It asks for context "${context}".`;
  }
}

export function samplingPanel(ask: SamplingAsk, parts: SamplingParts): SamplingPanel {
  const { asker } = ask;
  const agent = asker.agent
    ? inlineText(asker.agent, 80, "agent-name")
    : el("em", { class: "agent-name" }, "the agent");
  const summary = el("p", { class: "ask-message sampling-summary", id: parts.summaryId },
    inlineText(asker.server, 80, "server-name"), " wants ", agent, "’s model to write a reply, of at most ",
    el("strong", {}, `${ask.maxTokens} tokens`), ". Allow sends the request below to the agent; what its model writes goes back to ",
    inlineText(asker.server, 80), ".");

  const root = el("div", { class: "sampling-panel" }, summary);
  // Said beside the buttons while a part is clipped: Allow waits for each "Show all".
  const revealId = uid("reveal-note");
  const revealNote = el("p", { class: "field-hint reveal-note", id: revealId },
    "Show all of every clipped part (above) to allow this request.");
  const alsoSent = ask.alsoSent ?? null;
  let unseen = ask.messages.length + (ask.systemPrompt ? 1 : 0) + (alsoSent !== null ? 1 : 0);
  let whole = false;
  let built = false;
  const allShown = () => {
    whole = true;
    revealNote.hidden = true;
    allow.removeAttribute("aria-describedby");
    parts.shownWhole();
  };
  /** The `onShownWhole` of one part: counted once, however often it is shown again. */
  const part = () => {
    let seen = false;
    return () => {
      if (seen) return;
      seen = true;
      if (--unseen === 0 && built && !whole) allShown();
    };
  };
  const context = contextText(ask.includeContext ?? null);
  if (context !== null) {
    append(root, el("p", { class: `field-hint sampling-context${ask.includeContext === "allServers" ? " warning" : ""}` },
      inlineText(context, 200)));
  }

  if (ask.systemPrompt) {
    const id = uid("sampling-system");
    append(root, el("section", { class: "sampling-system", attrs: { "aria-labelledby": id } },
      el("p", { class: "subhead", id }, "System prompt"),
      clippedText(ask.systemPrompt, { tag: "pre", chars: 600, lines: 8, class: "output", onShownWhole: part() })));
  }

  const messagesId = uid("sampling-messages");
  const list = el("ol", { class: "sampling-messages", attrs: { "aria-labelledby": messagesId } },
    ...ask.messages.map((m) => el("li", {},
      el("span", { class: "sampling-role badge" }, inlineText(m.role, 40)),
      clippedText(m.text, { tag: "pre", chars: 800, lines: 10, class: "output", onShownWhole: part() }))));
  append(root, el("section", { class: "sampling-conversation" },
    el("p", { class: "subhead", id: messagesId },
      ask.messages.length === 1 ? "Message" : `Messages (${ask.messages.length})`),
    ask.messages.length === 0 ? el("p", { class: "muted" }, "No messages.") : list));

  if (ask.tools.length > 0) {
    append(root, el("p", { class: "sampling-tools" }, "The model may call these tools of the server's: ",
      ...ask.tools.flatMap((t, i) => [i > 0 ? ", " : "", el("code", {}, inlineText(t, 81))]), "."));
  }

  if (alsoSent !== null) {
    const id = uid("sampling-also");
    append(root, el("section", { class: "sampling-also", attrs: { "aria-labelledby": id } },
      el("p", { class: "subhead", id }, "Also sent to the model"),
      clippedText(alsoSent, { tag: "pre", chars: 800, lines: 12, class: "output json", onShownWhole: part() })));
  }

  const deny = el("button", {
    class: "button",
    attrs: { type: "button" },
    on: { click: () => parts.send({ action: "decline" }) },
  }, "Deny");
  const allow = el("button", {
    class: "button primary",
    attrs: { type: "button" },
    on: { click: (event) => parts.accept(event, { action: "accept", content: null }) },
  }, "Allow");
  append(root, parts.errors, el("div", { class: "actions" }, revealNote, deny, allow));
  built = true;
  if (unseen === 0) allShown();
  else allow.setAttribute("aria-describedby", revealId);

  // Focus starts on Deny, as for a tool call: nothing to fill in, and a stray Enter or Space
  // must refuse, never allow.
  return { root, buttons: [deny, allow], acceptButtons: [allow], initialFocus: deny };
}
