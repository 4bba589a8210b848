/**
 * deploy/container/: the image definition and its health check, tested as far as this machine
 * allows without a container registry (no base image can be pulled here, so no build in CI):
 *
 * - the Containerfile's structure: multi-stage, a non-root USER, the data dir a VOLUME owned by
 *   that user, the health check and the entrypoint in exec form (node itself gets SIGTERM), no
 *   secret baked in, every path the runtime stage copies exists after `npm run build`;
 * - the runtime stage run for real: its files assembled as its COPY lines say, its ENTRYPOINT +
 *   CMD run with its ENV: the service starts, the health check script passes, a signed event is
 *   accepted, the console is served, and SIGTERM exits 0;
 * - the health check script against a real server (200: exit 0) and against nothing (exit 1,
 *   one line naming the URL).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { Client } from '@ecapi-ingest/client';
import { containerfileInstructions, DEPLOY, envPairs, healthcheck, HEALTHCHECK, REPO, runService, sendWithNewKey, type Instruction } from './deploy-helpers.js';

const CONTAINERFILE = `${DEPLOY}container/Containerfile`;
const BUILD_DIR = '/src';
const SECRET_NAMES = /^(ECAPI_MASTER_KEY|ECAPI_ADMIN_TOKEN|ECAPI_SECRET|PGPASSWORD|POSTGRES_PASSWORD)$/;

function stages(): Instruction[][] {
  const out: Instruction[][] = [];
  for (const i of containerfileInstructions(CONTAINERFILE)) {
    if (i.keyword === 'FROM') out.push([]);
    out.at(-1)?.push(i);
  }
  return out;
}

const last = (stage: Instruction[], keyword: string) => stage.filter((i) => i.keyword === keyword).at(-1);
const execForm = (args: string): string[] | undefined => {
  try {
    const v = JSON.parse(args) as unknown;
    return Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : undefined;
  } catch {
    return undefined;
  }
};

test('Containerfile: multi-stage; runs as a non-root user; the data dir is a volume it owns; exec-form entrypoint and health check; SIGTERM', () => {
  const all = stages();
  assert.ok(all.length >= 2, 'a build stage and a runtime stage');
  const runtime = all.at(-1)!;
  assert.ok(runtime.some((i) => i.keyword === 'COPY' && i.args.startsWith('--from=build')), 'the runtime stage copies from the build stage');
  assert.ok(!runtime.some((i) => i.keyword === 'RUN' && /npm (ci|install)/.test(i.args)), 'no dependency install in the runtime stage');

  const user = last(runtime, 'USER')?.args.split(':')[0];
  assert.ok(user !== undefined && user !== '0' && user !== 'root', `USER ${user}`);
  const envs = new Map(runtime.filter((i) => i.keyword === 'ENV').flatMap((i) => envPairs(i.args)));
  const dataDir = envs.get('ECAPI_DATA_DIR');
  assert.ok(dataDir, 'ECAPI_DATA_DIR is set');
  assert.equal(envs.get('ECAPI_HOST'), '0.0.0.0', 'the public port listens on the container\'s interfaces');
  const volumes = runtime.filter((i) => i.keyword === 'VOLUME').flatMap((i) => execForm(i.args) ?? i.args.split(/\s+/));
  assert.ok(volumes.includes(dataDir!), `VOLUME ${dataDir}`);
  assert.ok(runtime.some((i) => i.keyword === 'RUN' && i.args.includes(`-o ${user}`) && i.args.includes(dataDir!)), 'the data dir is created owned by the user');
  const userIndex = runtime.findIndex((i) => i.keyword === 'USER');
  assert.ok(!runtime.slice(userIndex + 1).some((i) => i.keyword === 'USER'), 'one USER, not switched back');

  const entrypoint = execForm(last(runtime, 'ENTRYPOINT')?.args ?? '');
  assert.ok(entrypoint, 'ENTRYPOINT in exec form: no shell between the runtime and node, so node gets the stop signal');
  assert.equal(entrypoint![0], 'node');
  assert.ok(execForm(last(runtime, 'CMD')?.args ?? ''), 'CMD in exec form');
  assert.equal(last(runtime, 'STOPSIGNAL')?.args, 'SIGTERM');
  const hc = last(runtime, 'HEALTHCHECK')!.args;
  const hcCmd = execForm(hc.slice(hc.indexOf('CMD') + 3).trim());
  assert.ok(hcCmd && hcCmd[0] === 'node' && hcCmd[1]!.endsWith('/healthcheck.mjs'), hc);
  assert.ok(runtime.some((i) => i.keyword === 'COPY' && i.args === `deploy/container/healthcheck.mjs ${hcCmd![1]}`), 'the health check script is copied where HEALTHCHECK runs it');
});

test('Containerfile: no secret baked in (no secret variable, no key or certificate file copied); the build context leaves out data and builds', () => {
  for (const i of containerfileInstructions(CONTAINERFILE)) {
    if (i.keyword === 'ENV' || i.keyword === 'ARG') {
      for (const [name] of envPairs(i.args)) assert.doesNotMatch(name, SECRET_NAMES, `${i.keyword} ${i.args}`);
      assert.doesNotMatch(i.args.split(/[\s=]/)[0]!, SECRET_NAMES);
    }
    if (i.keyword === 'COPY' || i.keyword === 'ADD') assert.doesNotMatch(i.args, /master\.key|\.pem\b|(^|\s)data\//, `${i.keyword} ${i.args}`);
  }
  const ignore = readFileSync(`${REPO}.dockerignore`, 'utf8').split('\n').map((l) => l.trim());
  for (const entry of ['**/node_modules', '**/dist', 'data', '.git']) assert.ok(ignore.includes(entry), `.dockerignore lists ${entry}`);
});

