/**
 * The balanced pipeline (issue 15, item 2): `serve` with its consumer (the defaults: what `npm
 * start` runs), offered a FIXED rate of signed, distinct 100-event batches for 60 s, with the
 * consumer's lag (records and seconds, from the admin port's /metrics) sampled every second.
 *
 * A rate passes when, throughout, the lag stays under 5 s; after the load stops the lag returns to
 * 0 within 5 s; the service accepted every request (no non-2xx, no error) and the generator held
 * the rate (at least 97% of the offered events were sent and accepted within the run). The result is
 * the highest passing rate found by a search: from BENCH_PIPELINE_START (5,000 events/s) double while
 * passing up to BENCH_PIPELINE_MAX (100,000), then bisect between the highest pass and lowest fail
 * until they are within 10% or BENCH_PIPELINE_STEPS (7) runs were made. A run that breaks the lag
 * bound stops at once (its failure is known). Each run gets a fresh data dir and service. The
 * target is 50,000 events/s.
 *
 * The load generator holds a rate (wrk cannot; wrk2 is not packaged): requests are due at fixed
 * times and sent when due over up to 64 keep-alive TLS connections; when the service answers slower
 * than the rate, owed requests are sent as soon as a connection is free (at most 256 in flight), so
 * a service that cannot keep up shows as a rate not held, never as a lower offered rate. Bodies are
 * distinct: a few pre-built 100-event templates whose event ids carry the request number and whose
 * email, phone and customer-id hashes carry one of 4,096 user slots (409,600 users who come back),
 * patched in place and HMAC-signed per request.
 *
 * Env: BENCH_PIPELINE_SECONDS (60) per run, BENCH_PIPELINE_START, BENCH_PIPELINE_MAX,
 * BENCH_PIPELINE_STEPS, BENCH_PIPELINE_RATES (a comma list of events/s to run instead of the search).
 */
import { createHash, createHmac } from 'node:crypto';
import { rmSync } from 'node:fs';
import { Agent, request as httpsRequest } from 'node:https';
import { request as httpRequest } from 'node:http';
import { cliJson, provision, startServer, tempDataDir } from '../test/helpers/server-process.js';
import { UNLIMITED } from './bench-service.js';
import { sampleRss } from './proc-stats.js';

const DS = 'bench';
const EVENTS_PER_REQUEST = 100;
const TEMPLATES = 8;
const LAG_BOUND_SECONDS = 5;
const DRAIN_BOUND_SECONDS = 5;
const MAX_SOCKETS = 64;
const MAX_IN_FLIGHT = 256;

const REQ_MARK = '#########'; // 9 decimal digits: the request number
const USER_MARK = '%%%%%'; // 5 hex digits: the user slot

const sha = (text: string) => createHash('sha256').update(text).digest('hex');

interface Template {
  readonly bytes: Buffer;
  readonly reqAt: number[];
  readonly userAt: number[];
}

function offsetsOf(buffer: Buffer, mark: string): number[] {
  const at: number[] = [];
  for (let i = buffer.indexOf(mark); i !== -1; i = buffer.indexOf(mark, i + mark.length)) at.push(i);
  return at;
}

function buildTemplates(run: string): Template[] {
  const now = Math.floor(Date.now() / 1000);
  const templates: Template[] = [];
  for (let t = 0; t < TEMPLATES; t++) {
    const events = Array.from({ length: EVENTS_PER_REQUEST }, (_, j) => {
      const n = t * EVENTS_PER_REQUEST + j;
      // A 64-hex hash whose last 5 digits are the user slot.
      const hashed = (kind: string) => `${sha(`${kind}-${j}`).slice(0, 59)}${USER_MARK}`;
      return {
        data_set_id: DS,
        id: `${run}-${REQ_MARK}-${j}`,
        timestamp: now - (n % 600),
        event_type: n % 5 === 0 ? 'add_to_cart' : 'purchase',
        value: 10 + (n % 990) / 10,
        currency_code: 'USD',
        source: 'website',
        user_data: {
          email_address: [hashed('email')],
          phone_numbers: [hashed('phone')],
          customer_identifier: hashed('customer'),
          address: [{ postal_code: sha(String(10_000 + (n % 5000))), city: 'new york', country_code: 'us' }],
          event_ip_address: `203.0.113.${n % 250}`,
          event_user_agent: 'Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0',
          click_id: `clk-${REQ_MARK}-${j}`,
        },
        properties: {
          transaction_id: `tx-${REQ_MARK}-${j}`,
          page_url: 'https://shop.example/checkout/complete',
          items: [{ id: `sku-${n % 300}`, name: 'Trail running shoe', price: 89.5, quantity: 1 }],
        },
      };
    });
    const bytes = Buffer.from(JSON.stringify({ events }));
    templates.push({ bytes, reqAt: offsetsOf(bytes, REQ_MARK), userAt: offsetsOf(bytes, USER_MARK) });
  }
  return templates;
}

