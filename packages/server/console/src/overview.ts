/** Overview: is ingestion healthy? Live rates, latency, queue, consumer lag, readiness; the last hour. */
import { getJson, type Overview, type TimeSeries } from './api.js';
import { Chart, COLORS } from './chart.js';
import { card, fmt, h, replace, section, table } from './dom.js';
import type { Page } from './page.js';

export function overviewPage(): Page {
  const status = h('div', { class: 'status-line', 'data-testid': 'readiness' });
  const cards = h('div', { class: 'cards', 'data-testid': 'overview-cards' });
  const charts = {
    requests: new Chart({ id: 'requests', title: 'Requests per second by status', unit: 'req/s' }),
    events: new Chart({ id: 'events', title: 'Events per second', unit: 'events/s' }),
    latency: new Chart({ id: 'latency', title: 'Request latency', unit: 'ms' }),
    append: new Chart({ id: 'append', title: 'Queue append latency (until durable)', unit: 'ms' }),
  };
  // Chart window: the last hour by default; shorter windows for a closer look.
  const windows = [
    { label: '5 min', window: '5m', step: '5s' },
    { label: '15 min', window: '15m', step: '10s' },
    { label: '1 hour', window: '1h', step: '10s' },
  ];
  let chosen = windows[2]!;
  const picker = h('div', { class: 'picker', role: 'group', 'aria-label': 'Chart window' });
  const drawPicker = () =>
    replace(
      picker,
      h('span', { class: 'muted' }, 'Charts: last '),
      windows.map((w) => {
        const b = h('button', { type: 'button', class: w === chosen ? 'chip active' : 'chip', 'data-testid': `window-${w.window}` }, w.label);
        b.addEventListener('click', () => {
          chosen = w;
          drawPicker();
          void page.refresh().catch(() => undefined);
        });
        return b;
      }),
    );
  drawPicker();
  const codes = h('div');
  const reasons = h('div');
  const element = h(
    'div',
    { class: 'page', 'data-page': 'overview' },
    h('h1', null, 'Overview'),
    status,
    cards,
    picker,
    h('div', { class: 'grid2' }, Object.values(charts).map((c) => h('div', { class: 'panel' }, c.element))),
    h('div', { class: 'grid2' }, section('Status codes', codes), section('Rejected events by reason (last hour)', reasons)),
  );

  const page: Page = {
    element,
    async refresh() {
      const [o, ts] = await Promise.all([getJson<Overview>('/api/overview'), getJson<TimeSeries>(`/api/timeseries?window=${chosen.window}&step=${chosen.step}`)]);
      const checks = Object.entries(o.checks).map(([k, v]) => `${k}: ${v}`).join(' · ');
      replace(
        status,
        h('span', { class: `pill ${o.ready ? 'good' : 'bad'}`, 'data-testid': 'ready-pill' }, o.ready ? 'Ready' : 'Not ready'),
        h('span', { class: 'muted' }, ` ${checks} · ${o.processes} serving process${o.processes === 1 ? '' : 'es'} (${o.serving_processes.with_traffic_last_hour} with traffic) · live figures since ${fmt.time(o.live_since)}`),
      );
      const lag = o.consumer_lag;
      replace(
        cards,
        card('requests-per-second', 'Requests/s', fmt.rate(o.requests_per_second), `last ${o.rate_window_seconds} s`),
        card('events-accepted-per-second', 'Events accepted/s', fmt.rate(o.events_per_second.accepted), `last ${o.rate_window_seconds} s`, 'good'),
        card('events-rejected-per-second', 'Events rejected/s', fmt.rate(o.events_per_second.rejected), `last ${o.rate_window_seconds} s`, o.events_per_second.rejected > 0 ? 'warn' : undefined),
        card('latency-p50', 'Latency p50', fmt.ms(o.latency_ms.p50), `last ${o.latency_ms.window_seconds} s`),
        card('latency-p99', 'Latency p99', fmt.ms(o.latency_ms.p99), `last ${o.latency_ms.window_seconds} s`),
        card('append-p50', 'Queue append p50', fmt.ms(o.queue_append_ms.p50), 'until fsynced'),
        card('append-p99', 'Queue append p99', fmt.ms(o.queue_append_ms.p99), 'until fsynced'),
        card('consumer-lag', 'Consumer lag', lag ? `${fmt.int(lag.records)} rec` : '–', lag ? `${lag.seconds.toFixed(1)} s behind` : 'consumer not reporting', lag && lag.seconds > 60 ? 'warn' : undefined),
        card(
          'free-space',
          'Free disk space',
          o.storage ? fmt.bytes(o.storage.free_bytes) : '–',
          o.storage ? (o.storage.low ? `LOW: under ${o.storage.low_space_percent}% of ${fmt.bytes(o.storage.total_bytes)}` : `of ${fmt.bytes(o.storage.total_bytes)} · data ${fmt.bytes(Object.values(o.storage.stores).reduce((a, b) => a + b, 0))}`) : 'not reported',
          o.storage?.low ? 'bad' : undefined,
        ),
        card('requests-last-hour', 'Requests (1 h)', fmt.int(o.last_hour.requests)),
        card('accepted-last-hour', 'Events accepted (1 h)', fmt.int(o.last_hour.events_accepted)),
        card('rejected-last-hour', 'Events rejected (1 h)', fmt.int(o.last_hour.events_rejected)),
      );
      const s = ts.series;
      charts.requests.update(
        ts.t,
        [
          { label: '2xx', color: COLORS[4]! },
          { label: '4xx', color: COLORS[2]! },
          { label: '429', color: COLORS[3]! },
          { label: '5xx', color: COLORS[1]! },
        ],
        [s.requests_2xx, s.requests_4xx, s.requests_429, s.requests_5xx],
      );
      charts.events.update(ts.t, [{ label: 'accepted', color: COLORS[0]! }, { label: 'rejected', color: COLORS[1]! }], [s.events_accepted, s.events_rejected]);
      charts.latency.update(ts.t, [{ label: 'p50', color: COLORS[0]! }, { label: 'p99', color: COLORS[2]!, dash: [6, 4] }], [s.latency_p50_ms, s.latency_p99_ms]);
      charts.append.update(ts.t, [{ label: 'p50', color: COLORS[0]! }, { label: 'p99', color: COLORS[2]!, dash: [6, 4] }], [s.queue_append_p50_ms, s.queue_append_p99_ms]);
      const statuses = [...new Set([...Object.keys(o.status_codes.last_hour), ...Object.keys(o.status_codes.last_5_minutes)])].sort();
      replace(codes, table('status-codes', ['Status', 'Last 5 minutes', 'Last hour'], statuses.map((code) => [code, fmt.int(o.status_codes.last_5_minutes[code] ?? 0), fmt.int(o.status_codes.last_hour[code] ?? 0)]), 'No requests in the last hour.'));
      const byReason = Object.entries(o.last_hour.rejected_by_reason).sort((a, b) => b[1] - a[1]);
      const limited = Object.entries(o.last_hour.rate_limited);
      replace(
        reasons,
        table('rejections-by-reason', ['Reason', 'Events'], byReason.map(([r, n]) => [r, fmt.int(n)]), 'No rejected events in the last hour.'),
        limited.length ? h('h3', null, 'Answered 429 (last hour)') : null,
        limited.length ? table('rate-limited', ['Limit', 'Requests'], limited.map(([l, n]) => [l, fmt.int(n)])) : null,
      );
    },
    destroy() {
      for (const c of Object.values(charts)) c.destroy();
    },
  };
  return page;
}
