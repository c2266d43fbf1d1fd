#!/bin/sh
# Builds a Redis image FROM scratch out of the host's redis-server and the
# shared libraries ldd lists (no RUN steps, nothing pulled), for machines
# whose Docker engine cannot reach a registry. The Go harness does the same
# (integration/harness/image.go) when REDLOCK_REDIS_IMAGE is neither present
# nor pullable.
#
#   integration/scripts/build-image.sh [tag]      # default redlock-redis:local
#   REDLOCK_REDIS_IMAGE=redlock-redis:local docker-compose up -d
set -eu
TAG=${1:-redlock-redis:local}
BIN=${REDIS_SERVER:-$(command -v redis-server || echo /usr/bin/redis-server)}
[ -x "$BIN" ] || { echo "build-image: redis-server not found (apt-get install -y redis-server)" >&2; exit 1; }
CTX=$(mktemp -d)
trap 'rm -rf "$CTX"' EXIT
mkdir -p "$CTX/rootfs/usr/bin" "$CTX/rootfs/data" "$CTX/rootfs/tmp"
cp -L "$BIN" "$CTX/rootfs/usr/bin/redis-server"
# Every absolute path ldd prints: "lib => /path (addr)" and "/lib64/ld-linux... (addr)".
for lib in $(ldd "$BIN" | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i}'); do
	mkdir -p "$CTX/rootfs$(dirname "$lib")"
	cp -L "$lib" "$CTX/rootfs$lib"
done
cat > "$CTX/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin
WORKDIR /data
EXPOSE 6379
CMD ["redis-server", "--protected-mode", "no"]
DOCKERFILE
docker build -q -t "$TAG" "$CTX" >/dev/null
echo "build-image: built $TAG from $BIN ($("$BIN" --version | awk '{print $3}'))"
