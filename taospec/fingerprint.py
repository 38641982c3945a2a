"""What makes a target's result what it is, and whether the ledger already holds it.

A :class:`Fingerprint` covers everything that changes what runs: the plan
with the job id abstracted (command, spec file, mounts, environment names
and ``set`` values, image reference, platform options), the image's digest
where the engine already has it (``docker image inspect``; never a pull),
the content of each of the target's ``inputs``, and the fingerprints of the
targets it needs. YAML comments, key order and whitespace change none of
these, nor does how an input's path is spelled (``./data/``, ``data``). Not
covered: the content of mount sources and of files the command reads that
are not listed in ``inputs``, and images on remote engines.

The index under ``$TAO_STATE_DIR/taospec/`` maps fingerprints and targets to
job ids, so a check costs a few small file reads whatever the ledger's size.
It also notes each launched *work* (a fingerprint without the image): a
target whose work was never launched cannot be up to date on any image, so
it is decided without asking the engine, and the image's id is looked up
while its plan runs. A job is noted as soon as its record opens, before anything
launches, so that a run of the same work sees it while it is being launched.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from taospec import proc
from taospec.durable import flocked
from taospec.errors import InvalidInput
from taospec.job import Target, input_files
from taospec.ledger import Ledger, LedgerCorrupt, Record, UnknownJob, write_json_atomic
from taospec.plan import Plan
from taospec.platforms import docker
from taospec.states import COMPLETE

CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """The identity of one target's work.

    ``needs`` holds each needed target's fingerprint and the job whose results
    this one used.
    """

    plan: str
    image: str | None
    inputs: dict[str, str] = field(default_factory=dict)
    needs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """The fields as stored in the index."""
        return asdict(self)

    @property
    def digest(self) -> str:
        """SHA-256 over every component: the JSON of its fields, keys sorted."""
        parts = {"plan": self.plan, "image": self.image, "inputs": self.inputs, "needs": self.needs}
        return _sha256_json(parts)

    @property
    def work_digest(self) -> str:
        """SHA-256 over every component but the image: the same work on any image."""
        return _sha256_json({"plan": self.plan, "inputs": self.inputs, "needs": self.needs})

    def with_image(self, image: str | None) -> Fingerprint:
        """This work on ``image``."""
        return Fingerprint(self.plan, image, self.inputs, self.needs)

    def differences(self, other: Mapping[str, object]) -> list[str]:
        """Why ``other`` (a stored fingerprint) is not this one, most telling first."""
        return self._changes(other, image=True) or ["inputs changed"]

    def work_differences(self, other: Mapping[str, object]) -> list[str]:
        """Why ``other`` is not this fingerprint, the image left aside ([] when only the
        image can tell them apart)."""
        return self._changes(other, image=False)

    def _changes(self, other: Mapping[str, object], *, image: bool) -> list[str]:
        reasons = []
        old_needs = other.get("needs") if isinstance(other.get("needs"), dict) else {}
        assert isinstance(old_needs, dict)
        for name, digest in self.needs.items():
            if old_needs.get(name) != digest:
                reasons.append(f"upstream {name} changed")
        if other.get("plan") != self.plan and not reasons:
            reasons.append("plan changed")
        if image and other.get("image") != self.image:
            reasons.append("image changed")
        old_inputs = other.get("inputs") if isinstance(other.get("inputs"), dict) else {}
        assert isinstance(old_inputs, dict)
        for name, digest in self.inputs.items():
            if old_inputs.get(name) != digest:
                reasons.append(f"input {name} changed")
        if not (image or reasons or self._same_work(other)):
            reasons.append("inputs changed")
        return reasons

    def _same_work(self, other: Mapping[str, object]) -> bool:
        return (other.get("plan"), other.get("inputs"), other.get("needs")) == (
            self.plan,
            self.inputs,
            self.needs,
        )


def _sha256_json(parts: Mapping[str, object]) -> str:
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def compute(target: Target, plan: Plan, needs: Mapping[str, str]) -> Fingerprint:
    """The fingerprint of ``target`` rendered as ``plan``, its image not yet known
    (:meth:`Fingerprint.with_image` adds it). An input that cannot be read is refused at
    its key (``("inputs", index)``). Each input is named by its path as written, without
    what names no other path (``./``, a doubled or a trailing ``/``): the name pairs an
    input with its digest from run to run. A ``..`` stays: behind a link it leads elsewhere,
    and two inputs must not share a name."""
    digests = {}
    for index, (text, path) in enumerate(zip(target.inputs, target.input_paths(), strict=True)):
        try:
            digests[_plain(text)] = hash_path(path)
        except InvalidInput as refused:
            raise InvalidInput(f"{text}: {refused}", key=("inputs", index)) from None
    return Fingerprint(plan=plan.digest(), image=None, inputs=digests, needs=dict(needs))


def _plain(path: str) -> str:
    """``path`` without ``.`` parts and empty ones (a doubled or a trailing ``/``)."""
    parts = [part for part in path.split("/") if part not in ("", ".")]
    return ("/" if path.startswith("/") else "") + "/".join(parts) or "."


def has_image_digest(plan: Plan) -> bool:
    """Whether the plan's engine gives its image an id that a fingerprint covers."""
    return plan.platform == "docker"


