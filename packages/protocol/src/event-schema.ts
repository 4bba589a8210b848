/**
 * The ECAPI 1.0 event JSON Schema this package publishes (schema/ecapi-event.schema.json), loaded
 * relative to this module: the server validates with it, the SDK validates with it and generates
 * its types from it. Relative, not through the package name, so the loader also works where the
 * SDK carries this package inside its own files (see packages/client/scripts/bundle-protocol.ts).
 */
import { readFileSync } from 'node:fs';

export type JsonSchema = Record<string, unknown>;

/** This module is dist/src/event-schema.js; the schema is schema/ at the package root. */
export const EVENT_SCHEMA_URL = new URL('../../schema/ecapi-event.schema.json', import.meta.url);

/** The published event schema, parsed (a fresh object on every call: callers may change it). */
export function loadEventSchema(): JsonSchema {
  return JSON.parse(readFileSync(EVENT_SCHEMA_URL, 'utf8')) as JsonSchema;
}
