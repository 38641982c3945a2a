#!/usr/bin/env bash
# ensure-docker.sh - make a Docker engine answer `docker info`, and make sure
# the local test image taospec-test/busybox:1 exists on it.
#
# What it does, in order:
#   1. If `docker info` already works, it leaves the daemon alone.
#   2. Else, if not root, it prints why on stderr and exits 3 (callers report
#      the engine tests as skipped with that reason).
#   3. Else it installs Debian's docker.io when dockerd/docker is missing,
#      reuses a dockerd that is already running (our own pid file, a
#      hand-started one with /var/run/docker.pid, or any other live dockerd
#      still starting up: it never starts a second one), or starts a new one in
#      its own session (pid file $STATE/dockerd.pid, log $STATE/dockerd.log),
#      and waits up to ${TAOSPEC_DOCKER_WAIT:-60} s for `docker info`.
#   4. It builds taospec-test/busybox:1 from the static busybox binary with
#      `docker import` when the image is missing (no registry is reachable,
#      so nothing is ever pulled), then runs one throwaway container as a
#      smoke test.
#
# What it leaves running: the dockerd it started (if it had to start one),
# plus the containerd that dockerd spawns. Stop them with
# scripts/stop-test-services.sh, which never touches a dockerd it did not
# start.
#
# Environment:
#   TAOSPEC_TEST_STATE    state dir (default /tmp/taospec-test-state)
#   TAOSPEC_DOCKER_WAIT   seconds to wait for the engine (default 60)
#   TAOSPEC_DOCKERD_ARGS  extra dockerd arguments, split on whitespace
#                         (e.g. "--iptables=false" where netfilter is missing)
#
# Output: progress lines on stderr only; nothing on stdout.
# Exit codes: 0 engine answers and image present; 3 no engine and not root
# (cannot start one); 1 anything else failed (details and log tail on stderr).
set -euo pipefail

readonly IMAGE="taospec-test/busybox:1"
readonly SYSTEM_PIDFILE="/var/run/docker.pid"
readonly CONTAINERD_PIDFILE="/var/run/docker/containerd/containerd.pid"
SCRIPT_NAME=ensure-docker
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"
WAIT_SECS="${TAOSPEC_DOCKER_WAIT:-60}"
PIDFILE="$STATE/dockerd.pid"
LOGFILE="$STATE/dockerd.log"

docker_answers() {
  command -v docker >/dev/null 2>&1 && timeout 20 docker info >/dev/null 2>&1
}

# Pids of all running dockerd processes (read-only scan, used only to refuse
# starting a second daemon next to one we know nothing about).
all_dockerd_pids() {
  local d
  for d in /proc/[0-9]*; do
    if [[ "$(cat "$d/comm" 2>/dev/null || true)" == dockerd ]] && alive "${d#/proc/}"; then
      printf '%s\n' "${d#/proc/}"
    fi
  done
  return 0
}

# Waits until `docker info` answers. $1: pid to watch (empty = none); the wait
# stops early when that process dies.
wait_for_engine() {
  local pid="$1" deadline=$((SECONDS + WAIT_SECS))
  while ((SECONDS < deadline)); do
    if docker_answers; then return 0; fi
    if [[ -n "$pid" ]] && ! alive "$pid"; then
      log "dockerd (pid $pid) exited before answering"
      return 1
    fi
    sleep 1
  done
  log "no answer from docker info after ${WAIT_SECS}s"
  return 1
}

start_engine() {
  if [[ "$(id -u)" -ne 0 ]]; then
    log "docker info does not answer and this is not root (uid $(id -u)): cannot install or start dockerd"
    exit 3
  fi
  if [[ -n "${DOCKER_HOST:-}${DOCKER_CONTEXT:-}" ]]; then
    log "DOCKER_HOST/DOCKER_CONTEXT (${DOCKER_HOST:-}${DOCKER_CONTEXT:+ context $DOCKER_CONTEXT}) does not answer; managing the local engine on the default socket instead (unset them to use it)"
    unset DOCKER_HOST DOCKER_CONTEXT
    if docker_answers; then
      log "local engine already answers"
      return 0
    fi
  fi

  if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
    apt_install docker.io
  fi
  command -v dockerd >/dev/null 2>&1 || die "dockerd still missing after installing docker.io"

  local pid
  pid="$(live_pid "$PIDFILE" dockerd)"
  if [[ -n "$pid" ]]; then
    log "dockerd we started earlier is running (pid $pid); waiting for it"
    wait_for_engine "$pid" || { log_tail "$LOGFILE"; die "dockerd pid $pid does not answer"; }
    return 0
  fi
  pid="$(live_pid "$SYSTEM_PIDFILE" dockerd)"
  if [[ -n "$pid" ]]; then
    log "reusing the dockerd already running with $SYSTEM_PIDFILE (pid $pid); waiting for it"
    wait_for_engine "$pid" || die "the existing dockerd (pid $pid, $SYSTEM_PIDFILE) does not answer; not starting a second one"
    return 0
  fi
  # Any other dockerd (e.g. one started by hand a moment ago that has not
  # written its pid file yet): wait for it rather than start a second one.
  pid="$(all_dockerd_pids)"
  pid="${pid%%$'\n'*}"
  if [[ -n "$pid" ]]; then
    log "a dockerd is already running (pid $pid); waiting for it"
    wait_for_engine "$pid" || die "the running dockerd (pid $pid) does not answer; not starting a second one"
    return 0
  fi

  rm -f "$PIDFILE"
  # A dockerd that was KILLed leaves containerd's pid file behind; when that
  # pid is gone or a zombie, a new dockerd would wait for it forever ("failed
  # to start containerd: timeout waiting for containerd to start").
  local cpid
  cpid="$(tr -dc '0-9' 2>/dev/null <"$CONTAINERD_PIDFILE" || true)"
  if [[ -n "$cpid" ]] && ! alive "$cpid"; then
    log "removing stale $CONTAINERD_PIDFILE (pid $cpid is gone)"
    rm -f "$CONTAINERD_PIDFILE"
  fi
  local extra=()
  if [[ -n "${TAOSPEC_DOCKERD_ARGS:-}" ]]; then
    read -r -a extra <<<"$TAOSPEC_DOCKERD_ARGS"
  fi
  log "starting dockerd (pid file $PIDFILE, log $LOGFILE)"
  printf '\n=== %s ensure-docker.sh starting dockerd\n' "$(date -u +%FT%TZ)" >>"$LOGFILE"
  # setsid: own session, so the daemon outlives this script and its caller's
  # process group. 9>&-: do not hand it our lock.
  setsid dockerd --pidfile "$PIDFILE" "${extra[@]}" \
    >>"$LOGFILE" 2>&1 </dev/null 9>&- &
  pid=$!
  disown "$pid" 2>/dev/null || true
  if ! wait_for_engine "$pid"; then
    log_tail "$LOGFILE"
    die "dockerd did not come up (log: $LOGFILE)"
  fi
  log "dockerd up (pid $(cat "$PIDFILE" 2>/dev/null || echo "$pid"))"
}

