"""How ``docker run`` reads the values of its typed options, for ``docker.extra_args``.

The docker CLI parses each option's value before it asks the engine for anything: a whole
number as Go's ``strconv.ParseInt(value, 0, 64)`` reads it (``0x10``, ``010`` in octal,
``1_000``), a switch as ``strconv.ParseBool``, a duration as ``time.ParseDuration``, a size
as go-units' ``RAMInBytes`` (``64m``, ``1.5GiB``, ``64 m``, ``1e3m``) and ``--cpus`` as a
``big.Rat`` (``1.5``, ``1/2``). A value it cannot read ends ``docker run`` with exit 125, and
so does one the engine refuses whatever the machine: a working folder that is not absolute,
a memory limit under 6 MiB, an OOM score past +-1000, a health check interval under 1 ms.
:func:`misread` says why for each such value, so that ``validate`` refuses it at its item
instead of the job ending ERROR once its record is open. What depends on the machine (more
CPUs than it has, a kernel without a cgroup controller) is left to the launch.
"""

from __future__ import annotations

import csv
import ipaddress
import re
from collections.abc import Callable
from fractions import Fraction

from taospec.diagnostics import closest

Reader = Callable[[str], "str | None"]
"""Why docker refuses a value of one option, or None when it takes it."""

INT64_END = 2**63
"""Docker keeps each number, and a size's count of bytes, in a signed 64-bit integer."""

_GO_INT = re.compile(
    r"[+-]?(?:0[xX](?:_?[0-9a-fA-F])+|0[bB](?:_?[01])+|0[oO](?:_?[0-7])+|0(?:_?[0-7])*"
    r"|[1-9](?:_?[0-9])*)"
)
_DIGITS = r"[0-9](?:_?[0-9])*"
_GO_FLOAT = re.compile(rf"[+-]?(?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})(?:[eE][+-]?[0-9]+)?")
_GO_HEX_FLOAT = re.compile(
    r"[+-]?0[xX](?:[0-9a-fA-F]+(?:\.[0-9a-fA-F]*)?|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+"
)
_RAT_FLOAT = re.compile(
    rf"(?P<mantissa>[+-]?(?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS}))"
    r"(?:(?P<base>[eEpP])(?P<exponent>[+-]?[0-9]{1,5}))?"
)
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_NANOSECONDS = {"ns": 1, "us": 10**3, "\u00b5s": 10**3, "\u03bcs": 10**3, "ms": 10**6,
                "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}  # fmt: skip
_SIZE_UNITS = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4, "p": 1024**5}
_GO_BOOLS = frozenset({"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false",
                       "False"})  # fmt: skip
MIN_MEMORY = 6 * 1024**2
"""The engine refuses a memory limit or reservation under 6 MiB (other than 0, no limit)."""


def go_int(text: str, *, signed: bool = True, bits: int | None = 64) -> int | None:
    """The whole number Go's ``strconv.ParseInt(text, 0, bits)`` reads (``ParseUint`` when
    not ``signed``; ``math/big``'s base-0 reading when ``bits`` is None), or None."""
    if not _GO_INT.fullmatch(text) or (not signed and text[0] in "+-"):
        return None
    digits = text.replace("_", "").lstrip("+-")
    octal = len(digits) > 1 and digits[0] == "0" and digits[1].isdigit()
    value = int(digits, 8 if octal else 0) * (-1 if text[0] == "-" else 1)
    if bits is None:
        return value
    low, end = (-(2 ** (bits - 1)), 2 ** (bits - 1)) if signed else (0, 2**bits)
    return value if low <= value < end else None


def go_float(text: str) -> float | None:
    """The finite number Go's ``strconv.ParseFloat(text, 64)`` reads, or None."""
    if _GO_FLOAT.fullmatch(text):
        value = float(text.replace("_", ""))
    elif _GO_HEX_FLOAT.fullmatch(text):
        value = float.fromhex(text)
    else:
        return None  # inf and nan are numbers to Go too, but no size or count
    return value if abs(value) != float("inf") else None