/** Body number `i`: a template with the request number and user slot written in. */
function bodyOf(templates: readonly Template[], i: number): Buffer {
  const t = templates[i % templates.length]!;
  const body = Buffer.from(t.bytes);
  const req = String(i).padStart(9, '0');
  const user = (i % 4096).toString(16).padStart(5, '0');
  for (const at of t.reqAt) body.write(req, at, 'latin1');
  for (const at of t.userAt) body.write(user, at, 'latin1');
  return body;
}

interface LagSample {
  readonly t: number;
  readonly records: number;
  readonly seconds: number;
}

function getText(port: number, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, method: 'GET' }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c)).on('end', () => resolve(text));
    });
    req.on('error', reject);
    req.setTimeout(5000, () => req.destroy(new Error('metrics timeout')));
    req.end();
  });
}

async function lagOf(adminPort: number): Promise<{ records: number; seconds: number }> {
  const text = await getText(adminPort, '/metrics');
  const value = (name: string) => Number(new RegExp(`^${name} ([\\d.eE+-]+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  return { records: value('ecapi_consumer_lag_records'), seconds: value('ecapi_consumer_lag_seconds') };
}

/** POSTs a signed body to /v1/events; `done` gets the status, or null and the error's message. */
export function postBody(
  agent: Agent,
  port: number,
  creds: { keyId: string; secret: string },
  dataSetId: string,
  body: Buffer,
  done: (status: number | null, error?: string) => void,
): void {
  const req = httpsRequest(
    {
      host: '127.0.0.1', servername: 'localhost', port, agent, method: 'POST', path: '/v1/events',
      headers: {
        'content-type': 'application/json', accept: 'application/json', 'x-service-key-id': creds.keyId, 'x-service-data-set': dataSetId,
        'x-service-signature': createHmac('sha256', creds.secret).update(body).digest('hex'), 'content-length': body.length,
      },
    },
    (res) => {
      res.resume();
      res.on('end', () => done(res.statusCode ?? null));
    },
  );
  req.on('error', (error) => done(null, error.message));
  req.end(body);
}

export interface PipelineRun {
  readonly offered_events_per_second: number;
  readonly seconds_planned: number;
  /** Seconds the load ran (shorter when the lag bound broke). */
  readonly seconds_run: number;
  /** Events answered 200, per second from the start of the load to the last answer. */
  readonly accepted_events_per_second: number;
  readonly requests_ok: number;
  readonly requests_failed: number;
  /** Requests of the planned run never sent: the run stopped early, or the service was too slow to take them in time. */
  readonly requests_owed: number;
  readonly max_lag_seconds: number;
  readonly max_lag_records: number;
  /** Seconds from the end of the load until lag_records was 0 (null: not within 30 s). */
  readonly drain_seconds: number | null;
  readonly peak_rss_mb: { sum: number; largest: number };
  readonly pass: boolean;
  readonly why: string;
  /** lag_seconds sampled every second. */
  readonly lag_seconds_samples: number[];
}

/** One fixed-rate run against a fresh `serve` (with its consumer). */
export async function runPipelineAt(eventsPerSecond: number, seconds: number, log: (line: string) => void = () => undefined): Promise<PipelineRun> {
  const dataDir = tempDataDir('ecapi-bench-pipeline-');
  const creds = await provision(dataDir, [DS]);
  await cliJson(dataDir, ['data-set', 'limits', DS, ...UNLIMITED]);
  const server = await startServer({ dataDir });
  // Measure from a running consumer (its process starts beside the server's): wait for its heartbeat.
  for (const deadline = Date.now() + 30_000; !(await cliJson(dataDir, ['worker', 'status'])).running; ) {
    if (Date.now() > deadline) throw new Error('the consumer did not start within 30 s');
    await new Promise((r) => setTimeout(r, 200));
  }
  const templates = buildTemplates(`p${Date.now().toString(36)}`);
  const agent = new Agent({ keepAlive: true, maxSockets: MAX_SOCKETS, ca: server.ca, minVersion: 'TLSv1.3' });
  const requestsPerSecond = eventsPerSecond / EVENTS_PER_REQUEST;
  const total = Math.round(requestsPerSecond * seconds);
  const samples: LagSample[] = [];
  let ok = 0;
  let failed = 0;
  let firstFailure = '';
  let inFlight = 0;
  let sent = 0;
  let aborted = '';
  const stopRss = sampleRss(server.child.pid!, { relist: true });
  const started = performance.now();

  const send = (i: number) => {
    inFlight++;
    postBody(agent, server.port, creds, DS, bodyOf(templates, i), (status, error) => {
      inFlight--;
      if (status === 200) ok++;
      else {
        failed++;
        firstFailure ||= error ?? `HTTP ${status}`;
      }
    });
  };

  // Lag, every second, while the load runs.
  const sampler = setInterval(() => {
    const t = (performance.now() - started) / 1000;
    lagOf(server.adminPort).then(
      (lag) => {
        samples.push({ t, ...lag });
        if (lag.seconds >= LAG_BOUND_SECONDS && !aborted) aborted = `lag ${lag.seconds} s after ${t.toFixed(0)} s`;
      },
      (error: Error) => {
        if (!aborted) aborted = `metrics: ${error.message}`;
      },
    );
  }, 1000);

  try {
    // Send what is due; never more than MAX_IN_FLIGHT at once (the rest is owed, sent when possible).
    while (sent < total && !aborted) {
      const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * requestsPerSecond) + 1);
      while (sent < due && inFlight < MAX_IN_FLIGHT) send(sent++);
      await new Promise((r) => setTimeout(r, 2));
      if (performance.now() - started > (seconds + 5) * 1000) break; // owed requests past the run: rate not held
    }
    const loadEnded = performance.now();
    while (inFlight > 0) await new Promise((r) => setTimeout(r, 5));
    const answered = performance.now();
    clearInterval(sampler);
    const secondsRun = (loadEnded - started) / 1000;
    // Drain: from the last answer until the lag is 0.
    let drain: number | null = null;
    while (performance.now() - answered < 30_000) {
      const lag = await lagOf(server.adminPort).catch(() => null);
      if (lag && lag.records === 0) {
        drain = (performance.now() - answered) / 1000;
        break;
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    const peak = stopRss();
    const maxLagSeconds = Math.max(0, ...samples.map((s) => s.seconds));
    const maxLagRecords = Math.max(0, ...samples.map((s) => s.records));
    const acceptedRate = (ok * EVENTS_PER_REQUEST) / Math.max(secondsRun, (answered - started) / 1000);
    const owed = total - sent;
    const reasons: string[] = [];
    if (aborted) reasons.push(`stopped: ${aborted}`);
    if (maxLagSeconds >= LAG_BOUND_SECONDS) reasons.push(`lag reached ${maxLagSeconds} s`);
    if (drain === null || drain > DRAIN_BOUND_SECONDS) reasons.push(`lag back to 0 after ${drain === null ? '> 30' : drain.toFixed(1)} s`);
    if (failed > 0) reasons.push(`${failed} failed requests (${firstFailure})`);
    if (!aborted && ok * EVENTS_PER_REQUEST < 0.97 * eventsPerSecond * seconds) reasons.push(`rate not held: ${Math.round(acceptedRate)} events/s accepted, ${owed} requests owed`);
    const run: PipelineRun = {
      offered_events_per_second: eventsPerSecond,
      seconds_planned: seconds,
      seconds_run: Math.round(secondsRun * 10) / 10,
      accepted_events_per_second: Math.round(acceptedRate),
      requests_ok: ok,
      requests_failed: failed,
      requests_owed: owed,
      max_lag_seconds: maxLagSeconds,
      max_lag_records: maxLagRecords,
      drain_seconds: drain === null ? null : Math.round(drain * 10) / 10,
      peak_rss_mb: peak,
      pass: reasons.length === 0,
      why: reasons.join('; ') || 'lag < 5 s throughout, back to 0 within 5 s',
      lag_seconds_samples: samples.map((s) => Math.round(s.seconds * 10) / 10),
    };
    log(`pipeline: ${eventsPerSecond.toLocaleString('en-US')} events/s offered: ${run.pass ? 'PASS' : 'FAIL'} (${run.why}; max lag ${maxLagSeconds} s / ${maxLagRecords} records, drain ${run.drain_seconds ?? '>30'} s, accepted ${run.accepted_events_per_second.toLocaleString('en-US')} events/s)`);
    return run;
  } finally {
    clearInterval(sampler);
    stopRss();
    agent.destroy();
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export interface PipelineSearch {
  readonly target_events_per_second: number;
  readonly seconds_per_run: number;
  /** Highest offered rate that passed (0: none did). */
  readonly highest_passing_events_per_second: number;
  /** Lowest offered rate that failed (null: none did). */
  readonly lowest_failing_events_per_second: number | null;
  readonly target_met: boolean;
  readonly runs: PipelineRun[];
}

const roundRate = (r: number) => Math.max(500, Math.round(r / 500) * 500);

/** The search over fixed rates described at the top of this file. */
export async function searchPipeline(log: (line: string) => void = () => undefined): Promise<PipelineSearch> {
  const env = process.env;
  const seconds = Number(env.BENCH_PIPELINE_SECONDS ?? 60);
  const start = Number(env.BENCH_PIPELINE_START ?? 5000);
  const max = Number(env.BENCH_PIPELINE_MAX ?? 100_000);
  const steps = Number(env.BENCH_PIPELINE_STEPS ?? 7);
  const target = 50_000;
  const runs: PipelineRun[] = [];
  let pass = 0;
  let fail: number | null = null;
  const fixed = env.BENCH_PIPELINE_RATES?.split(',').map(Number).filter((n) => n > 0);
  const run = async (rate: number) => {
    const r = await runPipelineAt(rate, seconds, log);
    runs.push(r);
    if (r.pass) pass = Math.max(pass, rate);
    else fail = fail === null ? rate : Math.min(fail, rate);
    return r.pass;
  };
  if (fixed && fixed.length > 0) {
    for (const rate of fixed) await run(rate);
  } else {
    let rate = roundRate(start);
    while (runs.length < steps) {
      if (fail === null) {
        if (rate > max) break;
        await run(rate);
        if (fail === null) rate = roundRate(rate * 2);
        else if (pass === 0) rate = roundRate(rate / 2); // the first run failed: search downwards
        else rate = roundRate((pass + fail) / 2);
        continue;
      }
      if (pass === 0) {
        if (rate <= 500 && runs.some((r) => r.offered_events_per_second === 500)) break;
        if (await run(rate)) {
          if (fail !== null && (fail - pass) / pass <= 0.1) break;
          rate = roundRate((pass + (fail as number)) / 2);
        } else rate = roundRate(rate / 2);
        continue;
      }
      if (((fail as number) - pass) / pass <= 0.1) break;
      rate = roundRate((pass + (fail as number)) / 2);
      if (rate === pass || rate === fail) break;
      await run(rate);
    }
  }
  return {
    target_events_per_second: target,
    seconds_per_run: seconds,
    highest_passing_events_per_second: pass,
    lowest_failing_events_per_second: fail,
    target_met: pass >= target,
    runs,
  };
}
