"""A follow shows a line redrawn in place (a progress bar) as it comes: nothing lost or
shown twice, and never a passed value in part."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taospec import lint, proc
from taospec.lint import redacted
from taospec.platforms.common import Redrawn, cut_at, in_parts, redrawn_at

VALUE = "Ab1\rCd3Ef56Gh"
"""A passed value holding a ``\\r``; its first line is too short to be looked for alone."""


@contextmanager
def passing() -> Iterator[None]:
    """:data:`VALUE` registered as a passed value, as the loader registers a job's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lint, "_registered", [])
        patch.setattr(lint, "_redactor", [])
        lint.register([VALUE])
        yield


@pytest.fixture
def passed() -> Iterator[None]:
    with passing():
        yield


def followed(text: str, cuts: list[int], *, redact: bool) -> str:
    """What a follow prints of ``text`` read in pieces cut at ``cuts``: each line as it
    ends and each part of one not ended through its last ``\\r`` (as :func:`proc.stream`
    hands them), each printed alone (redacted when ``redact``)."""
    printed: list[str] = []

    def show(piece: str) -> None:
        printed.append(redacted(piece) if redact else piece)

    shown = Redrawn(show, show, {False: True, True: True})
    line = shown.line(False)
    pending, parted = "", 0
    for start, end in zip([0, *cuts], [*cuts, len(text)]):
        pending += text[start:end]
        while "\n" in pending:
            ended, pending = pending.split("\n", 1)
            line(ended + "\n")
            parted = 0
        if (redrawn := pending.rfind("\r", parted) + 1) and end > start:
            shown.part(False, pending[parted:redrawn])
            parted = redrawn
    if pending:
        line(pending)
    return "".join(printed)


written = st.lists(st.sampled_from(["step 7", "\r", "\n", VALUE, "z" * 9, "é"]), max_size=30)


@given(written.map("".join), st.lists(st.integers(0, 400), max_size=12))
def test_a_follow_shows_every_character_once(text: str, cuts: list[int]) -> None:
    assert followed(text, sorted(c for c in cuts if c <= len(text)), redact=False) == text


@given(written.map("".join), st.lists(st.integers(0, 400), max_size=12))
def test_no_part_of_a_passed_value_goes_out(text: str, cuts: list[int]) -> None:
    with passing():
        shown = followed(text, sorted(c for c in cuts if c <= len(text)), redact=True)
    assert "Ab1" not in shown
    assert "Cd3" not in shown


def test_a_part_is_shown_through_the_last_carriage_return(passed: None) -> None:
    bar = "".join(f"step {i}\r" for i in range(20))
    text = bar + "step 2"
    at = redrawn_at(text)
    assert bar[:at].endswith("\r")
    assert len(text) // 2 < at <= len(text) - len(VALUE) + 1  # what may begin one is held


def test_a_part_never_ends_inside_a_value(passed: None) -> None:
    text = f"step 1\r{VALUE}\rstep 2 of many words that follow"
    assert redrawn_at(text) == len(f"step 1\r{VALUE}\r")
    begun = f"step 1\r{VALUE[:4]}"  # a value still being written, begun with a \r
    assert redrawn_at(begun) == 0


def test_the_streams_parts_come_as_they_are_written(tmp_path) -> None:
    # a line redrawn with \r came whole, once it ended: a progress bar showed nothing
    gate = tmp_path / "gate"
    script = (
        f"printf 'out 1\\rout 2\\r'; printf 'err 1\\r' >&2; "
        f"while [ ! -e {gate} ]; do sleep 0.05; done; printf 'out 3\\n'; printf 'e\\r' >&2"
    )
    lines: list[tuple[bool, str]] = []
    parts: list[tuple[bool, str]] = []

    def part(error: bool, text: str) -> None:
        parts.append((error, text))
        if len(parts) == 2:
            gate.touch()

    code = proc.stream(
        ["sh", "-c", script],
        on_line=lambda text: lines.append((False, text)),
        on_error_line=lambda text: lines.append((True, text)),
        on_part=part,
    )
    assert code == 0
    assert sorted(parts[:2]) == [(False, "out 1\rout 2\r"), (True, "err 1\r")]
    assert parts[2:] == [(True, "e\r")]
    assert sorted(lines) == [(False, "out 1\rout 2\rout 3\n"), (True, "err 1\re\r")]


SECRETS = ("s3cr3tValue99x", "dXNlcjpwYXNzd29yZA==", "hunter2hunter", "MIIEvQIBADANBgkqhkiG9w0B")
WORDS = (
    *SECRETS,
    *("--password", "-u", "-p", "-b", "PASSWORD", "Bearer", "Authorization:", "Basic"),
    *("token=", "api_key:", '{"password":', "curl", "htpasswd", "export", "user", "=", ":"),
    *("step", "42%|##", "v_num=0]", "[00:10<00:12,", "44.2it/s,", "Epoch"),
    *("'", '"', "{value:", "name:", "X_TOKEN}", '"a":1,', "Proxy-Authorization", "sshpass"),
    *("-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----", "user:", "mysql", "login"),
)


