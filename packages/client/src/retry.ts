/**
 * The interface spec's retry guidance as pure functions:
 *   200/207: done (on 207 only the listed events are rejected; they are returned, never resent);
 *   500 (any 5xx), 408, network errors and time-outs: retry with exponential backoff, full jitter;
 *   429: wait Retry-After, then retry (a 5xx's Retry-After is honoured too);
 *   Retry-After is capped (maxRetryAfterMs, default 60 s: a day-long or overflowing value must not
 *   park the sender, nor overflow Node's 32-bit timer and fire at once), and no retry comes sooner
 *   than the backoff would allow (`Retry-After: 0` is no licence to hammer);
 *   plain 400/401 (and other 4xx): never retried without changing the request;
 *   401/403/404, a 3xx redirect (never followed), an untrusted certificate, an unknown host:
 *   request-level failures (send-errors.ts).
 */
import type { DeliveryFailure, FailureCode } from './send-errors.js';

export type ResponseClass = 'done' | 'retry' | 'rate-limited' | 'refused';

export function classifyStatus(status: number): ResponseClass {
  if (status === 200 || status === 207) return 'done';
  if (status === 429) return 'rate-limited';
  if (status >= 500 || status === 408) return 'retry';
  return 'refused';
}

export interface BackoffOptions {
  /** First retry waits up to this long (ms). */
  readonly baseMs: number;
  /** No retry waits longer than this (ms). */
  readonly maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { baseMs: 250, maxMs: 20_000 };

/**
 * "Full jitter" exponential backoff: a uniformly random delay in [0, min(maxMs, baseMs * 2^retry)),
 * where retry counts from 0 for the first retry.
 */
export function backoffDelayMs(retry: number, options: BackoffOptions = DEFAULT_BACKOFF, random: () => number = Math.random): number {
  const ceiling = Math.min(options.maxMs, options.baseMs * 2 ** Math.min(retry, 30));
  return Math.floor(random() * ceiling);
}

/** The longest Retry-After the client obeys by default (ClientOptions.maxRetryAfterMs). */
export const DEFAULT_MAX_RETRY_AFTER_MS = 60_000;
/** setTimeout's ceiling: a longer delay overflows and fires after 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * How long to wait before a retry: the backoff when the service sent no Retry-After; otherwise its
 * Retry-After capped at `maxRetryAfterMs`, with up to 10% (at most 1 s) jitter so that paused
 * senders do not return in lockstep (under the cap when it was reached), and never less than
 * `backoffMs`. Always a delay setTimeout can keep.
 */
export function retryDelayMs(retryAfterMs: number | undefined, backoffMs: number, maxRetryAfterMs: number = DEFAULT_MAX_RETRY_AFTER_MS, random: () => number = Math.random): number {
  let delay = backoffMs;
  if (retryAfterMs !== undefined && !Number.isNaN(retryAfterMs)) {
    const capped = Math.min(retryAfterMs, maxRetryAfterMs);
    const jitter = Math.floor(random() * Math.min(1000, capped * 0.1));
    const wait = retryAfterMs >= maxRetryAfterMs ? capped - jitter : Math.min(maxRetryAfterMs, capped + jitter);
    delay = Math.max(backoffMs, wait);
  }
  return Math.min(MAX_TIMER_MS, Math.max(0, delay));
}

/**
 * Retry-After as milliseconds from now: delay-seconds (`3`) or an HTTP-date. Undefined when absent
 * or unreadable (the caller then backs off exponentially).
 */
export function parseRetryAfterMs(value: string | string[] | undefined, nowMs: number = Date.now()): number | undefined {
  const header = Array.isArray(value) ? value[0] : value;
  if (header === undefined) return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  if (/^\d+\.\d+$/.test(text)) return Math.ceil(Number(text) * 1000);
  const date = Date.parse(text);
  if (Number.isNaN(date) || !/[a-z]/i.test(text)) return undefined;
  return Math.max(0, date - nowMs);
}

/** TLS failures: the same answer on every attempt, so they are not retried. */
const TLS_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED',
  'CERT_REVOKED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION',
  'ERR_SSL_UNSUPPORTED_PROTOCOL',
  'ERR_SSL_WRONG_VERSION_NUMBER',
]);
const HOST_NOT_FOUND = 'ENOTFOUND';
/**
 * Time-outs as undici and the socket report them: no response head within `headersTimeout`, a body
 * stalled past `bodyTimeout`, a connection not made within the connect timeout. Retried like any
 * network error, but reported as TIMEOUT (the abort signal's TimeoutError only fires at twice
 * timeoutMs, so without these codes a time-out read as NETWORK).
 */
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT']);
const isTimeout = (error: unknown, code: string | undefined) =>
  (code !== undefined && TIMEOUT_CODES.has(code)) || (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError'));
const isPermanent = (code: string) => TLS_CODES.has(code) || code === HOST_NOT_FOUND;

function errorCode(error: unknown): string | undefined {
  let e: unknown = error;
  for (let depth = 0; depth < 4 && e && typeof e === 'object'; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && isPermanent(code)) return code;
    e = (e as { cause?: unknown }).cause;
  }
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** False for errors that retrying cannot fix (certificate not trusted, unknown host name). */
export function isRetryableNetworkError(error: unknown): boolean {
  const code = errorCode(error);
  return !(code !== undefined && isPermanent(code));
}

/** One line describing a network error, with its code: `network error: ECONNRESET (other side closed)`. */
export function describeNetworkError(error: unknown): string {
  if (!(error instanceof Error)) return `network error: ${String(error)}`;
  const code = errorCode(error);
  if (error.name === 'TimeoutError' || error.name === 'AbortError') return `time-out: ${error.message}`;
  if (isTimeout(error, code)) return `time-out: ${code} (${error.message})`;
  const cause = error.cause instanceof Error && error.cause.message !== error.message ? `; ${error.cause.message}` : '';
  return `network error: ${code ? `${code} ` : ''}(${error.message}${cause})`;
}

/** A network error as a DeliveryFailure: TLS, HOST_NOT_FOUND, TIMEOUT or NETWORK. */
export function networkFailure(error: unknown): DeliveryFailure {
  const code = errorCode(error);
  const message = describeNetworkError(error);
  const kind: FailureCode = code !== undefined && TLS_CODES.has(code) ? 'TLS'
    : code === HOST_NOT_FOUND ? 'HOST_NOT_FOUND'
      : isTimeout(error, code) ? 'TIMEOUT'
        : 'NETWORK';
  return { code: kind, message, httpStatus: null, errorCode: code };
}
