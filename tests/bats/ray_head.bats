#!/usr/bin/env bats
# dev/ray-head.bash: stopping the head stops its whole process group and removes its temp dir.

load test_helper

setup() {
  sandbox
  # shellcheck source=dev/ray-head.bash
  source "$REPO/dev/ray-head.bash"
}

# A process group like the head's, whose leader has exited (init reaps what is left).
head_group() {
  setsid bash -c 'sleep 300 </dev/null >/dev/null 2>&1 & echo $$' 3>&-
}

@test "stop_ray_head ends the head's process group and removes its /tmp/twgrpo-ray.* folder" {
  RAY_HEAD_TEMP=$(mktemp -d /tmp/twgrpo-ray.XXXXXX)
  mkdir -p "$RAY_HEAD_TEMP/session_latest/sockets"
  RAY_HEAD_PGID=$(head_group)
  local group=$RAY_HEAD_PGID
  stop_ray_head
  run kill -0 -- "-$group"
  assert_failure
  assert_not_exist "$RAY_HEAD_TEMP"
  assert_equal "$RAY_HEAD_PGID$RAY_HEAD_TEMP" ""
}

@test "stop_ray_head removes no folder outside /tmp/twgrpo-ray.*" {
  local keep=$BATS_TEST_TMPDIR/not-ray
  mkdir -p "$keep"
  RAY_HEAD_TEMP=$keep
  RAY_HEAD_PGID=$(head_group)
  stop_ray_head
  assert_dir_exist "$keep"
  assert_equal "$RAY_HEAD_TEMP" ""
}
