/**
 * Sender-side validation against the ECAPI 1.0 JSON Schema the server uses (loaded by
 * @ecapi-ingest/protocol), compiled once with Ajv's draft 2020-12 build (pure JavaScript). It
 * catches mistakes without a round trip (a missing field, a wrong type, an unknown enum value, a
 * plaintext identifier where a SHA-256 digest belongs) and reports them with the service's error
 * codes and field paths, which come from the protocol package too. The wording is the service's for
 * enumerations, required fields and unhashed identifiers; for other schema rules it is Ajv's (the
 * service says what to send instead: docs/guides/sdk.md, "Local validation").
 *
 * The service additionally checks what JSON Schema cannot express (timestamp window, active ISO
 * currency and country codes, GPP strings, calendar dates); those come back in its per-event errors.
 */
import { isIP } from 'node:net';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { EventErrors, enumMismatch, enumText, fromJsonPointer, joinPath, loadEventSchema, type EventError } from './protocol.js';

let compiled: ValidateFunction | undefined;

function validator(): ValidateFunction {
  if (!compiled) {
    const ajv = new Ajv2020({ allErrors: false, strict: true, verbose: true });
    ajv.addFormat('ipv4', { type: 'string', validate: (s: string) => isIP(s) === 4 });
    ajv.addFormat('ipv6', { type: 'string', validate: (s: string) => isIP(s) === 6 });
    compiled = ajv.compile(loadEventSchema());
  }
  return compiled;
}

const schemaError = EventErrors.SCHEMA.error;
const invalidField = EventErrors.INVALID_FIELD.error;

function eventErrorOfAjv(error: ErrorObject): EventError {
  const params = error.params as Record<string, unknown>;
  const at = fromJsonPointer(error.instancePath);
  const child = (key: string) => joinPath(at === 'event' ? '' : at, key);
  switch (error.keyword) {
    case 'required':
    case 'dependentRequired':
      return EventErrors.MISSING_FIELD.error(child(String(params.missingProperty)));
    case 'pattern':
      if (error.schemaPath.includes('/Sha256Hex/')) return EventErrors.NOT_HASHED.error(at);
      return invalidField(at, `must match ${String(params.pattern)}`);
    case 'format':
      if (error.schemaPath.includes('/IpAddress/')) return invalidField(at, 'must be a valid IPv4 or IPv6 address');
      return invalidField(at, `must be a valid ${String(params.format)}`);
    case 'minLength':
      return invalidField(at, 'must not be empty');
    case 'additionalProperties':
      return schemaError(`unknown field ${child(String(params.additionalProperty))}`);
    case 'enum': {
      // The service's sentence (protocol's enum-messages.ts): the field, what it must be, the value received.
      const defName = /\/\$defs\/([A-Za-z0-9_]+)\/enum$/.exec(error.schemaPath)?.[1];
      return schemaError(enumMismatch(at, enumText(params.allowedValues as unknown[], defName), error.data));
    }
    case 'type':
      return schemaError(at === 'event' ? 'event must be a JSON object' : `${at} must be ${String(params.type)}`);
    default:
      return schemaError(`${at} ${error.message ?? error.keyword}`);
  }
}

/**
 * Undefined when the event passes the schema, otherwise its first problem as `{code, message}`,
 * the message in the service's per-event shapes (`missing required field: …`, `hashed field … is
 * not a 64-char lowercase hex sha256`, `schema validation failed: …`).
 */
export function validateEvent(event: unknown): EventError | undefined {
  const validate = validator();
  if (validate(event)) return undefined;
  const error = validate.errors?.[0];
  return error ? eventErrorOfAjv(error) : schemaError('event does not match the ECAPI 1.0 schema');
}
