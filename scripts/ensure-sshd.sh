#!/usr/bin/env bash
# ensure-sshd.sh - run a throwaway OpenSSH server on loopback for the
# remote-Docker tests (DOCKER_HOST=ssh://root@127.0.0.1:PORT or
# DOCKER_HOST=ssh://root@taospec-test).
#
# What it does:
#   - installs openssh-server/openssh-client when sshd, ssh or ssh-keygen is
#     missing (Debian's policy-rc.d / no init system keep the distro's own
#     sshd from starting);
#   - keeps everything under $STATE/ssh/: an ed25519 host key, an ed25519
#     client key without passphrase (id_ed25519), authorized_keys,
#     known_hosts (pre-filled with the host key), sshd_config, sshd.pid,
#     sshd.log and a client config (config);
#   - sshd listens on 127.0.0.1:${TAOSPEC_SSH_PORT:-2222} only, root may log in
#     with the key only, StrictModes is off (the state dir lives under /tmp);
#   - starts /usr/sbin/sshd -f $STATE/ssh/sshd_config unless the pid file names
#     a live sshd (a live one whose config changed gets a SIGHUP to reload);
#   - puts an `Include $STATE/ssh/config` line at the top of the invoking
#     user's ~/.ssh/config (the docker CLI's ssh transport runs plain `ssh`),
#     so both `ssh taospec-test` and `ssh -p PORT root@127.0.0.1` use the key;
#   - checks `ssh taospec-test` end to end.
#
# A GPU host for the `gpus: {free: N}` tests: the same sshd also listens on
# 127.0.0.2 (Host taospec-gpu), where a session's PATH starts with
# $STATE/ssh/gpu-host/bin, which holds a copy of tests/fakes/nvidia-smi, and
# FAKE_NVIDIA_SMI_CSV (the occupancy it reports) is accepted from the client,
# whose config sends it to that host only. Sessions on 127.0.0.1 are as before:
# no nvidia-smi there.
#
# What it leaves running: one sshd (its pid in $STATE/ssh/sshd.pid). Stop it
# with scripts/stop-test-services.sh.
#
# Output: stdout gets exactly three lines, suitable for eval:
#   SSH_PORT=<port>  SSH_KEY=<client private key>  SSH_CONFIG=<client config>
# Progress goes to stderr.
# Exit codes: 0 ready; 1 failure (details on stderr); 2 bad TAOSPEC_SSH_PORT;
# 3 not root (cannot install packages, create /run/sshd or serve root logins).
set -euo pipefail

readonly ALIAS="taospec-test"
readonly GPU_ALIAS="taospec-gpu"
readonly GPU_ADDRESS="127.0.0.2"
readonly SSHD=/usr/sbin/sshd
SCRIPT_NAME=ensure-sshd
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"
PORT="${TAOSPEC_SSH_PORT:-2222}"
SSH_DIR="$STATE/ssh"
HOST_KEY="$SSH_DIR/ssh_host_ed25519_key"
CLIENT_KEY="$SSH_DIR/id_ed25519"
AUTH_KEYS="$SSH_DIR/authorized_keys"
KNOWN_HOSTS="$SSH_DIR/known_hosts"
SSHD_CONFIG="$SSH_DIR/sshd_config"
CLIENT_CONFIG="$SSH_DIR/config"
PIDFILE="$SSH_DIR/sshd.pid"
LOGFILE="$SSH_DIR/sshd.log"
GPU_BIN="$SSH_DIR/gpu-host/bin"
FAKE_SMI="$(dirname "$0")/../tests/fakes/nvidia-smi"
SYSTEM_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

