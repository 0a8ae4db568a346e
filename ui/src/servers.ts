//! The Servers view: every configured server with its live session state (from `list_servers`,
//! then `session-event`), how it is reached, whether it is trusted; the selected one's tools and
//! its recent stderr.

import type { ServerView } from "./bindings/ServerView";
import type { SessionEvent } from "./bindings/SessionEvent";
import type { SignedOut } from "./bindings/SignedOut";
import type { ToolView } from "./bindings/ToolView";
import { el, append, replace, setAttr } from "./dom";
import { commands, errorText } from "./ipc";
import { endpointPhrase, endpointSummary, stateDetail, stateLabel } from "./format";
import { toolCard } from "./tools";
import { inlineText } from "./untrusted";

export class ServersPane {
  readonly root: HTMLElement;
  private servers: ServerView[] = [];
  private selected: string | null = null;
  private readonly list = el("ul", { class: "server-list-items" });
  private readonly detail = el("div", { class: "server-detail" });
  private readonly listStatus = el("p", { class: "muted" }, "Loading servers…");
  private tools: HTMLElement | null = null;
  private stderr: HTMLElement | null = null;
  /** Bumped on every selection, so a slow reply for a server no longer shown is dropped. */
  private generation = 0;
  private reloads = 0;
  /** What the last sign-out of each server came to (its tokens revoked or not), shown until
   * the next sign-in: the view is drawn anew as the server's state changes. */
  private readonly signedOut = new Map<string, SignedOut>();
  private toolsLoaded = false;

  constructor() {
    this.root = el("div", { class: "servers-layout" },
      el("nav", { class: "server-list", attrs: { "aria-label": "Servers" } },
        el("h2", {}, "Servers"), this.listStatus, this.list),
      this.detail);
    replace(this.detail, el("p", { class: "muted empty-detail" }, "Select a server to see its tools and output."));
  }

  /** Redraws the list from `list_servers`. Reloads can overlap (a config edit and a session
   * event for a server not listed yet); only the latest one's answer is drawn. */
  async reload(): Promise<void> {
    const mine = ++this.reloads;
    try {
      const servers = await commands.listServers();
      if (mine !== this.reloads) return;
      // A state event may have overtaken this reply (they travel apart): the newer one stays.
      for (const server of servers) {
        const known = this.servers.find((s) => s.name === server.name);
        if (known && known.stateRevision > server.stateRevision) {
          server.state = known.state;
          server.stateRevision = known.stateRevision;
        }
      }
      this.servers = servers;
      this.listStatus.textContent = this.servers.length === 0 ? "No servers configured." : "";
      this.listStatus.hidden = this.servers.length > 0;
    } catch (error) {
      if (mine !== this.reloads) return;
      this.listStatus.hidden = false;
      this.listStatus.textContent = `Could not list servers: ${errorText(error)}`;
      this.servers = [];
    }
    this.drawList();
    if (this.selected !== null && !this.servers.some((s) => s.name === this.selected)) {
      this.selected = null;
      replace(this.detail, el("p", { class: "muted empty-detail" }, "Select a server to see its tools and output."));
    } else if (this.selected !== null) {
      this.drawDetailHeader();
    }
    // Something to look at from the start: the first server.
    if (this.selected === null && this.servers.length > 0) this.select(this.servers[0].name);
  }

  onSessionEvent(event: SessionEvent): void {
    const server = this.servers.find((s) => s.name === event.server);
    if (!server) {
      void this.reload();
      return;
    }
    // An event older than what the window shows (a listing overtook it) changes nothing.
    if (event.revision <= server.stateRevision) return;
    const was = server.state.state;
    server.state = event.state;
    server.stateRevision = event.revision;
    // A remote server's sign-in (whether, with which scopes) is in the listing, not in the
    // event: read again as its session changes, so an old sign-in is never shown beside a new
    // state, whether or not the Sign in command's own answer has arrived yet.
    if (server.signIn && event.state.state !== was) void this.reload();
    this.drawList();
    if (this.selected === event.server) {
      this.drawDetailHeader();
      if (event.state.state === "ready" && (was !== "ready" || !this.toolsLoaded)) void this.loadTools();
    }
  }

