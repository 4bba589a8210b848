/**
 * The document-order walker: one pass over the event that checks every field (type, enum,
 * unknown members, hash rule, formats, required and conditional rules), removes optional
 * members whose value is null, and stops at the first problem, which it returns as the
 * per-event error, `{code, message}` (only a rejected event allocates it). Field knowledge comes from the JSON Schema (schema-model.ts).
 *
 * Order of problems (see docs/validation-and-privacy.md):
 * 1. the event must be an object;
 * 2. absent required fields, in the order data_set_id, timestamp, event_type;
 * 3. every present member in the order its key appears in the event (recursing into
 *    user_data, its arrays, properties and items in place), each member checked for type, then
 *    enumeration, then its format/hash rule. The conditional requirements are checked at the
 *    position of the member that triggers them: `currency_code` at `value`, `custom_event` at
 *    `event_type`.
 */
import type { EventRejection } from '../events/event-outcome.js';
import { EventErrors } from '../errors.js';
import type { GppDecoded, GppDecoder } from '../privacy/gpp.js';
import { IGNORED_SECTION_IDS } from '../privacy/gpp.js';
import {
  calendarDateReason,
  countryReason,
  currencyReason,
  httpUrlReason,
  ipReason,
  isSha256Hex,
  timestampReason,
  utcOffsetReason,
} from './formats.js';
import { enumMismatch, indexPath, joinPath } from '@ecapi-ingest/protocol';
import {
  KIND_ARRAY, KIND_BOOLEAN, KIND_EXT, KIND_INTEGER, KIND_NUMBER, KIND_OBJECT, KIND_STRING,
  RULE_COUNTRY, RULE_CURRENCY, RULE_DATE, RULE_EVENT_TYPE, RULE_GPP_SID, RULE_GPP_STRING, RULE_HTTP_URL,
  RULE_IP, RULE_NON_EMPTY, RULE_NONE, RULE_SHA256, RULE_TIMESTAMP, RULE_UTC_OFFSET, RULE_VALUE,
} from './schema-model.js';
import type { EventModel, FieldDesc, ObjectDesc } from './schema-model.js';

function schemaError(detail: string): EventRejection {
  return EventErrors.SCHEMA.error(detail);
}
function invalid(path: string, reason: string): EventRejection {
  return EventErrors.INVALID_FIELD.error(path, reason);
}


