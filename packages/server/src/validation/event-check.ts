/**
 * The contract between the request path and the event processor (validation, step 3 of the spec's
 * request handling, then privacy policy, step 4: validation/event-processor.ts runs them in order).
 *
 * The request path hands each event, already parsed, to an EventProcessor and gets back exactly one
 * outcome (events/event-outcome.ts: accepted with the event as it must be queued, or rejected with
 * one `{code, message}`). The processor never throws for bad input, never logs event contents and
 * does no I/O.
 */
import type { DataSetPolicy } from '../control/data-set-policy.js';
import type { EventCheck, EventOutcome } from '../events/event-outcome.js';

export interface EventCheckContext {
  /** Current time in unix seconds (injected so that tests and the request share one clock read). */
  readonly nowSeconds: number;
  readonly policy: DataSetPolicy;
}

export interface EventProcessor {
  /** The request path's check: a rejection comes back as `{code, message}`. */
  evaluate(event: unknown, context: EventCheckContext): EventOutcome;
  /** evaluate() with a rejection's message only, as a sender sees it (tools and tests that compare wire text). */
  check(event: unknown, context: EventCheckContext): EventCheck;
}
