/**
 * GPP (IAB Global Privacy Platform) consent strings: decoding with the IAB's own library
 * (@iabgpp/cmpapi GppModel) and the mapping of each section to opt-out signals.
 *
 * Decoding a string costs ~100 µs, so decoded results are cached by string (bounded, see
 * GPP_CACHE_ENTRIES). The same consent string is shared by many events (a US string carries no
 * per-user data; a TCF string is per user but repeats across that user's events).
 *
 * Mapping (documented section by section in docs/validation-and-privacy.md):
 * - US national and US state sections (7 usnat, 8 usca, 9 usva, ... 27 usri): SaleOptOut,
 *   SharingOptOut and TargetedAdvertisingOptOut equal to 1 (1 = opted out, 2 = did not opt out,
 *   0 = not applicable) and Gpc === true (Global Privacy Control, a legally binding opt-out of
 *   sale/sharing in the states that define it) are opt-out signals.
 * - 6 uspv1 (CCPA string): OptOutSale === 'Y'.
 * - 2 tcfeuv2: no consent for purpose 1 (store/access information on a device), 3 (create
 *   personalised ads profile) or 4 (select personalised ads).
 * - 5 tcfcav1: neither express nor implied consent for purpose 1, 3 or 4.
 */
import { GppModel, HeaderV1, Sections } from '@iabgpp/cmpapi';

export const GPP_CACHE_ENTRIES = 4096;

/** One opt-out signal: `<section name>.<field>` and the category it opts out of. */
export interface GppSignal {
  readonly signal: string;
  readonly category: OptOutCategory;
}

export type OptOutCategory =
  | 'sale'
  | 'sharing'
  | 'targeted advertising'
  | 'device storage and access'
  | 'personalised advertising';

export interface GppSectionResult {
  readonly id: number;
  readonly name: string;
  readonly signals: readonly GppSignal[];
}

export type GppDecoded =
  | {
      readonly ok: true;
      /** Section ids listed in the header, in header order (includes ids the library does not know). */
      readonly headerIds: readonly number[];
      /** Decoded and evaluated sections by id (only sections the library supports). */
      readonly sections: ReadonlyMap<number, GppSectionResult>;
    }
  | { readonly ok: false; readonly reason: string };

/** Sections 3 (header) and 4 (signal integrity) may be named in gpp_sid and are ignored. */
export const IGNORED_SECTION_IDS: ReadonlySet<number> = new Set([3, 4]);

const US_SECTION_FIELDS: ReadonlyArray<readonly [string, OptOutCategory]> = [
  ['SaleOptOut', 'sale'],
  ['SharingOptOut', 'sharing'],
  ['TargetedAdvertisingOptOut', 'targeted advertising'],
];

/** Purposes whose missing consent makes an event measurement-only, with their category. */
const TCF_PURPOSES: ReadonlyArray<readonly [number, OptOutCategory]> = [
  [1, 'device storage and access'],
  [3, 'personalised advertising'],
  [4, 'personalised advertising'],
];

function signalsOf(id: number, name: string, fields: Record<string, unknown>): GppSignal[] {
  const signals: GppSignal[] = [];
  if (id === 2) {
    const consents = fields['PurposeConsents'];
    for (const [purpose, category] of TCF_PURPOSES) {
      const given = Array.isArray(consents) && consents[purpose - 1] === true;
      if (!given) signals.push({ signal: `${name}.PurposeConsents[${purpose}]`, category });
    }
  } else if (id === 5) {
    const express = fields['PurposesExpressConsent'];
    const implied = fields['PurposesImpliedConsent'];
    for (const [purpose, category] of TCF_PURPOSES) {
      const given =
        (Array.isArray(express) && express[purpose - 1] === true) ||
        (Array.isArray(implied) && implied[purpose - 1] === true);
      if (!given) signals.push({ signal: `${name}.PurposesExpressConsent[${purpose}]`, category });
    }
  } else if (id === 6) {
    if (fields['OptOutSale'] === 'Y') signals.push({ signal: `${name}.OptOutSale`, category: 'sale' });
  } else if (id >= 7) {
    for (const [field, category] of US_SECTION_FIELDS) {
      if (fields[field] === 1) signals.push({ signal: `${name}.${field}`, category });
    }
    if (fields['Gpc'] === true) signals.push({ signal: `${name}.Gpc`, category: 'sale' });
  }
  return signals;
}

