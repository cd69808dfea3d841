// The `job` executor's binaries, on the worker's side: the pinned digests read
// from NODE_UPGRADE_CHECKSUMS_FILE (checked before a Job exists, so a version
// nobody pinned never touches a node) and the volume of pre-staged binaries.
import { readFileSync, statSync } from 'node:fs';
import type { V1Volume } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import {
  BINARY_VOLUME_MOUNT,
  MAX_CHECKSUMS_FILE_BYTES,
  parseChecksums,
  pinnedDigests,
  type BinaryVolume,
  type NodeBinary,
} from '../../domain/node-binaries.ts';
import { MACHINE_UPDATE_FAILURES } from '../machine-update-common.ts';

/**
 * Where the Job's script fetches the binaries: the configured source, else the pre-staged volume
 * when one is configured (air-gapped), else undefined (the script's default, dl.k8s.io).
 */
export function jobBinarySource(config: { binarySource?: string; binaryVolume?: BinaryVolume }): string | undefined {
  return config.binarySource ?? (config.binaryVolume ? `file://${BINARY_VOLUME_MOUNT}` : undefined);
}

/** The Job's read-only volume of pre-staged binaries (NODE_UPGRADE_BINARY_VOLUME). */
export function binaryVolumeSource(v: BinaryVolume): V1Volume {
  switch (v.kind) {
    case 'pvc':
      return { name: 'binaries', persistentVolumeClaim: { claimName: v.claimName, readOnly: true } };
    case 'hostPath':
      return { name: 'binaries', hostPath: { path: v.path, type: 'Directory' } };
    case 'image':
      return { name: 'binaries', image: { reference: v.reference, pullPolicy: 'IfNotPresent' } };
  }
}

/**
 * The pinned sha256 of each binary of `version` for `arch`, from the checksums file; a
 * non-retryable failure naming what is missing, before the Job (and so the node) is touched.
 */
export function pinnedBinaryDigests(
  file: string | undefined,
  version: string,
  arch: string,
): Record<NodeBinary, string> {
  const refuse = (why: string) =>
    ApplicationFailure.nonRetryable(`${why} (docs/node-upgrade-job.md)`, MACHINE_UPDATE_FAILURES.invalidInput);
  if (!file) throw refuse(`no pinned checksums for ${version}: NODE_UPGRADE_CHECKSUMS_FILE is not set`);
  let text: string;
  try {
    if (statSync(file).size > MAX_CHECKSUMS_FILE_BYTES)
      throw refuse(`NODE_UPGRADE_CHECKSUMS_FILE ${file} is over ${MAX_CHECKSUMS_FILE_BYTES} bytes`);
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if (err instanceof ApplicationFailure) throw err;
    const code = typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : 'error';
    throw refuse(`NODE_UPGRADE_CHECKSUMS_FILE ${file} cannot be read (${code})`);
  }
  const { table, problems } = parseChecksums(text);
  if (problems.length > 0) throw refuse(`NODE_UPGRADE_CHECKSUMS_FILE ${file}: ${problems[0]}`);
  const pinned = pinnedDigests(table, version, arch);
  if (!pinned.ok) throw refuse(`${pinned.missing} in NODE_UPGRADE_CHECKSUMS_FILE ${file}`);
  return pinned.digests;
}
