/**
 * Prometheus metrics of one service instance. Each instance owns its Registry (never the global
 * one), so several services can live in one process, as they do in tests.
 * No label value comes from a sender: not data set ids, key ids, paths, header values or event
 * keys, authenticated or not. Labels are the server's own status codes, rejection reasons and
 * limit names, and field paths in their stored form (validation/stored-reason.ts: schema paths,
 * or a known prefix and `*`), all of bounded cardinality whatever senders send
 * (test/observability/prometheus-metrics.test.ts sends hostile values and reads every label).
 */
import type { EventErrorCode } from '@ecapi-ingest/protocol';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { QueueCommitObserver } from '../queue/event-queue.js';

export type RejectionReason = 'schema' | 'missing_field' | 'invalid_field' | 'not_hashed' | 'data_set_mismatch' | 'other';

/**
 * The metric label of a per-event rejection, from its registry code (the data the validator
 * produced, never its text). `data_set_mismatch` is an INVALID_FIELD the request path itself
 * produces and labels (http/events-request.ts), so it is not derived here.
 */
export function rejectionReasonOf(code: EventErrorCode): RejectionReason {
  switch (code) {
    case 'SCHEMA': return 'schema';
    case 'MISSING_FIELD': return 'missing_field';
    case 'INVALID_FIELD': return 'invalid_field';
    case 'NOT_HASHED': return 'not_hashed';
    default: return 'other';
  }
}

/**
 * Why the public port's pre-auth defences closed a connection on which no request had passed the
 * HMAC (http/public-tls-server.ts, http/early-answer.ts): the label of
 * ecapi_untrusted_connections_closed_total.
 */
export type UntrustedCloseReason =
  /** still untrusted --keep-alive-timeout after its handshake (the sweep: GOAWAY, end, or destroy when busy past its grace) */
  | 'deadline'
  /** the answer to its 3rd request refused without authentication (HTTP/2 GOAWAY, HTTP/1.1 Connection: close) */
  | 'refusals'
  /** past --max-connections: dropped as the oldest untrusted one, or refused (the new one) when none is untrusted */
  | 'connection_cap'
  /** past --max-pending-handshakes: dropped as the oldest connection still in its handshake */
  | 'handshake_cap';

const UNTRUSTED_CLOSE_REASONS: readonly UntrustedCloseReason[] = ['deadline', 'refusals', 'connection_cap', 'handshake_cap'];

/** Why an HTTP/2 request was refused with RST_STREAM REFUSED_STREAM (no answer, no status): the label of ecapi_http2_streams_refused_total. */
export type StreamRefusalLimit = 'body_wait';

/**
 * Why a connection to the public port ended before its TLS handshake completed: the label of
 * ecapi_tls_handshake_failures_total. From the TLS layer's error code (http/public-tls-server.ts,
 * handshakeFailureReasonOf: a closed mapping) or from what the first bytes were (http/connection-front.ts).
 */
export type HandshakeFailureReason =
  /** no first bytes, or no completed handshake, within --handshake-timeout */
  | 'timeout'
  /** the TLS layer refused the client's hello or records: TLS below 1.3, no cipher, group or ALPN protocol in common, bytes that are not TLS */
  | 'protocol'
  /** the client refused the server's certificate with an alert (unknown CA, bad, expired, revoked, unknown or unsupported certificate) */
  | 'certificate'
  /** the client closed or reset the connection mid-handshake (also a client that rejects the certificate without an alert, as Node's does) */
  | 'reset'
  /** a plain-HTTP request on the HTTPS port, answered with its 400 before any TLS */
  | 'plain_http'
  /** a PROXY protocol header from a peer outside --proxy-protocol's CIDRs (or without the option), or a malformed one */
  | 'proxy_header'
  /** any other error of the TLS layer */
  | 'other';

const HANDSHAKE_FAILURE_REASONS: readonly HandshakeFailureReason[] = ['timeout', 'protocol', 'certificate', 'reset', 'plain_http', 'proxy_header', 'other'];

/**
 * Which of the public port's timeouts or stall guards ended a request or a connection: the label of
 * ecapi_public_timeouts_total (http/public-tls-server.ts: Node's HTTP/1.1 timeouts and the idle
 * timeout; http/body-sweep.ts: the body guards and the HTTP/2 request timeout).
 */
export type PublicTimeout =
  /** HTTP/1.1: no complete request head within --headers-timeout (a new connection that sends nothing included); answered 408 */
  | 'headers'
  /** the request (head and body) not received within --request-timeout: HTTP/1.1 answered 408 and closed, HTTP/2 stream cancelled */
  | 'request'
  /** no body byte for --body-idle-timeout (after the head, or between chunks): dropped, logged `request dropped` */
  | 'body_idle'
  /** an untrusted body averaging less than --min-body-rate after that grace: dropped, logged `request dropped` */
  | 'body_rate'
  /** a connection with nothing sent either way for --keep-alive-timeout: closed (the normal end of an idle keep-alive connection) */
  | 'idle';

