//! A tool-call approval inside the ask dialog: an agent called a tool through the gateway and
//! policy says the person decides. It says who calls (the agent), where (the server and how it is
//! reached), what (the tool's name and title, its description, the server's annotations as
//! unverified hints, the arguments as JSON), what changed in the tool since the person last
//! decided about it (when a remembered decision no longer applies because of that), and offers
//! Allow once / Always allow / Deny, plus "Remember…" (remember.ts) for a decision with a scope,
//! and Preview (preview.ts) when the tool takes a boolean `dryRun`;
//! Escape and the close button deny too (the dialog answers `cancel`). The agent is named by its
//! token (the person named it); the name it gives itself is shown beside, never trusted. Everything here that the server or
//! the agent wrote is untrusted text (untrusted.ts): never markup, invisible characters visible,
//! long text clipped with "Show all".
//!
//! The arguments are shown from the backend's `argumentsText`, the text that will be forwarded,
//! never by re-serializing the parsed `arguments`: JavaScript numbers round (9007199254740993
//! would read 9007199254740992). Fields the call carries beyond its arguments (a vendor's, a newer
//! revision's), which go to the server too, are shown apart, from `alsoSentText`, under "Also sent
//! with the call". When either text is clipped, Allow works only once both have been shown whole.

import type { Answer } from "../bindings/Answer";
import type { Ask } from "../bindings/Ask";
import type { PreviewResult } from "../bindings/PreviewResult";
import { el, append, uid } from "../dom";
import { endpointPhrase } from "../format";
import { clippedText, inlineText } from "../untrusted";
import { previewSection } from "./preview";
import { rememberPanel } from "./remember";

export type ToolCallAsk = Extract<Ask, { kind: "toolCall" }>;

/** "Always allow": remembered for good, whatever the arguments (until revoked, or the tool changes);
 * fields beyond the arguments, if the call carries any, only as they are now (the backend keeps them). */
const ALWAYS_ALLOW: Answer = {
  action: "remember",
  decision: { allow: true, lasting: { kind: "always" }, covering: { kind: "anyArguments" } },
};

export interface ToolCallPanel {
  /** Everything below the dialog's header. */
  root: HTMLElement;
  /** Disabled while an answer is on its way. */
  buttons: HTMLButtonElement[];
  /** Allow once, Always allow and Allow and remember. */
  acceptButtons: HTMLButtonElement[];
  /** Buttons that are no yes but wait for the arming too (Preview). */
  armedButtons: HTMLButtonElement[];
  initialFocus: HTMLElement;
}

export interface ToolCallParts {
  /** Id for the one-sentence summary (the dialog's `aria-describedby`). */
  summaryId: string;
  /** Where answer errors show (the view's alert region). */
  errors: HTMLElement;
  /** A no (Deny): sent at once. */
  send: (answer: Answer) => void;
  /** A yes from a click: the view decides whether it counts. */
  accept: (event: Event, answer: Answer) => void;
  /** The arguments have been shown whole (called while building when they are not clipped). */
  shownWhole: () => void;
  /** The same call with `dryRun: true` (preview.ts), offered when `ask.preview`; answers
   * nothing. Null when the press behind `event` may not run it (the view is not armed). */
  preview: (event: Event) => Promise<PreviewResult> | null;
}

/** The agent's name as the person reads it, or `unnamed` in its place: the backend sets the name
 * for every tool call, but an agent may send an empty one. */
function agentText(agent: string | null, cls: string, unnamed: string): Node {
  return agent ? inlineText(agent, 80, cls) : el("em", { class: cls }, unnamed);
}

/** The agent's token name, and beside it the name it calls itself when that differs. */
function agentWithDeclared(asker: ToolCallAsk["asker"], unnamed: string): Node[] {
  const out = [agentText(asker.agent, "agent-name", unnamed)];
  const declared = asker.declared ?? null;
  if (declared !== null && declared !== "" && declared !== asker.agent) {
    out.push(el("span", { class: "declared muted" }, " (calls itself ", inlineText(declared, 80, "declared-name"), ")"));
  }
  return out;
}

