//! `format: date-time` fields: the wire wants RFC 3339 with a zone (`2025-11-25T14:30:00+01:00`),
//! `<input type=datetime-local>` shows and returns wall-clock time without one
//! (`2025-11-25T14:30` or `...:00`). The person thinks in their own time zone, so a default is
//! shown converted to local time and an entered time is sent with the local offset.

function pad(n: number, width = 2): string {
  return String(Math.trunc(Math.abs(n))).padStart(width, "0");
}

/** RFC 3339 date-time with seconds and offset; `null` when it cannot be read. */
const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/** A datetime-local value (`YYYY-MM-DDTHH:MM:SS`, local time) for an RFC 3339 string, or `null`. */
export function rfc3339ToLocalInput(value: string): string | null {
  const m = RFC3339.exec(value.trim());
  if (!m) return null;
  const normalized = `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}${m[7] ?? ""}${m[8].toUpperCase()}`;
  const date = new Date(normalized);
  if (Number.isNaN(date.getTime())) return null;
  return localInputValue(date);
}

/** `YYYY-MM-DDTHH:MM:SS` in local time. */
export function localInputValue(date: Date): string {
  return `${pad(date.getFullYear(), 4)}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}` +
    `T${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

/**
 * RFC 3339 with seconds and the local offset for a datetime-local value
 * (`2025-03-04T10:30` -> `2025-03-04T10:30:00+01:00` in Berlin in winter), or `null`.
 * A wall time that does not exist (skipped by a DST change) moves forward as `Date` does.
 */
export function localInputToRfc3339(value: string): string | null {
  const m = /^(\d{4,})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?$/.exec(value);
  if (!m) return null;
  const date = new Date(
    Number(m[1]), Number(m[2]) - 1, Number(m[3]),
    Number(m[4]), Number(m[5]), Number(m[6] ?? "0"),
  );
  if (Number.isNaN(date.getTime())) return null;
  const offsetMin = -date.getTimezoneOffset();
  const sign = offsetMin >= 0 ? "+" : "-";
  const zone = `${sign}${pad(Math.abs(offsetMin) / 60)}:${pad(Math.abs(offsetMin) % 60)}`;
  return `${localInputValue(date)}${zone}`;
}

/** "Europe/Berlin, UTC+01:00" for the hint beside a date-time field. */
export function localZoneHint(): string {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const offsetMin = -new Date().getTimezoneOffset();
  const sign = offsetMin >= 0 ? "+" : "-";
  return `${zone ? `${zone}, ` : ""}UTC${sign}${pad(Math.abs(offsetMin) / 60)}:${pad(Math.abs(offsetMin) % 60)}`;
}
