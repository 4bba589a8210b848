/**
 * docs/reference/metrics.md from the registered metrics: the registry a service builds
 * (ServiceMetrics with its body-budget and connection gauges, the consumer-lag gauges, the disk gauges: the same
 * calls as src/service.ts and http/public-server.ts) is read for each metric's name, type, help,
 * labels and histogram buckets. Nothing is collected (no scrape, no file read).
 * Only `ecapi_*` metrics are listed: prom-client's default process and Node.js metrics depend on the
 * platform (process_open_fds exists on Linux only), so the page names them without listing them.
 * The drift test also scrapes a real server and checks that every `ecapi_*` metric it exposes is
 * here, which catches a metric registered somewhere this file does not build.
 */
import type { Registry } from 'prom-client';
import { registerConsumerLagGauges } from '../../src/analytics/stats-reader.js';
import { DiskMonitor } from '../../src/lifecycle/disk-usage.js';
import type { LifecycleBackend } from '../../src/lifecycle/lifecycle-backend.js';
import type { Logger } from '../../src/observability/logger.js';
import { ServiceMetrics } from '../../src/observability/service-metrics.js';
import { escapeText } from './cli-reference.js';
import { GENERATED_NOTICE } from './generated-notice.js';

export interface MetricDescription {
  readonly name: string;
  readonly type: string;
  readonly help: string;
  readonly labels: readonly string[];
  readonly buckets?: readonly number[];
}

/** The metrics a service registers, as service.ts registers them, without starting anything. */
export function serviceRegistry(): Registry {
  const metrics = new ServiceMetrics();
  metrics.watchBodyBudget({ inFlight: 0, waiting: 0 });
  metrics.watchConnections({ connections: () => 0, untrusted: () => 0 });
  registerConsumerLagGauges(metrics.registry, { lag: () => Promise.reject(new Error('not collected')) });
  new DiskMonitor({ dataDir: '.', backend: {} as LifecycleBackend, logger: {} as Logger, lowSpacePercent: 10 }).registerGauges(metrics.registry);
  return metrics.registry;
}

export function serviceMetrics(registry: Registry = serviceRegistry()): MetricDescription[] {
  return registry
    .getMetricsAsArray()
    .map((m) => m as unknown as { name: string; type: string; help: string; labelNames?: string[]; upperBounds?: number[] })
    .filter((m) => m.name.startsWith('ecapi_'))
    .map((m) => ({
      name: m.name,
      type: m.type,
      help: m.help,
      labels: m.labelNames ?? [],
      ...(m.type === 'histogram' && m.upperBounds ? { buckets: m.upperBounds } : {}),
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

export function renderMetricsReference(): string {
  const metrics = serviceMetrics();
  const lines = [
    GENERATED_NOTICE('the registered metrics (packages/server/src/observability/service-metrics.ts and the gauges service.ts adds)'),
    '',
    '# Metrics reference',
    '',
    '`GET /metrics` on the admin port (Prometheus text format). No label value comes from a sender: not',
    'data set ids, key ids, paths or event keys; labels are the server\'s own status codes, reasons, limit',
    'names, store names and field paths in their stored form, so the number of series stays bounded.',
    'With `serve --workers N` the primary sums the workers\' metrics; gauges whose value is the same in',
    'every process (lag, disk, writability) are aggregated with `max` or `min` instead.',
    'How to use them, the dashboard and the alert rules in `deploy/`: the',
    '[operator guide](../guides/operator.md#admin-port-and-observability).',
    '',
    '| Metric | Type | Labels | Help |',
    '|---|---|---|---|',
    ...metrics.map((m) => `| \`${m.name}\` | ${m.type} | ${m.labels.map((l) => `\`${l}\``).join(', ')} | ${escapeText(m.help)} |`),
    '',
    '## Histogram buckets',
    '',
    '| Metric | Upper bounds |',
    '|---|---|',
    ...metrics.filter((m) => m.buckets).map((m) => `| \`${m.name}\` | ${m.buckets!.join(', ')} |`),
    '',
    '## Process and Node.js metrics',
    '',
    'prom-client\'s default metrics under their standard names (`process_cpu_seconds_total`,',
    '`process_resident_memory_bytes`, `nodejs_eventloop_lag_p99_seconds`, `nodejs_heap_size_used_bytes`,',
    '`nodejs_gc_duration_seconds`, …; which exist depends on the platform), so stock Node.js dashboards',
    'work, less the three gauges prom-client names `nodejs_active_{handles,requests,resources}_total`:',
    'Prometheus reserves `_total` for counters and `promtool check metrics` refuses them;',
    '`sum(nodejs_active_handles)` gives the same figure.',
  ];
  return `${lines.join('\n')}\n`;
}