def image_digest(plan: Plan, asked: dict[str, str | None]) -> str | None:
    """The image's id on a local or DOCKER_HOST engine that already has it; else None.

    ``asked`` holds what the engines answered earlier in the same decision, by engine and
    image, so the targets of one pipeline that share an image ask for it once.
    """
    if not has_image_digest(plan):
        return None
    key = f"{_engine_env(plan)} {plan.record.image}"
    if key not in asked:
        asked[key] = look_up_image(plan).result()
    return asked[key]


class ImageLookup:
    """An image-id lookup that runs while other work goes on."""

    def __init__(self, started: proc.Started | None) -> None:
        self._started = started

    def result(self) -> str | None:
        """The image's id, or None when the engine lacks it (or the plan has no image id)."""
        if self._started is None:
            return None
        found = self._started.wait()
        image = found.stdout.strip()
        return image if found.ok and image else None


def look_up_image(plan: Plan) -> ImageLookup:
    """Ask the plan's engine for its image's id (``docker image inspect``); don't wait."""
    if not has_image_digest(plan):
        return ImageLookup(None)
    return ImageLookup(
        proc.start(
            ["docker", "image", "inspect", "--format", "{{.Id}}", plan.record.image],
            extra_env=_engine_env(plan),
        )
    )


def _engine_env(plan: Plan) -> tuple[tuple[str, str], ...]:
    """What points the docker CLI at the plan's engine."""
    return docker.engine_env(dict(plan.backend))


