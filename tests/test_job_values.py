"""Loaded jobs and job files behave as the frozen values they were as dataclasses."""

from __future__ import annotations

import pytest

from taospec import cache, codec
from taospec.jobfile import load_jobfile
from taospec.spec import DockerOptions, Mount, SlurmOptions
from tests.conftest import ROOT

PIPELINE = ROOT / "jobs" / "tao-workflow.yaml"


def test_loaded_twice_is_equal_field_by_field_and_reads_back_from_pickle_data() -> None:
    first, second = load_jobfile(PIPELINE), load_jobfile(PIPELINE)
    assert first == second
    assert first is not second
    for value in (first, *first.targets.values()):  # as the cache stores and reads them
        assert codec.same(cache._undump_value(cache._dump_value(value)), value)
    job = next(iter(first.targets.values())).job
    assert repr(job).startswith(f"Job(file='{PIPELINE}', name=")
    assert repr(job).endswith(
        ", slurm=SlurmOptions(login=None, partition=None, account=None, "
        "time=None, cpus_per_task=None, container='pyxis', extra_sbatch=()))"
    )


def test_values_are_frozen_and_copied_with_replace() -> None:
    mount = Mount("/data", "/in")
    assert mount == Mount("/data", "/in", False)
    assert hash(mount) == hash(Mount("/data", "/in", False))
    assert mount.replace(readonly=True) == Mount("/data", "/in", readonly=True)
    assert mount.readonly is False
    with pytest.raises(AttributeError):
        mount.source = "/elsewhere"  # type: ignore[misc]
    assert DockerOptions() == DockerOptions(None, "8g", "host", ())
    assert SlurmOptions(container="enroot") != SlurmOptions()
    job = load_jobfile(ROOT / "jobs" / "train.yaml").targets["train"].job
    with pytest.raises(AttributeError):
        job.image = "other"  # type: ignore[misc]
    assert job.replace(nodes=2).nodes == 2
    assert job.replace(nodes=2) != job
