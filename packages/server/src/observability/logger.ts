/**
 * Structured JSON logs (pino). The rule that matters: a log line never carries a request body,
 * a secret, a signature or a personal identifier. Request log lines are built field by field in
 * the request handler from counts and ids; nothing logs a request or event object wholesale, and
 * the redact paths below are a second line of defence for anything that ever tries.
 *
 * Bounded under attack (audit: one line per unauthenticated request, and an unbounded buffer when
 * stdout stalls):
 * - Requests refused before authentication (a 4xx answer without a verified key id: 401, shed 429,
 *   404, 400...) are not logged one by one: per reason (status and error code) the first of each
 *   window of REFUSAL_LOG_WINDOW_MS is logged in full (its request id, to match a client's
 *   X-Request-Id), the others of that window only counted, and their count logged once the window
 *   ends (`requests refused before authentication`, with `count`). So at most two lines a second
 *   per reason, whatever the attack rate. Authenticated requests keep one line each.
 * - The asynchronous stdout buffer holds at most MAX_BUFFERED_LOG_BYTES; a line that would pass it
 *   is dropped (SonicBoom's maxLength) and counted: droppedLogLines(), and a `log lines dropped`
 *   warning with the count since the last one, at most once a second, once lines get through again.
 */
import pino, { type Logger } from 'pino';

export type { Logger };

/** A buffered line reaches stdout within this time even when little is logged. */
const FLUSH_INTERVAL_MS = 200;
/** Log bytes held while stdout does not keep up (a stalled pipe or terminal); past it lines are dropped. */
export const MAX_BUFFERED_LOG_BYTES = 8 * 1024 * 1024;
/** At most one `log lines dropped` warning per this interval. */
const DROP_NOTICE_MS = 1000;

let dropped = 0;
/** Log lines this process dropped because stdout did not keep up (since start). */
export function droppedLogLines(): number {
  return dropped;
}

export function createLogger(options: { level?: string; destination?: pino.DestinationStream } = {}): Logger {
  // Not one write(2) per request line: lines are buffered up to 4 KiB and flushed at least every
  // FLUSH_INTERVAL_MS (and synchronously at exit, by pino). Worth ~2% of single-event throughput.
  let destination = options.destination;
  if (destination === undefined) {
    const boom = pino.destination({ dest: 1, sync: false, minLength: 4096, maxLength: MAX_BUFFERED_LOG_BYTES });
    boom.on('drop', () => void dropped++);
    destination = boom;
  }
  const logger = pino(
    {
      level: options.level ?? process.env.ECAPI_LOG_LEVEL ?? 'info',
      base: { service: 'ecapi-ingest' },
      redact: {
        paths: ['secret', '*.secret', 'signature', '*.signature', 'headers', 'body', 'event', 'events', 'req.headers'],
        censor: '[redacted]',
      },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
  if (!options.destination) {
    let reported = 0;
    let noticeAt = 0;
    setInterval(() => {
      logger.flush();
      const now = Date.now();
      if (dropped > reported && now - noticeAt >= DROP_NOTICE_MS) {
        // If stdout is still stalled this line is dropped too, and counted in the next notice.
        logger.warn({ dropped_lines: dropped - reported, dropped_lines_total: dropped }, 'log lines dropped: stdout did not keep up');
        reported = dropped;
        noticeAt = now;
      }
    }, FLUSH_INTERVAL_MS).unref();
  }
  return logger;
}

/** The one line per answered request on the public port: ids, counts and codes, nothing else. */
export interface RequestLogLine {
  readonly request_id: string;
  readonly status: number;
  readonly data_set_id: string | undefined;
  readonly key_id: string | undefined;
  readonly accepted: number;
  readonly rejected: number;
  readonly error_code: string | undefined;
  readonly latency_ms: number;
  readonly http: string;
}

/**
 * Writes the request line through `logger` (same destination, level, base fields and timestamp)
 * without the redaction pass: its fields are this closed set of scalars, which no redact path can
 * match, and the redaction of every line cost ~35% of the line (2.5 of ~7 µs per request, measured
 * in-process; issue 17). Every other log call keeps the redaction.
 */
export function requestLineWriter(logger: Logger, windowMs = REFUSAL_LOG_WINDOW_MS): (line: RequestLogLine) => void {
  const plain = logger.child({}, { redact: { paths: [] } });
  const refusals = new RefusalLines(plain, windowMs);
  return (line) => {
    // Refused before authentication (no verified key id): aggregated. The signed path pays one test.
    if (line.key_id === undefined && line.status >= 400 && line.status < 500) refusals.add(line);
    else plain.info(line, 'request');
  };
}

/** Per reason, the first refused request of a window logged in full, the rest only counted. */
export const REFUSAL_LOG_WINDOW_MS = 1000;

interface RefusalReason {
  readonly status: number;
  readonly error_code: string | undefined;
  count: number;
}

/**
 * The aggregation of lines of requests refused before authentication (see the header). Its state is
 * one entry per reason seen in the current window: reasons are our status codes and error codes (a
 * fixed vocabulary), never anything a client chose, so it stays a handful of entries. One timer per
 * window, only while refusals arrive.
 */
class RefusalLines {
  #window = new Map<string, RefusalReason>();
  #timer: NodeJS.Timeout | null = null;

  constructor(private readonly plain: Logger, private readonly windowMs: number) {}

  add(line: RequestLogLine): void {
    const reason = line.error_code === undefined ? String(line.status) : `${line.status} ${line.error_code}`;
    const seen = this.#window.get(reason);
    if (seen !== undefined) {
      seen.count++;
      return;
    }
    this.#window.set(reason, { status: line.status, error_code: line.error_code, count: 0 });
    this.plain.info(line, 'request');
    if (this.#timer === null) {
      this.#timer = setTimeout(() => this.#flush(), this.windowMs);
      this.#timer.unref();
    }
  }

  #flush(): void {
    this.#timer = null;
    const window = this.#window;
    this.#window = new Map();
    for (const reason of window.values()) {
      if (reason.count === 0) continue;
      this.plain.info(
        { status: reason.status, error_code: reason.error_code, count: reason.count, window_ms: this.windowMs },
        'requests refused before authentication',
      );
    }
  }
}
