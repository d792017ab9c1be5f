#!/usr/bin/env bash
# Makes a development CA and one certificate per node name, with the openssl
# command, for keel's TLS (--tls-cert, --tls-key, --tls-ca):
#   scripts/make-dev-certs.sh DIR NAME [NAME...]
# writes DIR/ca.pem and DIR/ca.key (the CA; keep ca.key off the nodes), and
# for each NAME DIR/NAME.pem and DIR/NAME.key: a certificate the CA signed
# whose CN and subjectAltName state NAME (as a DNS name, or as an IP address
# when NAME is one), valid for both server and client use. A NAME is what a
# peer names the node by: its host name, or NAME in --connect NAME@HOST:PORT.
# An existing CA in DIR is reused, so more nodes can be added later.
# For development only: the keys are unencrypted and the CA lives beside them.
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 DIR NAME [NAME...]   (e.g. $0 certs node-a node-b coordinator)" >&2
  exit 2
fi
command -v openssl >/dev/null || { echo "$0: the openssl command is missing (apt-get install openssl)" >&2; exit 1; }
dir=$1
shift
mkdir -p "$dir"
umask 077
days=825

if [ ! -f "$dir/ca.pem" ] || [ ! -f "$dir/ca.key" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$days" \
    -subj "/CN=keel development CA $(openssl rand -hex 4)" -keyout "$dir/ca.key" -out "$dir/ca.pem" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  echo "made $dir/ca.pem (the CA every node trusts) and $dir/ca.key"
fi

for name in "$@"; do
  if [[ ! "$name" =~ ^[A-Za-z0-9.-]+$ ]]; then
    echo "$0: '$name' is not a host name or IPv4 address" >&2
    exit 2
  fi
  if [[ "$name" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    san="IP:$name"
  else
    san="DNS:$name"
  fi
  ext=$(mktemp)
  trap 'rm -f "$ext"' EXIT
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' "$san" >"$ext"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
    -days "$days" -extfile "$ext" -out "$dir/$name.pem" 2>/dev/null
  rm -f "$dir/$name.csr" "$ext"
  echo "made $dir/$name.pem and $dir/$name.key ($san)"
done
