/** JSON paths in error messages: `user_data.address[0].postal_code`; odd keys as `["key"]`. */
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

/** Ajv instancePath (`/user_data/address/0/city`) to the message path form. */
export function fromJsonPointer(pointer: string): string {
  if (pointer === '') return 'event';
  let out = '';
  for (const raw of pointer.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out = /^(0|[1-9][0-9]*)$/.test(key) ? indexPath(out, Number(key)) : joinPath(out, key);
  }
  return out;
}
