//! A tool call's preview inside the approval dialog. When the tool's input schema has a boolean
//! `dryRun` (the reference filesystem server's `edit_file`), the person can have the gateway make
//! the same call once more with `dryRun: true` and read what the server answers (for `edit_file`,
//! a diff) before deciding. The Preview button is not a yes and never answers the question, but
//! it sends the agent's arguments to the server (a server could ignore `dryRun`), so it arms as
//! the yes buttons do: a click meant for something else as the dialog appears runs nothing. What comes back is the server's word, untrusted text
//! (untrusted.ts: never markup, invisible characters visible, long text clipped with "Show all"),
//! and the section says that a server could ignore `dryRun`.

import type { PreviewResult } from "../bindings/PreviewResult";
import { el, replace, uid } from "../dom";
import { asAppError, errorText } from "../ipc";
import { clippedText, inlineText } from "../untrusted";

/** The sentence beside the button: where the preview comes from and how far to trust it. */
export const PREVIEW_NOTE =
  "This preview comes from the server: it ran the same call with dryRun: true. A server could ignore dryRun.";

export interface PreviewSection {
  root: HTMLElement;
  button: HTMLButtonElement;
}

/** The Preview button and where its result shows; `run` makes the dry run (the dialog's
 * `preview_call`), or returns null when the press behind `event` may not run it (not armed). A
 * result that arrives after the question ended lands in a section no longer on screen. */
export function previewSection(run: (event: Event) => Promise<PreviewResult> | null): PreviewSection {
  const headingId = uid("call-preview");
  const noteId = uid("preview-note");
  const result = el("div", { class: "preview-result", attrs: { "aria-live": "polite" } });
  const button = el("button", {
    class: "button small preview-button",
    attrs: { type: "button", "aria-describedby": noteId },
  }, "Preview");

  let running = false;
  button.addEventListener("click", (event) => {
    if (running) return;
    const previewing = run(event);
    if (previewing === null) {
      event.preventDefault();
      return;
    }
    running = true;
    button.disabled = true;
    button.textContent = "Previewing…";
    replace(result, el("p", { class: "muted" }, "Asking the server for a dry run…"));
    previewing.then(
      (shown) => replace(result, ...previewNodes(shown)),
      (error) => replace(result, el("p", { class: "error-text preview-failed", attrs: { role: "alert" } },
        ...failureText(error))),
    ).finally(() => {
      running = false;
      button.disabled = false;
      button.textContent = "Preview again";
    });
  });

  const root = el("section", { class: "call-preview", attrs: { "aria-labelledby": headingId } },
    el("p", { class: "subhead", id: headingId }, "Preview"),
    el("p", { class: "field-hint preview-note", id: noteId }, PREVIEW_NOTE),
    el("div", { class: "preview-actions" }, button),
    result);
  return { root, button };
}

/** The server's answer as text: marked when it is an error, and when Countersign cut it. */
function previewNodes(shown: PreviewResult): Node[] {
  const nodes: Node[] = [];
  if (shown.isError) {
    nodes.push(el("p", { class: "error-text preview-error" }, "The server answered the dry run with an error:"));
  }
  if (shown.text === "") {
    nodes.push(el("p", { class: "muted" }, "The server's answer has no text."));
  } else {
    nodes.push(clippedText(shown.text, {
      tag: "pre",
      chars: 1200,
      lines: 14,
      class: `output preview-text${shown.isError ? " is-error" : ""}`,
    }));
  }
  if (shown.clipped) {
    nodes.push(el("p", { class: "field-hint" }, "The server's answer was longer than Countersign keeps; the rest was cut."));
  }
  return nodes;
}

/** Why there is no preview, in words; what the server or the transport said stays text. */
function failureText(error: unknown): Node[] {
  const app = asAppError(error);
  if (app?.kind === "preview") {
    switch (app.error.kind) {
      case "notOffered":
        return [document.createTextNode("No preview: this question has ended, or its tool takes no dryRun.")];
      case "gone":
        return [document.createTextNode("No preview: the server's session has ended.")];
      case "failed":
        return [document.createTextNode("The dry run failed: "), inlineText(app.error.message, 400)];
    }
  }
  return [document.createTextNode("No preview: "), inlineText(errorText(error), 400)];
}
