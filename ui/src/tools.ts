//! A server's tools in the main window: name, title, description, annotation badges, and a Run
//! panel so the person can call a tool themselves: in a form rendered from the tool's input
//! schema by the question dialog's own field renderer, where the schema fits it, else (or on
//! request) as JSON. The backend checks the arguments against the tool's input schema before
//! anything goes out. A run may take a while
//! and may make the server ask something: the ask dialog then opens on top, and the result lands
//! here when the run returns. Meanwhile the panel shows the elapsed time and the server's
//! progress, and Cancel stops the run (the server is told, its open question withdrawn).

import type { ToolView } from "./bindings/ToolView";
import type { ToolRun } from "./bindings/ToolRun";
import type { RunProgress } from "./bindings/RunProgress";
import type { JsonValue } from "./bindings/serde_json/JsonValue";
import { el, append, replace, uid } from "./dom";
import { asAppError, commands, errorText } from "./ipc";
import { clippedText, inlineText, shortText } from "./untrusted";
import { buildField, type FieldControl } from "./ask/fields";

/** After this long without an answer, the app is asked whether a run reached it at all. */
const ARRIVAL_CHECK_MS = 5000;

export type RunFn = (server: string, tool: string, args: JsonValue, runId: string) => Promise<ToolRun>;

/** The panels waiting for progress, by run id. */
const progressOf = new Map<string, (event: RunProgress) => void>();

/** A run's progress from the backend (`run-progress`), to the panel that started it. */
export function onRunProgress(event: RunProgress): void {
  progressOf.get(event.runId)?.(event);
}

