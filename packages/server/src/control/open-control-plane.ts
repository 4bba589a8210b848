import { controlDbFile, type Environment } from '../config.js';
import type { ControlPlane } from './control-plane.js';
import { masterKeyLoader } from './secret-box.js';
import { SqliteControlPlane } from './sqlite-control-plane.js';

/** Opens the control plane of one environment of a data dir (embedded profile). */
export function openControlPlane(dataDir: string, env: Environment): ControlPlane {
  return new SqliteControlPlane(controlDbFile(dataDir, env), masterKeyLoader({ dataDir }));
}
