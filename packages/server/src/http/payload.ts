/**
 * Step 6 of the request path: bytes -> list of candidate events, or a request-level 400.
 *
 * Decisions (documented in the README):
 * - The body must be valid UTF-8. Invalid sequences are a 400, never silently replaced with U+FFFD
 *   (the signature covered the bytes; a replacement would store something the sender never sent).
 * - A leading UTF-8 byte order mark is tolerated and skipped.
 * - Keys `__proto__`, and `constructor` holding `prototype`, anywhere in the body are a 400: they
 *   have no meaning in ECAPI and are the classic prototype-pollution vector (secure-json-parse).
 * - Duplicate keys: the last occurrence wins, as JSON.parse does. The signature covers the raw bytes.
 * - A batch wrapper is an object whose only key is `events`; any object with an `events` key and
 *   another key is neither form and gets `payload must be an object or {events:[...]}`.
 */
import { isUtf8 } from 'node:buffer';
import sjson from 'secure-json-parse';
import { MAX_EVENTS_PER_REQUEST } from '@ecapi-ingest/protocol';
import { requestError } from '../errors.js';

const hasOwn = Object.prototype.hasOwnProperty;

function jsonErrorDetail(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  if (message.includes('forbidden prototype property') || message.includes('forbidden constructor')) {
    return 'keys "__proto__" and "constructor.prototype" are not allowed';
  }
  // V8 quotes a slice of the input ('..., "{"a": x" is not valid JSON'); answer with the problem only.
  return message.replace(/, ".*" is not valid JSON$/s, '');
}

export function parseEvents(body: Buffer): unknown[] {
  if (!isUtf8(body)) throw requestError('INVALID_JSON', 'body is not valid UTF-8');
  let text = body.toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (text.length === 0) throw requestError('INVALID_JSON', 'empty body');
  let parsed: unknown;
  try {
    parsed = sjson.parse(text, null, { protoAction: 'error', constructorAction: 'error' });
  } catch (error) {
    throw requestError('INVALID_JSON', jsonErrorDetail(error));
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw requestError('PAYLOAD_SHAPE');
  if (!hasOwn.call(parsed, 'events')) return [parsed];
  const wrapper = parsed as Record<string, unknown>;
  if (!Array.isArray(wrapper.events)) throw requestError('PAYLOAD_SHAPE');
  for (const key in wrapper) if (key !== 'events') throw requestError('PAYLOAD_SHAPE');
  if (wrapper.events.length === 0) throw requestError('NO_EVENTS');
  if (wrapper.events.length > MAX_EVENTS_PER_REQUEST) throw requestError('TOO_MANY_EVENTS');
  return wrapper.events;
}
