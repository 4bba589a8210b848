/**
 * Client: sends ECAPI 1.0 events to an ecapi-ingest service (POST /v1/events).
 *
 * send(events):
 * 1. prepares every event once (prepareEvents, prepare-events.ts): optional hashing of plaintext
 *    identifiers, the client's data set filled in where absent, a generated UUIDv7 `id` where
 *    absent (so a retry can never create a second record), optional schema validation; then
 *    serializes it, once;
 * 2. packs the serialized events into as few requests as the limits allow (1,000 events, 1 MiB);
 * 3. signs each body's exact bytes and sends those same bytes, with bounded concurrency over a
 *    keep-alive connection pool (undici); each attempt, retries included, is signed with the
 *    credentials current when it starts (setCredentials() rotates them on a live client), the
 *    bytes themselves never change;
 * 4. follows the spec's retry guidance (see retry.ts) and returns one result per input event
 *    (send-result.ts); a 200, a 207 (or multi-status 400) is believed only when its body adds up
 *    against the request sent (multi-status.ts: a 200's `accepted` is the number of events sent):
 *    otherwise no event of that request is reported accepted, and those the body does not clearly
 *    reject are undeliverable with INCONSISTENT_RESPONSE.
 *
 * Credentials: the key id and secret live in one private field, replaced whole by setCredentials()
 * (validated like the constructor's); the options kept are a copy without them, so the old secret
 * is not held once replaced, and nothing the client shows (errors, inspect, toString) carries it.
 * A 401 to an attempt signed with credentials that have changed since (a rotation racing a request
 * in flight) retries that request once, at once, with the current ones, instead of stopping the send.
 *
 * track(event) prepares one event the same way and hands it to the background batcher
 * (batcher.ts: batches by count, bytes and time, bounded memory, drop-newest on overflow), which
 * sends each batch through the same delivery path; flush() waits for what was tracked, close()
 * flushes and then releases the connection pool.
 *
 * The base URL is checked before anything is sent (base-url.ts: https:// only, not ending in
 * /v1/events); failures that a different URL or option would fix carry the URL tried and the
 * option to change (failure-advice.ts). A connection refused before the service ever answered this
 * client is a request-level failure (nothing listens there: a wrong port, a service not started),
 * not retried; once the service has answered, a refusal is a restart and is retried.
 */
import { Agent, type Dispatcher } from 'undici';
import { HEADER_DATA_SET, HEADER_KEY_ID, HEADER_REQUEST_ID, HEADER_SIGNATURE, eventErrorOf, signBody } from './protocol.js';
import { buildBody, packLimits, type PlannedRequest } from './pack.js';
import {
  DEFAULT_BACKOFF,
  backoffDelayMs,
  classifyStatus,
  isRetryableNetworkError,
  networkFailure,
  parseRetryAfterMs,
  retryDelayMs,
  DEFAULT_MAX_RETRY_AFTER_MS,
  MAX_TIMER_MS,
  type BackoffOptions,
} from './retry.js';
import { ClientClosedError, refusalOf, type DeliveryFailure, type Rejection } from './send-errors.js';
import { parseBaseUrl } from './base-url.js';
import { isConnectionRefused, withAdvice } from './failure-advice.js';
import { isPlainHeaderValue } from './header-value.js';
import { Batcher, notify, type BatchingOptions, type TrackResult, type TrackStats } from './batcher.js';
import { readMultiStatus, readSuccess } from './multi-status.js';
import { isPlainObject, prepareEvents, type EventInput, type PlaintextEventInput, type PrepareOptions, type PreparedEvents } from './prepare-events.js';
import type { EventResult, RetryInfo, SendProgress, SendResult } from './send-result.js';

export const CLIENT_VERSION = '0.1.0';