/** The runtime stage's COPY lines as [source in this checkout, destination under root]. */
function runtimeCopies(root: string): [string, string][] {
  const runtime = stages().at(-1)!;
  const workdir = last(runtime, 'WORKDIR')!.args;
  const out: [string, string][] = [];
  for (const i of runtime) {
    if (i.keyword !== 'COPY') continue;
    const words = i.args.split(/\s+/);
    const fromBuild = words[0] === '--from=build';
    const paths = fromBuild ? words.slice(1) : words;
    const dest = paths.pop()!;
    const destAbs = dest.startsWith('/') ? dest : `${workdir}/${dest}`;
    for (const source of paths) {
      const local = fromBuild ? join(REPO, source.replace(new RegExp(`^${BUILD_DIR}/`), '')) : join(REPO, source);
      const target = join(root, destAbs.endsWith('/') ? join(destAbs, source.endsWith('/') ? '' : source.split('/').pop()!) : destAbs);
      out.push([local, target]);
    }
  }
  return out;
}

test('every path the runtime stage copies exists after npm run build', () => {
  for (const [source] of runtimeCopies('/x')) assert.ok(existsSync(source), `${source} (COPY in the runtime stage)`);
});

test('the runtime stage, assembled as its COPY lines say and run with its ENTRYPOINT, CMD and ENV: ready, accepts a signed event, stops on SIGTERM with exit 0', async () => {
  const root = mkdtempSync(join(tmpdir(), 'ecapi-image-'));
  const runtime = stages().at(-1)!;
  for (const [source, target] of runtimeCopies(root)) {
    if (source.endsWith('node_modules/') || source.endsWith('node_modules')) {
      // The dependencies as npm laid them out, the workspace packages pointing at the copies made here.
      mkdirSync(target, { recursive: true });
      for (const entry of readdirSync(source)) {
        if (entry === '@ecapi-ingest') continue;
        symlinkSync(join(source, entry), join(target, entry));
      }
      mkdirSync(join(target, '@ecapi-ingest'));
      for (const pkg of ['protocol', 'client', 'server']) symlinkSync(`../../packages/${pkg}`, join(target, '@ecapi-ingest', pkg));
      continue;
    }
    mkdirSync(dirname(target), { recursive: true });
    cpSync(source, target, { recursive: true });
  }
  const app = join(root, last(runtime, 'WORKDIR')!.args);
  const env = Object.fromEntries(runtime.filter((i) => i.keyword === 'ENV').flatMap((i) => envPairs(i.args)));
  const dataDir = join(root, env.ECAPI_DATA_DIR!);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const map = (arg: string) => arg.replace(/^\/app\//, `${app}/`);
  const argv = [...execForm(last(runtime, 'ENTRYPOINT')!.args)!, ...execForm(last(runtime, 'CMD')!.args)!].map(map);
  argv[0] = process.execPath;
  // The image's ENV, its data dir under the temp root; ephemeral ports instead of 8443/9464.
  const serviceEnv = { ...env, ECAPI_DATA_DIR: dataDir, ECAPI_PORT: '0', ECAPI_ADMIN_PORT: '0' };
  const service = await runService(argv, serviceEnv, app);
  try {
    const hcScript = join(root, execForm(last(runtime, 'HEALTHCHECK')!.args.replace(/^.*?CMD\s*/, ''))![1]!);
    const ready = healthcheck(hcScript, { ...serviceEnv, ECAPI_ADMIN_PORT: String(service.adminPort) });
    assert.equal(ready.status, 0, ready.stderr);

    // The CLI of the assembled image: a data set and a key; then the SDK sends a signed event to it.
    const cli = (args: string[]) => {
      const r = spawnSync(process.execPath, [argv[1]!, '--json', ...args], { env: { PATH: process.env.PATH ?? '', ...serviceEnv }, encoding: 'utf8', cwd: app });
      assert.equal(r.status, 0, r.stderr);
      return JSON.parse(r.stdout) as { key_id: string; secret: string };
    };
    cli(['data-set', 'create', 'img']);
    const key = cli(['key', 'create', '--data-set', 'img']);
    const client = new Client({ baseUrl: `https://127.0.0.1:${service.port}`, keyId: key.key_id, secret: key.secret, dataSetId: 'img', ca: readFileSync(join(dataDir, 'tls', 'localhost-cert.pem'), 'utf8') });
    try {
      // The running service picks the new key up at its next control-plane poll (about a second).
      const event = { id: 'img-1', timestamp: Math.floor(Date.now() / 1000) - 5, event_type: 'page_view' as const };
      const r = await sendWithNewKey(client, event);
      assert.deepEqual([r.accepted, r.failure], [1, undefined], JSON.stringify(r.results));
    } finally {
      await client.close();
    }
    const consolePage = await fetch(`http://127.0.0.1:${service.adminPort}/console/`);
    assert.equal(consolePage.status, 200, 'the console\'s assets are in the image');
    assert.equal((statSync(join(dataDir, 'master.key')).mode & 0o777).toString(8), '600');
  } finally {
    const code = await service.stop('SIGTERM');
    assert.equal(code, 0, service.output().slice(-2000));
  }
  assert.match(service.output(), /"signal":"SIGTERM".*"shutting down"/);
});

test('the health check script: exit 0 on a ready server, exit 1 naming the URL when nothing answers', async () => {
  const { startServer, tempDataDir } = await import('../helpers/server-process.js');
  const server = await startServer({ dataDir: tempDataDir(), args: ['--workers', '1', '--no-worker'] });
  let adminPort: number;
  try {
    adminPort = server.adminPort;
    const ok = healthcheck(HEALTHCHECK, { ECAPI_ADMIN_PORT: String(adminPort), ECAPI_ADMIN_HOST: '0.0.0.0' });
    assert.equal(ok.status, 0, ok.stderr);
  } finally {
    await server.stop();
  }
  const down = healthcheck(HEALTHCHECK, { ECAPI_ADMIN_PORT: String(adminPort) });
  assert.equal(down.status, 1);
  assert.match(down.stderr, new RegExp(`^not ready: http://127\\.0\\.0\\.1:${adminPort}/readyz: fetch failed: connect ECONNREFUSED`));
});
