// An OCI image layout directory (image-spec image-layout.md): `oci-layout`, `index.json`
// listing each image's manifest (with its tag as org.opencontainers.image.ref.name), and
// every blob under blobs/sha256/<hex>. Tools that read layouts (skopeo, crane, containerd's
// `ctr import --oci`... and a future `make image`) take it as it is.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { descriptor, jsonBlob, type Blob } from './blob.ts';
import { MEDIA_TYPE, type OciImage } from './image.ts';

export const REF_NAME_ANNOTATION = 'org.opencontainers.image.ref.name';

export interface LayoutImage {
  image: OciImage;
  /** The tag in index.json, e.g. `v1.36.1`; none lists the manifest without a name. */
  tag?: string;
}

/** Writes the layout into `dir` (created if missing) and returns index.json's blob. */
export function writeOciLayout(dir: string, images: readonly LayoutImage[]): Blob {
  const blobs = join(dir, 'blobs', 'sha256');
  mkdirSync(blobs, { recursive: true });
  for (const { image } of images)
    for (const b of [image.manifest, image.config, ...image.layers])
      writeFileSync(join(blobs, b.digest.slice('sha256:'.length)), b.bytes);
  writeFileSync(join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  const index = {
    schemaVersion: 2,
    mediaType: MEDIA_TYPE.index,
    manifests: images.map(({ image, tag }) =>
      descriptor(image.manifest, tag !== undefined ? { [REF_NAME_ANNOTATION]: tag } : undefined),
    ),
  };
  const written = jsonBlob(MEDIA_TYPE.index, index);
  writeFileSync(join(dir, 'index.json'), written.bytes);
  return written;
}
