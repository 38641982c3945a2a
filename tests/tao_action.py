"""A TAO action, started as TAO's PyTorch entrypoint and its ``hydra_runner`` start one.

Usage:
    tao_action.py train -e SPEC_FILE [WORD...]

The entrypoint part reads the action and ``-e`` with argparse (its own ``-h`` included),
joins every other word with spaces and splits the line again with ``shlex.split``, after
``--config-path`` and ``--config-name`` for the spec file. The runner part reads those
words with Hydra's own argument parser, appends the three settings TAO's runner appends
(``hydra.output_subdir=null``, ``hydra/job_logging=stdout``, ``hydra.run.dir=.``) and
hands them to Hydra's run. The action prints one line, ``RAN`` and a JSON object: the
spec as resolved, Hydra's settings for the run (the overrides listed aside) and the
working folder. Anything else (help, a printed config, an error) is Hydra's or argparse's.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from typing import Any

from hydra._internal.utils import _run_hydra, get_args_parser
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

TAO_APPENDS = ["hydra.output_subdir=null", "hydra/job_logging=stdout", "hydra.run.dir=."]


def action(spec: DictConfig) -> None:
    settings: Any = OmegaConf.to_container(HydraConfig.get())
    settings.pop("overrides")
    settings["job"].pop("override_dirname")
    ran = {"spec": OmegaConf.to_container(spec, resolve=True), "hydra": settings}
    print("RAN", json.dumps({**ran, "cwd": os.getcwd()}, sort_keys=True, default=str))


def main(words: list[str]) -> None:
    entry = argparse.ArgumentParser("tiny_net", add_help=True)
    entry.add_argument("subtask", choices=["train"])
    entry.add_argument("-e", "--experiment_spec_file", default=None)
    known, unknown = entry.parse_known_args(words)
    if known.experiment_spec_file is None:
        sys.exit("the action needs -e")
    folder, name = os.path.split(known.experiment_spec_file)
    line = f"--config-path {os.path.realpath(folder)} --config-name {name} {' '.join(unknown)}"
    hydra_words = shlex.split(line)

    parser = get_args_parser()
    args = parser.parse_args(hydra_words)
    args.overrides += TAO_APPENDS
    sys.argv = [sys.argv[0], *hydra_words]
    _run_hydra(
        args=args,
        args_parser=parser,
        task_function=action,
        config_path=None,
        config_name=None,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