def lines_of(words: int) -> st.SearchStrategy[list[tuple[str, str]]]:
    """Lines of up to ``words`` of :data:`WORDS`, each with a blank, a ``\\r`` or none after."""
    blanks = st.sampled_from([" ", "\r", "\t", "", "\r\r"])
    return st.lists(st.tuples(st.sampled_from(WORDS), blanks), max_size=words)


@settings(max_examples=1000, deadline=None)
@given(lines_of(16))
def test_a_part_is_cut_where_redacting_it_apart_finds_the_same(
    words: list[tuple[str, str]],
) -> None:
    # a line cut at any \r and its parts redacted apart: "--password\rs3cr3t..." went out
    # with the value, which the line redacted whole hid
    text = "".join(word + blank for word, blank in words)
    whole = lint.redact(text, [])
    for at in (index + 1 for index, char in enumerate(text) if char == "\r"):
        if at <= lint.apart_before(text) and lint.apart_at(text, at):
            apart = lint.redact(text[:at], []) + lint.redact(text[at:], [])
            assert [s for s in SECRETS if s in apart] == [s for s in SECRETS if s in whole]


@pytest.mark.parametrize(
    "redraw",
    [
        "Epoch 0:  45%|████▌     | 450/1000 [00:10<00:12, 44.2it/s, v_num=0, train_loss=0.123]",
        "Validation DataLoader 0:  62%|██████▏   | 31/50 [00:01<00:00, 27.31it/s]",
        " 45%|####5     | 450/1000 [00:10<00:12, 44.21it/s]",
    ],
    ids=["lightning", "validation", "tqdm-ascii"],
)
def test_the_bars_tao_training_draws_are_shown_as_they_are_redrawn(redraw: str) -> None:
    line = f"{redraw}\r" * 8
    assert redrawn_at(line) >= len(line) // 2


@settings(max_examples=300, deadline=None)
@given(lines_of(40), st.integers(1, 60))
def test_a_long_line_is_redacted_in_parts_that_find_what_it_does(
    words: list[tuple[str, str]], size: int
) -> None:
    # logs of a bar redrawn for an hour redacted its line of megabytes at once: hundreds
    # of megabytes of memory for one line
    text = "".join(word + blank for word, blank in words)
    with passing():
        parts = in_parts(text, size)
        assert "".join(parts) == text
        assert all(len(part) >= size and part.endswith("\r") for part in parts[:-1])
        whole = lint.redacted(text)
        apart = "".join(map(lint.redacted, parts))
    assert [s for s in (*SECRETS, VALUE) if s in apart] == [
        s for s in (*SECRETS, VALUE) if s in whole
    ]


def test_a_bar_of_megabytes_is_cut_into_parts_of_64_kib() -> None:
    redraw = "Epoch 3:  42%|####2     | 252/600 [01:23<02:34, 44.21it/s, loss=0.123, v_num=0]\r"
    line = redraw * 20_000 + "done\n"
    parts = in_parts(line)
    assert "".join(parts) == line
    assert all(64 * 1024 <= len(part) < 64 * 1024 + len(redraw) for part in parts[:-1])
    assert len(parts[-1]) < 64 * 1024 + len(redraw)


def _cut_at_a_blank(lines: list[str]) -> list[tuple[str, int]]:
    """Each of ``lines`` with one of its blanks made, or followed by, a ``\\r``, and where
    that ``\\r`` ends."""
    cut = []
    for line in lines:
        for index in (i for i, char in enumerate(line) if char in " \t"):
            for variant in (line[:index] + "\r" + line[index + 1 :], line[: index + 1] + "\r"
                            + line[index + 1 :]):  # fmt: skip
                cut.append((variant, variant.index("\r", index) + 1))
    return cut


def test_the_lint_corpus_cut_where_a_part_may_end_is_redacted_as_it_is_whole() -> None:
    from tests.test_lint import FREE_TEXT, REDACTIONS

    lines = [line for text, _ in REDACTIONS + FREE_TEXT for line in text.split("\n")]
    apart = [
        (text, at)
        for text, at in _cut_at_a_blank(lines)
        if at <= lint.apart_before(text) and lint.apart_at(text, at)
    ]
    assert len(apart) > 50  # many cuts are safe, and each one checked
    for text, at in apart:
        whole = lint.redact(text, [])
        assert lint.redact(text[:at], []) + lint.redact(text[at:], []) == whole, text


@settings(max_examples=1000, deadline=None)
@given(lines_of(16))
def test_a_line_still_being_written_is_cut_where_no_value_runs_on(
    words: list[tuple[str, str]],
) -> None:
    # a look at a running job showed its unended line up to the last three words:
    # '{"password": "s3cr3tValue99x ' went out, where the line, once ended, hides the value
    text = "".join(word + blank for word, blank in words)
    whole = lint.redact(text, [])
    hidden = [s for s in SECRETS if s not in whole]
    for end in range(len(text) + 1):
        written = text[:end]
        shown = lint.redact(written[: cut_at(written)], [])
        assert [s for s in hidden if s in shown] == [], written
