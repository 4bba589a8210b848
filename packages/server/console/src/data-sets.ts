/** Data sets: keys (never secrets), grants, limits, policies, today's figures. */
import { getJson, type DataSetRow, type KeyView } from './api.js';
import { fmt, h, nowrap, replace, table } from './dom.js';
import type { Page } from './page.js';

export function keyList(keys: KeyView[]): HTMLElement {
  return h(
    'ul',
    { class: 'keys' },
    keys.map((k) =>
      h(
        'li',
        null,
        h('code', null, k.key_id),
        ' ',
        h('span', { class: `pill ${k.status === 'active' ? 'good' : 'bad'}` }, k.status),
        // Each dated part stays on one line; the line breaks between parts.
        h(
          'div',
          { class: 'muted small' },
          nowrap(`created ${fmt.time(k.created_at)}`),
          k.rotated_at ? [' · ', nowrap(`rotated ${fmt.time(k.rotated_at)}`)] : null,
          k.revoked_at ? [' · ', nowrap(`revoked ${fmt.time(k.revoked_at)}`)] : null,
          k.previous_secret_valid_until ? [' · ', nowrap(`previous secret valid until ${fmt.time(k.previous_secret_valid_until)}`)] : null,
        ),
      ),
    ),
  );
}

export const limitsText = (l: DataSetRow['limits']) => `${fmt.int(l.rps)} req/s · burst ${fmt.int(l.burst_rps)} req/s for ${l.burst_seconds} s · ${fmt.int(l.eps)} events/s`;
export const policyText = (p: DataSetRow['policy']) =>
  `consent ${p.consent} · ip ${p.ip} · pii-scan ${p.pii_scan} · max age ${fmt.seconds(p.max_age_seconds)} · merge window ${fmt.duration(p.merge_window_ms)} · view retention ${fmt.duration(p.view_retention_ms)} (v${p.version})`;

export function dataSetsPage(): Page {
  const body = h('div', { class: 'panel' });
  const element = h('div', { class: 'page', 'data-page': 'data-sets' }, h('h1', null, 'Data sets'), h('p', { class: 'muted' }, '“Today” is the UTC day; rate-limit hits are this node’s last hour.'), body);
  return {
    element,
    async refresh() {
      const { data_sets: rows } = await getJson<{ data_sets: DataSetRow[] }>('/api/data-sets');
      replace(
        body,
        table(
          'data-sets-table',
          ['Data set', 'Keys', 'Grants', 'Limits', 'Policy', 'Events today', 'Acceptance', 'Match quality', '429 (1 h)'],
          rows.map((d) => [
            h('div', null, h('a', { href: `#/data-sets/${encodeURIComponent(d.id)}`, 'data-testid': `data-set-link-${d.id}` }, d.id), h('div', { class: 'muted small nowrap' }, `created ${fmt.time(d.created_at)}`)),
            d.keys.length ? keyList(d.keys) : h('span', { class: 'muted' }, 'no keys'),
            d.grants.length ? h('div', null, d.grants.map((g) => h('div', null, h('code', null, g)))) : h('span', { class: 'muted' }, 'none'),
            h('span', { class: 'small' }, limitsText(d.limits)),
            h('span', { class: 'small' }, policyText(d.policy)),
            h('span', { class: 'num', 'data-testid': `events-today-${d.id}` }, fmt.int(d.today.events_accepted)),
            h('span', { class: 'num', 'data-testid': `acceptance-${d.id}` }, fmt.pct(d.today.acceptance_rate)),
            h('span', { class: 'num' }, d.today.match_quality === null ? '–' : `${fmt.score(d.today.match_quality)} / 10`),
            h('span', { class: 'num' }, fmt.int(d.last_hour.rate_limited)),
          ]),
          'No data sets yet: ecapi-ingest data-set create <id>.',
          { stack: true },
        ),
      );
    },
    destroy() {},
  };
}
