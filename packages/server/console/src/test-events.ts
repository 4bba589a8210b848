/** Test environment: the last events received and their per-event outcome (hashed identifiers only). */
import { getJson, type TestEvents } from './api.js';
import { fmt, h, replace } from './dom.js';
import type { Page } from './main.js';

export function testEventsPage(): Page {
  const body = h('div');
  const element = h('div', { class: 'page', 'data-page': 'test-events' }, h('h1', null, 'Test environment: last events received'), body);
  const open = new Set<string>();
  return {
    element,
    async refresh() {
      const data = await getJson<TestEvents>('/api/test-events');
      if (!data.available) {
        replace(body, h('div', { class: 'notice', 'data-testid': 'test-events-unavailable' }, h('strong', null, `This is the ${data.env} console. `), data.reason ?? ''));
        return;
      }
      if (data.events.length === 0) {
        replace(body, h('p', { class: 'muted', 'data-testid': 'test-events-empty' }, 'Waiting for events… send one to this environment’s public port and it shows here within two seconds.'));
        return;
      }
      const accepted = data.events.filter((e) => e.outcome === 'accepted').length;
      replace(
        body,
        h('p', { class: 'muted' }, `Newest first; the last ${data.events.length} events (${accepted} accepted, ${data.events.length - accepted} rejected). Identifiers are shown hashed; other plain-text identifying fields are masked.`),
        h(
          'table',
          { 'data-testid': 'test-events-table' },
          h('thead', null, h('tr', null, ['Time (UTC)', 'Data set', 'Request id', 'Index', 'Event id', 'event_type', 'Outcome', ''].map((c) => h('th', null, c)))),
          h(
            'tbody',
            null,
            data.events.flatMap((e) => {
              const key = `${e.request_id}:${e.index}`;
              const detail = e.event ? JSON.stringify(e.event, null, 2) : (e.event_omitted ?? null);
              const row = h(
                'tr',
                { class: `outcome-${e.outcome}`, 'data-testid': 'test-event-row', 'data-event-id': e.event_id ?? '' },
                h('td', null, fmt.time(e.at)),
                h('td', null, e.data_set_id),
                h('td', null, h('code', { class: 'small' }, e.request_id)),
                h('td', null, String(e.index)),
                h('td', null, e.event_id ? h('code', null, e.event_id) : h('span', { class: 'muted' }, 'none')),
                h('td', null, e.event_type ?? '–'),
                h('td', null, h('span', { class: `pill ${e.outcome === 'accepted' ? 'good' : 'bad'}` }, e.outcome), e.error ? h('div', { class: 'error small' }, e.error) : null),
                h('td', null, detail ? h('button', { class: 'link', type: 'button' }, open.has(key) ? 'hide' : 'show event') : null),
              );
              const pre = detail ? h('tr', { class: 'detail', hidden: !open.has(key) }, h('td', { colspan: '8' }, h('pre', null, detail))) : null;
              row.querySelector('button')?.addEventListener('click', (ev) => {
                if (open.has(key)) open.delete(key);
                else open.add(key);
                if (pre) pre.hidden = !open.has(key);
                (ev.currentTarget as HTMLButtonElement).textContent = open.has(key) ? 'hide' : 'show event';
              });
              return pre ? [row, pre] : [row];
            }),
          ),
        ),
      );
    },
    destroy() {},
  };
}
