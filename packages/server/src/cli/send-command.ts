/**
 * `ecapi-ingest send`: sends events from an NDJSON or JSON file (or stdin) with the sender SDK
 * (@ecapi-ingest/client): hashing, validation, packing into 1,000-event / 1 MiB requests, signing,
 * retries. A live progress bar on a terminal, plain periodic lines otherwise (both on stderr:
 * send-progress.ts), a final summary (one JSON document on stdout with --json) and the exit codes
 * of docs/guides/sender.md (send-summary.ts). The input and its line numbers: send-input.ts.
 *
 * Counts agree everywhere: a line that is not JSON is reported on stderr with its line number and
 * counts as rejected from the first progress line to the summary.
 *
 * Credentials come from ECAPI_URL, ECAPI_KEY_ID, ECAPI_SECRET and ECAPI_DATA_SET (preferred: a
 * --secret on the command line is visible to other users in `ps`), or from the options.
 * `send --demo` uses the demo data set's key of a local `npm start` server, read from the control
 * plane of the data dir (this machine holds the master key).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Option, type Command } from 'commander';
import type { DeliveryFailure, EventInput, EventResult, SendProgress, SendTotals } from '@ecapi-ingest/client';
import { DEFAULT_PORTS } from '../config.js';
import { DEMO_DATA_SET } from '../demo.js';
import { CliError, UsageError } from './cli-io.js';
import type { CliContext } from './cli-context.js';
import { formatOf, parseInput, readStdin, type InputRecord } from './send-input.js';
import { num, progressLine } from './send-progress.js';
import { MAX_PRINTED_PROBLEMS, reportSend, withParseFailures, writeRejects } from './send-summary.js';

/** Where test/client/send-command.test.ts finds the progress line. */
export { progressLine } from './send-progress.js';

interface SendOptions {
  url?: string;
  keyId?: string;
  secret?: string;
  dataSet?: string;
  hash: boolean;
  phoneRegion?: string;
  dryRun: boolean;
  rejects?: string;
  ca?: string;
  demo: boolean;
  concurrency: string;
  maxRetries: string;
  progress: boolean;
}

const LOCAL_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

