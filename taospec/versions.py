"""Image pins: a job names a key of the nearest ``versions.yaml`` instead of an image URI."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from taospec.schema import image_name_too_long, is_image_ref
from taospec.yamlsrc import parse_shared, read_text

VERSIONS_FILE = "versions.yaml"


class Unpinned(LookupError):
    """There is no versions.yaml, or it has no such key: the image may be pinned elsewhere
    (a skill's own versions file). Any other :class:`LookupError` of a pin is a pin that
    names no image."""


VersionsReader = Callable[[], "tuple[str, str] | None"]
"""Finds the versions.yaml a job file uses: its (display name, text), or None when there is none."""


class Images:
    """The image each versions key names for one job file, each key looked up once.

    Checking a job and building it both need its image; one :class:`Images`
    per load finds and reads versions.yaml once for both (and once for every
    target of a pipeline), so they also see the same bytes.
    """

    def __init__(self, spec_file: Path, reader: VersionsReader | None = None) -> None:
        self.spec_file = spec_file
        self._found: dict[str, tuple[type[LookupError] | None, str]] = {}
        self._versions: tuple[Path | None] | None = None
        self._reader = reader

    @classmethod
    def with_versions_file(cls, spec_file: Path, versions_file: Path | None) -> Images:
        """Images for ``spec_file`` whose nearest versions.yaml was already found (or not)."""
        images = cls(spec_file)
        images._versions = (versions_file,)
        return images

    def resolve(self, key: str) -> str:
        """The image URI ``key`` names in this file (a failed lookup raises its error again)."""
        found = self._found.get(key)
        if found is None:
            try:
                found = (None, self._image(key))
            except LookupError as exc:
                found = (type(exc), str(exc))
            self._found[key] = found
        failed, text = found
        if failed is not None:
            raise failed(text)
        return text

    def _image(self, key: str) -> str:
        if self._reader is not None:
            versions = self._reader()
            if versions is None:
                raise Unpinned(_no_versions(key, self.spec_file))
            return image_in_text(versions[1], versions[0], key)
        if self._versions is None:
            self._versions = (find_versions_file(self.spec_file),)
        return image_in(self._versions[0], key, self.spec_file)


def job_files_beside(names: Iterable[str]) -> list[str]:
    """Of the names of the files in a versions.yaml's folder, those of the job files that
    resolve their images in it (``*.yaml``, ``*.yml``, not hidden), sorted."""
    return sorted(
        name
        for name in names
        if Path(name).suffix in (".yaml", ".yml")
        and Path(name).stem != "versions"
        and not name.startswith(".")
    )


def find_versions_file(start: Path) -> Path | None:
    """The nearest ``versions.yaml`` next to ``start`` or in a parent directory.

    The search ends at the top of the git work tree that holds ``start`` (the
    folder with ``.git``), where ``taospec diff`` ends it at a revision, so a
    file outside the repository never picks a committed job's images. A job
    file read from a pipe, a FIFO or a process substitution has no folder of
    its own: nothing is searched; ``--versions FILE`` names one.
    """
    real = Path(os.path.realpath(start))
    if not real.is_file():
        return None
    folder = real.parent
    for candidate in (folder, *folder.parents):
        found = candidate / VERSIONS_FILE
        if found.is_file():
            return found
        if os.path.lexists(candidate / ".git"):
            return None
    return None


def image_in(versions: Path | None, key: str, spec_file: Path) -> str:
    """The image URI that ``key`` names in ``versions``, the versions.yaml ``spec_file`` uses."""
    if versions is None:
        raise Unpinned(_no_versions(key, spec_file))
    return image_in_text(read_text(versions, str(versions)), str(versions), key)


def _no_versions(key: str, spec_file: Path) -> str:
    if not Path(spec_file).is_file():
        return (
            f"image key {key!r} needs a versions.yaml, and a job file read from a pipe has no "
            "directory to search for one: validate and render take --versions FILE, other "
            "verbs need the job file itself"
        )
    return (
        f"image key {key!r} needs a versions.yaml next to {spec_file} or in a parent "
        "directory, and there is none"
    )


def image_in_text(text: str, versions: str, key: str) -> str:
    """The image URI that ``key`` names in ``text``, the versions file shown as ``versions``."""
    node: Any = parse_shared(text, versions, f"a {VERSIONS_FILE}").data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise Unpinned(f"{versions} has no key {key!r}")
        node = node[part]
    if not isinstance(node, str) or not node:
        raise LookupError(f"{versions}: {key!r} is not an image reference")
    if too_long := image_name_too_long(node):
        raise LookupError(f"{versions}: {key!r} names an image the engine refuses: {too_long}")
    if not is_image_ref(node):
        raise LookupError(
            f"{versions}: {key!r} is {node!r}, not an image reference Docker accepts "
            "([registry[:port]/]repository[:tag][@digest], the repository in lowercase, the "
            "digest sha256:, sha384: or sha512: in lowercase hex)"
        )
    return node
