/**
 * Events as the test environment's console shows them (issue 10; rejected events since issue 18).
 *
 * The console is read by people who must not see identifiers in plain text, and the test
 * environment is where senders debug, so what it shows is masked here, in the serving process,
 * before anything is kept in memory or crosses the IPC:
 *
 * - accepted events (as queued, after the data set's policy): strings in `user_data` that are not
 *   SHA-256 digests are replaced by a marker naming their length; the rest is shown.
 * - rejected events were never checked by the policy (no PII scan, no hashing check passed), and
 *   may hold anything a sender put anywhere. Only what the published schema names is shown by name:
 *   a member the schema does not know (and anything under `ext`) becomes `‹unknown field N›` with
 *   every value below it masked, since its name may itself be an identifier (`{"mary@x.com": 1}`).
 *   In `user_data` every scalar but a digest and the few enumerations of SHOWN_PLAIN is masked
 *   (numbers too: a phone number can be one). Elsewhere strings are shown with email addresses
 *   redacted, as the PII scan would.
 *
 * Either copy is bounded (MAX_EVENT_CHARS): a larger event is replaced by a note, so a test
 * environment holds at most MAX_TEST_EVENTS × MAX_EVENT_CHARS of display copies.
 *
 * Identifiers wherever they appear (issue 29): a value masked in `user_data` is masked in every
 * other field of the same event that holds the same value (compared trimmed, case-insensitively),
 * the event's `id` included; an `id` that is itself an email address or an international phone
 * number (`+` and 7 to 15 digits, with the usual separators) is masked too, in the payload and in
 * the entry's `event_id` (displayedEventId). An `id` of digits alone is left as it is: the spec
 * suggests random numbers as ids. Strings outside `user_data` are shown with email addresses
 * redacted, accepted events included (the data set's PII scan may be off).
 */
import { publishedKnownPaths } from '../validation/stored-reason.js';
import { redactEmails } from '../privacy/pii-scan.js';

export const MAX_EVENT_CHARS = 32 * 1024;

const HEX64 = /^[0-9a-f]{64}$/i;
const SHOWN_PLAIN = new Set(['address_type', 'source', 'country_code', 'mmt_only', 'utcoffset', 'gpp_sid', 'atype']);

const PHONE_SHAPED = /^\+[\d\s().-]{7,24}$/;

/** A value that names a person by itself: an email address anywhere in it, or a whole `+` phone number. */
function isIdentifierShaped(value: string): boolean {
  if (redactEmails(value) !== value) return true;
  if (!PHONE_SHAPED.test(value)) return false;
  const digits = value.replace(/\D/g, '').length;
  return digits >= 7 && digits <= 15;
}

const comparable = (value: string | number): string => String(value).trim().toLowerCase();

/** The plain (not digest, not enumeration) scalars under `user_data`: what is masked there, to be masked elsewhere too. */
function plainIdentifiers(userData: unknown): Set<string> {
  const out = new Set<string>();
  const walk = (value: unknown, key: string, depth: number): void => {
    if (depth > 64) return;
    if (typeof value === 'string' || typeof value === 'number') {
      if (SHOWN_PLAIN.has(key) || (typeof value === 'string' && HEX64.test(value))) return;
      const text = comparable(value);
      if (text.length >= 3) out.add(text);
    } else if (Array.isArray(value)) {
      for (const v of value) walk(v, key, depth + 1);
    } else if (value !== null && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) walk(v, k, depth + 1);
    }
  };
  walk(userData, '', 0);
  return out;
}

/** An event's `id` as the test environment shows it: masked when it is an identifier (module note). */
export function displayedEventId(id: string | null, identifiers: ReadonlySet<string> = new Set()): string | null {
  if (id === null) return null;
  return isIdentifierShaped(id) || identifiers.has(comparable(id)) ? notShown(id) : id;
}

/** A string outside `user_data`: masked when it repeats a masked identifier; email addresses in it redacted. */
function maskElsewhere(value: string | number, identifiers: ReadonlySet<string>): string | number {
  if (identifiers.has(comparable(value))) return notShown(value);
  return typeof value === 'string' ? redactEmails(value) : value;
}

/** Every scalar outside `user_data` of an accepted event through maskElsewhere (the `id` through displayedEventId). */
function maskOutsideUserData(value: unknown, identifiers: ReadonlySet<string>): unknown {
  if (typeof value === 'string' || typeof value === 'number') return maskElsewhere(value, identifiers);
  if (Array.isArray(value)) return value.map((v) => maskOutsideUserData(v, identifiers));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = maskOutsideUserData(v, identifiers);
    return out;
  }
  return value;
}

const NOT_SHOWN = '‹not shown: ';
const UNKNOWN_FIELD = '‹unknown field ';

