/**
 * Test environment: the last events received, accepted and rejected, each with its payload (masked
 * on the server: event-display.ts) and the error the sender got, the way a sender debugging an
 * integration reads them (Meta's Test Events, Snowplow Micro); and the requests refused as a whole
 * (outcome `failed`: bad signature, invalid JSON, wrong Content-Type, …) with their status, message,
 * headers and, when signed, their masked body (request-failure.ts).
 *
 * Rows never move under the reader: new events are prepended only while the list is live (not
 * paused, no event selected); otherwise they wait behind a "show N new events" button. The table is
 * redrawn only when what it shows changes (new rows let in, a filter, the selection), not on every
 * 2-second poll. The one exception: a row the server no longer lists leaves at once, shown, held or
 * selected (a deletion request took it out, a reset, or newer events pushed it out at the bottom),
 * so a deleted event's payload does not stay on an open page.
 */
import { getJson, type RequestFailure, type TestEvent, type TestEvents } from './api.js';
import { fmt, h, nowrap, replace } from './dom.js';
import type { Page } from './page.js';

const MAX_ROWS = 200;
type Outcome = 'all' | 'accepted' | 'rejected' | 'failed';
const NO_TYPE = '(none)';
const OUTCOME_NAMES: Record<Outcome, string> = { all: 'all outcomes', accepted: 'accepted', rejected: 'rejected', failed: 'request failed' };

const keyOf = (e: TestEvent) => `${e.request_id}:${e.outcome === 'failed' ? 'request' : e.index}`;
const typeOf = (e: TestEvent) => e.event_type ?? NO_TYPE;
const pillClass = (e: TestEvent) => `pill ${e.outcome === 'accepted' ? 'good' : 'bad'}`;
const pillText = (e: TestEvent) => (e.outcome === 'failed' ? `failed ${e.status}` : e.outcome);

