/**
 * Keeps the request path's CredentialSnapshot current. Polls the control plane's version about
 * once a second (cheap: one indexed read) and loads a new snapshot only when it changed, so CLI
 * changes (revocation, grants, policy) reach a running server within seconds. A failed poll keeps
 * the last good snapshot: a briefly unavailable control store must not lock senders out. Failures
 * are said once per change (`onError` at the first, `onRecovered` at the first success after it:
 * model/failure-latch.ts), not at every poll of an outage.
 */
import type { ControlPlane, CredentialSnapshot } from './control-plane.js';
import { FailureLatch } from '../model/failure-latch.js';

export class CredentialCache {
  #snapshot: CredentialSnapshot;
  #timer: NodeJS.Timeout | null = null;
  #refreshing = false;
  readonly #health: FailureLatch;

  private constructor(
    private readonly controlPlane: ControlPlane,
    snapshot: CredentialSnapshot,
    private readonly onChange: (snapshot: CredentialSnapshot) => void,
    onError: (error: Error) => void,
    onRecovered: () => void,
  ) {
    this.#snapshot = snapshot;
    this.#health = new FailureLatch(onError, onRecovered);
  }

  static async start(
    controlPlane: ControlPlane,
    options: {
      intervalMs?: number;
      onChange?: (snapshot: CredentialSnapshot) => void;
      onError?: (error: Error) => void;
      onRecovered?: () => void;
    } = {},
  ): Promise<CredentialCache> {
    const cache = new CredentialCache(
      controlPlane,
      await controlPlane.loadSnapshot(),
      options.onChange ?? (() => {}),
      options.onError ?? (() => {}),
      options.onRecovered ?? (() => {}),
    );
    cache.onChange(cache.#snapshot);
    cache.#timer = setInterval(() => void cache.refresh(), options.intervalMs ?? 1000);
    cache.#timer.unref();
    return cache;
  }

  current(): CredentialSnapshot {
    return this.#snapshot;
  }

  async refresh(): Promise<void> {
    if (this.#refreshing) return;
    this.#refreshing = true;
    try {
      if ((await this.controlPlane.version()) !== this.#snapshot.version) {
        this.#snapshot = await this.controlPlane.loadSnapshot();
        this.onChange(this.#snapshot);
      }
      this.#health.succeeded();
    } catch (error) {
      this.#health.failed(error as Error);
    } finally {
      this.#refreshing = false;
    }
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }
}
