/**
 * The outcome of `ecapi-ingest send`: the --rejects file, the summary (one JSON document on stdout
 * with --json), the per-event problems and request-level failure on stderr, and the exit code.
 *
 * Invariants and hazards:
 * - Exit codes are the sender guide's (docs/guides/sender.md): 0 all accepted, 1 some rejected, 3 some undeliverable (retry
 *   later), 4 stopped by a request-level failure (2, usage, is thrown before anything is sent).
 *   The worst outcome wins: a request-level failure over undeliverable over rejected.
 * - Counts agree everywhere: input lines that are not JSON are counted as rejected (and done) in
 *   every total, progress line, summary and exit code (withParseFailures).
 * - A request-level failure (credentials, grant, URL, TLS trust, unknown host) is said once, with
 *   what to change (failureAdvice), never as one error per undeliverable event.
 * - The rejects file holds events as sent (hashed, with their ids): resending them cannot create
 *   a duplicate. It is written even when empty: no stale file of an earlier run
 *   survives under this run's name.
 */
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { DeliveryFailure, EventResult, SendTotals } from '@ecapi-ingest/client';
import type { CliContext } from './cli-context.js';
import type { InputRecord } from './send-input.js';
import { num } from './send-progress.js';

export const EXIT_REJECTED = 1;
export const EXIT_UNDELIVERABLE = 3;
export const EXIT_REQUEST_FAILURE = 4;
/** Interrupted by SIGINT/SIGTERM (the shell's 128 + SIGINT). */
export const EXIT_INTERRUPTED = 130;
/** Per-event problems printed on stderr before "see --rejects". */
export const MAX_PRINTED_PROBLEMS = 10;

/** The input's lines that are not JSON counted in: rejected, and done, before anything is sent. */
export function withParseFailures<T extends SendTotals & { done?: number }>(totals: T, parseFailures: number): T {
  const counted = { ...totals, total: totals.total + parseFailures, rejected: totals.rejected + parseFailures };
  if (totals.done !== undefined) counted.done = totals.done + parseFailures;
  return counted;
}

const plural = (n: number, one: string, many: string) => `${num(n)} ${n === 1 ? one : many}`;

