//! "Remember…" in the approval dialog: the person's choice beyond "once", for how long (this
//! agent's session, 15 minutes, 1 hour, until tomorrow, always) and for which calls (any
//! arguments, these exact arguments, every path argument under a folder, every URL argument on a
//! host),
//! then Allow or Deny with it. Hidden behind a disclosure button so the one-key defaults (Deny,
//! Allow once) stay as they were; usable with the keyboard alone (Tab between the two radio
//! groups, arrow keys within one, Enter on a button). Moments ("1 hour", "until tomorrow") are
//! worked out when the button is pressed, in the person's own time zone.
//!
//! The backend checks the choice against the call on screen (a folder must be absolute and hold
//! every path of the call; a host must be the host of every URL of the call) and refuses it
//! otherwise, and itself names the arguments a decision holds; the folder is checked here first
//! so the person hears about a typo at once.

import type { Answer } from "../bindings/Answer";
import type { Covering } from "../bindings/Covering";
import type { Lasting } from "../bindings/Lasting";
import type { Remember } from "../bindings/Remember";
import { el, append, replace, uid, type Child } from "../dom";
import { inlineText, visibleString } from "../untrusted";

export interface RememberParts {
  /** A no: sent at once. */
  send: (answer: Answer) => void;
  /** A yes from a click: the view decides whether it counts (arming). */
  accept: (event: Event, answer: Answer) => void;
  /** The call came in no agent session: "This agent's session" is not offered. */
  sessionless?: boolean;
}

export interface RememberPanel {
  /** The disclosure button and the panel it opens. */
  root: HTMLElement;
  toggle: HTMLButtonElement;
  allow: HTMLButtonElement;
  deny: HTMLButtonElement;
}

interface LastingChoice {
  value: string;
  label: string;
  make: (nowMs: number) => Lasting;
}

const MINUTE = 60_000;

export const LASTINGS: LastingChoice[] = [
  { value: "session", label: "This agent's session", make: () => ({ kind: "session" }) },
  { value: "15m", label: "15 minutes", make: (now) => ({ kind: "until", untilMs: now + 15 * MINUTE }) },
  { value: "1h", label: "1 hour", make: (now) => ({ kind: "until", untilMs: now + 60 * MINUTE }) },
  { value: "tomorrow", label: "Until tomorrow (midnight)", make: (now) => ({ kind: "until", untilMs: nextMidnight(now) }) },
  { value: "always", label: "Always", make: () => ({ kind: "always" }) },
];

/** The lastings the person may choose: without an agent session (a 2026-07-28 agent's calls
 * share one upstream with its other conversations), not "This agent's session". */
function lastings(parts: RememberParts): LastingChoice[] {
  return parts.sessionless === true ? LASTINGS.filter((l) => l.value !== "session") : LASTINGS;
}

/** The next local midnight after `nowMs`, in the person's time zone (where a day has no
 * midnight, the first moment of the next day). */
export function nextMidnight(nowMs: number): number {
  const d = new Date(nowMs);
  return new Date(d.getFullYear(), d.getMonth(), d.getDate() + 1, 0, 0, 0, 0).getTime();
}

/** An absolute path with `.` and `..` resolved and repeated / trailing slashes removed, as the
 * backend normalizes it; `null` when relative or climbing above the root. */
export function normalizePath(path: string): string | null {
  if (!path.startsWith("/")) return null;
  const parts: string[] = [];
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") {
      if (parts.length === 0) return null;
      parts.pop();
    } else {
      parts.push(part);
    }
  }
  return `/${parts.join("/")}`;
}

/** Whether `path` lies under (or is) `prefix`, both normalized. */
export function isUnder(path: string, prefix: string): boolean {
  return path === prefix || path.startsWith(prefix === "/" ? "/" : `${prefix}/`);
}

/** The folder holding `path` (normalized), `/` for the root and what is right under it. */
export function parentDir(normalized: string): string {
  const at = normalized.lastIndexOf("/");
  return at <= 0 ? "/" : normalized.slice(0, at);
}

export interface PathArgument {
  argument: string;
  /** Normalized; `null` when it climbs above the root (no folder can hold it). */
  path: string | null;
  parent: string;
}

export interface UrlArgument {
  argument: string;
  /** With its port when not the scheme's default (`localhost:3000`); empty when on no host. */
  host: string;
}

/** What a server that trims its input drops from its start, as core's `looks_like_path` reads
 * it: white space, controls, the byte order mark. */
const LEADING_SPACE = /^[\s\p{Cc}\uFEFF]*/u;

