#!/usr/bin/env bash
# taospec plan: jobs/train-slurm.yaml (target train-slurm, platform slurm)
# The job id is minted when the job is submitted; until then it shows as $JOB_ID.
# Results: /lustre/tao/results/$JOB_ID
# Recorded as: image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt, network_arch visual_changenet, action train, storage tier A, upload excludes *.tmp
# Note: the Slurm commands run on alice@login.cluster.example over ssh: results_root and mount sources are paths on the cluster's shared filesystem
# Note: Slurm chooses the GPUs: the job asks for 2 per node (--gpus-per-node), whichever ids the scheduler gives it
# Note: enroot pulls the image on the compute nodes with the registry credentials in ~/.config/enroot/.credentials there, not with anything from this machine
# Values are single-quoted so that a $ in them stays literal, as in the spec.
# shellcheck disable=SC2016
set -euo pipefail

# The record comes first: it mints the id the container is named after.
JOB_ID="${JOB_ID:-$(taospec record open --platform slurm --image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt --network-arch visual_changenet --action train --storage-tier A --results-root /lustre/tao/results --upload-exclude '*.tmp')}"
[[ $JOB_ID =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "JOB_ID=$JOB_ID: not a job id (letters, digits, '.', '_' and '-'); unset it to open a record" >&2; exit 2; }
export JOB_ID
# A step that fails before the launch ends the record ERROR, as run records it.
trap 'taospec record mark "$JOB_ID" --state ERROR --message "the script stopped (exit $?) before the job launched"' EXIT

# prepare: create the results directory, its stage and the job's HOME and caches
ssh -o BatchMode=yes \
    -o ConnectTimeout=30 \
    -o ServerAliveInterval=20 \
    -- alice@login.cluster.example \
    'install -d -m 0755 \
    /lustre/tao/results/'"$JOB_ID"' /lustre/tao/results/'"$JOB_ID"'/stage \
    /lustre/tao/results/'"$JOB_ID"'/.tao-runtime /lustre/tao/results/'"$JOB_ID"'/.tao-runtime/home \
    /lustre/tao/results/'"$JOB_ID"'/.tao-runtime/home/.cache \
    /lustre/tao/results/'"$JOB_ID"'/.tao-runtime/home/.cache/huggingface \
    /lustre/tao/results/'"$JOB_ID"'/.tao-runtime/home/.cache/torch \
    /lustre/tao/results/'"$JOB_ID"'/.tao-runtime/home/.cache/triton \
    /lustre/tao/results/'"$JOB_ID"'/.tao-runtime/home/.cache/torchinductor \
    /lustre/tao/results/'"$JOB_ID"/.tao-runtime/home/.cache/matplotlib

# spec-file: write the experiment spec the job reads as /results/stage/spec.yaml
ssh -o BatchMode=yes \
    -o ConnectTimeout=30 \
    -o ServerAliveInterval=20 \
    -- alice@login.cluster.example \
    'install -m 0644 /dev/stdin /lustre/tao/results/'"$JOB_ID"/stage/spec.yaml <<'TAOSPEC_EOF'
dataset:
  segment:
    data_name: LEVIR-CD
    root_dir: /data
train:
  num_epochs: 10
  num_gpus: 2
  optim:
    lr: 0.0001
TAOSPEC_EOF

# script: write the sbatch script below into the results directory
sed -e 's|[$]{JOB_ID}|'"$JOB_ID"'|g' <<'TAOSPEC_EOF' | ssh -o BatchMode=yes \
    -o ConnectTimeout=30 \
    -o ServerAliveInterval=20 \
    -- alice@login.cluster.example \
    'install -m 0644 /dev/stdin /lustre/tao/results/'"$JOB_ID"/taospec.sbatch
#!/bin/bash
#SBATCH --job-name=${JOB_ID}
#SBATCH --output=/lustre/tao/results/${JOB_ID}/taospec.log
#SBATCH --chdir=/lustre/tao/results/${JOB_ID}
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --partition=gpu
#SBATCH --account=tao-research
#SBATCH --time=04:00:00
#SBATCH --cpus-per-task=16
#SBATCH --gpus-per-node=2
#SBATCH --qos=normal
# taospec job ${JOB_ID}, container runtime: pyxis.
# Values are single-quoted so that a $ in them stays literal, as in the spec.
# shellcheck disable=SC2016
set -euo pipefail

# env.pass names arrive in a mode-600 file written at submit: read it, then delete it.
env_file=/lustre/tao/results/${JOB_ID}/.tao-runtime/secrets.env
set -a
# shellcheck source=/dev/null
. "$env_file"
set +a
shred -u -- "$env_file" 2>/dev/null || rm -f -- "$env_file"

# The job's HOME and caches live under its results; env.set as written in the spec.
export HOME=/results/.tao-runtime/home
export XDG_CACHE_HOME=/results/.tao-runtime/home/.cache
export HF_HOME=/results/.tao-runtime/home/.cache/huggingface
export TORCH_HOME=/results/.tao-runtime/home/.cache/torch
export TRITON_CACHE_DIR=/results/.tao-runtime/home/.cache/triton
export TORCHINDUCTOR_CACHE_DIR=/results/.tao-runtime/home/.cache/torchinductor
export MPLCONFIGDIR=/results/.tao-runtime/home/.cache/matplotlib
export WANDB_MODE=offline

exec srun --nodes=1 --ntasks-per-node=1 \
  --container-image='nvcr.io#nvidia/tao/tao-toolkit:6.0.0-pyt' \
  --container-mounts=/lustre/tao/results/${JOB_ID}:/results,/lustre/tao/datasets/levir-cd:/data:ro \
  visual_changenet train -e /results/stage/spec.yaml results_dir=/results
TAOSPEC_EOF

# check-script: check the script's syntax before anything is submitted
ssh -o BatchMode=yes \
    -o ConnectTimeout=30 \
    -o ServerAliveInterval=20 \
    -- alice@login.cluster.example 'bash -n /lustre/tao/results/'"$JOB_ID"/taospec.sbatch

# env-file: write HF_TOKEN from this environment to a mode-600 file the job reads and deletes (the values are never shown, stored or put on a command line)
printf '%s=%q\n' HF_TOKEN "$HF_TOKEN" | ssh -o BatchMode=yes \
    -o ConnectTimeout=30 \
    -o ServerAliveInterval=20 \
    -- alice@login.cluster.example \
    'install -m 0600 /dev/stdin /lustre/tao/results/'"$JOB_ID"/.tao-runtime/secrets.env

# launch: submit the script; Slurm names the job after the job id (an answer lost on the way back is recovered by that name, never by submitting again)
backend_ref=$(ssh -o BatchMode=yes \
    -o ConnectTimeout=30 \
    -o ServerAliveInterval=20 \
    -- alice@login.cluster.example \
    'sbatch --parsable /lustre/tao/results/'"$JOB_ID"/taospec.sbatch)

trap - EXIT
taospec record mark "$JOB_ID" --state RUNNING --backend-ref "$backend_ref"

# after the job ends, remove-env-file: delete the passed variables' file, in case the job ended before its script read it
# ssh -o BatchMode=yes \
#     -o ConnectTimeout=30 \
#     -o ServerAliveInterval=20 \
#     -- alice@login.cluster.example \
#     'rm -f -- /lustre/tao/results/'"$JOB_ID"/.tao-runtime/secrets.env
