/** Shared fixtures of the validation and privacy tests. */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { GppModel } from '@iabgpp/cmpapi';
import { DEFAULT_POLICY } from '../../src/control/data-set-policy.js';
import type { DataSetPolicy } from '../../src/control/data-set-policy.js';
import type { EventPolicyMeta } from '../../src/events/event-outcome.js';
import { createEventProcessor } from '../../src/validation/event-processor.js';

export const NOW = 1_763_700_000; // 2025-11-21T04:40:00Z
export const TS = NOW - 60;

export const sha = (s: string): string => createHash('sha256').update(s).digest('hex');
export const H1 = sha('user@example.com');
export const H2 = sha('+12125550000');
export const H3 = sha('jane');

export const processor = createEventProcessor();

export function policy(overrides: Partial<DataSetPolicy> = {}): DataSetPolicy {
  return { ...DEFAULT_POLICY, ...overrides };
}

export function minimal(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { data_set_id: 'ds_1', timestamp: TS, event_type: 'purchase', ...extra };
}

/** A GPP string encoded by the IAB library: fields as { section: { Field: value } }. */
export function gpp(fields: Record<string, Record<string, unknown>>): string {
  const model = new GppModel();
  for (const [section, values] of Object.entries(fields)) {
    for (const [field, value] of Object.entries(values)) model.setFieldValue(section, field, value);
  }
  return model.encode();
}

export const ALL_TRUE_24 = new Array<boolean>(24).fill(true);
export const ALL_FALSE_24 = new Array<boolean>(24).fill(false);
export function purposes(...granted: number[]): boolean[] {
  return ALL_FALSE_24.map((_, i) => granted.includes(i + 1));
}

export type Expected =
  | string // the exact error
  | { event: Record<string, unknown>; meta?: EventPolicyMeta }; // the exact accepted output

export interface Case {
  readonly name: string;
  readonly event: unknown;
  readonly expect: Expected | 'unchanged';
  readonly policy?: Partial<DataSetPolicy>;
}

/** Runs one case: an error must match exactly; an accepted event and its meta must match exactly. */
export function runCase(c: Case): void {
  const input = structuredClone(c.event);
  const result = processor.check(input, { nowSeconds: NOW, policy: policy(c.policy) });
  if (typeof c.expect === 'string' && c.expect !== 'unchanged') {
    assert.deepEqual(result, { ok: false, error: c.expect });
    return;
  }
  const expected = c.expect === 'unchanged' ? { event: c.event as Record<string, unknown> } : (c.expect as Exclude<Expected, string>);
  assert.equal(result.ok, true, result.ok ? '' : `rejected: ${result.error}`);
  if (!result.ok) return;
  assert.deepEqual(result.event, expected.event);
  assert.deepEqual(result.meta, expected.meta);
}
