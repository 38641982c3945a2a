"""What the ledger tests share: the image they record and a quick way to open a job."""

from __future__ import annotations

from taospec.ledger import Ledger, Record

IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt"


def open_job(ledger: Ledger, **overrides: object) -> Record:
    """Open a docker training job, with ``overrides`` for any of open's arguments."""
    fields: dict[str, object] = {
        "platform": "docker",
        "image": IMAGE,
        "network_arch": "visual_changenet",
        "action": "train",
        "storage_tier": "A",
        "results_root": "/results",
    }
    fields.update(overrides)
    return ledger.open(**fields)  # type: ignore[arg-type]
