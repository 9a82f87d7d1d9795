#!/bin/sh
# A Debian base image made from Debian's own packages, with no image registry: mmdebstrap
# writes a minimal root file system (from deb.debian.org or the mirror apt uses), podman
# imports it as an image. Run as root (or as a user mmdebstrap's unshare mode accepts).
#
#     container/make-base.sh [SUITE] [TAG]        # bookworm, localhost/tcplab-base:bookworm
set -eu
suite=${1:-bookworm}
tag=${2:-localhost/tcplab-base:$suite}
mirror=${TCPLAB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
mmdebstrap --variant=minbase --include=ca-certificates,make,python3,python3-venv \
  --aptopt='Acquire::Retries "3"' "$suite" - "$mirror" "deb $mirror-security $suite-security main" \
  | podman import --change 'CMD ["/bin/bash"]' - "$tag"
echo "base image $tag"
