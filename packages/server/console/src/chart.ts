/** uPlot charts (bundled from npm): time on x (unix seconds), one or more series on y. */
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { h } from './dom.js';

export const COLORS = ['#1f77b4', '#d62728', '#ff7f0e', '#7f3fbf', '#2ca02c', '#8c564b', '#e377c2', '#17becf', '#bcbd22', '#7f7f7f'];

export interface SeriesSpec {
  readonly label: string;
  readonly color: string;
  readonly dash?: number[];
}

export interface ChartSpec {
  readonly id: string;
  readonly title: string;
  readonly unit: string;
  readonly kind?: 'line' | 'stacked-bars';
  readonly height?: number;
}

const timeOf = uPlot.fmtDate('{YYYY}-{MM}-{DD} {HH}:{mm}:{ss}');

/** The last non-null value of a series. */
function latest(values: readonly (number | null)[] | undefined): number | null {
  for (let i = (values?.length ?? 0) - 1; i >= 0; i--) if (values![i] !== null && values![i] !== undefined) return values![i]!;
  return null;
}

export class Chart {
  readonly element: HTMLElement;
  readonly #spec: ChartSpec;
  readonly #body: HTMLElement;
  #plot: uPlot | null = null;
  #signature = '';
  #raw: (number | null)[][] = [];
  readonly #resize: ResizeObserver;

  constructor(spec: ChartSpec) {
    this.#spec = spec;
    this.#body = h('div', { class: 'chart-body' });
    this.element = h('figure', { class: 'chart', 'data-testid': `chart-${spec.id}` }, h('figcaption', null, spec.title, h('span', { class: 'muted' }, ` (${spec.unit})`)), this.#body);
    this.#resize = new ResizeObserver(() => {
      if (this.#plot) this.#plot.setSize({ width: this.#width(), height: spec.height ?? 200 });
    });
    this.#resize.observe(this.#body);
  }

  #width(): number {
    return Math.max(240, this.#body.clientWidth || 480);
  }

  /** Replaces the data; the chart is rebuilt only when the set of series changes. */
  update(x: number[], series: SeriesSpec[], ys: (number | null)[][]): void {
    const stacked = this.#spec.kind === 'stacked-bars';
    this.#raw = ys;
    let data = ys;
    if (stacked) {
      // Draw cumulative sums, widest first, so each series shows as its own segment.
      // A slot where no series has a value (before the process started) stays a gap.
      data = ys.map((_, i) => x.map((__, j) => (ys.every((s) => s[j] === null || s[j] === undefined) ? null : ys.slice(i).reduce<number>((sum, s) => sum + (s[j] ?? 0), 0))));
    }
    const signature = JSON.stringify(series.map((s) => s.label));
    if (!this.#plot || signature !== this.#signature) {
      this.#plot?.destroy();
      this.#signature = signature;
      const bars = uPlot.paths.bars!({ size: [0.8, 48] });
      const opts: uPlot.Options = {
        width: this.#width(),
        height: this.#spec.height ?? 200,
        legend: { show: true, live: true },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true }, y: { range: (_u, min, max) => [Math.min(0, min ?? 0), Math.max(1, (max ?? 0) * 1.1)] } },
        axes: [{ stroke: '#444', grid: { stroke: '#eee' } }, { stroke: '#444', grid: { stroke: '#eee' }, size: 56 }],
        series: [
          // Not hovered, the legend shows the latest values: say so instead of a time of "--".
          { label: 'Time', value: (_u: uPlot, v: number | null, _si: number, idx: number | null) => (idx === null || v === null ? 'latest' : timeOf(new Date(v * 1000))) },
          ...series.map((s, i) => ({
            label: s.label,
            stroke: s.color,
            width: stacked ? 0 : 2,
            fill: stacked ? s.color : undefined,
            dash: s.dash,
            spanGaps: false,
            points: { show: !stacked, size: 4 },
            paths: stacked ? bars : undefined,
            // Hovered: the value under the cursor; otherwise the latest value (not a dash until hovered).
            value: (_u: uPlot, _v: number | null, _si: number, idx: number | null) => {
              const raw = idx === null ? latest(this.#raw[i]) : (this.#raw[i]?.[idx] ?? null);
              return raw === null || raw === undefined ? '–' : String(Math.round(raw * 100) / 100);
            },
          })),
        ],
      };
      this.#plot = new uPlot(opts, [x, ...data] as uPlot.AlignedData, this.#body);
      this.#plot.setLegend({ idx: null as unknown as number });
      return;
    }
    this.#plot.setData([x, ...data] as uPlot.AlignedData);
    // Not hovered: refresh the legend's latest values too.
    if (this.#plot.cursor.idx === null || this.#plot.cursor.idx === undefined) this.#plot.setLegend({ idx: null as unknown as number });
  }

  destroy(): void {
    this.#resize.disconnect();
    this.#plot?.destroy();
  }
}