def size_bytes(text: str, end: float = INT64_END) -> int | None:
    """The bytes go-units' ``RAMInBytes`` reads in ``text`` (a number, an optional blank,
    then ``b`` or a unit of 1024 ``k``..``p`` with an optional ``b`` or ``ib``), or None,
    also when the count reaches ``end`` (docker's signed 64-bit count by default)."""
    cut = max(text.rfind(c) for c in "0123456789. ")
    if cut < 0:
        return None
    number, unit = text[: cut + (text[cut] != " ")], text[cut + 1 :].lower()
    size = go_float(number)
    if size is None or size < 0 or len(unit) > 3:
        return None
    if unit[:1] == "b" and unit != "b":
        return None
    if unit and unit != "b":
        if unit[0] not in _SIZE_UNITS or unit[1:] not in ("", "b", "ib"):
            return None
        size *= _SIZE_UNITS[unit[0]]
    return int(size) if size < end else None


def duration_ns(text: str) -> Fraction | None:
    """The nanoseconds Go's ``time.ParseDuration`` reads in ``text`` (``1h30m``, ``1.5s``,
    ``0``), or None."""
    rest = text[1:] if text[:1] in ("+", "-") else text
    if rest == "0":
        return Fraction(0)
    if not rest:
        return None
    total, at = Fraction(0), 0
    while at < len(rest):
        part = _DURATION_PART.match(rest, at)
        if part is None or part[1].strip(".") == "":
            return None
        total, at = total + Fraction(part[1]) * _NANOSECONDS[part[2]], part.end()
    if total >= INT64_END:
        return None
    return -total if text[0] == "-" else total


def rational(text: str) -> Fraction | None:
    """The number Go's ``big.Rat.SetString`` reads in ``text``: a fraction of whole numbers
    (``1/2``), a decimal with an ``e`` (or binary ``p``) exponent, a whole number with a base
    prefix (``0x10``) or a hex float (``0x1p-1``); None otherwise (a binary or octal
    mantissa with a point, which docker would read too)."""
    if "/" in text:
        above, _, below = text.partition("/")
        numerator, denominator = go_int(above, bits=None), go_int(below, signed=False, bits=None)
        if numerator is None or not denominator:
            return None
        return Fraction(numerator, denominator)
    if text.lstrip("+-")[:2].lower() in ("0x", "0b", "0o"):
        whole = go_int(text, bits=None)
        if whole is None and _GO_HEX_FLOAT.fullmatch(text):
            return Fraction(float.fromhex(text))
        return None if whole is None else Fraction(whole)
    found = _RAT_FLOAT.fullmatch(text)
    if found is None:
        return None
    value = Fraction(found["mantissa"].replace("_", ""))
    if found["base"]:
        base = 2 if found["base"] in "pP" else 10
        value *= Fraction(base) ** int(found["exponent"])
    return value


def _whole(low: int | None = None, high: int | None = None, *, unsigned: int = 0) -> Reader:
    """A whole number of 64 bits (of ``unsigned`` bits, none negative), from ``low`` to
    ``high`` where the engine or the CLI bounds it."""

    def read(value: str) -> str | None:
        number = go_int(value, signed=not unsigned, bits=unsigned or 64)
        if number is None and unsigned:
            return f"it takes a whole number from 0 to {2**unsigned - 1}"
        if number is None:
            return "it takes a whole number (64 bits), such as 100, -1 or 0x10"
        if (low is not None and number < low) or (high is not None and number > high):
            return f"it takes {low} to {high}" if high is not None else f"it takes {low} or more"
        return None

    return read


def _swappiness(value: str) -> str | None:
    number = go_int(value)
    if number is None or (number != -1 and not 0 <= number <= 100):
        return "it takes 0 to 100 (or -1 for the engine's default)"
    return None


SWITCH_VALUES = "a switch takes =true or =false (1, t, T, TRUE, True and their false forms)"


def _switch(value: str) -> str | None:
    return SWITCH_VALUES if value and value not in _GO_BOOLS else None


def _memory(least: int) -> Reader:
    def read(value: str) -> str | None:
        size = size_bytes(value)
        if size is None:
            return "it takes a size such as 512m or 16g (b, k, m, g, t, p; kb or kib alike)"
        if 0 < size < least:
            return f"the engine allows no less than {least // 1024**2}m (0 for no limit)"
        return None

    return read


def _swap(value: str) -> str | None:
    return None if value == "-1" else _memory(0)(value)


def _duration(value: str) -> str | None:
    span = duration_ns(value)
    if span is None:
        return "it takes a duration with its unit, such as 30s, 1m30s or 500ms"
    if span < 0 or 0 < span < 10**6:
        return "the engine takes 0 or at least 1ms, never less"
    return None


