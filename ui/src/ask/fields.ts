//! One native input per field of an elicitation form, with its label, description, hint and error
//! slot, and the two things the form needs from it: is it valid as entered (native constraint
//! validation first), and what goes into the answer. An optional field left empty is left out of
//! the answer altogether, never sent as `null` or `""`.
//!
//! A field the backend flagged `secret` (a password, key, token, card number...) says that MCP
//! forbids servers to ask for it and that what is typed goes to the server, and is masked with a
//! Show toggle. Its value is never kept by the backend's log; here it lives only in the input.

import type { Field } from "../bindings/Field";
import type { Choice } from "../bindings/Choice";
import type { JsonValue } from "../bindings/serde_json/JsonValue";
import { el, append, uid } from "../dom";
import { clippedText, inlineText, shortText, visibleString } from "../untrusted";
import { localInputToRfc3339, localZoneHint, rfc3339ToLocalInput } from "./datetime";

export type Reading = { present: false } | { present: true; value: JsonValue };

export interface FieldControl {
  readonly field: Field;
  /** The field's label as shown (title, else name), as plain text for messages. */
  readonly label: string;
  readonly root: HTMLElement;
  /** Where focus goes when this is the first field, or the first one with an error. */
  readonly focusTarget: HTMLElement;
  /** A message when the entry breaks a constraint (required, length, bounds, format, count), else null. */
  check(): string | null;
  /** Shows the browser's own bubble for the first problem (after `check` found one). */
  report(): void;
  /** The value to send, or that the field is left out. Only meaningful after `check` passed. */
  read(): Reading;
  /** Shows (or with null clears) a message next to the field. */
  setError(message: string | null): void;
}

type Native = HTMLInputElement | HTMLSelectElement;

/** Option labels are shown up to this many characters (the full text is in the tooltip). */
const OPTION_CHARS = 200;
/** Field titles likewise. */
const LABEL_CHARS = 200;

/** Shown on every field the backend flagged as a secret. */
export const SECRET_WARNING = "This looks like a secret (a password, key, token or card detail). " +
  "MCP forbids servers to ask for these in a form, and what you type here goes to the server.";

export function buildField(field: Field): FieldControl {
  switch (field.kind) {
    case "text":
      return textField(field);
    case "number":
      return numberField(field);
    case "boolean":
      return booleanField(field);
    case "singleSelect":
      return singleSelectField(field);
    case "multiSelect":
      return multiSelectField(field);
  }
}

/** The ids and elements every field has around its input. */
interface Frame {
  inputId: string;
  describedBy: string;
  label: string;
  labelContent: Node[];
  below: Node[];
  error: HTMLParagraphElement;
}

function frame(field: Field, hint: string | null): Frame {
  const inputId = uid("field");
  const ids: string[] = [];
  const below: Node[] = [];
  if (field.secret) {
    const id = uid("secret");
    ids.push(id);
    below.push(el("p", { class: "warn-note secret-warning", id }, SECRET_WARNING));
  }
  if (field.description) {
    const id = uid("desc");
    ids.push(id);
    below.push(clippedText(field.description, { chars: 300, lines: 4, id, class: "field-desc" }));
  }
  if (hint) {
    const id = uid("hint");
    ids.push(id);
    below.push(el("p", { class: "field-hint", id }, hint));
  }
  const errorId = uid("err");
  ids.push(errorId);
  const error = el("p", { class: "field-error", id: errorId, attrs: { hidden: true } });
  below.push(error);

  const title = field.title ?? field.name;
  const labelContent: Node[] = [inlineText(title, LABEL_CHARS, "field-title")];
  if (field.required) {
    labelContent.push(el("span", { class: "req", attrs: { "aria-hidden": "true", title: "required" } }, " *"));
  }
  return {
    inputId,
    describedBy: ids.join(" "),
    label: shortText(title, 80),
    labelContent,
    below,
    error,
  };
}

function messageFor(input: Native, label: string): string | null {
  if (input.checkValidity()) return null;
  if (input.validity.valueMissing) return `“${label}” is required.`;
  return input.validationMessage || `“${label}” is not valid.`;
}

