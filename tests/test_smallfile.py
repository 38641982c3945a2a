"""Small files are read whole, and a file over the limit is seen to be over it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from taospec import cache, yamlsrc
from taospec.diagnostics import SpecError
from taospec.smallfile import read_limited

LIMIT = 1000


def read(path: Path, limit: int = LIMIT) -> bytes:
    with path.open("rb") as handle:
        return read_limited(handle, limit)


@pytest.mark.parametrize("size", [0, 1, 345, LIMIT - 1, LIMIT, LIMIT + 1, LIMIT + 2, 50 * LIMIT])
def test_a_file_is_read_whole_up_to_one_byte_past_the_limit(tmp_path: Path, size: int) -> None:
    data = bytes(index % 251 for index in range(size))
    path = tmp_path / "file"
    path.write_bytes(data)
    assert read(path) == data[: LIMIT + 1]


def test_a_file_whose_size_says_nothing_is_read_on() -> None:
    proc = Path("/proc/self/cmdline")  # size 0, contents the command line
    assert proc.stat().st_size == 0
    whole = proc.read_bytes()
    assert len(whole) > 12
    assert read(proc, 10_000) == whole
    assert read(proc, 10) == whole[:11]


def test_a_pipe_without_a_size_is_read_to_its_end(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    data = b"version: 1\n" * 30

    def feed() -> None:
        with fifo.open("wb") as writer:
            writer.write(data)

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        assert read(fifo) == data[: LIMIT + 1]
    finally:
        feeder.join()


def test_the_loader_and_the_cache_see_one_mebibyte_as_the_largest_job_file(
    tmp_path: Path,
) -> None:
    most = tmp_path / "most.yaml"
    most.write_bytes(b"version: 1\n#" + b"x" * (yamlsrc.MAX_BYTES - 13) + b"\n")
    assert most.stat().st_size == yamlsrc.MAX_BYTES
    assert yamlsrc.read_text(most, "most.yaml").encode() == most.read_bytes()
    assert cache._read(str(most))[0] == most.read_bytes()
    over = tmp_path / "over.yaml"
    over.write_bytes(most.read_bytes() + b"\n")
    with pytest.raises(SpecError, match="is larger than 1 MiB"):
        yamlsrc.read_text(over, "over.yaml")
    assert cache._read(str(over))[0] is None