def _cpus(value: str) -> str | None:
    cpus = rational(value)
    if cpus is None:
        return "it takes a number of CPUs such as 1.5 or 1/2"
    nano = cpus * 10**9
    if nano.denominator != 1:
        return "it counts in billionths of a CPU, no finer"
    if cpus < 0 or 0 < cpus < Fraction(1, 100) or nano >= INT64_END:
        return "it takes 0 (no limit) or from 0.01 up to the CPUs of the host"
    return None


def _volume(value: str) -> str | None:
    """``-v``: ``[SOURCE:]TARGET[:OPTIONS]``, no part empty, the target absolute (a value of
    one part is the target of a new volume, which docker reads as it likes), each option one
    the engine knows and of a kind given once (:data:`_VOLUME_MODES`)."""
    parts = value.split(":")
    if not value or (len(value) > 2 and "" in parts):
        return "it takes [SOURCE:]TARGET[:OPTIONS], no part of it empty"
    if len(parts) > 3:
        return "it takes SOURCE:TARGET:OPTIONS, three parts at most (options are split by ',')"
    if len(parts) > 1 and not parts[1].startswith("/"):
        return f"the target {parts[1]!r} inside the container is not an absolute path"
    modes = parts[2].split(",") if len(parts) == 3 else []
    kinds = [_VOLUME_MODES.get(mode) for mode in modes]
    if None in kinds or len(set(kinds)) < len(kinds):
        return (
            f"the options {parts[2]!r} are not each one the engine knows, each of its kind once: "
            "ro or rw, z or Z, a propagation (shared, slave, private, each r-), nocopy"
        )
    if "nocopy" in modes and parts[0].startswith("/"):
        return "nocopy is for a named volume; a folder of the host is mounted as it is"
    return None


_VOLUME_MODES = {
    **dict.fromkeys(("rw", "ro"), "access"),
    **dict.fromkeys(("z", "Z"), "label"),
    **dict.fromkeys(("shared", "rshared", "slave", "rslave", "private", "rprivate"), "propagation"),
    "nocopy": "copy",
    **dict.fromkeys(("consistent", "cached", "delegated"), "consistency"),
}
"""The options of a ``-v`` value the engine knows, by kind (case counts: ``RO`` is none).
Whether the host's mount takes a propagation is the host's to say."""


def _device_mode(mode: str) -> bool:
    return bool(mode) and len(set(mode)) == len(mode) and set(mode) <= set("rwm")


def _device(value: str) -> str | None:
    """``--device``: ``HOST[:CONTAINER][:MODE]``, both paths absolute, the mode of r, w and m
    each once; a CDI name (``nvidia.com/gpu=all``) is the engine's to resolve."""
    if "=" in value.partition(":")[0]:
        return None
    parts = value.split(":")
    if len(parts) > 3:
        return "it takes HOST[:CONTAINER][:MODE]"
    container, mode = (parts[1], parts[2]) if len(parts) == 3 else (parts[0], "rwm")
    if len(parts) == 2:
        container, mode = (parts[0], parts[1]) if _device_mode(parts[1]) else (parts[1], mode)
    for path in (parts[0], container):
        if not path.startswith("/"):
            return f"{path!r} is not an absolute path"
    return None if _device_mode(mode) else f"the mode {mode!r} takes r, w and m, each once"


def _throttle(rate: Reader) -> Reader:
    """``--device-read-bps`` and the like: ``/dev/...:RATE``."""

    def read(value: str) -> str | None:
        path, colon, given = value.partition(":")
        if not colon or not path.startswith("/dev/"):
            return "it takes /dev/DEVICE:RATE, e.g. /dev/sda:10mb"
        return rate(given)

    return read


def _bytes_rate(rate: str) -> str | None:
    return None if size_bytes(rate) is not None else "the rate is a size such as 10mb or 1g"


def _io_rate(rate: str) -> str | None:
    whole = re.fullmatch("[0-9]+", rate) is not None and int(rate) < 2**64
    return None if whole else "the rate is a whole number"


_CGROUP_RULE = re.compile(r"[acb] ([0-9]+|\*):([0-9]+|\*) [rwm]{1,3}")


def _cgroup_rule(value: str) -> str | None:
    if _CGROUP_RULE.fullmatch(value):
        return None
    return "it takes TYPE MAJOR:MINOR ACCESS, e.g. 'c 1:3 mr' (a, b or c; * for any number)"