type JsonObject = { [key: string]: JsonValue };

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Badges for the annotations the server declared (hints only: they are the server's claims). */
function badges(annotations: JsonValue | null): string[] {
  if (!isObject(annotations)) return [];
  const out: string[] = [];
  if (annotations.readOnlyHint === true) out.push("read-only");
  if (annotations.destructiveHint === true) out.push("destructive");
  if (annotations.destructiveHint === false && annotations.readOnlyHint !== true) out.push("not destructive");
  if (annotations.idempotentHint === true) out.push("idempotent");
  if (annotations.openWorldHint === true) out.push("open world");
  if (annotations.openWorldHint === false) out.push("closed world");
  return out;
}

/** `{}`, or an object with a placeholder for each required property of the input schema. */
export function argumentSkeleton(schema: JsonValue): string {
  if (!isObject(schema)) return "{}";
  const properties = isObject(schema.properties) ? schema.properties : {};
  const required = Array.isArray(schema.required) ? schema.required : [];
  const out: JsonObject = Object.create(null); // a property named __proto__ is one like any other
  for (const name of required) {
    if (typeof name !== "string") continue;
    const prop = properties[name];
    out[name] = placeholder(isObject(prop) ? prop : {});
  }
  return Object.keys(out).length === 0 ? "{}" : JSON.stringify(out, null, 2);
}

function placeholder(prop: JsonObject): JsonValue {
  if (prop.default !== undefined) return prop.default;
  if (Array.isArray(prop.enum) && prop.enum.length > 0) return prop.enum[0];
  switch (prop.type) {
    case "string":
      return "";
    case "number":
    case "integer":
      return 0;
    case "boolean":
      return false;
    case "array":
      return [];
    case "object":
      return {};
    default:
      return null;
  }
}

export function toolCard(server: string, tool: ToolView, run: RunFn = commands.runTool): HTMLElement {
  const headingId = uid("tool");
  const head = el("div", { class: "tool-head" },
    el("h4", { class: "tool-name", id: headingId }, inlineText(tool.name, 120)));
  if (tool.title && tool.title !== tool.name) append(head, el("span", { class: "tool-title" }, inlineText(tool.title, 120)));
  const badgeList = badges(tool.annotations);
  for (const b of badgeList) {
    append(head, el("span", { class: `badge badge-${b.replace(/\W+/g, "-")}` }, b));
  }

  const card = el("article", { class: "tool", attrs: { "aria-labelledby": headingId } }, head);
  if (tool.description) append(card, clippedText(tool.description, { chars: 280, lines: 4, class: "tool-desc" }));

  const panelId = uid("run");
  const toggle = el("button", {
    class: "button small",
    attrs: { type: "button", "aria-expanded": "false", "aria-controls": panelId },
  }, "Run…");
  const panel = runPanel(server, tool, run, panelId);
  panel.hidden = true;
  toggle.addEventListener("click", () => {
    panel.hidden = !panel.hidden;
    toggle.setAttribute("aria-expanded", String(!panel.hidden));
    toggle.textContent = panel.hidden ? "Run…" : "Hide";
    if (!panel.hidden) {
      const first = panel.querySelector<HTMLElement>(".run-fields:not([hidden]) input, .run-fields:not([hidden]) select, textarea:not([hidden])");
      first?.focus();
    }
  });
  append(card, el("div", { class: "tool-actions" }, toggle), panel);
  return card;
}

function runPanel(server: string, tool: ToolView, run: RunFn, panelId: string): HTMLElement {
  const argsId = uid("args");
  const hintId = uid("args-hint");
  const textarea = el("textarea", {
    id: argsId,
    class: "json-input",
    attrs: { rows: 6, spellcheck: "false", autocomplete: "off", "aria-describedby": hintId },
  });
  textarea.value = argumentSkeleton(tool.inputSchema);
  const jsonLabel = el("label", { attrs: { for: argsId } }, "Arguments (JSON)");

  // The form, when the schema fits the dialog's field renderer. A run is the person's own
  // request, not a server's question: no secret warning here.
  const schemaForm = tool.form ?? null;
  const controls: FieldControl[] = (schemaForm?.fields ?? []).map((field) => buildField({ ...field, secret: false }));
  const fieldsBox = el("div", { class: "run-fields" }, ...controls.map((c) => c.root));
  if (schemaForm && controls.length === 0) append(fieldsBox, el("p", { class: "muted" }, "This tool takes no arguments."));
  let asJson = schemaForm === null;
  const jsonToggle = el("button", { class: "button small json-toggle", attrs: { type: "button" } }) as HTMLButtonElement;
  const showMode = () => {
    fieldsBox.hidden = asJson;
    textarea.hidden = !asJson;
    jsonLabel.hidden = !asJson;
    jsonToggle.textContent = asJson ? "Use the form" : "Write the arguments as JSON";
    jsonToggle.hidden = schemaForm === null;
  };
  jsonToggle.addEventListener("click", () => {
    if (!asJson) {
      // Carry what the form holds over to the JSON.
      const args: JsonObject = Object.create(null); // a property named __proto__ is one like any other
      for (const c of controls) {
        const reading = c.read();
        if (reading.present) args[c.field.name] = reading.value;
      }
      if (Object.keys(args).length > 0) textarea.value = JSON.stringify(args, null, 2);
    }
    asJson = !asJson;
    showMode();
    (asJson ? textarea : controls[0]?.focusTarget)?.focus();
  });
  showMode();
  const runButton = el("button", { class: "button primary small", attrs: { type: "submit" } }, "Run");
  const cancelButton = el("button", { class: "button small", attrs: { type: "button" } }, "Cancel") as HTMLButtonElement;
  cancelButton.hidden = true;
  const status = el("span", { class: "run-status", attrs: { role: "status" } });
  const elapsed = el("span", { class: "run-elapsed muted" });
  const bar = el("progress", { class: "run-progress", attrs: { "aria-label": `Progress of ${shortText(tool.name, 80)}` } }) as HTMLProgressElement;
  bar.hidden = true;
  const said = el("span", { class: "run-progress-message muted" });
  const result = el("div", { class: "run-result" });

  const form = el("form", { class: "run-panel", id: panelId, attrs: { "aria-label": `Run ${shortText(tool.name, 80)}`, novalidate: true } },
    fieldsBox,
    jsonLabel,
    textarea,
    el("p", { class: "field-hint", id: hintId }, "Checked against the tool's input schema before it runs. ", jsonToggle),
    el("div", { class: "actions start" }, runButton, cancelButton, status, elapsed),
    el("div", { class: "run-progress-row" }, bar, said),
    result);

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    let args: JsonValue;
    if (!asJson) {
      for (const c of controls) c.setError(null);
      const problems = controls.flatMap((c) => {
        const message = c.check();
        if (message) c.setError(message);
        return message ? [c] : [];
      });
      if (problems.length > 0) {
        replace(result, el("p", { class: "error-text" }, "Some fields need a look before the tool can run."));
        problems[0].focusTarget.focus();
        return;
      }
      const collected: JsonObject = Object.create(null); // a property named __proto__ is one like any other
      for (const c of controls) {
        const reading = c.read();
        if (reading.present) collected[c.field.name] = reading.value;
      }
      args = collected;
    } else {
      try {
        args = JSON.parse(textarea.value || "{}") as JsonValue;
      } catch (e) {
        replace(result, el("p", { class: "error-text" }, `Not valid JSON: ${errorText(e)}`));
        textarea.focus();
        return;
      }
    }
    if (!isObject(args)) {
      replace(result, el("p", { class: "error-text" }, "The arguments must be a JSON object, like {}."));
      textarea.focus();
      return;
    }
    runButton.disabled = true;
    status.textContent = "Running…";
    result.replaceChildren();
    const runId = crypto.randomUUID();
    const started = Date.now();
    elapsed.textContent = "";
    const ticker = window.setInterval(() => {
      elapsed.textContent = ` ${Math.round((Date.now() - started) / 1000)} s`;
    }, 1000);
    let cancelling = false;
    cancelButton.hidden = false;
    cancelButton.disabled = false;
    cancelButton.onclick = () => {
      cancelling = true;
      cancelButton.disabled = true;
      status.textContent = "Cancelling…";
      void commands.cancelRun(runId);
    };
    progressOf.set(runId, (event) => {
      bar.hidden = false;
      // Without a total the bar is indeterminate: the server only says it is moving.
      if (event.total !== null && event.total > 0) {
        bar.max = event.total;
        bar.value = Math.min(event.progress, event.total);
      } else {
        bar.removeAttribute("value");
      }
      if (event.message) replace(said, " ", inlineText(event.message, 200));
      else said.replaceChildren();
    });
    // The run ends once: with its result, or when the app says it never received it.
    let ended = false;
    const end = (): boolean => {
      if (ended) return false;
      ended = true;
      window.clearInterval(ticker);
      window.clearTimeout(arrival);
      progressOf.delete(runId);
      cancelButton.hidden = true;
      bar.hidden = true;
      said.replaceChildren();
      runButton.disabled = false;
      return true;
    };
    // A command the webview never delivered would leave "Running…" for ever: after a while
    // the app is asked whether the run reached it. If not, it never will (the app takes its
    // id, so a late arrival is refused), nothing was sent, and running again is safe.
    const arrival = window.setTimeout(() => {
      commands.runArrived(runId).then((arrived) => {
        if (arrived || !end()) return;
        status.textContent = "Not run: Countersign did not receive this run, so nothing was sent to the server. You can run it again.";
      }, () => {});
    }, ARRIVAL_CHECK_MS);
    run(server, tool.name, args, runId).then(
      (out) => {
        if (!end()) return;
        status.textContent = out.isError ? "Finished with an error." : "Done.";
        replace(result, ...renderRun(out));
      },
      (error: unknown) => {
        if (!end()) return;
        status.textContent = cancelling ? "Cancelled." : "Not run.";
        if (!cancelling) replace(result, ...renderRunError(error));
      },
    );
  });
  return form;
}

