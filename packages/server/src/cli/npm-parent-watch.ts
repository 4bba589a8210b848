/**
 * `serve` under `npm start` or `npx` stops when what started it is gone.
 *
 * Role: `npm start` runs serve through a shell (npm → `sh -c "npm run build && node … serve"` → node),
 * and so does `npx ecapi-ingest serve` (npm exec → sh -c → node). A SIGTERM to npm (`kill <pid of
 * npm>`, `kill $!` after `npx ecapi-ingest serve &`, an IDE's stop button, a process manager that
 * signals only the process it started) ends npm and that shell without passing it on: serve was left
 * running, orphaned, holding its ports and the data dir. A terminal's Ctrl-C reaches the whole
 * process group and never had this problem.
 * Invariants: only under `npm start` or npx / `npm exec` (npm sets `npm_lifecycle_event` to `start`,
 * or to `npx` with `npm_command=exec`); a serve started any other way (systemd, a container,
 * `nohup ecapi-ingest serve &`, a test) never watches its parent, so it may outlive its shell. Under
 * npm, the parent pid seen at start changing (the process is re-parented to init or a subreaper)
 * means npm's shell is gone: serve then shuts down as on SIGTERM.
 * Hazards: the check polls (`process.ppid` has no event); its timer is unref'd so it never keeps the
 * process alive, and the returned function stops it.
 */
/** How often the parent pid is looked at. */
const POLL_MS = 500;

export interface ParentWatchOptions {
  /** The environment serve runs in (npm_lifecycle_event tells whether it is `npm start`). */
  readonly env: NodeJS.ProcessEnv;
  /** Called once, when the parent seen at start is gone. */
  readonly onGone: () => void;
  /** The current parent pid (process.ppid; a test gives its own). */
  readonly parentPid?: () => number;
  readonly pollMs?: number;
}

/** What started serve, when it is npm: `npm start`, or `npx` (npm exec); null otherwise. */
export function npmLauncherOf(env: NodeJS.ProcessEnv): 'npm start' | 'npx' | null {
  if (env.npm_lifecycle_event === 'start') return 'npm start';
  if (env.npm_lifecycle_event === 'npx' || env.npm_command === 'exec') return 'npx';
  return null;
}

/** Starts watching when serve runs under `npm start` or npx; returns the function that stops watching, or null when it does not watch. */
export function watchNpmParent(options: ParentWatchOptions): (() => void) | null {
  if (npmLauncherOf(options.env) === null) return null;
  const parentPid = options.parentPid ?? (() => process.ppid);
  const first = parentPid();
  const timer = setInterval(() => {
    if (parentPid() === first) return;
    clearInterval(timer);
    options.onGone();
  }, options.pollMs ?? POLL_MS);
  timer.unref();
  return () => clearInterval(timer);
}