function errorSetter(f: Frame, inputs: Native[]): (message: string | null) => void {
  return (message) => {
    f.error.textContent = message ?? "";
    f.error.hidden = !message;
    for (const input of inputs) {
      if (message) input.setAttribute("aria-invalid", "true");
      else input.removeAttribute("aria-invalid");
    }
  };
}

/** A single labelled input (text, number, select) in the common layout. */
function single(field: Field, f: Frame, input: Native, read: () => Reading): FieldControl {
  input.id = f.inputId;
  input.setAttribute("aria-describedby", f.describedBy);
  if (field.required) input.required = true;
  const masked = input instanceof HTMLInputElement && input.type === "password";
  const root = el("div", { class: `field field-${field.kind}` },
    el("label", { class: "field-label", attrs: { for: f.inputId } }, ...f.labelContent),
    masked ? el("div", { class: "secret-row" }, input, showToggle(input, f.label)) : input,
    ...f.below);
  const setError = errorSetter(f, [input]);
  const clear = () => setError(null);
  input.addEventListener("input", clear);
  input.addEventListener("change", clear);
  return {
    field,
    label: f.label,
    root,
    focusTarget: input,
    check: () => messageFor(input, f.label),
    report: () => input.reportValidity(),
    read,
    setError,
  };
}

/** A button that shows or hides a masked input's text. Its name stays "Show <label>";
 * `aria-pressed` says whether the text is shown. */
function showToggle(input: HTMLInputElement, label: string): HTMLButtonElement {
  const button = el("button", {
    class: "button small secret-toggle",
    attrs: { type: "button", "aria-pressed": "false", "aria-controls": input.id, "aria-label": `Show ${label}` },
  }, "Show");
  button.addEventListener("click", () => {
    const show = input.type === "password";
    input.type = show ? "text" : "password";
    button.setAttribute("aria-pressed", String(show));
    button.textContent = show ? "Hide" : "Show";
  });
  return button;
}

function textField(field: Extract<Field, { kind: "text" }>): FieldControl {
  const hints: string[] = [];
  const { minLength: min, maxLength: max } = field;
  if (min !== null && max !== null) hints.push(`${min} to ${max} characters`);
  else if (min !== null) hints.push(`At least ${min} ${min === 1 ? "character" : "characters"}`);
  else if (max !== null) hints.push(`At most ${max} ${max === 1 ? "character" : "characters"}`);

  const input = el("input", { attrs: { autocomplete: "off", spellcheck: "false" } });
  let untouchedDefault: { shown: string; sent: string } | null = null;
  switch (field.format) {
    case "email":
      input.type = "email";
      hints.push("An email address, like name@example.com");
      break;
    case "uri":
      input.type = "url";
      hints.push("A full address, like https://example.com");
      break;
    case "date":
      input.type = "date";
      break;
    case "date-time":
      input.type = "datetime-local";
      input.step = "1";
      hints.push(`Your local time (${localZoneHint()})`);
      break;
    default:
      input.type = "text";
  }
  // Dates are not masked (nobody's secret is a date picker); everything else a secret is typed into is.
  if (field.secret && field.format !== "date" && field.format !== "date-time") input.type = "password";
  // Lengths in characters (code points), as the backend counts them: the browser's own
  // minLength/maxLength count UTF-16 units, so "😀" would pass a minimum of 2 here and be
  // refused there.
  const lengthCheck = () => {
    const n = Array.from(input.value).length;
    const wrong = input.value !== "" && ((min !== null && n < min) || (max !== null && n > max));
    input.setCustomValidity(!wrong ? ""
      : min !== null && n < min ? `At least ${min} ${min === 1 ? "character" : "characters"} (${n} now).`
        : `At most ${max} ${max === 1 ? "character" : "characters"} (${n} now).`);
  };
  if (field.format !== "date" && field.format !== "date-time" && (min !== null || max !== null)) {
    input.addEventListener("input", lengthCheck);
  }
  if (typeof field.default === "string") {
    if (input.type === "password") {
      // Never filled in masked: the person would send text they cannot read as their answer.
      hints.push("The server suggested a value; it is left out, type your own");
    } else if (field.format === "date-time") {
      const shown = rfc3339ToLocalInput(field.default);
      if (shown !== null) {
        input.value = shown;
        // Sent back exactly as the server wrote it if the person leaves it alone. (Compared with
        // what the input holds: it normalizes `...T14:00:00` to `...T14:00`.)
        untouchedDefault = { shown: input.value, sent: field.default };
      }
    } else if (Array.from(field.default).length > 300) {
      // Too long to show whole beside the field: left out rather than sent unread.
      hints.push("The server suggested a long value; it is left out, type your own");
    } else {
      input.value = field.default;
      // What the input cannot show (invisible characters, text past its width) is said below,
      // so a default left alone is one the person could read.
      // Blanks other than single spaces (an em space, a run of them, a Braille blank) can push
      // the rest of a short value past the field's end, unseen.
      const blanks = /[^\S ]| {2,}|\u2800/u.test(field.default);
      if (visibleString(field.default) !== field.default || blanks || Array.from(field.default).length > 60) {
        hints.push(`Filled in by the server: ${visibleString(field.default)}`);
      }
      lengthCheck();
    }
  }

  const f = frame(field, hints.join(". ") || null);
  return single(field, f, input, () => {
    const value = input.value;
    if (value === "") return { present: false };
    if (field.format === "date-time") {
      if (untouchedDefault && value === untouchedDefault.shown) {
        return { present: true, value: untouchedDefault.sent };
      }
      return { present: true, value: localInputToRfc3339(value) ?? value };
    }
    return { present: true, value };
  });
}