const PUBLIC_TIMEOUTS: readonly PublicTimeout[] = ['headers', 'request', 'body_idle', 'body_rate', 'idle'];

/** Which protocol layer refused what a client sent: the label of ecapi_protocol_errors_total. */
export type ProtocolErrorLayer =
  /** Node's HTTP/1.1 parser: a malformed request answered 400, 413 or 431 before any handler saw it */
  | 'http1'
  /** Node's HTTP/2 layer (nghttp2): a session ended with GOAWAY for the client's protocol error */
  | 'http2';

const PROTOCOL_ERROR_LAYERS: readonly ProtocolErrorLayer[] = ['http1', 'http2'];

const GAUGES_NAMED_TOTAL = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'] as const;

export class ServiceMetrics implements QueueCommitObserver {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'ecapi_requests_total',
    help: 'Requests answered on the public port, by HTTP status',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });
  readonly requestDuration = new Histogram({
    name: 'ecapi_request_duration_seconds',
    help: 'Time from request start to response end on the public port',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
  readonly eventsAccepted = new Counter({
    name: 'ecapi_events_accepted_total',
    help: 'Events durably queued',
    registers: [this.registry],
  });
  readonly eventsRejected = new Counter({
    name: 'ecapi_events_rejected_total',
    help: 'Events rejected in a 207 or 400 multi-status response, by reason',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly piiRedactions = new Counter({
    name: 'ecapi_pii_redactions_total',
    help: 'Plaintext identifiers redacted by the privacy policy, by field path (a schema path, or a known prefix and *)',
    labelNames: ['field'] as const,
    registers: [this.registry],
  });
  readonly queueAppendDuration = new Histogram({
    name: 'ecapi_queue_append_seconds',
    help: 'Time from handing a request to the queue until its commit was durable',
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });
  readonly commitRequests = new Histogram({
    name: 'ecapi_queue_commit_batch_requests',
    help: 'Requests sharing one queue commit (group commit)',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
    registers: [this.registry],
  });
  readonly commitEvents = new Histogram({
    name: 'ecapi_queue_commit_batch_events',
    help: 'Events in one queue commit',
    buckets: [1, 10, 100, 500, 1000, 2000, 5000, 10000, 20000],
    registers: [this.registry],
  });
  readonly commitDuration = new Histogram({
    name: 'ecapi_queue_commit_seconds',
    help: 'Duration of one queue transaction including its sync, measured on the writer thread',
    buckets: [0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25],
    registers: [this.registry],
  });
  readonly commitFailures = new Counter({
    name: 'ecapi_queue_commit_failures_total',
    help: 'Queue commits that failed; their requests were answered 500',
    registers: [this.registry],
  });
  readonly queueWritable = new Gauge({
    name: 'ecapi_queue_writable',
    help: '1 when the last queue commit succeeded, 0 after a failure until one succeeds',
    registers: [this.registry],
    aggregator: 'min',
  });
  readonly rateLimited = new Counter({
    name: 'ecapi_rate_limited_total',
    help: 'Requests answered 429, by limit (burst, requests, events, failed_auth, body_wait)',
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });
  /**
   * Pre-auth defences closing connections (http/public-tls-server.ts, http/early-answer.ts). Every
   * reason is exported from the start at 0, so that rate() sees the first close.
   */
  readonly untrustedConnectionsClosed = new Counter({
    name: 'ecapi_untrusted_connections_closed_total',
    help: 'Connections on the public port on which no request had passed the HMAC, closed by its defences, by reason: '
      + 'deadline (still untrusted --keep-alive-timeout after the handshake), refusals (the answer to its 3rd request refused without authentication), '
      + 'connection_cap (past --max-connections: the oldest untrusted one dropped, or the new one refused when none is untrusted), '
      + 'handshake_cap (past --max-pending-handshakes: the oldest still in its handshake dropped)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  /**
   * HTTP/2 requests refused with RST_STREAM REFUSED_STREAM. Not in ecapi_rate_limited_total, which
   * counts answers: each of those is also an ecapi_requests_total{status="429"} and a log line, and
   * the console shows it as "answered 429"; a reset stream has no status and no line.
   */
  readonly http2StreamsRefused = new Counter({
    name: 'ecapi_http2_streams_refused_total',
    help: 'HTTP/2 requests refused with RST_STREAM REFUSED_STREAM, unread and unanswered (the client may retry), by limit: '
      + 'body_wait (too many bodies of connections not yet authenticated wait for the body budget; '
      + 'on HTTP/1.1 the same refusal is a 429, in ecapi_rate_limited_total{limit="body_wait"}). No status: not in ecapi_requests_total',
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });
  /**
   * Connections that ended before their TLS handshake completed (http/public-tls-server.ts,
   * http/connection-front.ts). Counted on the error path only, from the error's code: a successful
   * handshake costs nothing here. Not counted: a connection its client closes before sending a byte
   * (a TCP health check, a port scan), and one dropped by the pending-handshake cap (that is
   * ecapi_untrusted_connections_closed_total{reason="handshake_cap"}).
   */
  readonly handshakeFailures = new Counter({
    name: 'ecapi_tls_handshake_failures_total',
    help: 'Connections to the public port that ended before their TLS handshake completed, by reason: '
      + 'timeout (no first bytes, or no completed handshake, within --handshake-timeout), '
      + 'protocol (refused by the TLS layer: TLS below 1.3, no cipher, group or ALPN protocol in common, bytes that are not TLS), '
      + 'certificate (the client refused the server certificate with an alert: unknown CA, bad, expired, revoked, unknown or unsupported certificate), '
      + 'reset (the client closed or reset the connection mid-handshake), '
      + 'plain_http (a plain-HTTP request, answered 400 before TLS), '
      + 'proxy_header (a PROXY protocol header from a peer not trusted by --proxy-protocol, or a malformed one), other. '
      + 'Not counted: connections closed by their client before any byte, and drops by --max-pending-handshakes (ecapi_untrusted_connections_closed_total)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  /**
   * Requests and connections ended by the public port's timeouts and stall guards
   * (http/public-tls-server.ts, http/body-sweep.ts), on their close path only.
   */
  readonly publicTimeouts = new Counter({
    name: 'ecapi_public_timeouts_total',
    help: 'Requests and connections of the public port ended by a timeout or a stall guard, by timeout: '
      + 'headers (HTTP/1.1: no complete request head within --headers-timeout; answered 408 and closed), '
      + 'request (head and body not received within --request-timeout: HTTP/1.1 answered 408 and closed, HTTP/2 stream cancelled), '
      + 'body_idle (no body byte for --body-idle-timeout: dropped unanswered), '
      + 'body_rate (a body of a connection not yet authenticated below --min-body-rate: dropped unanswered), '
      + 'idle (nothing sent either way for --keep-alive-timeout: closed; the normal end of an idle keep-alive connection). '
      + 'The 408s are not in ecapi_requests_total',
    labelNames: ['timeout'] as const,
    registers: [this.registry],
  });
  /** What Node's HTTP/1.1 parser and HTTP/2 layer refused on their own (http/public-tls-server.ts). */
  readonly protocolErrors = new Counter({
    name: 'ecapi_protocol_errors_total',
    help: 'What the public port\'s protocol layers refused before any request handler, by protocol: '
      + 'http1 (a malformed HTTP/1.1 request, answered 400, 413 or 431 by the parser and closed; not in ecapi_requests_total), '
      + 'http2 (an HTTP/2 session ended with GOAWAY for the client\'s protocol error: more concurrent streams than allowed, '
      + 'an invalid or oversized frame, a header block in too many CONTINUATION frames, the rapid-reset and flood mitigations)',
    labelNames: ['protocol'] as const,
    registers: [this.registry],
  });
  readonly credentialsVersion = new Gauge({
    name: 'ecapi_control_plane_version',
    help: 'Version of the control-plane snapshot the server is using',
    registers: [this.registry],
    aggregator: 'min',
  });

  /** Body bytes in flight and requests waiting for room (body-budget.ts), read at scrape time. */
  watchBodyBudget(budget: { readonly inFlight: number; readonly waiting: number }): void {
    new Gauge({
      name: 'ecapi_request_body_bytes_in_flight',
      help: 'Request-body bytes held by this process (reserved from the body budget)',
      registers: [this.registry],
      collect() {
        this.set(budget.inFlight);
      },
    });
    new Gauge({
      name: 'ecapi_requests_waiting_for_body_budget',
      help: 'Requests whose body is not read yet because the body budget is full',
      registers: [this.registry],
      collect() {
        this.set(budget.waiting);
      },
    });
  }

  /** Established connections of the public port, and those not yet trusted (http/public-tls-server.ts), read at scrape time. */
  watchConnections(source: { connections(): number; untrusted(): number }): void {
    new Gauge({
      name: 'ecapi_public_connections',
      help: 'TLS connections of the public port past their handshake (HTTP/1.1 connections and HTTP/2 sessions)',
      registers: [this.registry],
      collect() {
        this.set(source.connections());
      },
    });
    new Gauge({
      name: 'ecapi_untrusted_connections',
      help: 'Connections of the public port on which no request has passed the HMAC yet (closed at their deadline, after their 3rd refusal, or first past --max-connections)',
      registers: [this.registry],
      collect() {
        this.set(source.untrusted());
      },
    });
  }

  readonly #untrustedCloses = new Map<UntrustedCloseReason, { inc(): void }>(
    UNTRUSTED_CLOSE_REASONS.map((reason) => [reason, this.untrustedConnectionsClosed.labels(reason)]),
  );
  readonly #streamsRefused = this.http2StreamsRefused.labels('body_wait');
  readonly #handshakeFailures = new Map<HandshakeFailureReason, { inc(): void }>(
    HANDSHAKE_FAILURE_REASONS.map((reason) => [reason, this.handshakeFailures.labels(reason)]),
  );
  readonly #timeouts = new Map<PublicTimeout, { inc(): void }>(PUBLIC_TIMEOUTS.map((timeout) => [timeout, this.publicTimeouts.labels(timeout)]));
  readonly #protocolErrors = new Map<ProtocolErrorLayer, { inc(): void }>(
    PROTOCOL_ERROR_LAYERS.map((protocol) => [protocol, this.protocolErrors.labels(protocol)]),
  );

  /** Counts a connection closed by a pre-auth defence. */
  countDefenceClose(reason: UntrustedCloseReason): void {
    this.#untrustedCloses.get(reason)!.inc();
  }

  /** Counts an HTTP/2 request refused with REFUSED_STREAM. */
  countStreamRefused(limit: StreamRefusalLimit): void {
    if (limit === 'body_wait') this.#streamsRefused.inc();
  }

  /** Counts a connection that ended before its TLS handshake completed. */
  countHandshakeFailure(reason: HandshakeFailureReason): void {
    this.#handshakeFailures.get(reason)!.inc();
  }

  /** Counts a request or connection ended by a timeout or a stall guard of the public port. */
  countTimeout(timeout: PublicTimeout): void {
    this.#timeouts.get(timeout)!.inc();
  }

  /** Counts what a protocol layer (Node's HTTP/1.1 parser, its HTTP/2 layer) refused on its own. */
  countProtocolError(protocol: ProtocolErrorLayer): void {
    this.#protocolErrors.get(protocol)!.inc();
  }

  readonly #requestsByStatus = new Map<number, { inc(): void }>();

  /** Counts one answered request; label children are cached (label hashing per request adds up). */
  countRequest(status: number): void {
    let child = this.#requestsByStatus.get(status);
    if (!child) this.#requestsByStatus.set(status, (child = this.requests.labels(String(status))));
    child.inc();
  }

  /** Called after every commit outcome; a worker process uses it to tell its primary at once. */
  onHealthChange: (() => void) | null = null;

  constructor() {
    // prom-client's default metrics under their standard names (`process_*`, `nodejs_*`): stock
    // Node.js dashboards and alerts query exactly these. Three of them are gauges named `_total`
    // (the sums of the per-type `nodejs_active_handles`, `_requests`, `_resources` gauges), which
    // Prometheus' naming rules reserve for counters and `promtool check metrics` refuses; they are
    // dropped, and `sum(nodejs_active_handles)` gives the same figure.
    collectDefaultMetrics({ register: this.registry });
    for (const name of GAUGES_NAMED_TOTAL) this.registry.removeSingleMetric(name);
    this.queueWritable.set(1);
    // Every label value at 0 from the start: a series that appears with its first increment hides that increment from rate().
    for (const reason of UNTRUSTED_CLOSE_REASONS) this.untrustedConnectionsClosed.inc({ reason }, 0);
    this.http2StreamsRefused.inc({ limit: 'body_wait' }, 0);
    for (const reason of HANDSHAKE_FAILURE_REASONS) this.handshakeFailures.inc({ reason }, 0);
    for (const timeout of PUBLIC_TIMEOUTS) this.publicTimeouts.inc({ timeout }, 0);
    for (const protocol of PROTOCOL_ERROR_LAYERS) this.protocolErrors.inc({ protocol }, 0);
  }

  onCommit(info: { requests: number; events: number; durationMs: number }): void {
    this.commitRequests.observe(info.requests);
    this.commitEvents.observe(info.events);
    this.commitDuration.observe(info.durationMs / 1000);
  }

  onFailure(): void {
    this.commitFailures.inc();
  }

  onHealth(health: { readonly writable: boolean }): void {
    this.queueWritable.set(health.writable ? 1 : 0);
    this.onHealthChange?.();
  }
}
