#!/usr/bin/env bash
# Partitioning at ogbn-products scale: time, peak memory, bytes written.
#
#   perf/partition/run.sh            # 2.4 M nodes, 62 M edges, 100 features, 47 classes
#   NODES=100000 EDGES=2000000 perf/partition/run.sh   # a quick run
#
# Environment: WORK (scratch dir, default a fresh one under /tmp), NODES,
# EDGES, FEAT_DIM, CLASSES, PARTS, METHOD, KEEP=1 (keep the generated
# input and the parts in WORK). Needs about 6-8 GB free in WORK at full
# size. Target: peak RSS / bytes written < 3.
set -euo pipefail

NODES=${NODES:-2400000}
EDGES=${EDGES:-62000000}
FEAT_DIM=${FEAT_DIM:-100}
CLASSES=${CLASSES:-47}
PARTS=${PARTS:-4}
METHOD=${METHOD:-random}
WORK=${WORK:-$(mktemp -d /tmp/graphnode-perf-partition.XXXXXX)}
KEEP=${KEEP:-0}

root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$WORK/bin"
NODE="$WORK/bin/node"
(cd "$root" && go build -o "$NODE" ./cmd/node)

cleanup() {
	if [ "$KEEP" != 1 ]; then
		rm -rf "$WORK/rmat" "$WORK/parts"
	fi
}
trap cleanup EXIT

if ! "$NODE" gen --help >/dev/null 2>&1; then
	echo "run.sh: 'node gen' is not available in this build" >&2
	exit 1
fi
[ -x /usr/bin/time ] || { echo "run.sh: /usr/bin/time (GNU time) is needed for peak RSS" >&2; exit 1; }
echo "work dir $WORK; free space:"
df -h "$WORK" | tail -1

if [ ! -d "$WORK/rmat/raw" ]; then
	echo "== node gen rmat --nodes $NODES --edges $EDGES --feat-dim $FEAT_DIM --classes $CLASSES"
	"$NODE" gen rmat --nodes "$NODES" --edges "$EDGES" --feat-dim "$FEAT_DIM" --classes "$CLASSES" -o "$WORK/rmat"
fi
echo "input: $(du -sh "$WORK/rmat" | cut -f1)"

rm -rf "$WORK/parts"
echo "== node partition --format ogb --parts $PARTS --method $METHOD"
/usr/bin/time -v -o "$WORK/time.txt" \
	"$NODE" partition --input "$WORK/rmat" --format ogb --parts "$PARTS" --method "$METHOD" -o "$WORK/parts"

wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$WORK/time.txt")
rss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$WORK/time.txt")
cpu_pct=$(sed -n 's/.*Percent of CPU this job got: //p' "$WORK/time.txt")
bytes=$(du -sb "$WORK/parts" | cut -f1)
awk -v wall="$wall" -v rss="$rss_kb" -v bytes="$bytes" -v cpu="$cpu_pct" 'BEGIN {
	printf "wall time        %s (CPU %s)\n", wall, cpu
	printf "peak RSS         %.2f GiB\n", rss * 1024 / 2^30
	printf "bytes written    %.2f GiB\n", bytes / 2^30
	printf "peak RSS / bytes %.2f (target < 3)\n", rss * 1024 / bytes
}'
"$NODE" inspect "$WORK/parts" | sed -n '1,12p'