_KERNEL_NUMBER = r"(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)"
"""A number as the kernel reads one in base 0: ``0x`` hexadecimal, a leading 0 octal."""
_MEMPARSE = rf"{_KERNEL_NUMBER}?[kKmMgGtTpPeE]?"
_U32_END = 2**32 - 1
"""The kernel reads a mode, UID and GID in 32 bits, and (uid_t)-1 is no ID."""


def _kernel_value(pattern: str, takes: str, base: int | None = None) -> Reader:
    """A tmpfs option's value the kernel reads when it matches ``pattern``; with a ``base``
    (0: as its prefix says), also below :data:`_U32_END`. Why not: it ``takes`` another.
    The pattern is compiled when a tmpfs first needs it, not by every command's import."""

    def read(value: str) -> str | None:
        if not value or not re.fullmatch(pattern, value):
            return f"it takes {takes}"
        if base is not None and _kernel_int(value.lstrip("+"), base) >= _U32_END:
            return f"it takes {takes} (of 32 bits)"
        return None

    return read


def _kernel_int(digits: str, base: int) -> int:
    """``digits`` in ``base``; in base 0, ``0x`` says hexadecimal and a leading 0 octal."""
    if base == 0 and digits[:2] in ("0x", "0X"):
        return int(digits[2:], 16)
    if base == 0:
        base = 8 if digits[:1] == "0" else 10
    return int(digits, base)


_TMPFS_VALUES = {
    "size": _kernel_value(rf"{_MEMPARSE}%?", "a size such as 512m, 1g or 50% (of memory)"),
    "nr_blocks": _kernel_value(_MEMPARSE, "a count such as 1000 or 10k"),
    "nr_inodes": _kernel_value(_MEMPARSE, "a count such as 1000 or 10k"),
    "mode": _kernel_value(r"\+?[0-7]+", "an octal mode such as 1777", 8),
    "uid": _kernel_value(rf"\+?{_KERNEL_NUMBER}", "a numeric UID such as 1000", 0),
    "gid": _kernel_value(rf"\+?{_KERNEL_NUMBER}", "a numeric GID such as 1000", 0),
}
"""The options of a tmpfs whose value the kernel reads, the same on every machine: one it
cannot read fails the container's start (runc's "invalid argument"). An option docker itself
does not pass on (``huge=``, ``noswap``) is left to the launch: each docker knows its own."""


def _tmpfs(value: str) -> str | None:
    target, _, options = value.partition(":")
    if not target.startswith("/"):
        return "the target inside the container is an absolute path, e.g. /scratch:size=1g"
    for option in options.split(",") if options else ():
        key, equals, given = option.partition("=")
        read = _TMPFS_VALUES.get(key) if equals else None
        why = read(given) if read else None
        if why:
            return f"the kernel reads no {key} {given!r}: {why}"
    return None


def _env(value: str) -> str | None:
    if not value.partition("=")[0]:
        return "it takes NAME=VALUE (or NAME, passing this machine's value), the name not empty"
    return None


def _extra_host(value: str) -> str | None:
    """``--add-host``: ``HOST:IP`` or ``HOST=IP``, the IP an address (``[...]`` allowed) or
    ``host-gateway``."""
    host, equals, address = value.partition("=")
    if not equals:
        host, _, address = value.partition(":")
    if not host or ":" in host or not (equals or ":" in value):
        return "it takes HOST:IP or HOST=IP, e.g. registry:10.0.0.5"
    if address == "host-gateway":
        return None
    if len(address) > 2 and address[0] == "[" and address[-1] == "]":
        address = address[1:-1]
    try:
        ipaddress.ip_address(address.strip())
    except ValueError:
        return f"{address!r} is no IP address (nor host-gateway)"
    return None if "%" not in address else f"{address!r}: an address with a zone is refused"


def _address(version: int | None = None) -> Reader:
    """An IP address, of ``version`` 4 or 6 where it is given."""

    def read(value: str) -> str | None:
        try:
            address = ipaddress.ip_address(value)
        except ValueError:
            return f"{value!r} is no IP address"
        if version is not None and address.version != version:
            return f"it takes an IPv{version} address"
        return None

    return read


_SYSCTLS = frozenset({"kernel.msgmax", "kernel.msgmnb", "kernel.msgmni", "kernel.sem",
                      "kernel.shmall", "kernel.shmmax", "kernel.shmmni",
                      "kernel.shm_rmid_forced"})  # fmt: skip
