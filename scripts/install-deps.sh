#!/usr/bin/env bash
# Installs the Debian packages keel builds and tests with, if any is missing.
# Idempotent: runs `apt-get update` only when something must be installed.
#   KEEL_FUZZ=1 bash scripts/install-deps.sh   also clang and its libFuzzer
#   runtime, for the optional fuzz build (tests/fuzz/README.md); the build
#   and the test suite do not need them.
set -euo pipefail

packages=(
  build-essential cmake pkgconf
  ccache  # scripts/build.sh: a clone rebuilds only what an earlier build did not compile
  libcaf-dev
  capnproto libcapnp-dev
  libboost-dev libboost-program-options-dev
  nlohmann-json3-dev
  doctest-dev
  curl
  openssl libssl-dev
  iproute2 nftables  # the network-namespace cluster tests (scripts/netns-cluster.sh)
  # The Python module (demos/python) for Debian's own interpreter, its tests
  # and example: pybind11, numpy, pytest.
  python3 python3-dev pybind11-dev python3-numpy python3-pytest
)
if [ "${KEEL_FUZZ:-0}" = 1 ]; then
  packages+=(clang libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "keel: installing missing packages: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "keel: installing packages needs root (apt-get); run as root or install: ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
