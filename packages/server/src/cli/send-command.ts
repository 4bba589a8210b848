/**
 * `ecapi-ingest send`: sends events from an NDJSON or JSON file (or stdin) with the sender SDK
 * (@ecapi-ingest/client): hashing, validation, packing into 1,000-event / 1 MiB requests, signing,
 * retries. A live progress bar on a terminal, plain periodic lines otherwise (both on stderr), a
 * final summary (one JSON document on stdout with --json), and the exit codes of the README:
 * 0 all accepted, 1 some rejected, 2 usage error, 3 some undeliverable (retry later), 4 stopped by
 * a request-level failure (credentials, grant, URL, TLS trust), reported once with its fix.
 *
 * Counts agree everywhere: a line that is not JSON is reported on stderr with its line number and
 * counts as rejected from the first progress line to the summary.
 *
 * Credentials come from ECAPI_URL, ECAPI_KEY_ID, ECAPI_SECRET and ECAPI_DATA_SET (preferred: a
 * --secret on the command line is visible to other users in `ps`), or from the options.
 * `send --demo` uses the demo data set's key of a local `npm start` server, read from the control
 * plane of the data dir (this machine holds the master key).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Option, type Command } from 'commander';
import type { DeliveryFailure, EventInput, EventResult, SendProgress, SendTotals } from '@ecapi-ingest/client';
import { DEFAULT_PORTS } from '../config.js';
import { DEMO_DATA_SET } from '../demo.js';
import { CliError, UsageError } from './cli-io.js';
import type { CliContext } from './cli-context.js';

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

/** One input record: a parsed event, or a line that is not JSON. */
interface InputRecord {
  readonly line: number | null;
  readonly event?: unknown;
  readonly parseError?: string;
  readonly raw?: string;
}

export const EXIT_REJECTED = 1;
export const EXIT_UNDELIVERABLE = 3;
export const EXIT_REQUEST_FAILURE = 4;
/** Per-event problems printed on stderr before "see --rejects". */
const MAX_PRINTED_PROBLEMS = 10;

/** Parses NDJSON (one event per line) or JSON (an event, an array of events, or {"events": [...]}). */
export function parseInput(text: string, format: 'ndjson' | 'json' | 'auto'): InputRecord[] {
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  if (format !== 'ndjson') {
    try {
      const value = JSON.parse(body) as unknown;
      if (Array.isArray(value)) return value.map((event) => ({ line: null, event }));
      if (value && typeof value === 'object' && Array.isArray((value as { events?: unknown }).events) && Object.keys(value).length === 1) {
        return ((value as { events: unknown[] }).events).map((event) => ({ line: null, event }));
      }
      return [{ line: null, event: value }];
    } catch (error) {
      if (format === 'json') throw new CliError(`input is not valid JSON: ${(error as Error).message}`);
    }
  }
  const records: InputRecord[] = [];
  const lines = body.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!.trim();
    if (raw === '') continue;
    try {
      records.push({ line: i + 1, event: JSON.parse(raw) as unknown });
    } catch (error) {
      records.push({ line: i + 1, parseError: `invalid JSON on line ${i + 1}: ${(error as Error).message}`, raw });
    }
  }
  return records;
}