const NOT_DECODABLE = 'cannot be decoded as a GPP string (check the header and every section)';

function decodeUncached(value: string): GppDecoded {
  if (value.length === 0) return { ok: false, reason: 'is empty; omit gpp_string when there is no consent string' };
  if (value.charCodeAt(0) === 67 /* C */) {
    return { ok: false, reason: 'is a bare TCF string, not a GPP string; send it as the tcfeuv2 section of a GPP string' };
  }
  if (value.charCodeAt(0) !== 68 /* D */) return { ok: false, reason: NOT_DECODABLE };
  try {
    const tilde = value.indexOf('~');
    const header = new HeaderV1(tilde < 0 ? value : value.slice(0, tilde));
    const headerIds = (header.getFieldValue('SectionIds') as number[]).slice();
    const model = new GppModel(value);
    const sections = new Map<number, GppSectionResult>();
    for (const id of model.getSectionIds() as number[]) {
      const name = Sections.SECTION_ID_NAME_MAP.get(id);
      if (name === undefined) continue;
      // getSection() forces the lazy decoding of every field of the section: a malformed
      // section throws here, not later.
      const fields = model.getSection(name) as Record<string, unknown> | null;
      if (fields === null) continue;
      sections.set(id, { id, name, signals: signalsOf(id, name, fields) });
    }
    return { ok: true, headerIds, sections };
  } catch {
    return { ok: false, reason: NOT_DECODABLE };
  }
}

export interface GppDecoder {
  decode(value: string): GppDecoded;
}

/** A decoder with a bounded cache (the whole cache is dropped when full: O(1), no LRU bookkeeping). */
export function createGppDecoder(maxEntries = GPP_CACHE_ENTRIES): GppDecoder {
  let cache = new Map<string, GppDecoded>();
  return {
    decode(value: string): GppDecoded {
      let result = cache.get(value);
      if (result === undefined) {
        result = decodeUncached(value);
        if (cache.size >= maxEntries) cache = new Map();
        cache.set(value, result);
      }
      return result;
    },
  };
}

export interface ConsentOutcome {
  /** Section ids that signalled an opt-out, ascending. */
  readonly sections: number[];
  readonly signals: string[];
  readonly categories: OptOutCategory[];
}

/**
 * Opt-out signals of the applicable sections: those named in gpp_sid (3 and 4 ignored) or, when
 * gpp_sid is absent or empty, every section of the string. Undefined when nothing opts out.
 */
export function evaluateConsent(decoded: GppDecoded, gppSid: readonly number[] | undefined): ConsentOutcome | undefined {
  if (!decoded.ok) return undefined;
  const applicable = gppSid !== undefined && gppSid.length > 0 ? gppSid : decoded.headerIds;
  let outcome: { sections: number[]; signals: string[]; categories: OptOutCategory[] } | undefined;
  for (const id of applicable) {
    const section = decoded.sections.get(id);
    if (section === undefined || section.signals.length === 0) continue;
    outcome ??= { sections: [], signals: [], categories: [] };
    if (!outcome.sections.includes(id)) outcome.sections.push(id);
    for (const s of section.signals) {
      if (!outcome.signals.includes(s.signal)) outcome.signals.push(s.signal);
      if (!outcome.categories.includes(s.category)) outcome.categories.push(s.category);
    }
  }
  outcome?.sections.sort((a, b) => a - b);
  return outcome;
}
