/**
 * What a CLI command module gets, so that command groups can live in their own files
 * (`register<Group>Commands(program, ctx)`) instead of one growing main.ts.
 */
import type { Environment } from '../config.js';
import type { ControlPlane } from '../control/control-plane.js';
import type { CliIo } from './cli-io.js';
import type { Storage } from '../storage/storage.js';

export interface GlobalOptions {
  readonly dataDir: string;
  readonly env: Environment;
  readonly json: boolean;
  /** postgres://… selects the PostgreSQL profile; undefined: embedded SQLite. */
  readonly databaseUrl?: string | undefined;
  /** --master-key-file (ECAPI_MASTER_KEY_FILE). */
  readonly masterKeyFile?: string | undefined;
}

export interface CliContext {
  readonly io: CliIo;
  /** Writes a line to stdout. */
  out(text: string): void;
  /** The resolved global options (--data-dir, --env, --json). */
  globals(): GlobalOptions;
  /** Opens the control plane of the selected environment for the duration of `fn`. */
  withControl<T>(fn: (controlPlane: ControlPlane, globals: GlobalOptions) => Promise<T>): Promise<T>;
  /** Opens the storage of the selected environment and profile for the duration of `fn`. */
  withStorage<T>(fn: (storage: Storage, globals: GlobalOptions) => Promise<T>): Promise<T>;
  /** For long-running commands (serve, worker): the CLI run ends when this promise settles. */
  keepAlive(done: Promise<void>): void;
  setExitCode(code: number): void;
}
