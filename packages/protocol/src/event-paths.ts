/**
 * JSON paths in per-event error messages: `user_data.address[0].postal_code`; keys that are not
 * identifiers as `["key"]` (at most 40 characters echoed, so a hostile key cannot flood a message).
 * Used by the server's validator and the SDK's local validation, so both name a field alike.
 */
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const MAX_ECHOED_KEY = 40;

export function joinPath(base: string, key: string): string {
  if (IDENTIFIER.test(key)) return base === '' ? key : `${base}.${key}`;
  const shown = key.length > MAX_ECHOED_KEY ? `${key.slice(0, MAX_ECHOED_KEY)}…` : key;
  return `${base}[${JSON.stringify(shown)}]`;
}

export function indexPath(base: string, index: number): string {
  return `${base}[${index}]`;
}

/** A JSON Pointer (Ajv's instancePath, `/user_data/address/0/city`) in the message path form; `event` for the root. */
export function fromJsonPointer(pointer: string): string {
  if (pointer === '') return 'event';
  let out = '';
  for (const raw of pointer.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out = /^(0|[1-9][0-9]*)$/.test(key) ? indexPath(out, Number(key)) : joinPath(out, key);
  }
  return out;
}
