#!/usr/bin/env bash
# Distributed sampling over the QUIC mesh on one machine: 1, 2 and 4
# `node run` processes on 127.0.0.1, one loader per node (rank = part,
# world = parts), fanouts 15,10,5, batch 1024, 100 features; then the
# mesh's pull benchmark, QUIC against TLS over TCP.
#
#   perf/mesh/run.sh                         # 200 k nodes / 4 M edges
#   SIZE=products perf/mesh/run.sh           # 2.4 M nodes / 62 M edges
#   METHODS="random metis" BATCHES=100 perf/mesh/run.sh
#   SIZE=products METHODS="random metis freq" CACHES="0 0.2 0.5" PARTS=2 perf/mesh/run.sh
#   CLIENT=1 METHODS=metis PARTS=2 perf/mesh/run.sh   # each row again through a client node
#
# Environment: WORK (scratch dir, default a fresh one under /tmp), KEEP=1
# keeps the graph and parts, SIZE (small | products), METHODS (random,
# metis, freq), CACHES (hot-node cache ratios of the parts, `node
# partition --cache-ratio`; default 0 = none), PARTS (part counts, default
# "2 4"), BATCHES (per node, default 60, after WARM warm-up batches: default 150 at small size, 30 at products),
# RING (each node's [rings] size, default 1GB), WORKERS and
# CONCURRENCY (per loader), MESH_TIMEOUT (the nodes' [mesh] timeout; at
# products size one batch pulls ~27 MB, which on 2 shared CPUs with 4
# nodes can take longer than the default 10s), CLIENT=1 (every row again
# with the loaders opened on a client node, server-client mode).
set -euo pipefail

SIZE=${SIZE:-small}
METHODS=${METHODS:-random metis}
CACHES=${CACHES:-0}
PARTS=${PARTS:-2 4}
BATCHES=${BATCHES:-60}
# Warm-up: more batches than the ring holds (~120 at 200 k nodes, ~20 at
# products size), so that the timed ones are made while they are read.
case "$SIZE" in
products) WARM=${WARM:-30} ;;
*) WARM=${WARM:-150} ;;
esac
RING=${RING:-1GB}
WORKERS=${WORKERS:-2}
CONCURRENCY=${CONCURRENCY:-4}
MESH_TIMEOUT=${MESH_TIMEOUT:-10s}
WORK=${WORK:-$(mktemp -d /tmp/graphnode-perf-mesh.XXXXXX)}
KEEP=${KEEP:-0}
CLIENT=${CLIENT:-0}

case "$SIZE" in
small) gen="--nodes 200000 --edges 4000000 --feat-dim 100 --classes 47 --train-frac 0.1" ;;
products) gen="--nodes 2400000 --edges 62000000 --feat-dim 100 --classes 47" ;;
*)
	echo "run.sh: SIZE is small or products" >&2
	exit 2
	;;
esac

root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$WORK/bin"
NODE="$WORK/bin/node"
DRIVER="$WORK/bin/meshperf"
(cd "$root" && CGO_ENABLED=0 go build -o "$NODE" ./cmd/node && go build -o "$DRIVER" ./perf/mesh)
cleanup() { [ "$KEEP" = 1 ] || rm -rf "${WORK:?}/graph" "$WORK"/parts-*; }
trap cleanup EXIT

echo "work dir $WORK; $(df -h "$WORK" | tail -1)"
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(uptime | sed 's/.*load average/load average/')"
if [ ! -d "$WORK/graph/raw" ]; then
	echo "== node gen rmat $gen"
	# shellcheck disable=SC2086 # gen is a list of flags
	"$NODE" gen rmat $gen -o "$WORK/graph" >/dev/null
fi
parts_of() { # method parts cache -> directory
	local dir="$WORK/parts-$1-$2-cache$3" fanouts=none
	# The cache ranking and the freq partitioner estimate sampling heat.
	if [ "$1" = freq ] || [ "$3" != 0 ]; then fanouts=15,10,5; fi
	if [ ! -f "$dir/graph.toml" ]; then
		"$NODE" partition --input "$WORK/graph" --format ogb --parts "$2" --method "$1" --fanouts "$fanouts" \
			--cache-ratio "$3" -o "$dir" >"$dir.log" 2>&1 || {
			cat "$dir.log" >&2
			return 1
		}
	fi
	echo "$dir"
}
flags=(-batches "$BATCHES" -warm "$WARM" -ring "$RING" -workers "$WORKERS" -concurrency "$CONCURRENCY" -batch 1024 -fanouts 15,10,5 -mesh-timeout "$MESH_TIMEOUT")
"$DRIVER" -header
row() { # parts-dir label
	"$DRIVER" -node "$NODE" -parts "$1" -label "$2" "${flags[@]}"
	[ "$CLIENT" = 0 ] || "$DRIVER" -node "$NODE" -parts "$1" -label "$2, via client" -client "${flags[@]}"
}
row "$(parts_of random 1 0)" "local (1 part)"
for m in $METHODS; do
	for c in $CACHES; do
		for p in $PARTS; do
			dir=$(parts_of "$m" "$p" "$c") || {
				echo "$m $p parts, cache $c: partitioning failed" >&2
				continue
			}
			label="$m $p parts"
			[ "$c" = 0 ] || label="$label, cache $c"
			row "$dir" "$label"
		done
	done
done
echo
echo "== mesh pull: QUIC vs TLS over TCP (go test -bench Pull ./mesh/)"
(cd "$root" && go test -run '^$' -bench 'Pull' -benchtime 2s ./mesh/ | grep -E '^Benchmark')
