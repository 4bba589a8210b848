/**
 * @ecapi-ingest/client: the sender SDK of ecapi-ingest.
 *
 *   import { Client, hashEvent, hashEmail, sign, type EventInput } from '@ecapi-ingest/client';
 */
export * from './event-types.generated.js';
export * from './normalize.js';
export * from './hash-event.js';
export * from './pack.js';
export * from './retry.js';
export * from './send-errors.js';
export { uuidv7 } from './uuid.js';
export { validateEvent } from './validate.js';
export * from './client.js';
export { BASE_URL_SHAPE, parseBaseUrl, type BaseUrl } from './base-url.js';
export { isPlainHeaderValue } from './header-value.js';
export { DEFAULT_BATCHING, type BatchingOptions, type DroppedEvent, type TrackResult, type TrackStats } from './batcher.js';
export * from './send-result.js';
export { prepareEvents, type EventInput, type PlaintextEventInput, type PrepareOptions, type PreparedEvents } from './prepare-events.js';
export {
  MAX_BODY_BYTES,
  MAX_EVENTS_PER_REQUEST,
  EVENTS_PATH,
  SIGNATURE_PATTERN,
  EventErrors,
  eventErrorOf,
  loadEventSchema,
  type EventError,
  type EventErrorCode,
} from './protocol.js';