export function toolCallPanel(ask: ToolCallAsk, parts: ToolCallParts): ToolCallPanel {
  const { asker } = ask;
  const title = ask.title ?? annotationTitle(ask.annotations);

  const summary = el("p", { class: "ask-message call-summary", id: parts.summaryId },
    agentText(asker.agent, "agent-name", "An agent that gave no name"), " wants to run ",
    el("code", { class: "tool-name" }, inlineText(ask.tool, 80)),
    " on ", inlineText(asker.server, 80, "server-name"), ".",
    ask.serverChanged === true
      ? " This server is configured differently since you last decided about this tool."
      : (ask.changed ?? []).length > 0 ? " The tool changed since you last decided about it." : null,
    ask.unlisted === true ? " The server did not list a tool by this name." : null);

  const where = endpointPhrase(asker.endpoint);
  const toolCell = el("dd", {},
    el("code", { class: "tool-name" }, inlineText(ask.tool, 120)),
    title && title !== ask.tool ? el("span", { class: "tool-title" }, " — ", inlineText(title, 160)) : null);
  if (ask.description) {
    append(toolCell, clippedText(ask.description, { chars: 400, lines: 6, class: "call-desc" }));
  }
  const facts = el("dl", { class: "call-facts" },
    el("dt", {}, "Agent"), el("dd", {}, ...agentWithDeclared(asker, "(no name given)")),
    el("dt", {}, "Server"), el("dd", {},
      inlineText(asker.server, 120, "server-name"),
      el("span", { class: "muted" }, ` ${where.label} `, inlineText(where.value, 200, "endpoint"))),
    el("dt", {}, "Tool"), toolCell);

  const root = el("div", { class: "call-panel" }, summary, unlistedSection(ask), serverChangedSection(ask, where), changedSection(ask), facts);

  const hints = annotationHints(ask.annotations);
  if (hints.length > 0) {
    const hintsLabel = uid("call-hints");
    append(root, el("section", { class: "call-hints", attrs: { "aria-labelledby": hintsLabel } },
      el("p", { class: "subhead", id: hintsLabel }, "The server says:"),
      el("ul", {}, ...hints.map((h) => el("li", {}, el("span", { class: `badge ${h.badge}` }, h.label), ` ${h.detail}`))),
      el("p", { class: "field-hint" }, "These are the server's own claims about its tool; nothing has checked them.")));
  }

  const noteId = uid("always-note");
  const note = el("p", { class: "field-hint always-note", id: noteId },
    "“Always allow” is remembered for ", agentText(asker.agent, "agent-name", "this unnamed agent"), " running ",
    el("code", {}, inlineText(ask.tool, 80)), " on ", inlineText(asker.server, 80),
    ": it runs without asking from then on (unless the tool or how the server is configured changes), until you revoke it in Settings.");
  // Said beside the buttons while the arguments are clipped: Allow waits for "Show all".
  const revealId = uid("reveal-note");
  const revealNote = el("p", { class: "field-hint reveal-note", id: revealId },
    ask.alsoSentText
      ? "Show all of the arguments and of what is also sent (above) to allow this call."
      : "Show all of the arguments (above) to allow this call.");

  const deny = el("button", {
    class: "button",
    attrs: { type: "button" },
    on: { click: () => parts.send({ action: "decline" }) },
  }, "Deny");
  const always = el("button", {
    class: "button",
    attrs: { type: "button", "aria-describedby": `${revealId} ${noteId}` },
    on: { click: (event) => parts.accept(event, ALWAYS_ALLOW) },
  }, "Always allow");
  const once = el("button", {
    class: "button primary",
    attrs: { type: "button", "aria-describedby": revealId },
    on: { click: (event) => parts.accept(event, { action: "accept", content: null }) },
  }, "Allow once");

  const remember = rememberPanel(ask.arguments, { send: parts.send, accept: parts.accept, sessionless: ask.sessionless === true });
  remember.allow.setAttribute("aria-describedby", revealId);

  const argsLabel = uid("call-args");
  const argsText = ask.argumentsText ? ask.argumentsText : argumentsText(ask.arguments);
  const alsoSent = ask.alsoSentText ?? null;
  // Until shown whole, the arguments (and what is sent besides) are what the person has not seen:
  // the note says so and describes the Allow buttons.
  let unseen = alsoSent === null ? 1 : 2;
  let whole = false;
  const shownWhole = () => {
    if (whole || --unseen > 0) return;
    whole = true;
    revealNote.hidden = true;
    once.removeAttribute("aria-describedby");
    remember.allow.removeAttribute("aria-describedby");
    always.setAttribute("aria-describedby", noteId);
    parts.shownWhole();
  };
  append(root, el("section", { class: "call-args", attrs: { "aria-labelledby": argsLabel } },
    el("p", { class: "subhead", id: argsLabel }, "Arguments"),
    argsText === null
      ? el("p", { class: "muted" }, "No arguments.")
      : clippedText(argsText, { tag: "pre", chars: 1200, lines: 14, class: "output json", onShownWhole: shownWhole })));
  if (argsText === null) shownWhole();
  if (alsoSent !== null) {
    const alsoLabel = uid("call-also");
    append(root, el("section", { class: "call-args call-also-sent", attrs: { "aria-labelledby": alsoLabel } },
      el("p", { class: "subhead", id: alsoLabel }, "Also sent with the call"),
      el("p", { class: "field-hint" },
        "Fields beyond the tool's arguments, which the agent added and the server receives too."),
      clippedText(alsoSent, { tag: "pre", chars: 600, lines: 8, class: "output json", onShownWhole: shownWhole })));
  }
  const preview = ask.preview === true ? previewSection(parts.preview) : null;
  if (preview !== null) append(root, preview.root);
  // The narrower yes first: Tab from Deny reaches "Allow once", never the standing allow.
  append(root, parts.errors, remember.root, el("div", { class: "actions" }, revealNote, note, deny, once, always));

  // Focus starts on Deny, the safe default: there is nothing to fill in, and this dialog can open
  // while the person is typing elsewhere, so a stray Enter or Space must refuse, never allow.
  return {
    root,
    buttons: [deny, once, always, remember.deny, remember.allow],
    acceptButtons: [once, always, remember.allow],
    armedButtons: preview === null ? [] : [preview.button],
    initialFocus: deny,
  };
}