"""The kernel settings a container may set with ``--sysctl`` besides ``net.*`` and
``fs.mqueue.*``: those with a namespace of the container's own."""


def _sysctl(value: str) -> str | None:
    name, equals, _ = value.partition("=")
    if not equals or not name:
        return "it takes NAME=VALUE, e.g. net.core.somaxconn=1024"
    if name in _SYSCTLS or name.startswith(("net.", "fs.mqueue.")):
        return None
    return f"{name} is no setting a container has of its own (net.*, fs.mqueue.*, kernel.shm*, ...)"


_PORT_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")


def _publish(value: str) -> str | None:
    """``-p``: ``[[IP:][HOST_PORT]:]CONTAINER_PORT[/PROTOCOL]``; the container port (or
    range) is what docker reads first and refuses when it is none."""
    spec, _, protocol = value.partition("/")
    if protocol and protocol.lower() not in ("tcp", "udp", "sctp"):
        return f"{protocol!r} is no protocol it knows (tcp, udp, sctp)"
    rest, _, container = spec.rpartition(":")
    if why := _ports(container):
        return f"the container port is {why}"
    host = "" if rest.endswith("]") else rest.rpartition(":")[2]  # [::1]:80: an address alone
    if host and (why := _ports(host)):
        return f"the host port is {why}"
    return None


def _ports(text: str) -> str | None:
    """Why ``text`` is no port or range of ports (``80``, ``8000-8010``), as docker reads one."""
    ports = _PORT_RANGE.fullmatch(text)
    if ports is None or not all(int(p) < 65536 for p in filter(None, ports.groups())):
        return "a number up to 65535 (or a range, 8000-8010)"
    if ports[2] is not None and int(ports[2]) < int(ports[1]):
        return "a range from the lower port to the higher"
    return None


def _expose(value: str) -> str | None:
    """``--expose``: a port or a range of the container's, with a protocol docker does not read."""
    why = _ports(value.partition("/")[0])
    return f"it takes {why}" if why else None


_MOUNT_KEYS = frozenset({"type", "source", "src", "target", "dst", "destination", "readonly",
                         "ro", "consistency", "bind-propagation", "bind-nonrecursive",
                         "bind-recursive", "volume-subpath", "volume-nocopy", "volume-label",
                         "volume-driver", "volume-opt", "image-subpath", "tmpfs-size",
                         "tmpfs-mode"})  # fmt: skip
_OCTAL = re.compile(r"[0-7]+")
_MOUNT_SWITCHES = frozenset({"readonly", "ro", "volume-nocopy", "bind-nonrecursive"})
_MOUNT_CHOICES = {
    "type": ("bind", "volume", "tmpfs", "npipe", "cluster", "image"),
    "bind-recursive": ("enabled", "disabled", "writable", "readonly"),
    "bind-propagation": ("private", "rprivate", "shared", "rshared", "slave", "rslave"),
}


def mount_fields(value: str) -> dict[str, str] | str:
    """The keys (in lower case, as docker reads them: ``DST=`` is ``dst=``) and values of a
    ``--mount`` value, read as CSV as docker reads it, or why docker refuses one."""
    try:
        fields = next(csv.reader([value]), [])
    except csv.Error:
        fields = []
    if not fields:
        return "it takes key=value fields, e.g. type=bind,source=/data,target=/data"
    given: dict[str, str] = {}
    for field in fields:
        key, equals, setting = field.partition("=")
        key = key.lower()
        if key not in _MOUNT_KEYS:
            return f"it knows no key {key!r}"
        if not equals and key not in _MOUNT_SWITCHES:
            return f"{field!r} is no key=value pair"
        if key in _MOUNT_SWITCHES and equals and setting not in _GO_BOOLS:
            return f"{key} takes true or false, not {setting!r}"
        if setting and key in _MOUNT_CHOICES and setting.lower() not in _MOUNT_CHOICES[key]:
            return f"{key} is one of {', '.join(_MOUNT_CHOICES[key])}, not {setting!r}"
        given[key] = setting
    return given


