/**
 * Request-level failures as the test environment shows them (issue 31 point 3): a request answered
 * as a whole with an error (401 bad signature, invalid JSON, wrong Content-Type, 413, 429, gateway
 * 403/404, 500) has no per-event outcome, yet it is what a new sender meets first.
 *
 * Built in the serving process, only with `--env test`, from what the public server already holds
 * when it answers. Bounds and trust (the attacker model: whatever is kept before authentication is
 * theirs to fill):
 * - every kept string (error, path, header values) is cut to MAX_FAILURE_FIELD_CHARS; only the
 *   headers of FAILURE_HEADERS are kept; the signature is never kept, only its length; of an
 *   Authorization header only its scheme;
 * - `key_id` and `data_set_id` are proven only when `authenticated` (the HMAC verified); before
 *   that they are set only when the header names a key or data set that exists (the raw header
 *   values are in `headers`, cut);
 * - the body is kept only for an authenticated request, masked as a rejected event is
 *   (event-display.ts), and only when it is at most MAX_EVENT_CHARS long; an unparsable body is
 *   described by its length (the error message already says what is wrong with it).
 * The store keeps unauthenticated entries in a fixed ring of their own (live-store.ts), so they can
 * never push out a signed sender's entries.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { HEADER_DATA_SET, HEADER_KEY_ID, HEADER_SIGNATURE } from '@ecapi-ingest/protocol';
import { parseEvents } from '../http/payload.js';
import type { ObservedFailure } from '../analytics/ingest-observer.js';
import { MAX_EVENT_CHARS, rejectedEventForDisplay } from './event-display.js';
import { MAX_FAILURE_FIELD_CHARS, type RequestFailureEntry } from './live-delta.js';

/** The request headers kept, in this order: the ones that decide a request-level answer. */
export const FAILURE_HEADERS = [
  'content-type', 'content-length', 'content-encoding', 'transfer-encoding', 'accept',
  HEADER_KEY_ID, HEADER_DATA_SET, HEADER_SIGNATURE, 'authorization', 'host', 'user-agent',
] as const;

export const cut = (text: string): string =>
  text.length <= MAX_FAILURE_FIELD_CHARS ? text : `${text.slice(0, MAX_FAILURE_FIELD_CHARS)}… (${text.length} characters)`;

const single = (value: string | string[] | undefined): string | undefined => (Array.isArray(value) ? value.join(', ') : value);

function keptHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of FAILURE_HEADERS) {
    const value = single(headers[name] ?? (name === 'host' ? headers[':authority'] : undefined));
    if (value === undefined) continue;
    if (name === HEADER_SIGNATURE) out[name] = `‹redacted: ${value.length} characters›`;
    else if (name === 'authorization') out[name] = `${cut(value.trim().split(/\s+/)[0] ?? '')} ‹redacted›`;
    else out[name] = cut(value);
  }
  return out;
}

/** The message as sent: `error` (the service) or `message` (the gateway) of the JSON body, else the body. */
function messageOf(responseBody: string): string {
  try {
    const parsed = JSON.parse(responseBody) as { error?: unknown; message?: unknown };
    const text = typeof parsed.error === 'string' ? parsed.error : typeof parsed.message === 'string' ? parsed.message : responseBody;
    return cut(text);
  } catch {
    return cut(responseBody);
  }
}

/** An authenticated request's body, masked: each event as a rejected event is shown. */
function bodyForDisplay(body: Buffer | undefined): Pick<RequestFailureEntry, 'body' | 'body_omitted'> {
  if (body === undefined) return {};
  if (body.length > MAX_EVENT_CHARS) return { body_omitted: `body of ${body.length} bytes, larger than ${MAX_EVENT_CHARS / 1024} KB: not kept` };
  let events: unknown[];
  try {
    events = parseEvents(body);
  } catch {
    // Not shown: an unparsable body cannot be masked field by field (the error says what is wrong).
    return { body_omitted: `body of ${body.length} bytes that does not parse as events: not shown` };
  }
  return { body: { events: events.map((event) => { const shown = rejectedEventForDisplay(event); return shown.event ?? shown.event_omitted; }) } };
}

export function requestFailureEntry(failure: ObservedFailure): RequestFailureEntry {
  const query = failure.url.indexOf('?');
  const claimedKey = single(failure.headers[HEADER_KEY_ID]);
  const claimedDataSet = single(failure.headers[HEADER_DATA_SET]);
  const auth = failure.authenticated;
  return {
    at: failure.receivedAtMs,
    request_id: failure.requestId,
    outcome: 'failed',
    authenticated: auth !== undefined,
    status: failure.status,
    error: messageOf(failure.responseBody),
    error_code: failure.errorCode,
    key_id: auth ? auth.keyId : claimedKey !== undefined && failure.knownKey(claimedKey) ? cut(claimedKey) : null,
    data_set_id: auth ? auth.dataSetId : claimedDataSet !== undefined && failure.knownDataSet(claimedDataSet) ? cut(claimedDataSet) : null,
    method: cut(failure.method),
    path: cut(query === -1 ? failure.url : failure.url.slice(0, query)),
    headers: keptHeaders(failure.headers),
    ...(auth ? bodyForDisplay(failure.body) : {}),
    index: null,
    event_id: null,
    event_type: null,
  };
}
