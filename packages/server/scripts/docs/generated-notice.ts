/** The first line of every generated reference page: where it comes from and how to regenerate it. */
export const GENERATED_NOTICE = (source: string): string =>
  `<!-- Generated from ${source} by \`npm run docs\` (packages/server/scripts/generate-reference-docs.ts). Do not edit: npm test fails when this page differs from the code. -->`;
