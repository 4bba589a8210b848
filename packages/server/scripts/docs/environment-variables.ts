/**
 * The `ECAPI_*` environment variables the code reads itself (not through a commander option's
 * .env(), which the configuration page finds on its own). Every `ECAPI_*` name that appears in
 * packages/*\/src must be an option's variable, listed here, or listed as internal: the generator
 * and the drift test fail otherwise, naming the variable and this file.
 */
export interface DirectVariable {
  /** The flag it stands for, if any. */
  readonly flag?: string;
  /** The commands that read it. */
  readonly commands: string;
  readonly what: string;
}

export const DIRECT_VARIABLES: Readonly<Record<string, DirectVariable>> = {
  ECAPI_MASTER_KEY: {
    commands: 'every command that seals or opens a secret (`serve`, `key`, `send --demo`, …)',
    what: 'the master key itself: 64 hex characters or base64 of 32 bytes. Takes precedence over `--master-key-file` and `<data-dir>/master.key`',
  },
  ECAPI_LOG_LEVEL: { commands: '`serve`, `worker`', what: 'the log level (pino: `trace`, `debug`, `info`, `warn`, `error`, `fatal`, `silent`); default `info`' },
  ECAPI_LOW_SPACE_PERCENT: {
    commands: '`serve`',
    what: 'free space on the data dir\'s file system under this percent is logged (`low free space on the data dir`) and shown red on the console; default 10',
  },
  ECAPI_DELETION_MIN_FREE_MB: {
    commands: '`worker` (and the worker `serve` starts)',
    what: 'a deletion request (`identities forget`, `events delete`) waits, with a warning, while the data dir has less free space than this many MiB (embedded profile); default 8',
  },
  ECAPI_URL: { flag: '--url', commands: '`send`', what: 'the service\'s base URL (`https://…`, without `/v1/events`)' },
  ECAPI_KEY_ID: { flag: '--key-id', commands: '`send`', what: 'key id' },
  ECAPI_SECRET: { flag: '--secret', commands: '`send`', what: 'signing secret; prefer the variable to the flag (a flag shows in `ps`)' },
  ECAPI_DATA_SET: { flag: '--data-set', commands: '`send`', what: 'data set id' },
  ECAPI_DEBUG_STACK: { commands: '`serve --workers N`', what: 'any value: a serving process that fails to start also prints its stack trace' },
};

/** Variables the service sets for its own child processes; never set by hand. */
export const INTERNAL_VARIABLES: Readonly<Record<string, string>> = {
  ECAPI_WORKER_CONFIG: 'the resolved configuration `serve --workers N` passes to the serving processes it forks',
};
