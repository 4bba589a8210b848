/**
 * `ecapi-ingest`, the operator CLI, as a function: main(argv, io) -> exit code. The bin shim calls
 * it with the process's argv and streams; tests call it in-process and parse its --json output.
 * main() only assembles: the global options, the context every command gets (cli-context.ts), the
 * command modules (one file per command group), and the one place errors become exit codes.
 *
 * Contract: commands that print data print one JSON document with --json; a failing command exits
 * non-zero with exactly one line on stderr (usage errors 2, see cli-io.ts; everything else 1); every command works
 * while the server runs (they open the same SQLite files, in WAL mode, with a busy timeout).
 */
import { Command, CommanderError, Option } from 'commander';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { parseEnvironment } from '../config.js';
import type { ControlPlane } from '../control/control-plane.js';
import { openStorage, validateDatabaseUrl } from '../storage/open-storage.js';
import type { Storage } from '../storage/storage.js';
import { CliError, OutputClosedError, processIo, watchOutput, type CliIo } from './cli-io.js';
import type { CliContext, GlobalOptions } from './cli-context.js';
import { registerDataSetCommands } from './data-set-commands.js';
import { registerGrantCommands } from './grant-commands.js';
import { registerKeyCommands } from './key-commands.js';
import { registerMigrateCommand } from './migrate-command.js';
import { registerQueueCommands } from './queue-commands.js';
import { registerSendCommand } from './send-command.js';
import { registerServeCommand } from './serve-command.js';
import { registerViewCommands } from './view-commands.js';
import { registerLifecycleCommands } from './lifecycle-commands.js';
import { diskFullMessage, isDiskFull } from './storage-health.js';
import { connectionErrorAdvice } from '../postgres/connection-defaults.js';

/** The version of this package (dist/src/cli/main.js -> packages/server/package.json). */
const VERSION = (createRequire(import.meta.url)('../../../package.json') as { version: string }).version;

type CommandModule = (program: Command, ctx: CliContext) => void;

/** Every command group, in the order `--help` lists them. */
const commandModules: readonly CommandModule[] = [
  registerServeCommand,
  registerDataSetCommands,
  registerKeyCommands,
  registerGrantCommands,
  registerQueueCommands,
  registerMigrateCommand,
  registerSendCommand,
  registerViewCommands,
  registerLifecycleCommands,
];

/** The program with every command registered, not yet parsed; what it did once it has run. */
export interface CliProgram {
  readonly program: Command;
  /** The exit code a command asked for (setExitCode), 0 by default. */
  exitCode(): number;
  /** A command that keeps running after its action returned (serve, worker) resolves this when done. */
  keptAlive(): Promise<void> | null;
}

/**
 * Builds the program without running anything: main() parses it, and the reference-doc generator
 * (scripts/generate-reference-docs.ts) walks its commands' help and options.
 */
export function buildProgram(io: CliIo = processIo): CliProgram {
  const out = (text: string) => io.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  let exitCode = 0;
  let keptAlive: Promise<void> | null = null;

  const program = new Command('ecapi-ingest')
    .description('ECAPI 1.0 event ingestion service and operator CLI')
    .version(VERSION, '-V, --version', 'print the version')
    .addOption(new Option('--data-dir <dir>', 'data directory').env('ECAPI_DATA_DIR').default('./data'))
    .addOption(new Option('--env <env>', 'environment: production or test').env('ECAPI_ENV').default('production'))
    .addOption(new Option('--database-url <url>', 'postgres://… : keep everything in PostgreSQL (scale-out profile); default: embedded SQLite in the data dir').env('ECAPI_DATABASE_URL'))
    .addOption(new Option('--master-key-file <path>', 'read the master key from this file (a mounted secret) instead of <data-dir>/master.key').env('ECAPI_MASTER_KEY_FILE'))
    .option('--json', 'print one JSON document', false)
    .exitOverride()
    // commander's "(Did you mean send?)" for a mistyped command or option (on by default; inherited
    // by every subcommand). It comes as a second line: kept, on the one line an error may take.
    .showSuggestionAfterError(true)
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
      outputError: (text, write) => {
        const [first, ...rest] = text.split('\n').map((line) => line.trim());
        const suggestion = rest.find((line) => /^\(Did you mean .*\?\)$/.test(line));
        write(`${first}${suggestion ? ` ${suggestion}` : ''}\n`);
      },
    });

  const globals = (): GlobalOptions => {
    const opts = program.opts<{ dataDir: string; env: string; json: boolean; databaseUrl?: string; masterKeyFile?: string }>();
    validateDatabaseUrl(opts.databaseUrl);
    return {
      dataDir: resolve(opts.dataDir),
      env: parseEnvironment(opts.env),
      json: opts.json,
      databaseUrl: opts.databaseUrl || undefined,
      masterKeyFile: opts.masterKeyFile ? resolve(opts.masterKeyFile) : undefined,
    };
  };

  const withStorage = async <T>(fn: (storage: Storage, g: GlobalOptions) => Promise<T>): Promise<T> => {
    const g = globals();
    const storage = await openStorage({ dataDir: g.dataDir, env: g.env, databaseUrl: g.databaseUrl, poolSize: 2, masterKeyFile: g.masterKeyFile });
    try {
      return await fn(storage, g);
    } finally {
      await storage.close();
    }
  };

  const withControl = <T>(fn: (cp: ControlPlane, g: GlobalOptions) => Promise<T>): Promise<T> =>
    withStorage((storage, g) => fn(storage.controlPlane(), g));

  const ctx: CliContext = {
    io,
    out,
    globals,
    withControl,
    withStorage,
    keepAlive: (done) => {
      keptAlive = done;
    },
    setExitCode: (code) => {
      exitCode = code;
    },
  };

  for (const register of commandModules) register(program, ctx);
  return { program, exitCode: () => exitCode, keptAlive: () => keptAlive };
}

export async function main(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  // A reader that closes early (`| head`) ends the command quietly instead of with a stack trace.
  watchOutput(io.stdout);
  const cli = buildProgram(io);
  try {
    await cli.program.parseAsync(argv as string[], { from: 'user' });
    const keptAlive = cli.keptAlive();
    if (keptAlive) await keptAlive;
    return cli.exitCode();
  } catch (error) {
    if (error instanceof OutputClosedError) return 0; // `| head`: the reader has what it wanted
    if (error instanceof CommanderError) {
      return error.exitCode === 0 ? 0 : 2;
    }
    // A full disk, whichever store met it, is said as such (not as a library's SQLITE_FULL or a null read).
    const where = cli.program.opts<{ dataDir: string; databaseUrl?: string }>();
    const message = isDiskFull(error)
      ? diskFullMessage({ dataDir: resolve(where.dataDir), databaseUrl: where.databaseUrl }, error)
      : (connectionErrorAdvice(error) ?? (error instanceof Error ? error.message : String(error)));
    io.stderr.write(`error: ${message.split('\n')[0]}\n`);
    return error instanceof CliError ? error.exitCode : 1;
  }
}
