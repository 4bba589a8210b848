/** The admin port may listen beyond loopback only behind a token; checked before anything starts. */
import type { ServeConfig } from '../config.js';
import { isLoopbackHost } from './admin-app.js';

export function assertAdminExposure(config: ServeConfig): void {
  if (!isLoopbackHost(config.adminHost) && !config.adminToken) {
    throw new Error(
      `the admin port would listen on ${config.adminHost}, beyond loopback: set ECAPI_ADMIN_TOKEN (or --admin-token) to protect it`,
    );
  }
}
