/**
 * Unknown data sets are errors everywhere (issue 18): a command that reads a data set's records,
 * stats or queue entries refuses a name the control plane does not know, with the control plane's
 * own message and exit code 1, instead of printing zeros or nothing. Reading the data sets needs
 * no master key.
 */
import { ControlPlaneError } from '../errors.js';
import type { Storage } from '../storage/storage.js';

export async function requireDataSet(storage: Pick<Storage, 'controlPlane'>, dataSetId: string): Promise<void> {
  const known = await storage.controlPlane().listDataSets();
  if (!known.some((record) => record.id === dataSetId)) throw new ControlPlaneError(`data set ${dataSetId} does not exist`);
}
