/**
 * Checked before anything starts: the admin port may listen beyond loopback only behind a token,
 * and a token, wherever the port listens, must be strong (admin-guard.ts says why it is enforced
 * on loopback too). The errors are one line and never echo the token.
 */
import type { ServeConfig } from '../config.js';
import { isLoopbackHost } from './admin-app.js';
import { AdminHostCheck, adminTokenWeakness, MIN_ADMIN_TOKEN_LENGTH } from './admin-guard.js';

export function assertAdminExposure(config: ServeConfig): void {
  if (config.adminToken !== undefined) {
    const weakness = adminTokenWeakness(config.adminToken);
    if (weakness) {
      throw new Error(
        `the admin token (ECAPI_ADMIN_TOKEN or --admin-token) is too weak: ${weakness}; use at least ${MIN_ADMIN_TOKEN_LENGTH} random characters, e.g. \`openssl rand -hex 32\``,
      );
    }
  }
  if (!isLoopbackHost(config.adminHost) && !config.adminToken) {
    throw new Error(
      `the admin port would listen on ${config.adminHost}, beyond loopback: set ECAPI_ADMIN_TOKEN (or --admin-token) to protect it`,
    );
  }
  // Malformed --admin-allowed-hosts entries fail here, before anything listens.
  new AdminHostCheck(config.adminHost, config.adminAllowedHosts ?? []);
}
