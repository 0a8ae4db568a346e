//! The Connect agents view: whether Countersign's gateway is listening (and where), pausing and
//! resuming it, each server's gateway address, where the token lives, and for each agent host
//! the snippet to paste into it, with a Copy button. Read on demand with `gateway_info`; nothing
//! is kept here between loads.

import type { ClientSetup } from "./bindings/ClientSetup";
import type { GatewayInfo } from "./bindings/GatewayInfo";
import { el, append, replace, uid } from "./dom";
import { commands, errorText } from "./ipc";
import { inlineText, visibleText } from "./untrusted";

export class ConnectPane {
  readonly root: HTMLElement;
  private readonly content = el("div", { class: "connect-content" });
  private readonly status = el("p", { class: "muted", attrs: { role: "status" } });
  /** Bumped on every load, so a slow reply that a newer one overtook is dropped. */
  private generation = 0;

  constructor() {
    const refresh = el("button", {
      class: "button small",
      attrs: { type: "button" },
      on: { click: () => void this.reload() },
    }, "Refresh");
    this.root = el("div", { class: "connect" },
      el("div", { class: "section-head" }, el("h2", {}, "Connect agents"), refresh),
      el("p", { class: "muted" },
        "Agents reach your servers through Countersign, so every question a server asks and every ",
        "tool call that needs your approval comes to this window."),
      this.status,
      this.content);
  }

  async reload(): Promise<void> {
    const generation = ++this.generation;
    this.status.textContent = "Loading…";
    let info: GatewayInfo;
    try {
      info = await commands.gatewayInfo();
    } catch (error) {
      if (generation !== this.generation) return;
      this.status.textContent = "";
      replace(this.content, el("section", { class: "gateway-state", attrs: { "aria-label": "Gateway status" } },
        el("p", {},
          el("span", { class: "state state-failed" }, "Not running"), " ",
          inlineText(errorText(error), 400))));
      return;
    }
    if (generation !== this.generation) return;
    this.status.textContent = "";
    this.draw(info);
  }

  private draw(info: GatewayInfo): void {
    replace(this.content,
      this.stateSection(info),
      this.serversSection(info),
      this.clientsSection(info.clients));
  }

  private stateSection(info: GatewayInfo): HTMLElement {
    const line = el("p", { class: "gateway-line", attrs: { role: "status" } });
    if (!info.enabled) {
      append(line, el("span", { class: "state state-stopped" }, "Off"),
        " The gateway is turned off in the config (", el("code", {}, "\"gateway\": {\"enabled\": false}"), ").");
    } else if (info.paused) {
      append(line, el("span", { class: "state state-connecting" }, "Paused"),
        " Every agent request is refused until you resume; agents stay connected.");
    } else if (info.listening) {
      append(line, el("span", { class: "state state-ready" }, "Listening"),
        " at ", el("code", {}, inlineText(info.url, 200)), " (this computer only).");
    } else {
      append(line, el("span", { class: "state state-failed" }, "Not running"), " ",
        inlineText(info.error ?? "The gateway is not listening.", 400));
    }

    const section = el("section", { class: "gateway-state", attrs: { "aria-label": "Gateway status" } }, line);
    // Pausing means something only while there is a listener to pause (or one paused).
    if (info.enabled && (info.listening || info.paused)) {
      const pauseStatus = el("span", { class: "muted", attrs: { role: "status" } });
      const button = el("button", {
        class: "button small",
        attrs: { type: "button" },
      }, info.paused ? "Resume" : "Pause");
      button.addEventListener("click", () => {
        button.disabled = true;
        commands.setGatewayPaused(!info.paused).then(
          (next) => {
            this.draw(next);
            this.content.querySelector<HTMLButtonElement>(".pause-button")?.focus();
          },
          (error: unknown) => {
            button.disabled = false;
            pauseStatus.textContent = `Could not ${info.paused ? "resume" : "pause"}: ${errorText(error)}`;
          },
        );
      });
      button.classList.add("pause-button");
      append(section, el("div", { class: "actions start" }, button, pauseStatus));
    }
    append(section, el("p", {}, "Token file: ", el("code", {}, inlineText(info.tokenPath, 300)),
      el("span", { class: "muted" }, " (agents send this token; anyone who has it can use your servers)")));
    return section;
  }

  private serversSection(info: GatewayInfo): HTMLElement {
    const headingId = uid("gateway-servers");
    return el("section", { class: "detail-section", attrs: { "aria-labelledby": headingId } },
      el("h3", { id: headingId }, "Servers through the gateway"),
      info.servers.length === 0
        ? el("p", { class: "muted" }, "No servers are configured.")
        : el("ul", { class: "gateway-servers" }, ...info.servers.map((s) => el("li", {},
          el("span", { class: "server-item-name" }, inlineText(s.name, 80)), " ",
          el("code", {}, inlineText(s.url, 300))))));
  }

  private clientsSection(clients: ClientSetup[]): HTMLElement {
    const headingId = uid("gateway-clients");
    return el("section", { class: "detail-section", attrs: { "aria-labelledby": headingId } },
      el("h3", { id: headingId }, "Agents"),
      el("p", { class: "warn-note" },
        "Most of these snippets contain the gateway's token, which grants access to every configured ",
        "server: keep them out of shared files and repositories."),
      clients.length === 0
        ? el("p", { class: "muted" }, "No agent setups to show.")
        : el("div", { class: "clients" }, ...clients.map(clientCard)));
  }
}

function clientCard(client: ClientSetup): HTMLElement {
  const headingId = uid("client");
  const pre = el("pre", {
    class: "output snippet",
    attrs: { tabindex: "0", dir: "ltr", "aria-label": `${client.title} snippet` },
  });
  append(pre, visibleText(client.snippet));
  const status = el("span", { class: "muted copy-status", attrs: { role: "status" } });
  const copy = el("button", {
    class: "button small",
    attrs: { type: "button" },
    on: { click: () => void copySnippet(client.snippet, pre, status) },
  }, "Copy");
  return el("article", { class: "client", attrs: { "aria-labelledby": headingId } },
    el("div", { class: "section-head" },
      el("h4", { id: headingId }, inlineText(client.title, 80)), copy, status),
    el("p", { class: "muted client-where" }, inlineText(client.whereTo, 400)),
    pre);
}

/** Copies through the clipboard API; where that is refused, selects the text for Ctrl+C. */
async function copySnippet(text: string, pre: HTMLElement, status: HTMLElement): Promise<void> {
  try {
    if (!navigator.clipboard) throw new Error("no clipboard");
    await navigator.clipboard.writeText(text);
    status.textContent = "Copied.";
  } catch {
    pre.focus();
    const range = document.createRange();
    range.selectNodeContents(pre);
    const selection = window.getSelection();
    selection?.removeAllRanges();
    selection?.addRange(range);
    status.textContent = "Could not copy: the text is selected, press Ctrl+C.";
  }
}
