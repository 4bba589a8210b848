/** Parses operator durations such as `30s`, `10m`, `1h`, `7d`, `500ms`, `1.5s` into milliseconds. */
const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export const DAY_MS = 86_400_000;

/**
 * Exact: the result is a whole number of milliseconds, computed without floating-point error
 * (`0.3s` is 300, not 300.00000000000006), and a duration that is not a whole number of
 * milliseconds (`0.5ms`, `1.0005s`) is refused rather than rounded.
 *
 * Bounded: every result is a safe integer (`1e400d` would be Infinity), and callers that store a
 * duration, or a time computed from one, pass their own upper bound (`max`; `100000000d` plus now
 * is past the last date JavaScript can represent), so that an out-of-range value is refused before
 * anything is written (issue 16, point 6).
 */
export function parseDurationMs(text: string, bounds: { max?: number; what?: string } = {}): number {
  const match = /^\s*(\d+)(?:\.(\d+))?\s*(ms|s|m|h|d)\s*$/.exec(text);
  if (!match) throw new Error(`invalid duration "${text}": use a number and a unit, like 500ms, 30s, 10m, 1h or 7d`);
  const unit = UNITS[match[3]!]!;
  // Trailing zeros change nothing; beyond 8 digits no fraction of a day is whole milliseconds.
  const fraction = (match[2] ?? '').replace(/0+$/, '');
  if (fraction.length > 8) throw new Error(`invalid duration "${text}": durations are whole milliseconds`);
  const scale = 10 ** fraction.length;
  const fractionUnits = Number(fraction || '0') * unit;
  if (fractionUnits % scale !== 0) throw new Error(`invalid duration "${text}": durations are whole milliseconds`);
  const ms = Number(match[1]) * unit + fractionUnits / scale;
  if (bounds.max !== undefined && !(ms <= bounds.max)) {
    throw new Error(`invalid duration "${text}": ${bounds.what ?? 'a duration'} is at most ${formatDurationMs(bounds.max)}`);
  }
  if (!Number.isSafeInteger(ms)) throw new Error(`invalid duration "${text}": too long`);
  return ms;
}

/** The shortest exact form of a duration in milliseconds: `7d`, `90m`, `1500ms` (never rounded). */
export function formatDurationMs(ms: number): string {
  for (const [unit, size] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** A duration that must be whole seconds (event timestamps are in seconds), e.g. `--max-age`. */
export function parseWholeSeconds(option: string, text: string, bounds: { max?: number; what?: string } = {}): number {
  const ms = parseDurationMs(text, bounds);
  if (ms % 1000 !== 0) throw new Error(`invalid ${option} "${text}": must be whole seconds, like 3600s, 90m or 90d`);
  return ms / 1000;
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
