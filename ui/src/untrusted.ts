//! Showing text a server or an agent wrote: messages, titles, descriptions, option labels, tool
//! output, URLs. It is always text (see dom.ts), its direction is isolated so it cannot reorder
//! what surrounds it, bidi control characters are made visible (a U+202E can make "exe.txt" read
//! "txt.exe"), and so are other invisible characters (a zero-width space makes "rm" and "r​m" look
//! alike, tag characters carry whole hidden sentences), and long text is clipped with a button to
//! see all of it.

import { el, append, replace } from "./dom";

/** Bidi embedding, override, isolate and mark characters. */
const BIDI = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/u;

/**
 * Every character shown as its name: bidi controls, every format character (`\p{Cf}`: zero-width
 * space and joiners, word joiner and invisible operators, soft hyphen, BOM, U+180E, tag
 * characters, interlinear annotation), control characters other than tab and line breaks, the
 * line and paragraph separators U+2028/U+2029 (which break a line where the clip counts none), and
 * the blanks and selectors that render as nothing (combining grapheme joiner, Hangul fillers,
 * Khmer inherent vowels, Mongolian free variation selectors, variation selectors except the
 * text/emoji presentation ones U+FE0E/U+FE0F that ordinary emoji carry).
 */
const SHOWN_AS_NAME =
  /[\p{Cf}\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\u2028\u2029\u034F\u115F\u1160\u17B4\u17B5\u180B-\u180F\u3164\uFE00-\uFE0D\uFFA0\u{E0100}-\u{E01EF}]/gu;

/** Whether one character is shown as its name (`SHOWN_AS_NAME` without its global state). */
const SHOWN_AS_ONE_NAME = new RegExp(SHOWN_AS_NAME.source, "u");

/** `⟨U+202E⟩` for one character. */
export function codePointName(ch: string): string {
  const cp = ch.codePointAt(0) ?? 0;
  return `⟨U+${cp.toString(16).toUpperCase().padStart(4, "0")}⟩`;
}

/** The text as a plain string with invisible characters replaced by their names (for `title`,
 * options). */
export function visibleString(text: string): string {
  return text.replace(SHOWN_AS_NAME, codePointName);
}

/** The text as DOM: text nodes, with each invisible character shown as a marked-up `⟨U+202E⟩`. */
export function visibleText(text: string): DocumentFragment {
  const frag = document.createDocumentFragment();
  let last = 0;
  for (const match of text.matchAll(SHOWN_AS_NAME)) {
    const at = match.index ?? 0;
    append(frag, text.slice(last, at));
    const what = BIDI.test(match[0]) ? "invisible bidi control character" : "invisible character";
    append(frag, el("span", { class: "ctrl", attrs: { title: what } }, codePointName(match[0])));
    last = at + match[0].length;
  }
  append(frag, text.slice(last));
  return frag;
}

/** Cuts to at most `max` code points, adding "…" when cut. Invisible characters are made visible
 * first. */
export function shortText(text: string, max: number): string {
  const shown = visibleString(text);
  if (Array.from(shown).length <= max) return shown;
  // Cut between characters of the original, so a name like ⟨U+202E⟩ is never cut in half.
  let out = "";
  let length = 0;
  for (const ch of text) {
    const piece = visibleString(ch);
    const size = Array.from(piece).length;
    if (length + size > max - 1) break;
    out += piece;
    length += size;
  }
  return `${out}…`;
}

export interface ClipOptions {
  /** Code points shown before "Show all". */
  chars?: number;
  /** Lines shown before "Show all". */
  lines?: number;
  /** Element for the text itself; `p` by default, `pre` keeps line breaks and spaces. */
  tag?: "p" | "div" | "pre";
  id?: string;
  class?: string;
  /** Called the first time the whole text is shown (at once when it is not clipped). */
  onShownWhole?: () => void;
}

/**
 * A block of untrusted text, clipped when long, with a "Show all" / "Show less" button.
 * The text element gets `id` so a dialog can point `aria-describedby` at it.
 */
export function clippedText(text: string, options: ClipOptions = {}): HTMLElement {
  const chars = options.chars ?? 600;
  const lines = options.lines ?? 10;
  const body = el(options.tag ?? "p", {
    class: `untrusted ${options.class ?? ""}`.trim(),
    id: options.id,
    attrs: { dir: "auto" },
  });
  const wrap = el("div", { class: "clip" }, body);

  const points = Array.from(text);
  // A lone carriage return breaks a line in a `pre` too.
  const lineBreaks = text.split(/\r\n|\r|\n/);
  let cut = text;
  if (lineBreaks.length > lines) cut = lineBreaks.slice(0, lines).join("\n");
  // Counted as shown: a character shown by its name takes the name's room on screen.
  const cutPoints = Array.from(cut);
  let shown = 0;
  let end = 0;
  for (; end < cutPoints.length; end++) {
    shown += SHOWN_AS_ONE_NAME.test(cutPoints[end]) ? codePointName(cutPoints[end]).length : 1;
    if (shown > chars) break;
  }
  if (end < cutPoints.length) cut = cutPoints.slice(0, end).join("");
  if (cut === text) {
    append(body, visibleText(text));
    options.onShownWhole?.();
    return wrap;
  }

  let expanded = false;
  let watched = false;
  const toggle = el("button", {
    class: "link-button",
    attrs: { type: "button", "aria-expanded": "false" },
  }, "Show all");
  const render = () => {
    replace(body, visibleText(expanded ? text : cut), expanded ? null : "…");
    body.classList.toggle("expanded", expanded);
    toggle.textContent = expanded ? "Show less" : `Show all (${points.length} characters)`;
    toggle.setAttribute("aria-expanded", String(expanded));
    const shownWhole = options.onShownWhole;
    if (expanded && shownWhole !== undefined && !watched) {
      watched = true;
      onceSeenToEnd(body, shownWhole);
    }
  };
  toggle.addEventListener("click", () => {
    expanded = !expanded;
    render();
  });
  render();
  append(wrap, toggle);
  return wrap;
}

/** Calls `then` once the end of `box` has been in view: at once when it does not scroll, else
 * once it is scrolled to its end. Text opened in a box that scrolls (a long call's arguments,
 * shown whole at most 24em high) is not seen whole by opening it: the key that matters can sit
 * last, below the fold. */
export function onceSeenToEnd(box: HTMLElement, then: () => void): void {
  let done = false;
  const check = (): void => {
    // Not on screen (hidden, or inside something hidden): nothing of it is seen.
    if (done || box.hidden || !box.isConnected || box.getClientRects().length === 0) return;
    if (box.scrollTop + box.clientHeight >= box.scrollHeight - 2) {
      done = true;
      box.removeEventListener("scroll", check);
      resized.disconnect();
      then();
    }
  };
  // Checked again whenever the box changes size: shown again, or reflowed so that it no
  // longer scrolls (a wider window), where no scroll would ever come.
  const resized = new ResizeObserver(check);
  resized.observe(box);
  box.addEventListener("scroll", check);
  requestAnimationFrame(check);
}

/** An inline span of untrusted text, isolated and with visible invisible characters. */
export function inlineText(text: string, max?: number, cls?: string): HTMLSpanElement {
  const span = el("span", { class: `untrusted ${cls ?? ""}`.trim(), attrs: { dir: "auto" } });
  if (max !== undefined && Array.from(text).length > max) {
    span.textContent = shortText(text, max);
    span.setAttribute("title", visibleString(text));
  } else {
    append(span, visibleText(text));
  }
  return span;
}
