/**
 * Rejection messages as they may be STORED, served to operators or used as metric labels
 * (issue 16, point 7).
 *
 * A per-event message answers the sender with what the sender sent, exactly: `schema validation
 * failed: unknown field user_data["mary@example.com"]` is the sender's own data and the most useful
 * answer. But the same message in ingest-stats.db, in the console's recent rejections or in a
 * Prometheus label would put a sender-controlled string (here an email address) where the docs
 * promises no identifiers, and give every new name a new stats row or label series. So everything
 * that is kept, served to operators or counted goes through `storedReasonOf` / `storedPathOf`:
 *
 * - field paths keep the names the ECAPI schema knows (`user_data.address[2].postal_code`); at the
 *   first name it does not know (an unknown member of a closed object, anything inside `ext`, an
 *   unknown member of `properties`) the rest of the path becomes `*`: `user_data.*`, `ext.*`,
 *   `properties.*`;
 * - an echoed value (`…, got "mary@example.com"`) becomes `<value>`;
 * - a message of no shape known here is cut to its registry prefix (`schema validation failed`),
 *   or to `rejected` when it has none of them, so a future message shape cannot leak by default.
 *
 * The rejection's code (produced with the message by the validator) says which of the registry's
 * message shapes apply (@ecapi-ingest/protocol: EventErrors, part of the API), and paths are
 * self-delimiting (`.name`, `[3]`, `["json string"]`), so the parse is exact rather than a guess.
 * It is idempotent, which lets the stats reader apply it again to rows stored before it existed. The set of known paths is finite, so the output is of
 * bounded cardinality: a metric label, or a stats reason group, cannot grow with sender input.
 */
import type { EventModel, ObjectDesc, FieldDesc } from './schema-model.js';
import { EventErrors, eventErrorOf, eventErrorPrefixOf, loadEventSchema, type EventError, type EventErrorCode } from '@ecapi-ingest/protocol';
import { buildEventModel, KIND_ARRAY, KIND_OBJECT } from './schema-model.js';

export const MASKED_NAME = '*';
export const MASKED_VALUE = '<value>';

/** Every field path the model names, with arrays as `[]`: `user_data.address[].city`. */
export function knownPathsOf(model: EventModel): ReadonlySet<string> {
  const paths = new Set<string>();
  const visitField = (f: FieldDesc, path: string) => {
    paths.add(path);
    if (f.kind === KIND_OBJECT && f.object) visitObject(f.object, path);
    if (f.kind === KIND_ARRAY && f.items) visitField(f.items, `${path}[]`);
  };
  const visitObject = (o: ObjectDesc, base: string) => {
    for (const [name, f] of o.fields) visitField(f, base === '' ? name : `${base}.${name}`);
  };
  visitObject(model.event, '');
  return paths;
}

let published: ReadonlySet<string> | null = null;
/** The known paths of the schema the service publishes (loaded once, on first use). */
export function publishedKnownPaths(): ReadonlySet<string> {
  return (published ??= knownPathsOf(buildEventModel(loadEventSchema())));
}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*/;
/** `[3]`, or `[]` as in reason groups (analytics/reason-groups.ts), which are read back through here. */
const INDEX = /^\[(\d*)\]/;
const QUOTED = /^\["(?:[^"\\]|\\.)*"\]/;

/**
 * Reads one path from the start of `text` and returns its stored form and how many characters
 * it took. Names the schema does not know end the path as `*` (and everything after them that
 * still belongs to the path is consumed and dropped).
 */
function readPath(text: string, known: ReadonlySet<string>): { stored: string; length: number } {
  let i = 0;
  let stored = '';
  let norm = '';
  let masked = false;
  const mask = () => {
    if (!masked) stored = stored === '' ? MASKED_NAME : `${stored}.${MASKED_NAME}`;
    masked = true;
  };
  for (;;) {
    const rest = text.slice(i);
    let name: string | null = null;
    let m: RegExpExecArray | null;
    if (i === 0 && (m = IDENT.exec(rest))) {
      name = m[0];
      i += m[0].length;
    } else if (i > 0 && rest.startsWith('.') && (m = IDENT.exec(rest.slice(1)))) {
      name = m[0];
      i += 1 + m[0].length;
    } else if (i > 0 && rest.startsWith('.*')) {
      // An already stored path (idempotence).
      i += 2;
      mask();
      continue;
    } else if (i === 0 && rest.startsWith('*')) {
      i += 1;
      mask();
      continue;
    } else if ((m = INDEX.exec(rest))) {
      i += m[0].length;
      if (!masked) {
        stored += m[0];
        norm += '[]';
      }
      continue;
    } else if ((m = QUOTED.exec(rest))) {
      i += m[0].length;
      mask(); // a key that is not an identifier is never a schema name
      continue;
    } else {
      break;
    }
    if (masked) continue;
    const candidate = norm === '' ? name : `${norm}.${name}`;
    if (known.has(candidate)) {
      stored = stored === '' ? name : `${stored}.${name}`;
      norm = candidate;
    } else {
      mask();
    }
  }
  if (i === 0) return { stored: MASKED_NAME, length: 0 };
  return { stored, length: i };
}

