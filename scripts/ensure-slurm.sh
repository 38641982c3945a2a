#!/usr/bin/env bash
# ensure-slurm.sh - make a real single-node Slurm cluster answer on this
# machine for the Slurm platform's tests (facts.md section 10).
#
# What it does, in order:
#   1. If `sinfo` already answers and a node is usable (idle, mixed or
#      allocated), it leaves everything alone and exits 0.
#   2. Else, if not root, it prints why on stderr and exits 3 (the tests then
#      report Slurm as unavailable with that reason).
#   3. Else it installs Debian's slurmctld, slurmd, slurm-client and munge
#      (--no-install-recommends; policy-rc.d keeps the packages from starting
#      anything, and there is no systemd), creates /etc/munge/munge.key when
#      it is missing, and starts munged as user munge unless a munge daemon
#      already answers.
#   4. It writes /etc/slurm/slurm.conf (one node as `slurmd -C` describes this
#      machine, proctrack/linuxproc, task/none, select/cons_tres on cores, no
#      accounting, batch_sched_delay=0, MinJobAge=3600 so finished jobs stay
#      visible to `scontrol show job`, KillWait=5) with state, spool, pid and
#      log files under $STATE/slurm. It refuses to overwrite a slurm.conf it
#      did not write.
#   5. It starts slurmctld and slurmd unless their pid files name live
#      daemons, waits for the node to become idle, then submits a `true` job
#      and waits for it to complete before declaring the cluster ready.
#
# What it leaves running: munged (pid file $STATE/slurm/munge/munged.pid),
# slurmctld ($STATE/slurm/slurmctld.pid) and slurmd ($STATE/slurm/slurmd.pid),
# whichever it had to start. Stop them with scripts/stop-test-services.sh,
# which touches only processes named by those pid files.
#
# Environment:
#   TAOSPEC_TEST_STATE   state dir (default /tmp/taospec-test-state)
#   TAOSPEC_SLURM_WAIT   seconds to wait for each stage (default 60)
#
# Output: progress lines on stderr only; nothing on stdout.
# Exit codes: 0 cluster ready; 3 not ready and not root (cannot start it);
# 1 anything else failed (details and log tails on stderr).
set -euo pipefail

readonly CONF=/etc/slurm/slurm.conf
readonly MUNGE_KEY=/etc/munge/munge.key
readonly MARKER="# Written by taospec scripts/ensure-slurm.sh"
SCRIPT_NAME=ensure-slurm
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"
WAIT_SECS="${TAOSPEC_SLURM_WAIT:-60}"
DIR="$STATE/slurm"
MUNGE_DIR="$DIR/munge"
MUNGE_PID="$MUNGE_DIR/munged.pid"
CTLD_PID="$DIR/slurmctld.pid"
SLURMD_PID="$DIR/slurmd.pid"
CTLD_LOG="$DIR/slurmctld.log"
SLURMD_LOG="$DIR/slurmd.log"

gone() { ! alive "$1"; }

# True when pid file $1 names a live process called $2.
names_live() { [[ -n "$(live_pid "$1" "$2")" ]]; }

# The states sinfo reports for the nodes, one word each, flags (*~#!%$@^-)
# stripped; nothing when sinfo does not answer.
node_states() {
  command -v sinfo >/dev/null 2>&1 || return 0
  timeout 10 sinfo -h -N -o '%t' 2>/dev/null | tr -d '*~#!%$@^-' || true
}

cluster_ready() {
  node_states | grep -qxE 'idle|mix|alloc'
}

# Waits until command "$@" succeeds, at most WAIT_SECS; $1 is a label.
wait_until() {
  local label="$1" deadline=$((SECONDS + WAIT_SECS))
  shift
  until "$@"; do
    if ((SECONDS >= deadline)); then
      log "gave up after ${WAIT_SECS}s waiting for $label"
      return 1
    fi
    sleep 0.5
  done
}

install_packages() {
  local missing=0 cmd
  for cmd in slurmctld slurmd sinfo sbatch munged munge mungekey; do
    command -v "$cmd" >/dev/null 2>&1 || missing=1
  done
  [[ "$missing" -eq 1 ]] || return 0
  apt_install slurmctld slurmd slurm-client munge
}

munge_answers() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }

ensure_munge() {
  if [[ ! -s "$MUNGE_KEY" ]]; then
    log "creating $MUNGE_KEY"
    mungekey --create --keyfile="$MUNGE_KEY"
  fi
  chown munge:munge "$MUNGE_KEY"
  chmod 400 "$MUNGE_KEY"
  if munge_answers; then return 0; fi
  if [[ -n "$(live_pid "$MUNGE_PID" munged)" ]]; then
    die "munged (pid file $MUNGE_PID) is running but does not answer"
  fi
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 "$MUNGE_DIR"
  log "starting munged as user munge (log $MUNGE_DIR/munged.log)"
  # munged daemonizes itself; 9>&-: do not hand it our lock.
  if ! runuser -u munge -- /usr/sbin/munged --pid-file="$MUNGE_PID" \
    --log-file="$MUNGE_DIR/munged.log" </dev/null >/dev/null 2>&1 9>&-; then
    log_tail "$MUNGE_DIR/munged.log"
    die "munged failed to start"
  fi
  wait_until "munge to answer" munge_answers || die "munged does not answer"
}

