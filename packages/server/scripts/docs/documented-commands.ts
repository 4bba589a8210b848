/**
 * The `ecapi-ingest` command lines written by hand in the Markdown (README, guides, design notes),
 * checked against the program itself: every command path must exist and every `--flag` must be an
 * option of that command or of the program. The CLI reference is generated (cli-reference.ts); the
 * guides are not, so a renamed or removed flag would otherwise live on in them.
 *
 * Role: test/docs/documented-commands.test.ts runs it over every Markdown file but the generated
 * reference. Invariants: only code is read (inline code spans and code blocks, as markdown-it parses
 * them), so prose such as "ecapi-ingest answers HTTPS" is not taken for a command; a command line is
 * what follows `ecapi-ingest` (or `ecapi-ingest.js`, or `npm start --`, which runs `serve`) up to a
 * shell separator (`|`, `;`, `&`, `)`, a `#` comment) or a quote; backslash-continued lines are joined.
 * Hazards: words after the command path are taken as arguments, not checked; a `<placeholder>` or
 * `…` ends the command path (the flags after it are checked against the command before it).
 */
import { readFileSync } from 'node:fs';
import { relative, sep } from 'node:path';
import type { Command, Option } from 'commander';
import MarkdownIt from 'markdown-it';
import type Token from 'markdown-it/lib/token.mjs';
import { buildProgram } from '../../src/cli/main.js';

const md = new MarkdownIt({ html: true });

/** A command line of the docs that the program does not accept. */
export interface UnknownUsage {
  readonly file: string;
  readonly line: number;
  readonly usage: string;
  readonly reason: string;
}

/** The code of a Markdown text (inline spans and blocks), with the 1-based line it starts on. */
function codeOf(markdown: string): { text: string; line: number; inline: boolean }[] {
  const out: { text: string; line: number; inline: boolean }[] = [];
  let line = 1;
  const walk = (tokens: Token[]) => {
    for (const token of tokens) {
      if (token.map) line = token.map[0] + 1;
      if (token.type === 'fence' || token.type === 'code_block') {
        token.content
          .replace(/\\\n\s*/g, ' ')
          .split('\n')
          .forEach((text, i) => out.push({ text, line: line + 1 + i, inline: false }));
      } else if (token.type === 'code_inline') out.push({ text: token.content, line, inline: true });
      if (token.children) walk(token.children);
    }
  };
  walk(md.parse(markdown, {}));
  return out;
}

/**
 * The command lines in one piece of code. Strict (every word checked): after `npx ecapi-ingest`,
 * `ecapi-ingest.js` and `npm start --` (which runs `serve`). Lenient (only when the first word is
 * one of the program's commands or an option, since the name is also a user, unit and image name,
 * and code spans quote messages that start with it): after `ecapi-ingest` at the start of the code
 * or after `$ `; and an inline code span that starts with a command name, as the guides write
 * `key rotate --grace 1h` (its next word a subcommand or an option: log lines start with `queue` too).
 */
function commandLines(code: string, inline: boolean, commands: ReadonlyMap<string, Command>): string[][] {
  const lines: string[][] = [];
  const wordsAfter = (at: number) => {
    const rest = code.slice(at);
    const end = rest.search(/[|;&)"'`]|\s#|$/);
    return rest.slice(0, end).trim().split(/\s+/).filter(Boolean);
  };
  const lenient = (words: string[]) => words.length > 0 && (commands.has(words[0]!) || /^--?[a-z]/.test(words[0]!));
  const strict = /(?:npx ecapi-ingest|ecapi-ingest\.js|npm start --)(?=\s|$)/g;
  for (const match of code.matchAll(strict)) {
    const words = wordsAfter(match.index + match[0].length);
    lines.push(match[0].startsWith('npm') ? ['serve', ...words] : words);
  }
  for (const match of code.matchAll(/(?:^|^\$ |\n\$ )\s*ecapi-ingest(?=\s)/g)) {
    const words = wordsAfter(match.index + match[0].length);
    if (lenient(words)) lines.push(words);
  }
  if (inline) {
    const words = wordsAfter(0);
    const command = words.length > 1 ? commands.get(words[0]!) : undefined;
    const next = words[1] ?? '';
    if (command && (/^-/.test(next) || command.commands.length === 0 || command.commands.some((c) => c.name() === next))) lines.push(words);
  }
  return lines;
}

function optionOf(command: Command | null, flag: string): Option | undefined {
  for (let c = command; c; c = c.parent) {
    const option = c.options.find((o) => o.long === flag || o.short === flag);
    if (option) return option;
  }
  return undefined;
}

/** Why the program would refuse these words, or null. */
export function checkCommandLine(program: Command, words: readonly string[]): string | null {
  let command = program;
  let positional = false;
  for (let i = 0; i < words.length; i++) {
    const word = words[i]!.replace(/^\[|\]$/g, ''); // `[--grace 1h]`: an optional part, checked too
    if (word === '--') break;
    if (/^-/.test(word)) {
      const flag = word.split('=')[0]!;
      if (flag === '--help' || flag === '-h') continue;
      const option = optionOf(command, flag);
      if (!option) return `${command === program ? 'the program' : `\`${fullName(command)}\``} has no option ${flag}`;
      if ((option.required || option.optional) && !word.includes('=') && !/^-/.test(words[i + 1] ?? '-')) i++;
      continue;
    }
    if (positional || command.commands.length === 0 || /^[<…{$]|…|\.\.\./.test(word)) {
      // an argument, or a placeholder (`<key_id>`, `…`): no subcommand after it
      positional = true;
      continue;
    }
    const sub = command.commands.find((c) => c.name() === word || c.aliases().includes(word));
    if (sub) {
      command = sub;
      continue;
    }
    if (command.registeredArguments.length > 0) {
      positional = true;
      continue;
    }
    return `${command === program ? 'the program' : `\`${fullName(command)}\``} has no command ${word}`;
  }
  return null;
}

function fullName(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/** Every command line in these Markdown files that the program would refuse. */
export function unknownUsages(root: string, files: readonly string[]): { checked: number; unknown: UnknownUsage[] } {
  const { program } = buildProgram();
  const commands = new Map(program.commands.map((c) => [c.name(), c] as const));
  const out: UnknownUsage[] = [];
  let checked = 0;
  for (const file of files) {
    const rel = relative(root, file).split(sep).join('/');
    for (const { text, line, inline } of codeOf(readFileSync(file, 'utf8'))) {
      for (const words of commandLines(text, inline, commands)) {
        checked++;
        const reason = checkCommandLine(program, words);
        if (reason) out.push({ file: rel, line, usage: `ecapi-ingest ${words.join(' ')}`, reason });
      }
    }
  }
  return { checked, unknown: out };
}
