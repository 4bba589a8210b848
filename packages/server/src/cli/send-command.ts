/**
 * `ecapi-ingest send`: sends events from an NDJSON or JSON file (or stdin) with the sender SDK
 * (@ecapi-ingest/client): hashing, validation, packing into 1,000-event / 1 MiB requests, signing,
 * retries. A live progress bar on a terminal, plain periodic lines otherwise (both on stderr), a
 * final summary (one JSON document on stdout with --json), and a non-zero exit code when anything
 * was rejected (1) or could not be delivered (3).
 *
 * Credentials come from ECAPI_URL, ECAPI_KEY_ID, ECAPI_SECRET and ECAPI_DATA_SET (preferred: a
 * --secret on the command line is visible to other users in `ps`), or from the options.
 * `send --demo` uses the demo data set's key of a local `npm start` server, read from the control
 * plane of the data dir (this machine holds the master key).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Option, type Command } from 'commander';
import type { EventResult, SendProgress, SendTotals } from '@ecapi-ingest/client';
import { DEFAULT_PORTS } from '../config.js';
import { DEMO_DATA_SET } from '../demo.js';
import { CliError } from './cli-io.js';
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

/** The progress line: events sent, accepted, rejected, rate and ETA. */
export function progressLine(p: SendProgress, options: { bar: boolean; width?: number }): string {
  const fraction = p.total === 0 ? 1 : p.done / p.total;
  const seconds = p.elapsedMs / 1000;
  const rate = seconds > 0 ? p.done / seconds : 0;
  const eta = rate > 0 ? (p.total - p.done) / rate : Infinity;
  const stats =
    `${num(p.done)}/${num(p.total)} sent, ${num(p.accepted)} accepted, ${num(p.rejected)} rejected` +
    (p.undeliverable > 0 ? `, ${num(p.undeliverable)} undeliverable` : '') +
    (p.retries > 0 ? `, ${num(p.retries)} retries` : '') +
    `, ${num(Math.round(rate))} events/s, ETA ${duration(eta)}`;
  if (!options.bar) return `send: ${stats}`;
  const width = options.width ?? 24;
  const filled = Math.round(fraction * width);
  return `[${'█'.repeat(filled)}${'░'.repeat(width - filled)}] ${String(Math.floor(fraction * 100)).padStart(3)}% ${stats}`;
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
      if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 256) throw new CliError(`invalid --concurrency "${opts.concurrency}": expected 1 to 256`);
      const maxRetries = Number(opts.maxRetries);
      if (!Number.isInteger(maxRetries) || maxRetries < 0) throw new CliError(`invalid --max-retries "${opts.maxRetries}": expected a whole number`);
      if (!dataSet) throw new CliError('missing data set: set ECAPI_DATA_SET or pass --data-set');
      if (!opts.dryRun) {
        const missing = [!url && 'ECAPI_URL (--url)', !keyId && 'ECAPI_KEY_ID (--key-id)', !secret && 'ECAPI_SECRET (--secret)'].filter(Boolean);
        if (missing.length > 0) throw new CliError(`missing ${missing.join(', ')}`);
      }

      // Input
      let records: InputRecord[];
      if (file === undefined) {
        if (!opts.demo) throw new CliError('no input: give FILE.ndjson, FILE.json or - (stdin), or use --demo');
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
          throw new CliError(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
        }
        records = parseInput(text, formatOf(file));
      }
      const events: unknown[] = [];
      const positions: number[] = [];
      records.forEach((r, i) => {
        if (r.parseError === undefined) {
          positions.push(i);
          events.push(r.event);
        }
      });
      const parseFailures = records.length - events.length;

      // Progress on stderr: a redrawn bar on a terminal, a plain line every few seconds otherwise.
      const showProgress = opts.progress && !opts.dryRun;
      let latest: SendProgress | undefined;
      let lastLineAt = Date.now();
      const draw = (final: boolean) => {
        if (!latest || !showProgress) return;
        if (isTty) stderr.write(`\r\x1b[2K${progressLine(latest, { bar: true })}${final ? '\n' : ''}`);
        else if (final || Date.now() - lastLineAt >= 2000) {
          lastLineAt = Date.now();
          stderr.write(`${progressLine(latest, { bar: false })}\n`);
        }
      };
      const timer = showProgress ? setInterval(() => draw(false), isTty ? 100 : 500) : undefined;
      timer?.unref();

      let results: EventResult[];
      let totals: SendTotals;
      let durationMs: number;
      const started = Date.now();
      const hash = opts.hash ? { defaultRegion: opts.phoneRegion } : false;
      if (opts.dryRun) {
        const prep = prepareEvents(events, { dataSetId: dataSet, hash, validate: true });
        const rejectedIdx = new Set(prep.rejected.map((r) => r.index));
        results = [...prep.rejected];
        totals = {
          total: events.length,
          accepted: events.length - rejectedIdx.size,
          rejected: rejectedIdx.size,
          undeliverable: 0,
          requests: prep.requests.length,
          retries: 0,
        };
        durationMs = Date.now() - started;
      } else {
        let ca: string | undefined;
        const host = new URL(url!).hostname;
        const caFile = opts.ca ?? (opts.demo || LOCAL_HOSTS.has(host) ? join(g.dataDir, 'tls', 'localhost-cert.pem') : undefined);
        if (caFile !== undefined) {
          if (opts.ca !== undefined || existsSync(caFile)) {
            try {
              ca = readFileSync(caFile, 'utf8');
            } catch (error) {
              throw new CliError(`cannot read CA certificate ${caFile}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
            }
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
          const result = await client.send(events as Record<string, unknown>[]);
          results = result.results.filter((r) => r.status !== 'accepted');
          totals = result;
          durationMs = result.durationMs;
        } finally {
          await client.close();
          if (timer) clearInterval(timer);
        }
        draw(true);
      }

      // Lines that were not JSON count as rejected.
      const allTotals: SendTotals = { ...totals, total: totals.total + parseFailures, rejected: totals.rejected + parseFailures };

      let rejectsFile: string | null = null;
      if (opts.rejects !== undefined) {
        rejectsFile = resolve(opts.rejects);
        const lines: string[] = [];
        records.forEach((r) => {
          if (r.parseError !== undefined) lines.push(JSON.stringify({ line: r.line, status: 'rejected', id: null, error: r.parseError, raw: r.raw }));
        });
        for (const r of results) {
          if (r.status === 'accepted') continue;
          const record = records[positions[r.index]!]!;
          lines.push(JSON.stringify({
            line: record.line,
            index: r.index,
            status: r.status,
            id: r.id,
            error: r.error,
            ...(r.status === 'rejected' ? { http_status: r.httpStatus } : { attempts: r.attempts }),
            event: r.event,
          }));
        }
        writeFileSync(rejectsFile, lines.length > 0 ? lines.join('\n') + '\n' : '');
      }

      const summary = summaryJson(allTotals, { durationMs, dryRun: opts.dryRun, rejectsFile, url: opts.dryRun ? null : url!, dataSet });
      if (g.json) {
        ctx.out(JSON.stringify(summary));
      } else if (opts.dryRun) {
        ctx.out(`dry run: ${num(summary.total)} events, ${num(summary.accepted)} valid, ${num(summary.rejected)} invalid; would send ${num(summary.requests)} requests`);
      } else {
        ctx.out(
          `sent ${num(summary.total)} events in ${(durationMs / 1000).toFixed(1)} s (${num(summary.events_per_second ?? 0)} events/s): ` +
            `${num(summary.accepted)} accepted, ${num(summary.rejected)} rejected, ${num(summary.undeliverable)} undeliverable; ` +
            `${num(summary.requests)} requests, ${num(summary.retries)} retries`,
        );
      }
      if (!opts.dryRun || allTotals.rejected > 0) {
        // First reasons, so the cause is visible without the rejects file.
        const firstProblems = [...results].filter((r) => r.status !== 'accepted').slice(0, 3);
        if (!g.json) {
          for (const r of firstProblems) if (r.status === 'rejected' || r.status === 'undeliverable') stderr.write(`  event ${r.index}${r.id ? ` (${r.id})` : ''}: ${r.status}: ${r.error}\n`);
        }
      }
      if (allTotals.undeliverable > 0) {
        stderr.write(`error: ${num(allTotals.undeliverable)} events undeliverable, ${num(allTotals.rejected)} rejected${rejectsFile ? ` (see ${rejectsFile})` : ''}; resend them later, their ids are kept\n`);
        ctx.setExitCode(EXIT_UNDELIVERABLE);
      } else if (allTotals.rejected > 0) {
        stderr.write(`error: ${num(allTotals.rejected)} events ${opts.dryRun ? 'invalid' : 'rejected'}${rejectsFile ? ` (see ${rejectsFile})` : ''}\n`);
        ctx.setExitCode(EXIT_REJECTED);
      }
    });
}