export interface ClientOptions extends PrepareOptions, BatchingOptions {
  /** Base URL of the service, like `https://ingest.example.com` or `https://127.0.0.1:8443` (the client POSTs to `<baseUrl>/v1/events`); https:// only. */
  readonly baseUrl: string;
  /** The key id (X-Service-Key-Id); setCredentials() changes it on a live client. */
  readonly keyId: string;
  /** The shared secret, exactly as issued; setCredentials() rotates it on a live client. */
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
  /**
   * How long the client may keep retrying one request, in ms, from when it starts sending it
   * (default: no limit; maxRetries and maxRateLimitRetries bound it, at worst ~13 min through 5xx
   * and ~30 min through 429s). A retry whose wait would end past it is not made: the request's
   * events are undeliverable with the last error, its message saying so.
   */
  readonly retryDeadlineMs?: number;
  /** Exponential backoff with full jitter (default base 250 ms, cap 20 s). */
  readonly backoff?: Partial<BackoffOptions>;
  /**
   * The longest Retry-After obeyed, in ms (default 60,000): a longer one is waited this long, then
   * the request is retried. No retry waits less than the backoff, whatever Retry-After says.
   */
  readonly maxRetryAfterMs?: number;
  /** Called after each request settles and after each retry decision. */
  readonly onProgress?: (progress: SendProgress) => void;
  /** Called before each retry, with why and how long the client waits. */
  readonly onRetry?: (retry: RetryInfo) => void;
  /** For tests: the random source of the jitter. */
  readonly random?: () => number;
}

/** What setCredentials() takes: a new secret, and a new key id when the key changes too. */
export interface Credentials {
  /** Leave out to keep the current key id (a rotation keeps it). */
  readonly keyId?: string;
  readonly secret: string;
}

/** The options a Client keeps: its options without the credentials (held apart, and replaceable). */
type KeptOptions = Omit<ClientOptions, 'keyId' | 'secret'>;

/**
 * Checks a key id and secret as the constructor and setCredentials() take them: non-empty strings,
 * the key id a plain header value (header-value.ts). No message echoes a value.
 */
function checkCredentials(where: string, keyId: unknown, secret: unknown): void {
  for (const [name, value] of [['keyId', keyId], ['secret', secret]] as const) {
    if (typeof value !== 'string' || value === '') throw new TypeError(`${where}: ${name} is required`);
  }
  if (!isPlainHeaderValue(keyId as string)) {
    throw new TypeError(`${where}: keyId must be printable ASCII without leading or trailing whitespace (it is sent as the X-Service-Key-Id header); check for a trailing newline`);
  }
}

interface ResponseBody {
  error?: string;
  /** The gateway's answers (403 for any path but POST /v1/events) say `message`. */
  message?: string;
  /** A multi-status body's members (read by readMultiStatus, which checks their shapes). */
  errors?: unknown;
  [member: string]: unknown;
}

function parseJson(text: string): ResponseBody | undefined {
  try {
    const value = JSON.parse(text) as unknown;
    return isPlainObject(value) ? (value as ResponseBody) : undefined;
  } catch {
    return undefined;
  }
}

