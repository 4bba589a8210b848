/** Messages between the primary of `serve --workers N` and its workers (besides rate-limit leases). */
import type { ServeConfig } from '../config.js';
import type { LiveDelta } from '../live/live-stats.js';

/** The environment variable carrying the serve configuration to forked workers. */
export const WORKER_CONFIG_ENV = 'ECAPI_WORKER_CONFIG';

export interface WorkerListening {
  readonly type: 'ecapi:listening';
  readonly port: number;
}

export interface WorkerHealth {
  readonly type: 'ecapi:health';
  readonly writable: boolean;
  readonly lastError: string | null;
}

/** About one second of the worker's live figures, summed by the primary for the operator console. */
export interface WorkerLive {
  readonly type: 'ecapi:live';
  readonly delta: LiveDelta;
}

/** A worker that could not start (a port it cannot bind, a bad certificate): the primary fails the start with this line. */
export interface WorkerStartFailed {
  readonly type: 'ecapi:start-failed';
  readonly message: string;
}

export type WorkerMessage = WorkerListening | WorkerHealth | WorkerLive | WorkerStartFailed;

export function encodeWorkerConfig(config: ServeConfig): string {
  return JSON.stringify(config);
}

export function decodeWorkerConfig(text: string): ServeConfig {
  return JSON.parse(text) as ServeConfig;
}
