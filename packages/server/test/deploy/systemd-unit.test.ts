/**
 * deploy/systemd/: the hardened units (`serve` and the separate `worker`) and their env file,
 * tested as far as this machine allows (systemd is not PID 1 here, so no unit is started by
 * systemd itself):
 *
 * - `systemd-analyze verify` accepts each with no warning (its ExecStart pointed at this checkout
 *   and this Node.js, which it checks exist); `systemd-analyze security --offline=true` rates its
 *   exposure "OK" (at most 2.0 of 10);
 * - the hardening the deployment guide promises is in each; the worker unit runs as the serving
 *   unit's user, on its data dir and env file, at a lower CPU priority and weight;
 * - each ExecStart command line run for real, with the env file example and the unit's
 *   Environment= (the StateDirectory as data dir): the service starts, the health check passes,
 *   the data dir holds a 0600 master key, no demo banner (and its secret) is printed (--no-demo),
 *   and SIGTERM (KillSignal, sent to node alone as KillMode=mixed does) exits 0; the worker logs
 *   that its consumer started, at nice 10, and exits 0 on SIGTERM after logging that it stopped.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { runTool, toolSkip } from '../helpers/external-tool.js';
import { DEPLOY, envFile, healthcheck, HEALTHCHECK, REPO, runService, runUntilLogged } from './deploy-helpers.js';

const UNIT = `${DEPLOY}systemd/ecapi-ingest.service`;
const WORKER_UNIT = `${DEPLOY}systemd/ecapi-ingest-worker.service`;
const ENV_EXAMPLE = `${DEPLOY}systemd/ecapi-ingest.env.example`;
const INSTALL_DIR = '/opt/ecapi-ingest';
const skip = toolSkip('systemd-analyze', 'systemd');

/** A unit's directives of [Service] (a directive given twice keeps every value). */
function serviceDirectives(unit = UNIT): Map<string, string[]> {
  const text = readFileSync(unit, 'utf8');
  const out = new Map<string, string[]>();
  let section = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const s = /^\[(.+)\]$/.exec(line);
    if (s) {
      section = s[1]!;
      continue;
    }
    if (section !== 'Service') continue;
    const eq = line.indexOf('=');
    const key = line.slice(0, eq);
    out.set(key, [...(out.get(key) ?? []), line.slice(eq + 1)]);
  }
  return out;
}

/** The unit as installed on this machine: ExecStart's node is this Node.js, /opt/ecapi-ingest this checkout. */
function localUnit(dir: string, unit = UNIT): string {
  const text = readFileSync(unit, 'utf8')
    .replace(/^ExecStart=\/usr\/bin\/node /m, `ExecStart=${process.execPath} `)
    .replaceAll(INSTALL_DIR, REPO.replace(/\/$/, ''));
  const file = join(dir, basename(unit));
  writeFileSync(file, text);
  return file;
}

for (const unit of [UNIT, WORKER_UNIT]) {
  const name = basename(unit);
  test(`${name}: systemd-analyze verify: no error, no warning`, { skip }, () => {
    const file = localUnit(mkdtempSync(join(tmpdir(), 'ecapi-unit-')), unit);
    const r = runTool('systemd-analyze', ['verify', file]);
    assert.equal(r.status, 0, r.output);
    assert.equal(r.output.trim(), '', r.output);
  });

  test(`${name}: systemd-analyze security: exposure "OK" (at most 2.0)`, { skip }, () => {
    const file = localUnit(mkdtempSync(join(tmpdir(), 'ecapi-unit-')), unit);
    const r = runTool('systemd-analyze', ['security', '--offline=true', '--no-pager', file]);
    const m = new RegExp(`Overall exposure level for ${name.replaceAll('.', '\\.')}: (\\d+\\.\\d+) (\\S+)`).exec(r.output);
    assert.ok(m, r.output.slice(-500));
    assert.ok(Number(m![1]) <= 2.0, `exposure ${m![1]} ${m![2]}`);
  });

  test(`${name}: the hardening the deployment guide promises`, () => assertHardened(serviceDirectives(unit)));
}

/** What both units promise: a user of its own, the StateDirectory data dir, no capabilities, a read-only system, SIGTERM to node. */
function assertHardened(d: Map<string, string[]>): void {
  const one = (k: string) => d.get(k)?.at(-1);
  assert.equal(one('ProtectSystem'), 'strict');
  assert.equal(one('NoNewPrivileges'), 'yes');
  assert.equal(one('PrivateTmp'), 'yes');
  assert.equal(one('ProtectHome'), 'yes');
  assert.equal(one('User'), 'ecapi-ingest', 'a system user of its own, never root');
  assert.equal(one('StateDirectory'), 'ecapi-ingest');
  assert.equal(one('CapabilityBoundingSet'), '', 'no capabilities at all');
  assert.equal(one('RestrictAddressFamilies'), 'AF_INET AF_INET6 AF_UNIX');
  assert.ok(d.get('SystemCallFilter')?.includes('@system-service'));
  assert.equal(one('KillMode'), 'mixed', 'SIGTERM to node alone: it stops its consumer child itself');
  assert.equal(one('KillSignal'), 'SIGTERM');
  assert.notEqual(one('MemoryDenyWriteExecute'), 'yes', 'V8 needs writable+executable memory');
  assert.ok(d.get('Environment')?.some((e) => e.includes('ECAPI_DATA_DIR=%S/ecapi-ingest')), 'the data dir is the StateDirectory');
  for (const [k, values] of d) for (const v of values) assert.doesNotMatch(`${k}=${v}`, /ECAPI_MASTER_KEY=|ECAPI_ADMIN_TOKEN=|PGPASSWORD=/, 'no secret in the unit');
}