function headerValue(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Waits `ms`, or until `signal` aborts; kept within setTimeout's 32-bit range (a longer delay would fire after 1 ms). */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.min(ms, MAX_TIMER_MS));
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** What an aborted send reports for a request: in flight, waiting to be retried, or not sent yet. */
function abortedFailure(state: 'in-flight' | 'waiting' | 'unsent'): DeliveryFailure {
  const what = {
    'in-flight': 'while this request was in flight: it may or may not have been stored; resending is safe (events merge by id)',
    waiting: 'while this request waited to be retried: resend its events (ids kept; resending is safe)',
    unsent: 'before this request was sent: resend its events (ids kept)',
  }[state];
  return { code: 'ABORTED', message: `send aborted ${what}`, httpStatus: null };
}

/**
 * What the events of a request get when its 200 or 207 (or multi-status 400) body does not add up
 * (multi-status.ts): whether they were stored is unknown. Reported at once, not retried.
 */
function inconsistentFailure(status: number, problem: string, requestId: string | undefined): DeliveryFailure {
  return {
    code: 'INCONSISTENT_RESPONSE',
    message: `inconsistent ${status} response: ${problem}; whether this event was stored is unknown: resend it (its id is kept; resending is safe, events merge by id)`,
    httpStatus: status,
    requestId,
  };
}

export class Client {
  readonly #options: KeptOptions;
  /** The key id and secret every attempt is signed with when it starts; replaced whole by setCredentials(). */
  #credentials: { readonly keyId: string; readonly secret: string };
  /** Counts setCredentials() calls: an attempt remembers the one it was signed under. */
  #credentialsVersion = 0;
  readonly #origin: string;
  readonly #path: string;
  readonly #eventsUrl: string;
  readonly #batcher: Batcher;
  /** Set once the service has answered a request of this client (a later refused connection is a restart). */
  #reached = false;
  #closing: Promise<void> | undefined;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  readonly #backoff: BackoffOptions;
  readonly #random: () => number;
  readonly #maxRetryAfterMs: number;
  readonly #retryDeadlineMs: number | undefined;
  #closed = false;

  constructor(options: ClientOptions) {
    for (const name of ['baseUrl', 'keyId', 'secret', 'dataSetId'] as const) {
      if (typeof options[name] !== 'string' || options[name] === '') throw new TypeError(`Client: ${name} is required`);
    }
    // Sent as header values (header-value.ts). The value is not echoed.
    checkCredentials('Client', options.keyId, options.secret);
    if (!isPlainHeaderValue(options.dataSetId)) {
      throw new TypeError('Client: dataSetId must be printable ASCII without leading or trailing whitespace (it is sent as the X-Service-Data-Set header); check for a trailing newline');
    }
    let base;
    try {
      base = parseBaseUrl(options.baseUrl);
    } catch (error) {
      throw new TypeError(`Client: ${(error as Error).message}`);
    }
    // Kept without the credentials: after setCredentials() nothing of the client holds the old secret.
    const { keyId, secret, ...kept } = options;
    this.#options = kept;
    this.#credentials = { keyId, secret };
    this.#origin = base.origin;
    this.#path = base.path;
    this.#eventsUrl = base.eventsUrl;
    const limits = packLimits({ maxEvents: options.maxEventsPerRequest, maxBytes: options.maxBodyBytes });
    this.#batcher = new Batcher(kept, limits, (event) => this.#prepareOne(event), (prep, n) => this.#run(prep, n));
    const concurrency = options.concurrency ?? 4;
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new TypeError('Client: concurrency must be a positive integer');
    // Checked here, not when a request fails: a NaN count (Number(process.env.UNSET)) would retry
    // forever, a NaN or negative delay would retry at once, and a timeoutMs of 0 would abort every attempt.
    for (const name of ['maxRetries', 'maxRateLimitRetries'] as const) {
      const v = options[name];
      if (v !== undefined && !(Number.isInteger(v) && v >= 0)) throw new TypeError(`Client: ${name} must be an integer from 0 (no retries) up`);
    }
    const timeoutMs = options.timeoutMs;
    if (timeoutMs !== undefined && !(typeof timeoutMs === 'number' && timeoutMs >= 1 && timeoutMs <= MAX_TIMER_MS / 2)) {
      throw new TypeError(`Client: timeoutMs must be a number of ms from 1 to ${Math.floor(MAX_TIMER_MS / 2)}`);
    }
    this.#backoff = { baseMs: options.backoff?.baseMs ?? DEFAULT_BACKOFF.baseMs, maxMs: options.backoff?.maxMs ?? DEFAULT_BACKOFF.maxMs };
    for (const name of ['baseMs', 'maxMs'] as const) {
      const v = this.#backoff[name];
      if (!(typeof v === 'number' && v >= 0 && v <= MAX_TIMER_MS)) throw new TypeError(`Client: backoff.${name} must be a number of ms from 0 to ${MAX_TIMER_MS}`);
    }
    this.#random = options.random ?? Math.random;
    const maxRetryAfterMs = options.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS;
    if (typeof maxRetryAfterMs !== 'number' || !Number.isFinite(maxRetryAfterMs) || maxRetryAfterMs < 0 || maxRetryAfterMs > MAX_TIMER_MS) {
      throw new TypeError(`Client: maxRetryAfterMs must be a number of ms from 0 to ${MAX_TIMER_MS}`);
    }
    this.#maxRetryAfterMs = maxRetryAfterMs;
    const retryDeadlineMs = options.retryDeadlineMs;
    if (retryDeadlineMs !== undefined && !(typeof retryDeadlineMs === 'number' && retryDeadlineMs >= 0 && Number.isFinite(retryDeadlineMs))) {
      throw new TypeError('Client: retryDeadlineMs must be a number of ms from 0 (leave it out for no limit)');
    }
    this.#retryDeadlineMs = retryDeadlineMs;
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

  /** The key id requests are signed under now (not a secret: it travels as X-Service-Key-Id). */
  get keyId(): string {
    return this.#credentials.keyId;
  }

  /**
   * Replaces the secret (and the key id, when given) on a live client, e.g. after the service's
   * `key rotate`: every attempt that starts after the call is signed with them, including retries
   * of requests already in flight and batches track() already holds; the queue and the connection
   * pool are kept. Checked like the constructor's options (a TypeError, nothing changed, when a
   * value is empty or the key id is not a plain header value). A request in flight signed with the
   * previous ones that gets a 401 is retried once with these (onRetry reason `credentials-changed`).
   */
  setCredentials(credentials: Credentials): void {
    const keyId = credentials?.keyId ?? this.#credentials.keyId;
    checkCredentials('Client.setCredentials', keyId, credentials?.secret);
    this.#credentials = { keyId, secret: credentials.secret };
    this.#credentialsVersion++;
  }

  /**
   * Sends what track() holds (flush()), then closes the client's connection pool (not a dispatcher
   * passed in). track() and send() throw afterwards.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#closed = true;
      await this.#batcher.flush();
      this.#batcher.stop();
      if (this.#ownsDispatcher) await this.#dispatcher.close();
    })();
    return this.#closing;
  }

  /** close() under the name analytics libraries use. */
  closeAndFlush(): Promise<void> {
    return this.close();
  }

  /**
   * Queues one event for background sending (batched by count, bytes and time; see batcher.ts) and
   * returns at once: `queued` (with its id), `rejected` (local validation, with the service's
   * message) or `dropped` (the queue is full: drop-newest, onDrop is called). Outcomes of sent
   * batches reach onBatch and stats().
   */
  track(event: EventInput | PlaintextEventInput): TrackResult {
    if (this.#closed) throw new ClientClosedError();
    return this.#batcher.track(event);
  }

  /** Sends every tracked event now; resolves once all tracked before the call have settled. */
  flush(): Promise<TrackStats> {
    return this.#batcher.flush();
  }

  /** Counts of tracked events: held now, accepted, rejected, undeliverable, dropped. */
  stats(): TrackStats {
    return this.#batcher.stats();
  }

  #prepareOne(event: unknown): ReturnType<ConstructorParameters<typeof Batcher>[2]> {
    const prep = prepareEvents([event as EventInput], this.#options);
    const rejected = prep.rejected[0];
    if (rejected) return { ok: false, id: rejected.id, error: rejected.error };
    return { ok: true, json: prep.serialized[0]!, event: prep.prepared[0]!, id: prep.ids[0] ?? null };
  }

  /**
   * Sends events; resolves with a result per event (never rejects for a per-event or HTTP failure).
   * `signal` aborts the send: no request starts after it, requests in flight and retry waits end at
   * once, and their events are `undeliverable` with `ABORTED` (result.failure); what was accepted
   * before stays accepted.
   */
  async send(events: ReadonlyArray<EventInput | PlaintextEventInput>, options: { readonly signal?: AbortSignal } = {}): Promise<SendResult> {
    if (this.#closed) throw new ClientClosedError();
    return this.#run(prepareEvents(events, this.#options), events.length, options.signal);
  }

  /** Delivers prepared events (send(), and each batch of track()). */
  async #run(prep: PreparedEvents, count: number, signal?: AbortSignal): Promise<SendResult> {
    const started = Date.now();
    const o = this.#options;
    const results: (EventResult | undefined)[] = new Array(count);
    const totals = { total: count, accepted: 0, rejected: 0, undeliverable: 0, requests: 0, retries: 0 };
    const record = (result: EventResult) => {
      results[result.index] = result;
      totals[result.status] += 1;
    };
    for (const r of prep.rejected) record(r);
    const progress = () => {
      notify(o.onProgress, () => ({ ...totals, done: totals.accepted + totals.rejected + totals.undeliverable, elapsedMs: Date.now() - started }));
    };
    progress();

    const run: RunState = { pauseUntil: 0, stop: undefined, signal };
    let next = 0;
    const worker = async () => {
      for (;;) {
        const k = next++;
        if (k >= prep.requests.length) return;
        const request = prep.requests[k]!;
        if (signal?.aborted) {
          const failure = abortedFailure('unsent');
          run.stop ??= failure;
          notSent(request, prep, failure, 0, record);
          progress();
          continue;
        }
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
    const fixedHeaders = {
      'content-type': 'application/json',
      accept: 'application/json',
      'user-agent': `ecapi-ingest-client/${CLIENT_VERSION}`,
      [HEADER_DATA_SET]: o.dataSetId,
    };
    /** The credentials version the headers were last signed under (-1: not yet), and those headers. */
    let signedVersion = -1;
    let headers: Record<string, string> = fixedHeaders;
    /** Whether this request has had its one retry after a 401 to an attempt signed with credentials replaced since. */
    let credentialsRetried = false;
    const timeoutMs = o.timeoutMs ?? 30_000;
    const maxRetries = o.maxRetries ?? 6;
    const maxRateLimitRetries = o.maxRateLimitRetries ?? 30;
    let retries = 0;
    let rateLimitRetries = 0;
    let attempts = 0;
    const deadlineMs = this.#retryDeadlineMs;
    const deadline = deadlineMs === undefined ? Infinity : Date.now() + deadlineMs;
    /** Whether a wait of `delayMs` from now would end past the retry deadline. */
    const pastDeadline = (delayMs: number) => Date.now() + delayMs > deadline;
    const givenUp = (failure: DeliveryFailure): DeliveryFailure => ({ ...failure, message: `${failure.message} (not retried: the next attempt would start after retryDeadlineMs, ${deadlineMs} ms)` });
    const ids = (index: number) => prep.ids[index] ?? null;
    const undeliverable = (error: DeliveryFailure) => {
      for (const index of request.items) record({ status: 'undeliverable', index, id: ids(index), error, attempts, event: prep.prepared[index]! });
    };
    /** A failure every request would meet: stop the send, report it once (SendResult.failure). */
    const stop = (failure: DeliveryFailure) => {
      run.stop ??= failure;
      undeliverable(failure);
    };

    let last: DeliveryFailure | undefined;
    for (;;) {
      const wait = run.pauseUntil - Date.now();
      // Another request's 429 paused the send: waited, unless this one has retried and the pause outlasts its deadline.
      if (wait > 0 && last !== undefined && pastDeadline(wait)) return undeliverable(givenUp(last));
      if (wait > 0) await sleep(wait, run.signal);
      // Its own state when it had been tried; the send's failure names the first request it stopped.
      if (run.signal?.aborted) return stop(abortedFailure(attempts > 0 ? 'waiting' : 'unsent'));
      if (run.stop) return notSent(request, prep, run.stop, attempts, record);
      // Signed with the credentials current as this attempt starts (the same bytes; re-signed only after setCredentials()).
      const attemptVersion = this.#credentialsVersion;
      if (attemptVersion !== signedVersion) {
        const { keyId, secret } = this.#credentials;
        headers = { ...fixedHeaders, [HEADER_KEY_ID]: keyId, [HEADER_SIGNATURE]: signBody(body, secret) };
        signedVersion = attemptVersion;
      }
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
          signal: run.signal ? AbortSignal.any([AbortSignal.timeout(timeoutMs * 2), run.signal]) : AbortSignal.timeout(timeoutMs * 2),
        });
        status = response.statusCode;
        responseHeaders = response.headers;
        text = await response.body.text();
      } catch (error) {
        // The send's own signal: this request's fate is unknown; the rest are not sent.
        if (run.signal?.aborted) return stop(abortedFailure('in-flight'));
        // Nothing listening, before the service ever answered: a wrong URL or port, not a restart.
        if (!this.#reached && isConnectionRefused(error)) {
          return stop(withAdvice({ code: 'CONNECTION_REFUSED', message: `connection refused at ${this.#origin} (ECONNREFUSED)`, httpStatus: null, errorCode: 'ECONNREFUSED' }, this.#eventsUrl));
        }
        const failure = withAdvice(networkFailure(error), this.#eventsUrl);
        if (!isRetryableNetworkError(error)) return stop(failure);
        if (retries >= maxRetries) return undeliverable(failure);
        const delayMs = backoffDelayMs(retries, this.#backoff, this.#random);
        if (pastDeadline(delayMs)) return undeliverable(givenUp(failure));
        last = failure;
        retries++;
        totals.retries++;
        notify<RetryInfo>(o.onRetry, () => ({ reason: 'network-error', status: null, error: failure, retry: retries, delayMs, retryAfterMs: undefined, events: request.items.length }));
        progress();
        await sleep(delayMs, run.signal);
        continue;
      }

      this.#reached = true;
      const requestId = headerValue(responseHeaders, HEADER_REQUEST_ID);
      const parsed = parseJson(text);
      const kind = classifyStatus(status);
      const serviceMessage = parsed?.error ?? parsed?.message ?? (text.slice(0, 200) || 'no body');
      const statusError = `${status} ${serviceMessage}`;

      if (kind === 'retry') {
        const failure: DeliveryFailure = { code: 'SERVER_ERROR', message: statusError, httpStatus: status };
        if (retries >= maxRetries) return undeliverable(failure);
        // A 503's Retry-After says when the service expects to be back: honoured, capped, never below the backoff.
        const retryAfterMs = parseRetryAfterMs(headerValue(responseHeaders, 'retry-after'));
        const delayMs = retryDelayMs(retryAfterMs, backoffDelayMs(retries, this.#backoff, this.#random), this.#maxRetryAfterMs, this.#random);
        if (pastDeadline(delayMs)) return undeliverable(givenUp(failure));
        last = failure;
        retries++;
        totals.retries++;
        notify<RetryInfo>(o.onRetry, () => ({ reason: 'server-error', status, error: failure, retry: retries, delayMs, retryAfterMs, events: request.items.length }));
        progress();
        await sleep(delayMs, run.signal);
        continue;
      }
      if (kind === 'rate-limited') {
        const failure: DeliveryFailure = { code: 'RATE_LIMITED', message: statusError, httpStatus: status };
        if (rateLimitRetries >= maxRateLimitRetries) return undeliverable(failure);
        const retryAfterMs = parseRetryAfterMs(headerValue(responseHeaders, 'retry-after'));
        // Honor Retry-After (capped at maxRetryAfterMs, plus jitter so paused senders do not return
        // in lockstep, never sooner than the backoff); without one, back off exponentially with full
        // jitter like any transient failure.
        const delayMs = retryDelayMs(retryAfterMs, backoffDelayMs(rateLimitRetries, this.#backoff, this.#random), this.#maxRetryAfterMs, this.#random);
        if (pastDeadline(delayMs)) return undeliverable(givenUp(failure));
        last = failure;
        rateLimitRetries++;
        totals.retries++;
        // Every worker holds off until then: the limit is per data set, not per request.
        run.pauseUntil = Math.max(run.pauseUntil, Date.now() + delayMs);
        notify<RetryInfo>(o.onRetry, () => ({ reason: 'rate-limited', status, error: failure, retry: rateLimitRetries, delayMs, retryAfterMs, events: request.items.length }));
        progress();
        continue;
      }

      // 200, 207, or a 3xx/4xx that no retry can fix. Only a 207 or a 400 carries per-event errors
      // (the spec's multi-status body); any other status is about the request as a whole.
      if (status === 200) {
        // The spec's "every event accepted" only when its body says `accepted` is the count sent
        // (multi-status.ts, readSuccess): a 200 from a proxy or a captive portal stores nothing.
        const problem = readSuccess(text, parsed, request.items.length);
        if (problem !== undefined) return undeliverable(inconsistentFailure(status, problem, requestId));
        for (const index of request.items) record({ status: 'accepted', index, id: ids(index), requestId });
        return;
      }
      const rejected = (index: number, error: Rejection) =>
        record({ status: 'rejected', index, id: ids(index), error, httpStatus: status, requestId, event: prep.prepared[index]! });
      if (status === 207 || (status === 400 && parsed !== undefined && Array.isArray(parsed.errors))) {
        // 207, or 400 with the multi-status shape: only the listed events failed, if the body adds
        // up against what was sent; if not, none is accepted on its word (multi-status.ts).
        const reading = readMultiStatus(status, parsed ?? {}, request.items.map(ids));
        const inconsistent = reading.problem === undefined ? undefined : inconsistentFailure(status, reading.problem, requestId);
        request.items.forEach((index, position) => {
          const error = reading.rejected.get(position);
          if (error !== undefined) rejected(index, eventErrorOf(error));
          else if (inconsistent) record({ status: 'undeliverable', index, id: ids(index), error: inconsistent, attempts, event: prep.prepared[index]! });
          else record({ status: 'accepted', index, id: ids(index), requestId });
        });
        return;
      }
      // A 401 to an attempt signed with credentials replaced since (a rotation racing this request):
      // not the current credentials' verdict, so retried once, at once, signed with them.
      if (status === 401 && attemptVersion !== this.#credentialsVersion && !credentialsRetried) {
        const failure = refusalOf(status, serviceMessage);
        if (pastDeadline(0)) return undeliverable(givenUp(failure));
        credentialsRetried = true;
        last = failure;
        totals.retries++;
        notify<RetryInfo>(o.onRetry, () => ({ reason: 'credentials-changed', status, error: failure, retry: 1, delayMs: 0, retryAfterMs: undefined, events: request.items.length }));
        progress();
        continue;
      }
      // Credentials, a missing grant or a wrong URL fail every request the same way: stop sending.
      if (status === 401 || status === 403 || status === 404) return stop(withAdvice(refusalOf(status, serviceMessage), this.#eventsUrl));
      // A redirect: the base URL is not the service's (the client follows none: a redirected POST
      // could lose its body or land on another host). Every request would get it: stop too.
      if (status >= 300 && status < 400) {
        const location = headerValue(responseHeaders, 'location');
        return stop(withAdvice(refusalOf(status, `redirect${location ? ` to ${location}` : ''}, not followed`), this.#eventsUrl));
      }
      const message = parsed?.error ?? statusError;
      for (const index of request.items) rejected(index, { code: 'REQUEST_REJECTED', message });
      return;
    }
  }
}

interface RunState {
  /** No request starts before this time (ms): set by a 429's Retry-After. */
  pauseUntil: number;
  /** Set after a failure that every later request would meet too (401, 403, 404, untrusted certificate, unknown host), or an abort. */
  stop: DeliveryFailure | undefined;
  /** The send's abort signal (send() options). */
  readonly signal: AbortSignal | undefined;
}

/** Events of a request that is not sent because an earlier one showed every request would fail. */
function notSent(request: PlannedRequest, prep: PreparedEvents, stop: DeliveryFailure, attempts: number, record: (r: EventResult) => void): void {
  for (const index of request.items) {
    record({ status: 'undeliverable', index, id: prep.ids[index] ?? null, error: stop, attempts, event: prep.prepared[index]! });
  }
}

/** The signature helper of @ecapi-ingest/protocol: lowercase hex HMAC-SHA256 of the exact body bytes. */
export { signBody as sign } from './protocol.js';
