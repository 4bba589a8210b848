/**
 * Opt-in: builds deploy/container/Containerfile with buildah and runs the image, when a base image
 * is at hand. No container registry is reachable from CI or the development machines, so the
 * default node image cannot be pulled; set ECAPI_TEST_CONTAINER_BASE to a local Node.js image
 * (Debian bookworm with /usr/local/bin/node and npm; docs/guides/deployment.md says how one was
 * made from debootstrap) to run it. Skipped otherwise, with that reason.
 *
 * Runs with buildah's chroot isolation, which needs no user namespaces or cgroups (podman run's
 * OCI runtime cannot set rlimits in these sandboxes): build (`--format docker`, so HEALTHCHECK is
 * kept), inspect (user, volume, health check, stop signal), then `buildah run` the image's
 * entrypoint: it serves, the image's health check passes inside it, the image's CLI provisions a
 * key, the SDK's signed event is accepted, and SIGTERM to node exits 0.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { Client } from '@ecapi-ingest/client';
import { REPO, sendWithNewKey } from './deploy-helpers.js';

const BASE = process.env.ECAPI_TEST_CONTAINER_BASE;
const hasBuildah = spawnSync('sh', ['-c', 'command -v buildah'], { stdio: 'ignore' }).status === 0;
const skip = !BASE ? 'ECAPI_TEST_CONTAINER_BASE not set: no base image (no registry reachable here)' : !hasBuildah ? 'buildah not on PATH: apt-get install -y buildah' : false;

function buildah(args: string[]): string {
  const r = spawnSync('buildah', args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  assert.equal(r.status, 0, `buildah ${args.join(' ')}:\n${r.stderr.slice(-3000)}`);
  return r.stdout;
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** The pid of the process whose command line contains `marker` (the container's node, seen from the host). */
function pidOf(marker: string): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (cmd[0]?.endsWith('/node') && cmd.join(' ').includes(marker)) return Number(entry);
    } catch {
      // gone
    }
  }
  return undefined;
}

test('the image builds, runs as its user, passes its health check, accepts a signed event, and exits 0 on SIGTERM', { skip, timeout: 900_000 }, async () => {
  const tag = `localhost/ecapi-ingest:test-${randomBytes(4).toString('hex')}`;
  buildah(['bud', '--isolation', 'chroot', '--format', 'docker', '--layers', '--build-arg', `NODE_IMAGE=${BASE}`, '-f', 'deploy/container/Containerfile', '-t', tag, REPO]);
  let ctr: string | undefined;
  try {
    const config = JSON.parse(buildah(['inspect', '--type', 'image', tag])) as { Docker: { config: { User: string; Volumes: Record<string, unknown>; StopSignal: string; Healthcheck?: { Test: string[] } } } };
    const c = config.Docker.config;
    assert.equal(c.User, '10001:10001');
    assert.ok('/var/lib/ecapi-ingest' in c.Volumes);
    assert.equal(c.StopSignal, 'SIGTERM');
    assert.deepEqual(c.Healthcheck?.Test, ['CMD', 'node', '/app/deploy/healthcheck.mjs']);

    ctr = buildah(['from', tag]).trim();
    const port = await freePort();
    const adminPort = await freePort();
    const run = (args: string[], env: string[] = []) => ['run', '--isolation', 'chroot', ...env.flatMap((e) => ['--env', e]), ctr!, '--', ...args];
    const entry = ['node', '/app/packages/server/dist/src/bin/ecapi-ingest.js'];
    const serving = spawn('buildah', run([...entry, 'serve', '--no-demo', '--port', String(port), '--admin-port', String(adminPort)]), { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    serving.stdout.setEncoding('utf8').on('data', (t: string) => (output += t));
    serving.stderr.setEncoding('utf8').on('data', (t: string) => (output += t));
    const exited = once(serving, 'exit');
    try {
      for (let i = 0; i < 300 && !output.includes('"ecapi-ingest listening"'); i++) await new Promise((r) => setTimeout(r, 100));
      assert.match(output, /"ecapi-ingest listening"/);
      assert.equal(buildah(run(['id', '-u'])).trim(), '10001');
      const hc = spawnSync('buildah', run(['node', '/app/deploy/healthcheck.mjs'], [`ECAPI_ADMIN_PORT=${adminPort}`]), { encoding: 'utf8' });
      assert.equal(hc.status, 0, hc.stderr);

      buildah(run(['ecapi-ingest', 'data-set', 'create', 'img']));
      const key = JSON.parse(buildah(run(['ecapi-ingest', '--json', 'key', 'create', '--data-set', 'img']))) as { key_id: string; secret: string };
      const ca = buildah(run(['cat', '/var/lib/ecapi-ingest/tls/localhost-cert.pem']));
      const client = new Client({ baseUrl: `https://127.0.0.1:${port}`, keyId: key.key_id, secret: key.secret, dataSetId: 'img', ca });
      try {
        const event = { id: 'image-1', timestamp: Math.floor(Date.now() / 1000) - 5, event_type: 'page_view' as const };
        const r = await sendWithNewKey(client, event);
        assert.deepEqual([r.accepted, r.failure], [1, undefined], JSON.stringify(r.results));
      } finally {
        await client.close();
      }
    } finally {
      // What a container runtime does on stop: SIGTERM to the container's main process, node.
      const pid = pidOf(`serve --no-demo --port ${port}`);
      if (pid !== undefined) process.kill(pid, 'SIGTERM');
      else serving.kill('SIGKILL');
      const [code] = (await exited) as [number | null];
      assert.equal(code, 0, output.slice(-2000));
    }
    assert.match(output, /"signal":"SIGTERM".*"shutting down"/);
    assert.match(output, /"ecapi-ingest stopped"/);
  } finally {
    if (ctr) spawnSync('buildah', ['rm', ctr], { stdio: 'ignore' });
    spawnSync('buildah', ['rmi', tag], { stdio: 'ignore' });
  }
});
