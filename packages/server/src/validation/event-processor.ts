/**
 * The ECAPI 1.0 event processor: the per-event pipeline of request handling, two steps in order,
 * each seeing only what the one before accepted:
 *   step 3, validation (this folder): the ECAPI 1.0 schema and the service's rules;
 *   step 4, privacy policy (privacy/apply-policy.ts): the data set's consent, plaintext-identifier
 *     and IP rules, on accepted events only.
 * Their common outcome (accepted with its policy meta, or one `{code, message}`) is
 * events/event-outcome.ts, so privacy never imports validation.
 *
 * createEventProcessor() is called once at startup: it loads the published JSON Schema, compiles
 * it with Ajv once and derives the document-order walker from it. evaluate() is the hot path: no
 * compilation, no I/O, no logging, never throws for any input.
 *
 * Validation (validateEvent below):
 * 1. Fast path (almost every real event): Ajv (allErrors: false) validates types, enums, members
 *    and required fields; then the walker checks only the fields that carry a custom rule
 *    (hash rule, formats, timestamp window, conditional requirements, GPP validity).
 * 2. Otherwise the walker walks the whole event once in document order and returns its first
 *    problem as `{code, message}`, the message in the spec's shapes (removing null members, which
 *    mean "absent"); if it finds none, the cleaned event must pass Ajv (a null was Ajv's only
 *    objection).
 * The walker hands the decoded GPP string (WalkFindings) on to the privacy step.
 *
 * The policy's meta is stored with the queued record (events/event-outcome.ts: never an
 * identifier), so the paths it names of redacted fields leave here in their stored form
 * (stored-reason.ts): `properties.*`, never the property key the sender chose.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { EventErrors } from '../errors.js';
import { applyPolicy } from '../privacy/apply-policy.js';
import { createGppDecoder } from '../privacy/gpp.js';
import type { GppDecoder } from '../privacy/gpp.js';
import type { EventCheck, EventOutcome, EventRejection } from '../events/event-outcome.js';
import type { EventCheckContext, EventProcessor } from './event-check.js';
import { fromJsonPointer, joinPath, loadEventSchema, type JsonSchema } from '@ecapi-ingest/protocol';
import { buildEventModel } from './schema-model.js';
import { knownPathsOf, storedPathOf } from './stored-reason.js';
import { EventWalker } from './walker.js';
import type { WalkFindings } from './walker.js';

export interface EventProcessorOptions {
  /** Defaults to the schema published in @ecapi-ingest/protocol. */
  readonly schema?: JsonSchema;
  readonly gppDecoder?: GppDecoder;
}

/**
 * $defs whose string rules the walker implements itself (hash rule, ISO code lists, IP, URL,
 * calendar date), with sender-actionable messages and stricter than the schema's pattern or
 * format. The server's Ajv copy drops their pattern/format/anyOf: evaluating a regular
 * expression twice per hashed identifier would cost more than all other checks together.
 * Everything else of the schema (types, enums, required, additionalProperties, ranges) stays.
 */
export const WALKER_ENFORCED_DEFS = ['Sha256Hex', 'CurrencyCode', 'CountryCode', 'IpAddress', 'HttpUrl', 'CalendarDate'] as const;

export function serverSchema(schema: JsonSchema): JsonSchema {
  const copy = structuredClone(schema);
  const defs = copy['$defs'] as Record<string, JsonSchema>;
  for (const name of WALKER_ENFORCED_DEFS) {
    const def = defs[name];
    if (def === undefined) throw new Error(`event schema: $defs/${name} missing`);
    delete def['pattern'];
    delete def['format'];
    delete def['anyOf'];
  }
  return copy;
}

export function compileEventSchema(schema: JsonSchema): ValidateFunction {
  const ajv = new Ajv2020({ allErrors: false, strict: true });
  return ajv.compile(serverSchema(schema));
}

/** Ajv's first error as a per-event error (only reached if the walker missed something). */
export function ajvEventError(error: ErrorObject): EventRejection {
  const at = fromJsonPointer(error.instancePath);
  if (error.keyword === 'required' || error.keyword === 'dependentRequired') {
    const missing = (error.params as { missingProperty: string }).missingProperty;
    return EventErrors.MISSING_FIELD.error(at === 'event' ? missing : joinPath(at, missing));
  }
  if (error.keyword === 'additionalProperties') {
    const extra = (error.params as { additionalProperty: string }).additionalProperty;
    return EventErrors.SCHEMA.error(`unknown field ${joinPath(at === 'event' ? '' : at, extra)}`);
  }
  return EventErrors.SCHEMA.error(`${at} ${error.message ?? 'is invalid'}`);
}

/**
 * Step 3's verdict on one event: a rejection, or whether the event was changed on the way (the
 * slow path removes null members in place, so an event that took it and passed was changed).
 */
type Validated = EventRejection | boolean;

export function createEventProcessor(options: EventProcessorOptions = {}): EventProcessor {
  const schema = options.schema ?? loadEventSchema();
  const validate = compileEventSchema(schema);
  const model = buildEventModel(schema);
  const walker = new EventWalker(model, options.gppDecoder ?? createGppDecoder());
  const knownPaths = knownPathsOf(model);

  /** Step 3, validation: what it found for step 4 (the decoded GPP string) goes into `findings`. */
  const validateEvent = (event: unknown, context: EventCheckContext, findings: WalkFindings): Validated => {
    try {
      // Fast path: Ajv accepts and every custom rule passes. Otherwise the walker finds the
      // first problem in document order (removing null members on the way); if it finds none
      // (the event only had nulls Ajv objected to), Ajv checks the cleaned event once more.
      if (validate(event) && walker.rulesPass(event as Record<string, unknown>, context.nowSeconds, context.policy.maxAgeSeconds, findings)) return false;
      const error = walker.walk(event, context.nowSeconds, context.policy.maxAgeSeconds, findings);
      if (error !== undefined) return error;
      return validate(event) ? true : ajvEventError(validate.errors![0]!);
    } catch {
      // Defensive: no input may make evaluate() throw (e.g. a getter-laden object from a caller).
      return EventErrors.SCHEMA.error('event could not be validated');
    }
  };

  const evaluate = (event: unknown, context: EventCheckContext): EventOutcome => {
    const findings: WalkFindings = { gpp: undefined };
    // Step 3: validation.
    const validated = validateEvent(event, context, findings);
    if (typeof validated !== 'boolean') return { ok: false, error: validated };
    // Step 4: privacy policy, on the accepted event (mutated in place: it is owned by the request).
    const accepted = event as Record<string, unknown>;
    const policy = applyPolicy(accepted, findings.gpp, context.policy);
    if (!policy.ok) return policy;
    const meta = policy.meta;
    // The meta is stored with the queued record: a redacted field is named by its stored path (a key
    // the schema does not know, which the sender chose and may be an email address, becomes `*`).
    if (meta?.piiRedacted !== undefined) meta.piiRedacted = meta.piiRedacted.map((path) => storedPathOf(path, knownPaths));
    return { ok: true, event: accepted, meta, modified: validated || meta !== undefined };
  };

  return {
    evaluate,
    check(event: unknown, context: EventCheckContext): EventCheck {
      const outcome = evaluate(event, context);
      return outcome.ok ? outcome : { ok: false, error: outcome.error.message };
    },
  };
}
