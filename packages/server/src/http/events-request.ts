/**
 * POST /v1/events after the body was read: authenticate, authorize, parse, check each event, queue.
 * Pure of HTTP: it takes headers and bytes and returns the status and body to send, so that the
 * order of the spec's checks is visible in one place and testable in-process.
 *
 * Order (cheap and unauthenticated checks first):
 *   bearer -> key/data-set/signature headers -> key -> HMAC -> Content-Type / Accept
 *   -> grant for X-Service-Data-Set -> parse -> every event's data_set_id authorized (else 401 whole)
 *   -> per event: data_set_id equals header, schema + rules + privacy policy -> durable append.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { EventErrors, QueueUnavailableError, RequestError, requestError } from '../errors.js';
import { authenticate, isAuthorized, isBearer } from '../auth/request-authenticator.js';
import type { CredentialSnapshot } from '../control/control-plane.js';
import type { EventProcessor, EventPolicyMeta } from '../validation/event-check.js';
import type { EventQueue } from '../queue/event-queue.js';
import type { ServiceMetrics } from '../observability/service-metrics.js';
import { rejectionReasonOf } from '../observability/service-metrics.js';
import type { RateLimiter, Admission } from '../rate-limit/rate-limiter.js';
import type { DataSetLimits } from '../rate-limit/data-set-limits.js';
import type { LimitName } from '../rate-limit/data-set-buckets.js';
import type { IngestOutcomeRecorder } from '../analytics/ingest-outcome-recorder.js';
import { acceptsJson, isJsonContentType } from './media-types.js';
import { parseEvents } from './payload.js';

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

interface EventError {
  index: number;
  event_id: string | null;
  error: string;
}

const NO_ERRORS: readonly string[] = Object.freeze([]);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

export function requestErrorOutcome(error: RequestError, extra: Partial<EventsOutcome> = {}): EventsOutcome {
  return { status: error.status, body: JSON.stringify({ error: error.message }), accepted: 0, rejected: 0, errorCode: error.code, ...extra };
}

export async function handleEventsRequest(
  deps: EventsRequestDeps,
  headers: IncomingHttpHeaders,
  body: Buffer,
  requestId: string,
): Promise<EventsOutcome> {
  const nowMs = deps.now();
  const snapshot = deps.credentials();
  let ids: { dataSetId?: string; keyId?: string; headers?: Readonly<Record<string, string>> } = {};
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
    const requestAdmission = admitRequest instanceof Promise ? await admitRequest : admitRequest;
    ids = { ...ids, headers: requestAdmission.headers };
    if (!requestAdmission.ok) throw new RateLimited(requestAdmission, dataSet.limits);

    const events = parseEvents(body);

    // A batch that names any data set the principal may not write is refused whole (spec: Authorization 2).
    for (const event of events) {
      if (isPlainObject(event)) {
        const id = event.data_set_id;
        if (typeof id === 'string' && id !== headerDataSet && !isAuthorized(principal.key, id, snapshot)) {
          throw requestError('NOT_AUTHORIZED', id);
        }
      }
    }

    const admitEvents = deps.rateLimiter.admit(headerDataSet, dataSet.limits, 0, events.length);
    const eventsAdmission = admitEvents instanceof Promise ? await admitEvents : admitEvents;
    ids = { ...ids, headers: eventsAdmission.headers };
    if (!eventsAdmission.ok) throw new RateLimited(eventsAdmission, dataSet.limits);

    const policy = dataSet.policy;
    const context = { nowSeconds: Math.floor(nowMs / 1000), policy };
    const accepted: Record<string, unknown>[] = [];
    const metas: (EventPolicyMeta | undefined)[] = [];
    const errors: EventError[] = [];
    for (let index = 0; index < events.length; index++) {
      const event = events[index];
      let error: string | undefined;
      if (!isPlainObject(event)) {
        error = EventErrors.SCHEMA.message('event must be a JSON object');
      } else if (typeof event.data_set_id === 'string' && event.data_set_id !== headerDataSet) {
        error = EventErrors.INVALID_FIELD.message('data_set_id', 'must equal X-Service-Data-Set');
      } else {
        const check = deps.processor.check(event, context);
        if (check.ok) {
          accepted.push(check.event);
          metas.push(check.meta);
          if (check.meta?.piiRedacted) {
            for (const field of check.meta.piiRedacted) deps.metrics.piiRedactions.inc({ field });
          }
          continue;
        }
        error = check.error;
      }
      const eventId = isPlainObject(event) && typeof event.id === 'string' ? event.id : null;
      errors.push({ index, event_id: eventId, error });
      deps.metrics.eventsRejected.inc({ reason: rejectionReasonOf(error) });
    }

    if (accepted.length === 0) {
      deps.outcomes?.record(headerDataSet, nowMs, 0, errors.map((e) => e.error));
      return {
        status: 400,
        body: JSON.stringify({ accepted: 0, rejected: errors.length, errors }),
        accepted: 0,
        rejected: errors.length,
        ...ids,
      };
    }

    const appendStarted = performance.now();
    try {
      await deps.queue.append({
        requestId,
        keyId: principal.key.keyId,
        dataSetId: headerDataSet,
        receivedAt: nowMs,
        policyVersion: policy.version,
        events: accepted,
        metas,
      });
    } catch (error) {
      if (error instanceof QueueUnavailableError) {
        throw new RequestError('BACKEND_UNAVAILABLE', requestError('BACKEND_UNAVAILABLE').message, { cause: error });
      }
      throw error;
    }
    deps.metrics.queueAppendDuration.observe((performance.now() - appendStarted) / 1000);
    deps.metrics.eventsAccepted.inc(accepted.length);
    deps.outcomes?.record(headerDataSet, nowMs, accepted.length, errors.length === 0 ? NO_ERRORS : errors.map((e) => e.error));

    if (errors.length === 0) {
      return { status: 200, body: `{"accepted":${accepted.length}}`, accepted: accepted.length, rejected: 0, ...ids };
    }
    return {
      status: 207,
      body: JSON.stringify({ accepted: accepted.length, rejected: errors.length, errors }),
      accepted: accepted.length,
      rejected: errors.length,
      ...ids,
    };
  } catch (error) {
    if (error instanceof RateLimited) {
      deps.metrics.rateLimited.inc({ limit: error.admission.limit! });
      return requestErrorOutcome(error, {
        ...ids,
        headers: { ...error.admission.headers, 'retry-after': String(error.admission.retryAfterSeconds) },
      });
    }
    if (error instanceof RequestError) return requestErrorOutcome(error, ids);
    throw error;
  }
}