/** One request-level failure, with what to change (in the CLI's terms: its flags, not the SDK's options). */
export function failureAdvice(failure: DeliveryFailure, context: { url: string; dataSet: string; caFile: string | undefined; caFound: boolean; dataDir: string; demo?: boolean; env?: string }): string {
  // The SDK's message names its own options (baseUrl, ca); the CLI says which flag to change instead.
  const detail = failure.detail ?? failure.message;
  const eventsUrl = `${context.url.replace(/\/+$/, '')}/v1/events`;
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
      return `wrong URL: ${detail}. Nothing answers POST ${eventsUrl}: check ECAPI_URL (--url), the service's base URL without /v1/events, like https://ingest.example.com or https://127.0.0.1:8443`;
    case 'HOST_NOT_FOUND':
      return `host not found: ${detail}. Check ECAPI_URL (--url)`;
    case 'CONNECTION_REFUSED':
      // Nothing listens there: said at once (no retries), with the URL tried and the flag to change.
      return context.demo
        ? `connection refused at ${eventsUrl}: no server listens there. send --demo sends to the default port of a local ${context.env ?? 'production'} server; ` +
          `for a server on another port pass --url https://127.0.0.1:<port> (serve prints its port at start), or start one with npm start`
        : `connection refused at ${eventsUrl}: no server listens there. Check ECAPI_URL (--url): the service's host and port, like https://ingest.example.com or https://127.0.0.1:8443, and that the service runs`;
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

/** Writes the --rejects file (NDJSON): input lines that are not JSON, then every event not accepted; returns its absolute path. */
export function writeRejects(file: string, parseProblems: readonly InputRecord[], results: readonly EventResult[], lineOf: (index: number) => number | null): string {
  const rejectsFile = resolve(file);
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
  return rejectsFile;
}

/** What a finished (or dry) run of `send` has to report. */
export interface SendOutcome {
  readonly json: boolean;
  readonly dryRun: boolean;
  readonly demo: boolean;
  /** Totals with the input's lines that are not JSON counted in (withParseFailures). */
  readonly totals: SendTotals;
  readonly durationMs: number;
  /** Events not accepted (a dry run: those rejected locally). */
  readonly results: readonly EventResult[];
  readonly lineOf: (index: number) => number | null;
  readonly rejectsFile: string | null;
  readonly failure: DeliveryFailure | undefined;
  /** For failureAdvice(). */
  readonly url: string | undefined;
  readonly dataSet: string;
  readonly caFile: string | undefined;
  readonly caFound: boolean;
  readonly dataDir: string;
  /** --env, for the --demo advice. */
  readonly env?: string;
  /** --demo: the id of the sample event, which the README quickstart's next step looks up. */
  readonly demoId: string | null;
  /** The global options the look-up of the demo event needs to read the same environment (`--env test`, `--data-dir ...`): empty for the defaults. */
  readonly sameStore?: string;
}

/** Prints the summary (stdout) and the problems (stderr), and sets the exit code. */
export function reportSend(ctx: CliContext, o: SendOutcome): void {
  const stderr = ctx.io.stderr;
  const { totals: allTotals, durationMs, dryRun, rejectsFile, failure, results, lineOf, url, dataSet, demoId } = o;
  const advice = failure === undefined ? undefined
    : failureAdvice(failure, { url: url!, dataSet, caFile: o.caFile, caFound: o.caFound, dataDir: o.dataDir, demo: o.demo, env: o.env });
  const summary = {
    ...summaryJson(allTotals, { durationMs, dryRun, rejectsFile, url: dryRun ? null : url!, dataSet }),
    failure: failure === undefined ? null : { code: failure.code, http_status: failure.httpStatus, message: advice },
    ...(o.demo ? { event_id: demoId } : {}),
  };
  if (o.json) {
    ctx.out(JSON.stringify(summary));
  } else if (dryRun) {
    ctx.out(`dry run: ${num(summary.total)} events, ${num(summary.accepted)} valid, ${num(summary.rejected)} invalid; would send ${num(summary.requests)} requests`);
  } else {
    const seconds = (durationMs / 1000).toFixed(1);
    ctx.out(
      `${plural(summary.total, 'event', 'events')} in ${seconds} s: ${num(summary.accepted)} accepted, ${num(summary.rejected)} rejected, ${num(summary.undeliverable)} undeliverable; ` +
        `${plural(summary.requests, 'request', 'requests')}, ${plural(summary.retries, 'retry', 'retries')}`,
    );
    if (demoId !== null) {
      ctx.out(`event id: ${demoId}\nSee it in the merged view in a moment: npx ecapi-ingest${o.sameStore ?? ''} events get ${dataSet} ${demoId}`);
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
  if (failure?.code === 'ABORTED') {
    stderr.write(`interrupted: ${plural(allTotals.undeliverable, 'event', 'events')} not delivered${rejectsFile ? ` (see ${rejectsFile})` : ' (--rejects FILE writes them)'}; resend ${allTotals.undeliverable === 1 ? 'it, its id is kept' : 'them, their ids are kept'} (a request in flight may have been stored: resending is safe)\n`);
    ctx.setExitCode(EXIT_INTERRUPTED);
  } else if (failure !== undefined) {
    // One request-level failure: said once, with its fix; never as N per-event errors.
    stderr.write(`error: ${advice}. Nothing more was sent: ${plural(allTotals.undeliverable, 'event', 'events')} not delivered${rejectsFile ? ` (see ${rejectsFile})` : ''}; ${allTotals.undeliverable === 1 ? 'resend it after the fix, its id is kept' : 'resend them after the fix, their ids are kept'}\n`);
    ctx.setExitCode(EXIT_REQUEST_FAILURE);
  } else if (allTotals.undeliverable > 0) {
    stderr.write(`error: ${plural(allTotals.undeliverable, 'event', 'events')} undeliverable, ${num(allTotals.rejected)} rejected${rejectsFile ? ` (see ${rejectsFile})` : ''}; resend them later, their ids are kept\n`);
    ctx.setExitCode(EXIT_UNDELIVERABLE);
  } else if (allTotals.rejected > 0) {
    stderr.write(`error: ${plural(allTotals.rejected, 'event', 'events')} ${dryRun ? 'invalid' : 'rejected'}${rejectsFile ? ` (see ${rejectsFile})` : ''}\n`);
    ctx.setExitCode(EXIT_REJECTED);
  }
}
