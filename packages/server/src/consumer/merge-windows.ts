import { DEFAULT_POLICY } from '../control/data-set-policy.js';
import type { ControlPlane } from '../control/control-plane.js';

/** Merge windows of the data sets, refreshed from the control plane. */
export class MergeWindows {
  #windows = new Map<string, number>();
  readonly #controlPlane: ControlPlane;

  constructor(controlPlane: ControlPlane) {
    this.#controlPlane = controlPlane;
  }

  async refresh(): Promise<void> {
    const next = new Map<string, number>();
    for (const dataSet of await this.#controlPlane.listDataSets()) next.set(dataSet.id, dataSet.policy.mergeWindowMs);
    this.#windows = next;
  }

  entries(): [string, number][] {
    return [...this.#windows];
  }

  mergeWindowMs(dataSetId: string): number {
    return this.#windows.get(dataSetId) ?? DEFAULT_POLICY.mergeWindowMs;
  }
}