write_conf() {
  local node host tmp
  node="$(slurmd -C | grep '^NodeName=')" || die "slurmd -C describes no node"
  host="$(hostname -s)"
  tmp="$(mktemp "$DIR/.slurm.conf.XXXXXX")"
  cat >"$tmp" <<EOF
$MARKER; rewritten on every run.
# A single-node cluster for taospec's tests; state lives under $DIR.
ClusterName=taospec-test
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$CTLD_LOG
SlurmdLogFile=$SLURMD_LOG
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
MinJobAge=3600
KillWait=5
InactiveLimit=0
$node State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
  chmod 644 "$tmp"
  if [[ -f "$CONF" ]] && cmp -s "$tmp" "$CONF"; then
    rm -f "$tmp"
    return 1
  fi
  if [[ -f "$CONF" ]] && ! grep -qF "$MARKER" "$CONF"; then
    rm -f "$tmp"
    die "$CONF exists and was not written by this script; move it away to let taospec's tests use their own cluster"
  fi
  mkdir -p "$(dirname "$CONF")"
  mv -f "$tmp" "$CONF"
  log "wrote $CONF"
  return 0
}

# Starts daemon $1 (command name) unless pid file $2 names a live one.
# $3: log file, also passed with -L so that stop-test-services.sh can tell
# the daemon is ours.
start_daemon() {
  local name="$1" pidfile="$2" logfile="$3" pid
  pid="$(live_pid "$pidfile" "$name")"
  if [[ -n "$pid" ]]; then
    log "$name already running (pid $pid)"
    return 0
  fi
  rm -f "$pidfile"
  log "starting $name (log $logfile)"
  # Both daemonize themselves and write their pid files.
  if ! "/usr/sbin/$name" -L "$logfile" </dev/null >/dev/null 2>&1 9>&-; then
    log_tail "$logfile"
    die "$name failed to start"
  fi
  if ! wait_until "$name's pid file" names_live "$pidfile" "$name"; then
    log_tail "$logfile"
    die "$name did not stay up"
  fi
}

# Stops daemon $1 named by pid file $2, if running (its config changed).
restart_needed() {
  local name="$1" pidfile="$2" pid
  pid="$(live_pid "$pidfile" "$name")"
  [[ -n "$pid" ]] || return 0
  log "configuration changed; stopping $name (pid $pid) to restart it"
  kill -TERM "$pid"
  wait_until "$name to stop" gone "$pid" || die "$name (pid $pid) does not stop"
}

ctld_up() { timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP'; }

node_idle() {
  local states
  states="$(node_states)"
  if grep -qxE 'down|drain|drng|fail' <<<"$states"; then
    timeout 10 scontrol update nodename="$(hostname -s)" state=resume >/dev/null 2>&1 || true
  fi
  grep -qx idle <<<"$states"
}

job_completed() {
  local state
  state="$(timeout 10 scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' || true)"
  case "$state" in
    JobState=COMPLETED) return 0 ;;
    JobState=PENDING | JobState=CONFIGURING | JobState=RUNNING | JobState=COMPLETING) return 1 ;;
    *) die "the smoke-test job $1 ended ${state:-without a state}" ;;
  esac
}

smoke_test() {
  local id
  id="$(sbatch --parsable --job-name=taospec-smoke --output=/dev/null --wrap=true)" \
    || die "sbatch of the smoke-test job failed"
  id="${id%%;*}"
  log "smoke-test job $id submitted"
  if ! wait_until "the smoke-test job $id to complete" job_completed "$id"; then
    log_tail "$CTLD_LOG"
    log_tail "$SLURMD_LOG"
    die "the smoke-test job $id did not complete"
  fi
}

main() {
  if cluster_ready; then
    log "Slurm already answers ($(node_states | sort -u | tr '\n' ' '))"
    return 0
  fi
  if [[ "$(id -u)" -ne 0 ]]; then
    log "sinfo shows no usable node and this is not root (uid $(id -u)): cannot install or start Slurm"
    exit 3
  fi
  install -d -m 0755 "$DIR" "$DIR/ctld" "$DIR/spool"
  # One run at a time per state dir.
  exec 9>>"$DIR/ensure-slurm.lock"
  flock -w 300 9 || die "timed out waiting for $DIR/ensure-slurm.lock"
  if cluster_ready; then
    log "Slurm came up while waiting for the lock"
    return 0
  fi

  install_packages
  ensure_munge
  if write_conf; then
    restart_needed slurmd "$SLURMD_PID"
    restart_needed slurmctld "$CTLD_PID"
  fi
  start_daemon slurmctld "$CTLD_PID" "$CTLD_LOG"
  wait_until "slurmctld to answer" ctld_up || { log_tail "$CTLD_LOG"; die "slurmctld does not answer"; }
  start_daemon slurmd "$SLURMD_PID" "$SLURMD_LOG"
  if ! wait_until "the node to be idle" node_idle; then
    log_tail "$SLURMD_LOG"
    die "the node is not idle: $(node_states | tr '\n' ' ')"
  fi
  smoke_test
  log "ready: $(sinfo -h -N -o '%N %t %c CPUs')"
}

main "$@"