const notShown = (value: unknown): string =>
  typeof value === 'string' ? `${NOT_SHOWN}${value.length} character${value.length === 1 ? '' : 's'}›` : `${NOT_SHOWN}${typeof value}›`;

/** Whether a displayed string is a masked value (its original is not in the display). */
export const isMaskedForDisplay = (text: string): boolean => text.startsWith(NOT_SHOWN);

/** Whether a displayed member name stands for one the schema does not know (its name and values masked). */
export const isUnknownFieldName = (name: string): boolean => name.startsWith(UNKNOWN_FIELD);

/** `user_data` of an accepted event: strings that are not SHA-256 digests are replaced by a marker. */
function maskUserData(value: unknown, key = ''): unknown {
  if (typeof value === 'string') return HEX64.test(value) || SHOWN_PLAIN.has(key) ? value : notShown(value);
  if (Array.isArray(value)) return value.map((v) => maskUserData(v, key));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = maskUserData(v, k);
    return out;
  }
  return value;
}

/** Every scalar masked, the structure kept (what lies under a name the schema does not know). */
function maskAll(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(maskAll);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    let n = 0;
    for (const v of Object.values(value)) out[`${UNKNOWN_FIELD}${++n}›`] = maskAll(v);
    return out;
  }
  return value === null || typeof value === 'boolean' ? value : notShown(value);
}

/** A rejected event's value at schema path `path` (arrays as `[]`), masked as the module note says. */
function maskRejected(value: unknown, path: string, key: string, known: ReadonlySet<string>, identifiers: ReadonlySet<string>): unknown {
  const inUserData = path === 'user_data' || path.startsWith('user_data.') || path.startsWith('user_data[');
  if (Array.isArray(value)) return value.map((v) => maskRejected(v, `${path}[]`, key, known, identifiers));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    let unknown = 0;
    for (const [k, v] of Object.entries(value)) {
      const child = path === '' ? k : `${path}.${k}`;
      if (known.has(child) && !child.endsWith('.ext') && child !== 'ext') out[k] = maskRejected(v, child, k, known, identifiers);
      else out[`${UNKNOWN_FIELD}${++unknown}›`] = maskAll(v);
    }
    return out;
  }
  if (value === null || typeof value === 'boolean') return value;
  if (inUserData) return (typeof value === 'string' && HEX64.test(value)) || SHOWN_PLAIN.has(key) ? value : notShown(value);
  if (path === 'id' && typeof value === 'string') return displayedEventId(value, identifiers);
  return typeof value === 'string' || typeof value === 'number' ? maskElsewhere(value, identifiers) : value;
}

export interface DisplayedEvent {
  event?: unknown;
  event_omitted?: string;
}

const userDataOf = (event: unknown): unknown =>
  event !== null && typeof event === 'object' && !Array.isArray(event) ? (event as { user_data?: unknown }).user_data : undefined;

/** The `id` of an event (accepted or rejected) as shown: null without one, masked when it is an identifier. */
export function eventIdForDisplay(event: unknown, fallback: string | null = null): string | null {
  const id = event !== null && typeof event === 'object' && !Array.isArray(event) ? (event as { id?: unknown }).id : undefined;
  const text = typeof id === 'string' ? id : fallback;
  if (text === null) return null;
  const small = bounded(event) !== null;
  return displayedEventId(text, small ? plainIdentifiers(userDataOf(event)) : new Set());
}

function bounded(event: unknown): string | null {
  const text = JSON.stringify(event);
  return text === undefined || text.length > MAX_EVENT_CHARS ? null : text;
}

const TOO_LARGE = { event_omitted: `event larger than ${MAX_EVENT_CHARS / 1024} KB` };

/** An accepted event as queued, for display. */
export function eventForDisplay(event: Record<string, unknown>): DisplayedEvent {
  const text = bounded(event);
  if (text === null) return TOO_LARGE;
  const copy = JSON.parse(text) as Record<string, unknown>;
  const identifiers = plainIdentifiers(copy.user_data);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(copy)) {
    if (k === 'user_data') out[k] = maskUserData(v);
    else if (k === 'id' && typeof v === 'string') out[k] = displayedEventId(v, identifiers);
    else out[k] = maskOutsideUserData(v, identifiers);
  }
  return { event: out };
}

/** A rejected event as received (any JSON value), for display. */
export function rejectedEventForDisplay(event: unknown, known: ReadonlySet<string> = publishedKnownPaths()): DisplayedEvent {
  if (event === undefined) return {};
  if (bounded(event) === null) return TOO_LARGE;
  return { event: maskRejected(event, '', '', known, plainIdentifiers(userDataOf(event))) };
}
