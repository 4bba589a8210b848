/**
 * Reads an `strace -f -yy` trace and answers, for every entry a command created under a directory,
 * whether it was durable by a given point: its data fsynced after its last write, and its parent
 * directory fsynced after the entry appeared (issue 21). Used by
 * test/reliability/power-loss-fsync.test.ts.
 *
 * The trace must contain the syscalls of STRACE_DURABILITY_SYSCALLS. Lines are indexed in file
 * order, which strace writes in time order across processes and threads; a syscall interrupted by
 * another thread (`<unfinished ...>` / `<... resumed>`) starts at its first line and completes at
 * its second. A directory sync counts only if it STARTED after the entry was created, a data sync
 * only if it started after the write completed, and both only if they COMPLETED before the point.
 */
import { execFileSync } from 'node:child_process';
import { lstatSync, readdirSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import https from 'node:https';
import { signBody } from '@ecapi-ingest/protocol';
import { hasCommand } from './fault-tools.js';

export const STRACE_DURABILITY_SYSCALLS = [
  'open', 'openat', 'creat', 'mkdir', 'mkdirat', 'rename', 'renameat', 'renameat2', 'link', 'linkat', 'unlink', 'unlinkat',
  'fsync', 'fdatasync', 'write', 'pwrite64', 'writev', 'pwritev', 'pwritev2', 'sendmsg', 'sendto',
].join(',');

export function straceUsable(): boolean {
  if (!hasCommand('strace')) return false;
  try {
    execFileSync('strace', ['-f', '-o', '/dev/null', 'true'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * One signed POST on a connection of its own, answering with the client's local port: a trace
 * finds the response's bytes by that port, to tell which fsyncs came before them.
 */
export function postSignedOnOwnConnection(
  port: number,
  ca: string,
  credentials: { keyId: string; secret: string },
  dataSetId: string,
  body: string,
): Promise<{ status: number; text: string; localPort: number }> {
  return new Promise((resolve, reject) => {
    let localPort = 0;
    const req = https.request(
      {
        host: '127.0.0.1', servername: 'localhost', port, ca, method: 'POST', path: '/v1/events', agent: false,
        headers: {
          'content-type': 'application/json', accept: 'application/json', 'content-length': Buffer.byteLength(body),
          'x-service-key-id': credentials.keyId, 'x-service-data-set': dataSetId, 'x-service-signature': signBody(body, credentials.secret),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, text, localPort }));
      },
    );
    req.on('socket', (socket) => socket.once('connect', () => (localPort = socket.localPort!)));
    req.on('error', reject);
    req.end(body);
  });
}

/** Every path under `root` (root included), with its type. */
export function listTree(root: string): Map<string, 'file' | 'dir' | 'other'> {
  const out = new Map<string, 'file' | 'dir' | 'other'>();
  const walk = (p: string) => {
    let st;
    try {
      st = lstatSync(p);
    } catch {
      return;
    }
    out.set(p, st.isDirectory() ? 'dir' : st.isFile() ? 'file' : 'other');
    if (st.isDirectory()) for (const name of readdirSync(p)) walk(join(p, name));
  };
  walk(root);
  return out;
}

interface Sync {
  readonly start: number;
  readonly end: number;
}

interface History {
  writes: number[];
  syncs: Sync[];
}

export interface Syscall {
  readonly pid: string;
  readonly name: string;
  readonly args: string;
  readonly ret: string;
  readonly start: number;
  readonly end: number;
  readonly line: string;
}

/** Joins unfinished/resumed halves; one entry per completed syscall, in completion order. */
export function parseTrace(text: string): Syscall[] {
  const lines = text.split('\n');
  const pending = new Map<string, { name: string; args: string; start: number }>();
  const calls: Syscall[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const unfinished = /^(\d+)\s+\S+\s+(\w+)\((.*) <unfinished \.\.\.>$/.exec(line);
    if (unfinished) {
      pending.set(unfinished[1]!, { name: unfinished[2]!, args: unfinished[3]!, start: i });
      continue;
    }
    const resumed = /^(\d+)\s+\S+\s+<\.\.\. (\w+) resumed>(.*)\)\s+= (.*)$/.exec(line);
    if (resumed) {
      const first = pending.get(resumed[1]!);
      pending.delete(resumed[1]!);
      if (first && first.name === resumed[2]) {
        calls.push({ pid: resumed[1]!, name: first.name, args: first.args + resumed[3]!, ret: resumed[4]!, start: first.start, end: i, line });
      }
      continue;
    }
    const whole = /^(\d+)\s+\S+\s+(\w+)\((.*)\)\s+= (.*)$/.exec(line);
    if (whole) calls.push({ pid: whole[1]!, name: whole[2]!, args: whole[3]!, ret: whole[4]!, start: i, end: i, line });
  }
  return calls;
}

/** A path argument made absolute: relative ones against the dirfd's `<path>` annotation (-yy). */
function pathArgs(args: string): string[] {
  const out: string[] = [];
  // Each path argument, with the dirfd before it when there is one: `AT_FDCWD</cwd>, "p"` or `5</d>, "p"`.
  const re = /(?:(?:AT_FDCWD|\d+)(?:<([^>]*)>)?,\s*)?"((?:[^"\\]|\\.)*)"/g;
  for (let m = re.exec(args); m; m = re.exec(args)) {
    const p = m[2]!;
    out.push(isAbsolute(p) ? resolve(p) : resolve(m[1] ?? '/', p));
  }
  return out;
}

