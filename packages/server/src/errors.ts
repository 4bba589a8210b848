/**
 * The one registry of every error the service can return to a sender, modelled on Fastify's
 * lib/errors.js: a stable code, the HTTP status and the message template in one place.
 *
 * Messages are part of the API. The shapes below are the interface spec's, letter for letter
 * (`invalid JSON: <detail>`, `payload exceeds 1 MB limit`, ...). Do not reword one without
 * treating it as a breaking change: senders match on them.
 *
 * Request-level errors answer `{"error": message}`; gateway errors answer `{"message": message}`
 * with an `x-amzn-ErrorType` header, as the HTTP gateway in front of the reference service does.
 */
import { MAX_EVENTS_PER_REQUEST } from '@ecapi-ingest/protocol';

export interface ErrorDefinition<A extends unknown[] = []> {
  readonly code: string;
  readonly status: number;
  readonly message: (...args: A) => string;
}

function def<A extends unknown[] = []>(code: string, status: number, message: (...args: A) => string): ErrorDefinition<A> {
  return { code, status, message };
}

export const RequestErrors = {
  // 400: the body
  PAYLOAD_TOO_LARGE: def('PAYLOAD_TOO_LARGE', 400, () => 'payload exceeds 1 MB limit'),
  INVALID_JSON: def('INVALID_JSON', 400, (detail: string) => `invalid JSON: ${detail}`),
  PAYLOAD_SHAPE: def('PAYLOAD_SHAPE', 400, () => 'payload must be an object or {events:[...]}'),
  NO_EVENTS: def('NO_EVENTS', 400, () => 'no events in payload'),
  TOO_MANY_EVENTS: def('TOO_MANY_EVENTS', 400, () => `batch exceeds ${MAX_EVENTS_PER_REQUEST} events`),
  UNSUPPORTED_CONTENT_TYPE: def('UNSUPPORTED_CONTENT_TYPE', 400, (got: string) =>
    got === '' ? 'missing Content-Type header: send Content-Type: application/json'
      : 'unsupported Content-Type: send Content-Type: application/json'),
  NOT_ACCEPTABLE: def('NOT_ACCEPTABLE', 400, () =>
    'Accept header excludes application/json: responses are application/json only'),

  // 400: the HTTP request itself (answered before any credential is looked at, the body never read)
  MISSING_HOST: def('MISSING_HOST', 400, () =>
    'missing Host header: send the Host header (HTTP/1.1) or :authority (HTTP/2) naming this service'),
  UNSUPPORTED_CONTENT_ENCODING: def('UNSUPPORTED_CONTENT_ENCODING', 400, () =>
    'unsupported Content-Encoding: bodies are not decoded; send the JSON uncompressed, without Content-Encoding'),
  UNSUPPORTED_TRANSFER_ENCODING: def('UNSUPPORTED_TRANSFER_ENCODING', 400, () =>
    'unsupported Transfer-Encoding: send Content-Length, or Transfer-Encoding: chunked alone (no compression)'),
  // Answered on the raw connection (http/connection-front.ts), HTTP/1.1, then closed: no request id.
  PLAIN_HTTP: def('PLAIN_HTTP', 400, () =>
    'plain HTTP request sent to the HTTPS port: this port speaks HTTPS only (TLS 1.3); use https:// in the URL'),

  // 401: credentials evaluated and rejected
  BEARER_NOT_ENABLED: def('BEARER_NOT_ENABLED', 401, () =>
    'bearer-token authentication is not enabled: sign the body and send X-Service-Key-Id and X-Service-Signature'),
  MISSING_KEY_ID: def('MISSING_KEY_ID', 401, () => 'missing X-Service-Key-Id header'),
  MISSING_DATA_SET: def('MISSING_DATA_SET', 401, () => 'missing X-Service-Data-Set header'),
  MISSING_SIGNATURE: def('MISSING_SIGNATURE', 401, () => 'missing X-Service-Signature header'),
  MALFORMED_SIGNATURE: def('MALFORMED_SIGNATURE', 401, () =>
    'malformed X-Service-Signature: expected 64 lowercase hex characters (HMAC-SHA256 of the raw body)'),
  UNKNOWN_KEY: def('UNKNOWN_KEY', 401, () => 'unknown key id in X-Service-Key-Id'),
  REVOKED_KEY: def('REVOKED_KEY', 401, () => 'key id in X-Service-Key-Id has been revoked'),
  SIGNATURE_MISMATCH: def('SIGNATURE_MISMATCH', 401, () =>
    'signature does not match: compute HMAC-SHA256 over the exact body bytes sent, keyed by the current secret'),
  SECRET_EXPIRED: def('SECRET_EXPIRED', 401, () =>
    'signature made with a rotated secret whose grace period has ended: sign with the current secret'),
  NOT_AUTHORIZED: def('NOT_AUTHORIZED', 401, (dataSetId: string) => `principal not authorized for data_set_id ${dataSetId}`),

  // 404: wrong version segment
  UNKNOWN_VERSION: def('UNKNOWN_VERSION', 404, () => 'unknown API version: the only version is v1, POST /v1/events'),

  // 429: over a limit; Retry-After says when to come back
  RATE_LIMITED: def('RATE_LIMITED', 429, (which: string) => `rate limit exceeded: ${which}`),

  // 500: not durably queued; retry is safe
  BACKEND_UNAVAILABLE: def('BACKEND_UNAVAILABLE', 500, () => 'ingest backend unavailable'),
} as const;

export type RequestErrorCode = keyof typeof RequestErrors;

/**
 * Per-event rejection reasons, the `error` of an `errors[]` entry in a 207 / all-failed 400 body:
 * defined in @ecapi-ingest/protocol, shared with the sender SDK (which returns them as {code, message}).
 */
export { EventErrors, type EventErrorCode } from '@ecapi-ingest/protocol';

/** Gateway answers for any path or method other than POST /v1/events: 403, credentials never evaluated. */
export const GatewayErrors = {
  MISSING_AUTH_TOKEN: {
    status: 403,
    errorType: 'MissingAuthenticationTokenException',
    message: () => 'Missing Authentication Token',
  },
  INCOMPLETE_SIGNATURE: {
    status: 403,
    errorType: 'IncompleteSignatureException',
    message: (authorizationHash: string) =>
      `Invalid key=value pair (missing equal-sign) in Authorization header (hashed with SHA-256 and encoded with Base64): '${authorizationHash}'`,
  },
} as const;

/**
 * A request-level failure carried through the pipeline. `code` indexes RequestErrors, so the
 * status and message always come from the registry.
 */
export class RequestError extends Error {
  override readonly name = 'RequestError';
  readonly status: number;
  constructor(readonly code: RequestErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.status = RequestErrors[code].status;
  }
}

export function requestError<C extends RequestErrorCode>(
  code: C,
  ...args: Parameters<(typeof RequestErrors)[C]['message']>
): RequestError {
  const definition = RequestErrors[code] as ErrorDefinition<unknown[]>;
  return new RequestError(code, definition.message(...args));
}

/** The durable queue could not store a batch: the request answers 500 and nothing counts as accepted. */
export class QueueUnavailableError extends Error {
  override readonly name = 'QueueUnavailableError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A control-plane operation failed in a way an operator can act on (unknown id, duplicate, ...). */
export class ControlPlaneError extends Error {
  override readonly name = 'ControlPlaneError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}