def _mount(value: str) -> str | None:
    """``--mount``: comma-separated ``key=value`` fields (CSV, so a field may be quoted) of
    the keys docker run 28 knows, a switch key bare or with a bool, and a target."""
    given = mount_fields(value)
    if isinstance(given, str):
        return given
    kind = given.get("type", "volume").lower()
    for prefix in ("bind", "volume", "tmpfs", "image"):
        if kind != prefix and any(key.startswith(f"{prefix}-") for key in given):
            return f"{prefix}-* keys are for type={prefix}, not type={kind}"
    if "tmpfs-size" in given and size_bytes(given["tmpfs-size"]) is None:
        return f"tmpfs-size {given['tmpfs-size']!r} is no size such as 512m or 1g"
    mode = given.get("tmpfs-mode", "0")
    if not _OCTAL.fullmatch(mode) or int(mode, 8) >= 2**32:
        return f"tmpfs-mode {given['tmpfs-mode']!r} is no octal mode such as 1777"
    target = given.get("target") or given.get("dst") or given.get("destination")
    if not target:
        return "it needs a target inside the container (target=/data)"
    if kind in ("bind", "volume", "tmpfs") and not target.startswith("/"):
        return f"the target {target!r} inside the container is not an absolute path"
    return None


SECURITY_KEYS = ("label", "apparmor", "seccomp", "no-new-privileges", "writable-cgroups")
"""The keys of ``--security-opt`` the engine knows (``writable-cgroups`` since engine 29)."""
_SECURITY_SWITCHES = ("no-new-privileges", "writable-cgroups")


def security_opt(value: str) -> tuple[str, str] | None:
    """The key and value of a ``--security-opt`` (``KEY=VALUE``, or ``KEY:VALUE`` as docker
    once wrote it), as the CLI and the engine split it; None for one without a value."""
    key, equals, setting = value.partition("=")
    if not equals:
        key, _, setting = value.partition(":")
    return (key, setting) if setting else None


def _security_opt(value: str) -> str | None:
    """``--security-opt``: ``no-new-privileges`` alone, ``systempaths=unconfined`` (which
    the CLI reads itself), or a key the engine knows with a value, a bool for a switch.
    What depends on the host (a label under SELinux, an AppArmor profile, a seccomp
    profile's file) is left to it."""
    if value in ("no-new-privileges", "systempaths=unconfined"):
        return None
    pair = security_opt(value)
    if pair is None:
        return "it is KEY=VALUE (e.g. seccomp=unconfined), or no-new-privileges alone"
    key, setting = pair
    if key not in SECURITY_KEYS:
        known = ", ".join(SECURITY_KEYS)
        return f"the engine knows no key {key!r} ({known}; or systempaths=unconfined)"
    if key in _SECURITY_SWITCHES and setting not in _GO_BOOLS:
        return f"{key} takes true or false, not {setting!r}"
    return None


LINUX_CAPABILITIES = (
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID",
    "SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST",
    "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO",
    "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
    "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE",
    "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM",
    "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
)  # fmt: skip
"""The Linux capabilities, by number (``capabilities(7)``), without ``CAP_``."""


def _capability(value: str) -> str | None:
    """``--cap-add``/``--cap-drop``: ``ALL`` or a Linux capability, in any case, with or
    without ``CAP_``, as the engine reads it. Whether this kernel and engine have it (20.10
    lacks ``BPF``) is left to the host."""
    name = value.upper()
    if name == "ALL" or name.removeprefix("CAP_") in LINUX_CAPABILITIES:
        return None
    guess = closest(name.removeprefix("CAP_"), list(LINUX_CAPABILITIES))
    return f"no Linux capability is named {value!r}" + (
        f" (did you mean {guess}?)" if guess else ""
    )


def _modes(*modes: str, joins: bool = False, fold: bool = False) -> Reader:
    """A namespace or policy option: one of ``modes`` (or nothing, the engine's default), or
    where it ``joins`` another container's, ``container:NAME``; ``fold``: in any case."""
    named = ", ".join(modes) + (", container:NAME" if joins else "")

    def read(value: str) -> str | None:
        if not value or (value.lower() if fold else value) in modes:
            return None
        if joins and value.startswith("container:") and value != "container:":
            return None  # whether that container exists is the engine's to say
        return f"it takes {named} (or nothing, for the engine's default)"

    return read


_DOMAIN_LABEL = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_DOMAIN = re.compile(rf"{_DOMAIN_LABEL}(?:\.{_DOMAIN_LABEL})*\.?")


def _dns_search(value: str) -> str | None:
    if value == "." or (_DOMAIN.fullmatch(value) and len(value) <= 255):
        return None
    return f"{value!r} is no domain name (letters, digits and '-', parts joined by '.')"


