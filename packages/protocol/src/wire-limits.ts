/**
 * The wire contract of POST /v1/events that both the server and senders must agree on.
 * Numbers come from the interface spec's Limits table; header names from its Authentication section.
 */

/** Largest accepted request body in bytes. Exactly this many bytes is allowed; one more is rejected. */
export const MAX_BODY_BYTES = 1_048_576;

/** Largest number of events in one request. */
export const MAX_EVENTS_PER_REQUEST = 1000;

export const EVENTS_PATH = '/v1/events';

/** Lower-case header names, as Node presents them. */
export const HEADER_KEY_ID = 'x-service-key-id';
export const HEADER_SIGNATURE = 'x-service-signature';
export const HEADER_DATA_SET = 'x-service-data-set';
export const HEADER_REQUEST_ID = 'x-request-id';
