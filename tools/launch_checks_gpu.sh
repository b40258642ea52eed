#!/usr/bin/env bash
# The launch checks of docs/distributed_launch.md on a GPU machine, from the GPU bundle
# (tools/gpu_bundle.sh); needs torchrun, and CuPy for the interop lines.
#
#   gpu_bundle/launch_checks_gpu.sh RESULTS_DIR [STRESS_SECONDS]
#
# Streams of consecutive launches run in the background (tools/launch_stress.py, each for
# STRESS_SECONDS, 180 by default, at most 100 launches), while the fault, bad-input and
# CuPy checks run in the foreground with short timeouts; then two "hosts" (NCCL_HOSTID
# apart) run every operation and an all_reduce busbw table beside torch.distributed's.
# Every line goes to RESULTS_DIR/summary.txt as soon as it is known (so a run cut short
# keeps what it had), the logs to RESULTS_DIR/logs/. Uses every visible GPU (2 or more).
set -u
out=${1:?usage: launch_checks_gpu.sh RESULTS_DIR [STRESS_SECONDS]}
stress_seconds=${2:-180}
B=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} NCCL_NVLS_ENABLE=0
W=$out/logs
mkdir -p "$W"
S=$out/summary.txt
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*" >> "$S"; }
G=$(nvidia-smi -L | wc -l)
nvidia-smi -L >> "$S"
if ((G < 2)); then log "needs 2 GPUs or more, $G visible"; exit 1; fi
WHEEL=$(python3 "$B/nccl_interop_peer.py" --print_nccl_lib 2>/dev/null || true)

stream() {  # stream NAME GPUS ARGS...: launch_stress.py in the background
  local name=$1 gpus=$2
  shift 2
  ( CUDA_VISIBLE_DEVICES=$gpus python3 "$B/launch_stress.py" --binary="$B/data_parallel_step" \
      --timeout_s=90 --max_seconds="$stress_seconds" --show=2 "$@" > "$W/$name.out" 2> "$W/$name.err"
    log "stress: $(cat "$W/$name.out")" ) &
}
stream nccl2 0,1 --launcher=torchrun --backend=nccl --nproc=2 --runs=100
if ((G >= 4)); then
  stream nccl4 0,1,2,3 --launcher=torchrun --backend=nccl --nproc=4 --runs=100 --port=29600
fi
stream nccl2x2 $((G - 2)),$((G - 1)) --launcher=torchrun --backend=nccl --nproc=2 --runs=100 \
  --concurrent=2 --port=29900
stream gloo2 "" --launcher=torchrun --backend=gloo --nproc=2 --runs=100 --port=29700
stream gloo4 "" --launcher=torchrun --backend=gloo --nproc=4 --runs=100 --port=29800
stream c10d "" --launcher=torchrun-c10d --agents=2 --backend=gloo --nproc=4 --runs=100 --port=30500
stream standalone "" --launcher=torchrun-standalone --backend=gloo --nproc=4 --runs=100

# Another NCCL client: CuPy ranks 0..NC-1, genesis ranks NC..N-1.
interop() {  # interop TAG NCUPY NGENESIS LIBRARY_PATH SECONDS
  local tag=$1 nc=$2 n=$(($2 + $3)) lib=$4 limit=$5 id=$W/id_$1 pids=() rcs="" r s
  rm -f "$id"
  for r in $(seq 0 $((nc - 1))); do
    timeout "$limit" python3 "$B/nccl_interop_peer.py" --rank="$r" --size="$n" --device="$r" \
      --id_file="$id" --timeout_s="$limit" > "$W/cupy_${tag}_$r.log" 2>&1 &
    pids+=($!)
  done
  for r in $(seq "$nc" $((n - 1))); do
    LD_LIBRARY_PATH=$lib timeout "$limit" "$B/join_nccl_id" --rank="$r" --size="$n" --device="$r" \
      --id_file="$id" --timeout_s="$limit" > "$W/genesis_${tag}_$r.log" 2>&1 &
    pids+=($!)
  done
  s=$(date +%s)
  for p in "${pids[@]}"; do wait "$p"; rcs="$rcs $?"; done
  log "interop $tag ($nc cupy + $3 genesis): rc$rcs in $(($(date +%s) - s)) s: $(cat "$W"/cupy_"${tag}"_*.log "$W"/genesis_"${tag}"_*.log | grep -E 'rank|rror' | cut -c1-240 | tr '\n' '|')"
}
if [[ -n "$WHEEL" ]]; then
  interop same-nccl 1 1 "$WHEEL:$B" 40
  if ((G >= 4)); then interop same-nccl-4 2 2 "$WHEEL:$B" 40; fi
  interop system-nccl 1 1 "$B" 20
else
  log "interop: skipped (no CuPy / nvidia.nccl wheel)"
fi

# Faults.
s=$(date +%s)
GENESIS_DISTRIBUTED_TIMEOUT=20 timeout 60 torchrun --master-port=31000 --max-restarts=1 \
  --nproc_per_node="$G" --no-python "$B/data_parallel_step" --backend=nccl --kill_rank=1 > "$W/restart.log" 2>&1
