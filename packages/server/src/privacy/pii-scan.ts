/**
 * Scan for plaintext email addresses where identifiers do not belong (policy `piiScan`).
 *
 * Scanned (documented in docs/validation-and-privacy.md):
 * - `custom_event`
 * - every string of `user_data.customer_segments`
 * - every string anywhere under `properties` (known and unknown members, `items[]` and every
 *   nested object or array, including `properties.ext` and `items[].ext`)
 * - every string anywhere under every other `ext`: the core `ext`, `user_data.ext`,
 *   `user_data.uids[].ext`, `user_data.address[].ext`
 * Not scanned: hashed fields (already proven to be hex digests), ids, enums, IPs, user agents,
 * gpp_string, city/state.
 *
 * Cost: a string is only run through the regular expression when it contains '@' or '%40'
 * (URL-encoded '@', as in `?email=jane%40example.com`). The walk is iterative (no recursion
 * limit, whatever the nesting depth of an ext) and in document order, so `reject` names the
 * first offending field.
 */
import { indexPath, joinPath } from '@ecapi-ingest/protocol';

export const REDACTED_EMAIL = '[redacted-email]';

/** Longest local part (RFC 5321) and domain considered: bounds the work per '@' so the scan is linear. */
const MAX_LOCAL = 64;
const MAX_DOMAIN = 255;
/** `logo@2x.png` and friends are image names, not addresses. */
const IMAGE_TLDS: ReadonlySet<string> = new Set(['png', 'jpg', 'jpeg', 'gif', 'svg', 'webp', 'avif', 'ico', 'bmp', 'tif', 'tiff']);

function isAlnum(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
}
/** Local-part characters: alphanumerics and . _ % + - (`%` so that %XX escapes stay inside). */
function isLocalChar(c: number): boolean {
  return isAlnum(c) || c === 46 || c === 95 || c === 37 || c === 43 || c === 45;
}
function isDomainChar(c: number): boolean {
  return isAlnum(c) || c === 46 || c === 45;
}

/** End (exclusive) of a valid dotted domain starting at `from`, or -1. */
function domainEnd(value: string, from: number): number {
  let end = from;
  const limit = Math.min(value.length, from + MAX_DOMAIN);
  while (end < limit && isDomainChar(value.charCodeAt(end))) end++;
  // trailing dots/hyphens are punctuation of the surrounding text, not of the domain
  while (end > from && (value.charCodeAt(end - 1) === 46 || value.charCodeAt(end - 1) === 45)) end--;
  const domain = value.slice(from, end);
  const lastDot = domain.lastIndexOf('.');
  if (lastDot <= 0) return -1;
  const tld = domain.slice(lastDot + 1);
  if (tld.length < 2) return -1;
  for (let i = 0; i < tld.length; i++) {
    const c = tld.charCodeAt(i) | 32;
    if (c < 97 || c > 122) return -1;
  }
  if (domain.includes('..') || domain.charCodeAt(0) === 45 || domain.charCodeAt(0) === 46) return -1;
  if (IMAGE_TLDS.has(tld.toLowerCase())) return -1;
  return end;
}

export function mayContainEmail(value: string): boolean {
  return value.indexOf('@') !== -1 || value.indexOf('%40') !== -1;
}

/**
 * The value with every email address (`local@domain.tld`, also with the '@' URL-encoded as
 * %40) replaced by REDACTED_EMAIL; the same string when there is none. Hand-written and linear
 * in the length of the value (no backtracking regular expression over untrusted text).
 */
export function redactEmails(value: string): string {
  if (!mayContainEmail(value)) return value;
  let out = '';
  let copied = 0;
  let i = 0;
  while (i < value.length) {
    const c = value.charCodeAt(i);
    let sepLength = 0;
    if (c === 64) sepLength = 1;
    else if (c === 37 && value.charCodeAt(i + 1) === 52 && value.charCodeAt(i + 2) === 48) sepLength = 3;
    if (sepLength === 0) {
      i++;
      continue;
    }
    let start = i;
    const floor = Math.max(copied, i - MAX_LOCAL);
    while (start > floor && isLocalChar(value.charCodeAt(start - 1))) start--;
    const end = start < i ? domainEnd(value, i + sepLength) : -1;
    if (end < 0) {
      i += sepLength;
      continue;
    }
    out += value.slice(copied, start) + REDACTED_EMAIL;
    copied = end;
    i = end;
  }
  return copied === 0 ? value : out + value.slice(copied);
}

export type PiiScanResult =
  | { readonly rejectedPath: string }
  | { readonly redacted: string[] | undefined };

type Container = Record<string, unknown> | unknown[];

