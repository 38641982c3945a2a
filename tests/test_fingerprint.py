"""A fingerprint's digest is the SHA-256 of all its fields, however it is worked out."""

from __future__ import annotations

import hashlib
import json

from hypothesis import given
from hypothesis import strategies as st

from taospec.fingerprint import Fingerprint

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
