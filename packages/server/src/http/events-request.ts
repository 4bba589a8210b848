/**
 * POST /v1/events after the body was read: authenticate, authorize, parse, check each event, queue.
 * Pure of HTTP: it takes headers and bytes and returns the status and body to send, so that the
 * order of the spec's checks is visible in one place and testable in-process.
 *
 * Order (cheap and unauthenticated checks first):
 *   bearer -> key/data-set/signature headers -> key -> HMAC -> Content-Type / Accept
 *   -> grant for X-Service-Data-Set -> parse -> every event's data_set_id authorized (else 401 whole)
 *   -> per event: data_set_id equals header, then the processor's two steps (schema + rules,
 *      then privacy policy) -> durable append.
 *
 * Before the body is read, http/head-refusal.ts has already answered, with the same statuses and
 * messages, what needs no body (Host, gateway, Content-Length, body codings, and through
 * refusalBeforeBody the Bearer, header and key checks up to the HMAC): repeating them here keeps
 * this function complete on its own and costs a few header lookups.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { EventErrors, QueueUnavailableError, RequestError, requestError } from '../errors.js';
import { authenticate, isAuthorized, isBearer } from '../auth/request-authenticator.js';
import type { CredentialSnapshot } from '../control/control-plane.js';
import type { EventPolicyMeta, EventRejection } from '../events/event-outcome.js';
import type { EventCheckContext, EventProcessor } from '../validation/event-check.js';
import type { EventQueue } from '../queue/event-queue.js';
import type { ServiceMetrics } from '../observability/service-metrics.js';
import { rejectionReasonOf } from '../observability/service-metrics.js';
import type { ObservedEventError } from '../analytics/ingest-observer.js';
import { rateLimitHeaders, type RateLimiter, type Admission } from '../rate-limit/rate-limiter.js';
import type { DataSetLimits } from '../rate-limit/data-set-limits.js';
import type { LimitName } from '../rate-limit/data-set-buckets.js';
import type { IngestOutcomeRecorder } from '../analytics/ingest-outcome-recorder.js';
import type { IngestObserver } from '../analytics/ingest-observer.js';
import { acceptsJson, isJsonContentType } from './media-types.js';
import { parseEvents } from './payload.js';
import { storedPathLabelOf, storedReasonOf } from '../validation/stored-reason.js';

export interface EventsOutcome {
  readonly status: number;
  readonly body: string;
  readonly dataSetId?: string;
  readonly keyId?: string;
  readonly accepted: number;
  readonly rejected: number;
  /** Registry code of a request-level error, for the log line. */
  readonly errorCode?: string;
  /** Rate-limit headers (and Retry-After on a 429) of an authenticated request. */
  readonly headers?: Readonly<Record<string, string>>;
}

export interface EventsRequestDeps {
  readonly credentials: () => CredentialSnapshot;
  readonly processor: EventProcessor;
  readonly queue: EventQueue;
  readonly metrics: ServiceMetrics;
  readonly rateLimiter: RateLimiter;
  readonly now: () => number;
  /** Analytics hook: per-event outcomes of each validated request (counts and messages only). */
  readonly outcomes?: IngestOutcomeRecorder;
  /** Operator console hook (live figures, recent rejections; accepted events only in the test environment). */
  readonly observer?: IngestObserver;
}

/** The `<which limit>` of `rate limit exceeded: <which limit>`. */
function limitDescription(limit: LimitName, limits: DataSetLimits): string {
  switch (limit) {
    case 'burst':
      return `burst of ${limits.burstRps} requests per second`;
    case 'requests':
      return `${limits.rps} requests per second sustained`;
    case 'events':
      return `${limits.eps} events per second`;
  }
}

class RateLimited extends RequestError {
  constructor(readonly admission: Admission, limits: DataSetLimits) {
    super('RATE_LIMITED', requestError('RATE_LIMITED', limitDescription(admission.limit!, limits)).message);
  }
}

/** One entry of the response's `errors[]`: the wire shape, the message exactly as the spec words it. */
interface ErrorEntry {
  index: number;
  event_id: string | null;
  error: string;
}

/** The two rejections this module produces itself, built once (the one shared object each; exported for tests). */
export const NOT_AN_OBJECT = EventErrors.SCHEMA.error('event must be a JSON object');
export const DATA_SET_MISMATCH = EventErrors.INVALID_FIELD.error('data_set_id', 'must equal X-Service-Data-Set');

const NO_ERRORS: readonly string[] = Object.freeze([]);

