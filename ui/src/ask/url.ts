//! What a URL-mode ask would open, judged before the person consents: the host shown prominently
//! (in the form the browser will really use, so an internationalised look-alike shows as
//! `xn--...`), and warnings for unencrypted addresses, punycode, user names before the host and
//! schemes Countersign does not open. The URL is only parsed, never fetched or linked.

export interface UrlInfo {
  /** The host as the browser resolves it, or null when the URL cannot be read. */
  host: string | null;
  /** Only http(s) URLs that parse can be opened. */
  openable: boolean;
  warnings: string[];
}

const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]"]);

export function describeUrl(raw: string): UrlInfo {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { host: null, openable: false, warnings: ["This address cannot be read, so it will not be opened."] };
  }
  const warnings: string[] = [];
  const web = url.protocol === "https:" || url.protocol === "http:";
  if (!web) {
    warnings.push(`Countersign opens only http and https addresses, not ${url.protocol}`);
    return { host: url.host || null, openable: false, warnings };
  }
  const host = url.hostname;
  if (url.protocol === "http:" && !LOOPBACK.has(host) && !host.endsWith(".localhost")) {
    warnings.push("Not encrypted (http): others on the network can read and change this page.");
  }
  if (host.split(".").some((label) => label.startsWith("xn--"))) {
    warnings.push("The host name uses international characters (shown in its xn-- form); it may imitate another site.");
  }
  if (url.username || url.password) {
    warnings.push(`The address has a user name before the host; the site it opens is ${host}.`);
  }
  return { host: url.port ? `${host}:${url.port}` : host, openable: true, warnings };
}
