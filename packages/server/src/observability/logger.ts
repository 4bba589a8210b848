/**
 * Structured JSON logs (pino). The rule that matters: a log line never carries a request body,
 * a secret, a signature or a personal identifier. Request log lines are built field by field in
 * the request handler from counts and ids; nothing logs a request or event object wholesale, and
 * the redact paths below are a second line of defence for anything that ever tries.
 */
import pino, { type Logger } from 'pino';

export type { Logger };

export function createLogger(options: { level?: string; destination?: pino.DestinationStream } = {}): Logger {
  return pino(
    {
      level: options.level ?? process.env.ECAPI_LOG_LEVEL ?? 'info',
      base: { service: 'ecapi-ingest' },
      redact: {
        paths: ['secret', '*.secret', 'signature', '*.signature', 'headers', 'body', 'event', 'events', 'req.headers'],
        censor: '[redacted]',
      },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination ?? pino.destination({ dest: 1, sync: false }),
  );
}
