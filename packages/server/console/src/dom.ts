/** A tiny DOM helper: every text goes through textContent, never innerHTML. */
type Child = Node | string | number | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | boolean | undefined> | null = null,
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === false) continue;
    el.setAttribute(name, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === 'object' ? child : String(child));
  }
  return el;
}

export function replace(parent: Element, ...children: (Child | Child[])[]): void {
  parent.replaceChildren();
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(typeof child === 'object' ? child : String(child));
  }
}

const integer = new Intl.NumberFormat('en-US');

export const fmt = {
  bytes: (n: number | null | undefined) =>
    n === null || n === undefined ? '–' : n >= 1e9 ? `${(n / 1e9).toFixed(1)} GB` : n >= 1e6 ? `${(n / 1e6).toFixed(1)} MB` : n >= 1e3 ? `${(n / 1e3).toFixed(1)} kB` : `${n} B`,
  int: (n: number | null | undefined) => (n === null || n === undefined ? '–' : integer.format(n)),
  rate: (n: number | null | undefined) => (n === null || n === undefined ? '–' : n >= 100 ? integer.format(Math.round(n)) : n.toFixed(n >= 10 ? 1 : 2)),
  ms: (n: number | null | undefined) => (n === null || n === undefined ? '–' : n >= 100 ? `${Math.round(n)} ms` : `${n.toFixed(n >= 10 ? 1 : 2)} ms`),
  pct: (n: number | null | undefined) => (n === null || n === undefined ? '–' : `${(n * 100).toFixed(n === 1 || n === 0 ? 0 : 1)}%`),
  score: (n: number | null | undefined) => (n === null || n === undefined ? '–' : n.toFixed(1)),
  time: (iso: string | number | null | undefined) => {
    if (iso === null || iso === undefined) return '–';
    const d = new Date(iso);
    return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
  },
  clock: (ms: number) => new Date(ms).toISOString().slice(11, 19),
  seconds: (s: number) => (s >= 86_400 && s % 86_400 === 0 ? `${s / 86_400}d` : s >= 3600 && s % 3600 === 0 ? `${s / 3600}h` : `${s}s`),
  /** A duration in milliseconds, exactly (like the CLI): 7d, 90m, 1500ms. */
  duration: (ms: number) => {
    for (const [unit, size] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) {
      if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
    }
    return `${ms}ms`;
  },
};

/** A figure or time that must stay on one line. */
export const nowrap = (text: string, cls = 'nowrap'): HTMLElement => h('span', { class: cls }, text);

/** A headline figure. */
export function card(id: string, label: string, value: string, note?: string, tone?: 'good' | 'bad' | 'warn'): HTMLElement {
  return h(
    'div',
    { class: `card${tone ? ` ${tone}` : ''}`, 'data-testid': `card-${id}` },
    h('div', { class: 'label' }, label),
    h('div', { class: 'value' }, value),
    note ? h('div', { class: 'note' }, note) : null,
  );
}

/**
 * A table. With `stack` (tables whose columns identify a problem: ids, errors, reasons), each row
 * becomes a card on a narrow screen (styles.css, `table.stack`), its cells under their column's
 * name (`data-label`), so no such column is scrolled out of sight; other tables (figures) scroll
 * sideways inside their panel.
 */
export function table(testId: string, head: string[], rows: (Child | Child[])[][], empty = 'Nothing yet.', options: { stack?: boolean } = {}): HTMLElement {
  if (rows.length === 0) return h('p', { class: 'muted empty', 'data-testid': testId }, empty);
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { 'data-testid': testId, class: options.stack ? 'stack' : undefined },
      h('thead', null, h('tr', null, head.map((c) => h('th', null, c)))),
      h('tbody', null, rows.map((r) => h('tr', null, r.map((c, i) => h('td', { 'data-label': head[i] ?? '' }, c))))),
    ),
  );
}

export function section(title: string, ...children: (Child | Child[])[]): HTMLElement {
  return h('section', { class: 'panel' }, h('h2', null, title), ...children);
}
