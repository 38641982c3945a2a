"""Who a job runs as: the ``user:`` field resolved to numbers and a name."""

from __future__ import annotations

import os
import pwd
import re
from collections.abc import Iterator
from typing import NamedTuple

from taospec.errors import InvalidInput

ROOT_MESSAGE = (
    "{file}: {chosen} would run this writable launch as root (UID 0), leaving root-owned "
    "results the submitting user cannot clean up. Say who the job runs as: set "
    'user: "UID:GID" in the spec (a non-root account, e.g. "1000:1000") or pass --user UID:GID'
)


USER_IDS = re.compile(r"([0-9]+):([0-9]+)")
MAX_ID = 2**32 - 2
"""The largest UID or GID Linux gives an account (2**32 - 1 means "no id")."""
DOCKER_MAX_ID = 2**31 - 1
"""The largest UID or GID ``docker run --user`` takes: the engine refuses a larger one at
the launch ("uids and gids must be in range 0-2147483647"), once the record is open."""


class Identity(NamedTuple):
    """A UID:GID, its supplementary groups, and a name for USER/LOGNAME."""

    uid: int
    gid: int
    groups: tuple[int, ...]
    name: str

    @property
    def spec(self) -> str:
        """``UID:GID`` as docker's ``--user`` takes it."""
        return f"{self.uid}:{self.gid}"


def id_refusals(user: str, platform: str, said: str) -> Iterator[str]:
    """Why a job of ``platform`` cannot run as the ``UID:GID`` ``user``, each sentence
    beginning with ``said``, which names where it is given: ids no account has, and ids
    docker's engine refuses."""
    ids = USER_IDS.fullmatch(user)
    largest = max(int(ids[1]), int(ids[2])) if ids else 0
    if largest > MAX_ID:
        yield (
            f"{said} holds an id past {MAX_ID:,}, the largest UID or GID an account can have; "
            "write the account's UID:GID (id -u; id -g)"
        )
    elif largest > DOCKER_MAX_ID and platform in ("docker", "brev"):
        yield (
            f"{said} holds an id past {DOCKER_MAX_ID:,}, the largest UID or GID docker run "
            f"takes (the engine refuses it: uids and gids must be in range 0-{DOCKER_MAX_ID}); "
            "write an account whose UID and GID are in that range"
        )


def parse_user(text: str) -> Identity:
    """An explicit ``UID:GID``; its name is ``u<UID>`` so plans do not depend on /etc/passwd."""
    ids = USER_IDS.fullmatch(text)
    if ids is None:
        raise InvalidInput(f"--user {text!r}: expected UID:GID, e.g. 1000:1000", key=("user",))
    uid = int(ids[1])
    return Identity(uid, int(ids[2]), (), f"u{uid}")


def launcher() -> Identity:
    """The submitting process's own UID:GID, supplementary groups and login name."""
    uid, gid = os.getuid(), os.getgid()
    groups = tuple(sorted(g for g in set(os.getgroups()) if g != gid))
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = f"u{uid}"
    return Identity(uid, gid, groups, name)


WRITABLE_LAUNCHES = ("docker", "brev")
"""The platforms whose launch never runs as root (:func:`refuse_root`)."""


def resolve(
    user: str, override: str | None, submitter: Identity, *, platform: str, file: str
) -> Identity:
    """The identity for a job of ``platform`` (of ``file``) whose spec says ``user``
    (``--user``, ``override``, wins, judged as the spec's ``user:`` is, at that key)."""
    if override:
        who = parse_user(override)
        if platform == "slurm":
            raise InvalidInput(
                f"--user {override}: a Slurm job runs as the account that submits it (the "
                "user in slurm.login, or you); leave --user out",
                key=("user",),
            )
        for why in id_refusals(override, platform, f"--user {override}"):
            raise InvalidInput(why, key=("user",))
        if platform in WRITABLE_LAUNCHES:
            refuse_root(who, file, from_host=False)
        return who
    if user == "host":
        return submitter
    return parse_user(user)


def refuse_root(identity: Identity, file: str, *, from_host: bool) -> None:
    """Writable container launches never run as root: not as the root who launches
    (``user: host``, ``from_host``), nor as a ``--user`` given on the command line."""
    if identity.uid == 0:
        chosen = "user: host" if from_host else f"--user {identity.spec}"
        raise InvalidInput(ROOT_MESSAGE.format(file=file, chosen=chosen), key=("user",))
