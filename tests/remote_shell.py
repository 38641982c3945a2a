"""Helpers for tests of commands that run on another machine (a Brev instance, an ssh host).

:func:`remote_calls` runs a remote script in a real shell with ``docker``,
``install``, ``printenv`` and ``test`` replaced by functions that record their
arguments, so a test can compare what would run there with the argument
lists taospec meant.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from hypothesis import strategies as st

from tests import test_quoting


def docker(*args: str) -> subprocess.CompletedProcess[str]:
    """The real docker CLI, output captured."""
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=False)


def containers(job_id: str) -> list[str]:
    """Every container, running or not, labelled with this job id."""
    return docker("ps", "-aq", "--filter", f"label=tao-job={job_id}").stdout.split()


SHIMS = r"""
rec() { printf '%s\0' "$#" "$@" >>"$TAOSPEC_REC"; }
stdin() { rec stdin "$(cat; printf x)"; }
docker() {
  rec docker "$@"
  case "$1 $2" in "container inspect"|"image inspect") return 1;; esac
  if [ "$1" = login ]; then stdin; fi
  return 0
}
install() { rec install "$@"; for a in "$@"; do [ "$a" != /dev/stdin ] || stdin; done; }
printenv() { rec printenv "$@"; return 1; }
test() { rec test "$@"; return 1; }
"""


def remote_calls(text: str, shell: str = "bash", **env: str) -> list[list[str]]:
    """The commands a remote script runs, as argument lists, with docker & co. stubbed."""
    with tempfile.NamedTemporaryFile(prefix="taospec-rec-") as rec:
        subprocess.run(
            [shell, "-c", SHIMS + text],
            env={"PATH": os.environ["PATH"], "TAOSPEC_REC": rec.name, **env},
            capture_output=True,
            check=True,
        )
        fields = Path(rec.name).read_bytes().decode().split("\0")[:-1]
    calls = []
    while fields:
        count = int(fields.pop(0))
        calls.append(fields[:count])
        del fields[:count]
    for call in calls:
        if call[0] == "stdin":
            call[1] = call[1][:-1]
    return calls


def absolute(exclude: str = ":{}") -> st.SearchStrategy[str]:
    """A hostile absolute path (not /, which validate refuses as a results_root)."""
    return test_quoting.absolute(exclude)
