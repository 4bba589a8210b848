/**
 * Operator durations such as `30s`, `10m`, `1h`, `7d`, `500ms`, parsed into milliseconds.
 *
 * Every result is a safe integer (a duration of `1e400d` would be Infinity, and one of
 * `100000000d` plus now is past the last date JavaScript can represent): callers that store a
 * duration, or a time computed from one, also pass their own upper bound (`max`), so that an
 * out-of-range value is refused before anything is written (issue 16, point 6).
 */
const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export const DAY_MS = 86_400_000;

export function parseDurationMs(text: string, bounds: { max?: number; what?: string } = {}): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/.exec(text);
  if (!match) throw new Error(`invalid duration "${text}": use a number and a unit, like 30s, 10m, 1h or 7d`);
  const ms = Math.round(Number(match[1]) * UNITS[match[2]!]!);
  const max = bounds.max ?? Number.MAX_SAFE_INTEGER;
  if (!Number.isSafeInteger(ms) || ms > max) {
    throw new Error(`invalid duration "${text}": ${bounds.what ?? 'a duration'} is at most ${formatDurationMs(max)}`);
  }
  return ms;
}

export function formatDurationMs(ms: number): string {
  for (const [unit, size] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** The last instant a JavaScript Date can hold (ECMAScript: 8.64e15 ms after the epoch). */
export const MAX_DATE_MS = 8.64e15;

/**
 * ISO 8601 of a stored time that never throws: a value outside the Date range (rows written
 * before the bounds above existed) is shown as the nearest representable instant instead of
 * failing the whole listing with `RangeError: Invalid time value`.
 */
export function isoOrNull(ms: number | null): string | null {
  if (ms === null) return null;
  if (!Number.isFinite(ms)) return ms > 0 ? new Date(MAX_DATE_MS).toISOString() : new Date(-MAX_DATE_MS).toISOString();
  return new Date(Math.max(-MAX_DATE_MS, Math.min(MAX_DATE_MS, ms))).toISOString();
}
