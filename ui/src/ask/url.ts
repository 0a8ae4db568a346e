//! What a URL-mode ask would open. The backend judged the address on arrival (core's
//! `url_policy`: only http(s) reaches the person; `host` as the browser will contact it, so a
//! look-alike shows as `xn--...`; warnings); this file only words the verdict. The URL is
//! shown as text, never fetched or linked.

import type { UrlWarning } from "../bindings/UrlWarning";

export function warningText(warning: UrlWarning, host: string): string {
  switch (warning) {
    case "plainHttp":
      return "Not encrypted (http): others on the network can read and change this page.";
    case "punycode":
      return "The host name uses international characters (shown in its xn-- form); it may imitate another site.";
    case "userInfo":
      return `The address has a user name before the host; the site it opens is ${host}.`;
    case "local":
      return "This address is on your computer or your local network: opening it lets the server have your browser reach a service there.";
  }
}

/** A safety net only: the backend never shows other schemes, and opens nothing itself but
 * the address it judged. */
export function isWebAddress(raw: string): boolean {
  try {
    const protocol = new URL(raw).protocol;
    return protocol === "https:" || protocol === "http:";
  } catch {
    return false;
  }
}
