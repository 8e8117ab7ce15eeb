#!/usr/bin/env bash
# Knowledge-graph embeddings (`node kge`) on a two-node cluster on
# loopback: FB15k-237 partitioned into 2 (metis, entities and triples
# balanced), one `node run` and one trainer per part, entity and relation
# tables in the nodes' kv shards (Adagrad), then filtered link prediction
# on the test triples against every entity.
#
#   perf/kge/run.sh                                   # DistMult, hidden 400, 10 epochs, every test triple
#   MODEL=transe_l2 EPOCHS=3 SAMPLE=2000 perf/kge/run.sh
#
# Environment: DATA (the dataset directory, default ../shared/data/fb15k-237
# beside the repository), MODEL, HIDDEN, GAMMA, LR, BATCH, NEG, EPOCHS,
# EVAL_EVERY, SAMPLE (test triples ranked; 0 = all), EXTRA (more `node kge`
# flags), WORK (scratch dir, default a fresh one under /tmp), KEEP=1.
# Each trainer prints one line per epoch: the mean loss over both
# trainers, positives trained per second (both), the share of the epoch
# this trainer spent in pulls and pushes, and the metrics when it ranked.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
DATA=${DATA:-$root/../shared/data/fb15k-237}
MODEL=${MODEL:-distmult}
HIDDEN=${HIDDEN:-400}
GAMMA=${GAMMA:-12}
LR=${LR:-0.1}
BATCH=${BATCH:-1024}
NEG=${NEG:-256}
EPOCHS=${EPOCHS:-10}
EVAL_EVERY=${EVAL_EVERY:-0}
SAMPLE=${SAMPLE:-0}
EXTRA=${EXTRA:-}
WORK=${WORK:-$(mktemp -d /tmp/graphnode-perf-kge.XXXXXX)}
KEEP=${KEEP:-0}

mkdir -p "$WORK/bin"
NODE="$WORK/bin/node"
(cd "$root" && CGO_ENABLED=0 go build -o "$NODE" ./cmd/node)
rings=$(mktemp -d /dev/shm/graphnode-perf-kge.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$rings"
	if [ "$KEEP" != 1 ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT

echo "== partition $DATA into 2 parts"
"$NODE" partition --input "$DATA" --format kg --parts 2 --method metis --balance nodes,edges -o "$WORK/parts" --force | tail -3
"$NODE" cert init --cluster perf --nodes node0,node1 -o "$WORK/certs" --force >/dev/null
ports=()
for i in 0 1; do
	ports+=("$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')")
done
for i in 0 1; do
	cat >"$WORK/node$i.toml" <<TOML
version = 1
[node]
parts = "$WORK/parts"
part = $i
name = "node$i"
[control]
socket = "$WORK/node$i.sock"
[rings]
dir = "$rings"
[mesh]
certs = "$WORK/certs"
cluster = "perf"
listen = "127.0.0.1:${ports[$i]}"
[[mesh.peers]]
part = 0
name = "node0"
addr = "127.0.0.1:${ports[0]}"
[[mesh.peers]]
part = 1
name = "node1"
addr = "127.0.0.1:${ports[1]}"
[log]
level = "warn"
TOML
	"$NODE" run -c "$WORK/node$i.toml" 2>"$WORK/node$i.log" &
	pids+=($!)
done
for i in 0 1; do # node kge waits for its node to be ready; the socket must exist
	for _ in $(seq 300); do
		if [ -S "$WORK/node$i.sock" ]; then break; fi
		sleep 0.1
	done
done

echo "== node kge: $MODEL, hidden $HIDDEN, gamma $GAMMA, lr $LR, batch $BATCH, neg $NEG, $EPOCHS epochs"
kge=()
for i in 0 1; do
	# shellcheck disable=SC2086
	/usr/bin/time -f "rank $i: %e s wall, %M KB peak RSS" "$NODE" kge --socket "$WORK/node$i.sock" --parts "$WORK/parts" \
		--rank "$i" --world-size 2 --model "$MODEL" --hidden "$HIDDEN" --gamma "$GAMMA" --lr "$LR" \
		--batch-size "$BATCH" --neg-size "$NEG" --epochs "$EPOCHS" --eval-every "$EVAL_EVERY" --eval-sample "$SAMPLE" $EXTRA \
		>"$WORK/kge$i.out" 2>"$WORK/kge$i.err" &
	kge+=($!)
done
status=0
for p in "${kge[@]}"; do wait "$p" || status=1; done
cat "$WORK/kge0.out" "$WORK/kge0.err" "$WORK/kge1.err"
if [ $status != 0 ]; then
	cat "$WORK/kge1.out" "$WORK/node0.log" "$WORK/node1.log" >&2
	exit 1
fi
