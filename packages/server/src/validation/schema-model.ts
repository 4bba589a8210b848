/**
 * Turns the ECAPI 1.0 event JSON Schema (published and loaded by @ecapi-ingest/protocol) into the
 * field descriptors the document-order walker runs on. The schema is the single
 * source of truth for field names, types and enumerations: the walker has no field list of its
 * own. Derivation fails loudly at startup on any schema keyword the walker does not implement,
 * so the walker can never silently be laxer than the published schema.
 */
import { enumText as enumTextOf, type JsonSchema } from '@ecapi-ingest/protocol';

export const KIND_STRING = 0;
export const KIND_INTEGER = 1;
export const KIND_NUMBER = 2;
export const KIND_BOOLEAN = 3;
export const KIND_OBJECT = 4;
export const KIND_ARRAY = 5;
export const KIND_EXT = 6;

/** Custom rules, attached through the $defs a field refers to (or, for a few, by field). */
export const RULE_NONE = 0;
export const RULE_SHA256 = 1;
export const RULE_CURRENCY = 2;
export const RULE_COUNTRY = 3;
export const RULE_IP = 4;
export const RULE_HTTP_URL = 5;
export const RULE_DATE = 6;
export const RULE_UTC_OFFSET = 7;
export const RULE_NON_EMPTY = 8;
export const RULE_TIMESTAMP = 9;
export const RULE_EVENT_TYPE = 10;
export const RULE_VALUE = 11;
export const RULE_GPP_STRING = 12;
export const RULE_GPP_SID = 13;

const RULE_BY_DEF: Readonly<Record<string, number>> = {
  Sha256Hex: RULE_SHA256,
  CurrencyCode: RULE_CURRENCY,
  CountryCode: RULE_COUNTRY,
  IpAddress: RULE_IP,
  HttpUrl: RULE_HTTP_URL,
  CalendarDate: RULE_DATE,
  UtcOffset: RULE_UTC_OFFSET,
};

/** Rules that depend on the field, not on its type (`Def.field`). */
const RULE_BY_FIELD: Readonly<Record<string, number>> = {
  'Event.data_set_id': RULE_NON_EMPTY,
  'Event.timestamp': RULE_TIMESTAMP,
  'Event.event_type': RULE_EVENT_TYPE,
  'Event.value': RULE_VALUE,
  'UserData.gpp_string': RULE_GPP_STRING,
  'UserData.gpp_sid': RULE_GPP_SID,
};


export interface FieldDesc {
  readonly key: string;
  readonly kind: number;
  readonly rule: number;
  readonly enumValues: ReadonlySet<unknown> | undefined;
  readonly enumText: string;
  /** KIND_OBJECT: the object's descriptor. */
  readonly object: ObjectDesc | undefined;
  /** KIND_ARRAY: the element descriptor (key '' ). */
  readonly items: FieldDesc | undefined;
  /** `an array of <itemsText>` */
  readonly itemsText: string;
}

export interface ObjectDesc {
  readonly name: string;
  readonly fields: ReadonlyMap<string, FieldDesc>;
  /** additionalProperties: false */
  readonly closed: boolean;
}

export interface EventModel {
  readonly event: ObjectDesc;
  readonly required: readonly string[];
}

const ANNOTATIONS = new Set(['description', 'title', '$comment', 'examples', 'default']);

