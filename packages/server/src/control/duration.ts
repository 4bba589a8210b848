/** Parses operator durations such as `30s`, `10m`, `1h`, `7d`, `500ms` into milliseconds. */
const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function parseDurationMs(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/.exec(text);
  if (!match) throw new Error(`invalid duration "${text}": use a number and a unit, like 30s, 10m, 1h or 7d`);
  return Math.round(Number(match[1]) * UNITS[match[2]!]!);
}

export function formatDurationMs(ms: number): string {
  for (const [unit, size] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
