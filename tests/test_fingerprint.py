"""A fingerprint's digest is the SHA-256 of all its fields, however it is worked out."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taospec.errors import InvalidInput
from taospec.fingerprint import Fingerprint, hash_path

TEXT = st.text(max_size=8)


@given(
    plan=TEXT,
    image=st.none() | TEXT,
    inputs=st.dictionaries(TEXT, TEXT, max_size=3),
    needs=st.dictionaries(TEXT, TEXT, max_size=3),
)
def test_the_digest_covers_every_field(
    plan: str, image: str | None, inputs: dict[str, str], needs: dict[str, str]
) -> None:
    found = Fingerprint(plan, image, inputs, needs)
    stored = found.to_json()
    assert stored == {"plan": plan, "image": image, "inputs": inputs, "needs": needs}
    text = json.dumps(stored, sort_keys=True, separators=(",", ":"))
    assert found.digest == hashlib.sha256(text.encode()).hexdigest()
    assert found == Fingerprint(**stored) == Fingerprint(plan, image, dict(inputs), dict(needs))


def test_an_input_folder_is_read_through_its_links_and_a_loop_ends(tmp_path: Path) -> None:
    # a linked sub-folder was not read: editing a file in it left the target up to date
    data = tmp_path / "data"
    data.mkdir()
    (data / "f").write_text("v1\n")
    folder = tmp_path / "input"
    folder.mkdir()
    (folder / "sub").symlink_to(data)
    (folder / "loop").symlink_to(folder)  # read once, not forever
    before = hash_path(folder)
    (data / "f").write_text("v2\n")
    assert hash_path(folder) != before


def test_what_an_input_folder_holds_that_is_no_file_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "input"
    folder.mkdir()
    os.mkfifo(folder / "pipe")  # reading it would wait for a writer forever
    with pytest.raises(InvalidInput, match="pipe is neither a file nor a folder"):
        hash_path(folder)