/** Text a server may take for a file path, as the backend judges it (`looks_like_path`):
 * absolute (anything starting with `/`, a comment's `/*` or `// ` too: `//etc` is `/etc` to the
 * kernel), from `~`, relative (`.`, `..`, `./`, `../`) or a `file:` address, whatever else it
 * holds and after any spaces or line breaks it starts with (a server that trims drops them); or,
 * on one line, a word with a `/` that is no URL. */
export function looksLikePath(text: string): boolean {
  const start = text.replace(LEADING_SPACE, "");
  if (start.startsWith("/") || start.startsWith("~") || start === "." || start === ".."
    || start.startsWith("./") || start.startsWith("../") || start.slice(0, 5).toLowerCase() === "file:") {
    return true;
  }
  if (/[\n\r]/.test(text) || /\s/u.test(text) || !text.includes("/")) return false;
  try {
    new URL(text);
    return false;
  } catch {
    return true;
  }
}

/** Every text of the call a server may read as a path (top-level strings, and the strings of
 * top-level arrays), each with its argument's name; `path` is `null` for one no folder can
 * hold (relative, or climbing above the root). */
export function pathArguments(args: unknown): PathArgument[] {
  return stringArguments(args).flatMap(([argument, value]) => {
    if (!looksLikePath(value)) return [];
    const path = normalizePath(value);
    return [{ argument, path, parent: path === null ? "/" : parentDir(path) }];
  });
}

/** The deepest folder holding all of `folders` (normalized). */
export function commonFolder(folders: string[]): string {
  const split = folders.map((f) => f.split("/").filter((p) => p !== ""));
  const common: string[] = [];
  for (let i = 0; split.length > 0 && split.every((parts) => i < parts.length && parts[i] === split[0][i]); i++) {
    common.push(split[0][i]);
  }
  return `/${common.join("/")}`;
}

/** Every text of the call that reads as a URL with a host (or a `file:` one), each with its
 * argument's name; `host` is empty for one that is not http(s), which no host decision holds. */
export function urlArguments(args: unknown): UrlArgument[] {
  return stringArguments(args).flatMap(([argument, value]) => {
    // The browser's parser drops tabs and line breaks, as core reads it: such a text is a URL
    // (and on no host, `readAlike`).
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      // Written as a web address, or without a scheme, it is one to core, on no host.
      return /^[\s\p{Cc}]*https?:\/\//iu.test(value) || looksLikeBareAddress(readAsUrl(value)) ? [{ argument, host: "" }] : [];
    }
    // `localhost:3000/x` parses as a URL of scheme `localhost:`.
    if (looksLikeBareAddress(readAsUrl(value))) return [{ argument, host: "" }];
    if (url.hostname === "" && url.protocol !== "file:") return [];
    const web = url.protocol === "http:" || url.protocol === "https:";
    // The host with its port when not the scheme's default (`localhost:3000`), as core's
    // `url_host` keeps and compares it: the browser's `host` leaves the default one out.
    return [{ argument, host: web && readAlike(value) ? url.host.toLowerCase() : "" }];
  });
}

/** An address written without a scheme, as core's `looks_like_bare_address` reads one: a host
 * (a name with a dot and a top-level domain of letters or `xn--`, perhaps ending in a dot;
 * `localhost`; an IPv4 address in any form readers take; a bracketed IPv6 one), perhaps after
 * `user@` or `user:password@`, then a path, query, fragment or `\`, or `:` and more; or alone
 * when it starts `www.` or is bracketed. Tools complete such text with `https://`, so no host
 * decision holds it. `text` is read as core reads it: spaces and controls around it, and tabs
 * and line breaks in it, dropped (`readAsUrl`). */
