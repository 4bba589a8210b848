/**
 * Step 6 of the request path: bytes -> list of candidate events, or a request-level 400.
 *
 * Decisions (documented in docs/decisions.md):
 * - The body must be valid UTF-8. Invalid sequences are a 400, never silently replaced with U+FFFD
 *   (the signature covered the bytes; a replacement would store something the sender never sent).
 * - A leading UTF-8 byte order mark is tolerated and skipped.
 * - Keys `__proto__`, and `constructor` holding `prototype`, anywhere in the body are a 400: they
 *   have no meaning in ECAPI and are the classic prototype-pollution vector (secure-json-parse).
 * - Duplicate keys: the last occurrence wins, as JSON.parse does. The signature covers the raw bytes.
 * - A batch wrapper is an object whose only key is `events`; any object with an `events` key and
 *   another key is neither form and gets `payload must be an object or {events:[...]}`.
 * - Nesting deeper than MAX_JSON_DEPTH arrays/objects, or a number that is not a finite double
 *   (`1e400` parses to Infinity), is `invalid JSON: ...`: hostile nesting would overflow the stack
 *   of every later recursive step (JSON.stringify, the consumer), and Infinity has no JSON form.
 */
import { isUtf8 } from 'node:buffer';
import sjson from 'secure-json-parse';
import { MAX_EVENTS_PER_REQUEST } from '@ecapi-ingest/protocol';
import { requestError } from '../errors.js';

const hasOwn = Object.prototype.hasOwnProperty;

/** Deepest nesting of arrays and objects, counting the body itself (ECAPI's own fields need 5). */
export const MAX_JSON_DEPTH = 64;

/** An iterative walk (a recursive one would overflow on the input it guards against). */
function structureProblem(root: unknown): string | null {
  const values: unknown[] = [root];
  const depths: number[] = [1];
  while (values.length > 0) {
    const value = values.pop();
    const depth = depths.pop()!;
    if (typeof value === 'number') {
      if (!Number.isFinite(value)) return 'number out of range (must be a finite double)';
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth > MAX_JSON_DEPTH) return `nesting deeper than ${MAX_JSON_DEPTH} levels`;
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const item: unknown = value[i];
        if (typeof item === 'number' || (item !== null && typeof item === 'object')) {
          values.push(item);
          depths.push(depth + 1);
        }
      }
    } else {
      for (const key in value) {
        const item: unknown = (value as Record<string, unknown>)[key];
        if (typeof item === 'number' || (item !== null && typeof item === 'object')) {
          values.push(item);
          depths.push(depth + 1);
        }
      }
    }
  }
  return null;
}

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
    // secure-json-parse scans the whole text with two regular expressions after parsing; skip that
    // when the text cannot spell the keys at all (not literally, and with no \u escape anywhere).
    parsed =
      text.includes('__proto__') || text.includes('constructor') || text.includes('\\u')
        ? sjson.parse(text, null, { protoAction: 'error', constructorAction: 'error' })
        : JSON.parse(text);
  } catch (error) {
    throw requestError('INVALID_JSON', jsonErrorDetail(error));
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw requestError('PAYLOAD_SHAPE');
  const problem = structureProblem(parsed);
  if (problem !== null) throw requestError('INVALID_JSON', problem);
  if (!hasOwn.call(parsed, 'events')) return [parsed];
  const wrapper = parsed as Record<string, unknown>;
  if (!Array.isArray(wrapper.events)) throw requestError('PAYLOAD_SHAPE');
  for (const key in wrapper) if (key !== 'events') throw requestError('PAYLOAD_SHAPE');
  if (wrapper.events.length === 0) throw requestError('NO_EVENTS');
  if (wrapper.events.length > MAX_EVENTS_PER_REQUEST) throw requestError('TOO_MANY_EVENTS');
  return wrapper.events;
}
