/**
 * Where a running node of an environment listens, for the other environment's console (issue 31
 * point 7): the production console tells the operator the test environment's real admin address
 * instead of its default port.
 *
 * The process that owns the admin port writes `<data-dir>/<env>/listening.json` when it is up
 * (serving-node.ts: announceListening). No identifier, secret or data is in it: ports, host, pid.
 * A reader trusts a record only while its pid is alive (a crashed node leaves a stale file; a
 * reused pid on the same machine can make a stale record look alive: the hint then names a port
 * that may answer nothing, which is all the harm). Best effort: a failure to write or read it never
 * stops a node, it only falls back to the defaults.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { environmentDir, type Environment } from './config.js';
import { ensureDirDurably, writeFileDurably } from './fs/durable-files.js';

export interface ListeningRecord {
  readonly pid: number;
  readonly port: number;
  readonly admin_port: number;
  readonly admin_host: string;
}

const fileOf = (dataDir: string, env: Environment) => join(environmentDir(dataDir, env), 'listening.json');

export function writeListeningRecord(dataDir: string, env: Environment, record: ListeningRecord): void {
  const file = fileOf(dataDir, env);
  try {
    // Durably, like every entry of the data dir (test/reliability's power-loss check): on the
    // PostgreSQL profile nothing else may have created the environment's directory.
    ensureDirDurably(dirname(file));
    writeFileDurably(file, `${JSON.stringify(record)}\n`);
  } catch {
    // best effort: the hint falls back to the defaults
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The record of a node of `env` that is running now, or null. */
export function readListeningRecord(dataDir: string, env: Environment): ListeningRecord | null {
  try {
    const record = JSON.parse(readFileSync(fileOf(dataDir, env), 'utf8')) as ListeningRecord;
    if (!Number.isSafeInteger(record.pid) || !Number.isSafeInteger(record.admin_port) || typeof record.admin_host !== 'string') return null;
    return alive(record.pid) ? record : null;
  } catch {
    return null;
  }
}