port_open() { (: <"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }

# Replaces file $1 with the content of file $2 when they differ (mode $3).
# Returns 0 when $1 changed, 1 when it was already up to date.
install_if_changed() {
  local dest="$1" new="$2" mode="$3"
  chmod "$mode" "$new"
  if [[ -f "$dest" ]] && cmp -s "$new" "$dest"; then
    rm -f "$new"
    return 1
  fi
  mv -f "$new" "$dest"
  return 0
}

# Creates an ed25519 key pair at $1 unless a usable one is there.
ensure_key() {
  local key="$1" comment="$2"
  if [[ -s "$key" ]] && ssh-keygen -y -f "$key" >/dev/null 2>&1; then
    if [[ ! -s "$key.pub" ]]; then
      ssh-keygen -y -f "$key" >"$key.pub"
    fi
    return 0
  fi
  log "generating $key"
  rm -f "$key" "$key.pub"
  ssh-keygen -q -t ed25519 -N '' -C "$comment" -f "$key" </dev/null >/dev/null
  chmod 600 "$key"
}

write_sshd_config() {
  local tmp
  tmp="$(mktemp "$SSH_DIR/.sshd_config.XXXXXX")"
  cat >"$tmp" <<EOF
# Written by taospec scripts/ensure-sshd.sh; rewritten on every run.
ListenAddress 127.0.0.1
ListenAddress $GPU_ADDRESS
Port $PORT
HostKey "$HOST_KEY"
PidFile "$PIDFILE"
PermitRootLogin prohibit-password
PubkeyAuthentication yes
AuthenticationMethods publickey
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitEmptyPasswords no
UsePAM no
AuthorizedKeysFile "$AUTH_KEYS"
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
PermitUserEnvironment no
# Parallel tests open many short docker-over-ssh connections at once.
MaxStartups 100:30:200
MaxSessions 100
LogLevel INFO
Subsystem sftp internal-sftp

# The GPU host (Host $GPU_ALIAS): a stand-in nvidia-smi first on PATH, and the
# occupancy it reports taken from the client.
Match LocalAddress $GPU_ADDRESS
    SetEnv "PATH=$GPU_BIN:$SYSTEM_PATH"
    AcceptEnv FAKE_NVIDIA_SMI_CSV
EOF
  install_if_changed "$SSHD_CONFIG" "$tmp" 600
}

# Copies the nvidia-smi stand-in to the GPU host's bin directory.
install_gpu_host() {
  local tmp
  if [[ ! -f "$FAKE_SMI" ]]; then
    log "warning: no $FAKE_SMI; Host $GPU_ALIAS has no nvidia-smi"
    return 0
  fi
  mkdir -p "$GPU_BIN"
  chmod 755 "$SSH_DIR/gpu-host" "$GPU_BIN"
  tmp="$(mktemp "$GPU_BIN/.nvidia-smi.XXXXXX")"
  cat "$FAKE_SMI" >"$tmp"
  install_if_changed "$GPU_BIN/nvidia-smi" "$tmp" 755 || true
}

write_client_files() {
  local tmp hostkey
  tmp="$(mktemp "$SSH_DIR/.authorized_keys.XXXXXX")"
  cat "$CLIENT_KEY.pub" >"$tmp"
  install_if_changed "$AUTH_KEYS" "$tmp" 600 || true

  hostkey="$(cut -d' ' -f1,2 "$HOST_KEY.pub")"
  tmp="$(mktemp "$SSH_DIR/.known_hosts.XXXXXX")"
  printf '[%s]:%s %s\n' 127.0.0.1 "$PORT" "$hostkey" localhost "$PORT" "$hostkey" \
    "$GPU_ADDRESS" "$PORT" "$hostkey" >"$tmp"
  install_if_changed "$KNOWN_HOSTS" "$tmp" 600 || true

  tmp="$(mktemp "$SSH_DIR/.config.XXXXXX")"
  cat >"$tmp" <<EOF
# Written by taospec scripts/ensure-sshd.sh; rewritten on every run.
# Included from ~/.ssh/config so that plain \`ssh\` (and the docker CLI's
# ssh:// transport) reaches the test sshd with its key.
Host $ALIAS
    HostName 127.0.0.1
    Port $PORT
    User root

# The GPU host: the same sshd on $GPU_ADDRESS, where nvidia-smi is the stand-in
# and reports the FAKE_NVIDIA_SMI_CSV sent from here.
Host $GPU_ALIAS
    HostName $GPU_ADDRESS
    Port $PORT
    User root
    SendEnv FAKE_NVIDIA_SMI_CSV

# Same settings for ssh://root@127.0.0.1:$PORT (or $GPU_ADDRESS), and only for that port.
Match host 127.0.0.1,localhost,$GPU_ADDRESS exec "test %p = $PORT"
    IdentityFile "$CLIENT_KEY"
    IdentitiesOnly yes
    StrictHostKeyChecking no
    UserKnownHostsFile "$KNOWN_HOSTS"
    BatchMode yes
    ConnectTimeout 10
    LogLevel ERROR
EOF
  install_if_changed "$CLIENT_CONFIG" "$tmp" 600 || true
}

# Puts `Include <client config>` at the top of the user's ~/.ssh/config (an
# Include further down could land inside someone's Host block).
ensure_include() {
  local home dot cfg line tmp
  home="$(getent passwd "$(id -u)" | cut -d: -f6)"
  home="${home:-$HOME}"
  dot="$home/.ssh"
  cfg="$dot/config"
  line="Include \"$CLIENT_CONFIG\""
  if [[ ! -d "$dot" ]]; then
    mkdir -p "$dot"
    chmod 700 "$dot"
  fi
  if [[ -f "$cfg" ]] && grep -qxF "$line" "$cfg"; then
    return 0
  fi
  log "adding '$line' to the top of $cfg"
  tmp="$(mktemp "$dot/.config.XXXXXX")"
  {
    printf '# Added by taospec scripts/ensure-sshd.sh (test sshd on 127.0.0.1).\n'
    printf '%s\n\n' "$line"
    if [[ -f "$cfg" ]]; then cat "$cfg"; fi
  } >"$tmp"
  chmod 600 "$tmp"
  mv -f "$tmp" "$cfg"
}

start_or_reload_sshd() {
  local config_changed="$1" pid deadline
  pid="$(live_pid "$PIDFILE" sshd)"
  if [[ -n "$pid" ]]; then
    if [[ "$config_changed" -eq 1 ]]; then
      log "config changed; reloading sshd (pid $pid)"
      kill -HUP "$pid"
      sleep 0.5
    else
      log "sshd already running (pid $pid)"
    fi
  else
    rm -f "$PIDFILE"
    if port_open; then
      die "127.0.0.1:$PORT is already taken by another process; set TAOSPEC_SSH_PORT to a free port"
    fi
    log "starting sshd on 127.0.0.1:$PORT (log $LOGFILE)"
    # sshd daemonizes itself (own session, stdio on /dev/null).
    if ! "$SSHD" -f "$SSHD_CONFIG" -E "$LOGFILE" </dev/null >/dev/null 2>&1 9>&-; then
      log_tail "$LOGFILE"
      die "sshd failed to start"
    fi
  fi
  deadline=$((SECONDS + 15))
  until port_open; do
    if ((SECONDS >= deadline)); then
      log_tail "$LOGFILE"
      die "sshd does not accept connections on 127.0.0.1:$PORT"
    fi
    sleep 0.2
  done
  pid="$(live_pid "$PIDFILE" sshd)"
  [[ -n "$pid" ]] || { log_tail "$LOGFILE"; die "port $PORT answers but $PIDFILE names no live sshd"; }
}

verify() {
  local out attempt
  for attempt in 1 2 3; do
    if out="$(ssh "$ALIAS" 'command -v docker || true' </dev/null 2>&1)" &&
      out="$(ssh "$GPU_ALIAS" 'command -v docker || true' </dev/null 2>&1)"; then
      if [[ -z "$out" ]]; then
        log "warning: no docker on root's PATH over ssh; ssh:// DOCKER_HOST will not work"
      fi
      return 0
    fi
    sleep "$attempt"
  done
  log "ssh $ALIAS or $GPU_ALIAS failed: $out"
  log_tail "$LOGFILE"
  die "cannot log in with ssh $ALIAS"
}

main() {
  if ! [[ "$PORT" =~ ^[0-9]+$ ]] || ((PORT < 1 || PORT > 65535)); then
    log "TAOSPEC_SSH_PORT must be a port number, got '$PORT'"
    exit 2
  fi
  if [[ "$(id -u)" -ne 0 ]]; then
    log "not root (uid $(id -u)): cannot install openssh-server, create /run/sshd or serve root logins"
    exit 3
  fi
  if [[ ! -x "$SSHD" ]] || ! command -v ssh >/dev/null 2>&1 || ! command -v ssh-keygen >/dev/null 2>&1; then
    apt_install openssh-server openssh-client
  fi
  [[ -x "$SSHD" ]] || die "$SSHD missing after installing openssh-server"

  mkdir -p "$SSH_DIR"
  chmod 700 "$SSH_DIR"
  # One run at a time per state dir.
  exec 9>>"$SSH_DIR/ensure-sshd.lock"
  flock -w 120 9 || die "timed out waiting for $SSH_DIR/ensure-sshd.lock"

  ensure_key "$HOST_KEY" "taospec-test sshd host key"
  ensure_key "$CLIENT_KEY" "taospec-test client key"
  local changed=0
  if write_sshd_config; then changed=1; fi
  write_client_files
  install_gpu_host

  # Privilege-separation directory that sshd insists on.
  mkdir -p /run/sshd
  chmod 755 /run/sshd
  "$SSHD" -t -f "$SSHD_CONFIG" || die "sshd rejects $SSHD_CONFIG"

  start_or_reload_sshd "$changed"
  ensure_include
  verify
  log "ready: ssh $ALIAS / DOCKER_HOST=ssh://root@127.0.0.1:$PORT (sshd pid $(cat "$PIDFILE"))"

  printf 'SSH_PORT=%s\nSSH_KEY=%q\nSSH_CONFIG=%q\n' "$PORT" "$CLIENT_KEY" "$CLIENT_CONFIG"
}

main "$@"