function withoutBom(body: Buffer): Buffer {
  return body.length >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf ? body.subarray(3) : body;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

export function requestErrorOutcome(error: RequestError, extra: Partial<EventsOutcome> = {}): EventsOutcome {
  return { status: error.status, body: JSON.stringify({ error: error.message }), accepted: 0, rejected: 0, errorCode: error.code, ...extra };
}

interface CheckedEvents {
  accepted: Record<string, unknown>[];
  metas: (EventPolicyMeta | undefined)[];
  /** The response's errors[]: the exact messages (the sender's own data). */
  readonly errors: ErrorEntry[];
  /**
   * The same errors as they may be stored, served to operators or counted: sender-controlled
   * names and values masked (validation/stored-reason.ts, issue 16 point 7), with their reason label.
   */
  readonly storedErrors: ObservedEventError[];
  /** Some accepted event differs from what was sent (nulls removed, policy applied). */
  readonly modified: boolean;
}

const EMPTY_EVENTS: Record<string, unknown>[] = [];

/** Step 8: each event's data set, then schema, rules and privacy policy; one outcome per event. */
function checkEvents(deps: EventsRequestDeps, events: readonly unknown[], headerDataSet: string, context: EventCheckContext): CheckedEvents {
  const accepted: Record<string, unknown>[] = [];
  const metas: (EventPolicyMeta | undefined)[] = [];
  const errors: ErrorEntry[] = [];
  const storedErrors: ObservedEventError[] = [];
  let modified = false;
  for (let index = 0; index < events.length; index++) {
    const event = events[index];
    let error: EventRejection;
    if (!isPlainObject(event)) {
      error = NOT_AN_OBJECT;
    } else if (typeof event.data_set_id === 'string' && event.data_set_id !== headerDataSet && event.data_set_id !== '') {
      error = DATA_SET_MISMATCH;
    } else {
      const check = deps.processor.evaluate(event, context);
      if (check.ok) {
        accepted.push(check.event);
        metas.push(check.meta);
        if (check.modified) modified = true;
        if (check.meta?.piiRedacted) {
          // The label is bounded: a schema path, or a known prefix and `*` (never a sender's key).
          for (const field of check.meta.piiRedacted) deps.metrics.piiRedactions.inc({ field: storedPathLabelOf(field) });
        }
        continue;
      }
      error = check.error;
    }
    const eventId = isPlainObject(event) && typeof event.id === 'string' ? event.id : null;
    const reason = error === DATA_SET_MISMATCH ? 'data_set_mismatch' : rejectionReasonOf(error.code);
    errors.push({ index, event_id: eventId, error: error.message });
    storedErrors.push({ index, event_id: eventId, error: storedReasonOf(error), reason });
    deps.metrics.eventsRejected.inc({ reason });
  }
  return { accepted, metas, errors, storedErrors, modified };
}

export async function handleEventsRequest(
  deps: EventsRequestDeps,
  headers: IncomingHttpHeaders,
  body: Buffer,
  requestId: string,
): Promise<EventsOutcome> {
  const nowMs = deps.now();
  const snapshot = deps.credentials();
  let ids: { dataSetId?: string; keyId?: string } = {};
  // The last admission decides the RateLimit headers of whatever answer this request gets.
  let admission: Admission | undefined;
  const withHeaders = <T extends EventsOutcome>(outcome: T): T =>
    admission?.view ? { ...outcome, headers: rateLimitHeaders(admission.view) } : outcome;
  try {
    if (isBearer(headers.authorization)) throw requestError('BEARER_NOT_ENABLED');
    const principal = authenticate(headers, body, snapshot, nowMs);
    const headerDataSet = principal.dataSetId;
    ids = { dataSetId: headerDataSet, keyId: principal.key.keyId };
    const contentType = headers['content-type'];
    if (!isJsonContentType(contentType)) throw requestError('UNSUPPORTED_CONTENT_TYPE', contentType ?? '');
    if (!acceptsJson(headers.accept)) throw requestError('NOT_ACCEPTABLE');
    if (!isAuthorized(principal.key, headerDataSet, snapshot)) throw requestError('NOT_AUTHORIZED', headerDataSet);

    // Every authenticated and authorized request counts, whatever its outcome.
    const dataSet = snapshot.dataSets.get(headerDataSet)!;
    const admitRequest = deps.rateLimiter.admit(headerDataSet, dataSet.limits, 1, 0);
    admission = admitRequest instanceof Promise ? await admitRequest : admitRequest;
    if (!admission.ok) throw new RateLimited(admission, dataSet.limits);

    let events: unknown[] | null = parseEvents(body);

    // A batch that names any data set the principal may not write is refused whole (spec: Authorization 2).
    for (const event of events) {
      if (isPlainObject(event)) {
        const id = event.data_set_id;
        // An empty id names no data set: it is the event's own invalid field (below), not a grant.
        if (typeof id === 'string' && id !== headerDataSet && id !== '' && !isAuthorized(principal.key, id, snapshot)) {
          throw requestError('NOT_AUTHORIZED', id);
        }
      }
    }

    const admitEvents = deps.rateLimiter.admit(headerDataSet, dataSet.limits, 0, events.length);
    admission = admitEvents instanceof Promise ? await admitEvents : admitEvents;
    if (!admission.ok) throw new RateLimited(admission, dataSet.limits);

    const policy = dataSet.policy;
    const checked = checkEvents(deps, events, headerDataSet, { nowSeconds: Math.floor(nowMs / 1000), policy });
    // Console (test environment only): the rejected events as received, shown masked beside their error.
    const rejectedEvents = deps.observer?.wantsEvents ? checked.errors.map((e) => events![e.index]) : undefined;
    events = null;
    const { errors, storedErrors } = checked;
    const acceptedCount = checked.accepted.length;

    if (acceptedCount === 0) {
      deps.outcomes?.record(headerDataSet, nowMs, 0, storedErrors.map((e) => e.error));
      deps.observer?.validated({ dataSetId: headerDataSet, keyId: principal.key.keyId, requestId, receivedAtMs: nowMs, accepted: 0, metas: [], errors: storedErrors, rejectedEvents });
      return withHeaders({
        status: 400,
        body: JSON.stringify({ accepted: 0, rejected: errors.length, errors }),
        accepted: 0,
        rejected: errors.length,
        ...ids,
      });
    }

    // Console: the events as queued are kept across the commit wait only when the observer wants them (test environment).
    const observedEvents = deps.observer?.wantsEvents ? checked.accepted : undefined;
    const observedMetas = checked.metas;
    const appendStarted = performance.now();
    try {
      const appended = deps.queue.append({
        requestId,
        keyId: principal.key.keyId,
        dataSetId: headerDataSet,
        receivedAt: nowMs,
        policyVersion: policy.version,
        mergeWindowMs: policy.mergeWindowMs,
        events: checked.accepted,
        metas: checked.metas,
        // Every event accepted as sent: the body already is their serialization.
        ...(errors.length === 0 && !checked.modified ? { rawBody: withoutBom(body) } : {}),
      });
      // The queue serialized (or took the bytes of) the events synchronously. Let the parsed objects
      // go before waiting for the commit: kept across the wait they survive young-generation
      // collections and get promoted, and old-generation GC was the largest cost of big batches.
      checked.accepted = EMPTY_EVENTS;
      checked.metas = [];
      await appended;
    } catch (error) {
      if (error instanceof QueueUnavailableError) {
        throw new RequestError('BACKEND_UNAVAILABLE', requestError('BACKEND_UNAVAILABLE').message, { cause: error });
      }
      throw error;
    }
    deps.metrics.queueAppendDuration.observe((performance.now() - appendStarted) / 1000);
    deps.metrics.eventsAccepted.inc(acceptedCount);
    deps.outcomes?.record(headerDataSet, nowMs, acceptedCount, errors.length === 0 ? NO_ERRORS : storedErrors.map((e) => e.error));
    deps.observer?.validated({
      dataSetId: headerDataSet, keyId: principal.key.keyId, requestId, receivedAtMs: nowMs,
      accepted: acceptedCount, metas: observedMetas, events: observedEvents, errors: storedErrors, rejectedEvents,
    });

    if (errors.length === 0) {
      return withHeaders({ status: 200, body: `{"accepted":${acceptedCount}}`, accepted: acceptedCount, rejected: 0, ...ids });
    }
    return withHeaders({
      status: 207,
      body: JSON.stringify({ accepted: acceptedCount, rejected: errors.length, errors }),
      accepted: acceptedCount,
      rejected: errors.length,
      ...ids,
    });
  } catch (error) {
    if (error instanceof RateLimited) {
      deps.metrics.rateLimited.inc({ limit: error.admission.limit! });
      if (ids.dataSetId) deps.observer?.rateLimited(ids.dataSetId, nowMs);
      return requestErrorOutcome(error, {
        ...ids,
        headers: {
          ...(error.admission.view ? rateLimitHeaders(error.admission.view) : {}),
          'retry-after': String(error.admission.retryAfterSeconds),
        },
      });
    }
    if (error instanceof RequestError) return withHeaders(requestErrorOutcome(error, ids));
    throw error;
  }
}
