#!/usr/bin/env bash
# taospec plan: jobs/train-brev.yaml (target train-brev, platform brev)
# The job id is minted when the job is submitted; until then it shows as $JOB_ID.
# Results: /home/ubuntu/results/$JOB_ID
# Recorded as: image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt, network_arch visual_changenet, action train, storage tier C
# Note: runs on Brev instance tao-a100 through brev exec: each remote command is one argument, and each step reports its outcome in a TAOSPEC_ line because brev returns no exit code and runs a failed command again
# Note: results_root and mount sources are paths on the instance
# Note: the job runs as 1000:1000; the account brev exec uses on the instance must be that user or root to create the results tree
# Note: NGC_KEY, HF_TOKEN are read from the instance's environment; their values never reach this machine
# Note: ephemeral: the instance is deleted once the job ends or is cancelled; a tier-C job must upload its results in its own command before it exits
# Values are single-quoted so that a $ in them stays literal, as in the spec.
# shellcheck disable=SC2016
set -euo pipefail

# The record comes first: it mints the id the container is named after.
JOB_ID="${JOB_ID:-$(taospec record open --platform brev --image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt --network-arch visual_changenet --action train --storage-tier C --results-root /home/ubuntu/results)}"
[[ $JOB_ID =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "JOB_ID=$JOB_ID: not a job id (letters, digits, '.', '_' and '-'); unset it to open a record" >&2; exit 2; }
export JOB_ID
# A step that fails before the launch ends the record ERROR, as run records it.
trap 'taospec record mark "$JOB_ID" --state ERROR --message "the script stopped (exit $?) before the job launched"' EXIT

# probe: wait until the instance answers a two-word command (a fresh one says RUNNING before its sshd is up); up to 120 tries
attempt=1; until brev exec tao-a100 'echo ok' </dev/null | grep -q ^ok; do [ "$attempt" -lt 120 ] || { echo "probe: no success after 120 attempts" >&2; exit 1; }; attempt=$((attempt + 1)); sleep 5; done

# env-check: check that every env.pass name is set on the instance; values never leave it
brev exec tao-a100 \
    'printenv NGC_KEY >/dev/null 2>&1 || printf %s\\n '"'"'TAOSPEC_FAILED=NGC_KEY (env.pass) is not set on instance tao-a100; set it there, e.g. in /etc/environment (its value never leaves the instance)'"'"'
printenv HF_TOKEN >/dev/null 2>&1 || printf %s\\n '"'"'TAOSPEC_FAILED=HF_TOKEN (env.pass) is not set on instance tao-a100; set it there, e.g. in /etc/environment (its value never leaves the instance)'"'"'
echo TAOSPEC_CHECK=done' </dev/null | grep -q ^TAOSPEC_CHECK=

# paths-check: check that every mount source exists on the instance
brev exec tao-a100 \
    'test -e /home/ubuntu/datasets/levir-cd || printf %s\\n '"'"'TAOSPEC_FAILED=mounts[0].source /home/ubuntu/datasets/levir-cd does not exist on instance tao-a100; create it there or fix the spec'"'"'
echo TAOSPEC_CHECK=done' </dev/null | grep -q ^TAOSPEC_CHECK=

# login: log in to NGC with the instance's own NGC_KEY on stdin, unless the image is there
brev exec tao-a100 \
    'if docker image inspect nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt >/dev/null 2>&1; then echo TAOSPEC_LOGIN=not-needed
elif printf %s "$NGC_KEY" | docker login nvcr.io -u '"'"'$oauthtoken'"'"' --password-stdin
then echo TAOSPEC_LOGIN=done
else taospec_code=$?; printf '"'"'%s (exit %s)\n'"'"' '"'"'TAOSPEC_FAILED=docker login nvcr.io failed on the instance: check the NGC_KEY set there'"'"' "$taospec_code"; fi' </dev/null | grep -q ^TAOSPEC_LOGIN=

# pull: pull the image before the GPU run, unless the instance has it
brev exec tao-a100 \
    'if docker image inspect nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt >/dev/null 2>&1; then echo TAOSPEC_PULL=present
elif docker pull nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt
then echo TAOSPEC_PULL=pulled
else taospec_code=$?; printf '"'"'%s (exit %s)\n'"'"' '"'"'TAOSPEC_FAILED=docker pull failed on the instance'"'"' "$taospec_code"; fi' </dev/null | grep -q ^TAOSPEC_PULL=

# prepare: create the results tree owned by 1000:1000 and write the spec the job reads as /results/stage/spec.yaml
brev exec tao-a100 \
    'if install -d -m 0755 -o 1000 -g 1000 \
    /home/ubuntu/results/'"$JOB_ID"' /home/ubuntu/results/'"$JOB_ID"'/stage \
    /home/ubuntu/results/'"$JOB_ID"'/.tao-runtime \
    /home/ubuntu/results/'"$JOB_ID"'/.tao-runtime/home \
    /home/ubuntu/results/'"$JOB_ID"'/.tao-runtime/home/.cache \
    /home/ubuntu/results/'"$JOB_ID"'/.tao-runtime/home/.cache/huggingface \
    /home/ubuntu/results/'"$JOB_ID"'/.tao-runtime/home/.cache/torch \
    /home/ubuntu/results/'"$JOB_ID"'/.tao-runtime/home/.cache/triton \
    /home/ubuntu/results/'"$JOB_ID"'/.tao-runtime/home/.cache/torchinductor \
    /home/ubuntu/results/'"$JOB_ID"'/.tao-runtime/home/.cache/matplotlib && printf %s \
    '"'"'dataset:
  segment:
    data_name: LEVIR-CD
    root_dir: /data
train:
  num_epochs: 10
  num_gpus: 2
'"'"' | install -m 0644 -o 1000 -g 1000 /dev/stdin /home/ubuntu/results/'"$JOB_ID"'/stage/spec.yaml
then echo TAOSPEC_PREPARE=done
else printf %s\\n '"'"'TAOSPEC_FAILED=could not create the results tree or the spec file'"'"'; fi' </dev/null | grep -q ^TAOSPEC_PREPARE=

# launch: start the container detached, named and labelled after the job id, unless a container with that name exists (brev may run this twice); one docker created but could not start is removed
attempt=1; until brev exec tao-a100 \
    'if docker container inspect '"$JOB_ID"' >/dev/null 2>&1; then echo TAOSPEC_LAUNCH=exists
elif docker run -d --name '"$JOB_ID"' \
    --label tao-job='"$JOB_ID"' \
    --label tao-owner=root \
    --gpus '"'"'"device=0,1"'"'"' \
    --ipc=host \
    --shm-size=8g \
    --user 1000:1000 \
    -v /home/ubuntu/results/'"$JOB_ID"':/results \
    -v /home/ubuntu/datasets/levir-cd:/data:ro \
    -e HOME=/results/.tao-runtime/home \
    -e USER=u1000 \
    -e LOGNAME=u1000 \
    -e XDG_CACHE_HOME=/results/.tao-runtime/home/.cache \
    -e HF_HOME=/results/.tao-runtime/home/.cache/huggingface \
    -e TORCH_HOME=/results/.tao-runtime/home/.cache/torch \
    -e TRITON_CACHE_DIR=/results/.tao-runtime/home/.cache/triton \
    -e TORCHINDUCTOR_CACHE_DIR=/results/.tao-runtime/home/.cache/torchinductor \
    -e MPLCONFIGDIR=/results/.tao-runtime/home/.cache/matplotlib \
    -e NGC_KEY \
    -e HF_TOKEN \
    -e WANDB_MODE=offline \
    nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt visual_changenet train \
    -e /results/stage/spec.yaml \
    results_dir=/results
then echo TAOSPEC_LAUNCH=started
else taospec_code=$?; case "$taospec_code" in 125|126|127) docker rm '"$JOB_ID"' >/dev/null 2>&1;; esac; printf '"'"'%s (exit %s)\n'"'"' '"'"'TAOSPEC_FAILED=docker run failed'"'"' "$taospec_code"; fi' </dev/null | grep -q ^TAOSPEC_LAUNCH=; do [ "$attempt" -lt 3 ] || { echo "launch: no success after 3 attempts" >&2; exit 1; }; attempt=$((attempt + 1)); sleep 5; done
backend_ref=tao-a100/"$JOB_ID"

trap - EXIT
taospec record mark "$JOB_ID" --state RUNNING --backend-ref "$backend_ref"

# after the job ends, delete: delete the ephemeral instance tao-a100: stops its billing and erases its disk (an instance already deleted counts as done)
# said=$(brev delete tao-a100 2>&1 >/dev/null) || grep -Fq -- 'instance with id/name tao-a100 not found' <<<"$said" || { echo "$said" >&2; false; }
