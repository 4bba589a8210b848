#!/usr/bin/env bash
# Makes a local Node.js base image for building deploy/container/Containerfile where no container
# registry is reachable (CI, the development sandboxes): Debian bookworm (minbase) from the Debian
# mirror with debootstrap, the Node.js binary of scripts/node-lts.sh and this machine's npm, the
# machine's CA bundle (a TLS-intercepting proxy's CA included, for npm ci inside the build).
#
#   scripts/container-test-base.sh [image-name]       # default localhost/node-local:24-bookworm
#   ECAPI_TEST_CONTAINER_BASE=localhost/node-local:24-bookworm \
#     node --test packages/server/dist/test/deploy/container-build.test.js
#
# Needs root, debootstrap and podman (apt-get install -y debootstrap podman buildah).
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE="${1:-localhost/node-local:24-bookworm}"
ROOTFS="$(mktemp -d /tmp/ecapi-base.XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT
debootstrap --variant=minbase bookworm "$ROOTFS" http://deb.debian.org/debian >/dev/null
NODE_DIR="$(scripts/node-lts.sh 24)"
install -m 0755 "$NODE_DIR/bin/node" "$ROOTFS/usr/local/bin/node"
NPM_DIR="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")"
mkdir -p "$ROOTFS/usr/local/lib/node_modules"
cp -a "$NPM_DIR" "$ROOTFS/usr/local/lib/node_modules/npm"
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$ROOTFS/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$ROOTFS/usr/local/bin/npx"
mkdir -p "$ROOTFS/etc/ssl/certs"
cp /etc/ssl/certs/ca-certificates.crt "$ROOTFS/etc/ssl/certs/ca-certificates.crt"
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb
tar -C "$ROOTFS" -c . | podman import --change 'CMD ["node"]' \
  --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' - "$IMAGE" >/dev/null
echo "$IMAGE"
