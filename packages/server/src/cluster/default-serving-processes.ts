/**
 * `serve`'s default number of serving processes: one per core, less the core the merged-view
 * consumer works on when this node runs it (`serve` without `--no-worker`), and at least one.
 *
 * Why (issue 17, bench/README.md): each serving process costs its own heap and, past one, a
 * primary beside them (~60-100 MB before any load, ~200-290 MB at full load each), and the consumer
 * is a busy process of its own. On the 2-core machine the default was two serving processes, a
 * primary and the consumer: four processes for two cores, 908 MB peak RSS summed, the serving
 * processes and the consumer taking CPU from each other. One serving process per core left
 * to them keeps the cores busy without oversubscribing them and halves the node's memory.
 */
export function defaultServingProcesses(cores: number, consumerRuns: boolean): number {
  return Math.max(1, Math.floor(cores) - (consumerRuns ? 1 : 0));
}
