/** Parses operator durations such as `30s`, `10m`, `1h`, `7d`, `500ms`, `1.5s` into milliseconds. */
const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Exact: the result is a whole number of milliseconds, computed without floating-point error
 * (`0.3s` is 300, not 300.00000000000006), and a duration that is not a whole number of
 * milliseconds (`0.5ms`, `1.0005s`) is refused rather than rounded.
 */
export function parseDurationMs(text: string): number {
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
export function parseWholeSeconds(option: string, text: string): number {
  const ms = parseDurationMs(text);
  if (ms % 1000 !== 0) throw new Error(`invalid ${option} "${text}": must be whole seconds, like 3600s, 90m or 90d`);
  return ms / 1000;
}