/** The `<path>` annotation of a syscall's first argument (an fd), without " (deleted)". */
function fdPath(args: string): string | null {
  const m = /^\d+<(.*?)>(?:,|$)/.exec(args);
  if (!m) return null;
  return m[1]!.replace(/ \(deleted\)$/, '');
}

/** One life of a path: from its creation to its removal (null: it exists at the end of the trace). */
export interface EntryLife {
  readonly path: string;
  readonly kind: 'dir' | 'file';
  readonly createdAt: number;
  removedAt: number | null;
  /** Writes and syncs of this life (for a file renamed into place: also those under its old name). */
  history: History;
}

export interface DurabilityModel {
  /** Line index at which each path (existing at the end) was last created. */
  readonly created: Map<string, number>;
  /** Every entry created in the trace, removed or not. */
  readonly lives: EntryLife[];
  /** Every sync of a path, whatever its life (directories). */
  readonly syncsByPath: Map<string, Sync[]>;
  readonly history: Map<string, History>;
  readonly calls: Syscall[];
  readonly lastLine: number;
}

/**
 * Replays the trace over the set of paths that existed before (`before`), tracking creations
 * (mkdir, open with O_CREAT of a path that did not exist, rename and link targets), removals, and
 * each file's writes and syncs (a rename moves the history with the file).
 */
export function modelTrace(text: string, before: Iterable<string>): DurabilityModel {
  const calls = parseTrace(text);
  const exists = new Set(before);
  const created = new Map<string, number>();
  const lives: EntryLife[] = [];
  const alive = new Map<string, EntryLife>();
  const history = new Map<string, History>(); // of paths that existed before the trace
  const syncsByPath = new Map<string, Sync[]>();
  const h = (p: string) => {
    const life = alive.get(p);
    if (life) return life.history;
    let entry = history.get(p);
    if (!entry) history.set(p, (entry = { writes: [], syncs: [] }));
    return entry;
  };
  const add = (p: string, at: number, kind: 'dir' | 'file') => {
    const previous = alive.get(p);
    if (previous) previous.removedAt = at; // replaced (rename over it)
    exists.add(p);
    created.set(p, at);
    const life: EntryLife = { path: p, kind, createdAt: at, removedAt: null, history: { writes: [], syncs: [] } };
    lives.push(life);
    alive.set(p, life);
  };
  const remove = (p: string, at: number) => {
    exists.delete(p);
    created.delete(p);
    const life = alive.get(p);
    if (life) life.removedAt = at;
    alive.delete(p);
  };
  for (const call of calls) {
    const ok = call.ret.startsWith('0') || /^\d+</.test(call.ret) || /^\d+$/.test(call.ret);
    if (!ok) continue;
    switch (call.name) {
      case 'mkdir':
      case 'mkdirat':
        add(pathArgs(call.args)[0]!, call.end, 'dir');
        break;
      case 'open':
      case 'openat':
      case 'creat': {
        if (call.name !== 'creat' && !call.args.includes('O_CREAT')) break;
        const p = pathArgs(call.args)[0]!;
        if (!exists.has(p)) add(p, call.end, 'file');
        break;
      }
      case 'unlink':
      case 'unlinkat':
        remove(pathArgs(call.args)[0]!, call.end);
        break;
      case 'rename':
      case 'renameat':
      case 'renameat2': {
        const [from, to] = pathArgs(call.args) as [string, string];
        const moved = h(from);
        const kind = alive.get(from)?.kind ?? 'file';
        remove(from, call.end);
        add(to, call.end, kind);
        alive.get(to)!.history = moved;
        break;
      }
      case 'link':
      case 'linkat': {
        const [from, to] = pathArgs(call.args) as [string, string];
        const source = h(from);
        add(to, call.end, 'file');
        alive.get(to)!.history = { writes: [...source.writes], syncs: [...source.syncs] };
        break;
      }
      case 'fsync':
      case 'fdatasync': {
        const p = fdPath(call.args);
        if (p) {
          const sync = { start: call.start, end: call.end };
          h(p).syncs.push(sync);
          const all = syncsByPath.get(p) ?? [];
          all.push(sync);
          syncsByPath.set(p, all);
        }
        break;
      }
      default: {
        const p = fdPath(call.args);
        if (p && p.startsWith('/')) h(p).writes.push(call.end);
      }
    }
  }
  return { created, lives, syncsByPath, history, calls, lastLine: text.split('\n').length };
}

