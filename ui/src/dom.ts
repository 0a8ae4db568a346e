//! The only way this UI makes DOM: elements by tag name, text as text nodes, attributes by
//! `setAttribute` with names written in this code. Nothing here parses HTML, so a string from a
//! server can never become markup, whatever it contains.

export type Child = Node | string | number | null | undefined | false;

export interface Props {
  class?: string;
  id?: string;
  /** Attribute names are literals in this code; values may be untrusted (setAttribute is inert). */
  attrs?: Record<string, string | number | boolean | null | undefined>;
  /** Event listeners. */
  on?: { [K in keyof HTMLElementEventMap]?: (ev: HTMLElementEventMap[K]) => void };
}

/** Creates an element. `true` attributes are set empty, `false`/`null`/`undefined` are skipped. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (props.class) node.className = props.class;
  if (props.id) node.id = props.id;
  for (const [name, value] of Object.entries(props.attrs ?? {})) {
    setAttr(node, name, value);
  }
  for (const [type, listener] of Object.entries(props.on ?? {})) {
    node.addEventListener(type, listener as EventListener);
  }
  append(node, ...children);
  return node;
}

/** Sets (or with false/null/undefined removes) an attribute; event-handler attributes are refused. */
export function setAttr(
  node: Element,
  name: string,
  value: string | number | boolean | null | undefined,
): void {
  if (/^on/i.test(name)) throw new Error(`refusing to set event-handler attribute ${name}`);
  if (value === false || value === null || value === undefined) {
    node.removeAttribute(name);
  } else {
    node.setAttribute(name, value === true ? "" : String(value));
  }
}

/** Appends children; strings and numbers become text nodes. */
export function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(
      typeof child === "string" || typeof child === "number"
        ? document.createTextNode(String(child))
        : child,
    );
  }
}

/** Replaces all children of `parent`. */
export function replace(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  append(parent, ...children);
}

let nextId = 0;
/** A document-unique id; never derived from untrusted text. */
export function uid(prefix: string): string {
  nextId += 1;
  return `${prefix}-${nextId}`;
}

/** The element with `id`, typed, or an exception naming it (the layout is ours, so a miss is a bug). */
export function byId<T extends HTMLElement>(id: string, type: new () => T): T {
  const found = document.getElementById(id);
  if (!(found instanceof type)) throw new Error(`missing element #${id}`);
  return found;
}
