"""Where the last lines of a log begin, found by reading back from its end, on real files."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taospec.platforms.common import output_lines, tail_start


def start_in(
    tmp_path: Path,
    data: bytes,
    lines: int,
    held: bool = False,
    block: int = 4,
    within: int | None = None,
) -> int:
    log = tmp_path / "taospec.log"
    log.write_bytes(data)
    with log.open("rb") as file:
        return tail_start(file, lines, held=held, within=within, block=block)


def expected(data: bytes, lines: int, held: bool, within: int | None = None) -> int:
    """The same start, from all of ``data`` split into its lines (of its last ``within``
    bytes, those after the first line end there)."""
    floor = 0 if within is None else max(len(data) - within, 0)
    if floor:
        after = data.find(b"\n", floor) + 1 or len(data)
        return after + expected(data[after:], lines, held)
    split = [line.encode("latin-1") for line in output_lines(data.decode("latin-1"))]
    if held and split and not split[-1].endswith(b"\n"):
        split = split[:-1]
    return sum(map(len, split[: max(len(split) - lines, 0)]))


@given(
    data=st.lists(st.sampled_from([b"a", b"\n", b"\r", "é".encode(), "🙂".encode()])).map(b"".join),
    lines=st.integers(0, 6),
    held=st.booleans(),
    block=st.integers(1, 9),
    within=st.none() | st.integers(1, 12),
)
def test_the_start_is_that_of_the_last_lines_of_the_whole(
    tmp_path_factory: pytest.TempPathFactory,
    data: bytes,
    lines: int,
    held: bool,
    block: int,
    within: int | None,
) -> None:
    folder = tmp_path_factory.mktemp("log")
    found = start_in(folder, data, lines, held, block, within)
    assert found == expected(data, lines, held, within)


def test_a_line_end_at_a_block_boundary_is_counted_once(tmp_path: Path) -> None:
    data = b"abc\ndef\nghi\n"
    assert start_in(tmp_path, data, 1, block=4) == 8
    assert start_in(tmp_path, data, 2, block=4) == 4
    assert start_in(tmp_path, data, 2, block=8) == 4


def test_a_character_split_between_blocks_is_read_whole(tmp_path: Path) -> None:
    data = "één\nünï\n".encode()  # blocks of 3 bytes end inside "é" and inside "ü"
    start = start_in(tmp_path, data, 1, block=3)
    assert data[start:].decode() == "ünï\n"


def test_a_last_line_without_its_end_is_a_line_unless_it_is_held(tmp_path: Path) -> None:
    data = b"one\ntwo\nthree"
    assert data[start_in(tmp_path, data, 1) :] == b"three"
    assert data[start_in(tmp_path, data, 1, held=True) :] == b"two\nthree"
    assert data[start_in(tmp_path, data, 0) :] == b""
    assert data[start_in(tmp_path, data, 0, held=True) :] == b"three"


def test_an_empty_log_and_more_lines_than_it_holds_start_at_its_start(tmp_path: Path) -> None:
    assert start_in(tmp_path, b"", 3) == 0
    assert start_in(tmp_path, b"", 3, held=True) == 0
    assert start_in(tmp_path, b"one\ntwo\n", 3) == 0
    assert start_in(tmp_path, b"one\ntwo", 5, held=True) == 0


def test_carriage_returns_do_not_end_a_line(tmp_path: Path) -> None:
    data = b"epoch 1\n 10%\r 50%\r100%\n"  # a progress bar's line
    assert data[start_in(tmp_path, data, 1) :] == b" 10%\r 50%\r100%\n"


def test_within_a_window_the_lines_are_those_known_whole(tmp_path: Path) -> None:
    data = b"x" * 40 + b"\nsecond\nthird\n"
    assert data[start_in(tmp_path, data, 5, within=20) :] == b"second\nthird\n"  # not "xx..."
    assert data[start_in(tmp_path, data, 1, within=20) :] == b"third\n"
    assert start_in(tmp_path, data, 5, within=len(data)) == 0  # all of it: its first line too
    assert start_in(tmp_path, b"x" * 40, 1, within=20) == 40  # no line begins inside it
    assert start_in(tmp_path, b"x" * 40 + b"\n", 1, within=20) == 41