function formatOf(file: string): 'ndjson' | 'json' | 'auto' {
  if (/\.(ndjson|jsonl)$/i.test(file)) return 'ndjson';
  if (/\.json$/i.test(file)) return 'json';
  return 'auto';
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

const LOCAL_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

const num = (n: number) => n.toLocaleString('en-US');

function duration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '--:--';
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

/** The progress numbers in order of importance: a narrow terminal drops them from the end. */
function progressParts(p: SendProgress): string[] {
  const seconds = p.elapsedMs / 1000;
  const rate = seconds > 0 ? p.done / seconds : 0;
  const eta = rate > 0 ? (p.total - p.done) / rate : Infinity;
  return [
    `${num(p.done)}/${num(p.total)} done`,
    `${num(p.accepted)} accepted`,
    `${num(p.rejected)} rejected`,
    ...(p.undeliverable > 0 ? [`${num(p.undeliverable)} undeliverable`] : []),
    ...(p.retries > 0 ? [`${num(p.retries)} retries`] : []),
    `${num(Math.round(rate))} events/s`,
    `ETA ${duration(eta)}`,
  ];
}

const MIN_BAR = 10;
const MAX_BAR = 30;

/**
 * The progress line. Off a terminal (`bar: false`), every number on one plain line. On a terminal,
 * a bar and as many numbers as fit in `columns - 1` characters (the last column is left free: a
 * line that fills it wraps on some terminals, and the next `\r` would redraw only the wrapped
 * part, leaving a stale line per update). Every character is one column wide (ASCII digits and
 * words, U+2588/U+2591 blocks), so the string length is the display width.
 */
export function progressLine(p: SendProgress, options: { bar: boolean; columns?: number | undefined }): string {
  const parts = progressParts(p);
  if (!options.bar) return `send: ${parts.join(', ')}`;
  const max = Math.max(1, (options.columns ?? 80) - 1);
  const fraction = p.total === 0 ? 1 : p.done / p.total;
  const percent = `${String(Math.floor(fraction * 100)).padStart(3)}%`;
  for (let n = parts.length; ; n--) {
    const stats = parts.slice(0, n).join(', ');
    const room = max - stats.length - percent.length - 4; // "[" "] " " "
    if (room >= MIN_BAR || n === 0) {
      const width = Math.max(0, Math.min(MAX_BAR, room));
      const filled = Math.round(fraction * width);
      const line = `[${'█'.repeat(filled)}${'░'.repeat(width - filled)}] ${percent} ${stats}`;
      return line.length <= max ? line : line.slice(0, max);
    }
  }
}

/** The input's lines that are not JSON counted in: rejected, and done, before anything is sent. */
function withParseFailures<T extends SendTotals & { done?: number }>(totals: T, parseFailures: number): T {
  const counted = { ...totals, total: totals.total + parseFailures, rejected: totals.rejected + parseFailures };
  if (totals.done !== undefined) counted.done = totals.done + parseFailures;
  return counted;
}

const plural = (n: number, one: string, many: string) => `${num(n)} ${n === 1 ? one : many}`;

/** One request-level failure, with what to change. */
export function failureAdvice(failure: DeliveryFailure, context: { url: string; dataSet: string; caFile: string | undefined; caFound: boolean; dataDir: string }): string {
  switch (failure.code) {
    case 'TLS': {
      const where = context.caFile === undefined
        ? 'no CA certificate was given (only the system CAs are trusted)'
        : context.caFound ? `the CA certificate ${context.caFile} did not sign the server's certificate`
          : `no CA certificate at ${context.caFile} (looked up under --data-dir ${context.dataDir})`;
      return `TLS: the server's certificate is not trusted (${failure.errorCode ?? failure.message}): ${where}. ` +
        `Pass --ca <file> with the server's certificate (a local server's is <data-dir>/tls/localhost-cert.pem), or --data-dir <the server's data dir>`;
    }
    case 'AUTHENTICATION':
      return `authentication failed: ${failure.message}. Check ECAPI_KEY_ID and ECAPI_SECRET (--key-id, --secret): an active key id and its current secret, exactly as issued`;
    case 'AUTHORIZATION':
      return `not authorized: ${failure.message}. The key has no grant for data set "${context.dataSet}": check ECAPI_DATA_SET (--data-set), or have the operator grant the key that data set`;
    case 'WRONG_URL':
      return `wrong URL: ${failure.message}. Nothing answers POST ${context.url.replace(/\/+$/, '')}/v1/events: check ECAPI_URL (--url), the service's base URL without /v1/events`;
    case 'HOST_NOT_FOUND':
      return `host not found: ${failure.message}. Check ECAPI_URL (--url)`;
    default:
      return failure.message;
  }
}

function summaryJson(totals: SendTotals, extra: { durationMs: number; dryRun: boolean; rejectsFile: string | null; url: string | null; dataSet: string }) {
  const seconds = extra.durationMs / 1000;
  return {
    ok: totals.accepted === totals.total,
    dry_run: extra.dryRun,
    url: extra.url,
    data_set: extra.dataSet,
    total: totals.total,
    accepted: totals.accepted,
    rejected: totals.rejected,
    undeliverable: totals.undeliverable,
    requests: totals.requests,
    retries: totals.retries,
    duration_ms: extra.durationMs,
    events_per_second: seconds > 0 ? Math.round(totals.total / seconds) : null,
    rejects_file: extra.rejectsFile,
  };
}

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
    .option('--dry-run', 'validate only; send nothing', false)
    .option('--rejects <file>', 'write rejected and undeliverable events with their reasons (NDJSON)')
    .option('--ca <file>', 'trust this PEM CA certificate (default for --demo or a localhost URL: <data-dir>/tls/localhost-cert.pem)')
    .option('--demo', 'send a signed sample event to the local server with the demo data set\'s key', false)
    .addOption(new Option('--concurrency <n>', 'requests in flight').default('4'))
    .addOption(new Option('--max-retries <n>', 'retries of a request after a 5xx, network error or time-out').default('6'))
    .option('--no-progress', 'no progress output on stderr')
    .action(async (file: string | undefined, opts: SendOptions) => {
      // Loaded here, not at start: every other command would pay for the SDK (undici, Ajv, phone metadata).
      const { Client, hashEvent, prepareEvents } = await import('@ecapi-ingest/client');
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
      if (!dataSet) throw new UsageError('missing data set: set ECAPI_DATA_SET or pass --data-set');
      if (!opts.dryRun) {
        const missing = [!url && 'ECAPI_URL (--url)', !keyId && 'ECAPI_KEY_ID (--key-id)', !secret && 'ECAPI_SECRET (--secret)'].filter(Boolean);
        if (missing.length > 0) throw new UsageError(`missing ${missing.join(', ')}`);
      }

      // Input
      let records: InputRecord[];
      if (file === undefined) {
        if (!opts.demo) throw new UsageError('no input: give FILE.ndjson, FILE.json or - (stdin), or use --demo');
        const now = Math.floor(Date.now() / 1000);
        const sample = hashEvent({
          data_set_id: dataSet,
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
      /** --demo: the id of the sample event, which the README's next step looks up. */
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
        try {
          const result = await client.send(events);
          results = result.results.filter((r) => r.status !== 'accepted');
          totals = result;
          durationMs = result.durationMs;
          failure = result.failure;
          const first = result.results[0];
          if (opts.demo && first?.status === 'accepted') demoId = first.id;
          latest = { ...result, done: result.total, elapsedMs: result.durationMs };
        } finally {
          await client.close();
          if (timer) clearInterval(timer);
        }
        draw(true);
      }

      const allTotals = withParseFailures(totals, parseFailures);

      let rejectsFile: string | null = null;
      if (opts.rejects !== undefined) {
        rejectsFile = resolve(opts.rejects);
        const lines: string[] = [];
        for (const r of parseProblems) lines.push(JSON.stringify({ line: r.line, status: 'rejected', id: null, code: 'INVALID_JSON', error: r.parseError, raw: r.raw }));
        for (const r of results) {
          if (r.status === 'accepted') continue;
          lines.push(JSON.stringify({
            line: lineOf(r.index),
            index: r.index,
            status: r.status,
            id: r.id,
            code: r.error.code,
            error: r.error.message,
            ...(r.status === 'rejected' ? { http_status: r.httpStatus } : { attempts: r.attempts }),
            event: r.event,
          }));
        }
        writeFileSync(rejectsFile, lines.length > 0 ? lines.join('\n') + '\n' : '');
      }

      const advice = failure === undefined ? undefined
        : failureAdvice(failure, { url: url!, dataSet, caFile, caFound, dataDir: g.dataDir });
      const summary = {
        ...summaryJson(allTotals, { durationMs, dryRun: opts.dryRun, rejectsFile, url: opts.dryRun ? null : url!, dataSet }),
        failure: failure === undefined ? null : { code: failure.code, http_status: failure.httpStatus, message: advice },
        ...(opts.demo ? { event_id: demoId } : {}),
      };
      if (g.json) {
        ctx.out(JSON.stringify(summary));
      } else if (opts.dryRun) {
        ctx.out(`dry run: ${num(summary.total)} events, ${num(summary.accepted)} valid, ${num(summary.rejected)} invalid; would send ${num(summary.requests)} requests`);
      } else {
        const seconds = (durationMs / 1000).toFixed(1);
        ctx.out(
          `${plural(summary.total, 'event', 'events')} in ${seconds} s: ${num(summary.accepted)} accepted, ${num(summary.rejected)} rejected, ${num(summary.undeliverable)} undeliverable; ` +
            `${plural(summary.requests, 'request', 'requests')}, ${plural(summary.retries, 'retry', 'retries')}`,
        );
        if (demoId !== null) {
          ctx.out(`event id: ${demoId}\nSee it in the merged view in a moment: npx ecapi-ingest events get ${dataSet} ${demoId}`);
        }
      }
      // Under a request-level failure every undeliverable event has that one error: said once, below.
      const problems = results.filter((r): r is Exclude<EventResult, { status: 'accepted' }> =>
        r.status === 'rejected' || (r.status === 'undeliverable' && failure === undefined));
      for (const r of problems.slice(0, MAX_PRINTED_PROBLEMS)) {
        const line = lineOf(r.index);
        stderr.write(`  ${line !== null ? `line ${line}` : `event ${r.index}`}${r.id ? ` (id ${r.id})` : ''}: ${r.status}: ${r.error.message}\n`);
      }
      if (problems.length > MAX_PRINTED_PROBLEMS) stderr.write(`  … and ${num(problems.length - MAX_PRINTED_PROBLEMS)} more${rejectsFile ? ` (see ${rejectsFile})` : ' (--rejects FILE writes them all)'}\n`);
      if (failure !== undefined) {
        // One request-level failure: said once, with its fix; never as N per-event errors.
        stderr.write(`error: ${advice}. Nothing more was sent: ${num(allTotals.undeliverable)} events not delivered${rejectsFile ? ` (see ${rejectsFile})` : ''}; resend them after the fix, their ids are kept\n`);
        ctx.setExitCode(EXIT_REQUEST_FAILURE);
      } else if (allTotals.undeliverable > 0) {
        stderr.write(`error: ${num(allTotals.undeliverable)} events undeliverable, ${num(allTotals.rejected)} rejected${rejectsFile ? ` (see ${rejectsFile})` : ''}; resend them later, their ids are kept\n`);
        ctx.setExitCode(EXIT_UNDELIVERABLE);
      } else if (allTotals.rejected > 0) {
        stderr.write(`error: ${num(allTotals.rejected)} events ${opts.dryRun ? 'invalid' : 'rejected'}${rejectsFile ? ` (see ${rejectsFile})` : ''}\n`);
        ctx.setExitCode(EXIT_REJECTED);
      }
    });
}
