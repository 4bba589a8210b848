/**
 * Per-event rejection reasons: the stable code, the HTTP status an all-failed request takes, and
 * the message template, once, for the server (which produces them as `{code, message}` and writes
 * the message into `errors[].error`) and the sender SDK (which words its local validation the same
 * way and returns `{code, message}`).
 *
 * Producers build the data with `EventErrors.X.error(...)`: the code travels with the message, so
 * no consumer in the process that produced it has to recognise a code from text. The wire format
 * is the interface spec's: `errors[].error` is the message alone, a string of exactly these
 * shapes, and the code is not on the wire. eventErrorOf() reads the code back from such a string,
 * which only a reader of text the producer no longer holds needs: the SDK reading a service
 * response, or the server reading a reason stored before codes were kept. It uses the templates'
 * own fixed prefixes, so a template and its reader cannot drift. Rewording a template is a
 * breaking change: senders match on the messages.
 */

export interface EventErrorDefinition<C extends string = string, A extends unknown[] = []> {
  readonly code: C;
  readonly status: number;
  readonly message: (...args: A) => string;
  /** The rejection as data: `{code, message}`, one small object. */
  readonly error: (...args: A) => { readonly code: C; readonly message: string };
}

function def<C extends string, A extends unknown[]>(code: C, status: number, message: (...args: A) => string): EventErrorDefinition<C, A> {
  return { code, status, message, error: (...args: A) => ({ code, message: message(...args) }) };
}

export const EventErrors = {
  SCHEMA: def('SCHEMA', 400, (detail: string) => `schema validation failed: ${detail}`),
  MISSING_FIELD: def('MISSING_FIELD', 400, (field: string) => `missing required field: ${field}`),
  INVALID_FIELD: def('INVALID_FIELD', 400, (field: string, reason: string) => `invalid field ${field}: ${reason}`),
  NOT_HASHED: def('NOT_HASHED', 400, (field: string) => `hashed field ${field} is not a 64-char lowercase hex sha256`),
  NOT_AUTHORIZED: def('NOT_AUTHORIZED', 401, (dataSetId: string) => `principal not authorized for data_set_id ${dataSetId}`),
} as const;

export type EventErrorCode = keyof typeof EventErrors;

/** A per-event rejection as data: what programs branch on (`code`) and what people read (`message`). */
export interface EventError {
  readonly code: EventErrorCode | 'OTHER';
  readonly message: string;
}

/** The fixed text each template starts with (the template called with markers, cut at the first argument). */
const PREFIXES: ReadonlyArray<readonly [EventErrorCode, string]> = (Object.keys(EventErrors) as EventErrorCode[]).map((code) => {
  const marker = '\u0000';
  const sample = (EventErrors[code].message as (...args: string[]) => string)(marker, marker);
  return [code, sample.slice(0, sample.indexOf(marker))] as const;
});

/** The fixed text a code's messages start with (`invalid field `, `schema validation failed: `). */
export function eventErrorPrefixOf(code: EventErrorCode): string {
  return PREFIXES.find(([c]) => c === code)![1];
}

/**
 * The code of a per-event message in the spec's shapes (`OTHER` for any other text). Only for text
 * whose producer's `{code, message}` is gone: a service response (the SDK) or a stored reason.
 */
export function eventErrorOf(message: string): EventError {
  for (const [code, prefix] of PREFIXES) if (message.startsWith(prefix)) return { code, message };
  return { code: 'OTHER', message };
}