export function looksLikeBareAddress(text: string): boolean {
  if (text === "" || /[\s\p{Cc}]/u.test(text)) return false;
  const end = text.search(/[/?#\\]/);
  const authority = end < 0 ? text : text.slice(0, end);
  const rest = end < 0 ? "" : text.slice(end);
  let hostPort = authority;
  const at = authority.lastIndexOf("@");
  if (at >= 0) {
    const user = authority.slice(0, at);
    hostPort = authority.slice(at + 1);
    if (user === "" || !/^[\p{Alphabetic}\p{N}._\-:%+~!]+$/u.test(user)) return false;
  }
  if (hostPort.startsWith("[")) {
    const close = hostPort.indexOf("]");
    if (close < 0) return false;
    const address = hostPort.slice(1, close);
    return address.includes(":") && /^[0-9A-Fa-f:.]+$/.test(address);
  }
  const colon = hostPort.indexOf(":");
  let host = colon < 0 ? hostPort : hostPort.slice(0, colon);
  const port = colon < 0 ? "" : hostPort.slice(colon + 1);
  if (host.endsWith(".")) host = host.slice(0, -1);
  const labels = host.split(".");
  const number = (l: string) => /^0x/i.test(l) ? /^[0-9A-Fa-f]*$/.test(l.slice(2)) : /^[0-9]+$/.test(l);
  const ip = labels.length >= 2 && labels.length <= 4 && labels.every(number);
  const topLevel = (t: string) => /^\p{Alphabetic}{2,}$/u.test(t) || (t.length > 4 && t.slice(0, 4).toLowerCase() === "xn--");
  const named = labels.length >= 2
    && labels.every((l) => l !== "" && !l.startsWith("-") && /^[\p{Alphabetic}\p{N}_-]+$/u.test(l))
    && topLevel(labels[labels.length - 1]);
  if (!(ip || named || host.toLowerCase() === "localhost")) return false;
  return rest !== "" || port !== "" || (named && host.slice(0, 4).toLowerCase() === "www.");
}

/** Text as URL readers read it, as core's `looks_like_url` does: spaces and controls around
 * it, and tabs and line breaks in it, dropped. */
function readAsUrl(text: string): string {
  return text.replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, "").replace(/[\t\n\r]/g, "");
}

/** Whether every reader finds the same host in an http(s) URL, as core's `url_host` asks:
 * `http(s)://` then a plain authority. The browser's parser reads `http://a.example\@b.example/`
 * as on a.example where curl reads b.example, drops tabs, and takes `http:a.example`; no host
 * choice is offered for such a text (core would refuse it). */
export function readAlike(value: string): boolean {
  if (/[\s\p{Cc}]/u.test(value)) return false;
  const authority = /^https?:\/\/([^/?#]*)/i.exec(value)?.[1];
  return authority !== undefined && /^[\p{Alphabetic}\p{N}._\-:[\]]+$/u.test(authority);
}

/** The call's strings at any depth (as core reads them for a decision), by the name of the
 * top-level argument they are in. */
function stringArguments(args: unknown): [string, string][] {
  if (args === null || typeof args !== "object" || Array.isArray(args)) return [];
  const strings = (value: unknown): string[] =>
    typeof value === "string" ? [value]
      : value !== null && typeof value === "object" ? Object.values(value as object).flatMap(strings)
        : [];
  return Object.entries(args as Record<string, unknown>)
    .flatMap(([name, value]) => strings(value).map((text): [string, string] => [name, text]));
}

interface CoveringChoice {
  value: string;
  label: Child[];
  /** The covering, or a message saying what is wrong with the person's input. */
  make: () => Covering | { error: string; focus: HTMLElement };
  /** Shown under the radio (the folder's text field). */
  extra?: HTMLElement;
}

export function rememberPanel(args: unknown, parts: RememberParts): RememberPanel {
  const panelId = uid("remember");
  const toggle = el("button", {
    class: "link-button remember-toggle",
    attrs: { type: "button", "aria-expanded": "false", "aria-controls": panelId },
  }, "Remember…");

  const lastingName = uid("lasting");
  const lastingSet = el("fieldset", { class: "remember-set" },
    el("legend", {}, "For how long"),
    ...lastings(parts).map((choice, i) => radio(lastingName, choice.value, [choice.label], i === 0)));

  const coveringName = uid("covering");
  const choices: CoveringChoice[] = [
    { value: "exact", label: ["These exact arguments"], make: () => ({ kind: "exactArguments", arguments: "" }) },
    { value: "any", label: ["Any arguments"], make: () => ({ kind: "anyArguments" }) },
  ];
  // One choice holds every path of the call to the folder, and one every URL to the host: a
  // choice about `source` alone would let `destination` go anywhere.
  // The decision names one top-level string argument (the backend holds every other path or
  // URL of the call to the same folder or host).
  const topLevel = (name: string) => typeof (args as Record<string, unknown>)[name] === "string";
  const paths = pathArguments(args);
  const pathNames = [...new Set(paths.map((p) => p.argument))];
  const namedPath = paths.find((p) => topLevel(p.argument));
  if (namedPath && paths.every((p) => p.path !== null)) {
    const names = pathNames.map((n) => `“${visibleString(n)}”`).join(", ");
    const folder = commonFolder(paths.map((p) => p.parent));
    const dirText = el("span", { class: "untrusted mono" });
    dirText.textContent = visibleString(folder);
    const input = el("input", {
      class: "remember-folder",
      attrs: {
        type: "text",
        spellcheck: "false",
        autocomplete: "off",
        "aria-label": `Folder for ${names}`,
      },
    });
    input.value = folder;
    const value = "path";
    input.addEventListener("input", () => {
      dirText.textContent = visibleString(input.value);
      input.removeAttribute("aria-invalid");
      // Editing the folder chooses it.
      const own = panel.querySelector<HTMLInputElement>(`input[type=radio][value="${value}"]`);
      if (own) own.checked = true;
    });
    choices.push({
      value,
      label: [paths.length === 1 ? "Any path under " : "Any paths under ", dirText, " (",
        ...pathNames.flatMap((n, i) => [i > 0 ? ", " : null, inlineText(n, 60)]), ")"],
      extra: el("div", { class: "remember-extra" }, input),
      make: () => {
        const prefix = normalizePath(input.value.trim());
        if (prefix === null) {
          return { error: "The folder must be an absolute path, starting with /.", focus: input };
        }
        const outside = paths.find((p) => p.path !== null && !isUnder(p.path, prefix));
        if (outside?.path) {
          return { error: `${visibleString(outside.path)} is not under ${visibleString(prefix)}: choose a folder that holds it.`, focus: input };
        }
        return { kind: "pathUnder", argument: namedPath.argument, prefix, also: [] };
      },
    });
  }
  const urls = urlArguments(args);
  const urlNames = [...new Set(urls.map((u) => u.argument))];
  const namedUrl = urls.find((u) => topLevel(u.argument));
  if (namedUrl && urls[0].host !== "" && urls.every((u) => u.host === urls[0].host)) {
    choices.push({
      value: "url",
      label: [urls.length === 1 ? "Any URL on " : "Any URLs on ", inlineText(urls[0].host, 80, "mono"), " (",
        ...urlNames.flatMap((n, i) => [i > 0 ? ", " : null, inlineText(n, 60)]), ")"],
      make: () => ({ kind: "urlHost", argument: namedUrl.argument, host: namedUrl.host, also: [] }),
    });
  }
  const coveringSet = el("fieldset", { class: "remember-set" },
    el("legend", {}, "For which calls"),
    ...choices.map((c, i) => radio(coveringName, c.value, c.label, i === 0, c.extra)));

  const errorId = uid("remember-error");
  const error = el("p", { class: "field-error", id: errorId, attrs: { role: "alert", hidden: true } });

  const choose = (allow: boolean): Remember | null => {
    replace(error);
    error.hidden = true;
    const lastingValue = panel.querySelector<HTMLInputElement>(`input[name="${lastingName}"]:checked`)?.value;
    const coveringValue = panel.querySelector<HTMLInputElement>(`input[name="${coveringName}"]:checked`)?.value;
    const lasting = lastings(parts).find((l) => l.value === lastingValue);
    const covering = choices.find((c) => c.value === coveringValue)?.make();
    if (!lasting || !covering) return null;
    if ("error" in covering) {
      append(error, covering.error);
      error.hidden = false;
      covering.focus.setAttribute("aria-invalid", "true");
      covering.focus.setAttribute("aria-describedby", errorId);
      covering.focus.focus();
      return null;
    }
    return { allow, lasting: lasting.make(Date.now()), covering };
  };

  const deny = el("button", {
    class: "button",
    attrs: { type: "button" },
    on: {
      click: () => {
        const decision = choose(false);
        if (decision) parts.send({ action: "remember", decision });
      },
    },
  }, "Deny and remember");
  const allow = el("button", {
    class: "button",
    attrs: { type: "button" },
    on: {
      click: (event) => {
        const decision = choose(true);
        if (decision) parts.accept(event, { action: "remember", decision });
        else event.preventDefault();
      },
    },
  }, "Allow and remember");

  const panel = el("div", { class: "remember-panel", id: panelId, attrs: { hidden: true } },
    el("div", { class: "remember-sets" }, lastingSet, coveringSet),
    error,
    el("p", { class: "field-hint" },
      "Remembered for this agent, this tool as it is now and the server as it is configured now: if either changes, you are asked again. A remembered deny answers the agent at once. Revoke it in Settings."),
    el("div", { class: "remember-actions" }, deny, allow));

  toggle.addEventListener("click", () => {
    const open = panel.hidden;
    panel.hidden = !open;
    toggle.setAttribute("aria-expanded", String(open));
  });

  return { root: el("div", { class: "remember" }, toggle, panel), toggle, allow, deny };
}

function radio(name: string, value: string, label: Child[], checked: boolean, extra?: HTMLElement): HTMLElement {
  const input = el("input", { attrs: { type: "radio", name, value } });
  input.checked = checked;
  return el("div", { class: "remember-choice" }, el("label", {}, input, " ", ...label), extra ?? null);
}