def hash_path(path: Path) -> str:
    """SHA-256 of a file's bytes, or of a folder's relative names and file contents (the
    files :func:`taospec.job.input_files` finds; what it refuses is refused here)."""
    files = input_files(path)
    first = next(files, None)
    if first is not None and not first[0]:  # the input is one file
        return _hash_file(first[1])
    digest = hashlib.sha256()
    for relative, member in itertools.chain([first] if first else [], files):
        digest.update(f"{relative}\0{_hash_file(member)}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


# -- the index ---------------------------------------------------------------


def target_key(target: Target) -> str:
    """A target's identity across runs: its file's absolute path and its name."""
    return f"{Path(target.job.file).resolve()}#{target.name}"


class Index:
    """Fingerprint -> job id and target -> last launch, beside the ledger."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.root = Path(ledger.root, "taospec")

    def _target_path(self, key: str) -> Path:
        named = hashlib.sha256(key.encode("utf-8", "surrogateescape"))  # a path's own bytes
        return self.root / "targets" / named.hexdigest()[:40]

    def _fingerprint_path(self, digest: str) -> Path:
        return self.root / "fingerprints" / digest

    def _work_path(self, digest: str) -> Path:
        return self.root / "works" / digest

    @staticmethod
    def _read(path: Path) -> dict[str, object]:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError):
            return {}
        return data if isinstance(data, dict) else {}

    def last_launch(self, key: str) -> dict[str, object]:
        """What the last launch of a target recorded ({} when it never ran)."""
        return self._read(self._target_path(key))

    def may_hold(self, work: Fingerprint) -> bool:
        """Whether a job of this work (on any image) was ever launched, so one may be COMPLETE.

        Only then is the image's id needed to decide; an index from before works
        were noted (fingerprints but no works folder) always says yes.
        """
        if self._work_path(work.work_digest).exists():
            return True
        return (self.root / "fingerprints").is_dir() and not (self.root / "works").is_dir()

    def complete_record(self, fingerprint: Fingerprint) -> Record | None:
        """The COMPLETE job with this fingerprint whose results still exist, if any: the
        newest launch of its work, when that one completed it (a detached run, a retry:
        no one who followed it noted its end, :meth:`completed`), else the job the
        fingerprint stands for."""
        return self.standing(fingerprint)[0]

    def standing(self, fingerprint: Fingerprint) -> tuple[Record | None, bool]:
        """:meth:`complete_record`, and whether a later job of the work may be under way
        (not recorded as ended). A later job found to have completed the fingerprint is
        noted as the one it stands for (:meth:`completed`), so it is looked up once."""
        newest = self._read(self._work_path(fingerprint.work_digest)).get("job_id")
        done = self._complete(fingerprint.digest, results_exist=True)
        if not isinstance(newest, str) or (done is not None and newest == done.id):
            return done, False
        try:
            record = self.ledger.get(newest)
        except (UnknownJob, LedgerCorrupt):
            return done, False  # a record damaged by hand: nothing is known of it
        if record.terminal_state is None:
            return done, True
        if record.state != COMPLETE or not Path(record.results_dir).is_dir():
            return done, False
        try:
            noted = self.ledger.sidecar(newest).get("fingerprint")
        except LedgerCorrupt:
            return done, False
        if noted != fingerprint.digest:
            return done, False
        self.completed(record.id, fingerprint)
        return record, False

    def results_missing(self, fingerprint: Fingerprint) -> bool:
        """True when the matching job completed but its results directory is gone."""
        return self._complete(fingerprint.digest, results_exist=False) is not None

    def _record(self, digest: str) -> Record | None:
        job_id = self._read(self._fingerprint_path(digest)).get("job_id")
        if not isinstance(job_id, str):
            return None
        try:
            return self.ledger.get(job_id)
        except (UnknownJob, LedgerCorrupt):
            return None  # a record damaged by hand holds no job known to be COMPLETE

    def _complete(self, digest: str, *, results_exist: bool) -> Record | None:
        """The COMPLETE job ``digest`` stands for, when whether its results directory exists
        is ``results_exist``."""
        record = self._record(digest)
        if record is None or record.state != COMPLETE:
            return None
        return record if Path(record.results_dir).is_dir() == results_exist else None

    def deciding(self, work: str) -> AbstractContextManager[None]:
        """One launch at a time of this work (the digest of a fingerprint but the image), from
        deciding that it runs to its record's open (``<state>/taospec/deciding/<work>.lock``,
        an exclusive flock; the engine's image id may be known only after the launch). The
        file is there only while the lock is held or waited for: one per work would pile up."""
        path = self.root / "deciding" / f"{work}.lock"
        return flocked(path, 0o600, parents=True, remove=True)

    def newest(self, work: str, digest: str | None) -> list[Record]:
        """The jobs opened last for this work (its digest) and for the fingerprint ``digest``
        (None while the image's id is not known): a job of this work whose fingerprint is not
        known yet (its image is being pulled) or is ``digest`` (or ``digest`` is not known)."""
        ids = [self._read(self._work_path(work)).get("job_id")]
        if digest is not None:
            ids.append(self._read(self._fingerprint_path(digest)).get("job_id"))
        found: list[Record] = []
        for job_id in dict.fromkeys(i for i in ids if isinstance(i, str)):
            try:
                record = self.ledger.get(job_id)
            except (UnknownJob, LedgerCorrupt):
                continue  # `ls` skips a damaged record too: nothing says it is under way
            try:
                noted = self.ledger.sidecar(job_id).get("fingerprint")
            except LedgerCorrupt:
                noted = None  # damaged: which fingerprint it ran is not known
            if digest is None or not isinstance(noted, str) or noted == digest:
                found.append(record)
        return found

    def work_of(self, job_id: str) -> str | None:
        """The work (digest) a launched job ran: its sidecar's note, or for a job launched
        before jobs noted it, that of a later job of its fingerprint (which holds its work):
        its target's last launch, or the job its fingerprint stands for. None: not known."""
        side = self.ledger.sidecar(job_id)
        work, key, digest = side.get("work"), side.get("target"), side.get("fingerprint")
        if isinstance(work, str) or not isinstance(digest, str):
            return work if isinstance(work, str) else None
        stored = self.last_launch(key).get("fingerprint") if isinstance(key, str) else None
        if isinstance(stored, dict) and Fingerprint(**stored).digest == digest:
            return Fingerprint(**stored).work_digest
        later = self._read(self._fingerprint_path(digest)).get("job_id")
        if not isinstance(later, str) or later == job_id:
            return None
        noted = self.ledger.sidecar(later)
        known = noted.get("work") if noted.get("fingerprint") == digest else None
        return known if isinstance(known, str) else None

    def opened(self, key: str, job_id: str, fingerprint: Fingerprint, *, image_known: bool) -> None:
        """Note a job as soon as its record is opened, before anything launches: a launch of
        the same work then sees it (:meth:`newest`). Without its image's id (not known
        yet), only its work is noted; :meth:`launched` notes the rest once the id is known."""
        if image_known:
            self.launched(key, job_id, fingerprint)
        else:
            write_json_atomic(self._work_path(fingerprint.work_digest), {"job_id": job_id})

    def launched(self, key: str, job_id: str, fingerprint: Fingerprint) -> None:
        """Remember a launch; a fingerprint keeps pointing at an earlier COMPLETE job."""
        write_json_atomic(self._work_path(fingerprint.work_digest), {"job_id": job_id})
        write_json_atomic(
            self._target_path(key),
            {"target": key, "job_id": job_id, "fingerprint": fingerprint.to_json()},
        )
        if self.complete_record(fingerprint) is None:
            write_json_atomic(self._fingerprint_path(fingerprint.digest), {"job_id": job_id})

    def retried(self, key: str, job_id: str, digest: str, work: str | None) -> None:
        """A retry of a launch whose fingerprint was ``digest`` and work ``work``: it is the
        work's newest job, stands for the fingerprint until a job completes it, and is the
        target's last launch when that one was too."""
        stored = self.last_launch(key).get("fingerprint")
        if isinstance(stored, dict) and Fingerprint(**stored).digest == digest:
            self.launched(key, job_id, Fingerprint(**stored))
            return
        if work is not None:
            write_json_atomic(self._work_path(work), {"job_id": job_id})
        if self._complete(digest, results_exist=True) is None:
            write_json_atomic(self._fingerprint_path(digest), {"job_id": job_id})

    def completed(self, job_id: str, fingerprint: Fingerprint) -> None:
        """The newest COMPLETE job is the one a fingerprint stands for from now on."""
        write_json_atomic(self._fingerprint_path(fingerprint.digest), {"job_id": job_id})
