import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createLogger, requestLineWriter } from '../../src/observability/logger.js';

function captured(level = 'info') {
  const lines: string[] = [];
  const logger = createLogger({ level, destination: { write: (text: string) => void lines.push(text) } });
  return { logger, lines: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

const line = {
  request_id: 'c2f1a6b4-5f7e-4a39-9d53-0f3c8c1d9e10', status: 207, data_set_id: 'shop', key_id: 'key_1',
  accepted: 2, rejected: 1, error_code: undefined, latency_ms: 1.25, http: '1.1',
};

test('the request line carries its fields, the base fields and the message, through the logger', () => {
  const { logger, lines } = captured();
  requestLineWriter(logger)(line);
  const [written] = lines();
  assert.equal(written?.msg, 'request');
  assert.equal(written?.service, 'ecapi-ingest');
  assert.equal(written?.level, 30);
  assert.equal(typeof written?.time, 'string');
  for (const [key, value] of Object.entries(line)) if (value !== undefined) assert.equal(written?.[key], value, key);
});

test('the request line follows the logger level', () => {
  const { logger, lines } = captured('warn');
  requestLineWriter(logger)(line);
  assert.equal(lines().length, 0);
});

test('every other line of the same logger is still redacted', () => {
  const { logger, lines } = captured();
  requestLineWriter(logger)(line);
  logger.info({ secret: 's3cret', err: { signature: 'abc' }, body: '{"x":1}' }, 'other');
  const other = lines()[1]!;
  assert.equal(other.secret, '[redacted]');
  assert.equal((other.err as Record<string, unknown>).signature, '[redacted]');
  assert.equal(other.body, '[redacted]');
});