# Prints the path of a statically linked busybox binary, installing or
# unpacking Debian's busybox-static when needed. $1: scratch dir.
static_busybox() {
  local scratch="$1"
  if [[ ! -x /bin/busybox ]]; then
    apt_install busybox-static
  fi
  [[ -x /bin/busybox ]] || die "/bin/busybox missing after installing busybox-static"
  local ldd_out
  ldd_out="$(LC_ALL=C ldd /bin/busybox 2>&1 || true)"
  if [[ "$ldd_out" == *"not a dynamic executable"* || "$ldd_out" == *"statically linked"* ]]; then
    printf '%s\n' /bin/busybox
    return 0
  fi
  # /bin/busybox comes from the dynamically linked `busybox` package; leave it
  # installed and unpack busybox-static's binary into the scratch dir instead.
  log "/bin/busybox is dynamically linked; unpacking busybox-static without installing it"
  if [[ "$APT_UPDATED" -eq 0 ]]; then
    apt-get update -qq >&2 || die "apt-get update failed"
    APT_UPDATED=1
  fi
  (cd "$scratch" && apt-get download -qq -o APT::Sandbox::User=root busybox-static >&2) || die "apt-get download busybox-static failed"
  dpkg-deb -x "$scratch"/busybox-static_*.deb "$scratch/pkg" || die "cannot unpack busybox-static"
  [[ -x "$scratch/pkg/bin/busybox" ]] || die "busybox-static has no bin/busybox"
  printf '%s\n' "$scratch/pkg/bin/busybox"
}

build_image() {
  local scratch rootfs bb applet
  scratch="$(mktemp -d "${TMPDIR:-/tmp}/taospec-busybox.XXXXXX")"
  # shellcheck disable=SC2064  # expand now: $scratch is local
  trap "rm -rf '$scratch'" EXIT
  bb="$(static_busybox "$scratch")"
  rootfs="$scratch/rootfs"
  mkdir -p "$rootfs"/{bin,etc,root,tmp,results,data}
  chmod 0755 "$rootfs" "$rootfs"/{bin,etc,results,data}
  chmod 0700 "$rootfs/root"
  chmod 1777 "$rootfs/tmp"
  install -m 0755 "$bb" "$rootfs/bin/busybox"
  for applet in sh echo cat sleep ls id env true false printf mkdir touch test '[' \
    wc head tail date kill rm cp mv ln chmod grep sed tr cut sort uniq seq \
    basename dirname pwd uname hostname stat xargs ps; do
    ln -s busybox "$rootfs/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\n' >"$rootfs/etc/group"
  chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"
  log "importing $IMAGE"
  tar --numeric-owner --owner=0 --group=0 -C "$rootfs" -c . \
    | docker import --change 'ENV PATH=/bin' --change 'CMD ["sh"]' - "$IMAGE" >/dev/null \
    || die "docker import of $IMAGE failed"
  rm -rf "$scratch"
  trap - EXIT
}

main() {
  mkdir -p "$STATE"
  # One run at a time per state dir: concurrent callers wait for each other.
  exec 9>>"$STATE/ensure-docker.lock"
  if ! flock -w 300 9; then die "timed out waiting for $STATE/ensure-docker.lock"; fi

  if docker_answers; then
    log "docker info answers; leaving the daemon alone"
  else
    start_engine
  fi

  if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    log "image $IMAGE present"
  else
    if [[ "$(id -u)" -ne 0 && ! -x /bin/busybox ]]; then
      log "image $IMAGE missing and busybox is not installed; not root, cannot install busybox-static"
      exit 3
    fi
    build_image
  fi

  local out
  if ! out="$(timeout 120 docker run --rm "$IMAGE" sh -c 'echo ok' 2>&1)" || [[ "$out" != ok ]]; then
    log "smoke test output: $out"
    die "the engine answers but cannot run a container from $IMAGE"
  fi
  log "ready: engine answers and runs $IMAGE"
}

main "$@"
