"""Who a job runs as: the ``user:`` field resolved to numbers and a name."""

from __future__ import annotations

import os
import pwd
from typing import NamedTuple

from taospec.errors import InvalidInput

ROOT_MESSAGE = (
    "{file}: {chosen} would run this writable launch as root (UID 0), leaving root-owned "
    "results the submitting user cannot clean up. Say who the job runs as: set "
    'user: "UID:GID" in the spec (a non-root account, e.g. "1000:1000") or pass --user UID:GID'
)


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


def parse_user(text: str) -> Identity:
    """An explicit ``UID:GID``; its name is ``u<UID>`` so plans do not depend on /etc/passwd."""
    uid_text, _, gid_text = text.partition(":")
    if not (uid_text.isdigit() and gid_text.isdigit()):
        raise InvalidInput(f"--user {text!r}: expected UID:GID, e.g. 1000:1000")
    uid = int(uid_text)
    return Identity(uid, int(gid_text), (), f"u{uid}")


def launcher() -> Identity:
    """The submitting process's own UID:GID, supplementary groups and login name."""
    uid, gid = os.getuid(), os.getgid()
    groups = tuple(sorted(g for g in set(os.getgroups()) if g != gid))
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = f"u{uid}"
    return Identity(uid, gid, groups, name)


def resolve(user: str, override: str | None, submitter: Identity) -> Identity:
    """The identity for a job whose spec says ``user`` (``--user`` wins)."""
    if override:
        return parse_user(override)
    if user == "host":
        return submitter
    return parse_user(user)


def refuse_root(identity: Identity, file: str, *, from_host: bool) -> None:
    """Writable container launches never run as root: not as the root who launches
    (``user: host``, ``from_host``), nor as a ``--user`` given on the command line."""
    if identity.uid == 0:
        chosen = "user: host" if from_host else f"--user {identity.spec}"
        raise InvalidInput(ROOT_MESSAGE.format(file=file, chosen=chosen), key=("user",))
