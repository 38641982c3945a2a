"""Platforms: where a job runs. Each module renders steps and implements the verbs."""

from __future__ import annotations

import importlib
from types import ModuleType

PLATFORMS = ("docker", "brev", "slurm", "local")


def platform_module(name: str) -> ModuleType:
    """The module for platform ``name`` (imported on first use)."""
    if name not in PLATFORMS:
        raise ValueError(f"unknown platform {name!r}")
    return importlib.import_module(f"taospec.platforms.{name}")
