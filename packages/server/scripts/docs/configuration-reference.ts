/**
 * docs/reference/configuration.md: every flag of the service's commands with its default and its
 * environment variable, read from the built program (commander options: flags, description,
 * default, .env()), and every other `ECAPI_*` variable the code reads (environment-variables.ts).
 * Invariant: every `ECAPI_*` name in the sources (packages/*\/src) is on the page or listed as
 * internal; undocumentedVariables() names the ones that are not, and rendering fails on them.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { Command, Option } from 'commander';
import { allCommands, escapeCell, escapeText } from './cli-reference.js';
import { DIRECT_VARIABLES, INTERNAL_VARIABLES } from './environment-variables.js';
import { GENERATED_NOTICE } from './generated-notice.js';
import { REPO_ROOT } from './repo-root.js';

/** The commands whose flags configure a running service or sender, beside the program's own. */
const CONFIGURED_COMMANDS = ['ecapi-ingest serve', 'ecapi-ingest worker', 'ecapi-ingest send'];

function visibleOptions(command: Command): Option[] {
  return command.options.filter((o) => !o.hidden);
}

function defaultOf(option: Option): string {
  if (option.negate) return '';
  if (option.defaultValueDescription) return `\`${option.defaultValueDescription}\``;
  if (option.defaultValue === undefined || option.defaultValue === false) return '';
  return `\`${String(option.defaultValue)}\``;
}

/** The variable environment-variables.ts gives for a flag of a command (read by the command itself). */
function directVariableOf(commandName: string, option: Option): string | undefined {
  const short = `\`${commandName.replace(/^ecapi-ingest /, '')}\``;
  return Object.entries(DIRECT_VARIABLES).find(([, v]) => v.flag === option.long && v.commands.includes(short))?.[0];
}

/** Every `ECAPI_*` name in the TypeScript sources of the packages, with the first file naming it. */
export function variablesInSources(root = REPO_ROOT): Map<string, string> {
  const found = new Map<string, string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) {
        for (const [name] of readFileSync(path, 'utf8').matchAll(/\bECAPI_[A-Z0-9_]+\b/g)) {
          if (!found.has(name)) found.set(name, relative(root, path));
        }
      }
    }
  };
  for (const pkg of readdirSync(join(root, 'packages'))) {
    try {
      walk(join(root, 'packages', pkg, 'src'));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  return found;
}

/** Variables read by options of the program: name -> the flag and the commands that have it. */
function optionVariables(): Map<string, { flag: string; commands: string[]; what: string }> {
  const out = new Map<string, { flag: string; commands: string[]; what: string }>();
  for (const { name, command } of allCommands()) {
    for (const option of visibleOptions(command)) {
      if (!option.envVar) continue;
      const entry = out.get(option.envVar) ?? { flag: option.long ?? option.flags, commands: [], what: escapeText(option.description) };
      entry.commands.push(name === 'ecapi-ingest' ? 'every command' : `\`${name.replace(/^ecapi-ingest /, '')}\``);
      out.set(option.envVar, entry);
    }
  }
  return out;
}

/** `ECAPI_*` names in the sources that this page does not document, with where they appear. */
export function undocumentedVariables(root = REPO_ROOT): string[] {
  const documented = new Set([...optionVariables().keys(), ...Object.keys(DIRECT_VARIABLES), ...Object.keys(INTERNAL_VARIABLES)]);
  return [...variablesInSources(root)].filter(([name]) => !documented.has(name)).map(([name, file]) => `${name} (${file})`);
}

export function renderConfigurationReference(): string {
  const missing = undocumentedVariables();
  if (missing.length > 0) {
    throw new Error(
      `environment variables read in the sources but not documented: ${missing.join(', ')}; ` +
        'give the option an .env(), or add the variable to packages/server/scripts/docs/environment-variables.ts',
    );
  }
  const variables = new Map<string, { flag: string; commands: string; what: string }>();
  for (const [name, v] of optionVariables()) variables.set(name, { flag: `\`${v.flag}\``, commands: v.commands.join(', '), what: v.what });
  for (const [name, v] of Object.entries(DIRECT_VARIABLES)) variables.set(name, { flag: v.flag ? `\`${v.flag}\`` : '', commands: v.commands, what: v.what });
  const commands = new Map(allCommands().map((c) => [c.name, c.command]));
  const lines = [
    GENERATED_NOTICE('the commands\' options and packages/server/scripts/docs/environment-variables.ts'),
    '',
    '# Configuration reference',
    '',
    'ecapi-ingest has no configuration file: a command reads its flags, and for most of them an',
    '`ECAPI_*` environment variable (a flag given on the command line wins over its variable). Durations',
    'are written `500ms`, `10s`, `5m`, `24h`, `7d`. Per-data-set settings (policy, limits, retention)',
    'live in the control plane: `ecapi-ingest data-set policy` and `data-set limits`',
    '([operator guide](../guides/operator.md)). Every command\'s help: [CLI reference](cli.md).',
    '',
    '## Environment variables',
    '',
    '| Variable | Flag | Read by | What |',
    '|---|---|---|---|',
    ...[...variables]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, v]) => `| \`${name}\` | ${v.flag} | ${v.commands} | ${escapeCell(v.what)} |`),
    '',
    'Set by the service for its own processes, never by hand: ' +
      Object.entries(INTERNAL_VARIABLES).map(([name, what]) => `\`${name}\` (${what})`).join('; ') + '.',
  ];
  for (const name of ['ecapi-ingest', ...CONFIGURED_COMMANDS]) {
    const command = commands.get(name);
    if (!command) throw new Error(`configuration reference: the program has no command "${name}"`);
    lines.push(
      '',
      name === 'ecapi-ingest' ? '## Options of every command' : `## \`${name}\``,
      '',
      '| Flag | Default | Variable | What |',
      '|---|---|---|---|',
      ...visibleOptions(command)
        .filter((o) => o.long !== '--help' && o.long !== '--version')
        .map((o) => {
          const variable = o.envVar ?? directVariableOf(name, o);
          return `| \`${escapeCell(o.flags)}\` | ${defaultOf(o)} | ${variable ? `\`${variable}\`` : ''} | ${escapeText(o.description)} |`;
        }),
    );
  }
  return `${lines.join('\n')}\n`;
}
