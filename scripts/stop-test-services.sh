#!/usr/bin/env bash
# stop-test-services.sh - stop what scripts/ensure-sshd.sh,
# scripts/ensure-docker.sh and scripts/ensure-slurm.sh started, by their pid
# files only:
#   $STATE/ssh/sshd.pid              the test sshd
#   $STATE/dockerd.pid               a dockerd that ensure-docker.sh started
#   $STATE/slurm/slurmd.pid          the test cluster's slurmd
#   $STATE/slurm/slurmctld.pid       its slurmctld
#   $STATE/slurm/munge/munged.pid    the munged that ensure-slurm.sh started
# Before our slurmd stops, the jobs still queued or running on our cluster
# are cancelled (their steps would otherwise outlive the daemons).
# A pid is signalled only when it is alive, its command name matches and its
# command line names our pid file / sshd_config (so a recycled pid, or a
# dockerd started by hand or by an init script with /var/run/docker.pid, is
# never touched). Before our dockerd gets TERM, its running containers are
# killed (only when it is the process serving /var/run/docker.sock), since on
# TERM dockerd would give each one a 10 s stop timeout. Each process gets
# TERM, then KILL after ${TAOSPEC_STOP_GRACE:-10} s; when dockerd had to be
# KILLed, the children it left behind (its containerd) get the same
# treatment. Zombies count as gone. Stale pid files are
# removed. Keys, configs and logs under $STATE are kept, and so is the
# Include line in ~/.ssh/config (harmless while the sshd is down).
#
# Leaves nothing running. Progress on stderr, nothing on stdout.
# Exit codes: 0 nothing of ours is left running; 1 a process survived KILL.
set -euo pipefail

SCRIPT_NAME=stop-test-services
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"
GRACE="${TAOSPEC_STOP_GRACE:-10}"

# Start time of pid $1 (field 22 of /proc/PID/stat), empty when gone or a
# zombie (this machine's pid 1 reaps orphans only every second or so).
start_time() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
  stat="${stat##*) }" # drop "pid (comm) ", comm may hold spaces
  # shellcheck disable=SC2086  # split the remaining fields on purpose
  set -- $stat
  [[ "$1" == [ZX] ]] && return 0
  printf '%s\n' "${20}"
}

# Prints "pid:starttime" for each direct child of pid $1.
children_of() {
  local parent="$1" d stat rest
  for d in /proc/[0-9]*; do
    stat="$(cat "$d/stat" 2>/dev/null)" || continue
    rest="${stat##*) }"
    # shellcheck disable=SC2086
    set -- $rest
    if [[ "$2" == "$parent" ]]; then
      printf '%s:%s\n' "${d#/proc/}" "${20}"
    fi
  done
  return 0
}

# Alive and still the same process (same start time)?
same_alive() { [[ -n "$2" && "$(start_time "$1")" == "$2" ]]; }

# TERM, wait up to GRACE s, KILL, wait up to 5 s. $1 pid, $2 start time,
# $3 label. Returns 0 when it is gone, 2 when it needed KILL, 1 when it is
# still there.
terminate() {
  local pid="$1" st="$2" label="$3" deadline
  log "stopping $label (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + GRACE))
  while same_alive "$pid" "$st"; do
    if ((SECONDS >= deadline)); then
      log "$label (pid $pid) still running after ${GRACE}s; sending KILL"
      kill -KILL "$pid" 2>/dev/null || true
      deadline=$((SECONDS + 5))
      while same_alive "$pid" "$st"; do
        if ((SECONDS >= deadline)); then
          log "ERROR: $label (pid $pid) survived KILL"
          return 1
        fi
        sleep 0.2
      done
      return 2
    fi
    sleep 0.2
  done
  return 0
}

# dockerd gives each container its own stop timeout (10 s by default) on
# TERM, which would run into our KILL. So when dockerd pid $1 is the one
# serving the default socket, kill its running containers first (they die
# with the engine anyway; this engine is ours).
kill_containers() {
  local pid="$1" sock=/var/run/docker.sock inode ids
  command -v docker >/dev/null 2>&1 || return 0
  inode="$(awk -v s="$sock" '$NF == s && $4 == "00010000" { print $7; exit }' /proc/net/unix 2>/dev/null || true)"
  [[ -n "$inode" ]] || return 0
  if [[ -z "$(find "/proc/$pid/fd" -maxdepth 1 -lname "socket:\[$inode\]" 2>/dev/null || true)" ]]; then
    log "$sock is not served by our dockerd (pid $pid); leaving containers alone"
    return 0
  fi
  ids="$(timeout 10 env -u DOCKER_CONTEXT docker -H "unix://$sock" ps -q 2>/dev/null || true)"
  [[ -n "$ids" ]] || return 0
  log "killing $(wc -w <<<"$ids") running container(s) of our dockerd"
  # shellcheck disable=SC2086  # one argument per id
  timeout 20 env -u DOCKER_CONTEXT docker -H "unix://$sock" kill $ids >/dev/null 2>&1 || true
}

