/**
 * CLI of the data lifecycle: `identities forget`, `events delete` and `deletions log` (the audit
 * log). A deletion is a durable request in lifecycle.db that the worker carries out
 * (lifecycle/lifecycle-runner.ts); the command waits for it (`--wait`, default 60s) and prints its
 * counts, or says it is still pending (exit code 3: the worker will carry it out when it runs).
 */
import { Command, Option } from 'commander';
import { userInfo } from 'node:os';
import { parseDurationMs } from '../control/duration.js';
import type { DeletionKind, DeletionRequest } from '../lifecycle/lifecycle-backend.js';
import { CliError } from './cli-io.js';
import type { CliContext } from './cli-context.js';
import type { Storage } from '../storage/storage.js';
import { identityKeySeq } from '../model/identity-key.js';

/** Exit code of a request the worker has not carried out within the wait. */
export const PENDING_EXIT_CODE = 3;

const HEX64 = /^[0-9a-fA-F]{64}$/;

/**
 * `<type>:<value>` as the merged view types identifiers (merged-view/identity.ts), normalized the
 * same way: email, phone and cid are SHA-256 hex digests (lowercased), ifa lowercased, uid
 * lowercased when it is a digest.
 */
export function parseIdentifier(text: string): string {
  const match = /^(email|phone|cid|uid|ifa):(.+)$/s.exec(text);
  if (!match) throw new CliError(`invalid identifier "${text.slice(0, 80)}": use <type>:<value> with type email, phone, cid, uid or ifa`);
  const [, type, raw] = match as unknown as [string, string, string];
  const value = type === 'ifa' ? raw.trim() : raw;
  if (value === '') throw new CliError(`invalid identifier: the ${type} value is empty`);
  if ((type === 'email' || type === 'phone' || type === 'cid') && !HEX64.test(value)) {
    throw new CliError(`invalid identifier: ${type} values are 64-character SHA-256 hex digests, as events carry them`);
  }
  const normalized = type === 'uid' && !HEX64.test(value) ? value : value.toLowerCase();
  return `${type}:${normalized}`;
}

/** The longest --actor (characters): a name, an e-mail address or a ticket reference, not a document. */
export const MAX_ACTOR_CHARS = 200;
/** Control characters (newline, ESC of terminal escape sequences, DEL, C1), format characters (bidi overrides, zero-width) and line/paragraph separators. */
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;
const UNPRINTABLE_ALL = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;

/**
 * `--actor` as stored in the audit log: 1 to MAX_ACTOR_CHARS printable characters. A newline or an
 * escape sequence would let an actor forge a line of `deletions` or rewrite the operator's terminal.
 */
export function parseActor(text: string): string {
  const actor = text.trim();
  if (actor === '') throw new CliError('invalid --actor: it is empty');
  if ([...actor].length > MAX_ACTOR_CHARS) throw new CliError(`invalid --actor: at most ${MAX_ACTOR_CHARS} characters (got ${[...actor].length})`);
  if (UNPRINTABLE.test(actor)) throw new CliError('invalid --actor: printable characters only (no control characters, line breaks, escape sequences or invisible formatting characters)');
  return actor;
}

/**
 * A stored text as one inert line of the text output: unprintable characters as \u{…} escapes, and
 * cut after MAX_ACTOR_CHARS characters (rows stored before --actor was checked may hold anything).
 */