export function buildEventModel(schema: JsonSchema): EventModel {
  const defs = (schema['$defs'] ?? {}) as Record<string, JsonSchema>;
  const objects = new Map<string, ObjectDesc>();

  const refName = (s: JsonSchema): string | undefined => {
    const ref = s['$ref'];
    if (typeof ref !== 'string') return undefined;
    const m = /^#\/\$defs\/([A-Za-z0-9_]+)$/.exec(ref);
    if (m === null || defs[m[1]!] === undefined) throw new Error(`event schema: unsupported $ref ${ref}`);
    return m[1]!;
  };

  const checkKeywords = (where: string, s: JsonSchema, allowed: readonly string[]): void => {
    for (const k of Object.keys(s)) {
      if (!ANNOTATIONS.has(k) && !allowed.includes(k)) {
        throw new Error(`event schema: keyword "${k}" at ${where} is not implemented by the validation walker`);
      }
    }
  };

  const field = (owner: string, key: string, raw: JsonSchema): FieldDesc => {
    const where = `${owner}.${key}`;
    const defName = refName(raw);
    const s = defName === undefined ? raw : defs[defName]!;
    if (defName !== undefined) checkKeywords(where, raw, ['$ref']);
    const rule = RULE_BY_FIELD[where] ?? (defName !== undefined ? RULE_BY_DEF[defName] ?? RULE_NONE : RULE_NONE);
    const type = s['type'];
    const enumList = s['enum'] as unknown[] | undefined;
    let enumText = '';
    if (enumList !== undefined) {
      // How an enum is described in `must be <text>, got "..."` (the SDK words it the same way).
      enumText = enumTextOf(enumList, defName);
    }
    const base = { key, rule, enumValues: enumList ? new Set(enumList) : undefined, enumText, object: undefined, items: undefined, itemsText: '' };
    switch (type) {
      case 'string':
        // pattern / format / anyOf(format) / minLength are implemented by the def's rule
        checkKeywords(where, s, ['type', 'enum', ...(rule !== RULE_NONE ? ['pattern', 'format', 'anyOf', 'minLength'] : [])]);
        return { ...base, kind: KIND_STRING };
      case 'integer':
        checkKeywords(where, s, ['type', 'enum', ...(rule === RULE_UTC_OFFSET ? ['minimum', 'maximum'] : [])]);
        return { ...base, kind: KIND_INTEGER };
      case 'number':
        checkKeywords(where, s, ['type']);
        return { ...base, kind: KIND_NUMBER };
      case 'boolean':
        checkKeywords(where, s, ['type']);
        return { ...base, kind: KIND_BOOLEAN };
      case 'array': {
        checkKeywords(where, s, ['type', 'items']);
        const items = field(owner, `${key}[]`, s['items'] as JsonSchema);
        const itemRef = refName(s['items'] as JsonSchema);
        const itemsText =
          items.kind === KIND_OBJECT ? `${items.object!.name.toLowerCase()} objects`
            : items.rule === RULE_SHA256 ? 'SHA-256 hex strings'
              : items.kind === KIND_INTEGER ? 'integers'
                : itemRef !== undefined ? `${itemRef} values` : 'strings';
        return { ...base, kind: KIND_ARRAY, items, itemsText };
      }
      case 'object':
        if (defName === 'Ext') {
          checkKeywords(where, s, ['type']);
          return { ...base, kind: KIND_EXT };
        }
        if (defName === undefined) throw new Error(`event schema: inline object at ${where}; use a $def`);
        return { ...base, kind: KIND_OBJECT, object: object(defName) };
      default:
        throw new Error(`event schema: unsupported type ${JSON.stringify(type)} at ${where}`);
    }
  };

  const object = (name: string): ObjectDesc => {
    const known = objects.get(name);
    if (known !== undefined) return known;
    const s = defs[name]!;
    checkKeywords(name, s, name === 'Event'
      ? ['type', 'properties', 'additionalProperties', 'required', 'dependentRequired', 'if', 'then']
      : ['type', 'properties', 'additionalProperties']);
    const ap = s['additionalProperties'];
    if (ap !== undefined && ap !== false && ap !== true) throw new Error(`event schema: additionalProperties of ${name} must be boolean`);
    const fields = new Map<string, FieldDesc>();
    const desc: ObjectDesc = { name, fields, closed: ap === false };
    objects.set(name, desc);
    for (const [key, sub] of Object.entries((s['properties'] ?? {}) as Record<string, JsonSchema>)) {
      fields.set(key, field(name, key, sub));
    }
    return desc;
  };

  const event = object('Event');
  const eventDef = defs['Event']!;
  // The conditional rules of Event (dependentRequired value -> currency_code, if event_type is
  // "custom" then custom_event) are implemented by RULE_VALUE and RULE_EVENT_TYPE; make sure the
  // schema says exactly that.
  const dependent = JSON.stringify(eventDef['dependentRequired']);
  if (dependent !== '{"value":["currency_code"]}') throw new Error(`event schema: unexpected dependentRequired ${dependent}`);
  const cond = JSON.stringify([eventDef['if'], eventDef['then']]);
  if (!cond.includes('"const":"custom"') || !cond.includes('"required":["custom_event"]')) {
    throw new Error('event schema: unexpected if/then in Event');
  }
  return { event, required: (eventDef['required'] ?? []) as string[] };
}