# Cancels every job of our own test cluster (only while our slurmctld, by
# its pid file, is the one answering) and waits up to 20 s for them to end.
cancel_slurm_jobs() {
  local ctld="$STATE/slurm/slurmctld.pid" pid ids deadline
  command -v squeue >/dev/null 2>&1 || return 0
  pid="$(tr -dc '0-9' 2>/dev/null <"$ctld" || true)"
  [[ -n "$pid" && -n "$(start_time "$pid")" ]] || return 0
  [[ "$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" || true)" == *"$STATE/slurm/slurmctld.log"* ]] || return 0
  ids="$(timeout 10 squeue -h -o %i 2>/dev/null || true)"
  [[ -n "$ids" ]] || return 0
  log "cancelling $(wc -w <<<"$ids") job(s) of the test cluster"
  # shellcheck disable=SC2086  # one argument per job id
  timeout 20 scancel $ids >/dev/null 2>&1 || true
  deadline=$((SECONDS + 20))
  while [[ -n "$(timeout 10 squeue -h -o %i 2>/dev/null || true)" ]] && ((SECONDS < deadline)); do
    sleep 0.5
  done
}

# Stops the process named by pid file $1 when it is ours: command name $2 and
# a command line (or sshd process title) containing $3. $4: label.
stop_by_pidfile() {
  local file="$1" comm="$2" marker="$3" label="$4" pid cmdline st kids kid rc=0
  [[ -e "$file" ]] || return 0
  pid="$(tr -dc '0-9' 2>/dev/null <"$file" || true)"
  cmdline=""
  if [[ -n "$pid" ]]; then
    cmdline="$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" || true)"
  fi
  if [[ -z "$pid" || "$(cat "/proc/$pid/comm" 2>/dev/null || true)" != "$comm" \
    || "$cmdline" != *"$marker"* ]]; then
    log "removing stale pid file $file${pid:+ (pid $pid is not our $label)}"
    rm -f "$file"
    return 0
  fi
  st="$(start_time "$pid")"
  if [[ "$comm" == dockerd ]]; then kill_containers "$pid"; fi
  kids="$(children_of "$pid")"
  terminate "$pid" "$st" "$label" || rc=$?
  if [[ "$rc" -eq 1 ]]; then return 1; fi
  if [[ "$rc" -eq 2 ]]; then
    # Killed without a chance to clean up: stop the children it left.
    rc=0
    for kid in $kids; do
      if same_alive "${kid%%:*}" "${kid#*:}"; then
        terminate "${kid%%:*}" "${kid#*:}" "$label child $(cat "/proc/${kid%%:*}/comm" 2>/dev/null || true)" || [[ $? -eq 2 ]] || rc=1
      fi
    done
  fi
  rm -f "$file"
  log "$label stopped"
  return "$rc"
}

main() {
  local failed=0
  if [[ ! -d "$STATE" ]]; then
    log "no state dir $STATE; nothing to stop"
    return 0
  fi
  # Do not race a concurrent ensure-* run of the same state dir.
  if [[ -d "$STATE/ssh" ]]; then
    exec 8>>"$STATE/ssh/ensure-sshd.lock"
    flock -w 120 8 || log "warning: ensure-sshd.lock busy; going on"
  fi
  exec 9>>"$STATE/ensure-docker.lock"
  flock -w 120 9 || log "warning: ensure-docker.lock busy; going on"
  if [[ -d "$STATE/slurm" ]]; then
    exec 7>>"$STATE/slurm/ensure-slurm.lock"
    flock -w 300 7 || log "warning: ensure-slurm.lock busy; going on"
  fi

  cancel_slurm_jobs
  stop_by_pidfile "$STATE/slurm/slurmd.pid" slurmd "$STATE/slurm/slurmd.log" slurmd || failed=1
  stop_by_pidfile "$STATE/slurm/slurmctld.pid" slurmctld "$STATE/slurm/slurmctld.log" slurmctld \
    || failed=1
  stop_by_pidfile "$STATE/slurm/munge/munged.pid" munged "$STATE/slurm/munge/munged.pid" munged \
    || failed=1
  stop_by_pidfile "$STATE/ssh/sshd.pid" sshd "$STATE/ssh/sshd_config" "test sshd" || failed=1
  stop_by_pidfile "$STATE/dockerd.pid" dockerd "$STATE/dockerd.pid" dockerd || failed=1
  if [[ "$failed" -ne 0 ]]; then return 1; fi
  log "done"
}

main "$@"