export function printable(text: string): string {
  const chars = [...text];
  const cut = chars.length > MAX_ACTOR_CHARS ? `${chars.slice(0, MAX_ACTOR_CHARS).join('')}…(${chars.length - MAX_ACTOR_CHARS} more characters)` : text;
  return cut.replace(UNPRINTABLE_ALL, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`);
}

export function deletionJson(r: DeletionRequest) {
  return {
    request_id: r.id,
    data_set_id: r.dataSetId,
    kind: r.kind,
    target_digest: r.targetDigest,
    suppress: r.suppress,
    // What it covers: events queued up to this sequence number (docs "Data lifecycle").
    bound_seq: r.boundSeq,
    actor: r.actor,
    requested_at: new Date(r.requestedAt).toISOString(),
    state: r.state,
    done_at: r.doneAt === null ? null : new Date(r.doneAt).toISOString(),
    result: r.result,
  };
}

function deletionText(r: DeletionRequest): string {
  if (r.state !== 'done' || !r.result) return `deletion request ${r.id} (${r.kind}, data set ${r.dataSetId}): pending; the worker carries it out once it has applied the queue up to the request`;
  const x = r.result;
  return (
    `deletion request ${r.id} (${r.kind}, data set ${r.dataSetId}): done; ${x.view_records} merged record(s), ${x.identities} identity node(s), ` +
    `${x.identifier_links} identifier link(s) deleted, ${x.queue_events} queued event(s) erased` +
    (r.suppress ? `, ${x.suppressed_identifiers} identifier(s) suppressed` : '')
  );
}

const defaultActor = () => {
  try {
    return printable(`cli:${userInfo().username}`);
  } catch {
    return 'cli';
  }
};

export function registerLifecycleCommands(program: Command, ctx: CliContext): void {
  const group = (name: string) => {
    const found = program.commands.find((c) => c.name() === name);
    if (!found) throw new Error(`command group ${name} must be registered first`);
    return found;
  };

  const submit = (dataSetId: string, kind: DeletionKind, target: string, opts: { suppress?: boolean; wait: boolean | string; actor?: string }) =>
    ctx.withStorage(async (storage: Storage, g) => {
      const actor = opts.actor !== undefined ? parseActor(opts.actor) : defaultActor();
      const waitMs = opts.wait === false ? 0 : parseDurationMs(opts.wait === true ? '60s' : opts.wait, { max: 86_400_000, what: 'the wait' });
      if (!(await storage.controlPlane().listDataSets()).some((d) => d.id === dataSetId)) throw new CliError(`unknown data set "${dataSetId}"`);
      const store = storage.lifecycle().store;
      // Everything queued up to now is erased; later events are new ones (unless suppressed).
      const boundSeq = (await storage.queueReader().lag(Date.now())).queue_last_seq;
      let request = await store.request({ dataSetId, kind, target, suppress: opts.suppress ?? false, boundSeq, actor });
      const deadline = Date.now() + waitMs;
      while (request.state !== 'done' && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 200));
        const now = await store.get(request.id);
        if (!now) throw new CliError(`deletion request ${request.id} is no longer in the lifecycle store (was the data dir restored or its disk full?)`);
        request = now;
      }
      ctx.out(g.json ? JSON.stringify(deletionJson(request)) : deletionText(request));
      if (request.state !== 'done') ctx.setExitCode(PENDING_EXIT_CODE);
    });

  const waitOption = () =>
    new Option('--wait <duration>', 'how long to wait for the worker to carry the request out').default('60s');

  group('identities')
    .command('forget <data_set_id>')
    .description("delete a person's data: every merged record of the identity, the identity, and the queue's copies (audited)")
    .option('--identifier <type:value>', 'an identifier of the person, like email:<sha256 hex>, phone:<sha256 hex>, cid:<sha256 hex>, uid:<id>, ifa:<id>')
    .option('--identity-key <key>', 'the identity key (ik_…) instead of an identifier')
    .option('--suppress', 'also drop future events carrying any of the identity\'s identifiers before the merged view (counted)', false)
    .option('--actor <who>', 'who asked, for the audit log: up to 200 printable characters (default cli:<user>)')
    .addOption(waitOption())
    .option('--no-wait', 'return at once; the worker carries the request out')
    .action((dataSetId: string, opts: { identifier?: string; identityKey?: string; suppress: boolean; actor?: string; wait: boolean | string }) => {
      if ((opts.identifier === undefined) === (opts.identityKey === undefined)) throw new CliError('give exactly one of --identifier and --identity-key');
      if (opts.identityKey !== undefined && identityKeySeq(opts.identityKey) < 0) throw new CliError(`invalid identity key "${opts.identityKey.slice(0, 80)}": identity keys look like ik_123`);
      const [kind, target]: [DeletionKind, string] = opts.identifier !== undefined ? ['forget_identifier', parseIdentifier(opts.identifier)] : ['forget_identity', opts.identityKey!];
      return submit(dataSetId, kind, target, opts);
    });

  group('events')
    .command('delete <data_set_id> <id>')
    .description('delete one event: its merged record and the queue\'s copies (audited)')
    .option('--actor <who>', 'who asked, for the audit log: up to 200 printable characters (default cli:<user>)')
    .addOption(waitOption())
    .option('--no-wait', 'return at once; the worker carries the request out')
    .action((dataSetId: string, id: string, opts: { actor?: string; wait: boolean | string }) => {
      if (id === '' || id.length > 1024) throw new CliError('invalid event id: 1 to 1024 characters');
      return submit(dataSetId, 'delete_event', id, opts);
    });

  program
    .command('deletions')
    .description('the deletion audit log: who asked, when, what was matched (as a keyed digest), how many records went')
    .argument('[data_set_id]', 'only this data set')
    .action((dataSetId: string | undefined) =>
      ctx.withStorage(async (storage, g) => {
        const rows = (await storage.lifecycle().store.audit(dataSetId)).map(deletionJson);
        if (g.json) ctx.out(JSON.stringify(rows));
        // JSON escapes by itself; the text output escapes what a row may hold (an actor stored before it was checked).
        else for (const r of rows) ctx.out(`${r.request_id}\t${r.requested_at}\t${printable(r.actor)}\t${r.kind}\t${r.data_set_id}\t${r.state}\t${JSON.stringify(r.result)}`);
      }),
    );
}
