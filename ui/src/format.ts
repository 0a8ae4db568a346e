//! Sentences for the person, made from backend values: endpoints, session states, outcomes,
//! withdrawal reasons, times. Pure functions, no DOM.

import type { AskKind } from "./bindings/AskKind";
import type { CancelReason } from "./bindings/CancelReason";
import type { Covering } from "./bindings/Covering";
import type { Lasting } from "./bindings/Lasting";
import type { Remember } from "./bindings/Remember";
import type { Endpoint } from "./bindings/Endpoint";
import type { Outcome } from "./bindings/Outcome";
import type { SessionState } from "./bindings/SessionState";

/** How the server is reached, short: the command it runs, or the host it lives on. */
export function endpointSummary(endpoint: Endpoint): string {
  return endpoint.kind === "stdio" ? endpoint.command : endpoint.host;
}

/** "runs <command>" / "at <host>". */
export function endpointPhrase(endpoint: Endpoint): { label: string; value: string } {
  return endpoint.kind === "stdio"
    ? { label: "runs", value: endpoint.command }
    : { label: "at", value: endpoint.host };
}

/** Why an ask went away without the person's answer, as the notice shows it. */
export function reasonText(reason: CancelReason): string {
  switch (reason) {
    case "server":
      return "The server withdrew this question.";
    case "timeout":
      return "This question timed out.";
    case "agent":
      return "The agent cancelled the call this question belonged to.";
    case "agentGone":
      return "The agent disconnected.";
    case "disconnect":
      return "The server disconnected.";
    case "shutdown":
      return "Countersign is quitting.";
    case "auditFailed":
      return "Countersign could not write its audit log, so the answer was no.";
    case "person":
      return "The question was cancelled.";
    case "revoked":
      return "You revoked the token of the agent that asked.";
    case "paused":
      return "You paused the gateway, which stopped the call that asked.";
  }
}

/** An outcome in a few words, for history rows and notices about answers given elsewhere.
 * A tool call's outcomes are worded as approvals (an accept allows it once, anything but an
 * allow denies it). */
export function outcomeText(outcome: Outcome | null, kind?: AskKind["kind"]): string {
  if (outcome === null) return "No outcome recorded";
  const call = kind === "toolCall";
  switch (outcome.outcome) {
    case "accepted":
      return call ? "Allowed once" : kind === "sampling" ? "Allowed" : "Accepted";
    case "alwaysAllowed":
      return "Always allowed";
    case "remembered":
      return `${outcome.decision.allow ? "Allowed" : "Denied"} and remembered: ${rememberText(outcome.decision)}`;
    case "declined":
      return call || kind === "sampling" ? "Denied" : "Declined";
    case "cancelled":
      if (outcome.reason === "person") return call ? "Denied (dismissed)" : "Cancelled";
      return `Cancelled: ${reasonText(outcome.reason)}`;
  }
}

/** How long a remembered decision lasts: "for the agent's session", "until <local time>", "always". */
export function lastingText(lasting: Lasting): string {
  switch (lasting.kind) {
    case "session":
      return "for the agent's session";
    case "until":
      return `until ${dateTime(lasting.untilMs)}`;
    case "always":
      return "always";
  }
}

/** Which calls a remembered decision covers, in words. Contains text the agent wrote (argument
 * names and values): show it as text (inlineText), never as markup. */
export function coveringText(covering: Covering): string {
  switch (covering.kind) {
    case "anyArguments":
      return covering.alsoSent ? `any arguments, with ${clipped(covering.alsoSent, 120)} also sent` : "any arguments";
    case "exactArguments":
      return covering.arguments === "" ? "these exact arguments" : `exactly ${covering.arguments}`;
    case "pathUnder":
      return `${argumentNames(covering)}: any path under ${covering.prefix}`;
    case "urlHost":
      return `${argumentNames(covering)}: any URL on ${covering.host}`;
  }
}

/** `text` cut to `max` characters (code points), marked when cut: the agent wrote it. */
function clipped(text: string, max: number): string {
  const chars = [...text];
  return chars.length > max ? `${chars.slice(0, max).join("")}…` : text;
}

/** “source”, “destination”: the arguments a path or host decision holds. */
function argumentNames(covering: { argument: string; also?: string[] }): string {
  return [covering.argument, ...(covering.also ?? [])].map((name) => `“${name}”`).join(", ");
}

/** "for the agent's session, any arguments". */
export function rememberText(decision: Remember): string {
  return `${lastingText(decision.lasting)}, ${coveringText(decision.covering)}`;
}

export function stateLabel(state: SessionState): string {
  switch (state.state) {
    case "connecting":
      return "Connecting…";
    case "ready":
      return "Ready";
    case "failed":
      return "Failed";
    case "reconnecting":
      return `Reconnecting (attempt ${state.attempt})`;
    case "signInRequired":
      return "Sign-in needed";
    case "stopped":
      return "Stopped";
  }
}

/** The longer explanation shown beside the label, when there is one. */
export function stateDetail(state: SessionState): string | null {
  switch (state.state) {
    case "ready": {
      const who = [state.serverName, state.serverVersion].filter((s) => s).join(" ");
      return `${who ? `${who}, ` : ""}protocol ${state.protocolVersion}`;
    }
    case "failed":
      return state.reason;
    case "reconnecting":
      return `${state.reason} — next try in ${seconds(state.nextInMs)}`;
    case "signInRequired":
      return state.reason;
    default:
      return null;
  }
}

function seconds(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 60 ? `${s} s` : `${Math.round(s / 60)} min`;
}

const timeFormat = new Intl.DateTimeFormat(undefined, { timeStyle: "medium" });
const dateTimeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

/** Local time of day for a Unix-epoch millisecond timestamp. */
export function clockTime(ms: number): string {
  return shown(ms, timeFormat);
}

/** The time alone when `ms` is today, else the date and time: a question that waits until
 * tomorrow must not read as closing later today. */
export function deadlineTime(ms: number, nowMs: number = Date.now()): string {
  return new Date(ms).toDateString() === new Date(nowMs).toDateString() ? clockTime(ms) : dateTime(ms);
}

/** Local date and time for a Unix-epoch millisecond timestamp. */
export function dateTime(ms: number): string {
  return shown(ms, dateTimeFormat);
}

/** `ms` formatted, or a dash for a moment no date can hold: a line of the log read as
 * History (anyone who can write the file can write any number there) must not stop the page
 * from drawing. */
function shown(ms: number, format: Intl.DateTimeFormat): string {
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? "—" : format.format(date);
}

export function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}
