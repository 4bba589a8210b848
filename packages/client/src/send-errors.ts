/**
 * What send() reports when an event is not accepted, as data: a stable `code` to branch on and a
 * `message` to show. Per-event rejections use the service's codes (@ecapi-ingest/protocol's
 * EventErrors; the service's wire message is read back with eventErrorOf) plus the client's own
 * local reasons. Delivery failures say why an event never got an answer.
 *
 * A failure that every request of a send would meet the same way (credentials, grant, URL, an
 * untrusted certificate, an unknown host) is a request-level failure: send() stops at the first
 * one, reports it once as SendResult.failure, and leaves the events undeliverable (resend them
 * after the fix; their ids are kept). It is never counted as N per-event rejections.
 *
 * A 200 or multi-status body that does not add up against the request (multi-status.ts) is
 * per-request: its unclear events are undeliverable with INCONSISTENT_RESPONSE, and the send goes on.
 */
import type { EventErrorCode } from './protocol.js';

export type RejectionCode =
  | EventErrorCode
  /** A per-event message of the service in none of the spec's shapes (a privacy policy refusal, a newer server). */
  | 'OTHER'
  /** hash: an identifier could not be normalized (empty, an unreadable phone number). */
  | 'NORMALIZATION'
  /** Over 1 MiB serialized on its own: no request can carry it. */
  | 'EVENT_TOO_LARGE'
  /** A 400 for the whole request without per-event errors (the service's message says why). */
  | 'REQUEST_REJECTED';

/** Why an event was rejected: by the service (the HTTP status is on the result) or locally, before sending. */
export interface Rejection {
  readonly code: RejectionCode;
  readonly message: string;
}

export type FailureCode =
  /** 5xx or 408 after every retry. */
  | 'SERVER_ERROR'
  /** 429 after every rate-limit retry. */
  | 'RATE_LIMITED'
  /** Connection reset and the like (or refused, by a service that answered before), after every retry. */
  | 'NETWORK'
  /**
   * Request-level: the connection was refused before this client ever had an answer from the
   * service: nothing listens at the base URL's host and port (a wrong port, a service not started).
   */
  | 'CONNECTION_REFUSED'
  | 'TIMEOUT'
  /** Request-level: 401 (key id, secret, revoked or expired key). */
  | 'AUTHENTICATION'
  /** Request-level: 401 "principal not authorized for data_set_id": the key has no grant for the data set. */
  | 'AUTHORIZATION'
  /** Request-level: 403/404, or a 3xx redirect: nothing answers POST <baseUrl>/v1/events there. */
  | 'WRONG_URL'
  /** Request-level: the server's certificate is not trusted (or TLS 1.3 not spoken). */
  | 'TLS'
  /** Request-level: the host name does not resolve. */
  | 'HOST_NOT_FOUND'
  /**
   * Request-level: the send's `signal` aborted it. A request in flight then may or may not have been
   * stored (resending is safe: events merge by id); the requests not yet sent were not.
   */
  | 'ABORTED'
  /**
   * A 207 (or a 400 in the multi-status shape) whose body does not add up against the request sent
   * (counts, an index out of range or listed twice, an event_id not the one sent at that index), or
   * a 200 whose body is not `{accepted}` with `accepted` the number of events sent (a wrong count,
   * no body, not JSON: a proxy's or captive portal's page): which of the request's events were
   * stored is unknown, so none is reported accepted on its word. The events the body does not
   * clearly reject (of a 200: all of them) get this failure, at once, not retried; resending them
   * is safe (events merge by id). Not request-level: the send goes on. `requestId` names the response.
   */
  | 'INCONSISTENT_RESPONSE';

export interface DeliveryFailure {
  readonly code: FailureCode;
  /**
   * The service's message (`401 signature does not match: …`), or the network error with its code;
   * for a wrong URL, a refused connection, an unknown host, an untrusted certificate and a network
   * failure, followed by the URL tried and what to change (the `baseUrl` or `ca` option).
   */
  readonly message: string;
  /** The message without the SDK's advice (set when the message has some): the service's answer or the network error. */
  readonly detail?: string | undefined;
  readonly httpStatus: number | null;
  /** The TLS or system error code, like DEPTH_ZERO_SELF_SIGNED_CERT or ECONNREFUSED. */
  readonly errorCode?: string | undefined;
  /** INCONSISTENT_RESPONSE: the response's X-Request-Id, when it had one (to quote to the service's operator). */
  readonly requestId?: string | undefined;
}

const NOT_AUTHORIZED_PREFIX = 'principal not authorized for data_set_id';

/** The request-level failure of a 401, 403, 404 or 3xx. */
export function refusalOf(status: number, serviceMessage: string): DeliveryFailure {
  const code: FailureCode = status === 401 ? (serviceMessage.startsWith(NOT_AUTHORIZED_PREFIX) ? 'AUTHORIZATION' : 'AUTHENTICATION') : 'WRONG_URL';
  return { code, message: `${status} ${serviceMessage}`, httpStatus: status };
}

/** Thrown by `send()` and `track()` after `close()`: the client's connections are gone; make a new Client. */
export class ClientClosedError extends Error {
  override readonly name = 'ClientClosedError';
  constructor() {
    super('Client is closed: send() and track() are refused after close(); make a new Client');
  }
}
