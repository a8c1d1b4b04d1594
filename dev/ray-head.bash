# Start and stop a single-node Ray head for the smoke run and the launcher tests.
# Source it; it defines start_ray_head LOG [ray start args...] and stop_ray_head.
# The head runs as its own process group (setsid + --block), so stopping it is one kill.

RAY_HEAD_PGID=${RAY_HEAD_PGID:-}  # kept when a caller (bats setup_file) exported it
RAY_HEAD_TEMP=${RAY_HEAD_TEMP:-}  # the head's temp dir, removed once the head is gone

start_ray_head() {  # start_ray_head LOG [extra `ray start` arguments]
  local log=$1 port temp tries
  shift
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  temp=$(mktemp -d /tmp/twgrpo-ray.XXXXXX)  # short: Ray's socket paths must fit 107 bytes
  export RAY_HEAD_TEMP=$temp  # exported: a bats teardown_file must find it to remove it
  setsid ray start --head --block --node-ip-address=127.0.0.1 --port="$port" \
    --include-dashboard=false --disable-usage-stats --temp-dir="$temp" "$@" >"$log" 2>&1 &
  RAY_HEAD_PGID=$!
  export RAY_ADDRESS=127.0.0.1:$port  # what a managed platform gives its Driver
  for tries in $(seq 90); do
    if python3 -c 'import ray, sys; ray.init(address=sys.argv[1], log_to_driver=False); ray.shutdown()' "$RAY_ADDRESS" >/dev/null 2>&1; then
      return 0
    fi
    kill -0 "$RAY_HEAD_PGID" 2>/dev/null || { echo "ray start exited — see $log" >&2; return 1; }
    sleep 1
  done
  echo "the Ray head did not come up in $tries s — see $log" >&2
  return 1
}

stop_ray_head() {  # TERM the head's process group, KILL it after 10 s (the head may ignore TERM)
  [[ -n "$RAY_HEAD_PGID" ]] || return 0
  kill -TERM -- "-$RAY_HEAD_PGID" 2>/dev/null || true
  for _ in $(seq 20); do
    kill -0 -- "-$RAY_HEAD_PGID" 2>/dev/null || break
    sleep 0.5
  done
  kill -KILL -- "-$RAY_HEAD_PGID" 2>/dev/null || true
  RAY_HEAD_PGID=""
  if [[ "$RAY_HEAD_TEMP" == /tmp/twgrpo-ray.* ]]; then
    rm -rf -- "$RAY_HEAD_TEMP"
  fi
  RAY_HEAD_TEMP=""
}