  private drawList(): void {
    replace(this.list, ...this.servers.map((server) => {
      const button = el("button", {
        class: "server-item",
        attrs: { type: "button", "aria-current": this.selected === server.name ? "true" : null },
        on: { click: () => this.select(server.name) },
      },
        el("span", { class: "server-item-name" }, inlineText(server.name, 60)),
        el("span", { class: `state state-${server.state.state}` }, stateLabel(server.state)),
        el("span", { class: "server-item-endpoint" }, inlineText(endpointSummary(server.endpoint), 60)));
      if (server.trusted) append(button, el("span", { class: "badge badge-trusted" }, "trusted"));
      return el("li", {}, button);
    }));
  }

  private select(name: string): void {
    this.selected = name;
    this.generation += 1;
    this.drawList();
    const heading = el("div", { class: "detail-header" });
    this.tools = el("div", { class: "tools" });
    this.stderr = el("div", { class: "stderr" });
    const refresh = el("button", {
      class: "button small",
      attrs: { type: "button" },
      on: { click: () => void this.loadStderr() },
    }, "Refresh");
    replace(this.detail,
      heading,
      el("section", { class: "detail-section", attrs: { "aria-label": "Tools" } },
        el("h3", {}, "Tools"), this.tools),
      el("section", { class: "detail-section", attrs: { "aria-label": "Recent stderr" } },
        el("div", { class: "section-head" }, el("h3", {}, "Recent stderr"), refresh),
        this.stderr));
    this.drawDetailHeader();
    void this.loadTools();
    void this.loadStderr();
  }

  private drawDetailHeader(): void {
    const server = this.servers.find((s) => s.name === this.selected);
    const header = this.detail.querySelector(".detail-header");
    if (!server || !header) return;
    const where = endpointPhrase(server.endpoint);
    const detail = stateDetail(server.state);
    replace(header,
      el("h2", {}, inlineText(server.name, 80)),
      el("p", { class: "detail-state" },
        el("span", { class: `state state-${server.state.state}` }, stateLabel(server.state)),
        detail ? el("span", { class: "state-detail" }, " ", inlineText(detail, 300)) : null),
      el("p", { class: "detail-endpoint" },
        `${where.label === "runs" ? "Runs" : "At"} `,
        el("code", {}, inlineText(where.value, 300)),
        server.endpoint.kind === "http" ? el("span", { class: "muted" }, " (", inlineText(server.endpoint.url, 300), ")") : null),
      el("p", { class: "detail-trust" }, server.trusted
        ? "Trusted: its tool annotations count for policy."
        : "Not trusted: its tool annotations are only hints."),
      this.signInBlock(server),
      this.muteToggle(server));
  }

  /** A remote server's sign-in (OAuth): whether the person is signed in, where the tokens are
   * kept, and Sign in / Sign out. Signing in goes through a URL question: the browser opens
   * only when the person agrees to the sign-in page's address. */
  private signInBlock(server: ServerView): HTMLElement | null {
    const signIn = server.signIn;
    if (!signIn) return null;
    const needed = server.state.state === "signInRequired";
    if (!needed && !signIn.signedIn) return null;
    const told = this.signedOut.get(server.name);
    const status = el("span", { class: "muted sign-in-status", attrs: { role: "status" } },
      ...(told === undefined ? [] : signedOutText(told)));
    const kept = signIn.keptIn === "secretService"
      ? "Kept in your desktop's keyring."
      : "No keyring answered (GNOME Keyring, KWallet or KeePassXC): kept in memory until Countersign quits.";
    /** `run`'s answer, when it is what sign-out tells, is what the person is told once done;
     * `kept`, it stays told when the view is drawn again. */
    const act = (label: string, run: () => Promise<unknown>, waiting: string, done: string, kept = false) => {
      const button = el("button", { class: "button small", attrs: { type: "button" } }, label) as HTMLButtonElement;
      button.addEventListener("click", () => {
        button.disabled = true;
        status.textContent = ` ${waiting}`;
        this.signedOut.delete(server.name);
        run().then(
          (answer) => {
            const told = isSignedOut(answer) ? answer : { told: done, reason: null };
            if (kept) this.signedOut.set(server.name, told);
            status.replaceChildren(...signedOutText(told));
            void this.reload();
          },
          (error: unknown) => {
            // A sign-in's error can quote a server's words: shown as untrusted text.
            status.replaceChildren(" ", inlineText(errorText(error), 400));
          },
        ).finally(() => (button.disabled = false));
      });
      return button;
    };
    if (signIn.signedIn && !needed) {
      return el("div", { class: "detail-sign-in", attrs: { role: "group", "aria-label": "Sign-in" } },
        el("p", {}, "Signed in",
          signIn.scopes.length ? el("span", { class: "muted" }, " (", inlineText(signIn.scopes.join(" "), 200), ")") : null,
          ". ", kept),
        el("p", {}, act("Sign out", () => commands.signOut(server.name), "Signing out…", "Signed out.", true), status));
    }
    return el("div", { class: "detail-sign-in", attrs: { role: "group", "aria-label": "Sign-in" } },
      el("p", {}, inlineText(server.name, 80),
        " asks you to sign in. Countersign first shows you the sign-in page's address; your browser opens it only if you agree. ",
        kept),
      el("p", {}, act("Sign in", () => commands.signIn(server.name), "Waiting for you to sign in in your browser…", "Signed in."), status));
  }

