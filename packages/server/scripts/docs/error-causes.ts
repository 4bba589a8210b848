/**
 * What a sender should read beside each error of the registry (src/errors.ts, the protocol's
 * EventErrors): the cause and what to do, by code. The messages, statuses and codes themselves
 * come from the registry, never from here. A code without an entry is still listed (message and
 * status), with an empty cause: add its text here when adding an error.
 *
 * `examples` gives the arguments a parameterized message is shown with (each list one row);
 * without it every parameter is shown as `<name>`.
 */
export interface ErrorCause {
  readonly cause: string;
  readonly examples?: readonly (readonly string[])[];
}

export const REQUEST_ERROR_CAUSES: Readonly<Record<string, ErrorCause>> = {
  PAYLOAD_TOO_LARGE: { cause: 'body over 1,048,576 bytes (by Content-Length, or counted while streaming); split the batch' },
  INVALID_JSON: {
    cause: 'not JSON; the detail also says `body is not valid UTF-8`, `empty body`, `keys "__proto__" and "constructor.prototype" are not allowed`, `nesting deeper than 64 levels` or `number out of range (must be a finite double)`',
  },
  PAYLOAD_SHAPE: { cause: 'a bare array, `null`, a string, `events` not an array, or a wrapper with keys besides `events`' },
  NO_EVENTS: { cause: '`{"events": []}`' },
  TOO_MANY_EVENTS: { cause: 'more than 1,000 events; split the batch' },
  UNSUPPORTED_CONTENT_TYPE: { cause: 'wrong or missing Content-Type (checked after authentication)', examples: [['text/plain'], ['']] },
  NOT_ACCEPTABLE: { cause: 'an Accept header that admits no JSON' },
  MISSING_HOST: { cause: 'an HTTP/1.x request without `Host` (or HTTP/2 without `:authority` and `Host`); answered before the gateway' },
  UNSUPPORTED_CONTENT_ENCODING: {
    cause: 'a `Content-Encoding` other than `identity` (`gzip`, `br`, …): the service never decompresses. Send plain JSON (and sign those bytes)',
  },
  UNSUPPORTED_TRANSFER_ENCODING: { cause: 'HTTP/1.1 `Transfer-Encoding` other than `chunked` alone, e.g. `gzip, chunked`' },
  PLAIN_HTTP: {
    cause: '`http://` to the HTTPS port: answered from the connection\'s first bytes as HTTP/1.1 with `Connection: close` (no request id: no request was processed). Use `https://`',
  },
  BEARER_NOT_ENABLED: { cause: 'an `Authorization: Bearer …` header' },
  MISSING_KEY_ID: { cause: 'add the header' },
  MISSING_DATA_SET: { cause: 'add the header' },
  MISSING_SIGNATURE: { cause: 'add the header (an empty or blank one counts as missing)' },
  MALFORMED_SIGNATURE: { cause: 'uppercase, prefixed (`sha256=`), truncated or repeated signature headers' },
  UNKNOWN_KEY: { cause: 'wrong key id, or a key of the other environment' },
  REVOKED_KEY: { cause: 'ask your contact for a new key' },
  SIGNATURE_MISMATCH: { cause: 'wrong secret, or the body changed after signing' },
  SECRET_EXPIRED: { cause: 'switch to the secret from the last rotation' },
  NOT_AUTHORIZED: {
    cause: "the key has no grant for the header's data set, or for some event's `data_set_id` (the whole batch is refused); a data set that does not exist gets the same answer",
  },
  UNKNOWN_VERSION: { cause: '`POST /v2/events` and the like' },
  RATE_LIMITED: {
    cause: 'over a data set\'s limit, too many failed authentications from one address (pre-auth shedding), or (HTTP/1.1) too many bodies of connections not yet authenticated waiting for memory (a connection is trusted once one of its requests passed the HMAC): wait `Retry-After` seconds; nothing of the request was queued',
    examples: [
      ['burst of 5000 requests per second'],
      ['1000 requests per second sustained'],
      ['100000 events per second'],
      ['too many failed authentication attempts from this address'],
      ['too many request bodies from connections not yet authenticated are waiting; retry after Retry-After seconds'],
    ],
  },
  BACKEND_UNAVAILABLE: { cause: 'not stored; retry with backoff (resending the same ids is safe)' },
};

export const GATEWAY_ERROR_CAUSES: Readonly<Record<string, ErrorCause>> = {
  MISSING_AUTH_TOKEN: { cause: 'wrong path or method and no `Authorization` header. Fix the URL/method first' },
  INCOMPLETE_SIGNATURE: { cause: 'wrong path or method with an `Authorization` header' },
};

export const EVENT_ERROR_CAUSES: Readonly<Record<string, ErrorCause>> = {
  MISSING_FIELD: { cause: '`data_set_id`, `timestamp`, `event_type`; `custom_event` when `event_type` is `custom`; `currency_code` when `value` is set' },
  SCHEMA: { cause: 'wrong type, unknown enum value, unknown field; also `event must be a JSON object`' },
  INVALID_FIELD: {
    cause:
      'a present but invalid value; `invalid field data_set_id: must equal X-Service-Data-Set` for an event of another (authorized) data set, ' +
      '`invalid field data_set_id: must be a non-empty string` for an empty one (that event alone); ' +
      '`invalid field timestamp: is more than 5 minutes in the future; send the event time in unix seconds (UTC)`, or ' +
      '`invalid field timestamp: is older than this data set accepts (maximum event age 90 days)` outside the data set\'s time window ' +
      '(its `--max-age`, 90 days by default)',
  },
  NOT_HASHED: { cause: 'a hashed identifier that is not a SHA-256 hex digest' },
  NOT_AUTHORIZED: { cause: "an event's `data_set_id` the key has no grant for: the whole request is refused with this 401 (see above)" },
};
