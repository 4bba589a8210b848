/**
 * docs/reference/cli.md from the commands' own help: the program is built (cli/main.ts
 * buildProgram, nothing parsed or run) and every command's helpInformation() is printed, so the
 * page is exactly what `ecapi-ingest <command> --help` prints.
 * Hazards: commander wraps help to the terminal's width; every command gets a fixed width here, so
 * the page does not depend on who runs the generator. Hidden commands are left out, as --help does.
 */
import type { Command } from 'commander';
import { buildProgram } from '../../src/cli/main.js';
import { GENERATED_NOTICE } from './generated-notice.js';

/** The width the help is wrapped to on the page. */
const HELP_WIDTH = 100;

/** A command and its full name (`ecapi-ingest data-set create`). */
export interface NamedCommand {
  readonly name: string;
  readonly command: Command;
}

/** Every command of the program, depth first in the order --help lists them, the program first. */
export function allCommands(program: Command = buildProgram().program): NamedCommand[] {
  const out: NamedCommand[] = [];
  const walk = (command: Command, prefix: string) => {
    const name = prefix ? `${prefix} ${command.name()}` : command.name();
    out.push({ name, command });
    for (const sub of command.commands) if (!(sub as unknown as { _hidden?: boolean })._hidden) walk(sub, name);
  };
  walk(program, '');
  return out;
}

function helpOf(command: Command): string {
  command.configureHelp({ ...command.configureHelp(), helpWidth: HELP_WIDTH });
  return command
    .helpInformation()
    .split('\n')
    .map((line) => line.trimEnd())
    .join('\n')
    .trimEnd();
}

export function renderCliReference(): string {
  const commands = allCommands();
  const lines = [
    GENERATED_NOTICE('the commands\' own help'),
    '',
    '# CLI reference',
    '',
    'Every command of `ecapi-ingest` (`npx ecapi-ingest …` inside the repository) with its help, as',
    '`ecapi-ingest <command> --help` prints it. The options of the program itself (`--data-dir`, `--env`,',
    '`--database-url`, `--master-key-file`, `--json`) go before the command. How to use them: the',
    '[operator guide](../guides/operator.md), the [sender guide](../guides/sender.md#ecapi-ingest-send) for',
    '`send`; every flag and environment variable in one table: [configuration](configuration.md).',
    '',
    '| Command | What it does |',
    '|---|---|',
    ...commands.map(({ name, command }) => `| [\`${name}\`](#${slug(name)}) | ${escapeText(command.description())} |`),
  ];
  for (const { name, command } of commands) {
    lines.push('', `## \`${name}\``, '', '```text', helpOf(command), '```');
  }
  return `${lines.join('\n')}\n`;
}

/** GitHub's anchor of a heading that is one code span: lowercase, spaces to `-`, other punctuation dropped. */
function slug(text: string): string {
  return text.toLowerCase().replace(/[^a-z0-9 _-]/g, '').replace(/ /g, '-');
}

/** Text for a table cell: pipes escaped, one line. */
export function escapeCell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/** Plain text (a command's or option's description) for a table cell: also `<name>` kept visible. */
export function escapeText(text: string): string {
  return escapeCell(text).replace(/</g, '&lt;');
}
