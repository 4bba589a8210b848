/**
 * Per-event rejection reasons: the stable code, the HTTP status an all-failed request takes, and
 * the message template, once, for the server (which writes them into `errors[].error`) and the
 * sender SDK (which words its local validation the same way and returns `{code, message}`).
 *
 * The wire format is the interface spec's: `errors[].error` is a string of exactly these shapes.
 * The code is not on the wire; eventErrorOf() reads it back from a message, and is the one place
 * that knows the shapes apart (it uses the templates' own fixed prefixes, so a template and its
 * reader cannot drift). Rewording a template is a breaking change: senders match on the messages.
 */

export interface EventErrorDefinition<A extends unknown[] = []> {
  readonly code: string;
  readonly status: number;
  readonly message: (...args: A) => string;
}

function def<A extends unknown[]>(code: string, status: number, message: (...args: A) => string): EventErrorDefinition<A> {
  return { code, status, message };
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

/** The fixed text each template starts with (the template called with empty arguments, cut at the first argument). */
const PREFIXES: ReadonlyArray<readonly [EventErrorCode, string]> = (Object.keys(EventErrors) as EventErrorCode[]).map((code) => {
  const marker = '\u0000';
  const sample = (EventErrors[code].message as (...args: string[]) => string)(marker, marker);
  return [code, sample.slice(0, sample.indexOf(marker))] as const;
});

/** The code of a per-event message in the spec's shapes (`OTHER` for any other text, e.g. a privacy refusal). */
export function eventErrorOf(message: string): EventError {
  for (const [code, prefix] of PREFIXES) if (message.startsWith(prefix)) return { code, message };
  return { code: 'OTHER', message };
}