log "rank 1 of $G killed (nccl), torchrun --max-restarts=1: rc=$? after $(($(date +%s) - s)) s, $(grep -c 'step ok' "$W/restart.log") step-ok lines"
s=$(date +%s)
GENESIS_DISTRIBUTED_TIMEOUT=20 timeout 60 torchrun --master-port=31100 --nproc_per_node=4 \
  --no-python "$B/data_parallel_step" --backend=gloo --kill_rank=2 > "$W/kill_gloo.log" 2>&1
log "rank 2 of 4 killed (gloo), torchrun: rc=$? after $(($(date +%s) - s)) s"
GENESIS_DISTRIBUTED_TIMEOUT=15 timeout 50 python3 "$B/launch_stress.py" --launcher=env --backend=nccl \
  --binary="$B/data_parallel_step" --nproc="$G" --runs=1 --port=31200 --args=--kill_rank=1 \
  --expect=fail --fail_text="did not finish within" --timeout_s=45 --show=1 > "$W/kill_env.log" 2>&1
log "rank 1 of $G killed (nccl), no launcher: $(grep -E 'launches' "$W/kill_env.log")"

# Bad input.
python3 -c "import socket,time; s=socket.socket(); s.bind(('127.0.0.1',31301)); s.listen(); time.sleep(25)" &
holder=$!
sleep 1
GENESIS_DISTRIBUTED_TIMEOUT=15 timeout 40 torchrun --master-port=31300 --nproc_per_node=2 --no-python \
  "$B/data_parallel_step" --backend=nccl > "$W/bad_port.log" 2>&1
log "NCCL root port in use: rc=$? $(grep 'cannot join' "$W/bad_port.log" | head -1 | cut -c1-250)"
kill "$holder" 2>/dev/null
CUDA_VISIBLE_DEVICES=0 GENESIS_DISTRIBUTED_TIMEOUT=15 timeout 40 torchrun --master-port=31400 \
  --nproc_per_node=2 --no-python "$B/data_parallel_step" --backend=nccl > "$W/bad_local.log" 2>&1
log "LOCAL_RANK beyond the GPUs: rc=$? $(grep 'cannot join' "$W/bad_local.log" | head -1 | cut -c1-250)"
if [[ -n "$WHEEL" ]]; then
  printf '%0256d\n' 0 > "$W/zero_id"
  GENESIS_NCCL_LIBRARY=$WHEEL/libnccl.so.2 timeout 20 "$B/join_nccl_id" --rank=0 --size=1 --device=0 \
    --id_file="$W/zero_id" --timeout_s=5 > "$W/library.log" 2>&1
  log "GENESIS_NCCL_LIBRARY other than the loaded NCCL: rc=$? $(cut -c1-250 "$W/library.log")"
fi
wait  # The stress streams.
log "stress streams done"

# Two "hosts" of G/2 GPUs each. Both engines' NCCL use the loopback interface
# (NCCL_SOCKET_IFNAME=lo), so the busbw rows compare the same path.
h=$((G / 2))
CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((G - 1))) timeout 100 python3 "$B/launch_stress.py" \
  --launcher=torchrun-c10d --agents=2 --gpus_per_agent="$h" --fake_hosts --backend=nccl \
  --binary="$B/data_parallel_step" --args=--every_op --nproc="$G" --runs=2 --port=32000 --timeout_s=45 \
  --ok_text="every operation" --show=1 > "$W/two_hosts.out" 2>&1
log "two hosts, every operation: $(grep launches "$W/two_hosts.out")"
two_hosts() {  # two_hosts TAG COMMAND...: one torchrun agent per "host"
  local tag=$1 id=$1-$$ a
  shift
  for a in 0 1; do
    CUDA_VISIBLE_DEVICES=$(seq -s, $((a * h)) $((a * h + h - 1))) NCCL_HOSTID=genesis-node-$a \
      NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET timeout 80 torchrun --nnodes=2 --nproc_per_node="$h" \
      --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:32400 --rdzv-id="$id" "$@" > "$W/${tag}_host$a.log" 2>&1 &
  done
  wait
}
sizes=(--ops=all_reduce --min_bytes=1MiB --max_bytes=1GiB --step_factor=4 --iters=5 --warmup=2)
LD_LIBRARY_PATH=${WHEEL:+$WHEEL:}$B two_hosts genesis --no-python \
  "$B/benchmarks/benchmarks_distributed_collectives_benchmark" --backend=nccl --baseline=false \
  --bucketed=false "${sizes[@]}"
two_hosts torch "$B/torch_collectives.py" --backend=nccl "${sizes[@]}"
for tag in genesis torch; do
  grep -hE "^(all_reduce|#)" "$W/${tag}_host0.log" >> "$S"
  grep -hE "NET/Socket : Using" "$W/${tag}_host0.log" | head -1 >> "$S"
done
log "done"
