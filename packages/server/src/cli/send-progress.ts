/**
 * The progress line of `ecapi-ingest send` (a pure function of the SDK's SendProgress: unit-tested
 * in test/client/send-command.test.ts) and the count formatting the command's other lines share.
 *
 * Why hand-written (docs/decisions.md): every character it prints is one column wide (ASCII and
 * two block characters), so fitting the terminal width is arithmetic, and the command needs no
 * redraw loop or stream handling of a library.
 *
 * Hazard: a line that fills the terminal's last column wraps on some terminals, and the next `\r`
 * would redraw only the wrapped part, leaving a stale line per update: the bar never uses it.
 */
import type { SendProgress } from '@ecapi-ingest/client';

/** A count with thousands separators, the way every line of `send` prints counts. */
export const num = (n: number) => n.toLocaleString('en-US');

function duration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '--:--';
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

/** The progress numbers in order of importance: a narrow terminal drops them from the end. */
function progressParts(p: SendProgress): string[] {
  const seconds = p.elapsedMs / 1000;
  const rate = seconds > 0 ? p.done / seconds : 0;
  const eta = rate > 0 ? (p.total - p.done) / rate : Infinity;
  return [
    `${num(p.done)}/${num(p.total)} done`,
    `${num(p.accepted)} accepted`,
    `${num(p.rejected)} rejected`,
    ...(p.undeliverable > 0 ? [`${num(p.undeliverable)} undeliverable`] : []),
    ...(p.retries > 0 ? [`${num(p.retries)} retries`] : []),
    `${num(Math.round(rate))} events/s`,
    `ETA ${duration(eta)}`,
  ];
}

const MIN_BAR = 10;
const MAX_BAR = 30;

/**
 * The progress line. Off a terminal (`bar: false`), every number on one plain line. On a terminal,
 * a bar and as many numbers as fit in `columns - 1` characters (the last column is left free: a
 * line that fills it wraps on some terminals, and the next `\r` would redraw only the wrapped
 * part, leaving a stale line per update). Every character is one column wide (ASCII digits and
 * words, U+2588/U+2591 blocks), so the string length is the display width.
 */
export function progressLine(p: SendProgress, options: { bar: boolean; columns?: number | undefined }): string {
  const parts = progressParts(p);
  if (!options.bar) return `send: ${parts.join(', ')}`;
  const max = Math.max(1, (options.columns ?? 80) - 1);
  const fraction = p.total === 0 ? 1 : p.done / p.total;
  const percent = `${String(Math.floor(fraction * 100)).padStart(3)}%`;
  for (let n = parts.length; ; n--) {
    const stats = parts.slice(0, n).join(', ');
    const room = max - stats.length - percent.length - 4; // "[" "] " " "
    if (room >= MIN_BAR || n === 0) {
      const width = Math.max(0, Math.min(MAX_BAR, room));
      const filled = Math.round(fraction * width);
      const line = `[${'█'.repeat(filled)}${'░'.repeat(width - filled)}] ${percent} ${stats}`;
      return line.length <= max ? line : line.slice(0, max);
    }
  }
}
