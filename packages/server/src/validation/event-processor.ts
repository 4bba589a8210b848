/**
 * Interim event processor: required fields and their types only. Replaced by the complete
 * ECAPI 1.0 schema + privacy policy (issue 3).
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ErrorObject } from 'ajv';
import { EventErrors } from '../errors.js';
import type { EventCheck, EventCheckContext, EventProcessor } from './event-check.js';

const minimalSchema = {
  type: 'object',
  required: ['data_set_id', 'timestamp', 'event_type'],
  properties: {
    data_set_id: { type: 'string', minLength: 1 },
    timestamp: { type: 'integer' },
    event_type: { type: 'string' },
    id: { type: 'string' },
    value: { type: 'number' },
    currency_code: { type: 'string' },
    user_data: { type: 'object' },
    properties: { type: 'object' },
  },
} as const;

function messageFor(error: ErrorObject): string {
  const path = error.instancePath.replace(/^\//, '').replace(/\//g, '.');
  if (error.keyword === 'required') {
    const missing = (error.params as { missingProperty: string }).missingProperty;
    return EventErrors.MISSING_FIELD.message(path ? `${path}.${missing}` : missing);
  }
  return EventErrors.SCHEMA.message(`${path || 'event'} ${error.message ?? 'is invalid'}`);
}

export function createEventProcessor(): EventProcessor {
  const ajv = new Ajv2020({ allErrors: false, strict: true });
  const validate = ajv.compile(minimalSchema);
  return {
    check(event: unknown, _context: EventCheckContext): EventCheck {
      if (validate(event)) return { ok: true, event: event as unknown as Record<string, unknown>, meta: undefined };
      return { ok: false, error: messageFor(validate.errors![0]!) };
    },
  };
}
