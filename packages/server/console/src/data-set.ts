/** One data set: why is this sender's data being rejected? */
import { getJson, type DataSetDetail } from './api.js';
import { Chart, COLORS } from './chart.js';
import { card, fmt, h, nowrap, replace, section, table } from './dom.js';
import { keyList, limitsText, policyText } from './data-sets.js';
import type { Page } from './page.js';

const HOUR = 3600;
/** Recent rejections shown before "show all": the newest few, with a count per reason above them. */
const REJECTIONS_SHOWN = 10;

export function dataSetPage(id: string): Page {
  const cards = h('div', { class: 'cards' });
  const types = new Chart({ id: 'event-types', title: 'Events by event_type, per hour (merged view, last 24 h)', unit: 'events', kind: 'stacked-bars' });
  const outcomes = new Chart({ id: 'outcomes', title: 'Accepted and rejected by reason, per minute (last hour)', unit: 'events/min' });
  const recent = h('div');
  const coverage = h('div');
  const quality = h('div');
  const consent = h('div');
  const limits = h('div');
  const hourly = h('div');
  const setup = h('div');
  let showAllRejections = false;
  const element = h(
    'div',
    { class: 'page', 'data-page': 'data-set' },
    h('p', null, h('a', { href: '#/data-sets' }, '← Data sets')),
    h('h1', null, 'Data set ', h('code', { 'data-testid': 'data-set-id' }, id)),
    cards,
    h('div', { class: 'grid2' }, h('div', { class: 'panel' }, types.element), h('div', { class: 'panel' }, outcomes.element)),
    section('Most recent rejections', h('p', { class: 'muted small' }, 'The last 50 on this node, newest first: index and id of the event in its request, and the error the sender got (values it echoed masked). Event contents are never shown.'), recent),
    h('div', { class: 'grid2' }, section('Identifier coverage (last 24 h)', coverage), section('Match quality by event_type (last 24 h)', quality)),
    h('div', { class: 'grid2' }, section('Consent decisions', consent), section('Rate limits', limits)),
    section('Rejections by reason, per hour (last 24 h)', hourly),
    section('Keys, grants and policy', setup),
  );

  return {
    element,
    async refresh() {
      const d = await getJson<DataSetDetail>(`/api/data-sets/${encodeURIComponent(id)}`);
      const live = d.live;
      replace(
        cards,
        card('events-today', 'Events accepted today', fmt.int(d.today.events_accepted), `since ${fmt.time(d.today.since).slice(11, 16)} UTC`, 'good'),
        card('rejected-today', 'Events rejected today', fmt.int(d.today.events_rejected), undefined, d.today.events_rejected > 0 ? 'warn' : undefined),
        card('acceptance-rate', 'Acceptance rate', fmt.pct(d.today.acceptance_rate), 'today'),
        card('match-quality', 'Match quality', d.last_24h.match_quality === null ? '–' : `${fmt.score(d.last_24h.match_quality)} / 10`, 'last 24 h'),
        card('accepted-last-hour', 'Accepted (1 h)', fmt.int(live.last_hour.accepted), 'this node, live'),
        card('rejected-last-hour', 'Rejected (1 h)', fmt.int(live.last_hour.rejected), 'this node, live', live.last_hour.rejected > 0 ? 'warn' : undefined),
        card('rate-limit-hits', 'Rate-limit hits (1 h)', fmt.int(live.last_hour.rate_limited), `${fmt.int(live.rate_limited_since_start)} since start`, live.last_hour.rate_limited > 0 ? 'bad' : undefined),
        card('measurement-only', 'Measurement-only share', fmt.pct(d.last_24h.events === 0 ? null : d.last_24h.measurement_only_share), 'last 24 h'),
        card('view-storage', 'Merged view', d.storage ? fmt.bytes(d.storage.event_bytes) : '–', d.storage ? `${fmt.int(d.storage.records)} records · retention ${fmt.duration(d.policy.view_retention_ms)}` : `retention ${fmt.duration(d.policy.view_retention_ms)}`),
      );

      // Hourly bars: one slot per hour of the last 24, empty hours included.
      const now = Math.floor(Date.now() / 1000 / HOUR) * HOUR;
      const hoursX = Array.from({ length: 24 }, (_, i) => now - (23 - i) * HOUR);
      const byHour = new Map(d.hours.map((x) => [Math.floor(Date.parse(x.hour) / 1000), x]));
      const typeNames = Object.keys(d.last_24h.by_event_type).sort((a, b) => (d.last_24h.by_event_type[b] ?? 0) - (d.last_24h.by_event_type[a] ?? 0));
      types.update(
        hoursX,
        typeNames.map((name, i) => ({ label: name, color: COLORS[i % COLORS.length]! })),
        typeNames.map((name) => hoursX.map((t) => byHour.get(t)?.by_event_type[name] ?? 0)),
      );
      const reasonNames = Object.keys(live.rejected_by_reason).sort();
      outcomes.update(
        live.t,
        [
          { label: 'accepted', color: COLORS[0]! },
          ...reasonNames.map((r, i) => ({ label: `rejected: ${r}`, color: COLORS[(i + 1) % COLORS.length]! })),
          { label: 'rate-limited (requests)', color: COLORS[3]!, dash: [4, 4] },
        ],
        [live.accepted, ...reasonNames.map((r) => live.rejected_by_reason[r]!), live.rate_limited],
      );

      const rejections = live.recent_rejections;
      const byReason = new Map<string, number>();
      for (const r of rejections) byReason.set(r.error, (byReason.get(r.error) ?? 0) + 1);
      const shown = showAllRejections ? rejections : rejections.slice(0, REJECTIONS_SHOWN);
      const toggle = h('button', { type: 'button', class: 'link', 'data-testid': 'recent-rejections-toggle' }, showAllRejections ? `Show the newest ${REJECTIONS_SHOWN} only` : `Show all ${rejections.length}`);
      toggle.addEventListener('click', () => {
        showAllRejections = !showAllRejections;
        void this.refresh().catch(() => undefined);
      });
      replace(
        recent,
        rejections.length > 0
          ? h(
              'div',
              { class: 'reason-chips', 'data-testid': 'recent-rejections-by-reason' },
              [...byReason].sort((a, b) => b[1] - a[1]).map(([error, n]) => h('span', { class: 'pill bad' }, `${fmt.int(n)} × ${error}`)),
            )
          : null,
        table(
          'recent-rejections',
          ['Time (UTC)', 'Request id', 'Index', 'Event id', 'Error'],
          shown.map((r) => [nowrap(fmt.time(r.at)), h('code', { class: 'small' }, r.request_id), String(r.index), r.event_id ? h('code', null, r.event_id) : h('span', { class: 'muted' }, 'none'), h('span', { class: 'error' }, r.error)]),
          'No rejected events since the service started.',
          { stack: true },
        ),
        rejections.length > REJECTIONS_SHOWN ? h('p', { class: 'small' }, `Newest ${shown.length} of the last ${rejections.length}. `, toggle) : null,
      );
      const cov = d.last_24h.identifier_coverage;
      replace(coverage, table('identifier-coverage', ['Identifier', 'Share of events'], Object.entries(cov).map(([k, v]) => [k.replace(/_/g, ' '), h('span', { class: 'bar' }, h('span', { class: 'track' }, h('span', { class: 'fill', style: `width:${(v * 100).toFixed(1)}%` })), h('span', { class: 'num' }, fmt.pct(v)))]), 'No events in the merged view yet.'));
      replace(
        quality,
        table(
          'match-quality',
          ['event_type', 'Events', 'Score', 'email', 'phone', 'customer id', 'click id', 'address', 'ip + ua'],
          Object.entries(d.last_24h.match_quality_by_event_type).map(([type, q]) => [type, fmt.int(q.events), h('strong', { class: 'nowrap' }, `${fmt.score(q.score)} / 10`), fmt.pct(q.coverage.email), fmt.pct(q.coverage.phone), fmt.pct(q.coverage.customer_id), fmt.pct(q.coverage.click_id), fmt.pct(q.coverage.address), fmt.pct(q.coverage.ip_user_agent)]),
          'No events in the merged view yet.',
        ),
        h('p', { class: 'muted small' }, 'Score 0–10: 10 × weighted identifier coverage (email 0.3, phone 0.2, customer id 0.15, click id 0.15, address 0.1, ip + user agent 0.1).'),
      );
      replace(
        consent,
        table(
          'consent',
          ['', 'Measurement-only', 'Events', 'Share'],
          [
            ['Last hour (live, at ingest)', fmt.int(live.consent.measurement_only), fmt.int(live.consent.accepted), fmt.pct(live.consent.measurement_only_share)],
            ['Last 24 h (merged view)', '', fmt.int(d.last_24h.events), fmt.pct(d.last_24h.events === 0 ? null : d.last_24h.measurement_only_share)],
          ],
        ),
        h('p', { class: 'muted small' }, `Consent policy: ${d.policy.consent}. Measurement-only events are kept for measurement and never used for targeting.`),
      );
      replace(
        limits,
        h('p', null, limitsText(d.limits)),
        table('rate-limit-hits', ['Window', 'Requests answered 429'], [['last hour', fmt.int(live.last_hour.rate_limited)], ['since the service started', fmt.int(live.rate_limited_since_start)]]),
      );
      const hourRows = d.hours.filter((x) => x.rejected > 0 || x.accepted > 0).reverse();
      replace(
        hourly,
        table(
          'rejections-hourly',
          ['Hour (UTC)', 'Accepted', 'Rejected', 'Reasons'],
          hourRows.map((x) => [nowrap(fmt.time(x.hour).slice(0, 16)), fmt.int(x.accepted), fmt.int(x.rejected), h('ul', { class: 'reasons' }, Object.entries(x.rejections).map(([r, n]) => h('li', null, `${fmt.int(n)} × `, h('span', { class: 'error' }, r))))]),
          'No events in the last 24 hours.',
          { stack: true },
        ),
      );
      replace(
        setup,
        h('p', null, h('strong', null, 'Policy: '), policyText(d.policy)),
        h('p', null, h('strong', null, 'Grants: '), d.grants.length ? d.grants.join(', ') : 'none'),
        d.keys.length ? keyList(d.keys) : h('p', { class: 'muted' }, 'No keys.'),
      );
    },
    destroy() {
      types.destroy();
      outcomes.destroy();
    },
  };
}
