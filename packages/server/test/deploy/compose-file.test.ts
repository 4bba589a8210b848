/**
 * deploy/compose/compose.yaml, read as compose reads it (YAML with merge keys; no compose tool runs
 * here): the PostgreSQL health check asks over TCP (the image's init server listens on the socket
 * only), the image's major version is the one the deployment guide names, and every serving node's
 * admin port is reachable for Prometheus the safe way: on all of the container's interfaces behind
 * a token that compose must be given (never written in the file), published on the host's loopback
 * only, one host port per node, none of them the `--env test` default 9465.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { DEPLOY, REPO } from './deploy-helpers.js';

interface Service {
  image?: string;
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  healthcheck?: { test?: string[] };
}

const compose = parse(readFileSync(`${DEPLOY}compose/compose.yaml`, 'utf8'), { merge: true }) as { services: Record<string, Service> };
const nodes = Object.entries(compose.services).filter(([, s]) => s.command?.[0] === 'serve');

test('compose: PostgreSQL is checked over TCP, and its image\'s version is the one the deployment guide names', () => {
  const postgres = compose.services.postgres!;
  assert.deepEqual(postgres.healthcheck?.test, ['CMD', 'pg_isready', '-h', '127.0.0.1', '-U', 'ecapi', '-d', 'ecapi']);
  const major = /postgres:(\d+)-/.exec(postgres.image ?? '')?.[1];
  assert.ok(major, postgres.image);
  assert.match(readFileSync(`${REPO}docs/guides/deployment.md`, 'utf8'), new RegExp(`PostgreSQL ${major} \\(the tests run on`));
});

test('compose: every node\'s admin port listens beyond loopback only with a token from .env, published on the host\'s loopback, one port each', () => {
  assert.equal(nodes.length, 3, 'node1, node2, node3');
  const hostPorts: string[] = [];
  for (const [name, node] of nodes) {
    const env = node.environment ?? {};
    assert.equal(env.ECAPI_ADMIN_HOST, '0.0.0.0', `${name}: the published port must reach the admin port`);
    assert.match(env.ECAPI_ADMIN_TOKEN ?? '', /^\$\{ECAPI_ADMIN_TOKEN:\?/, `${name}: the token comes from .env, compose refuses to start without it`);
    const admin = (node.ports ?? []).filter((p) => p.endsWith(':9464'));
    assert.equal(admin.length, 1, `${name}: its admin port is published`);
    const m = /^127\.0\.0\.1:(\d+):9464$/.exec(admin[0]!);
    assert.ok(m, `${name}: ${admin[0]} is on the host's loopback only`);
    hostPorts.push(m![1]!);
  }
  assert.equal(new Set(hostPorts).size, hostPorts.length, `one host port per node: ${hostPorts.join(', ')}`);
  assert.ok(!hostPorts.includes('9465'), 'not the --env test default admin port');
});

test('compose: no secret is written in the file', () => {
  for (const [name, service] of Object.entries(compose.services)) {
    for (const [key, value] of Object.entries(service.environment ?? {})) {
      if (/TOKEN|PASSWORD|MASTER_KEY$/.test(key)) assert.match(String(value), /^\$\{/, `${name}: ${key} is interpolated, not written`);
    }
  }
});
