//! Short status lines ("The server withdrew this question.") in a `role="status"` region, so
//! screen readers announce them without moving focus. Each clears itself after a while; the empty
//! region stays in the document (and the accessibility tree) so the next change is heard.

import { replace, type Child } from "./dom";

const SHOW_MS = 12_000;

export class Notice {
  private timer: number | undefined;

  /** `region` must already be in the document with `role="status"`, so changes are announced. */
  constructor(readonly region: HTMLElement) {}

  show(...parts: Child[]): void {
    replace(this.region, ...parts);
    window.clearTimeout(this.timer);
    this.timer = window.setTimeout(() => this.clear(), SHOW_MS);
  }

  clear(): void {
    window.clearTimeout(this.timer);
    this.region.replaceChildren();
  }
}