function typeText(kind: number): string {
  switch (kind) {
    case KIND_STRING: return 'a string';
    case KIND_INTEGER: return 'an integer';
    case KIND_NUMBER: return 'a finite number';
    case KIND_BOOLEAN: return 'true or false';
    default: return 'an object';
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** What the walk learnt that the privacy policy needs. */
export interface WalkFindings {
  gpp: GppDecoded | undefined;
}

export class EventWalker {
  private nowSeconds = 0;
  private maxAgeSeconds = 0;
  private findings: WalkFindings = { gpp: undefined };

  constructor(
    private readonly model: EventModel,
    private readonly gppDecoder: GppDecoder,
  ) {}

  /** Undefined when the event is valid (nulls removed in place), else the one error. */
  walk(event: unknown, nowSeconds: number, maxAgeSeconds: number, findings: WalkFindings): EventRejection | undefined {
    if (!isPlainObject(event)) return schemaError('event must be a JSON object');
    this.nowSeconds = nowSeconds;
    this.maxAgeSeconds = maxAgeSeconds;
    this.findings = findings;
    for (const field of this.model.required) {
      if (event[field] == null) return EventErrors.MISSING_FIELD.error(field);
    }
    return this.walkObject(event, this.model.event, '');
  }

  /**
   * Fast path, only for events Ajv has accepted (types, enums, members and required fields are
   * known to be right, and no known member is null): true when no custom rule fails. Written out
   * field by field with named property access (monomorphic on JSON.parse output, several times
   * faster than the generic walk) and in no particular order: when it finds a problem the caller
   * runs walk() to report the first one in document order. The table-driven tests run every
   * case through check(), i.e. through this path first, so a rule missing here fails them.
   */
  rulesPass(event: Record<string, unknown>, nowSeconds: number, maxAgeSeconds: number, findings: WalkFindings): boolean {
    const e = event as unknown as FastEvent;
    if (e.data_set_id.length === 0) return false;
    if (timestampReason(e.timestamp, nowSeconds, maxAgeSeconds) !== undefined) return false;
    if (e.event_type === 'custom' && (e.custom_event === undefined || e.custom_event === '')) return false;
    if (e.value !== undefined && e.currency_code === undefined) return false;
    if (e.currency_code !== undefined && currencyReason(e.currency_code) !== undefined) return false;
    const ud = e.user_data;
    if (ud !== undefined) {
      if (ud.customer_identifier !== undefined && !isSha256Hex(ud.customer_identifier)) return false;
      if (ud.uids !== undefined) {
        for (let i = 0; i < ud.uids.length; i++) {
          const id = ud.uids[i]!.id;
          if (id !== undefined && !isSha256Hex(id)) return false;
        }
      }
      if (ud.email_address !== undefined && !allHashed(ud.email_address)) return false;
      if (ud.phone_numbers !== undefined && !allHashed(ud.phone_numbers)) return false;
      if (ud.address !== undefined) {
        for (let i = 0; i < ud.address.length; i++) {
          const a = ud.address[i]!;
          if (a.first_name !== undefined && !isSha256Hex(a.first_name)) return false;
          if (a.last_name !== undefined && !isSha256Hex(a.last_name)) return false;
          if (a.street !== undefined && !isSha256Hex(a.street)) return false;
          if (a.postal_code !== undefined && !isSha256Hex(a.postal_code)) return false;
          if (a.country_code !== undefined && countryReason(a.country_code) !== undefined) return false;
        }
      }
      if (ud.gender !== undefined && !isSha256Hex(ud.gender)) return false;
      if (ud.utcoffset !== undefined && utcOffsetReason(ud.utcoffset) !== undefined) return false;
      if (ud.event_ip_address !== undefined && ipReason(ud.event_ip_address) !== undefined) return false;
      if (ud.landing_ip_address !== undefined && ipReason(ud.landing_ip_address) !== undefined) return false;
      if (ud.gpp_string !== undefined) {
        const decoded = this.gppDecoder.decode(ud.gpp_string);
        if (!decoded.ok) return false;
        findings.gpp = decoded;
      }
      if (ud.gpp_sid !== undefined) {
        this.findings = findings;
        if (this.gppSid(ud.gpp_sid, '', ud as unknown as Record<string, unknown>) !== undefined) return false;
      }
    }
    const p = e.properties;
    if (p !== undefined) {
      if (p.page_url !== undefined && httpUrlReason(p.page_url) !== undefined) return false;
      if (p.arrival_date !== undefined && calendarDateReason(p.arrival_date) !== undefined) return false;
      if (p.departure_date !== undefined && calendarDateReason(p.departure_date) !== undefined) return false;
      if (p.lease_start_date !== undefined && calendarDateReason(p.lease_start_date) !== undefined) return false;
      if (p.lease_end_date !== undefined && calendarDateReason(p.lease_end_date) !== undefined) return false;
    }
    return true;
  }

  private walkObject(obj: Record<string, unknown>, desc: ObjectDesc, base: string): EventRejection | undefined {
    const keys = Object.keys(obj);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const f = desc.fields.get(key);
      if (f === undefined) {
        if (desc.closed) return schemaError(`unknown field ${joinPath(base, key)}`);
        continue; // open object (properties): unknown members are accepted unchanged
      }
      const value = obj[key];
      if (value === null) {
        delete obj[key]; // null on an optional member means absent
        continue;
      }
      const error = this.checkValue(value, f, base, key, obj);
      if (error !== undefined) return error;
    }
    return undefined;
  }

  /**
   * Checks one value. `key` is the member name, or the index for array elements; the path is
   * only built when there is something to report.
   */
  private checkValue(value: unknown, f: FieldDesc, base: string, key: string | number, owner: Record<string, unknown> | undefined): EventRejection | undefined {
    switch (f.kind) {
      case KIND_STRING: {
        if (typeof value !== 'string') return this.typeError(f, base, key);
        if (f.enumValues !== undefined && !f.enumValues.has(value)) return this.enumError(f, base, key, value);
        if (f.rule !== RULE_NONE) return this.stringRule(value, f, base, key, owner);
        return undefined;
      }
      case KIND_INTEGER: {
        if (typeof value !== 'number' || !Number.isInteger(value)) return this.typeError(f, base, key);
        if (f.enumValues !== undefined && !f.enumValues.has(value)) return this.enumError(f, base, key, value);
        if (f.rule === RULE_TIMESTAMP) {
          const reason = timestampReason(value, this.nowSeconds, this.maxAgeSeconds);
          return reason === undefined ? undefined : invalid(path(base, key), reason);
        }
        if (f.rule === RULE_UTC_OFFSET) {
          const reason = utcOffsetReason(value);
          return reason === undefined ? undefined : invalid(path(base, key), reason);
        }
        return undefined;
      }
      case KIND_NUMBER: {
        if (typeof value !== 'number' || !Number.isFinite(value)) return this.typeError(f, base, key);
        if (f.rule === RULE_VALUE && owner !== undefined && owner['currency_code'] == null) {
          return EventErrors.MISSING_FIELD.error('currency_code');
        }
        return undefined;
      }
      case KIND_BOOLEAN:
        return typeof value === 'boolean' ? undefined : this.typeError(f, base, key);
      case KIND_EXT:
        return isPlainObject(value) ? undefined : this.typeError(f, base, key);
      case KIND_OBJECT:
        if (!isPlainObject(value)) return this.typeError(f, base, key);
        return this.walkObject(value, f.object!, path(base, key));
      case KIND_ARRAY: {
        if (!Array.isArray(value)) return schemaError(`${path(base, key)} must be an array of ${f.itemsText}`);
        const items = f.items!;
        const arrayPath = path(base, key);
        for (let i = 0; i < value.length; i++) {
          const error = this.checkValue(value[i], items, arrayPath, i, undefined);
          if (error !== undefined) return error;
        }
        if (f.rule === RULE_GPP_SID) return this.gppSid(value as number[], arrayPath, owner!);
        return undefined;
      }
      default:
        return undefined;
    }
  }

  private typeError(f: FieldDesc, base: string, key: string | number): EventRejection {
    if (f.kind === KIND_OBJECT) return schemaError(`${path(base, key)} must be an object`);
    if (f.kind === KIND_INTEGER && f.enumValues !== undefined) return schemaError(`${path(base, key)} must be ${f.enumText}`);
    return schemaError(`${path(base, key)} must be ${typeText(f.kind)}`);
  }

  private enumError(f: FieldDesc, base: string, key: string | number, value: unknown): EventRejection {
    return schemaError(enumMismatch(path(base, key), f.enumText, value));
  }

  private stringRule(value: string, f: FieldDesc, base: string, key: string | number, owner: Record<string, unknown> | undefined): EventRejection | undefined {
    let reason: string | undefined;
    switch (f.rule) {
      case RULE_SHA256:
        return isSha256Hex(value) ? undefined : EventErrors.NOT_HASHED.error(path(base, key));
      case RULE_CURRENCY: reason = currencyReason(value); break;
      case RULE_COUNTRY: reason = countryReason(value); break;
      case RULE_IP: reason = ipReason(value); break;
      case RULE_HTTP_URL: reason = httpUrlReason(value); break;
      case RULE_DATE: reason = calendarDateReason(value); break;
      case RULE_NON_EMPTY:
        if (value.length === 0) reason = 'must be a non-empty string';
        break;
      case RULE_EVENT_TYPE:
        if (value === 'custom' && owner !== undefined) {
          const customEvent = owner['custom_event'];
          if (customEvent == null) return EventErrors.MISSING_FIELD.error('custom_event');
          if (customEvent === '') return invalid('custom_event', 'must be a non-empty string when event_type is "custom"');
        }
        return undefined;
      case RULE_GPP_STRING: {
        const decoded = this.gppDecoder.decode(value);
        if (!decoded.ok) return invalid(path(base, key), decoded.reason);
        this.findings.gpp = decoded;
        return undefined;
      }
      default:
        return undefined;
    }
    return reason === undefined ? undefined : invalid(path(base, key), reason);
  }

  /** Every gpp_sid must name a section of gpp_string (3 header and 4 signal integrity excepted). */
  private gppSid(sids: readonly number[], sidPath: string, userData: Record<string, unknown>): EventRejection | undefined {
    const gppString = userData['gpp_string'];
    if (gppString == null) return invalid(sidPath, 'requires user_data.gpp_string');
    if (typeof gppString !== 'string') return undefined; // reported at gpp_string
    const decoded = this.gppDecoder.decode(gppString);
    if (!decoded.ok) return undefined; // reported at gpp_string
    for (let i = 0; i < sids.length; i++) {
      const sid = sids[i]!;
      if (IGNORED_SECTION_IDS.has(sid) || decoded.headerIds.includes(sid)) continue;
      const has = decoded.headerIds.length === 0 ? 'it has no sections' : `it has sections ${decoded.headerIds.join(', ')}`;
      return invalid(indexPath(sidPath, i), `section ${sid} is not in user_data.gpp_string (${has})`);
    }
    return undefined;
  }
}

function allHashed(list: readonly string[]): boolean {
  for (let i = 0; i < list.length; i++) if (!isSha256Hex(list[i]!)) return false;
  return true;
}

/** The shape Ajv has guaranteed when the fast path runs (only the members with rules). */
interface FastEvent {
  data_set_id: string;
  timestamp: number;
  event_type: string;
  custom_event?: string;
  value?: number;
  currency_code?: string;
  user_data?: {
    customer_identifier?: string;
    uids?: { id?: string }[];
    email_address?: string[];
    phone_numbers?: string[];
    address?: { first_name?: string; last_name?: string; street?: string; postal_code?: string; country_code?: string }[];
    gender?: string;
    utcoffset?: number;
    event_ip_address?: string;
    landing_ip_address?: string;
    gpp_string?: string;
    gpp_sid?: number[];
  };
  properties?: {
    page_url?: string;
    arrival_date?: string;
    departure_date?: string;
    lease_start_date?: string;
    lease_end_date?: string;
  };
}

function path(base: string, key: string | number): string {
  return typeof key === 'number' ? indexPath(base, key) : joinPath(base, key);
}
