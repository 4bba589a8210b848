/**
 * Client: sends ECAPI 1.0 events to an ecapi-ingest service (POST /v1/events).
 *
 * send(events):
 * 1. prepares every event once (prepareEvents): optional hashing of plaintext identifiers, the
 *    client's data set filled in where absent, a generated UUIDv7 `id` where absent (so a retry can
 *    never create a second record), optional schema validation; then serializes it, once;
 * 2. packs the serialized events into as few requests as the limits allow (1,000 events, 1 MiB);
 * 3. signs each body's exact bytes and sends those same bytes, with bounded concurrency over a
 *    keep-alive connection pool (undici);
 * 4. follows the spec's retry guidance (see retry.ts) and returns one result per input event.
 */
import { Agent, type Dispatcher } from 'undici';
import { EVENTS_PATH, EventErrors, HEADER_DATA_SET, HEADER_KEY_ID, HEADER_REQUEST_ID, HEADER_SIGNATURE, eventErrorOf, signBody } from './protocol.js';
import type { EcapiEvent } from './event-types.generated.js';
import { hashEvent, type HashOptions, type PlaintextEvent } from './hash-event.js';
import { NormalizationError } from './normalize.js';
import { buildBody, packLimits, planRequests, type PackLimits, type PlannedRequest } from './pack.js';
import {
  DEFAULT_BACKOFF,
  backoffDelayMs,
  classifyStatus,
  isRetryableNetworkError,
  networkFailure,
  parseRetryAfterMs,
  type BackoffOptions,
} from './retry.js';
import { refusalOf, type DeliveryFailure, type Rejection } from './send-errors.js';
import { uuidv7 } from './uuid.js';
import { validateEvent } from './validate.js';

export const CLIENT_VERSION = '0.1.0';

/** Members the client fills in: `data_set_id` (the client's data set) and `id` (a UUIDv7). */
type ClientFilled = 'data_set_id' | 'id';
/**
 * An event as given to send(): an ECAPI 1.0 event whose `data_set_id` and `id` may be left out.
 * Closed like the schema: a misspelt member or event type does not compile.
 */
export type EventInput = Omit<EcapiEvent, ClientFilled> & Partial<Pick<EcapiEvent, ClientFilled>>;
/** The same with plaintext identifiers, for `hash: true` (hashEvent's input). */
export type PlaintextEventInput = Omit<PlaintextEvent, ClientFilled> & Partial<Pick<EcapiEvent, ClientFilled>>;

export interface PrepareOptions {
  /** The data set the events go to; filled in where an event has no data_set_id. */
  readonly dataSetId: string;
  /** Give events without an `id` a UUIDv7, so retries can never duplicate them (default true). */
  readonly generateIds?: boolean;
  /** Validate against the ECAPI 1.0 schema before sending (default true). */
  readonly validate?: boolean;
  /** Hash plaintext identifiers first (hashEvent); `true` or hashing options (default false). */
  readonly hash?: boolean | HashOptions;
  /** Limits per request (default and maximum: 1,000 events, 1,048,576 bytes). */
  readonly maxEventsPerRequest?: number;
  readonly maxBodyBytes?: number;
}