/** Said when the server's list of tools has no tool by the name the agent called (or the list
 * could not be read): a server that reads names loosely (without regard to case, say) may run
 * another tool under it, and nothing the server said describes it. */
function unlistedSection(ask: ToolCallAsk): HTMLElement | null {
  if (ask.unlisted !== true) return null;
  const headingId = uid("unlisted");
  return el("section", { class: "call-changed", attrs: { "aria-labelledby": headingId } },
    el("p", { class: "subhead", id: headingId }, "Not a tool this server listed"),
    el("p", { class: "field-hint" },
      "The server's list of tools has no ", el("code", {}, inlineText(ask.tool, 120)),
      ", or Countersign could not read its list. The agent chose this name; a server that reads names loosely (without regard to case, say) may run another of its tools under it."));
}

/** Said when a remembered decision about this tool was given for the server configured
 * differently under the same name (another command, arguments, environment, directory, URL or
 * headers): it may be another server, so the decision no longer applies. */
function serverChangedSection(ask: ToolCallAsk, where: { label: string; value: string }): HTMLElement | null {
  if (ask.serverChanged !== true) return null;
  const headingId = uid("server-changed");
  return el("section", { class: "call-changed", attrs: { "aria-labelledby": headingId } },
    el("p", { class: "subhead", id: headingId }, "This server is configured differently since you last decided"),
    el("p", { class: "field-hint" },
      "Your remembered decision was for ", inlineText(ask.asker.server, 80), " as it was configured then. Its command, arguments, environment, directory, address or headers are different now, so it may be another server, and the decision no longer applies. It now ",
      where.label, " ", el("code", {}, inlineText(where.value, 200)), "."));
}

/** What changed in the tool's definition since the person's remembered decision about it: each
 * field with its old and new value, as text (the server wrote them), clipped when long. */
function changedSection(ask: ToolCallAsk): HTMLElement | null {
  const changed = ask.changed ?? [];
  if (changed.length === 0) return null;
  const headingId = uid("call-changed");
  return el("section", { class: "call-changed", attrs: { "aria-labelledby": headingId } },
    el("p", { class: "subhead", id: headingId }, "This tool changed since you last decided about it"),
    el("p", { class: "field-hint" },
      "Your remembered decision no longer applies: the server changed what the tool is. Read what changed before you decide again."),
    el("dl", { class: "changed-fields" }, ...changed.flatMap((change) => [
      el("dt", {}, inlineText(change.field, 80)),
      el("dd", {},
        el("div", { class: "changed-before" }, el("span", { class: "changed-label" }, "Before:"),
          clippedText(change.before, { tag: "pre", chars: 400, lines: 6, class: "output json" })),
        el("div", { class: "changed-after" }, el("span", { class: "changed-label" }, "Now:"),
          clippedText(change.after, { tag: "pre", chars: 400, lines: 6, class: "output json" }))),
    ])));
}

/** The arguments as indented JSON, or `null` when the call sent none. */
export function argumentsText(args: unknown): string | null {
  if (args === undefined || args === null) return null;
  try {
    return JSON.stringify(args, null, 2) ?? null;
  } catch {
    return String(args);
  }
}

interface Hint {
  label: string;
  detail: string;
  badge: string;
}

/** The MCP annotations the server declared, in words. Only hints: a server that is not trusted
 * may say anything, and the spec's defaults (not read-only, destructive) apply when it is silent. */
export function annotationHints(annotations: Record<string, unknown> | null): Hint[] {
  if (annotations === null || typeof annotations !== "object") return [];
  const a = annotations;
  const out: Hint[] = [];
  if (a.readOnlyHint === true) {
    out.push({ label: "read-only", detail: "it changes nothing", badge: "badge-read-only" });
  } else if (a.readOnlyHint === false) {
    out.push({ label: "not read-only", detail: "it may change things", badge: "" });
  }
  if (a.readOnlyHint !== true) {
    if (a.destructiveHint === true) {
      out.push({ label: "destructive", detail: "it may delete or overwrite things", badge: "badge-destructive" });
    } else if (a.destructiveHint === false) {
      out.push({ label: "not destructive", detail: "it only adds things", badge: "" });
    }
    if (a.idempotentHint === true) {
      out.push({ label: "idempotent", detail: "running it again with the same arguments changes nothing more", badge: "" });
    }
  }
  if (a.openWorldHint === true) {
    out.push({ label: "open world", detail: "it reaches the outside world (other services, the internet)", badge: "" });
  } else if (a.openWorldHint === false) {
    out.push({ label: "closed world", detail: "it works only within its own data", badge: "" });
  }
  return out;
}

function annotationTitle(annotations: Record<string, unknown> | null): string | null {
  const t = annotations?.title;
  return typeof t === "string" && t !== "" ? t : null;
}
