/**
 * The request head judged alone, before any body byte is read or budgeted (public-server.ts): the
 * one step that decides whether the public port answers a request without reading its body.
 *
 * Order (each later check runs only when every earlier one passed; the same answers, in the same
 * order, as the spec's checks after the body would give):
 * 1. no Host (HTTP/1.1) or :authority (HTTP/2) → 400;
 * 2. the gateway (gateway.ts): only POST /v1/events passes;
 * 3. pre-auth shedding (rate-limit/failed-auth-shedder.ts): an address (or a verified key id and
 *    address) with too many failed authentications → 429 with Retry-After; a connection on which a
 *    request already passed the HMAC is never shed (other clients of its address failing must not
 *    stop a sender that proved its secret, issue 29);
 * 4. Content-Length over the body limit → 400;
 * 5. a body coding we would not decode (media-types.ts) → 400;
 * 6. what authentication refuses without the body (auth/request-authenticator.ts: Bearer, missing
 *    or malformed headers, unknown or revoked key) → 401, counted against the address.
 *
 * Invariants: a head that passes costs no allocation here (the answer is null); a refusal is an
 * answer for the whole exchange (the caller ends it: early-answer.ts). The shed and 401 counters
 * are kept here, where the decision is taken, so that the caller only answers.
 */
import type { Http2ServerRequest } from 'node:http2';
import type { IncomingMessage } from 'node:http';
import { MAX_BODY_BYTES } from '@ecapi-ingest/protocol';
import { requestError } from '../errors.js';
import type { CredentialSnapshot } from '../control/control-plane.js';
import type { ServiceMetrics } from '../observability/service-metrics.js';
import type { FailedAuthShedder } from '../rate-limit/failed-auth-shedder.js';
import { refusalBeforeBody } from '../auth/request-authenticator.js';
import { gatewayAnswer, pathOf } from './gateway.js';
import { bodyEncodingRefusal } from './media-types.js';
import { requestErrorOutcome, type EventsOutcome } from './events-request.js';

/** An answer from the request head alone: the body is not read and the exchange ends. */
export interface HeadRefusal {
  readonly outcome: EventsOutcome;
  /** Headers of this answer beyond the usual ones (Retry-After, the gateway's error type). */
  readonly headers: Readonly<Record<string, string>> | undefined;
}

export interface HeadRefusalDeps {
  readonly credentials: () => CredentialSnapshot;
  readonly metrics: ServiceMetrics;
  readonly failedAuth: FailedAuthShedder;
}

function missingHost(req: IncomingMessage | Http2ServerRequest): boolean {
  const headers = req.headers;
  return headers.host === undefined && ('stream' in req ? headers[':authority'] === undefined : true);
}

/**
 * The head's refusal, or null when the body is to be read. `address`: the client's; `keyId`: the one
 * the request names (unverified); `trusted`: a request on this connection already passed the HMAC.
 */
export function headRefusal(req: IncomingMessage | Http2ServerRequest, address: string, keyId: string | undefined, trusted: boolean, deps: HeadRefusalDeps): HeadRefusal | null {
  if (missingHost(req)) return { outcome: requestErrorOutcome(requestError('MISSING_HOST')), headers: undefined };

  const gateway = gatewayAnswer(req.method ?? '', pathOf(req.url ?? '/'), req.headers.authorization);
  if (gateway) {
    return {
      outcome: { status: gateway.status, body: gateway.body, accepted: 0, rejected: 0, errorCode: gateway.code },
      headers: gateway.errorType ? { 'x-amzn-errortype': gateway.errorType } : undefined,
    };
  }

  const shedFor = trusted ? 0 : deps.failedAuth.shedSeconds(address, keyId);
  if (shedFor > 0) {
    deps.metrics.rateLimited.inc({ limit: 'failed_auth' });
    return {
      outcome: requestErrorOutcome(requestError('RATE_LIMITED', 'too many failed authentication attempts from this address')),
      headers: { 'retry-after': String(shedFor) },
    };
  }

  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > MAX_BODY_BYTES) return { outcome: requestErrorOutcome(requestError('PAYLOAD_TOO_LARGE')), headers: undefined };

  const encoding = bodyEncodingRefusal(req.headers['content-encoding'], req.headers['transfer-encoding']);
  if (encoding !== null) return { outcome: requestErrorOutcome(requestError(encoding)), headers: undefined };

  const refusal = refusalBeforeBody(req.headers, deps.credentials());
  if (refusal !== null) {
    if (refusal.status === 401) deps.failedAuth.recordFailure(address, keyId);
    return { outcome: requestErrorOutcome(refusal), headers: undefined };
  }
  return null;
}
