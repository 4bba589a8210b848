/**
 * `queue export`: the durable queue as NDJSON, in pages, with backpressure (bounded memory
 * whatever the queue's size).
 */
import type { Command } from 'commander';
import { writeWithBackpressure } from './cli-io.js';
import type { CliContext } from './cli-context.js';
import { parseNonNegativeInt } from './cli-parsers.js';
import { requireDataSet } from './known-data-set.js';

export function registerQueueCommands(program: Command, ctx: CliContext): void {
  const queue = program.command('queue').description('inspect the durable queue');
  queue
    .command('export')
    .description('print queued records as NDJSON, one per line')
    .option('--from <seq>', 'first sequence number', '1')
    .option('--data-set <id>', 'only records of this data set')
    .action((opts: { from: string; dataSet?: string }) =>
      ctx.withStorage(async (storage) => {
        if (opts.dataSet) await requireDataSet(storage, opts.dataSet);
        const reader = storage.queueReader();
        let from = parseNonNegativeInt(opts.from);
        for (;;) {
          const records = await reader.read({ fromSeq: from, limit: 5000, ...(opts.dataSet ? { dataSetId: opts.dataSet } : {}) });
          if (records.length === 0) break;
          // Waits for the reader (bounded memory whatever the queue's size); stops if it went away.
          await writeWithBackpressure(ctx.io.stdout, records.map((r) => JSON.stringify(r)).join('\n') + '\n');
          from = records[records.length - 1]!.seq + 1;
        }
      }),
    );
}
