# scripts/lib.sh - helpers the test-infrastructure scripts share. Sourced, not run.
#
# The sourcing script sets SCRIPT_NAME first (it prefixes every log line).
# Defines STATE (the absolute state dir, $TAOSPEC_TEST_STATE or
# /tmp/taospec-test-state), log, die, alive, live_pid, log_tail and
# apt_install (apt-get update at most once per run).
# shellcheck shell=bash

STATE="${TAOSPEC_TEST_STATE:-/tmp/taospec-test-state}"
STATE="$(realpath -m -- "$STATE")" # absolute: daemons chdir("/")

log() { printf '%s: %s\n' "$SCRIPT_NAME" "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

# True when pid $1 exists and is not a zombie (kill -0 also succeeds on
# zombies, and this machine's pid 1 reaps orphans only every second or so).
alive() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [[ "${stat%% *}" != [ZX] ]]
}

# Prints the pid named by pid file $1 when that process is alive and its
# command name is $2; prints nothing otherwise.
live_pid() {
  local file="$1" name="$2" pid comm
  [[ -r "$file" ]] || return 0
  pid="$(tr -dc '0-9' 2>/dev/null <"$file" || true)"
  [[ -n "$pid" ]] && alive "$pid" || return 0
  comm="$(cat "/proc/$pid/comm" 2>/dev/null || true)"
  if [[ "$comm" == "$name" ]]; then printf '%s\n' "$pid"; fi
}

# The last lines of log file $1, on stderr, when it has any.
log_tail() {
  if [[ -s "$1" ]]; then
    log "last lines of $1:"
    tail -n 30 "$1" >&2 || true
  fi
}

# Installs Debian packages "$@" (no recommends), running apt-get update once.
APT_UPDATED=0
apt_install() {
  if [[ "$APT_UPDATED" -eq 0 ]]; then
    log "apt-get update"
    apt-get update -qq >&2 || die "apt-get update failed"
    APT_UPDATED=1
  fi
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 \
    || die "apt-get install $* failed"
}
