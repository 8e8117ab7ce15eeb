#!/usr/bin/env bash
# random, metis and freq partitioning, each with and without a 20% cache,
# on an R-MAT graph: edge cut, expected feature-read shares (local /
# cached / remote, from the estimate of partition/freq.go), the heaviest
# part's stored edges over the mean, wall time and
# peak RSS of `node partition`.
#
#   perf/freq/run.sh                                  # 2.4 M nodes, 62 M edges, 100 features
#   NODES=200000 EDGES=4000000 perf/freq/run.sh       # a quick run
#
# Environment: WORK (scratch dir, default a fresh one under /tmp), NODES,
# EDGES, FEAT_DIM, CLASSES, PARTS, FANOUTS, BATCH, RATIO, KEEP=1 (keep the
# input and the parts in WORK), METHODS (default "random metis freq
# freq+edges"; METHOD+edges adds --balance nodes,edges). The graph is
# generated once per WORK.
set -euo pipefail

NODES=${NODES:-2400000}
EDGES=${EDGES:-62000000}
FEAT_DIM=${FEAT_DIM:-100}
CLASSES=${CLASSES:-47}
PARTS=${PARTS:-4}
FANOUTS=${FANOUTS:-15,10,5}
BATCH=${BATCH:-1024}
RATIO=${RATIO:-0.2}
WORK=${WORK:-$(mktemp -d /tmp/graphnode-perf-freq.XXXXXX)}
KEEP=${KEEP:-0}
METHODS=${METHODS:-random metis freq freq+edges}

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
[ -x /usr/bin/time ] || { echo "run.sh: /usr/bin/time (GNU time) is needed for peak RSS" >&2; exit 1; }

if [ ! -d "$WORK/rmat/raw" ]; then
	echo "== node gen rmat --nodes $NODES --edges $EDGES --feat-dim $FEAT_DIM --classes $CLASSES" >&2
	"$NODE" gen rmat --nodes "$NODES" --edges "$EDGES" --feat-dim "$FEAT_DIM" --classes "$CLASSES" -o "$WORK/rmat" >&2
fi

rows=()
for label in $METHODS; do
	method=${label%+edges}
	balance=nodes
	[ "$method" = "$label" ] || balance=nodes,edges
	for cache in 0 "$RATIO"; do
		rm -rf "$WORK/parts"
		echo "== node partition --method $method --balance $balance --cache-ratio $cache --parts $PARTS --fanouts $FANOUTS --batch-size $BATCH" >&2
		/usr/bin/time -v -o "$WORK/time.txt" \
			"$NODE" partition --input "$WORK/rmat" --format ogb --parts "$PARTS" --method "$method" --balance "$balance" \
			--fanouts "$FANOUTS" --batch-size "$BATCH" --cache-ratio "$cache" -o "$WORK/parts" >"$WORK/out.txt" 2>"$WORK/err.txt" ||
			{ cat "$WORK/out.txt" "$WORK/err.txt" >&2; exit 1; }
		cat "$WORK/out.txt" >&2
		cut=$(sed -n 's/.*edge cut \([0-9.]*\)%.*/\1/p' "$WORK/out.txt")
		edges=$(sed -n 's/^balance max\/mean.*, edges \([0-9.]*\),.*/\1/p' "$WORK/out.txt")
		reads=$(sed -n 's/.*: local \([0-9.]*\)%, cached \([0-9.]*\)%, remote \([0-9.]*\)%.*/\1 \2 \3/p' "$WORK/out.txt")
		wall=$(sed -n 's/.*Elapsed (wall clock) time.*: //p' "$WORK/time.txt")
		rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$WORK/time.txt")
		rows+=("$(printf '%-11s %6s %8s %7s %7s %7s %7s %9s %8.2f' "$label" "$cache" "$cut" "$edges" $reads "$wall" "$(echo "$rss / 1048576" | bc -l)")")
	done
done

echo
echo "R-MAT $NODES nodes, $EDGES edges, $FEAT_DIM features, $PARTS parts; fanouts $FANOUTS, batch $BATCH"
printf '%-11s %6s %8s %7s %7s %7s %7s %9s %8s\n' method cache "cut %" "edges×" "local%" "cached%" "remote%" wall "RSS GiB"
printf '%s\n' "${rows[@]}"
