#!/usr/bin/env bash
# Shows that `npm ci` needs no build tools: it runs in a copy of the repository with a PATH that holds
# node, npm and a shell but no python3, make or C/C++ compiler, under strace, and then checks that
# no compiler, make or node-gyp was started and that the SQLite driver loads its prebuilt binary.
# Usage: scripts/check-install-compiles-nothing.sh   (from the repository, with node and npm on PATH)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
strace="$(command -v strace)"
work="$(mktemp -d /tmp/ecapi-nocompile.XXXXXX)"
trap 'rm -rf "$work"' EXIT
git -C "$repo" ls-files -z | (cd "$repo" && xargs -0 cp --parents -t "$work")
mkdir "$work/.bin"
ln -s "$(command -v node)" "$work/.bin/node"
ln -s "$(dirname "$(readlink -f "$(command -v npm)")")/npm-cli.js" "$work/.bin/npm"
for tool in sh bash env uname; do ln -s "$(command -v "$tool")" "$work/.bin/$tool"; done
cd "$work"
PATH="$work/.bin" "$strace" -f -qq -e trace=execve -o "$work/execve.txt" npm ci --no-audit --no-fund >"$work/npm-ci.log" 2>&1 || {
  cat "$work/npm-ci.log" >&2
  echo "npm ci failed without python3, make and a compiler" >&2
  exit 1
}
if grep -E 'execve\("[^"]*/(cc|gcc|g\+\+|c\+\+|clang|clang\+\+|cc1|cc1plus|make|python3?|node-gyp)",' "$work/execve.txt" | grep -v ENOENT; then
  echo "npm ci started a build tool" >&2
  exit 1
fi
PATH="$work/.bin" node -e "const D = require('better-sqlite3'); const db = new D(':memory:'); console.log('npm ci compiled nothing; better-sqlite3 ' + require('better-sqlite3/package.json').version + ' loaded, SQLite ' + db.prepare('select sqlite_version() v').get().v)"
