/**
 * deploy/systemd/: the hardened unit and its env file, tested as far as this machine allows
 * (systemd is not PID 1 here, so the unit is not started by systemd itself):
 *
 * - `systemd-analyze verify` accepts it with no warning (its ExecStart pointed at this checkout
 *   and this Node.js, which it checks exist); `systemd-analyze security --offline=true` rates its
 *   exposure "OK" (at most 2.0 of 10);
 * - the hardening the deployment guide promises is in it;
 * - its ExecStart command line run for real, with the env file example and the unit's
 *   Environment= (the StateDirectory as data dir): the service starts, the health check passes,
 *   the data dir holds a 0600 master key, no demo banner (and its secret) is printed (--no-demo),
 *   and SIGTERM (KillSignal, sent to node alone as KillMode=mixed does) exits 0.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runTool, toolSkip } from '../helpers/external-tool.js';
import { DEPLOY, envFile, healthcheck, HEALTHCHECK, REPO, runService } from './deploy-helpers.js';

const UNIT = `${DEPLOY}systemd/ecapi-ingest.service`;
const ENV_EXAMPLE = `${DEPLOY}systemd/ecapi-ingest.env.example`;
const INSTALL_DIR = '/opt/ecapi-ingest';
const skip = toolSkip('systemd-analyze', 'systemd');

/** The unit's directives of [Service] (a directive given twice keeps every value). */
function serviceDirectives(text = readFileSync(UNIT, 'utf8')): Map<string, string[]> {
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
function localUnit(dir: string): string {
  const text = readFileSync(UNIT, 'utf8')
    .replace(/^ExecStart=\/usr\/bin\/node /m, `ExecStart=${process.execPath} `)
    .replaceAll(INSTALL_DIR, REPO.replace(/\/$/, ''));
  const file = join(dir, 'ecapi-ingest.service');
  writeFileSync(file, text);
  return file;
}

test('systemd-analyze verify: no error, no warning', { skip }, () => {
  const file = localUnit(mkdtempSync(join(tmpdir(), 'ecapi-unit-')));
  const r = runTool('systemd-analyze', ['verify', file]);
  assert.equal(r.status, 0, r.output);
  assert.equal(r.output.trim(), '', r.output);
});

test('systemd-analyze security: exposure "OK" (at most 2.0)', { skip }, () => {
  const file = localUnit(mkdtempSync(join(tmpdir(), 'ecapi-unit-')));
  const r = runTool('systemd-analyze', ['security', '--offline=true', '--no-pager', file]);
  const m = /Overall exposure level for ecapi-ingest\.service: (\d+\.\d+) (\S+)/.exec(r.output);
  assert.ok(m, r.output.slice(-500));
  assert.ok(Number(m![1]) <= 2.0, `exposure ${m![1]} ${m![2]}`);
});

test('the unit has the hardening the deployment guide promises', () => {
  const d = serviceDirectives();
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
  assert.match(one('ExecStart')!, /^\/usr\/bin\/node \/opt\/ecapi-ingest\/packages\/server\/dist\/src\/bin\/ecapi-ingest\.js serve --no-demo$/, 'no demo data set and key (its secret would go to the journal)');
  for (const [k, values] of d) for (const v of values) assert.doesNotMatch(`${k}=${v}`, /ECAPI_MASTER_KEY=|ECAPI_ADMIN_TOKEN=|PGPASSWORD=/, 'no secret in the unit');
});

test('the unit\'s ExecStart, run for real with the env file example and the unit\'s Environment=: ready, then SIGTERM exits 0', async () => {
  const d = serviceDirectives();
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
  const serviceEnv = { ...env, ECAPI_PORT: '0', ECAPI_ADMIN_PORT: '0', ECAPI_WORKERS: '1' };
  const service = await runService(argv, serviceEnv, d.get('WorkingDirectory')!.at(-1)!.replace(INSTALL_DIR, REPO));
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
