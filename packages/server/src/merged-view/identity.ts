/**
 * Identity normalization and identifier extraction: pure functions of one event.
 *
 * Normalization (applied to every event before it enters the merged view):
 * - `user_data.address[]`: plain-text `city` and `state` trimmed and lowercased (inner runs of
 *   whitespace collapsed to one space); `country_code` trimmed and lowercased, the ISO 3166-1
 *   alpha-2 form ECAPI prescribes ("Lowercase only"); hashed fields lowercased; duplicate addresses
 *   dropped.
 * - `user_data.email_address`, `phone_numbers`: lowercased, duplicates dropped (a lone string is
 *   made a one-element array).
 * - `user_data.uids[]`: `source` (a domain) trimmed and lowercased, `id` lowercased when it is a
 *   SHA-256 hex digest; duplicates dropped.
 * - `user_data.customer_identifier` lowercased.
 *
 * Identifiers that link events into one identity (within a data set): the customer identifier, each
 * email hash, each phone hash, each `uids[].id` (whatever its source), and `ifa` (trimmed,
 * lowercased). Each is typed by a prefix so that equal strings of different kinds never link.
 */
import { isPlainObject, uniqueElements, type JsonObject } from './merge.js';

const HEX64 = /^[0-9a-fA-F]{64}$/;

const lowerIfString = (v: unknown) => (typeof v === 'string' ? v.toLowerCase() : v);
const plainText = (v: unknown) => (typeof v === 'string' ? v.trim().replace(/\s+/g, ' ').toLowerCase() : v);

function asArray(value: unknown): unknown[] | undefined {
  if (value === undefined || value === null) return undefined;
  return Array.isArray(value) ? value : [value];
}

function normalizeAddress(address: unknown): unknown {
  if (!isPlainObject(address)) return address;
  const out: JsonObject = { ...address };
  for (const field of ['first_name', 'last_name', 'street', 'postal_code'] as const) {
    if (field in out) out[field] = lowerIfString(out[field]);
  }
  if ('city' in out) out.city = plainText(out.city);
  if ('state' in out) out.state = plainText(out.state);
  if (typeof out.country_code === 'string') out.country_code = out.country_code.trim().toLowerCase();
  return out;
}

function normalizeUid(uid: unknown): unknown {
  if (!isPlainObject(uid)) return uid;
  const out: JsonObject = { ...uid };
  if (typeof out.source === 'string') out.source = out.source.trim().toLowerCase();
  if (typeof out.id === 'string' && HEX64.test(out.id)) out.id = out.id.toLowerCase();
  return out;
}

/** The event with its identity fields normalized; other fields are shared, not copied. */
export function normalizeEvent(event: JsonObject): JsonObject {
  const ud = event.user_data;
  if (!isPlainObject(ud)) return event;
  const out: JsonObject = { ...ud };
  if (typeof out.customer_identifier === 'string') out.customer_identifier = out.customer_identifier.toLowerCase();
  for (const field of ['email_address', 'phone_numbers'] as const) {
    const list = asArray(out[field]);
    if (list) out[field] = uniqueElements(list.map(lowerIfString));
  }
  const uids = asArray(out.uids);
  if (uids) out.uids = uniqueElements(uids.map(normalizeUid));
  const addresses = asArray(out.address);
  if (addresses) out.address = uniqueElements(addresses.map(normalizeAddress));
  return { ...event, user_data: out };
}

/** Identifiers of a (normalized) event, sorted and without repeats. Never logged. */
export function identifiersOf(event: JsonObject): string[] {
  const ud = event.user_data;
  if (!isPlainObject(ud)) return [];
  const ids = new Set<string>();
  if (typeof ud.customer_identifier === 'string' && ud.customer_identifier !== '') ids.add(`cid:${ud.customer_identifier}`);
  for (const e of asArray(ud.email_address) ?? []) if (typeof e === 'string' && e !== '') ids.add(`email:${e}`);
  for (const p of asArray(ud.phone_numbers) ?? []) if (typeof p === 'string' && p !== '') ids.add(`phone:${p}`);
  for (const u of asArray(ud.uids) ?? []) {
    if (isPlainObject(u) && typeof u.id === 'string' && u.id !== '') ids.add(`uid:${u.id}`);
  }
  if (typeof ud.ifa === 'string' && ud.ifa.trim() !== '') ids.add(`ifa:${ud.ifa.trim().toLowerCase()}`);
  return [...ids].sort();
}

/** Which identifier kinds an event carries, for the coverage analytics. */
export interface IdentifierCoverage {
  readonly email: boolean;
  readonly phone: boolean;
  readonly address: boolean;
  readonly customer_id: boolean;
  readonly ip_user_agent: boolean;
  readonly click_id: boolean;
}

export const COVERAGE_FIELDS = ['email', 'phone', 'address', 'customer_id', 'ip_user_agent', 'click_id'] as const;
export type CoverageField = (typeof COVERAGE_FIELDS)[number];

const nonEmptyString = (v: unknown) => typeof v === 'string' && v.trim() !== '';

export function coverageOf(event: JsonObject): IdentifierCoverage {
  const ud = isPlainObject(event.user_data) ? event.user_data : {};
  const emails = asArray(ud.email_address) ?? [];
  const phones = asArray(ud.phone_numbers) ?? [];
  const addresses = asArray(ud.address) ?? [];
  return {
    email: emails.some(nonEmptyString),
    phone: phones.some(nonEmptyString),
    address: addresses.some((a) => isPlainObject(a) && Object.keys(a).some((k) => k !== 'ext' && k !== 'address_type' && nonEmptyString(a[k]))),
    customer_id: nonEmptyString(ud.customer_identifier),
    ip_user_agent: nonEmptyString(ud.event_ip_address) && nonEmptyString(ud.event_user_agent),
    click_id: nonEmptyString(ud.click_id),
  };
}
