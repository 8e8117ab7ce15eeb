#!/usr/bin/env bash
# Epoch time of the PyTorch example (python/examples/train_sage.py, DDP over
# gloo) on a two-node cluster on loopback, and the share of the epoch it
# waits on graphnode.Loader — the PyTorch twin of run.sh.
#
#   PARTS_DIR=/path/to/parts perf/train/pytorch.sh   # a 2-part directory from node partition
#
# Fanouts 15,10,5 (3 SAGE layers), batch 1024, hidden 128, one trainer per
# node, 1 epoch, no evaluation. Environment: PARTS_DIR (required: 2 parts
# with features, labels and a train split), WORK (scratch), EPOCHS,
# WORKERS (sampler processes per loader), PYTHON (default /usr/bin/python3).
set -euo pipefail

: "${PARTS_DIR:?PARTS_DIR must name a 2-part directory written by node partition}"
EPOCHS=${EPOCHS:-1}
WORKERS=${WORKERS:-2}
PYTHON=${PYTHON:-/usr/bin/python3}
WORK=${WORK:-$(mktemp -d /tmp/graphnode-perf-pytorch.XXXXXX)}

root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$WORK/bin"
NODE="$WORK/bin/node"
(cd "$root" && CGO_ENABLED=0 go build -o "$NODE" ./cmd/node)
rings=$(mktemp -d /dev/shm/graphnode-perf-pytorch.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rmdir "$rings" 2>/dev/null || echo "pytorch.sh: ring files left in $rings" >&2
}
trap cleanup EXIT

free_port() { "$PYTHON" -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
"$NODE" cert init --cluster perf --nodes host0,host1 -o "$WORK/certs" --force >/dev/null
p0=$(free_port); p1=$(free_port)
for r in 0 1; do
	cat >"$WORK/node$r.toml" <<TOML
version = 1
[node]
parts = "$PARTS_DIR"
part = $r
name = "host$r"
[control]
socket = "$WORK/node$r.sock"
[rings]
dir = "$rings"
size = "2GB"
[log]
level = "warn"
format = "text"
[mesh]
certs = "$WORK/certs"
cluster = "perf"
timeout = "60s"
[[mesh.peers]]
part = 0
name = "host0"
addr = "127.0.0.1:$p0"
[[mesh.peers]]
part = 1
name = "host1"
addr = "127.0.0.1:$p1"
TOML
	"$NODE" run -c "$WORK/node$r.toml" 2>"$WORK/node$r.log" &
	pids+=($!)
done
for r in 0 1; do
	for _ in $(seq 100); do [ -S "$WORK/node$r.sock" ] && break; sleep 0.1; done
done
echo "machine: $(nproc) CPUs; $(uptime | sed 's/.*load average/load average/')"
port=$(free_port)
for r in 1 0; do
	PYTHONPATH="$root/python" /usr/bin/time -f "rank $r: %e s wall, %M KB peak RSS" \
		"$PYTHON" "$root/python/examples/train_sage.py" --socket "$WORK/node$r.sock" \
		--rank "$r" --world-size 2 --master-addr 127.0.0.1 --master-port "$port" \
		--fanouts 15,10,5 --batch-size 1024 --hidden 128 --layers 3 --dropout 0.5 --input-dropout 0 \
		--epochs "$EPOCHS" --eval-every 1000000 --workers "$WORKERS" --ring-size 2GB --sparse-x off \
		>"$WORK/rank$r.log" 2>&1 &
	tp[$r]=$!
done
wait "${tp[0]}" "${tp[1]}"
cat "$WORK/rank0.log"
tail -1 "$WORK/rank1.log"