export interface ClientOptions extends PrepareOptions {
  /** Base URL of the service, like `https://ingest.example.com` (the client POSTs to `<baseUrl>/v1/events`). */
  readonly baseUrl: string;
  readonly keyId: string;
  /** The shared secret, exactly as issued. */
  readonly secret: string;
  /** PEM CA certificate(s) to trust, e.g. the server's self-signed certificate. */
  readonly ca?: string | Buffer | ReadonlyArray<string | Buffer>;
  /** Extra TLS connect options for the undici Agent (servername, cert/key for mTLS, …). */
  readonly connect?: Agent.Options['connect'];
  /** Use this undici dispatcher instead of the client's own keep-alive Agent (not closed by close()). */
  readonly dispatcher?: Dispatcher;
  /** Requests in flight at once (default 4). */
  readonly concurrency?: number;
  /** Per-attempt time-out for the response headers and for the body, in ms (default 30,000). */
  readonly timeoutMs?: number;
  /** Retries of one request after a 5xx, network error or time-out (default 6). */
  readonly maxRetries?: number;
  /** Retries of one request after a 429 (default 30); each waits Retry-After. */
  readonly maxRateLimitRetries?: number;
  /** Exponential backoff with full jitter (default base 250 ms, cap 20 s). */
  readonly backoff?: Partial<BackoffOptions>;
  /** Called after each request settles and after each retry decision. */
  readonly onProgress?: (progress: SendProgress) => void;
  /** Called before each retry, with why and how long the client waits. */
  readonly onRetry?: (retry: RetryInfo) => void;
  /** For tests: the random source of the jitter. */
  readonly random?: () => number;
}

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
  /** The last failure (`SERVER_ERROR` `500 ingest backend unavailable`, `NETWORK`, `TIMEOUT`), or the send's request-level failure. */
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
  readonly reason: 'server-error' | 'network-error' | 'rate-limited';
  readonly status: number | null;
  readonly error: DeliveryFailure;
  /** The retry about to be made, from 1. */
  readonly retry: number;
  readonly delayMs: number;
  /** Retry-After of a 429, in ms, when the service sent one. */
  readonly retryAfterMs: number | undefined;
  readonly events: number;
}

/** The outcome of preparing a batch of events: serialized events, local rejections, the request plan. */
export interface PreparedEvents {
  /** Serialized JSON of each event, by input index (undefined for events rejected locally). */
  readonly serialized: (string | undefined)[];
  /** The prepared event objects, by input index. */
  readonly prepared: EcapiEvent[];
  readonly ids: (string | null)[];
  /** Events that failed preparation, with the reason. */
  readonly rejected: RejectedEvent[];
  /** Requests to send: `items` are input indexes. */
  readonly requests: PlannedRequest[];
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Prepares events for sending without any I/O: hashing, data set, ids, validation, serialization
 * (each event exactly once) and the packing plan. `send()` uses it; `--dry-run` is this alone.
 */
export function prepareEvents(events: ReadonlyArray<EventInput | PlaintextEventInput>, options: PrepareOptions): PreparedEvents {
  const limits: PackLimits = packLimits({ maxEvents: options.maxEventsPerRequest, maxBytes: options.maxBodyBytes });
  const hashOptions: HashOptions | undefined = options.hash === true ? {} : options.hash === false || options.hash === undefined ? undefined : options.hash;
  const generateIds = options.generateIds ?? true;
  const validate = options.validate ?? true;
  const n = events.length;
  const serialized: (string | undefined)[] = new Array(n);
  const prepared: EcapiEvent[] = new Array(n);
  const ids: (string | null)[] = new Array(n);
  const rejected: RejectedEvent[] = [];
  const okIndexes: number[] = [];
  const sizes: number[] = [];
  const reject = (index: number, error: Rejection, event: unknown) => {
    rejected.push({ status: 'rejected', index, id: ids[index] ?? null, error, httpStatus: null, requestId: undefined, event: event as EcapiEvent });
  };
  for (let i = 0; i < n; i++) {
    // Typed callers cannot pass a non-object; parsed JSON (the CLI, casts) can, and is checked here.
    const input: unknown = events[i];
    ids[i] = isPlainObject(input) && typeof input.id === 'string' ? input.id : null;
    prepared[i] = input as EcapiEvent;
    if (!isPlainObject(input)) {
      reject(i, { code: 'SCHEMA', message: EventErrors.SCHEMA.message('event must be a JSON object') }, input);
      continue;
    }
    let event: Record<string, unknown> = input;
    try {
      if (hashOptions) event = hashEvent(event as PlaintextEvent, hashOptions) as unknown as Record<string, unknown>;
    } catch (error) {
      if (!(error instanceof NormalizationError)) throw error;
      reject(i, { code: 'NORMALIZATION', message: `normalization failed: ${error.message}` }, event);
      continue;
    }
    if (event.data_set_id === undefined) event = { data_set_id: options.dataSetId, ...event };
    if (event.id === undefined && generateIds) {
      event = { ...event, id: uuidv7() };
    }
    ids[i] = typeof event.id === 'string' ? event.id : null;
    prepared[i] = event as unknown as EcapiEvent;
    if (event.data_set_id !== options.dataSetId && typeof event.data_set_id === 'string') {
      reject(i, EventErrors.INVALID_FIELD.error('data_set_id', `must equal the client's data set "${options.dataSetId}" (X-Service-Data-Set)`), event);
      continue;
    }
    if (validate) {
      const problem = validateEvent(event);
      if (problem !== undefined) {
        reject(i, problem, event);
        continue;
      }
    }
    const json = JSON.stringify(event);
    serialized[i] = json;
    okIndexes.push(i);
    sizes.push(Buffer.byteLength(json, 'utf8'));
  }
  const plan = planRequests(sizes, limits);
  for (const position of plan.oversize) {
    const index = okIndexes[position]!;
    serialized[index] = undefined;
    reject(index, { code: 'EVENT_TOO_LARGE', message: `event exceeds ${limits.maxBytes} bytes serialized: payload exceeds 1 MB limit even on its own` }, prepared[index]);
  }
  rejected.sort((a, b) => a.index - b.index);
  const requests = plan.requests.map((r) => ({ ...r, items: r.items.map((p) => okIndexes[p]!) }));
  return { serialized, prepared, ids, rejected, requests };
}

interface MultiStatusBody {
  accepted?: number;
  errors?: { index: number; event_id?: string | null; error: string }[];
  error?: string;
  /** The gateway's answers (403 for any path but POST /v1/events) say `message`. */
  message?: string;
}

function parseJson(text: string): MultiStatusBody | undefined {
  try {
    const value = JSON.parse(text) as unknown;
    return isPlainObject(value) ? (value as MultiStatusBody) : undefined;
  } catch {
    return undefined;
  }
}

function headerValue(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || hostname === '::1' || /^127\./.test(hostname);
}

export class Client {
  readonly #options: ClientOptions;
  readonly #origin: string;
  readonly #path: string;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  readonly #backoff: BackoffOptions;
  readonly #random: () => number;
  #closed = false;

