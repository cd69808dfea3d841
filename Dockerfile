# syntax=docker/dockerfile:1
# Build: compile TypeScript and prebuild the workflow bundle, then keep only
# production dependencies. Runtime: Node 24 slim (glibc, which Temporal's
# native core needs), non-root, no build tools.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Locked versions; see scripts/env.sh for why not `npm ci`.
RUN npm install --no-save --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts/bundle-workflows.ts ./scripts/
RUN npm run build \
 && node scripts/bundle-workflows.ts dist/workflow-bundle.js \
 && npm prune --omit=dev

FROM node:24-bookworm-slim AS runtime
# V8 otherwise sizes its heaps to the node's memory, not the container's, and collects
# lazily: the worker then peaked at ~550 MiB for a load whose live heap is ~70 MiB
# (docs/performance.md). 4 MiB semi-spaces keep the young generation of both isolates
# (main and workflow thread) small; raise max-old-space-size with the memory limit
# (Temporal's SDK sizes its workflow cache from it).
ENV NODE_OPTIONS="--max-semi-space-size=4 --max-old-space-size=256"
# glibc gives each thread that allocates its own malloc arena (up to 8 per core): the worker's
# Rust core (tokio), V8's and libuv's threads left ~20 MiB of fragmented free memory resident
# under the fleet benchmark. Two arenas cost no measurable throughput there.
ENV MALLOC_ARENA_MAX=2
# Worker Versioning: the worker registers as this build of its Worker Deployment
# (docs/worker-versioning.md). Stamp every image: docker build --build-arg BUILD_ID=$(git rev-parse --short HEAD) .
# Empty = unversioned workers.
ARG BUILD_ID=""
ENV TEMPORAL_WORKER_BUILD_ID=${BUILD_ID}
# The release (docs/release.md): the processes report it at /version, in their start-up log,
# as capi_upgrade_build_info and in each upgrade's memo. Unset = package.json's version, -dev.
#   docker build --build-arg VERSION=v0.2.0 --build-arg BUILD_ID=$(git rev-parse --short HEAD) .
ARG VERSION=""
ENV CAPI_UPGRADE_VERSION=${VERSION}
ARG REVISION=""
LABEL org.opencontainers.image.title="capi-upgrade-orchestrator" \
      org.opencontainers.image.description="Cluster API Runtime Extension: cluster upgrades and in-place machine updates as Temporal workflows" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/capi-upgrade-orchestrator/capi-upgrade-orchestrator" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV NODE_ENV=production \
    WORKFLOW_BUNDLE_PATH=/app/dist/workflow-bundle.js \
    HOOK_SERVER_PORT=9443
WORKDIR /app
COPY --from=build --chown=root:root /app/package.json ./
COPY --from=build --chown=root:root /app/node_modules ./node_modules
COPY --from=build --chown=root:root /app/dist ./dist
# The node upgrade script the job executor runs (tsc does not copy non-TypeScript files).
COPY --from=build --chown=root:root /app/src/activities/executors/upgrade-node.sh ./dist/activities/executors/
# Numeric (the image's `node` user) so the kubelet can check runAsNonRoot.
USER 1000:1000
EXPOSE 9443
ENTRYPOINT ["node", "dist/main.js"]
