/** The repository's root directory (this file is at packages/server/dist/scripts/docs/ once built). */
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../../../../../', import.meta.url));
