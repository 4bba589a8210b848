/**
 * The format rules that JSON Schema cannot express (or that need a sender-actionable reason).
 * Each function returns undefined when the value is fine, otherwise the <reason> of
 * `invalid field <field>: <reason>`. Reasons never echo identifier or free-text values.
 */
import { isIP } from 'node:net';
import { ISO_3166_ALPHA2, ISO_3166_ALPHA2_UPPER_OR_LOWER, ISO_4217_CODES } from './iso-codes.js';

/** 1 for the char codes of 0-9 and a-f. Indexed by a UTF-16 code unit (any value 0-65535). */
const HEX_LOWER = new Uint8Array(65536);
for (const c of '0123456789abcdef') HEX_LOWER[c.charCodeAt(0)] = 1;

/**
 * 64 lowercase hex characters. Table lookups four characters at a time: about 3-4x faster than
 * /^[0-9a-f]{64}$/ (this runs ~13 times for a full event).
 */
export function isSha256Hex(value: string): boolean {
  if (value.length !== 64) return false;
  const t = HEX_LOWER;
  for (let i = 0; i < 64; i += 4) {
    if ((t[value.charCodeAt(i)]! & t[value.charCodeAt(i + 1)]! & t[value.charCodeAt(i + 2)]! & t[value.charCodeAt(i + 3)]!) === 0) {
      return false;
    }
  }
  return true;
}

/** Seconds from 1e11 up (year 5138+) are read as milliseconds; from 1e14 up as plainly out of range. */
const MILLIS_FLOOR = 1e11;
const MILLIS_CEILING = 1e14;
export const MAX_FUTURE_SKEW_SECONDS = 300;

export function timestampReason(ts: number, nowSeconds: number, maxAgeSeconds: number): string | undefined {
  if (ts >= MILLIS_FLOOR && ts < MILLIS_CEILING) return 'looks like milliseconds; send unix seconds';
  if (ts > nowSeconds + MAX_FUTURE_SKEW_SECONDS) {
    return 'is more than 5 minutes in the future; send the event time in unix seconds (UTC)';
  }
  if (ts < nowSeconds - maxAgeSeconds) {
    return `is older than this data set accepts (maximum event age ${describeSeconds(maxAgeSeconds)})`;
  }
  return undefined;
}

function describeSeconds(seconds: number): string {
  if (seconds % 86400 === 0) return `${seconds / 86400} days`;
  if (seconds % 3600 === 0) return `${seconds / 3600} hours`;
  return `${seconds} seconds`;
}

export function currencyReason(code: string): string | undefined {
  if (ISO_4217_CODES.has(code)) return undefined;
  if (code.length === 3) {
    const upper = code.toUpperCase();
    if (ISO_4217_CODES.has(upper)) return `ISO 4217 codes are uppercase: send "${upper}"`;
  }
  return 'must be an active ISO 4217 currency code, e.g. "USD"';
}

export function countryReason(code: string): string | undefined {
  if (ISO_3166_ALPHA2_UPPER_OR_LOWER.has(code)) return undefined;
  if (code.length === 2) {
    const upper = code.toUpperCase();
    if (ISO_3166_ALPHA2.has(upper)) return undefined;
    if (upper === 'UK') return 'the ISO 3166-1 alpha-2 code of the United Kingdom is "gb"';
  }
  return 'must be an ISO 3166-1 alpha-2 country code, e.g. "us"';
}

export function ipReason(ip: string): string | undefined {
  if (isIP(ip) === 0) return 'must be a valid IPv4 or IPv6 address';
  if (ip.includes('%')) return 'must be an IPv6 address without a zone index (%...)';
  return undefined;
}

export function httpUrlReason(url: string): string | undefined {
  const head = url.slice(0, 8).toLowerCase();
  const authorityStart = head.startsWith('https://') ? 8 : head.startsWith('http://') ? 7 : -1;
  const first = authorityStart < 0 ? '' : url.charAt(authorityStart);
  if (first === '' || first === '/' || first === '?' || first === '#' || !URL.canParse(url)) {
    return 'must be an absolute http(s) URL, e.g. "https://shop.example/cart"';
  }
  return undefined;
}

function digits(s: string, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return -1;
    n = n * 10 + c;
  }
  return n;
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** YYYYMMDD or YYYY-MM-DD and a real calendar date (proleptic Gregorian, years 0001-9999). */
export function calendarDateReason(s: string): string | undefined {
  let y: number;
  let m: number;
  let d: number;
  if (s.length === 8) {
    y = digits(s, 0, 4);
    m = digits(s, 4, 6);
    d = digits(s, 6, 8);
  } else if (s.length === 10 && s.charCodeAt(4) === 45 && s.charCodeAt(7) === 45) {
    y = digits(s, 0, 4);
    m = digits(s, 5, 7);
    d = digits(s, 8, 10);
  } else {
    return 'must be a date as YYYYMMDD or YYYY-MM-DD';
  }
  if (y < 0 || m < 0 || d < 0) return 'must be a date as YYYYMMDD or YYYY-MM-DD';
  const leap = (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
  const maxDay = m === 2 && leap ? 29 : DAYS_IN_MONTH[m - 1];
  if (y === 0 || m < 1 || m > 12 || maxDay === undefined || d < 1 || d > maxDay) return 'is not a real calendar date';
  return undefined;
}

export const UTC_OFFSET_MIN = -720;
export const UTC_OFFSET_MAX = 840;
export function utcOffsetReason(minutes: number): string | undefined {
  if (minutes < UTC_OFFSET_MIN || minutes > UTC_OFFSET_MAX) {
    return 'must be minutes from UTC between -720 and 840';
  }
  return undefined;
}
