#!/usr/bin/env bash
# taospec plan: jobs/train-remote-docker.yaml (target train-remote-docker, platform docker)
# The job id is minted when the job is submitted; until then it shows as $JOB_ID.
# Results: /data/results/$JOB_ID
# Recorded as: image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt, network_arch visual_changenet, action train, storage tier A
# Note: the containers run on ssh://ubuntu@gpu-box.example.com:2222: mount sources and results_root are paths on that host, not on this machine
# Values are single-quoted so that a $ in them stays literal, as in the spec.
# shellcheck disable=SC2016
set -euo pipefail

# The record comes first: it mints the id the container is named after.
JOB_ID="${JOB_ID:-$(taospec record open --platform docker --image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt --network-arch visual_changenet --action train --storage-tier A --results-root /data/results)}"
[[ $JOB_ID =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "JOB_ID=$JOB_ID: not a job id (letters, digits, '.', '_' and '-'); unset it to open a record" >&2; exit 2; }
export JOB_ID
# A step that fails before the launch ends the record ERROR, as run records it.
trap 'taospec record mark "$JOB_ID" --state ERROR --message "the script stopped (exit $?) before the job launched"' EXIT

# paths-check: check on ssh://ubuntu@gpu-box.example.com:2222 that results_root and every mount source exist there
ssh -o BatchMode=yes \
    -o ConnectTimeout=30 \
    -o ServerAliveInterval=20 \
    -p 2222 \
    -- ubuntu@gpu-box.example.com \
    'test -e /data/results || printf %s\\n '"'"'TAOSPEC_FAILED=results_root /data/results does not exist on ssh://ubuntu@gpu-box.example.com:2222; create it there or fix the spec'"'"'
test -e /data/datasets/levir-cd || printf %s\\n '"'"'TAOSPEC_FAILED=mounts[0].source /data/datasets/levir-cd does not exist on ssh://ubuntu@gpu-box.example.com:2222; create it there or fix the spec'"'"'
echo TAOSPEC_CHECK=done' </dev/null | grep -q ^TAOSPEC_CHECK=done

# prepare: create the results tree on ssh://ubuntu@gpu-box.example.com:2222, owned by 1000:1000, and write the spec the job reads as /results/stage/spec.yaml from this step's input
ssh -o BatchMode=yes \
    -o ConnectTimeout=30 \
    -o ServerAliveInterval=20 \
    -p 2222 \
    -- ubuntu@gpu-box.example.com \
    'if install -d -m 0755 -o 1000 -g 1000 \
    /data/results/'"$JOB_ID"' /data/results/'"$JOB_ID"'/stage /data/results/'"$JOB_ID"'/.tao-runtime \
    /data/results/'"$JOB_ID"'/.tao-runtime/home /data/results/'"$JOB_ID"'/.tao-runtime/home/.cache \
    /data/results/'"$JOB_ID"'/.tao-runtime/home/.cache/huggingface \
    /data/results/'"$JOB_ID"'/.tao-runtime/home/.cache/torch \
    /data/results/'"$JOB_ID"'/.tao-runtime/home/.cache/triton \
    /data/results/'"$JOB_ID"'/.tao-runtime/home/.cache/torchinductor \
    /data/results/'"$JOB_ID"'/.tao-runtime/home/.cache/matplotlib && install -m 0644 -o 1000 -g 1000 /dev/stdin /data/results/'"$JOB_ID"'/stage/spec.yaml
then echo TAOSPEC_PREPARE=done
else printf %s\\n '"'"'TAOSPEC_FAILED=could not create the results tree or the spec file'"'"'; fi' <<'TAOSPEC_EOF' | grep -q ^TAOSPEC_PREPARE=done
dataset:
  segment:
    data_name: LEVIR-CD
    root_dir: /data
train:
  num_epochs: 10
  num_gpus: 2
TAOSPEC_EOF

# login: log in to NGC with the key fed on stdin, unless the image is already here
DOCKER_HOST=ssh://ubuntu@gpu-box.example.com:2222 docker image inspect nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt >/dev/null 2>&1 || printf '%s' "$NGC_KEY" | DOCKER_HOST=ssh://ubuntu@gpu-box.example.com:2222 docker \
    login nvcr.io \
    -u '$oauthtoken' \
    --password-stdin

# pull: pull the image unless the engine has it
DOCKER_HOST=ssh://ubuntu@gpu-box.example.com:2222 docker image inspect nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt >/dev/null 2>&1 || DOCKER_HOST=ssh://ubuntu@gpu-box.example.com:2222 docker \
    pull nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt

# launch: start the container detached, named and labelled after the job id
backend_ref=$(DOCKER_HOST=ssh://ubuntu@gpu-box.example.com:2222 docker \
    run \
    -d \
    --name "$JOB_ID" \
    --label tao-job="$JOB_ID" \
    --label tao-owner=root \
    --gpus '"device=2,3"' \
    --ipc=host \
    --shm-size=8g \
    --user 1000:1000 \
    -v /data/results/"$JOB_ID":/results \
    -v /data/datasets/levir-cd:/data:ro \
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
    nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt visual_changenet train \
    -e /results/stage/spec.yaml \
    results_dir=/results)

trap - EXIT
taospec record mark "$JOB_ID" --state RUNNING --backend-ref "$backend_ref"
