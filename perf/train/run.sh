#!/usr/bin/env bash
# End-to-end epoch time of the built-in GraphSAGE trainer (`node train`)
# on a two-node cluster on loopback, and the share of the epoch it waits
# for the loader (target: the loader is never the bottleneck).
#
#   perf/train/run.sh                       # R-MAT 2.4 M nodes / 62 M edges, 100 features, 47 classes
#   NODES=200000 EDGES=5200000 perf/train/run.sh   # a quick run at the same average degree
#
# Fanouts 15,10,5 (3 SAGE layers), batch 1024, hidden 128, 2 nodes, one
# trainer per node, random partitioning, 1 epoch, no evaluation. The
# table `node demo` prints has per epoch: batches/s and sampled edges/s
# (both trainers together), the epoch's seconds and "loader wait", the
# share of the epoch the slower trainer spent waiting in loader.Next.
#
# Environment: WORK (scratch dir, default a fresh one under /tmp), NODES,
# EDGES, EPOCHS, WORKERS (sampler processes per loader), KEEP=1. A graph
# already in $WORK/rmat (OGB raw layout) is reused.
set -euo pipefail

NODES=${NODES:-2400000}
EDGES=${EDGES:-62000000}
EPOCHS=${EPOCHS:-1}
WORKERS=${WORKERS:-2}
WORK=${WORK:-$(mktemp -d /tmp/graphnode-perf-train.XXXXXX)}
KEEP=${KEEP:-0}

root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$WORK/bin"
NODE="$WORK/bin/node"
(cd "$root" && CGO_ENABLED=0 go build -o "$NODE" ./cmd/node)
cleanup() {
	if [ "$KEEP" != 1 ]; then
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT

if [ -d "$WORK/rmat/raw" ]; then
	echo "== reuse the graph in $WORK/rmat"
else
	echo "== generate R-MAT: $NODES nodes, $EDGES edges"
	"$NODE" gen rmat --nodes "$NODES" --edges "$EDGES" --feat-dim 100 --classes 47 --seed 1 -o "$WORK/rmat"
fi
echo "== train: 2 nodes on loopback, fanouts 15,10,5, batch 1024"
/usr/bin/time -f "%e s wall, %M KB peak RSS (demo process)" \
	"$NODE" demo --input "$WORK/rmat" --format ogb --parts 2 --method random --cache-ratio 0 \
	--fanouts 15,10,5 --batch-size 1024 --hidden 128 --epochs "$EPOCHS" --eval=false \
	--workers "$WORKERS" --ring-size 2GB --workdir "$WORK/demo"
