/**
 * Normalization and SHA-256 hashing of personal identifiers, following the Normalization section of
 * ECAPI 1.0: lowercase, whitespace trimmed, no irrelevant formatting and no punctuation, UTF-8; phone
 * numbers in E.164 (`+` and country code, no symbols, letters or leading zeros).
 *
 * Every `normalizeX` is a pure function from what a sender has in its database to the exact string
 * that is hashed; every `hashX` is `sha256Hex(normalizeX(value))`. Both throw a NormalizationError
 * for a value that normalizes to nothing (or a phone number that cannot be read), so an empty or
 * unreadable identifier is never hashed into a meaningless digest.
 */
import { createHash } from 'node:crypto';
import { parsePhoneNumberFromString, type CountryCode } from 'libphonenumber-js';

export class NormalizationError extends Error {
  override readonly name = 'NormalizationError';
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

/** True for a 64-character lowercase hex string: what every hashed ECAPI field must be. */
export function isSha256Hex(value: string): boolean {
  return value.length === 64 && SHA256_HEX.test(value);
}

/** Lowercase hex SHA-256 of the UTF-8 bytes of `value` (no normalization). */
export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

function nonEmpty(value: string, what: string): string {
  if (value === '') throw new NormalizationError(`${what} is empty after normalization`);
  return value;
}

function text(value: unknown, what: string): string {
  if (typeof value !== 'string') throw new NormalizationError(`${what} must be a string`);
  return value.normalize('NFC');
}

/** Unicode punctuation and symbols ("O'Brien" -> "obrien", "St." -> "st"). */
const PUNCTUATION = /[\p{P}\p{S}]/gu;
const WHITESPACE = /\s+/gu;

/** Lowercase, punctuation removed, whitespace runs collapsed to one space, trimmed. */
function plainText(value: unknown, what: string): string {
  return text(value, what).toLowerCase().replace(PUNCTUATION, '').replace(WHITESPACE, ' ').trim();
}

/** Email: trimmed and lowercased (` User@example.com ` -> `user@example.com`). */
export function normalizeEmail(value: string): string {
  const email = text(value, 'email address').trim().toLowerCase();
  nonEmpty(email, 'email address');
  if (!email.includes('@') || /\s/u.test(email)) throw new NormalizationError('email address is not an address (expected local@domain)');
  return email;
}

export interface PhoneOptions {
  /**
   * ISO 3166-1 alpha-2 region (`US`, `GB`, …) for numbers written without a country code
   * (`(212) 555-0000`). Without it such a number is refused: ECAPI requires the country code.
   */
  readonly defaultRegion?: string | undefined;
}

/** Phone: E.164, `+` then country code and digits (`+1 212-555-0000` -> `+12125550000`). */
export function normalizePhone(value: string, options: PhoneOptions = {}): string {
  const raw = text(value, 'phone number').trim();
  nonEmpty(raw, 'phone number');
  const region = options.defaultRegion?.toUpperCase() as CountryCode | undefined;
  // "00" is the international call prefix in most of the world: read it as "+".
  const input = raw.startsWith('00') ? `+${raw.slice(2)}` : raw;
  const parsed = parsePhoneNumberFromString(input, region ? { defaultCountry: region } : {});
  if (!parsed) {
    throw new NormalizationError(
      input.startsWith('+') || region
        ? 'phone number could not be read as an international number'
        : 'phone number has no country code: write it as +<country code><number> or set a default region',
    );
  }
  if (!parsed.isPossible()) throw new NormalizationError('phone number has the wrong number of digits for its country');
  return parsed.number;
}

/** First or last name: lowercase, no punctuation, single spaces (` Jane ` -> `jane`, `O'Brien` -> `obrien`). */
export function normalizeName(value: string): string {
  return nonEmpty(plainText(value, 'name'), 'name');
}

/** Street address: lowercase, no punctuation, single spaces (`12 Main St.` -> `12 main st`). */
export function normalizeStreet(value: string): string {
  return nonEmpty(plainText(value, 'street'), 'street');
}

/** City (sent as plain text, not hashed): lowercase, no punctuation, single spaces. */
export function normalizeCity(value: string): string {
  return nonEmpty(plainText(value, 'city'), 'city');
}

/** State or region (sent as plain text, not hashed): lowercase, no punctuation, single spaces. */
export function normalizeState(value: string): string {
  return nonEmpty(plainText(value, 'state'), 'state');
}

/** Country code (sent as plain text, not hashed): two letters, lowercase (` US ` -> `us`). */
export function normalizeCountryCode(value: string): string {
  const code = plainText(value, 'country code').replace(WHITESPACE, '');
  if (!/^[a-z]{2}$/.test(code)) throw new NormalizationError('country code must be an ISO 3166-1 alpha-2 code (two letters)');
  return code;
}

/**
 * Postal code: lowercase, trimmed, punctuation removed, single spaces. A US ZIP+4 (`12345-6789`)
 * becomes its 5-digit ZIP, as ECAPI asks for US codes. Other countries keep their format (UK:
 * `SW1A 1AA` -> `sw1a 1aa`).
 */
export function normalizePostalCode(value: string): string {
  const raw = text(value, 'postal code').trim();
  const zip = /^(\d{5})-\d{4}$/.exec(raw);
  if (zip) return zip[1]!;
  return nonEmpty(plainText(raw, 'postal code'), 'postal code');
}

/** Gender: trimmed and lowercased (` Female ` -> `female`). */
export function normalizeGender(value: string): string {
  return nonEmpty(text(value, 'gender').trim().toLowerCase(), 'gender');
}

/** Customer identifier (and uid ids): trimmed and lowercased (`User123` -> `user123`). */
export function normalizeCustomerId(value: string): string {
  return nonEmpty(text(value, 'customer identifier').trim().toLowerCase(), 'customer identifier');
}

export const hashEmail = (value: string): string => sha256Hex(normalizeEmail(value));
export const hashPhone = (value: string, options?: PhoneOptions): string => sha256Hex(normalizePhone(value, options));
export const hashName = (value: string): string => sha256Hex(normalizeName(value));
export const hashStreet = (value: string): string => sha256Hex(normalizeStreet(value));
export const hashPostalCode = (value: string): string => sha256Hex(normalizePostalCode(value));
export const hashGender = (value: string): string => sha256Hex(normalizeGender(value));
export const hashCustomerId = (value: string): string => sha256Hex(normalizeCustomerId(value));
