# The body of every batch script `make sbatch` prints (prep/sbatch.py writes the settings above
# it): a Ray cluster on the allocation, the Driver command on it, Ray stopped, the run's verdict.
# The settings it reads: RUN_ID NODES GPUS_PER_NODE JOIN_TIMEOUT RAY_PORT DRIVER_COMMAND
# CONTAINER_SRUN (srun options: pyxis) CONTAINER_EXEC (a command prefix: Apptainer), and the
# RuntimeEnv's variables, exported, so every srun step and every Ray worker has them.
# Exit status: the launcher's (0: SUCCESS), 2 when Ray could not be brought up on every node.
set -euo pipefail

PROG=twgrpo-slurm
say() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {  # die CODE "(ID) what went wrong — what to do"
  local code=$1
  shift
  say "$*"
  exit "$code"
}

on() {  # on NODE COMMAND...: one task on NODE, beside the other steps, in the container if any
  local node=$1
  shift
  srun --overlap --nodes=1 --ntasks=1 --nodelist="$node" "${CONTAINER_SRUN[@]}" \
    "${CONTAINER_EXEC[@]}" "$@"
}

# A node's address, as verl's Slurm example finds it (hostname --ip-address), or its first
# non-loopback one where the host's name resolves to 127.x (Debian's /etc/hosts default).
# shellcheck disable=SC2016  # expanded on the node, not here
NODE_IP='ip=$(hostname --ip-address | cut -d" " -f1)
case $ip in 127.* | "") ip=$(hostname -I | cut -d" " -f1) ;; esac
echo "$ip"'
# One Ray node per Slurm node: its address, the GPUs Slurm gave this step (else the profile's
# count), the CPUs of the allocation; --block keeps it in the step until the step is ended.
# shellcheck disable=SC2016  # expanded on the node, not here
START_NODE="$NODE_IP"' >/dev/null
exec ray start --block --disable-usage-stats --node-ip-address="$ip" \
  --num-gpus="${SLURM_GPUS_ON_NODE:-$1}" ${SLURM_CPUS_ON_NODE:+--num-cpus="$SLURM_CPUS_ON_NODE"} "${@:2}"'

# Waits until every node of the allocation is a live Ray node; prints those that are not.
WAIT_NODES='import socket, sys, time
address, deadline, wanted = sys.argv[1], time.monotonic() + float(sys.argv[2]), sys.argv[3:]
host, port = address.rsplit(":", 1)
missing = list(wanted)
while time.monotonic() < deadline:
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        break
    except OSError:
        time.sleep(1)
else:
    print(" ".join(missing)); sys.exit(1)
import ray
ray.init(address=address, logging_level="ERROR", log_to_driver=False)
while True:
    alive = {n.get("NodeManagerHostname", "").split(".")[0] for n in ray.nodes() if n.get("Alive")}
    missing = [w for w in wanted if w.split(".")[0] not in alive]
    if not missing or time.monotonic() > deadline:
        break
    time.sleep(1)
print(" ".join(missing)); sys.exit(1 if missing else 0)'

STEPS=()
stop_ray() {  # end every node's `ray start --block` step (srun passes TERM on), then wait
  ((${#STEPS[@]})) || return 0
  say "stopping Ray on ${#NODE_LIST[@]} node(s)"
  kill -TERM "${STEPS[@]}" 2>/dev/null || true
  local _
  for _ in $(seq 30); do
    kill -0 "${STEPS[@]}" 2>/dev/null || break
    sleep 1
  done
  kill -KILL "${STEPS[@]}" 2>/dev/null || true
  wait "${STEPS[@]}" 2>/dev/null || true
  STEPS=()
}

main() {
  [[ -n "${SLURM_JOB_ID:-}" ]] || die 2 "(SLURM-E003) not inside a Slurm job — Submit it with sbatch <file>; it needs the allocation's SLURM_JOB_ID and node list."
  mapfile -t NODE_LIST < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
  ((${#NODE_LIST[@]} == NODES)) ||
    die 2 "(SLURM-E002) the allocation has ${#NODE_LIST[@]} node(s), the profile needs $NODES (sbatch --nodes=$NODES) — Submit the script as make sbatch printed it (its #SBATCH --nodes line is the profile's NODES), or print it again for this profile."
  local head=${NODE_LIST[0]} logs=$PWD/twgrpo-$SLURM_JOB_ID head_ip  # beside the job's output
  mkdir -p "$logs"
  trap stop_ray EXIT
  head_ip=$(on "$head" bash -c "$NODE_IP")
  [[ -n "$head_ip" ]] || die 2 "(SLURM-E001) node(s) $head did not join the Ray cluster: it has no address (hostname --ip-address and hostname -I give none: give the node a resolvable name) — The message names the nodes: read their Ray log (twgrpo-<job id>/ray-<node>.log beside the job's output); check that they reach the head's address and port, have ray in the image, and raise SLURM_JOIN_TIMEOUT for slow image pulls."
  say "run $RUN_ID: Ray head on $head ($head_ip:$RAY_PORT), ${#NODE_LIST[@]} node(s); Ray logs in $logs"
  on "$head" bash -c "$START_NODE" ray-node "$GPUS_PER_NODE" --head --port="$RAY_PORT" \
    --include-dashboard=false ${RAY_TEMP_DIR:+--temp-dir="$RAY_TEMP_DIR"} >"$logs/ray-$head.log" 2>&1 &
  STEPS+=($!)
  local node missing
  for node in "${NODE_LIST[@]:1}"; do
    on "$node" bash -c "$START_NODE" ray-node "$GPUS_PER_NODE" --address="$head_ip:$RAY_PORT" \
      >"$logs/ray-$node.log" 2>&1 &
    STEPS+=($!)
  done
  if ! missing=$(on "$head" python3 -c "$WAIT_NODES" "$head_ip:$RAY_PORT" "$JOIN_TIMEOUT" "${NODE_LIST[@]}"); then
    die 2 "(SLURM-E001) node(s) ${missing:-?} did not join the Ray cluster within $JOIN_TIMEOUT s (their logs: $logs/ray-<node>.log; the head: $head_ip:$RAY_PORT) — The message names the nodes: read their Ray log (twgrpo-<job id>/ray-<node>.log beside the job's output); check that they reach the head's address and port, have ray in the image, and raise SLURM_JOIN_TIMEOUT for slow image pulls."
  fi
  say "all ${#NODE_LIST[@]} node(s) joined; running the Driver command"
  local status=0
  on "$head" env RAY_ADDRESS="$head_ip:$RAY_PORT" bash -c "$DRIVER_COMMAND" || status=$?
  stop_ray
  say "run $RUN_ID ended with exit status $status ($( ((status == 0)) && echo SUCCESS || echo FAILED)); make report RUN_ID=$RUN_ID"
  exit "$status"
}

main "$@"
