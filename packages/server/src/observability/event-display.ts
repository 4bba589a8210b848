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
 */
import { publishedKnownPaths } from '../validation/stored-reason.js';
import { redactEmails } from '../privacy/pii-scan.js';

export const MAX_EVENT_CHARS = 32 * 1024;

const HEX64 = /^[0-9a-f]{64}$/i;
const SHOWN_PLAIN = new Set(['address_type', 'source', 'country_code', 'mmt_only', 'utcoffset', 'gpp_sid', 'atype']);

const notShown = (value: unknown): string =>
  typeof value === 'string' ? `‹not shown: ${value.length} character${value.length === 1 ? '' : 's'}›` : `‹not shown: ${typeof value}›`;

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
    for (const v of Object.values(value)) out[`‹unknown field ${++n}›`] = maskAll(v);
    return out;
  }
  return value === null || typeof value === 'boolean' ? value : notShown(value);
}

/** A rejected event's value at schema path `path` (arrays as `[]`), masked as the module note says. */
function maskRejected(value: unknown, path: string, key: string, known: ReadonlySet<string>): unknown {
  const inUserData = path === 'user_data' || path.startsWith('user_data.') || path.startsWith('user_data[');
  if (Array.isArray(value)) return value.map((v) => maskRejected(v, `${path}[]`, key, known));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    let unknown = 0;
    for (const [k, v] of Object.entries(value)) {
      const child = path === '' ? k : `${path}.${k}`;
      if (known.has(child) && !child.endsWith('.ext') && child !== 'ext') out[k] = maskRejected(v, child, k, known);
      else out[`‹unknown field ${++unknown}›`] = maskAll(v);
    }
    return out;
  }
  if (value === null || typeof value === 'boolean') return value;
  if (inUserData) return (typeof value === 'string' && HEX64.test(value)) || SHOWN_PLAIN.has(key) ? value : notShown(value);
  return typeof value === 'string' ? redactEmails(value) : value;
}

export interface DisplayedEvent {
  event?: unknown;
  event_omitted?: string;
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
  if ('user_data' in copy) copy.user_data = maskUserData(copy.user_data);
  return { event: copy };
}

/** A rejected event as received (any JSON value), for display. */
export function rejectedEventForDisplay(event: unknown, known: ReadonlySet<string> = publishedKnownPaths()): DisplayedEvent {
  if (event === undefined) return {};
  if (bounded(event) === null) return TOO_LARGE;
  return { event: maskRejected(event, '', '', known) };
}