function numberField(field: Extract<Field, { kind: "number" }>): FieldControl {
  const input = el("input", { attrs: { type: "number", autocomplete: "off", inputmode: field.integer ? "numeric" : "decimal" } });
  // A secret number (a PIN, a CVV) is masked; a password input has no numeric constraints of its own,
  // so they are checked here instead.
  if (field.secret) input.type = "password";
  // For whole numbers the step counts from `min`, so bounds are rounded inward to whole numbers
  // (an integer >= 0.5 is an integer >= 1).
  let min = field.minimum;
  let max = field.maximum;
  if (field.integer) {
    if (min !== null) min = Math.ceil(min);
    if (max !== null) max = Math.floor(max);
  }
  input.step = field.integer ? "1" : "any";
  if (min !== null) input.min = String(min);
  if (max !== null) input.max = String(max);
  // A masked number (a PIN) is never filled in: see the text field.
  if (typeof field.default === "number" && !field.secret) input.value = String(field.default);

  let hint = field.integer ? "A whole number" : "A number";
  if (min !== null && max !== null) hint += ` from ${min} to ${max}`;
  else if (min !== null) hint += ` of at least ${min}`;
  else if (max !== null) hint += ` of at most ${max}`;

  const f = frame(field, hint);
  if (field.secret) {
    const numberMessage = (): string => {
      const text = input.value.trim();
      if (text === "") return "";
      // Decimal only, as a number input takes it (`Number` also reads "0x10" as 16).
      if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) {
        return field.integer ? "Enter a whole number." : "Enter a number.";
      }
      const n = Number(text);
      if (!Number.isFinite(n)) return field.integer ? "Enter a whole number." : "Enter a number.";
      if (field.integer && !Number.isInteger(n)) return "Enter a whole number.";
      if (min !== null && n < min) return `Enter at least ${min}.`;
      if (max !== null && n > max) return `Enter at most ${max}.`;
      return "";
    };
    const refresh = () => input.setCustomValidity(numberMessage());
    input.addEventListener("input", refresh);
    refresh();
  }
  return single(field, f, input, () => {
    if (input.value.trim() === "") return { present: false };
    const n = Number(input.value.trim());
    return { present: true, value: n };
  });
}

function booleanField(field: Extract<Field, { kind: "boolean" }>): FieldControl {
  const f = frame(field, null);
  const input = el("input", { id: f.inputId, attrs: { type: "checkbox", "aria-describedby": f.describedBy } });
  input.checked = field.default === true;
  const root = el("div", { class: "field field-boolean" },
    el("div", { class: "check-row" },
      input,
      el("label", { class: "field-label", attrs: { for: f.inputId } }, ...f.labelContent)),
    ...f.below);
  const setError = errorSetter(f, [input]);
  input.addEventListener("change", () => setError(null));
  return {
    field,
    label: f.label,
    root,
    focusTarget: input,
    // A checkbox always has an answer: what it shows.
    check: () => null,
    report: () => input.reportValidity(),
    read: () => ({ present: true, value: input.checked }),
    setError,
  };
}

