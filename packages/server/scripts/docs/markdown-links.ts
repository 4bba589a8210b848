/**
 * Markdown links and anchors, as GitHub renders them: the relative links of a page and the anchors
 * its headings get.
 *
 * Role: the link check (test/docs/links.test.ts) reads every tracked Markdown file, takes each
 * relative link (inline, reference-style, image) and checks that its file exists and that its
 * `#anchor`, when the target is Markdown, is one of the target's heading slugs.
 * Invariants: links are what markdown-it parses (CommonMark + tables), so a `[x](y)` inside a code
 * block or inline code is not a link, as on GitHub; slugs are github-slugger's, GitHub's own
 * algorithm (lowercase, punctuation dropped, spaces to `-`, `-1`, `-2` … for repeated headings).
 * Hazards: a heading's slug comes from its text as rendered (inline code included, link targets
 * and emphasis markers not), so the text is collected from the inline token's children.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import MarkdownIt from 'markdown-it';
import type Token from 'markdown-it/lib/token.mjs';
import GithubSlugger from 'github-slugger';

const md = new MarkdownIt({ html: true });

export interface MarkdownLink {
  /** The link target as written. */
  readonly href: string;
  /** 1-based line of the block that holds the link. */
  readonly line: number;
}

/** Every link and image target of a Markdown text, in order. */
export function extractLinks(markdown: string): MarkdownLink[] {
  const links: MarkdownLink[] = [];
  let line = 1; // the last block start seen: inline tokens (and table cells) carry no line of their own
  const walk = (tokens: Token[]) => {
    for (const token of tokens) {
      if (token.map) line = token.map[0] + 1;
      if (token.type === 'link_open') links.push({ href: token.attrGet('href') ?? '', line });
      if (token.type === 'image') links.push({ href: token.attrGet('src') ?? '', line });
      if (token.children) walk(token.children);
    }
  };
  walk(md.parse(markdown, {}));
  return links;
}

/** The anchors GitHub gives the headings of a Markdown text. */
export function headingAnchors(markdown: string): Set<string> {
  const slugger = new GithubSlugger();
  const anchors = new Set<string>();
  const tokens = md.parse(markdown, {});
  for (let i = 0; i < tokens.length; i++) {
    if (tokens[i]!.type !== 'heading_open') continue;
    const text = (tokens[i + 1]!.children ?? [])
      .filter((t) => t.type === 'text' || t.type === 'code_inline')
      .map((t) => t.content)
      .join('');
    anchors.add(slugger.slug(text));
  }
  return anchors;
}

/** Markdown files under root, skipping dependencies, build output and git's own directory. */
export function markdownFiles(root: string): string[] {
  const skip = new Set(['node_modules', 'dist', '.git', 'test-output', 'data']);
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        if (!skip.has(entry.name)) walk(join(dir, entry.name));
      } else if (entry.name.endsWith('.md')) out.push(join(dir, entry.name));
    }
  };
  walk(root);
  return out.sort();
}

/** A link that does not resolve: where it is, and why. */
export interface BrokenLink {
  readonly file: string;
  readonly line: number;
  readonly href: string;
  readonly reason: string;
}

/** Checks every relative link of the Markdown files under root; external links are not fetched. */
export function brokenLinks(root: string, files = markdownFiles(root)): BrokenLink[] {
  const anchorCache = new Map<string, Set<string>>();
  const anchorsOf = (path: string) => {
    let anchors = anchorCache.get(path);
    if (!anchors) anchorCache.set(path, (anchors = headingAnchors(readFileSync(path, 'utf8'))));
    return anchors;
  };
  const broken: BrokenLink[] = [];
  for (const file of files) {
    const rel = relative(root, file).split(sep).join('/');
    for (const { href, line } of extractLinks(readFileSync(file, 'utf8'))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith('//')) continue; // https:, mailto:, …
      const hash = href.indexOf('#');
      const pathPart = decodeURIComponent(hash === -1 ? href : href.slice(0, hash));
      const anchor = hash === -1 ? null : decodeURIComponent(href.slice(hash + 1));
      const target = pathPart === '' ? file : resolve(pathPart.startsWith('/') ? root : dirname(file), pathPart.replace(/^\//, ''));
      if (!existsSync(target)) {
        broken.push({ file: rel, line, href, reason: `${relative(root, target)} does not exist` });
        continue;
      }
      if (anchor === null || !target.endsWith('.md') || statSync(target).isDirectory()) continue;
      if (!anchorsOf(target).has(anchor)) {
        broken.push({ file: rel, line, href, reason: `no heading with anchor #${anchor} in ${relative(root, target)}` });
      }
    }
  }
  return broken;
}