  constructor(options: ClientOptions) {
    for (const name of ['baseUrl', 'keyId', 'secret', 'dataSetId'] as const) {
      if (typeof options[name] !== 'string' || options[name] === '') throw new TypeError(`Client: ${name} is required`);
    }
    const url = new URL(options.baseUrl);
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopback(url.hostname))) {
      throw new TypeError('Client: baseUrl must be an https:// URL (plain http is allowed for loopback test servers only)');
    }
    this.#options = options;
    this.#origin = url.origin;
    this.#path = url.pathname.replace(/\/+$/, '') + EVENTS_PATH;
    packLimits({ maxEvents: options.maxEventsPerRequest, maxBytes: options.maxBodyBytes });
    const concurrency = options.concurrency ?? 4;
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new TypeError('Client: concurrency must be a positive integer');
    this.#backoff = { ...DEFAULT_BACKOFF, ...options.backoff };
    this.#random = options.random ?? Math.random;
    if (options.dispatcher) {
      this.#dispatcher = options.dispatcher;
      this.#ownsDispatcher = false;
    } else {
      const ca = options.ca === undefined ? undefined : Array.isArray(options.ca) ? [...options.ca] : (options.ca as string | Buffer);
      this.#dispatcher = new Agent({
        connections: concurrency,
        pipelining: 1,
        keepAliveTimeout: 30_000,
        connect: { minVersion: 'TLSv1.3', ...(ca !== undefined ? { ca } : {}), ...options.connect },
      });
      this.#ownsDispatcher = true;
    }
  }

  get dataSetId(): string {
    return this.#options.dataSetId;
  }

  /** Closes the client's connection pool (not a dispatcher passed in). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ownsDispatcher) await this.#dispatcher.close();
  }

  /** Sends events; resolves with a result per event (never rejects for a per-event or HTTP failure). */
  async send(events: ReadonlyArray<EventInput | PlaintextEventInput>): Promise<SendResult> {
    if (this.#closed) throw new Error('Client is closed');
    const started = Date.now();
    const o = this.#options;
    const prep = prepareEvents(events, o);
    const results: (EventResult | undefined)[] = new Array(events.length);
    const totals = { total: events.length, accepted: 0, rejected: 0, undeliverable: 0, requests: 0, retries: 0 };
    const record = (result: EventResult) => {
      results[result.index] = result;
      totals[result.status] += 1;
    };
    for (const r of prep.rejected) record(r);
    const progress = () => {
      o.onProgress?.({ ...totals, done: totals.accepted + totals.rejected + totals.undeliverable, elapsedMs: Date.now() - started });
    };
    progress();

    const run: RunState = { pauseUntil: 0, stop: undefined };
    let next = 0;
    const worker = async () => {
      for (;;) {
        const k = next++;
        if (k >= prep.requests.length) return;
        const request = prep.requests[k]!;
        if (run.stop) {
          notSent(request, prep, run.stop, 0, record);
          progress();
          continue;
        }
        await this.#deliver(request, prep, run, totals, record, progress);
        progress();
      }
    };
    const concurrency = Math.min(o.concurrency ?? 4, Math.max(1, prep.requests.length));
    await Promise.all(Array.from({ length: concurrency }, worker));
    const all = results as EventResult[];
    return { ...totals, results: all, durationMs: Date.now() - started, ok: totals.accepted === totals.total, failure: run.stop };
  }

  async #deliver(
    request: PlannedRequest,
    prep: PreparedEvents,
    run: RunState,
    totals: { requests: number; retries: number },
    record: (r: EventResult) => void,
    progress: () => void,
  ): Promise<void> {
    const o = this.#options;
    const body = buildBody(prep.serialized as string[], request);
    const headers = {
      'content-type': 'application/json',
      accept: 'application/json',
      'user-agent': `ecapi-ingest-client/${CLIENT_VERSION}`,
      [HEADER_KEY_ID]: o.keyId,
      [HEADER_DATA_SET]: o.dataSetId,
      [HEADER_SIGNATURE]: signBody(body, o.secret),
    };
    const timeoutMs = o.timeoutMs ?? 30_000;
    const maxRetries = o.maxRetries ?? 6;
    const maxRateLimitRetries = o.maxRateLimitRetries ?? 30;
    let retries = 0;
    let rateLimitRetries = 0;
    let attempts = 0;
    const ids = (index: number) => prep.ids[index] ?? null;
    const undeliverable = (error: DeliveryFailure) => {
      for (const index of request.items) record({ status: 'undeliverable', index, id: ids(index), error, attempts, event: prep.prepared[index]! });
    };
    /** A failure every request would meet: stop the send, report it once (SendResult.failure). */
    const stop = (failure: DeliveryFailure) => {
      run.stop ??= failure;
      undeliverable(failure);
    };

    for (;;) {
      const wait = run.pauseUntil - Date.now();
      if (wait > 0) await sleep(wait);
      if (run.stop) return notSent(request, prep, run.stop, attempts, record);
      attempts++;
      totals.requests++;
      let status: number;
      let text: string;
      let responseHeaders: Record<string, string | string[] | undefined>;
      try {
        const response = await this.#dispatcher.request({
          origin: this.#origin,
          path: this.#path,
          method: 'POST',
          headers,
          body,
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
          signal: AbortSignal.timeout(timeoutMs * 2),
        });
        status = response.statusCode;
        responseHeaders = response.headers;
        text = await response.body.text();
      } catch (error) {
        const failure = networkFailure(error);
        if (!isRetryableNetworkError(error)) return stop(failure);
        if (retries >= maxRetries) return undeliverable(failure);
        const delayMs = backoffDelayMs(retries, this.#backoff, this.#random);
        retries++;
        totals.retries++;
        o.onRetry?.({ reason: 'network-error', status: null, error: failure, retry: retries, delayMs, retryAfterMs: undefined, events: request.items.length });
        progress();
        await sleep(delayMs);
        continue;
      }

      const requestId = headerValue(responseHeaders, HEADER_REQUEST_ID);
      const parsed = parseJson(text);
      const kind = classifyStatus(status);
      const serviceMessage = parsed?.error ?? parsed?.message ?? (text.slice(0, 200) || 'no body');
      const statusError = `${status} ${serviceMessage}`;

      if (kind === 'retry') {
        const failure: DeliveryFailure = { code: 'SERVER_ERROR', message: statusError, httpStatus: status };
        if (retries >= maxRetries) return undeliverable(failure);
        const delayMs = backoffDelayMs(retries, this.#backoff, this.#random);
        retries++;
        totals.retries++;
        o.onRetry?.({ reason: 'server-error', status, error: failure, retry: retries, delayMs, retryAfterMs: undefined, events: request.items.length });
        progress();
        await sleep(delayMs);
        continue;
      }
      if (kind === 'rate-limited') {
        const failure: DeliveryFailure = { code: 'RATE_LIMITED', message: statusError, httpStatus: status };
        if (rateLimitRetries >= maxRateLimitRetries) return undeliverable(failure);
        const retryAfterMs = parseRetryAfterMs(headerValue(responseHeaders, 'retry-after'));
        // Honor Retry-After (plus up to 10% jitter so paused senders do not return in lockstep);
        // without one, back off exponentially with full jitter like any transient failure.
        const delayMs = retryAfterMs !== undefined
          ? retryAfterMs + Math.floor(this.#random() * Math.min(1000, retryAfterMs * 0.1))
          : backoffDelayMs(rateLimitRetries, this.#backoff, this.#random);
        rateLimitRetries++;
        totals.retries++;
        // Every worker holds off until then: the limit is per data set, not per request.
        run.pauseUntil = Math.max(run.pauseUntil, Date.now() + delayMs);
        o.onRetry?.({ reason: 'rate-limited', status, error: failure, retry: rateLimitRetries, delayMs, retryAfterMs, events: request.items.length });
        progress();
        continue;
      }

      // 200, 207, or a 4xx that no retry can fix.
      const errors = Array.isArray(parsed?.errors) ? parsed!.errors : undefined;
      if (status === 200) {
        for (const index of request.items) record({ status: 'accepted', index, id: ids(index), requestId });
        return;
      }
      const rejected = (index: number, error: Rejection) =>
        record({ status: 'rejected', index, id: ids(index), error, httpStatus: status, requestId, event: prep.prepared[index]! });
      if (errors !== undefined) {
        // 207, or 400 with the multi-status shape: only the listed events failed.
        const failed = new Map<number, string>();
        for (const e of errors) if (Number.isInteger(e?.index)) failed.set(e.index, String(e.error));
        request.items.forEach((index, position) => {
          const error = failed.get(position);
          if (error !== undefined) rejected(index, eventErrorOf(error));
          else if (status === 207) record({ status: 'accepted', index, id: ids(index), requestId });
          else rejected(index, { code: 'REQUEST_REJECTED', message: `rejected with its request: ${statusError}` });
        });
        return;
      }
      // Credentials, a missing grant or a wrong URL fail every request the same way: stop sending.
      if (status === 401 || status === 403 || status === 404) return stop(refusalOf(status, serviceMessage));
      const message = status === 207 ? `207 without an errors list: ${text.slice(0, 200)}` : parsed?.error ?? statusError;
      for (const index of request.items) rejected(index, { code: 'REQUEST_REJECTED', message });
      return;
    }
  }
}

interface RunState {
  /** No request starts before this time (ms): set by a 429's Retry-After. */
  pauseUntil: number;
  /** Set after a failure that every later request would meet too (401, 403, 404, untrusted certificate, unknown host). */
  stop: DeliveryFailure | undefined;
}

/** Events of a request that is not sent because an earlier one showed every request would fail. */
function notSent(request: PlannedRequest, prep: PreparedEvents, stop: DeliveryFailure, attempts: number, record: (r: EventResult) => void): void {
  for (const index of request.items) {
    record({ status: 'undeliverable', index, id: prep.ids[index] ?? null, error: stop, attempts, event: prep.prepared[index]! });
  }
}

/** The signature helper of @ecapi-ingest/protocol: lowercase hex HMAC-SHA256 of the exact body bytes. */
export { signBody as sign } from './protocol.js';