function optionText(choice: Choice): string {
  // A title that shows nothing is no name: the value stands in.
  const label = choice.label !== null && choice.label.trim() !== "" ? choice.label : choice.value;
  return shortText(label, OPTION_CHARS);
}

function singleSelectField(field: Extract<Field, { kind: "singleSelect" }>): FieldControl {
  const select = el("select", { attrs: { autocomplete: "off" } });
  // Nothing looks chosen that is not: an explicit empty option, selected unless there is a default.
  append(select, el("option", { attrs: { value: "" } }, "Choose…"));
  field.options.forEach((choice, index) => {
    const option = el("option", { attrs: { value: String(index) } }, optionText(choice));
    if (choice.label !== null && choice.label !== choice.value) {
      option.title = visibleString(choice.label);
    }
    append(select, option);
  });
  const defaultIndex = field.options.findIndex((c) => c.value === field.default);
  select.value = defaultIndex >= 0 ? String(defaultIndex) : "";

  // A choice made by the server is said to be its, by the value it sends: its title could
  // read as "Choose…", as if nothing were chosen.
  const chosen = field.options[defaultIndex];
  const f = frame(field, chosen ? `Chosen by the server: ${visibleString(chosen.value)}` : null);
  return single(field, f, select, () => {
    if (select.value === "") return { present: false };
    const choice = field.options[Number(select.value)];
    return choice ? { present: true, value: choice.value } : { present: false };
  });
}

function multiSelectField(field: Extract<Field, { kind: "multiSelect" }>): FieldControl {
  const { minItems: min, maxItems: max } = field;
  let hint: string | null = null;
  if (min !== null && max !== null) hint = min === max ? `Choose ${min}` : `Choose ${min} to ${max}`;
  else if (min !== null) hint = `Choose at least ${min}`;
  else if (max !== null) hint = `Choose at most ${max}`;
  const f = frame(field, hint);

  const defaults = Array.isArray(field.default) ? field.default : [];
  const boxes = field.options.map((choice) => {
    const id = uid("opt");
    const box = el("input", { id, attrs: { type: "checkbox" } });
    box.checked = defaults.includes(choice.value);
    const row = el("div", { class: "check-row" },
      box,
      el("label", { attrs: { for: id } }, inlineText(choice.label ?? choice.value, OPTION_CHARS)));
    return { box, row, choice };
  });

  const legendId = uid("legend");
  const root = el("fieldset", {
    class: "field field-multiSelect",
    attrs: { "aria-describedby": f.describedBy },
  },
    el("legend", { class: "field-label", id: legendId }, ...f.labelContent),
    el("div", { class: "options" }, ...boxes.map((b) => b.row)),
    ...f.below);

  const count = () => boxes.filter((b) => b.box.checked).length;
  // The count rule lives on the first box, so native validation (and its bubble) covers it.
  const countMessage = (): string | null => {
    const n = count();
    if (n === 0 && !field.required) return null;
    if (min !== null && n < min) return `Choose at least ${min}`;
    if (max !== null && n > max) return `Choose at most ${max}`;
    return null;
  };
  const first = boxes[0]?.box;
  const setError = errorSetter(f, boxes.map((b) => b.box));
  const refresh = () => first?.setCustomValidity(countMessage() ?? "");
  for (const { box } of boxes) {
    box.addEventListener("change", () => {
      setError(null);
      refresh();
    });
  }
  refresh();

  return {
    field,
    label: f.label,
    root,
    focusTarget: first ?? root,
    check: () => {
      refresh();
      return countMessage();
    },
    report: () => first?.reportValidity(),
    read: () => {
      const chosen = boxes.filter((b) => b.box.checked).map((b) => b.choice.value);
      // Required with nothing ticked sends `[]`: that is what the form shows, and the schema allows
      // it unless `minItems` says otherwise (which `check` enforces).
      if (chosen.length === 0 && !field.required) return { present: false };
      return { present: true, value: chosen };
    },
    setError,
  };
}