/** The stored form of a field path (see the module note). */
export function storedPathOf(path: string, known: ReadonlySet<string> = publishedKnownPaths()): string {
  const { stored, length } = readPath(path, known);
  return length === path.length ? stored : stored === MASKED_NAME || stored.endsWith(`.${MASKED_NAME}`) ? stored : `${stored}.${MASKED_NAME}`;
}

/** A path with every index as `[]`: the label form (bounded: known paths, or a known prefix + `.*`). */
export function storedPathLabelOf(path: string, known: ReadonlySet<string> = publishedKnownPaths()): string {
  return storedPathOf(path, known).replace(/\[\d+\]/g, '[]');
}

const ECHO_SUFFIX = /, got (?:"(?:[^"\\]|\\.)*"|[^\s,]+)$/;

/** A path-bearing message shape: the template's fixed prefix, then a path, then what may follow it. */
interface PathShape {
  readonly prefix: string;
  readonly after: RegExp;
}

const SCHEMA = eventErrorPrefixOf('SCHEMA');
const NOT_HASHED_SUFFIX = EventErrors.NOT_HASHED.message('\u0000').split('\u0000')[1]!;

/** The shapes of each code's messages (registry templates; the code says which apply, never the text). */
const PATH_SHAPES: Readonly<Record<EventErrorCode, readonly PathShape[]>> = {
  SCHEMA: [
    { prefix: `${SCHEMA}unknown field `, after: /^$/ },
    { prefix: SCHEMA, after: /^ (?:must |is invalid)/ },
  ],
  MISSING_FIELD: [{ prefix: eventErrorPrefixOf('MISSING_FIELD'), after: /^$/ }],
  NOT_HASHED: [{ prefix: eventErrorPrefixOf('NOT_HASHED'), after: new RegExp(`^${NOT_HASHED_SUFFIX.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`) }],
  INVALID_FIELD: [{ prefix: eventErrorPrefixOf('INVALID_FIELD'), after: /^: / }],
  // A request-level refusal (401), never a per-event error here: kept as its kind only.
  NOT_AUTHORIZED: [],
};

/** What a message of a code is cut to when it has none of its code's shapes: what kind of rejection, never free text. */
const KINDS: Readonly<Record<EventErrorCode, string>> = {
  SCHEMA: 'schema validation failed',
  MISSING_FIELD: 'missing required field',
  INVALID_FIELD: 'invalid field',
  NOT_HASHED: 'hashed field',
  NOT_AUTHORIZED: 'principal not authorized',
};
const KIND_LIST = Object.values(KINDS);

const FIXED_MESSAGES: ReadonlySet<string> = new Set([
  `${SCHEMA}event must be a JSON object`,
  `${SCHEMA}event could not be validated`,
]);

const UNRECOGNIZED = 'rejected';

/**
 * The stored form of a per-event rejection (see the module note). The request path passes the
 * `{code, message}` the validator produced. A string is text whose code is gone: a reason read
 * back from ingest-stats.db (rows stored before masking existed are masked on read) or a response
 * body; only then is the code read back from the message (eventErrorOf, the registry's prefixes).
 * Idempotent on its own output.
 */
export function storedReasonOf(error: EventError | string, known: ReadonlySet<string> = publishedKnownPaths()): string {
  const { code, message } = typeof error === 'string' ? eventErrorOf(error) : error;
  if (code === 'OTHER') {
    // No shape of the registry: keep only a kind (a stored form read back), never free text.
    for (const kind of KIND_LIST) if (message.startsWith(kind)) return kind;
    return UNRECOGNIZED;
  }
  if (FIXED_MESSAGES.has(message)) return message;
  for (const shape of PATH_SHAPES[code]) {
    if (!message.startsWith(shape.prefix)) continue;
    const at = shape.prefix.length;
    // Ajv's errors at the root name the event itself (`schema validation failed: event must …`).
    const { stored, length } = message.startsWith('event ', at) ? { stored: 'event', length: 5 } : readPath(message.slice(at), known);
    let rest = message.slice(at + length);
    if (!shape.after.test(rest)) {
      // The path ran into something it could not read (say `["x"]y`): mask the rest of the token.
      const space = rest.search(/ |: /);
      if (space < 0) continue;
      rest = rest.slice(space);
      if (!shape.after.test(rest)) continue;
    }
    rest = rest.replace(ECHO_SUFFIX, `, got ${MASKED_VALUE}`);
    return `${shape.prefix}${stored}${rest}`;
  }
  return KINDS[code];
}