  /** "Notify me": unchecked mutes the server's desktop notifications (dialogs still open). */
  private muteToggle(server: ServerView): HTMLElement {
    const id = `notify-${this.generation}`;
    const box = el("input", { id, attrs: { type: "checkbox" } }) as HTMLInputElement;
    box.checked = !server.muted;
    const status = el("span", { class: "muted mute-status", attrs: { role: "status" } });
    box.addEventListener("change", () => {
      const muted = !box.checked;
      box.disabled = true;
      commands.setMuted(server.name, muted).then(
        () => {
          server.muted = muted;
          status.textContent = muted ? " Muted." : "";
        },
        (error: unknown) => {
          box.checked = !server.muted;
          status.textContent = ` Could not save: ${errorText(error)}`;
        },
      ).finally(() => (box.disabled = false));
    });
    return el("p", { class: "detail-notify" },
      box,
      el("label", { attrs: { for: id } }, "Desktop notifications when ", inlineText(server.name, 80), " asks"),
      status);
  }

  private async loadTools(): Promise<void> {
    const name = this.selected;
    const target = this.tools;
    if (name === null || target === null) return;
    const generation = this.generation;
    this.toolsLoaded = false;
    if (this.servers.find((s) => s.name === name)?.state.state === "signInRequired") {
      replace(target, el("p", { class: "muted" }, "Its tools are listed once you have signed in."));
      return;
    }
    replace(target, el("p", { class: "muted" }, "Loading tools…"));
    let tools: ToolView[];
    try {
      tools = await commands.listTools(name);
    } catch (error) {
      if (generation !== this.generation) return;
      replace(target, el("p", { class: "error-text" }, "Could not list tools: ", inlineText(errorText(error), 400)));
      return;
    }
    if (generation !== this.generation) return;
    this.toolsLoaded = true;
    if (tools.length === 0) {
      replace(target, el("p", { class: "muted" }, "This server offers no tools."));
      return;
    }
    replace(target, ...tools.map((tool) => toolCard(name, tool)));
  }

  private async loadStderr(): Promise<void> {
    const name = this.selected;
    const target = this.stderr;
    if (name === null || target === null) return;
    const generation = this.generation;
    try {
      const lines = await commands.serverStderr(name);
      if (generation !== this.generation) return;
      if (lines.length === 0) {
        replace(target, el("p", { class: "muted" }, "No output yet."));
      } else {
        const pre = el("pre", { class: "output stderr-lines untrusted", attrs: { tabindex: "0", "aria-label": "stderr lines" } });
        append(pre, inlineText(lines.join("\n")));
        replace(target, pre);
      }
    } catch (error) {
      if (generation !== this.generation) return;
      replace(target, el("p", { class: "error-text" }, "Could not read stderr: ", inlineText(errorText(error), 400)));
    }
    setAttr(target, "data-loaded", "true");
  }
}

function isSignedOut(answer: unknown): answer is SignedOut {
  return typeof answer === "object" && answer !== null && typeof (answer as SignedOut).told === "string";
}

/** What sign-out says: Countersign's sentence, then the authorization server's reason (its
 * words, so shown as untrusted text, after the sentence: they cannot turn it round). */
function signedOutText(signedOut: SignedOut): Array<Node | string> {
  return [" ", signedOut.told,
    ...(signedOut.reason ? [" Why: ", inlineText(signedOut.reason, 300)] : [])];
}
