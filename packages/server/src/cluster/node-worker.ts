/**
 * A worker process of `serve --workers N`: serves the public port (shared through node:cluster),
 * leases rate-limit tokens from the primary, and reports listening and queue health over IPC.
 * Its metrics registry answers the primary's aggregated /metrics.
 */
import { AggregatorRegistry } from 'prom-client';
import type { ServeConfig } from '../config.js';
import { LeasedRateLimiter } from '../rate-limit/leased-rate-limiter.js';
import { startService, type RunningService } from '../service.js';
import type { WorkerMessage } from './cluster-messages.js';
import { startLiveLoop } from '../live/live-stats.js';

export async function runWorker(config: ServeConfig): Promise<RunningService> {
  const send = (message: unknown) => {
    if (process.connected) process.send!(message);
  };
  // Leases from the primary, unless the storage has a cluster-wide authority (PostgreSQL profile).
  const rateLimiter = () =>
    new LeasedRateLimiter({
      send,
      onMessage(listener) {
        process.on('message', listener);
        return () => process.off('message', listener);
      },
    });
  const service = await startService(config, { role: 'worker', rateLimiter });
  AggregatorRegistry.setRegistries([service.metrics.registry]);
  // prom-client installs the worker's responder to the primary's metrics requests only in the
  // AggregatorRegistry constructor; without this instance the primary's /metrics times out.
  new AggregatorRegistry();
  send({ type: 'ecapi:listening', port: service.port } satisfies WorkerMessage);
  let last = '';
  const reportHealth = () => {
    const health = service.queueHealth();
    const text = JSON.stringify(health);
    if (text === last) return;
    last = text;
    send({ type: 'ecapi:health', writable: health.writable, lastError: health.lastError } satisfies WorkerMessage);
  };
  // Report a change as soon as a commit succeeds or fails, and sweep periodically as a backstop.
  service.metrics.onHealthChange = reportHealth;
  const healthTimer = setInterval(reportHealth, 250);
  healthTimer.unref();
  // Operator console: push this worker's live figures to the primary every second.
  const stopLive = startLiveLoop(service.live, (delta) => send({ type: 'ecapi:live', delta } satisfies WorkerMessage));
  // If the primary dies, a worker must not live on serving without its limiter authority.
  process.on('disconnect', () => {
    void service.close().finally(() => {
      process.exitCode = 0;
    });
  });
  return {
    ...service,
    close: async () => {
      clearInterval(healthTimer);
      stopLive();
      await service.close();
    },
  };
}
