/**
 * The merge rule of the merged view, as a pure function of two events.
 *
 * When a record arrives for a `(data_set_id, id)` that the view already holds, the stored event
 * (`older`) and the arriving one (`newer`, later in queue order) merge:
 * - field by field, the newer value wins;
 * - objects merge recursively (a field only the older one has is kept);
 * - arrays of hashed identifiers (`user_data.email_address`, `user_data.phone_numbers`,
 *   `user_data.uids`, `user_data.address`) are unioned without duplicates: the older elements in
 *   their order, then the newer ones not already present (objects compare by their canonical JSON);
 * - every other array (items, customer_segments, gpp_sid, ...) is replaced by the newer one;
 * - `null` in the newer record is a value like any other and replaces the older one.
 *
 * Neither input is modified.
 */

/** Paths (dot-joined, from the event root) of the identifier arrays that union instead of replace. */
export const UNION_ARRAY_PATHS: ReadonlySet<string> = new Set([
  'user_data.email_address',
  'user_data.phone_numbers',
  'user_data.uids',
  'user_data.address',
]);

export type JsonObject = Record<string, unknown>;

export function isPlainObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** JSON with object keys sorted at every level: equal values give equal strings. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (isPlainObject(value)) {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** Elements of `items` without repeats (by canonical JSON), first occurrence kept, order kept. */
export function uniqueElements(items: readonly unknown[]): unknown[] {
  if (items.length <= 1) return items.slice();
  if (items.length === 2 && typeof items[0] === 'string' && typeof items[1] === 'string') {
    return items[0] === items[1] ? [items[0]] : items.slice();
  }
  const seen = new Set<string>();
  const out: unknown[] = [];
  for (const item of items) {
    const key = typeof item === 'string' ? `s${item}` : canonicalJson(item);
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(item);
  }
  return out;
}

function mergeValue(older: unknown, newer: unknown, path: string): unknown {
  if (isPlainObject(older) && isPlainObject(newer)) return mergeObjects(older, newer, path);
  if (UNION_ARRAY_PATHS.has(path)) {
    const a = Array.isArray(older) ? older : older === undefined || older === null ? [] : [older];
    const b = Array.isArray(newer) ? newer : newer === null ? [] : [newer];
    if (Array.isArray(older) || Array.isArray(newer)) return uniqueElements([...a, ...b]);
  }
  return newer;
}

function mergeObjects(older: JsonObject, newer: JsonObject, path: string): JsonObject {
  const out: JsonObject = { ...older };
  for (const key of Object.keys(newer)) {
    const value = newer[key];
    if (value === undefined) continue;
    const childPath = path === '' ? key : `${path}.${key}`;
    out[key] = key in older ? mergeValue(older[key], value, childPath) : cloneIfNeeded(value);
  }
  return out;
}

function cloneIfNeeded(value: unknown): unknown {
  // Values come from JSON.parse and are never mutated later; sharing them is safe.
  return value;
}

/** The merged event: `newer` over `older` by the rule above. */
export function mergeEvents(older: JsonObject, newer: JsonObject): JsonObject {
  return mergeObjects(older, newer, '');
}

/**
 * The key of an event in the merged view: its `id` within the data set, or, for an event without
 * an id (which ECAPI treats as unique), its queue position.
 */
export function recordKeyOf(event: JsonObject, seq: number): string {
  const id = event.id;
  return typeof id === 'string' && id !== '' ? `id:${id}` : `seq:${seq}`;
}

export function recordKeyForId(id: string): string {
  return `id:${id}`;
}