def _cfs_period(value: str) -> str | None:
    period = go_int(value)
    if period is None or not (period == 0 or 1000 <= period <= 1_000_000):
        return "the engine takes 1000 to 1000000 microseconds (1ms to 1s), or 0 for its default"
    return None


def _cfs_quota(value: str) -> str | None:
    quota = go_int(value)
    if quota is None or 0 < quota < 1000:
        return "the engine takes 1000 microseconds (1ms) or more, or 0 or -1 for no limit"
    return None


_CPU_LIST = re.compile(r"(?:[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*)?")


def _cpu_list(value: str) -> str | None:
    """``--cpuset-cpus`` and ``--cpuset-mems``: ``0-3,5``, each range from low to high; which
    CPUs and memory nodes a host has is the host's to say."""
    ranges = [part.partition("-") for part in value.split(",")] if value else []
    if _CPU_LIST.fullmatch(value) and all(not dash or int(a) <= int(b) for a, dash, b in ranges):
        return None
    return "it takes a list such as 0-3,5 (each range from the lower number to the higher)"


_SIGNALS = frozenset(
    {"ABRT", "ALRM", "BUS", "CHLD", "CLD", "CONT", "FPE", "HUP", "ILL", "INT", "IO", "IOT",
     "KILL", "PIPE", "POLL", "PROF", "PWR", "QUIT", "SEGV", "STKFLT", "STOP", "SYS", "TERM",
     "TRAP", "TSTP", "TTIN", "TTOU", "URG", "USR1", "USR2", "VTALRM", "WINCH", "XCPU", "XFSZ",
     "RTMIN", "RTMAX", *(f"RTMIN+{n}" for n in range(1, 16)), *(f"RTMAX-{n}" for n in range(1, 15))}
)  # fmt: skip
"""The Linux signal names the engine reads (with or without SIG, in any case)."""


def _stop_signal(value: str) -> str | None:
    if re.fullmatch(r"[+-]?[0-9]+", value):
        return "signal 0 is no signal" if int(value) == 0 else None
    if not value or value.upper().removeprefix("SIG") in _SIGNALS:
        return None
    return f"{value!r} is no signal the engine knows (TERM, SIGINT, USR1, RTMIN+3, or a number)"


HOST_NAME_MAX = 64
"""The longest host name Linux sets (sethostname refuses a longer one when the container starts)."""


def _hostname(value: str) -> str | None:
    if len(value.encode()) > HOST_NAME_MAX:
        return f"Linux takes a host name of at most {HOST_NAME_MAX} bytes"
    return None


def _workdir(value: str) -> str | None:
    if value and not value.startswith("/"):
        return "the working folder inside the container is an absolute path, e.g. /workspace"
    return None


READERS: dict[str, Reader] = {
    **dict.fromkeys(("--cpu-count", "--cpu-percent", "--cpu-rt-period", "--cpu-rt-runtime",
                     "--pids-limit", "--stop-timeout"), _whole()),
    "--health-retries": _whole(0),
    "--oom-score-adj": _whole(-1000, 1000),
    "--blkio-weight": _whole(unsigned=16),
    "--io-maxiops": _whole(unsigned=64),
    "--memory-swappiness": _swappiness,
    **dict.fromkeys(("--detach", "-d", "--init", "--interactive", "-i", "--no-healthcheck",
                     "--oom-kill-disable", "--privileged", "--publish-all", "-P", "--quiet",
                     "-q", "--read-only", "--sig-proxy", "--tty", "-t", "--use-api-socket",
                     "--rm", "--help", "--disable-content-trust"),
                    _switch),
    **dict.fromkeys(("--memory", "-m", "--memory-reservation"), _memory(MIN_MEMORY)),
    **dict.fromkeys(("--kernel-memory", "--io-maxbandwidth"), _memory(0)),
    "--memory-swap": _swap,
    **dict.fromkeys(("--health-interval", "--health-timeout", "--health-start-period",
                     "--health-start-interval"), _duration),
    "--cpus": _cpus,
    **dict.fromkeys(("--workdir", "-w"), _workdir),
    **dict.fromkeys(("--volume", "-v"), _volume),
    "--tmpfs": _tmpfs,
    **dict.fromkeys(("--env", "-e"), _env),
    "--add-host": _extra_host,
    "--ip": _address(4),
    "--ip6": _address(6),
    "--sysctl": _sysctl,
    **dict.fromkeys(("--publish", "-p"), _publish),
    "--mount": _mount,
    "--security-opt": _security_opt,
    **dict.fromkeys(("--cap-add", "--cap-drop"), _capability),
    "--expose": _expose,
    "--pull": _modes("always", "missing", "never"),
    **dict.fromkeys(("--userns", "--uts"), _modes("host")),
    "--cgroupns": _modes("host", "private"),
    "--pid": _modes("host", joins=True),
    "--ipc": _modes("none", "private", "shareable", "host", joins=True),
    "--isolation": _modes("default", fold=True),
    **dict.fromkeys(("--dns", "--link-local-ip"), _address()),
    "--dns-search": _dns_search,
    "--cpu-period": _cfs_period,
    "--cpu-quota": _cfs_quota,
    **dict.fromkeys(("--cpu-shares", "-c"), _whole(0)),
    **dict.fromkeys(("--cpuset-cpus", "--cpuset-mems"), _cpu_list),
    "--stop-signal": _stop_signal,
    **dict.fromkeys(("--hostname", "-h"), _hostname),
    "--device": _device,
    **dict.fromkeys(("--device-read-bps", "--device-write-bps"), _throttle(_bytes_rate)),
    **dict.fromkeys(("--device-read-iops", "--device-write-iops"), _throttle(_io_rate)),
    "--device-cgroup-rule": _cgroup_rule,
}  # fmt: skip
"""What each typed ``docker run`` option takes, read as the docker CLI and engine read it."""