const NOTHING_FOUND: PiiScanResult = Object.freeze({ redacted: undefined });
/** Below this depth the probe recurses; deeper content is left to the iterative scan. */
const PROBE_DEPTH = 32;

/** True when some string in value contains '@' or '%40' (or the nesting is too deep to probe). */
function probe(value: unknown, depth: number): boolean {
  if (typeof value === 'string') return mayContainEmail(value);
  if (typeof value !== 'object' || value === null) return false;
  if (depth > PROBE_DEPTH) return true;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (probe(value[i], depth + 1)) return true;
    return false;
  }
  const obj = value as Record<string, unknown>;
  for (const key in obj) if (probe(obj[key], depth + 1)) return true;
  return false;
}

/** Cheap allocation-free pre-check over exactly the scanned fields: almost every event ends here. */
function anyMarker(event: Record<string, unknown>): boolean {
  if (probe(event['custom_event'], 0) || probe(event['properties'], 0) || probe(event['ext'], 0)) return true;
  const ud = event['user_data'] as Record<string, unknown> | undefined;
  if (ud === undefined) return false;
  if (probe(ud['customer_segments'], 0) || probe(ud['ext'], 0)) return true;
  for (const listKey of ['uids', 'address']) {
    const list = ud[listKey];
    if (!Array.isArray(list)) continue;
    for (let i = 0; i < list.length; i++) {
      const entry = list[i] as Record<string, unknown> | null;
      if (entry !== null && typeof entry === 'object' && probe(entry['ext'], 0)) return true;
    }
  }
  return false;
}

/**
 * Scans the fields listed above. mode 'reject' stops at the first hit and returns its path;
 * mode 'redact' replaces every hit in place and returns the paths (undefined when none).
 */
export function scanForEmails(event: Record<string, unknown>, mode: 'redact' | 'reject'): PiiScanResult {
  if (!anyMarker(event)) return NOTHING_FOUND;
  // Parallel stacks (value, container, key, container path): no per-node object allocation.
  const values: unknown[] = [];
  const containers: Container[] = [];
  const keys: (string | number)[] = [];
  const bases: string[] = [];
  const roots: [Container, string | number, string][] = [];

  for (const key of Object.keys(event)) {
    if (key === 'custom_event' || key === 'properties' || key === 'ext') {
      roots.push([event, key, '']);
    } else if (key === 'user_data') {
      const userData = event[key];
      if (typeof userData !== 'object' || userData === null) continue;
      const ud = userData as Record<string, unknown>;
      for (const udKey of Object.keys(ud)) {
        if (udKey === 'customer_segments' || udKey === 'ext') {
          roots.push([ud, udKey, 'user_data']);
        } else if (udKey === 'uids' || udKey === 'address') {
          const list = ud[udKey];
          if (!Array.isArray(list)) continue;
          const listPath = joinPath('user_data', udKey);
          for (let i = 0; i < list.length; i++) {
            const entry = list[i] as Record<string, unknown> | null;
            if (entry !== null && typeof entry === 'object' && entry['ext'] !== undefined) {
              roots.push([entry, 'ext', indexPath(listPath, i)]);
            }
          }
        }
      }
    }
  }
  for (let i = roots.length - 1; i >= 0; i--) {
    const [container, key, base] = roots[i]!;
    values.push((container as Record<string | number, unknown>)[key]);
    containers.push(container);
    keys.push(key);
    bases.push(base);
  }

  let redacted: string[] | undefined;
  while (values.length > 0) {
    const value = values.pop();
    const container = containers.pop()!;
    const key = keys.pop()!;
    const base = bases.pop()!;
    if (typeof value === 'string') {
      if (!mayContainEmail(value)) continue;
      const replaced = redactEmails(value);
      if (replaced === value) continue;
      const path = typeof key === 'number' ? indexPath(base, key) : joinPath(base, key);
      if (mode === 'reject') return { rejectedPath: path };
      (container as Record<string | number, unknown>)[key] = replaced;
      (redacted ??= []).push(path);
      continue;
    }
    if (typeof value !== 'object' || value === null) continue;
    const path = typeof key === 'number' ? indexPath(base, key) : joinPath(base, key);
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) {
        values.push(value[i]);
        containers.push(value);
        keys.push(i);
        bases.push(path);
      }
    } else {
      const obj = value as Record<string, unknown>;
      const objKeys = Object.keys(obj);
      for (let i = objKeys.length - 1; i >= 0; i--) {
        const k = objKeys[i]!;
        values.push(obj[k]);
        containers.push(obj);
        keys.push(k);
        bases.push(path);
      }
    }
  }
  return { redacted };
}