test('the serving unit runs serve --no-demo', () => {
  const d = serviceDirectives();
  assert.match(d.get('ExecStart')!.at(-1)!, /^\/usr\/bin\/node \/opt\/ecapi-ingest\/packages\/server\/dist\/src\/bin\/ecapi-ingest\.js serve --no-demo$/, 'no demo data set and key (its secret would go to the journal)');
});

test('the worker unit runs `worker` as the serving unit\'s user, on its data dir and env file, below its CPU priority and weight', () => {
  const serving = serviceDirectives();
  const worker = serviceDirectives(WORKER_UNIT);
  const one = (d: Map<string, string[]>, k: string) => d.get(k)?.at(-1);
  assert.match(one(worker, 'ExecStart')!, /^\/usr\/bin\/node \/opt\/ecapi-ingest\/packages\/server\/dist\/src\/bin\/ecapi-ingest\.js worker$/);
  for (const k of ['User', 'Group', 'StateDirectory', 'StateDirectoryMode', 'EnvironmentFile', 'Environment', 'WorkingDirectory', 'UMask']) {
    assert.deepEqual(worker.get(k), serving.get(k), `${k}= as in ecapi-ingest.service`);
  }
  // The worker lowers its own threads to ECAPI_WORKER_NICE (the env file's 10); Nice= agrees with it.
  assert.equal(one(worker, 'Nice'), envFile(ENV_EXAMPLE).ECAPI_WORKER_NICE);
  assert.ok(Number(one(worker, 'CPUWeight')) < Number(one(serving, 'CPUWeight') ?? 100), 'a lower CPU weight than the serving unit (default 100)');
  assert.equal(one(worker, 'Restart'), 'on-failure');
  assert.equal(one(worker, 'TimeoutStopSec'), one(serving, 'TimeoutStopSec'));
});

/**
 * What systemd would give a unit's ExecStart: its environment (Environment= first, EnvironmentFile=
 * over it), its StateDirectory created, its argv with this Node.js and this checkout.
 */
function asSystemdWould(d: Map<string, string[]>): { env: Record<string, string>; dataDir: string; argv: string[]; cwd: string } {
  const stateRoot = mkdtempSync(join(tmpdir(), 'ecapi-state-'));
  // Environment= first, EnvironmentFile= over it (systemd's order); %S is the state root (/var/lib).
  const env: Record<string, string> = {};
  for (const line of d.get('Environment') ?? []) {
    for (const m of line.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=(\S+)/g)) env[m[1]!] = m[2]!.replaceAll('%S', stateRoot);
  }
  Object.assign(env, envFile(ENV_EXAMPLE));
  assert.ok(!('ECAPI_MASTER_KEY' in env) && !('ECAPI_ADMIN_TOKEN' in env), 'no secret in the env file example');
  // StateDirectory= with StateDirectoryMode=0700: systemd creates it before ExecStart.
  const dataDir = env.ECAPI_DATA_DIR!;
  assert.equal(dataDir, join(stateRoot, d.get('StateDirectory')!.at(-1)!));
  mkdirSync(dataDir, { mode: Number.parseInt(d.get('StateDirectoryMode')!.at(-1)!, 8) });
  const argv = d.get('ExecStart')!.at(-1)!.split(/\s+/).map((a) => a.replace(INSTALL_DIR, REPO.replace(/\/$/, '')));
  assert.equal(argv[0], '/usr/bin/node');
  argv[0] = process.execPath;
  return { env, dataDir, argv, cwd: d.get('WorkingDirectory')!.at(-1)!.replace(INSTALL_DIR, REPO) };
}

test('the unit\'s ExecStart, run for real with the env file example and the unit\'s Environment=: ready, then SIGTERM exits 0', async () => {
  const d = serviceDirectives();
  const { env, dataDir, argv, cwd } = asSystemdWould(d);
  const serviceEnv = { ...env, ECAPI_PORT: '0', ECAPI_ADMIN_PORT: '0', ECAPI_WORKERS: '1' };
  const service = await runService(argv, serviceEnv, cwd);
  try {
    const ready = healthcheck(HEALTHCHECK, { ...serviceEnv, ECAPI_ADMIN_PORT: String(service.adminPort) });
    assert.equal(ready.status, 0, ready.stderr);
    assert.equal((statSync(join(dataDir, 'master.key')).mode & 0o777).toString(8), '600');
    assert.match(service.output(), /"host":"0\.0\.0\.0"|0\.0\.0\.0/, 'ECAPI_HOST from the env file');
  } finally {
    const code = await service.stop(d.get('KillSignal')!.at(-1)! as NodeJS.Signals);
    assert.equal(code, 0, service.output().slice(-2000));
  }
  // serve --no-demo: no demo data set and key, so no secret printed to stderr (the journal).
  assert.doesNotMatch(service.output(), /First run|secret:/, 'no demo banner');
});

test('the worker unit\'s ExecStart, run for real the same way: its consumer starts at nice 10 on the StateDirectory, then SIGTERM exits 0', async () => {
  const d = serviceDirectives(WORKER_UNIT);
  const { env, dataDir, argv, cwd } = asSystemdWould(d);
  const worker = await runUntilLogged(argv, env, cwd, 'consumer started');
  try {
    assert.equal(worker.line.env, 'production');
    assert.match(worker.output(), /"nice":10,[^\n]*"msg":"consumer CPU priority lowered"/, 'ECAPI_WORKER_NICE from the env file');
    assert.ok(statSync(join(dataDir, 'production', 'queue.db')).isFile(), 'the embedded profile\'s stores in the StateDirectory');
  } finally {
    const code = await worker.stop(d.get('KillSignal')!.at(-1)! as NodeJS.Signals);
    assert.equal(code, 0, worker.output().slice(-2000));
  }
  assert.match(worker.output(), /"msg":"consumer stopped"/);
});
