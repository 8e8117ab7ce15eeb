#!/usr/bin/env bash
# Distributed sampling over the QUIC mesh on one machine: 1, 2 and 4
# `node run` processes on 127.0.0.1, one loader per node (rank = part,
# world = parts), fanouts 15,10,5, batch 1024, 100 features; then the
# mesh's pull benchmark, QUIC against TLS over TCP.
#
#   perf/mesh/run.sh                         # 200 k nodes / 4 M edges
#   SIZE=products perf/mesh/run.sh           # 2.4 M nodes / 62 M edges
#   METHODS="random metis" BATCHES=100 perf/mesh/run.sh
#
# Environment: WORK (scratch dir, default a fresh one under /tmp), KEEP=1
# keeps the graph and parts, SIZE (small | products), METHODS (random,
# metis), BATCHES (per node, after 5 warm-up batches), WORKERS and
# CONCURRENCY (per loader), MESH_TIMEOUT (the nodes' [mesh] timeout; at
# products size one batch pulls ~27 MB, which on 2 shared CPUs with 4
# nodes can take longer than the default 10s).
set -euo pipefail

SIZE=${SIZE:-small}
METHODS=${METHODS:-random metis}
BATCHES=${BATCHES:-60}
WORKERS=${WORKERS:-2}
CONCURRENCY=${CONCURRENCY:-4}
MESH_TIMEOUT=${MESH_TIMEOUT:-10s}
WORK=${WORK:-$(mktemp -d /tmp/graphnode-perf-mesh.XXXXXX)}
KEEP=${KEEP:-0}

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
parts_of() { # method parts -> directory
	local dir="$WORK/parts-$1-$2"
	if [ ! -f "$dir/graph.toml" ]; then
		"$NODE" partition --input "$WORK/graph" --format ogb --parts "$2" --method "$1" --fanouts none -o "$dir" >/dev/null 2>&1
	fi
	echo "$dir"
}
flags=(-batches "$BATCHES" -workers "$WORKERS" -concurrency "$CONCURRENCY" -batch 1024 -fanouts 15,10,5 -mesh-timeout "$MESH_TIMEOUT")
"$DRIVER" -header
"$DRIVER" -node "$NODE" -parts "$(parts_of random 1)" -label "local (1 part)" "${flags[@]}"
for m in $METHODS; do
	for p in 2 4; do
		dir=$(parts_of "$m" "$p") || {
			echo "$m $p: partitioning failed" >&2
			continue
		}
		"$DRIVER" -node "$NODE" -parts "$dir" -label "$m $p parts" "${flags[@]}"
	done
done
echo
echo "== mesh pull: QUIC vs TLS over TCP (go test -bench Pull ./mesh/)"
(cd "$root" && go test -run '^$' -bench 'Pull' -benchtime 2s ./mesh/ | grep -E '^Benchmark')
