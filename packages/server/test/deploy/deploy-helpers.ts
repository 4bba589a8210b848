/**
 * Helpers of the deploy/ tests: run a command line as a deployment would (the container's
 * ENTRYPOINT + CMD, the unit's ExecStart) and wait for the service's "listening" log line, run the
 * image's health check script, and read the Containerfile's instructions.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Client, SendResult } from '@ecapi-ingest/client';
import { stopChild } from '../helpers/server-process.js';

export const REPO = fileURLToPath(new URL('../../../../../', import.meta.url));
export const DEPLOY = `${REPO}deploy/`;
export const HEALTHCHECK = `${DEPLOY}container/healthcheck.mjs`;

export interface Running {
  readonly child: ChildProcess;
  readonly port: number;
  readonly adminPort: number;
  output(): string;
  /** Sends the signal and resolves with the exit code (null when killed by a signal). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export interface Logged {
  readonly child: ChildProcess;
  /** The first log line whose `msg` is the one waited for, parsed. */
  readonly line: Record<string, unknown>;
  output(): string;
  /** Sends the signal and resolves with the exit code (null when killed by a signal). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Spawns argv with exactly `env` (plus PATH) and waits for the JSON log line whose `msg` is `message`. */
export async function runUntilLogged(argv: readonly string[], env: Record<string, string>, cwd: string, message: string): Promise<Logged> {
  const child = spawn(argv[0]!, argv.slice(1), { cwd, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (t: string) => (output += t));
  child.stderr!.setEncoding('utf8').on('data', (t: string) => (output += t));
  const line = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "${message}" line within 30 s:\n${output}`)), 30_000);
    const onData = () => {
      // Whole lines only (the last piece may be a line still being written).
      const found = output.split('\n').slice(0, -1).find((l) => l.includes(`"msg":${JSON.stringify(message)}`));
      if (!found) return;
      clearTimeout(timer);
      child.stdout!.off('data', onData);
      resolve(JSON.parse(found) as Record<string, unknown>);
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the process exited with ${code} before logging "${message}":\n${output}`));
    });
  });
  return { child, line, output: () => output, stop: (signal: NodeJS.Signals = 'SIGTERM') => stopChild(child, signal) };
}

/** Spawns argv with exactly `env` (plus PATH) and waits for the "ecapi-ingest listening" line. */
export async function runService(argv: readonly string[], env: Record<string, string>, cwd: string): Promise<Running> {
  const logged = await runUntilLogged(argv, env, cwd, 'ecapi-ingest listening');
  const { port, admin_port: adminPort } = logged.line as { port: number; admin_port: number };
  return { child: logged.child, port, adminPort, output: logged.output, stop: logged.stop };
}

/** Runs a health check script as the orchestrator would; its exit status and stderr. */
export function healthcheck(script: string, env: Record<string, string>): { status: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [script], { env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8', timeout: 20_000 });
  return { status: r.status, stderr: r.stderr };
}

export interface Instruction {
  readonly keyword: string;
  readonly args: string;
}

/** The Containerfile's instructions, in order: comments dropped, continuation lines joined. */
export function containerfileInstructions(file: string): Instruction[] {
  const lines = readFileSync(file, 'utf8').split('\n');
  const joined: string[] = [];
  let current = '';
  for (const raw of lines) {
    const line = raw.trim();
    if (current === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.startsWith('#')) continue;
    current += (current ? ' ' : '') + line.replace(/\\$/, '').trim();
    if (!line.endsWith('\\')) {
      joined.push(current);
      current = '';
    }
  }
  return joined.map((l) => {
    const m = /^(\S+)\s*(.*)$/.exec(l)!;
    return { keyword: m[1]!.toUpperCase(), args: m[2]! };
  });
}

/** `KEY=value KEY2="v 2"` (ENV) as pairs. */
export function envPairs(args: string): [string, string][] {
  return [...args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S*)/g)].map((m) => [m[1]!, m[2]!.replace(/^"|"$/g, '')]);
}

/** KEY=value lines of an env file (comments and blank lines skipped), as systemd's EnvironmentFile reads them. */
export function envFile(file: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of readFileSync(file, 'utf8').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (m) out[m[1]!] = m[2]!;
  }
  return out;
}

/**
 * Sends one event with a key just created by the CLI: the running service picks the key up at its
 * next control-plane poll (about a second), so AUTHENTICATION is retried for up to 20 s.
 */
export async function sendWithNewKey(client: Client, event: Parameters<Client['send']>[0][number]): Promise<SendResult> {
  let r = await client.send([event]);
  for (let i = 0; i < 100 && r.failure?.code === 'AUTHENTICATION'; i++) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    r = await client.send([event]);
  }
  return r;
}
