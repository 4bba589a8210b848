/**
 * The generated reference pages, rendered in memory: path (from the repository root) -> content.
 * The generator writes them (scripts/generate-reference-docs.ts); the drift test compares them with
 * the committed files (test/docs/reference-docs.test.ts).
 */
import { renderCliReference } from './cli-reference.js';
import { renderConfigurationReference } from './configuration-reference.js';
import { renderErrorReference } from './error-reference.js';
import { renderMetricsReference } from './metrics-reference.js';

export function renderReferenceDocs(): Map<string, string> {
  return new Map([
    ['docs/reference/cli.md', renderCliReference()],
    ['docs/reference/configuration.md', renderConfigurationReference()],
    ['docs/reference/errors.md', renderErrorReference()],
    ['docs/reference/metrics.md', renderMetricsReference()],
  ]);
}