/** Writes to a client connection identified by its local port (`TCP:[server->127.0.0.1:port]`). */
export function clientWrites(model: DurabilityModel, clientPort: number): number[] {
  const re = new RegExp(`^\\d+<TCP:\\[[^\\]]*->127\\.0\\.0\\.1:${clientPort}\\]>`);
  return model.calls
    .filter((c) => ['write', 'writev', 'sendmsg', 'sendto'].includes(c.name) && re.test(c.args))
    .map((c) => c.start)
    .sort((a, b) => a - b);
}

/**
 * The line of a request's response: the first write on its connection after the first write to
 * `queue.db-wal` that follows the connection's first write (the TLS handshake). The request's
 * commit is the only thing that writes the WAL in between: requests are sent one at a time.
 */
export function responseLine(model: DurabilityModel, clientPort: number): number {
  const writes = clientWrites(model, clientPort);
  if (writes.length === 0) throw new Error(`no writes to the connection from port ${clientPort} in the trace`);
  const wal = model.calls.find((c) => c.start > writes[0]! && /^(pwrite64|write|writev|pwritev2?)$/.test(c.name) && /queue\.db-wal>/.test(c.args));
  if (!wal) throw new Error(`no queue.db-wal write after the handshake of port ${clientPort}`);
  const response = writes.find((w) => w > wal.end);
  if (response === undefined) throw new Error(`no response write after the commit for port ${clientPort}`);
  return response;
}

export interface EntryRule {
  /** Not checked at all, with the reason (printed by the test). */
  readonly exempt?: string;
  /** Data check: 'strict' (synced after its last write) or 'once' (synced at least once after creation). */
  readonly data?: 'strict' | 'once';
}

/**
 * Checks entries (one life each: a path from its creation on). `deadline(path, created)` is the line
 * by which each must be durable. Returns one message per violation.
 */
export function checkDurability(
  model: DurabilityModel,
  options: {
    entries: readonly EntryLife[];
    deadline: (path: string, createdAt: number) => number;
    rule: (path: string) => EntryRule;
    label: string;
  },
): { problems: string[]; checked: string[]; exempt: string[] } {
  const problems: string[] = [];
  const checked: string[] = [];
  const exempt: string[] = [];
  for (const { path, kind, createdAt, history: hist } of options.entries) {
    const rule = options.rule(path);
    if (rule.exempt) {
      exempt.push(`${path}: ${rule.exempt}`);
      continue;
    }
    const until = options.deadline(path, createdAt);
    checked.push(path);
    const parent = dirname(path);
    const parentSynced = (model.syncsByPath.get(parent) ?? []).some((s) => s.start > createdAt && s.end < until);
    if (!parentSynced) {
      problems.push(`${options.label}: parent ${parent} not fsynced after ${path} was created (trace line ${createdAt + 1}) and before line ${until + 1}`);
    }
    if (kind !== 'file') continue;
    const writesBefore = hist.writes.filter((w) => w < until);
    // A file never written (an empty -wal a reader opened) holds no data to lose.
    if (writesBefore.length === 0 && hist.writes.length === 0 && rule.data !== 'once') continue;
    const after = rule.data === 'once' ? createdAt : Math.max(createdAt, ...writesBefore);
    const dataSynced = hist.syncs.some((s) => s.start > after && s.end < until) ||
      // A file written and synced under a temporary name before it was renamed or linked into place.
      (hist.syncs.some((s) => s.end < createdAt && s.start > Math.max(-1, ...hist.writes.filter((w) => w < createdAt))) && writesBefore.every((w) => w < createdAt));
    if (!dataSynced) {
      problems.push(`${options.label}: ${path} (${writesBefore.length} writes) not fsynced after its ${rule.data === 'once' ? 'creation' : 'last write'} (line ${after + 1}) and before line ${until + 1}`);
    }
  }
  return { problems, checked, exempt };
}

/** The lives of entries under `root` that exist at the end, or at any of `moments` (line indexes). */
export function entriesUnder(model: DurabilityModel, root: string, moments: readonly number[] = []): EntryLife[] {
  return model.lives.filter(
    (life) =>
      (life.path === root || life.path.startsWith(`${root}/`)) &&
      (life.removedAt === null || moments.some((m) => life.createdAt < m && life.removedAt! > m)),
  );
}
