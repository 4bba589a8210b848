/**
 * The contract between the request path and event validation + privacy policy
 * (steps 3 and 4 of the spec's request handling).
 *
 * The request path hands each event, already parsed, to an EventProcessor and gets back exactly one
 * outcome: accepted (with the event as it must be queued, after policy) or rejected with one
 * `{code, message}` (a registry code of @ecapi-ingest/protocol's EventErrors; the message in the
 * spec's per-event shapes, the first problem in document order). The code is produced with the
 * message, where the problem is found, so nothing downstream (metrics, stored reasons, console)
 * recognises it from the text. The processor never throws for bad input, never logs event
 * contents and does no I/O.
 */
import type { EventError, EventErrorCode } from '@ecapi-ingest/protocol';
import type { DataSetPolicy } from '../control/data-set-policy.js';

export interface EventCheckContext {
  /** Current time in unix seconds (injected so that tests and the request share one clock read). */
  readonly nowSeconds: number;
  readonly policy: DataSetPolicy;
}

/** What policy did to an accepted event; stored with the queued record, never containing identifiers. */
export interface EventPolicyMeta {
  /** Consent decision from GPP, when one applied. */
  consent?: { decision: 'measurement_only' | 'none'; sections: number[]; signals: string[] };
  /** JSON paths of fields where a plaintext identifier was redacted. */
  piiRedacted?: string[];
  /** 'truncated' or 'dropped' when the IP policy changed the event. */
  ip?: 'truncated' | 'dropped';
}

export interface AcceptedEvent {
  readonly ok: true;
  readonly event: Record<string, unknown>;
  readonly meta: EventPolicyMeta | undefined;
  /**
   * False when the accepted event is exactly what the sender sent (no null removed, no policy
   * change): the queue may then store the request's original bytes instead of re-serializing.
   */
  readonly modified: boolean;
}

/** A rejection as the server produces it: always a registry code (never the SDK's `OTHER`). */
export type EventRejection = EventError & { readonly code: EventErrorCode };

/** The request path's outcome: a rejection as data. */
export type EventOutcome = AcceptedEvent | { readonly ok: false; readonly error: EventRejection };

/** The same outcome with a rejection as its wire text (`errors[].error`) alone. */
export type EventCheck = AcceptedEvent | { readonly ok: false; readonly error: string };

export interface EventProcessor {
  /** The request path's check: a rejection comes back as `{code, message}`. */
  evaluate(event: unknown, context: EventCheckContext): EventOutcome;
  /** evaluate() with a rejection's message only, as a sender sees it (tools and tests that compare wire text). */
  check(event: unknown, context: EventCheckContext): EventCheck;
}
