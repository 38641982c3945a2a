"""How a job id is minted, as NVIDIA's TAO recorder mints it: ``<arch>-<action>-<6 hex>``.

Apart from the ledger, so that ``render`` can refuse an id that would spell a secret without
loading the ledger.
"""

from __future__ import annotations

import os
import re

_MINT_PART_LENGTH = 64
"""Most characters of arch or action in a minted id, so its file name stays far below
the 255 bytes a file name may have (the recorder does not cut them)."""
_SUFFIX_BYTES = 3


def minted_form(text: str) -> str:
    """``text`` as a minted id holds it, uncut: unsafe runs become ``-``; it starts
    alphanumeric. A secret's value spelled so is what to look for in an id."""
    return re.sub(r"^[^A-Za-z0-9]+", "", re.sub(r"[^A-Za-z0-9._-]+", "-", text))


def _id_part(text: str) -> str:
    """One part of a minted id: :func:`minted_form` cut to :data:`_MINT_PART_LENGTH`."""
    return minted_form(text)[:_MINT_PART_LENGTH].strip(".-") or "job"


def mint_id(network_arch: str, action: str) -> str:
    """A new id ``<arch>-<action>-<6 hex>`` (case kept, as the recorder mints it)."""
    return f"{_id_part(network_arch)}-{_id_part(action)}-{mint_suffix()}"


def id_like(network_arch: object, action: object) -> str:
    """An id as long as every one :func:`mint_id` makes for ``network_arch`` and ``action``
    (a part not known yet counted at its longest), for judging a text the id fills."""
    parts = [
        _id_part(p) if isinstance(p, str) else "x" * _MINT_PART_LENGTH
        for p in (network_arch, action)
    ]
    return "-".join([*parts, "00" * _SUFFIX_BYTES])


def mint_source(network_arch: str, action: str) -> str:
    """What the ids :func:`mint_id` makes of ``network_arch`` and ``action`` are cut from:
    ``<arch>-<action>``, each as an id holds it but whole. A cut through a secret value
    leaves a part of it that redaction no longer finds, so redaction judges this."""
    return f"{minted_form(network_arch)}-{minted_form(action)}"


def mint_suffix() -> str:
    """Six random hex digits."""
    return os.urandom(_SUFFIX_BYTES).hex()
