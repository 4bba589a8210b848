/**
 * How a value outside a schema enumeration is reported, once, for the server's validation walker
 * and the SDK's local validation: `event_type must be one of the ECAPI 1.0 event types, got "purchse"`.
 * Both sides name the field, what it must be, and the value received (cut to 40 characters), so a
 * sender reads the same sentence whether the event was refused locally or by the service.
 */

/** Longest string value echoed back in a message (longer ones are cut, with `…`). */
export const MAX_ECHOED_ENUM_VALUE = 40;

/** Enumerations too long to list in a message, described by their schema definition's name. */
const ENUM_TEXT_BY_DEF: Readonly<Record<string, string>> = {
  EventType: 'one of the ECAPI 1.0 event types',
  AgeRange: 'an integer from 1 to 13 (ECAPI age_range)',
};

/** What a value of the enumeration must be: `one of "a", "b"`, or the definition's description. */
export function enumText(values: readonly unknown[], defName?: string): string {
  return (defName !== undefined ? ENUM_TEXT_BY_DEF[defName] : undefined) ?? `one of ${values.map((v) => JSON.stringify(v)).join(', ')}`;
}

/** A received value as echoed in a message: a string quoted and cut, anything else as text. */
export function echoValue(value: unknown): string {
  if (typeof value === 'string') {
    return JSON.stringify(value.length > MAX_ECHOED_ENUM_VALUE ? `${value.slice(0, MAX_ECHOED_ENUM_VALUE)}…` : value);
  }
  return String(value);
}

/** The detail of a SCHEMA rejection for a value outside its enumeration. */
export function enumMismatch(path: string, text: string, value: unknown): string {
  return `${path} must be ${text}, got ${echoValue(value)}`;
}
