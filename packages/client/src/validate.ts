/**
 * Sender-side validation against the same ECAPI 1.0 JSON Schema the server uses (published in
 * @ecapi-ingest/protocol), compiled once with Ajv's draft 2020-12 build (pure JavaScript). It catches
 * mistakes without a round trip (a missing field, a wrong type, an unknown enum value, a plaintext
 * identifier where a SHA-256 digest belongs) and words them like the service does.
 *
 * The service additionally checks what JSON Schema cannot express (timestamp window, active ISO
 * currency and country codes, GPP strings, calendar dates); those come back in its per-event errors.
 */
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ErrorObject, ValidateFunction } from 'ajv';

export const SCHEMA_SPECIFIER = '@ecapi-ingest/protocol/schema/ecapi-event.schema.json';

/** The published ECAPI 1.0 event schema, as parsed JSON. */
export function loadEventSchema(): Record<string, unknown> {
  return JSON.parse(readFileSync(createRequire(import.meta.url).resolve(SCHEMA_SPECIFIER), 'utf8')) as Record<string, unknown>;
}

let compiled: ValidateFunction | undefined;

function validator(): ValidateFunction {
  if (!compiled) {
    const ajv = new Ajv2020({ allErrors: false, strict: true });
    ajv.addFormat('ipv4', { type: 'string', validate: (s: string) => isIP(s) === 4 });
    ajv.addFormat('ipv6', { type: 'string', validate: (s: string) => isIP(s) === 6 });
    compiled = ajv.compile(loadEventSchema());
  }
  return compiled;
}

/** `/user_data/email_address/0` -> `user_data.email_address[0]`. */
function fieldPath(pointer: string, child?: string): string {
  const parts = pointer === '' ? [] : pointer.slice(1).split('/').map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (child !== undefined) parts.push(child);
  let out = '';
  for (const p of parts) out += /^\d+$/.test(p) ? `[${p}]` : out === '' ? p : `.${p}`;
  return out;
}

function message(error: ErrorObject): string {
  const params = error.params as Record<string, unknown>;
  const at = fieldPath(error.instancePath);
  switch (error.keyword) {
    case 'required':
    case 'dependentRequired':
      return `missing required field: ${fieldPath(error.instancePath, params.missingProperty as string)}`;
    case 'pattern':
      if (error.schemaPath.includes('/Sha256Hex/')) return `hashed field ${at} is not a 64-char lowercase hex sha256`;
      return `invalid field ${at}: must match ${String(params.pattern)}`;
    case 'format':
      if (error.schemaPath.includes('/IpAddress/')) return `invalid field ${at}: must be a valid IPv4 or IPv6 address`;
      return `invalid field ${at}: must be a valid ${String(params.format)}`;
    case 'minLength':
      return `invalid field ${at}: must not be empty`;
    case 'additionalProperties':
      return `schema validation failed: unknown field ${fieldPath(error.instancePath, String(params.additionalProperty))}`;
    case 'enum': {
      const allowed = params.allowedValues as unknown[];
      return `schema validation failed: ${at} must be one of ${allowed.length > 12 ? `the ${allowed.length} values of the ECAPI 1.0 schema` : allowed.map((v) => JSON.stringify(v)).join(', ')}`;
    }
    case 'type':
      return at === '' ? 'schema validation failed: event must be a JSON object' : `schema validation failed: ${at} must be ${String(params.type)}`;
    default:
      return `schema validation failed: ${at === '' ? 'event' : at} ${error.message ?? error.keyword}`;
  }
}

/**
 * Undefined when the event passes the schema, otherwise its first problem in the service's
 * per-event message shapes (`missing required field: …`, `hashed field … is not a 64-char lowercase
 * hex sha256`, `schema validation failed: …`).
 */
export function validateEvent(event: unknown): string | undefined {
  const validate = validator();
  if (validate(event)) return undefined;
  const error = validate.errors?.[0];
  return error ? message(error) : 'schema validation failed';
}
