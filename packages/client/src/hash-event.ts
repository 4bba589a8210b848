/**
 * hashEvent(event): the whole event with every plaintext personal identifier normalized and
 * replaced by its SHA-256 hex digest, and the plain-text address fields (city, state, country code)
 * normalized. The input is never modified; only the objects on the path to a changed field are
 * copied.
 *
 * Hashed fields: user_data.customer_identifier, email_address[], phone_numbers[], gender,
 * uids[].id, address[].first_name, last_name, street, postal_code. A single string where the schema
 * wants an array (email_address, phone_numbers, address) is accepted and wrapped.
 *
 * A value that is already a 64-char lowercase hex digest is kept as it is by default (it cannot be
 * told apart from a hash, so senders can mix hashed and plaintext sources); `alreadyHashed:
 * 'refuse'` throws instead, for pipelines that must only ever see plaintext.
 */
import type { Address, EcapiEvent, Uid, UserData } from './event-types.generated.js';
import {
  NormalizationError,
  isSha256Hex,
  normalizeCity,
  normalizeCountryCode,
  normalizeCustomerId,
  normalizeEmail,
  normalizeGender,
  normalizeName,
  normalizePhone,
  normalizePostalCode,
  normalizeState,
  normalizeStreet,
  sha256Hex,
} from './normalize.js';

export interface HashOptions {
  /** Region for phone numbers without a country code, like `US` (see normalizePhone). */
  readonly defaultRegion?: string | undefined;
  /** What to do with a value that already is a SHA-256 hex digest: keep it (default) or throw. */
  readonly alreadyHashed?: 'keep' | 'refuse';
}

/** An event whose identifiers may still be plaintext; single strings are accepted for the arrays. */
export type PlaintextEvent = Omit<EcapiEvent, 'user_data'> & { user_data?: PlaintextUserData };
export type PlaintextUserData = Omit<UserData, 'email_address' | 'phone_numbers' | 'address'> & {
  email_address?: string | string[];
  phone_numbers?: string | string[];
  address?: Address | Address[];
};

type Normalizer = (value: string) => string;

function hashValue(value: unknown, path: string, normalize: Normalizer, options: HashOptions): string {
  if (typeof value !== 'string') throw new NormalizationError(`${path} must be a string`);
  if (isSha256Hex(value)) {
    if (options.alreadyHashed === 'refuse') throw new NormalizationError(`${path} is already a SHA-256 digest; pass plaintext`);
    return value;
  }
  try {
    return sha256Hex(normalize(value));
  } catch (error) {
    if (error instanceof NormalizationError) throw new NormalizationError(`${path}: ${error.message}`, { cause: error });
    throw error;
  }
}

function plain(value: unknown, path: string, normalize: Normalizer): string {
  if (typeof value !== 'string') throw new NormalizationError(`${path} must be a string`);
  try {
    return normalize(value);
  } catch (error) {
    if (error instanceof NormalizationError) throw new NormalizationError(`${path}: ${error.message}`, { cause: error });
    throw error;
  }
}

const asArray = <T>(value: T | T[]): T[] => (Array.isArray(value) ? value : [value]);

/** Throws a NormalizationError naming the field (never its value) when an identifier cannot be normalized. */
export function hashEvent(event: PlaintextEvent | EcapiEvent, options: HashOptions = {}): EcapiEvent {
  const input = event.user_data as PlaintextUserData | undefined;
  if (input === undefined || input === null || typeof input !== 'object') return event as EcapiEvent;
  const ud: Record<string, unknown> = { ...input };
  const p = 'user_data';
  if (ud.customer_identifier !== undefined) ud.customer_identifier = hashValue(ud.customer_identifier, `${p}.customer_identifier`, normalizeCustomerId, options);
  if (ud.gender !== undefined) ud.gender = hashValue(ud.gender, `${p}.gender`, normalizeGender, options);
  if (ud.email_address !== undefined) {
    ud.email_address = asArray(ud.email_address).map((v, i) => hashValue(v, `${p}.email_address[${i}]`, normalizeEmail, options));
  }
  if (ud.phone_numbers !== undefined) {
    const phone: Normalizer = (v) => normalizePhone(v, { defaultRegion: options.defaultRegion });
    ud.phone_numbers = asArray(ud.phone_numbers).map((v, i) => hashValue(v, `${p}.phone_numbers[${i}]`, phone, options));
  }
  if (Array.isArray(ud.uids)) {
    ud.uids = (ud.uids as Uid[]).map((uid, i) =>
      uid && typeof uid === 'object' && uid.id !== undefined ? { ...uid, id: hashValue(uid.id, `${p}.uids[${i}].id`, normalizeCustomerId, options) } : uid,
    );
  }
  if (ud.address !== undefined) {
    ud.address = asArray(ud.address as Address | Address[]).map((address, i) => {
      if (!address || typeof address !== 'object') return address;
      const a: Record<string, unknown> = { ...address };
      const at = `${p}.address[${i}]`;
      if (a.first_name !== undefined) a.first_name = hashValue(a.first_name, `${at}.first_name`, normalizeName, options);
      if (a.last_name !== undefined) a.last_name = hashValue(a.last_name, `${at}.last_name`, normalizeName, options);
      if (a.street !== undefined) a.street = hashValue(a.street, `${at}.street`, normalizeStreet, options);
      if (a.postal_code !== undefined) a.postal_code = hashValue(a.postal_code, `${at}.postal_code`, normalizePostalCode, options);
      if (a.city !== undefined) a.city = plain(a.city, `${at}.city`, normalizeCity);
      if (a.state !== undefined) a.state = plain(a.state, `${at}.state`, normalizeState);
      if (a.country_code !== undefined) a.country_code = plain(a.country_code, `${at}.country_code`, normalizeCountryCode);
      return a as Address;
    });
  }
  return { ...event, user_data: ud as UserData } as EcapiEvent;
}