function renderRun(out: ToolRun): Node[] {
  const nodes: Node[] = [];
  if (out.isError) nodes.push(el("p", { class: "error-text" }, "The tool reported an error:"));
  const items = Array.isArray(out.content) ? out.content : [out.content];
  for (const item of items) {
    if (isObject(item) && item.type === "text" && typeof item.text === "string") {
      nodes.push(clippedText(item.text, { tag: "pre", chars: 4000, lines: 40, class: "output" }));
    } else {
      nodes.push(clippedText(JSON.stringify(item, null, 2), { tag: "pre", chars: 4000, lines: 40, class: "output json" }));
    }
  }
  if (items.length === 0) nodes.push(el("p", { class: "muted" }, "No content."));
  if (out.structuredContent !== null) {
    nodes.push(el("p", { class: "subhead" }, "Structured content"),
      clippedText(JSON.stringify(out.structuredContent, null, 2), { tag: "pre", chars: 4000, lines: 40, class: "output json" }));
  }
  return nodes;
}

function renderRunError(error: unknown): Node[] {
  const app = asAppError(error);
  if (app?.kind === "invalidArguments") {
    return [
      el("p", { class: "error-text" }, inlineText(app.message)),
      el("ul", { class: "error-list" }, ...app.errors.map((e) => el("li", {}, inlineText(e)))),
    ];
  }
  return [el("p", { class: "error-text" }, inlineText(errorText(error)))];
}