export function testEventsPage(): Page {
  const body = h('div');
  const element = h('div', { class: 'page', 'data-page': 'test-events' }, h('h1', null, 'Test environment: last events received'), body);

  let shown: TestEvent[] = [];
  let waiting: TestEvent[] = [];
  const known = new Set<string>();
  let paused = false;
  let selected: string | null = null;
  let outcome: Outcome = 'all';
  let eventType = '';
  let laidOut = false;

  const pause = h('button', { type: 'button', class: 'secondary', 'data-testid': 'test-events-pause' }, 'Pause');
  const outcomeSelect = h(
    'select',
    { 'data-testid': 'test-events-outcome', 'aria-label': 'Outcome' },
    (['all', 'accepted', 'rejected', 'failed'] as const).map((o) => h('option', { value: o }, OUTCOME_NAMES[o])),
  );
  const typeSelect = h('select', { 'data-testid': 'test-events-type', 'aria-label': 'event_type' });
  const newer = h('span', { class: 'new-events' });
  const summary = h('p', { class: 'muted small' });
  const list = h('div', { class: 'table-wrap' });
  const detail = h('div', { 'data-testid': 'test-event-detail' });

  const live = () => !paused && selected === null;

  const drawNewer = () => {
    if (waiting.length === 0) return replace(newer);
    const why = paused ? 'paused' : 'an event is selected';
    const button = h('button', { type: 'button', 'data-testid': 'test-events-show-new' }, `Show ${waiting.length} new event${waiting.length === 1 ? '' : 's'}`);
    button.addEventListener('click', () => {
      letIn();
      drawTable();
    });
    replace(newer, button, h('span', { class: 'muted small' }, ` (held: ${why})`));
  };

  const letIn = () => {
    shown = [...waiting, ...shown].slice(0, MAX_ROWS);
    waiting = [];
    drawNewer();
  };

  const drawTypes = () => {
    const types = [...new Set(shown.map(typeOf))].sort();
    if (eventType && !types.includes(eventType)) types.push(eventType);
    replace(typeSelect, h('option', { value: '' }, 'all event types'), types.map((t) => h('option', { value: t }, t)));
    typeSelect.value = eventType;
  };

  const drawFailure = (e: RequestFailure) => {
    const body = e.body !== undefined ? JSON.stringify(e.body, null, 2) : (e.body_omitted ?? (e.authenticated ? 'no body' : 'not kept: the request did not authenticate'));
    replace(
      detail,
      h('h2', null, h('span', { class: pillClass(e) }, pillText(e)), ' ', 'request refused as a whole'),
      h('div', { class: 'error-box', 'data-testid': 'test-event-error' }, e.error),
      h(
        'dl',
        null,
        [
          ['Received (UTC)', nowrap(fmt.time(e.at))],
          ['Status', String(e.status)],
          ['Error code', e.error_code ? h('code', null, e.error_code) : h('span', { class: 'muted' }, 'none (gateway)')],
          ['Signature', e.authenticated ? 'verified' : h('span', { class: 'error' }, 'not verified')],
          ['Key', e.key_id ? h('code', null, e.key_id) : h('span', { class: 'muted' }, 'unknown')],
          ['Data set', e.data_set_id ?? h('span', { class: 'muted' }, 'unknown')],
          ['Request id', h('code', null, e.request_id)],
          ['Request', h('code', null, `${e.method} ${e.path}`)],
        ].flatMap(([k, v]) => [h('dt', null, k as string), h('dd', null, v as Node | string)]),
      ),
      h('h3', null, 'Headers'),
      h('pre', { 'data-testid': 'test-event-headers' }, Object.entries(e.headers).map(([k, v]) => `${k}: ${v}`).join('\n') || 'none of those that matter'),
      h('h3', null, 'Body'),
      h('pre', { 'data-testid': 'test-event-payload' }, body),
      h('p', { class: 'muted small' }, 'The signature is never shown; a body is kept only when its signature verified, masked like a rejected event.'),
    );
  };

  const drawDetail = () => {
    const e = shown.find((x) => keyOf(x) === selected);
    if (!e) {
      replace(detail, h('p', { class: 'muted' }, 'Select an event to see its payload and, for a rejected event or a refused request, the exact error. New events wait while one is selected.'));
      return;
    }
    if (e.outcome === 'failed') return drawFailure(e);
    const payload = e.event !== undefined ? JSON.stringify(e.event, null, 2) : (e.event_omitted ?? 'not available');
    replace(
      detail,
      h('h2', null, h('span', { class: pillClass(e) }, pillText(e)), ' ', e.event_type ?? 'no event_type'),
      e.error ? h('div', { class: 'error-box', 'data-testid': 'test-event-error' }, e.error) : null,
      h(
        'dl',
        null,
        [
          ['Received (UTC)', nowrap(fmt.time(e.at))],
          ['Data set', e.data_set_id],
          ['Key', h('code', null, e.key_id)],
          ['Request id', h('code', null, e.request_id)],
          ['Index in request', String(e.index)],
          ['Event id', e.event_id ? h('code', null, e.event_id) : h('span', { class: 'muted' }, 'none')],
        ].flatMap(([k, v]) => [h('dt', null, k as string), h('dd', null, v as Node | string)]),
      ),
      h('h3', null, e.outcome === 'accepted' ? 'Payload as queued' : 'Payload as received'),
      h('pre', { 'data-testid': 'test-event-payload' }, payload),
      h('p', { class: 'muted small' }, 'Identifiers are shown only as their SHA-256 digests; other identifying values are masked; unknown field names of a rejected event are masked with their values.'),
    );
  };

  const drawTable = () => {
    drawTypes();
    const rows = shown.filter((e) => (outcome === 'all' || e.outcome === outcome) && (eventType === '' || typeOf(e) === eventType));
    const count = (o: TestEvent['outcome']) => shown.filter((e) => e.outcome === o).length;
    summary.textContent = `Newest first: ${count('accepted')} accepted, ${count('rejected')} rejected, ${count('failed')} requests refused as a whole${rows.length === shown.length ? '' : `; ${rows.length} match the filter`}. Click a row for its payload.`;
    const head = ['Time (UTC)', 'Outcome', 'event_type', 'Event id', 'Data set'];
    const cell = (label: string, ...children: (Node | string | null)[]) => h('td', { 'data-label': label }, ...children);
    replace(
      list,
      h(
        'table',
        { 'data-testid': 'test-events-table', class: 'stack' },
        h('thead', null, h('tr', null, head.map((c) => h('th', null, c)))),
        h(
          'tbody',
          null,
          rows.map((e) => {
            const key = keyOf(e);
            const row = h(
              'tr',
              {
                class: `selectable outcome-${e.outcome}${key === selected ? ' selected' : ''}`,
                'data-testid': 'test-event-row',
                'data-event-id': e.event_id ?? '',
                'data-request-id': e.request_id,
                'data-outcome': e.outcome,
                'aria-selected': key === selected ? 'true' : 'false',
                tabindex: '0',
              },
              cell(head[0]!, nowrap(fmt.time(e.at))),
              cell(head[1]!, h('span', { class: pillClass(e) }, pillText(e)), e.error ? h('div', { class: 'error small' }, e.error) : null),
              cell(e.outcome === 'failed' ? 'Request' : head[2]!, e.outcome === 'failed' ? h('code', { class: 'small' }, `${e.method} ${e.path}`) : nowrap(e.event_type ?? '–')),
              cell(head[3]!, e.event_id ? h('code', null, e.event_id) : h('span', { class: 'muted' }, e.outcome === 'failed' ? 'none (whole request)' : 'none')),
              cell(head[4]!, e.data_set_id ? nowrap(e.data_set_id) : h('span', { class: 'muted' }, 'unknown')),
            );
            const choose = () => {
              selected = selected === key ? null : key;
              if (live()) letIn();
              drawTable();
            };
            row.addEventListener('click', choose);
            row.addEventListener('keydown', (ev) => {
              if (ev.key === 'Enter' || ev.key === ' ') {
                ev.preventDefault();
                choose();
              }
            });
            return row;
          }),
        ),
      ),
    );
    if (rows.length === 0) list.append(h('p', { class: 'muted' }, 'No event matches the filter.'));
    drawDetail();
  };

  pause.addEventListener('click', () => {
    paused = !paused;
    pause.textContent = paused ? 'Resume' : 'Pause';
    pause.setAttribute('aria-pressed', String(paused));
    if (live() && waiting.length > 0) {
      letIn();
      drawTable();
    } else drawNewer();
  });
  outcomeSelect.addEventListener('change', () => {
    outcome = outcomeSelect.value as Outcome;
    drawTable();
  });
  typeSelect.addEventListener('change', () => {
    eventType = typeSelect.value;
    drawTable();
  });

  const layout = () => {
    replace(
      body,
      h(
        'div',
        { class: 'split' },
        h(
          'section',
          { class: 'panel' },
          // The held-events button lives in the toolbar, so its appearing moves no row.
          h('div', { class: 'toolbar' }, pause, h('label', null, 'Outcome ', outcomeSelect), h('label', null, 'Type ', typeSelect), newer),
          summary,
          list,
        ),
        h('section', { class: 'panel detail-pane' }, detail),
      ),
    );
    laidOut = true;
  };

  return {
    element,
    async refresh() {
      const data = await getJson<TestEvents>('/api/test-events');
      if (!data.available) {
        laidOut = false;
        replace(body, h('div', { class: 'notice', 'data-testid': 'test-events-unavailable' }, h('strong', null, `This is the ${data.env} console. `), data.reason ?? ''));
        return;
      }
      // The API answers newest first; what is new is what this page has not seen yet.
      const fresh = data.events.filter((e) => !known.has(keyOf(e)));
      // Bounded: an event that has left the server's list never comes back.
      known.clear();
      for (const e of data.events) known.add(keyOf(e));
      // An event the server no longer lists leaves the page too, held or shown, selected or not: a
      // deletion request took it out (data lifecycle), a reset emptied the list, or newer ones
      // pushed it out (those are the oldest rows, at the bottom).
      const before = shown.length + waiting.length;
      shown = shown.filter((e) => known.has(keyOf(e)));
      waiting = waiting.filter((e) => known.has(keyOf(e)));
      const dropped = shown.length + waiting.length < before;
      if (selected !== null && !known.has(selected)) selected = null;
      if (dropped && laidOut) {
        if (live()) letIn();
        else drawNewer();
        drawTable();
      }
      if (shown.length === 0 && waiting.length === 0 && fresh.length === 0) {
        laidOut = false;
        replace(body, h('p', { class: 'muted', 'data-testid': 'test-events-empty' }, 'Waiting for events… send one to this environment’s public port and it shows here within two seconds, refused or not.'));
        return;
      }
      if (!laidOut) layout();
      waiting = [...fresh, ...waiting].slice(0, MAX_ROWS);
      if (fresh.length === 0 && list.childElementCount > 0) return;
      if (live()) {
        letIn();
        drawTable();
      } else {
        drawNewer();
        if (list.childElementCount === 0) drawTable();
      }
    },
    destroy() {},
  };
}