export function registerSendCommand(program: Command, ctx: CliContext): void {
  program
    .command('send')
    .description('send ECAPI events from an NDJSON or JSON file, or stdin (-), with batching, signing and retries')
    .argument('[file]', 'FILE.ndjson, FILE.json, or - for stdin')
    .option('--url <base_url>', 'service base URL, like https://ingest.example.com (env ECAPI_URL)')
    .option('--key-id <id>', 'key id (env ECAPI_KEY_ID)')
    .option('--secret <secret>', 'signing secret (env ECAPI_SECRET, preferred: a command-line secret shows in ps)')
    .option('--data-set <id>', 'data set id (env ECAPI_DATA_SET)')
    .option('--hash', 'normalize and SHA-256 hash plaintext identifiers before sending', false)
    .option('--phone-region <region>', 'with --hash: region of phone numbers written without a country code, like US')
    .option('--dry-run', 'check the events locally against the schema (the service checks more); send nothing', false)
    .option('--rejects <file>', 'write rejected and undeliverable events with their reasons (NDJSON)')
    .option('--ca <file>', 'trust this PEM CA certificate (default for --demo or a localhost URL: <data-dir>/tls/localhost-cert.pem)')
    .option('--demo', 'send a signed sample event to the local server with the demo data set\'s key', false)
    .addOption(new Option('--concurrency <n>', 'requests in flight').default('4'))
    .addOption(new Option('--max-retries <n>', 'retries of a request after a 5xx, network error or time-out').default('6'))
    .option('--no-progress', 'no progress output on stderr')
    .action(async (file: string | undefined, opts: SendOptions) => {
      // Loaded here, not at start: every other command would pay for the SDK (undici, Ajv, phone metadata).
      const { Client, hashEvent, isPlainHeaderValue, parseBaseUrl, prepareEvents } = await import('@ecapi-ingest/client');
      const g = ctx.globals();
      const env = ctx.io.env;
      const stderr = ctx.io.stderr;
      const isTty = (stderr as { isTTY?: boolean }).isTTY === true;

      let url = opts.url ?? env.ECAPI_URL;
      let keyId = opts.keyId ?? env.ECAPI_KEY_ID;
      let secret = opts.secret ?? env.ECAPI_SECRET;
      let dataSet = opts.dataSet ?? env.ECAPI_DATA_SET;
      if (opts.secret !== undefined && !opts.dryRun) {
        stderr.write('warning: a secret on the command line is visible to other users (ps); prefer the ECAPI_SECRET environment variable\n');
      }

      if (opts.demo) {
        const demo = await ctx.withControl(async (cp) => {
          const keys = (await cp.listKeys())
            .filter((k) => k.revokedAt === null && k.dataSets.includes(DEMO_DATA_SET))
            .sort((a, b) => b.createdAt - a.createdAt);
          const key = keys[0];
          if (!key) {
            throw new CliError(`no active key for the demo data set "${DEMO_DATA_SET}" in ${g.dataDir} (${g.env}): start the server once on a fresh data dir (npm start), or run: ecapi-ingest key create --data-set ${DEMO_DATA_SET}`);
          }
          return { keyId: key.keyId, secret: await cp.revealSecret(key.keyId) };
        });
        keyId = demo.keyId;
        secret = demo.secret;
        dataSet = DEMO_DATA_SET;
        url = opts.url ?? `https://127.0.0.1:${DEFAULT_PORTS[g.env].port}`;
      }

      const concurrency = Number(opts.concurrency);
      if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 256) throw new UsageError(`invalid --concurrency "${opts.concurrency}": expected 1 to 256`);
      const maxRetries = Number(opts.maxRetries);
      if (!Number.isInteger(maxRetries) || maxRetries < 0) throw new UsageError(`invalid --max-retries "${opts.maxRetries}": expected a whole number`);
      if (!dataSet && !opts.dryRun) throw new UsageError('missing data set: set ECAPI_DATA_SET or pass --data-set');
      if (!opts.dryRun) {
        const missing = [!url && 'ECAPI_URL (--url)', !keyId && 'ECAPI_KEY_ID (--key-id)', !secret && 'ECAPI_SECRET (--secret)'].filter(Boolean);
        if (missing.length > 0) throw new UsageError(`missing ${missing.join(', ')}`);
        // Before anything is read or sent: https:// only, not ending in /v1/events (the SDK's check, with our names).
        try {
          parseBaseUrl(url!, opts.url !== undefined ? '--url' : 'ECAPI_URL');
        } catch (error) {
          throw new UsageError((error as Error).message);
        }
        // Header values (the SDK's check, with our names; the value is not echoed).
        for (const [value, name] of [[keyId!, opts.keyId !== undefined ? '--key-id' : 'ECAPI_KEY_ID'], [dataSet!, opts.dataSet !== undefined ? '--data-set' : 'ECAPI_DATA_SET']] as const) {
          if (!isPlainHeaderValue(value)) throw new UsageError(`${name} must be printable ASCII without leading or trailing whitespace (it is sent as a header): check for a trailing newline`);
        }
      }

      // Input
      let records: InputRecord[];
      if (file === undefined) {
        if (!opts.demo) throw new UsageError('no input: give FILE.ndjson, FILE.json or - (stdin), or use --demo');
        const now = Math.floor(Date.now() / 1000);
        const sample = hashEvent({
          data_set_id: DEMO_DATA_SET,
          timestamp: now,
          event_type: 'purchase',
          value: 42.5,
          currency_code: 'USD',
          source: 'website',
          user_data: { email_address: ['user@example.com'] },
          properties: { transaction_id: `demo-${now}` },
        });
        records = [{ line: null, event: sample }];
      } else if (file === '-') {
        records = parseInput(await readStdin(), 'auto');
      } else {
        let text: string;
        try {
          text = readFileSync(resolve(file), 'utf8');
        } catch (error) {
          throw new UsageError(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
        }
        records = parseInput(text, formatOf(file));
      }
      // Parsed JSON, not yet known to be events: the SDK validates each against the schema before
      // sending (validate: true below) and rejects what does not match, so the cast claims nothing.
      const events: EventInput[] = [];
      const positions: number[] = [];
      const lineOf = (index: number) => records[positions[index]!]!.line;
      records.forEach((r, i) => {
        if (r.parseError === undefined) {
          positions.push(i);
          events.push(r.event as EventInput);
        }
      });
      // A dry run needs no credentials: without --data-set it checks against the one data set the events name.
      if (!dataSet) {
        const named = new Set(events.map((e) => (e as { data_set_id?: unknown }).data_set_id).filter((id): id is string => typeof id === 'string' && id !== ''));
        if (named.size !== 1) {
          throw new UsageError(`missing data set: set ECAPI_DATA_SET or pass --data-set (the events name ${named.size === 0 ? 'none' : `${named.size} different ones`})`);
        }
        dataSet = [...named][0]!;
      }
      const parseFailures = records.length - events.length;
      const parseProblems = records.filter((r) => r.parseError !== undefined);
      // On stderr, --json or not (--json is about stdout): the input's problems, by line number.
      for (const r of parseProblems.slice(0, MAX_PRINTED_PROBLEMS)) stderr.write(`  ${r.parseError}\n`);
      if (parseProblems.length > MAX_PRINTED_PROBLEMS) stderr.write(`  … and ${num(parseProblems.length - MAX_PRINTED_PROBLEMS)} more lines that are not JSON${opts.rejects ? ` (see ${opts.rejects})` : ''}\n`);

      // Progress on stderr: a redrawn bar on a terminal, a plain line every few seconds otherwise.
      const showProgress = opts.progress && !opts.dryRun;
      let latest: SendProgress | undefined;
      let lastLineAt = Date.now();
      const draw = (final: boolean) => {
        if (!latest || !showProgress) return;
        const p = withParseFailures(latest, parseFailures);
        if (isTty) {
          // \r and erase-to-end-of-line: the line never reaches the last column, so it never wraps.
          stderr.write(`\r${progressLine(p, { bar: true, columns: (stderr as { columns?: number }).columns })}\x1b[K${final ? '\n' : ''}`);
        } else if (final || Date.now() - lastLineAt >= 2000) {
          lastLineAt = Date.now();
          stderr.write(`${progressLine(p, { bar: false })}\n`);
        }
      };
      const timer = showProgress ? setInterval(() => draw(false), isTty ? 100 : 500) : undefined;
      timer?.unref();

      let results: EventResult[];
      let totals: SendTotals;
      let durationMs: number;
      let failure: DeliveryFailure | undefined;
      let caFile: string | undefined;
      let caFound = false;
      /** --demo: the id of the sample event, which the README quickstart's next step looks up. */
      let demoId: string | null = null;
      const started = Date.now();
      const hash = opts.hash ? { defaultRegion: opts.phoneRegion } : false;
      if (opts.dryRun) {
        const prep = prepareEvents(events, { dataSetId: dataSet, hash, validate: true });
        results = [...prep.rejected];
        totals = {
          total: events.length,
          accepted: events.length - prep.rejected.length,
          rejected: prep.rejected.length,
          undeliverable: 0,
          requests: prep.requests.length,
          retries: 0,
        };
        durationMs = Date.now() - started;
      } else {
        let ca: string | undefined;
        const host = new URL(url!).hostname;
        caFile = opts.ca ?? (opts.demo || LOCAL_HOSTS.has(host) ? join(g.dataDir, 'tls', 'localhost-cert.pem') : undefined);
        if (caFile !== undefined && (opts.ca !== undefined || existsSync(caFile))) {
          try {
            ca = readFileSync(caFile, 'utf8');
            caFound = true;
          } catch (error) {
            throw new UsageError(`cannot read CA certificate ${caFile}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
          }
        }
        const client = new Client({
          baseUrl: url!,
          keyId: keyId!,
          secret: secret!,
          dataSetId: dataSet,
          hash,
          concurrency,
          maxRetries,
          ...(ca !== undefined ? { ca } : {}),
          onProgress: (p) => {
            latest = p;
          },
        });
        // Ctrl-C (or a SIGTERM) interrupts the send instead of killing it: the events not delivered
        // are reported and written to --rejects, and what was accepted stays accepted. A second
        // signal finds no listener and ends the process as usual.
        const interrupt = new AbortController();
        const onSignal = () => interrupt.abort();
        process.once('SIGINT', onSignal);
        process.once('SIGTERM', onSignal);
        try {
          const result = await client.send(events, { signal: interrupt.signal });
          results = result.results.filter((r) => r.status !== 'accepted');
          totals = result;
          durationMs = result.durationMs;
          failure = result.failure;
          const first = result.results[0];
          if (opts.demo && first?.status === 'accepted') demoId = first.id;
          latest = { ...result, done: result.total, elapsedMs: result.durationMs };
        } finally {
          process.removeListener('SIGINT', onSignal);
          process.removeListener('SIGTERM', onSignal);
          await client.close();
          if (timer) clearInterval(timer);
        }
        draw(true);
      }

      const allTotals = withParseFailures(totals, parseFailures);

      let rejectsFile: string | null = null;
      if (opts.rejects !== undefined) rejectsFile = writeRejects(opts.rejects, parseProblems, results, lineOf);

      reportSend(ctx, {
        json: g.json, dryRun: opts.dryRun, demo: opts.demo, totals: allTotals, durationMs, results, lineOf, rejectsFile, failure,
        url, dataSet, caFile, caFound, dataDir: g.dataDir, env: g.env, demoId, sameStore: sameStoreOptions(g, env),
      });
    });
}

/**
 * The global options a command pasted from this one's output needs to read the same store: `--env`
 * and `--data-dir` when they are not the defaults, a placeholder for a `--database-url` given on the
 * command line (never its value: it may hold a password). Options that came from the environment
 * hold in the same shell and are left out.
 */
export function sameStoreOptions(g: { env: string; dataDir: string; databaseUrl?: string | undefined }, env: NodeJS.ProcessEnv): string {
  const parts: string[] = [];
  if (g.env !== 'production' && env.ECAPI_ENV !== g.env) parts.push(`--env ${g.env}`);
  if (g.dataDir !== resolve('data') && (env.ECAPI_DATA_DIR === undefined || resolve(env.ECAPI_DATA_DIR) !== g.dataDir)) parts.push(`--data-dir ${shellWord(g.dataDir)}`);
  if (g.databaseUrl !== undefined && env.ECAPI_DATABASE_URL !== g.databaseUrl) parts.push('--database-url <the same URL>');
  return parts.map((p) => ` ${p}`).join('');
}

/** A path as one shell word: quoted when it holds anything but safe characters. */
function shellWord(path: string): string {
  return /^[\w./@%+=:,-]+$/.test(path) ? path : `'${path.replaceAll("'", "'\\''")}'`;
}
