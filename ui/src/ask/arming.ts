//! No yes by accident. A question's accept buttons (Submit, Allow once, Always allow, Open) work
//! only once it has been on screen for a moment (`ARM_DELAY_MS`), counted again whenever another
//! question takes its place, so a click or a key meant for the last question, or for another
//! window, cannot answer this one. On top of the delay, a yes must come from a press that began
//! after arming: the mouse button went down on this armed question, or the Enter / Space was
//! pressed (not held over from before). The no's (Decline, Deny, Escape, Close) never wait.

/** How long a question must have been shown before its accept buttons work. */
export const ARM_DELAY_MS = 500;

/** Keys that activate a focused button or submit a form. */
const ACTIVATION_KEYS = new Set(["Enter", " "]);

/** What the arming needs from a question's view. */
export interface Armable {
  setArmed(armed: boolean): void;
}

export class Arming {
  /** The question on screen, and the same once its delay has passed (else null). */
  private shown: Armable | null = null;
  private armed: Armable | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  /** Activation keys down now, and those whose press began before the shown question armed. */
  private readonly held = new Set<string>();
  private readonly stale = new Set<string>();
  /** The key whose events are being dispatched in this task (a click it causes comes within). */
  private activeKey: string | null = null;
  /** The armed question the last mouse/touch/pen press began on, if it began on an armed one. */
  private pressedOn: Armable | null = null;

  constructor(private readonly scope: HTMLElement, private readonly delayMs = ARM_DELAY_MS) {
    // On the window, in the capture phase: a key that went down before the dialog existed, or
    // outside it, counts too; and this runs before any button reacts.
    window.addEventListener("keydown", (e) => this.keyDown(e), true);
    window.addEventListener("keypress", (e) => this.keyActive(e.key), true);
    window.addEventListener("keyup", (e) => this.keyUp(e), true);
    window.addEventListener("pointerdown", () => {
      this.pressedOn = this.armed !== null && this.armed === this.shown ? this.armed : null;
    }, true);
    // Key-ups are lost while the window is away; whatever is down then is held from before.
    window.addEventListener("blur", () => {
      for (const key of this.held) this.stale.add(key);
    });
    // Time not seen does not count: hidden, the shown question disarms; seen again, it re-arms.
    document.addEventListener("visibilitychange", () => {
      if (this.shown !== null) this.show(this.shown);
    });
    // Nor does time in the background: the window brought forward (a second launch, a click on
    // the notification) takes the keyboard, and an Enter typed for the window that had it must
    // not submit the question that was waiting here.
    window.addEventListener("focus", () => {
      if (this.shown !== null) this.show(this.shown);
    });
  }

  /** `view` takes the dialog: unarmed until it has been seen for the delay. */
  show(view: Armable): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.armed !== null && this.armed !== view) this.armed.setArmed(false);
    this.armed = null;
    this.shown = view;
    this.pressedOn = null;
    view.setArmed(false);
    // Keys held across the switch were meant for what was there before.
    for (const key of this.held) this.stale.add(key);
    if (document.visibilityState === "hidden") return;
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.shown !== view) return;
      this.armed = view;
      view.setArmed(true);
    }, this.delayMs);
  }

  /** `view` is gone from the dialog. */
  forget(view: Armable): void {
    if (this.shown !== view) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.shown = null;
    this.armed = null;
  }

  /**
   * Whether `event` (a click on an accept button, or the form submission it starts) may answer
   * yes for `view`: the view is armed, and the press behind it began after arming, on it.
   */
  permits(view: Armable, event: Event): boolean {
    if (this.armed !== view || this.shown !== view) return false;
    if (event instanceof MouseEvent && event.detail > 0) return this.pressedOn === view;
    // A keyboard activation (detail 0): Enter on a button or in a field, Space on a button.
    return this.activeKey === null || !this.stale.has(this.activeKey);
  }

  private keyDown(event: KeyboardEvent): void {
    if (!ACTIVATION_KEYS.has(event.key)) return;
    this.keyActive(event.key);
    if (!event.repeat) {
      this.held.add(event.key);
      if (this.armed !== null && this.armed === this.shown) this.stale.delete(event.key);
      else this.stale.add(event.key);
    } else if (!this.held.has(event.key)) {
      // Auto-repeat of a press this window never saw begin.
      this.held.add(event.key);
      this.stale.add(event.key);
    }
    // A key held over from before does nothing in the dialog, not even a no: the person did not
    // press it at this question.
    if (event.repeat && this.stale.has(event.key) && event.target instanceof Node && this.scope.contains(event.target)) {
      event.preventDefault();
      event.stopPropagation();
    }
  }

  private keyUp(event: KeyboardEvent): void {
    if (!ACTIVATION_KEYS.has(event.key)) return;
    // Space activates a button on key-up: that click comes after this, in the same task.
    this.keyActive(event.key);
    this.held.delete(event.key);
  }

  /** Marks `key` as the one being dispatched until the current task ends. */
  private keyActive(key: string): void {
    if (!ACTIVATION_KEYS.has(key)) return;
    this.activeKey = key;
    setTimeout(() => {
      if (this.activeKey === key) this.activeKey = null;
    }, 0);
  }
}
