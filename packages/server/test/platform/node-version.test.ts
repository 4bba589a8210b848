/**
 * Every command checks the Node.js version before loading anything native (src/bin/node-version.ts):
 * the pure comparison, the constant against package.json's engines, and the real `ecapi-ingest`
 * binary run by the machine's own older Node (/usr/bin/node, when there is one): one clear line and
 * exit code 1, where it used to die with "Segmentation fault" (exit 139).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { atLeast, MINIMUM_NODE, nodeVersionProblem, parseNodeVersion } from '../../src/bin/node-version.js';
import { tempDataDir } from '../helpers/server-process.js';

const SHIM = fileURLToPath(new URL('../../../bin/ecapi-ingest.js', import.meta.url));

test('version comparison', () => {
  assert.deepEqual(parseNodeVersion('v20.19.2'), [20, 19, 2]);
  assert.deepEqual(parseNodeVersion('24.0.0-nightly2025'), [24, 0, 0]);
  assert.equal(parseNodeVersion('twenty'), null);
  for (const ok of ['v22.12.0', 'v22.12.1', 'v22.13.0', 'v23.0.0', 'v24.11.1', 'v100.0.0']) assert.equal(atLeast(ok, '22.12.0'), true, ok);
  for (const old of ['v22.11.9', 'v22.2.0', 'v21.99.99', 'v20.19.2', 'v18.20.0', 'v9.99.99', 'garbage']) assert.equal(atLeast(old, '22.12.0'), false, old);
  assert.equal(nodeVersionProblem('v24.1.0', '/x/node'), null);
  const line = nodeVersionProblem('v20.19.2', '/usr/bin/node')!;
  assert.match(line, /^error: ecapi-ingest needs Node\.js 22\.12\.0 or later, and this is Node\.js v20\.19\.2 \(\/usr\/bin\/node\): install Node\.js 24 LTS/);
  assert.ok(!line.includes('\n'));
});

test('the minimum is package.json\'s engines.node', () => {
  for (const file of ['../../../package.json', '../../../../../package.json']) {
    const pkg = JSON.parse(readFileSync(fileURLToPath(new URL(file, import.meta.url)), 'utf8')) as { engines: { node: string } };
    assert.equal(pkg.engines.node, `>=${MINIMUM_NODE}`, file);
  }
});

const systemNode = '/usr/bin/node';
const systemVersion = existsSync(systemNode) ? spawnSync(systemNode, ['--version'], { encoding: 'utf8' }).stdout.trim() : '';
const skip = !existsSync(systemNode)
  ? `no ${systemNode} on this machine`
  : atLeast(systemVersion, MINIMUM_NODE)
    ? `${systemNode} is ${systemVersion}, not older than ${MINIMUM_NODE}`
    : false;

test(`the binary under the machine's older Node (${systemNode} ${systemVersion}) says what to install`, { skip }, () => {
  const dataDir = tempDataDir('ecapi-oldnode-');
  for (const args of [['data-set', 'list'], ['serve', '--port', '0', '--admin-port', '0'], ['worker', 'status'], ['--version']]) {
    const r = spawnSync(systemNode, [SHIM, '--data-dir', dataDir, ...args], { encoding: 'utf8', timeout: 30_000 });
    assert.equal(r.signal, null, `${args.join(' ')}: no crash (${r.signal})`);
    assert.equal(r.status, 1, `${args.join(' ')}: exit code 1, got ${r.status}; stderr: ${r.stderr}`);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, `error: ecapi-ingest needs Node.js ${MINIMUM_NODE} or later, and this is Node.js ${systemVersion} (${systemNode}): install Node.js 24 LTS (the repository's .nvmrc) and run ecapi-ingest with it\n`);
  }
  assert.ok(!existsSync(`${dataDir}/production`), 'nothing was created in the data dir');
});
