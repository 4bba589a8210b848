/**
 * What became of one event on the request path: the contract shared by validation (step 3 of the
 * spec's request handling), privacy policy (step 4), the queue, analytics and the HTTP layer.
 *
 * Ground floor: this module imports no other module of the server (only the protocol's error
 * types), so every step of the pipeline can name the outcome without importing another step.
 *
 * Invariants:
 * - An outcome is exactly one of: accepted (the event as it must be queued, after policy) or
 *   rejected with one `{code, message}` (a registry code of @ecapi-ingest/protocol's EventErrors;
 *   the message in the spec's per-event shapes, the first problem in document order). The code is
 *   produced with the message, where the problem is found, so nothing downstream (metrics, stored
 *   reasons, console) recognises it from the text.
 * - EventPolicyMeta never contains an identifier: it is stored with the queued record.
 */
import type { EventError, EventErrorCode } from '@ecapi-ingest/protocol';

/** What policy did to an accepted event; stored with the queued record, never containing identifiers. */
export interface EventPolicyMeta {
  /** Consent decision from GPP, when one applied. */
  consent?: { decision: 'measurement_only' | 'none'; sections: number[]; signals: string[] };
  /** Fields where a plaintext identifier was redacted, in document order, by their stored paths (validation/stored-reason.ts: a key the schema does not know is `*`). */
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
