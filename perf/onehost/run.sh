#!/usr/bin/env bash
# One host, one partition: sampler, feature gather, ring, and batches/s
# through `node run` as the Go and the Python clients see them.
#
#   perf/onehost/run.sh                      # the 1 M node graph, then products size
#   SIZES=small perf/onehost/run.sh          # 100 k nodes: a quick check (~2 min)
#   SIZES="dgl" KEEP=1 WORK=/tmp/oh perf/onehost/run.sh
#
# Graphs (SIZES, space-separated, in order):
#   small     100 k nodes, 1 M edges, 100 features, 47 classes
#   dgl       1 M nodes, 5 M R-MAT pairs written both ways (10 M directed
#             edges, DGL's num_edges() of the same graph), 100 features,
#             47 classes, 10% of the non-isolated nodes for training: the
#             graph of the DGL 1.1.3 reference numbers
#   products  2.4 M nodes, 62 M edges, 100 features, 47 classes (the size
#             of ogbn-products' node set and edge count)
#
# Environment: WORK (scratch dir, default a fresh one under /tmp), KEEP=1
# (keep the generated input and the parts), SIZES, SECS (seconds per
# in-process measurement, default 10), PYTHON (default /usr/bin/python3),
# RING (1 to run the ring measurement, default 1).
# Disk: ~1.7 GB for dgl, ~3.5 GB of OGB text + ~1.6 GB of parts for
# products (the text is deleted once partitioned unless KEEP=1).
# Memory: ~5 GB while partitioning products; the measurements map the
# partition (shared page cache) and use 2 GiB for the copy baseline.
set -euo pipefail

SIZES=${SIZES:-dgl products}
WORK=${WORK:-$(mktemp -d /tmp/graphnode-perf-onehost.XXXXXX)}
KEEP=${KEEP:-0}
SECS=${SECS:-10}
PYTHON=${PYTHON:-/usr/bin/python3}
RING=${RING:-1}

root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$WORK/bin"
NODE="$WORK/bin/node"
DRIVER="$WORK/bin/onehost"
(cd "$root" && CGO_ENABLED=0 go build -o "$NODE" ./cmd/node && go build -o "$DRIVER" ./perf/onehost)
RESULTS="$WORK/results.txt"
: >"$RESULTS"

cleanup() {
	if [ "$KEEP" != 1 ]; then
		for s in $SIZES; do rm -rf "${WORK:?}/$s"; done
	fi
}
trap cleanup EXIT

echo "work dir $WORK; free space:"
df -h "$WORK" | tail -1
echo "machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2/2^20}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"

# graph_of SIZE: the table name, the `node gen rmat` flags and the client
# subcommand's flags (how many batches each client run reads) of a size.
graph_of() {
	case "$1" in
	small) echo "rmat-100k|--nodes 100000 --edges 1000000 --feat-dim 100 --classes 47 --train-frac 0.1|-epochs 10" ;;
	dgl) echo "rmat-1M|--nodes 1000000 --edges 5000000 --undirected --feat-dim 100 --classes 47 --train-frac 0.1|-epochs 4" ;;
	products) echo "rmat-2.4M|--nodes 2400000 --edges 62000000 --feat-dim 100 --classes 47|-batches 40 -repeat 2" ;;
	*)
		echo "run.sh: unknown size $1 (small, dgl, products)" >&2
		exit 2
		;;
	esac
}

# measure: run a driver command, keep its output, and note the load.
measure() {
	echo "== $* ($(uptime | sed 's/.*load average/load average/'))" | tee -a "$RESULTS"
	"$DRIVER" "$@" | tee -a "$RESULTS"
}

for s in $SIZES; do
	IFS='|' read -r name gen clientflags <<<"$(graph_of "$s")"
	dir="$WORK/$s"
	if [ ! -f "$dir/parts/graph.toml" ]; then
		if [ ! -d "$dir/rmat/raw" ]; then
			echo "== node gen rmat $gen"
			# shellcheck disable=SC2086 # gen is a list of flags
			"$NODE" gen rmat $gen -o "$dir/rmat"
		fi
		echo "== node partition --format ogb --parts 1 ($name)"
		"$NODE" partition --input "$dir/rmat" --format ogb --parts 1 -o "$dir/parts" 2>&1 | grep -E 'cleaned|split keep|wrote'
		[ "$KEEP" = 1 ] || rm -rf "$dir/rmat"
	fi
	"$NODE" inspect "$dir/parts" | sed -n '1,6p' | tee -a "$RESULTS"
	part="$dir/parts/part-0/part.csr"
	measure sample -graph "$name" -part "$part" -seconds "$SECS"
	measure gather -graph "$name" -part "$part" -seconds "$((SECS / 2))"
	# shellcheck disable=SC2086 # clientflags is a list of flags
	measure client -graph "$name" -node "$NODE" -parts "$dir/parts" $clientflags \
		-python "$root/perf/onehost/bench_python.py" -python-exe "$PYTHON"
done
if [ "$RING" = 1 ]; then
	measure ring -graph - -seconds "$((SECS / 2))"
fi

echo
echo "== results ($(date -u +%Y-%m-%dT%H:%MZ), $(uptime | sed 's/.*load average/load average/'))"
"$DRIVER" table "$RESULTS" | tee "$WORK/table.txt"
