/**
 * What Client.send() reports: one result per input event (accepted, rejected, undeliverable), the
 * totals, the progress callbacks' shapes and the request-level failure.
 *
 * Invariants the rest of the SDK keeps: every input event gets exactly one result, at its input
 * index; the totals are counts of those results (done = accepted + rejected + undeliverable); an
 * event that is not accepted carries the event as sent (hashed, with its id), so resending it can
 * never create a duplicate.
 *
 * `accepted` is reported only on the service's clear word: a 200 whose body's `accepted` is the
 * number of events sent, or a 207 whose multi-status body adds up against the request sent
 * (multi-status.ts). Of a body that does not, no event is accepted: the events it still clearly
 * rejects are `rejected`, every other one `undeliverable` with INCONSISTENT_RESPONSE; still exactly
 * one result per event, and the totals count them.
 */
import type { EcapiEvent } from './event-types.generated.js';
import type { DeliveryFailure, Rejection } from './send-errors.js';

export interface AcceptedEvent {
  readonly status: 'accepted';
  /** Position in the array given to send(). */
  readonly index: number;
  /** The event's id (generated when it had none), or null. */
  readonly id: string | null;
  readonly requestId: string | undefined;
}

export interface RejectedEvent {
  readonly status: 'rejected';
  readonly index: number;
  readonly id: string | null;
  /** The service's per-event error, or the local validation/normalization error, as {code, message}. */
  readonly error: Rejection;
  /** The HTTP status that rejected it, or null when it was rejected before sending. */
  readonly httpStatus: number | null;
  readonly requestId: string | undefined;
  /** The event as it was (or would have been) sent: hashed, with its id. Resend this after fixing it. */
  readonly event: EcapiEvent;
}

export interface UndeliverableEvent {
  readonly status: 'undeliverable';
  readonly index: number;
  readonly id: string | null;
  /**
   * The last failure (`SERVER_ERROR` `500 ingest backend unavailable`, `NETWORK`, `TIMEOUT`), a
   * 200 or multi-status body that did not add up (`INCONSISTENT_RESPONSE`), or the send's request-level failure.
   */
  readonly error: DeliveryFailure;
  /** Attempts made for this event's request (0: not sent, because the send had stopped). */
  readonly attempts: number;
  /** The event as sent, with its id: resending it later cannot create a duplicate. */
  readonly event: EcapiEvent;
}

export type EventResult = AcceptedEvent | RejectedEvent | UndeliverableEvent;

export interface SendTotals {
  readonly total: number;
  readonly accepted: number;
  readonly rejected: number;
  readonly undeliverable: number;
  /** HTTP requests made, retries included. */
  readonly requests: number;
  readonly retries: number;
}

export interface SendProgress extends SendTotals {
  /** Events with a final outcome so far. */
  readonly done: number;
  readonly elapsedMs: number;
}

export interface SendResult extends SendTotals {
  /** One result per input event, in input order. */
  readonly results: EventResult[];
  readonly durationMs: number;
  /** True when every event was accepted. */
  readonly ok: boolean;
  /**
   * Set when the send stopped on a failure every request would meet (AUTHENTICATION,
   * AUTHORIZATION, WRONG_URL, TLS, HOST_NOT_FOUND): reported once here; the events it stopped are
   * undeliverable with this same error.
   */
  readonly failure: DeliveryFailure | undefined;
}

export interface RetryInfo {
  /**
   * `credentials-changed`: a 401 answered an attempt signed before setCredentials() changed the
   * credentials; the request is retried at once (delayMs 0), signed with the new ones, once.
   */
  readonly reason: 'server-error' | 'network-error' | 'rate-limited' | 'credentials-changed';
  readonly status: number | null;
  readonly error: DeliveryFailure;
  /** The retry about to be made, from 1. */
  readonly retry: number;
  readonly delayMs: number;
  /** Retry-After of a 429 or 5xx, in ms, when the service sent one (as sent: `delayMs` is what the client waits). */
  readonly retryAfterMs: number | undefined;
  readonly events: number;
}
