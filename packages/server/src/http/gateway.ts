/**
 * The gateway rules in front of the service (step 1 of the request path). Only POST /v1/events,
 * with any query string, reaches the service. Everything else is answered here, without looking at
 * credentials, in the shapes the spec gives for the HTTP gateway:
 * - POST /v<other>/events: 404 {"error": ...} (a wrong version segment).
 * - any other path or method: 403 {"message": ...} with `x-amzn-ErrorType`; the message depends
 *   only on whether an Authorization header was present.
 */
import { createHash } from 'node:crypto';
import { EVENTS_PATH } from '@ecapi-ingest/protocol';
import { GatewayErrors, RequestErrors } from '../errors.js';

export interface GatewayAnswer {
  readonly status: number;
  readonly body: string;
  /** Its code in the error reference (errors.ts), for the test environment's list and logs. */
  readonly code: 'UNKNOWN_VERSION' | keyof typeof GatewayErrors;
  readonly errorType?: string;
}

const VERSIONED_EVENTS_PATH = /^\/v[^/]*\/events$/;

/** The request path without its query string. */
export function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/** Returns null when the request is for the service, otherwise the gateway's answer. */
export function gatewayAnswer(method: string, path: string, authorization: string | undefined): GatewayAnswer | null {
  if (method === 'POST') {
    if (path === EVENTS_PATH) return null;
    if (VERSIONED_EVENTS_PATH.test(path)) {
      return { status: 404, code: 'UNKNOWN_VERSION', body: JSON.stringify({ error: RequestErrors.UNKNOWN_VERSION.message() }) };
    }
  }
  if (authorization === undefined) {
    const e = GatewayErrors.MISSING_AUTH_TOKEN;
    return { status: e.status, code: 'MISSING_AUTH_TOKEN', errorType: e.errorType, body: JSON.stringify({ message: e.message() }) };
  }
  const e = GatewayErrors.INCOMPLETE_SIGNATURE;
  const hash = createHash('sha256').update(authorization, 'utf8').digest('base64');
  return { status: e.status, code: 'INCOMPLETE_SIGNATURE', errorType: e.errorType, body: JSON.stringify({ message: e.message(hash) }) };
}
