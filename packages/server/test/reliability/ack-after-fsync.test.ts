/**
 * The acknowledgement follows the fsync: the server runs under strace, one request is sent, and
 * the trace shows the WAL frames written (pwrite64), then the WAL synced (fsync/fdatasync of
 * queue.db-wal, completed), and only then the first bytes of the response on the client's socket.
 * A second request, a batch large enough for the queue's body log, shows the body written to
 * queue.db-bodies/ and synced there before the WAL commit that points at it, and both before its
 * response. docs/DURABILITY.md has the command and an annotated excerpt. Skips when strace is
 * missing or ptrace is not permitted.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, exportQueue, provision, tempDataDir } from '../helpers/server-process.js';
import { descendants } from '../helpers/fault-tools.js';
import { sampleEvent } from '../helpers/https-client.js';
import { postSignedOnOwnConnection, straceUsable } from '../helpers/strace-durability.js';

const skip = straceUsable() ? false : 'strace is not installed or ptrace is not permitted';

export const STRACE_SYSCALLS = 'fdatasync,fsync,pwrite64,pwritev,pwritev2,write,writev,sendmsg,sendto';

test('strace: the queue WAL is synced before the first response byte is written', { skip, timeout: 60_000 }, async () => {
  const dataDir = tempDataDir('ecapi-strace-');
  const creds = await provision(dataDir, ['traced']);
  const traceFile = join(dataDir, 'strace.txt');
  const child = spawn(
    'strace',
    ['-f', '-yy', '-tt', '-s', '32', '-e', `trace=${STRACE_SYSCALLS}`, '-o', traceFile,
      process.execPath, BIN, '--data-dir', dataDir, 'serve', '--port', '0', '--admin-port', '0', '--no-demo', '--workers', '1', '--no-worker'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (t: string) => (output += t));
  child.stderr!.setEncoding('utf8').on('data', (t: string) => (output += t));
  try {
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`server did not start under strace:\n${output}`)), 30_000);
      child.stdout!.on('data', () => {
        const line = output.split('\n').find((l) => l.includes('"ecapi-ingest listening"'));
        if (line) {
          clearTimeout(timer);
          resolve((JSON.parse(line) as { port: number }).port);
        }
      });
    });
    const ca = readFileSync(join(dataDir, 'tls', 'localhost-cert.pem'), 'utf8');
    const send = (body: string) => postSignedOnOwnConnection(port, ca, creds, 'traced', body);
    const event = sampleEvent('traced', { id: 'traced-1' });
    const { status, text, localPort } = await send(JSON.stringify(event));
    assert.equal(status, 200, text);
    assert.ok(localPort > 0);
    // ~60 KB: over the body log's 32 KiB threshold.
    const large = Array.from({ length: 60 }, (_, i) => sampleEvent('traced', { id: `traced-big-${i}`, properties: { note: 'n'.repeat(900) } }));
    const big = await send(JSON.stringify({ events: large }));
    assert.equal(big.status, 200, big.text);
    const queued = await exportQueue(dataDir);
    assert.equal(queued.filter((r) => r.event.id === 'traced-1').length, 1);
    assert.equal(queued.filter((r) => String(r.event.id).startsWith('traced-big-')).length, 60);

    // Stop the traced server (strace itself relays no SIGTERM), then read the whole trace.
    for (const pid of descendants(child.pid!).slice(0, 1)) process.kill(pid, 'SIGTERM');
    const [code] = (await once(child, 'exit')) as [number | null];
    assert.equal(code, 0, output);

    const lines = readFileSync(traceFile, 'utf8').split('\n');
    const toClient = new RegExp(`^\\d+\\s+\\S+ (write|writev|sendmsg|sendto)\\(\\d+<TCP:\\[[^\\]]*->127\\.0\\.0\\.1:${localPort}\\]>`);
    const walWrite = /^\d+\s+\S+ pwrite64\(\d+<[^>]*queue\.db-wal>/;
    const walSync = /^(\d+)\s+\S+ (fsync|fdatasync)\(\d+<[^>]*queue\.db-wal>(.*)$/;
    const clientWrites = lines.flatMap((l, i) => (toClient.test(l) ? [i] : []));
    assert.ok(clientWrites.length >= 2, 'the handshake and the response were traced');
    // The request's frames: the first WAL write after the handshake began on this connection.
    const frames = lines.findIndex((l, i) => i > clientWrites[0]! && walWrite.test(l));
    assert.ok(frames > 0, 'the commit wrote WAL frames');
    // The sync that completes after those frames ("= 0" on its line, or on its "resumed" line).
    let synced = -1;
    const unfinished = new Set<string>();
    for (let i = frames + 1; i < lines.length && synced < 0; i++) {
      const line = lines[i]!;
      const sync = walSync.exec(line);
      if (sync) {
        if (/= 0$/.test(sync[3]!)) synced = i;
        else if (sync[3]!.includes('<unfinished ...>')) unfinished.add(sync[1]!);
        continue;
      }
      const resumed = /^(\d+)\s+\S+ <\.\.\. (fsync|fdatasync) resumed>.*= 0$/.exec(line);
      if (resumed && unfinished.has(resumed[1]!)) synced = i;
    }
    assert.ok(synced > frames, 'the WAL was synced after the frames were written');
    const response = clientWrites.find((i) => i > frames);
    assert.ok(response !== undefined, 'the response was written');
    assert.ok(synced < response, `the sync (trace line ${synced + 1}) precedes the response (trace line ${response + 1})`);

    // The large batch: body log written, body log synced, WAL synced, then its response.
    const bigToClient = new RegExp(`^\\d+\\s+\\S+ (write|writev|sendmsg|sendto)\\(\\d+<TCP:\\[[^\\]]*->127\\.0\\.0\\.1:${big.localPort}\\]>`);
    const bigWrites = lines.flatMap((l, i) => (bigToClient.test(l) ? [i] : []));
    assert.ok(bigWrites.length >= 2, 'the second connection was traced');
    const logWrite = lines.findIndex((l, i) => i > bigWrites[0]! && /^\d+\s+\S+ (pwritev2?|pwrite64|writev)\(\d+<[^>]*queue\.db-bodies\/\d+\.log>/.test(l));
    assert.ok(logWrite > 0, 'the body was written to the body log');
    const completedSyncOf = (file: RegExp, from: number): number => {
      const pending = new Set<string>();
      for (let i = from + 1; i < lines.length; i++) {
        const line = lines[i]!;
        const sync = new RegExp(`^(\\d+)\\s+\\S+ (fsync|fdatasync)\\(\\d+<[^>]*${file.source}>(.*)$`).exec(line);
        if (sync) {
          if (/= 0$/.test(sync[3]!)) return i;
          if (sync[3]!.includes('<unfinished ...>')) pending.add(sync[1]!);
          continue;
        }
        const resumed = /^(\d+)\s+\S+ <\.\.\. (fsync|fdatasync) resumed>.*= 0$/.exec(line);
        if (resumed && pending.has(resumed[1]!)) return i;
      }
      return -1;
    };
    const logSynced = completedSyncOf(/queue\.db-bodies\/\d+\.log/, logWrite);
    assert.ok(logSynced > logWrite, 'the body log was synced after the body was written');
    const walFramesAfterLog = lines.findIndex((l, i) => i > logSynced && walWrite.test(l));
    assert.ok(walFramesAfterLog > logSynced, 'the WAL frames of the row come after the body log sync');
    const walSyncedAfterLog = completedSyncOf(/queue\.db-wal/, walFramesAfterLog);
    const bigResponse = bigWrites.find((i) => i > logWrite);
    assert.ok(bigResponse !== undefined && walSyncedAfterLog > 0 && walSyncedAfterLog < bigResponse,
      `body log sync (line ${logSynced + 1}) < WAL sync (line ${walSyncedAfterLog + 1}) < response (line ${(bigResponse ?? -2) + 1})`);
  } finally {
    if (child.exitCode === null && child.signalCode === null) {
      for (const pid of descendants(child.pid!)) process.kill(pid, 'SIGKILL');
      child.kill('SIGKILL');
    }
  }
});
