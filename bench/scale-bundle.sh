#!/bin/sh
# Packs what `node dist/bench/scale.js` needs into one tarball, for a machine
# with many cores but no network and no Node.js: this machine's node binary, the
# built dist/, package.json, keyslice's production node_modules, bench/peers
# (ioredis), and redis-server with the shared libraries it links beyond the C
# runtime, behind a wrapper that points the loader at them (for redis-server
# only: node keeps the target's own libc). The target needs the same CPU
# architecture and a glibc at least as new as the one these were built against.
#
#   bench/scale-bundle.sh [out.tar.gz]        (default: keyslice-scale.tar.gz)
#   # on the target:
#   tar xzf keyslice-scale.tar.gz && cd keyslice-scale
#   bin/node dist/bench/scale.js --redis-server redis/redis-server --shapes 0:4:4,4:4:4,8:4:4 --clients 8
set -eu
out=$(realpath -m "${1:-keyslice-scale.tar.gz}")
root=$(cd "$(dirname "$0")/.." && pwd)
redis=$(command -v redis-server || true)
[ -n "$redis" ] || { echo "scale-bundle: no redis-server here (apt-get install -y redis-server), or bundle without Redis and run with --redis-server none" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
b=$work/keyslice-scale
mkdir -p "$b/bin" "$b/redis/lib" "$b/bench/peers"

(cd "$root" && npm run build >/dev/null)
cp "$(command -v node)" "$b/bin/node"
cp -r "$root/dist" "$root/package.json" "$root/package-lock.json" "$b/"
find "$b/dist" -name '*.map' -delete
(cd "$b" && npm ci --omit=dev --no-audit --no-fund >/dev/null)
cp "$root/bench/peers/package.json" "$root/bench/peers/package-lock.json" "$b/bench/peers/"
(cd "$b/bench/peers" && npm ci --no-audit --no-fund >/dev/null)

cp "$redis" "$b/redis/redis-server.bin"
# Every library redis-server links but the C runtime, which the target has (and must not be mixed).
ldd "$redis" | awk '/=> \// { print $3 }' | grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' | while read -r lib; do cp -L "$lib" "$b/redis/lib/"; done
cat > "$b/redis/redis-server" <<'WRAP'
#!/bin/sh
here=${0%/*}
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/redis-server.bin" "$@"
WRAP
chmod +x "$b/redis/redis-server"

tar czf "$out" -C "$work" keyslice-scale
echo "scale-bundle: wrote $out ($(du -h "$out" | cut -f1)): node $("$b/bin/node" --version), $("$b/redis/redis-server" --version | cut -d' ' -f3)"