SWITCHES = frozenset(flag for flag, read in READERS.items() if read is _switch)
"""The options that take no value, or one joined with ``=`` (``--init=false``)."""

VALUED = frozenset(
    {"--add-host", "--annotation", "--attach", "--blkio-weight-device", "--cap-add",
     "--cap-drop", "--cgroup-parent", "--cgroupns", "--cidfile", "--cpuset-cpus",
     "--cpuset-mems", "--detach-keys", "--device", "--device-cgroup-rule", "--device-read-bps",
     "--device-read-iops", "--device-write-bps", "--device-write-iops", "--dns", "--dns-opt",
     "--dns-option", "--dns-search", "--domainname", "--entrypoint", "--env", "--env-file",
     "--expose", "--gpus", "--group-add", "--health-cmd", "--hostname", "--ip", "--ip6",
     "--ipc", "--isolation", "--label", "--label-file", "--link", "--link-local-ip",
     "--log-driver", "--log-opt", "--mac-address", "--mount", "--name", "--net", "--net-alias",
     "--network", "--network-alias", "--pid", "--platform", "--publish", "--pull", "--restart",
     "--runtime", "--security-opt", "--shm-size", "--stop-signal", "--storage-opt", "--sysctl",
     "--tmpfs", "--ulimit", "--user", "--userns", "--uts", "--volume", "--volume-driver",
     "--volumes-from",
     *(flag for flag in READERS if flag not in SWITCHES and flag.startswith("--"))}
)  # fmt: skip
"""The long options of ``docker run`` that take a value, from the next word when it is not
joined to them with ``=``."""


UNKNOWN = "docker run knows no such option"
SHORT = frozenset("acdehilmpPqtuvw")
"""The letters of ``docker run``'s one-letter options."""


def misread(flag: str, value: str) -> str | None:
    """Why ``docker run`` refuses ``flag`` with ``value`` whatever the machine: an option it
    does not know, or a value it cannot read or its engine refuses; None when it takes them.
    The options known are those of docker run 28: one a later docker adds is refused."""
    read = READERS.get(flag)
    if read is not None:
        why = read(value)
        return f"docker run refuses it: {why}" if why else None
    if known(flag):
        return None
    # the names are compared without their dashes, which every long option shares
    names = {option[2:]: option for option in VALUED | SWITCHES if option.startswith("--")}
    guess = closest(flag[2:], sorted(names)) if flag.startswith("--") else None
    return UNKNOWN + (f" (did you mean {names[guess]!r}?)" if guess else "")


def known(flag: str) -> bool:
    """Whether ``docker run`` (28) has the option ``flag``."""
    return flag in VALUED or flag in SWITCHES or (len(flag) == 2 and flag[1] in SHORT)


def shown(flag: str, value: str) -> str:
    """``flag`` and its ``value`` as a problem names them: ``--init=yes``, ``--memory 1x``."""
    if flag in SWITCHES:
        return f"{flag}={value}" if value else flag
    return f"{flag} {value}" if value and (flag in VALUED or flag in READERS) else flag
