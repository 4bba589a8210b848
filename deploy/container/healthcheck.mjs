#!/usr/bin/env node
// Container health check of ecapi-ingest: GET /readyz on the admin port; exit 0 on 200, 1 otherwise
// (with one line saying why). Used by the image's HEALTHCHECK and by the compose file; any
// orchestrator's exec probe can run it too. No curl in the image: Node's fetch.
//
// Reads the same variables as `serve`: ECAPI_ADMIN_PORT (default 9464, 9465 with ECAPI_ENV=test),
// ECAPI_ADMIN_HOST (a wildcard address is probed on loopback) and ECAPI_ADMIN_TOKEN (sent as a
// Bearer token when set; never printed).
const env = process.env;
const port = env.ECAPI_ADMIN_PORT || (env.ECAPI_ENV === 'test' ? '9465' : '9464');
let host = env.ECAPI_ADMIN_HOST || '127.0.0.1';
if (host === '0.0.0.0') host = '127.0.0.1';
if (host === '::' || host === '[::]') host = '::1';
if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`;
const url = `http://${host}:${port}/readyz`;
const headers = env.ECAPI_ADMIN_TOKEN ? { authorization: `Bearer ${env.ECAPI_ADMIN_TOKEN}` } : {};
try {
  const response = await fetch(url, { headers, signal: AbortSignal.timeout(2500) });
  const body = (await response.text()).slice(0, 200).replace(/\s+/g, ' ');
  if (response.status === 200) process.exit(0);
  process.stderr.write(`not ready: ${url} answered ${response.status} ${body}\n`);
} catch (error) {
  const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : '';
  process.stderr.write(`not ready: ${url}: ${error instanceof Error ? error.message : String(error)}${cause}\n`);
}
process.exit(1);
