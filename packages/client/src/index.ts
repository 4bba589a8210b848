/**
 * @ecapi-ingest/client: the sender SDK of ecapi-ingest.
 *
 *   import { Client, hashEvent, hashEmail, sign } from '@ecapi-ingest/client';
 */
export * from './event-types.generated.js';
export * from './normalize.js';
export * from './hash-event.js';
export * from './pack.js';
export * from './retry.js';
export { uuidv7 } from './uuid.js';
export { validateEvent, loadEventSchema } from './validate.js';
export * from './client.js';
export { MAX_BODY_BYTES, MAX_EVENTS_PER_REQUEST, EVENTS_PATH, SIGNATURE_PATTERN } from '@ecapi-ingest/protocol';
