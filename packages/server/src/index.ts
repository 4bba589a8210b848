export { startService, type RunningService } from './service.js';
export { buildServer } from './http/public-server.js';
export { buildAdminApp } from './admin/admin-app.js';
export { main } from './cli/main.js';
export type { EventQueue, QueueAppend, QueueRecord } from './queue/event-queue.js';
export type { ControlPlane } from './control/control-plane.js';
