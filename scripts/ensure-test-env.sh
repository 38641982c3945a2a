#!/usr/bin/env bash
# Brings up what the integration tests use, idempotently: shellcheck (for the
# rendered scripts), a Docker engine with the locally built test image, a
# loopback ssh server for remote-Docker tests, and a single-node Slurm cluster
# for the Slurm platform's tests. Installing needs root; without
# it, whatever is missing is reported and the tests that need it say why they
# skip. Stop what this started with scripts/stop-test-services.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'ensure-test-env: %s\n' "$*" >&2; }

apt_updated=0
need_package() {  # need_package COMMAND PACKAGE
    command -v "$1" >/dev/null 2>&1 && return 0
    if [ "$(id -u)" -ne 0 ]; then
        say "$1 is missing and installing $2 needs root"
        return 0
    fi
    if [ "$apt_updated" -eq 0 ]; then
        apt-get update -qq >/dev/null
        apt_updated=1
    fi
    say "installing $2"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2" >/dev/null
}

need_package shellcheck shellcheck
need_package setpriv util-linux

status=0
scripts/ensure-docker.sh || status=$?
if [ "$status" -ne 0 ]; then
    say "no Docker engine (exit $status): engine tests will report why they skip"
fi
if [ -x scripts/ensure-sshd.sh ]; then
    scripts/ensure-sshd.sh >/dev/null || say "no loopback ssh server: remote-Docker tests will say why they skip"
fi
if [ -x scripts/ensure-slurm.sh ]; then
    scripts/ensure-slurm.sh || say "no Slurm cluster: Slurm tests will say why they skip"
fi
