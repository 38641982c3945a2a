"""A job rendered into the exact, ordered steps that will run.

The :class:`Plan` is the executor's only input and the reviewer's only view:
the text a person reads (:mod:`taospec.plantext`) is produced from the same
steps the executor runs. A plan is rendered once with a placeholder id for
review; at submit the record's id replaces the placeholder and nothing else
changes (:meth:`Plan.with_job_id`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

from taospec import lint, placeholders, templates
from taospec.diagnostics import shown_file
from taospec.errors import InvalidInput
from taospec.identity import Identity
from taospec.job import SPEC_FILE, Job, Mount
from taospec.placeholders import JOB_ID, STAND_IN, stand_in

GPU_IDS = "GPU_IDS"
"""The stand-in for the GPU ids ``gpus: {free: N}`` picks at submit."""


def gpu_ids_note(count: int) -> str:
    """What a plan that picks its GPUs at submit says about them."""
    which = f"the {count} GPU ids are" if count > 1 else "the GPU id is"
    return (
        f"gpus: {which} chosen at submit (shown as $GPU_IDS until then): the free GPUs using "
        "the least memory (nvidia-smi on the host that runs the job), none a running job holds"
    )


def upstream_stand_ins(needs: Iterable[str]) -> dict[str, str]:
    """Stand-ins for the results directories of the targets ``needs``, which will run first:
    ``$UPSTREAM_<TARGET>``, numbered where two targets would read alike (``a/b`` and ``a b``)."""
    found: dict[str, str] = {}
    for need in needs:
        base = "UPSTREAM_" + re.sub(r"[^A-Za-z0-9]+", "_", need).strip("_").upper()
        name, count = base, 1
        while stand_in(name) in found.values():
            count += 1
            name = f"{base}_{count}"
        found[need] = stand_in(name)
    return found


RUNTIME_HOME = ".tao-runtime/home"
CACHE_DIRS = (
    ("XDG_CACHE_HOME", ""),
    ("HF_HOME", "huggingface"),
    ("TORCH_HOME", "torch"),
    ("TRITON_CACHE_DIR", "triton"),
    ("TORCHINDUCTOR_CACHE_DIR", "torchinductor"),
    ("MPLCONFIGDIR", "matplotlib"),
)
LOG_FILE = "taospec.log"
FAILED = "TAOSPEC_FAILED="
"""Starts an output line in which a step says why it failed (remote steps have no exit code)."""


@dataclass(frozen=True, slots=True)
class Step:
    """One command of a plan.

    ``env`` holds non-secret variables set for this command; ``pass_env``
    names variables copied from the launcher's environment (their values are
    never part of a plan); with ``clean_env`` the command sees nothing else.
    ``unless`` skips the step when that command succeeds. ``stdin_text`` is
    literal input; ``stdin_env`` names a launcher variable fed to stdin (how
    secrets reach ``--password-stdin``); ``stdin_env_file`` names launcher
    variables fed to stdin as ``NAME='value'`` lines, an env file a job
    sources (their values never enter the plan). ``log_path`` marks a detached
    process whose output goes to that file. ``expect`` is a line the output
    must contain for the step to count as done (brev does not return remote
    exit codes); ``attempts`` bounds how often it is tried. ``already_done`` is
    what the command's error output says when its aim already holds (``brev delete``
    of an instance someone else deleted): the step then counts as done (a step has
    ``expect`` or ``already_done``, not both).
    """

    name: str
    argv: tuple[str, ...]
    why: str
    _: KW_ONLY
    env: tuple[tuple[str, str], ...] = ()
    pass_env: tuple[str, ...] = ()
    clean_env: bool = False
    unless: tuple[str, ...] = ()
    stdin_text: str | None = None
    stdin_env: str | None = None
    stdin_env_file: tuple[str, ...] = ()
    log_path: str | None = None
    cwd: str | None = None
    expect: str | None = None
    attempts: int = 1
    already_done: str | None = None

    def word_lists(self) -> tuple[tuple[str, ...], ...]:
        """What the step hands to processes, for the lint: its command, its ``unless``
        command and its environment, each read apart (a command's last word takes no
        value from the environment after it)."""
        return (self.argv, self.unless, tuple(f"{k}={v}" for k, v in self.env))


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordFields:
    """What the job record is opened with."""

    platform: str
    image: str
    network_arch: str
    action: str
    storage_tier: str
    results_dir: str
    upload_excludes: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """The ordered steps of one job, with what its record needs.

    ``backend`` holds platform facts the other verbs need later (docker host,
    brev instance); ``env_source: instance`` says the passed variables are read
    on a remote machine, so the launcher's environment need not hold them.
    ``secrets`` names launcher variables whose values must never be written
    anywhere. ``teardown`` steps run once after the job has ended, however it
    ended (e.g. delete an instance). ``reactions`` say how ``taospec run``
    reacts when the job ends (``notify:``, ``retry:``); they are shown with the
    notes but are not what runs, so they stay out of :meth:`digest`, as do what
    they show: ``notifier``, the argument list that runs on this machine when the
    job ends (its ``notify:``, else ``$TAOSPEC_NOTIFY``), and ``retry_max``, the
    retries (``retry: {max}``) its chain may be given for an ``ERR_INFRA`` end.
    ``file`` is the job file as the command line named it (``s.yaml``, ``./s.yaml``),
    which is not what runs either.
    """

    file: str
    target: str
    platform: str
    job_id: str
    record: RecordFields
    steps: tuple[Step, ...]
    notes: tuple[str, ...] = ()
    backend: tuple[tuple[str, str], ...] = ()
    secrets: tuple[str, ...] = ()
    teardown: tuple[Step, ...] = ()
    reactions: tuple[str, ...] = ()
    notifier: tuple[str, ...] = ()
    retry_max: int = 0

    @property
    def has_placeholder_id(self) -> bool:
        """True while the plan still shows the placeholder instead of a real id."""
        return self.job_id == JOB_ID

    def with_job_id(self, job_id: str) -> Plan:
        """The same plan with the placeholder replaced by ``job_id`` everywhere."""
        return _substitute(self, lambda text: text.replace(JOB_ID, job_id))

    def with_value(self, name: str, value: str) -> Plan:
        """The same plan with the stand-in ``$name`` replaced by ``value`` everywhere."""
        return _substitute(self, lambda text: text.replace(stand_in(name), value))

    def with_placeholder_id(self) -> Plan:
        """The same plan with its job id replaced by the placeholder, to compare with a new one."""
        if self.has_placeholder_id:
            return self
        job_id = self.job_id
        return _substitute(self, lambda text: text.replace(job_id, JOB_ID))

    def to_json(self) -> dict[str, Any]:
        """Plain data; a stand-in appears as ``${NAME}`` (the placeholder id as ``${JOB_ID}``),
        in :data:`JSON_FORMAT`'s encoding, which :func:`plan_from_json` reverses."""
        shown = _substitute(self, _json_text)
        data = _fields_data(shown)
        data["job_id"] = None if self.has_placeholder_id else self.job_id
        data["format"] = JSON_FORMAT
        return data

    def digest(self) -> str:
        """SHA-256 of the plan with the job id abstracted: equal plans, equal digests."""
        abstract = self.with_placeholder_id()
        data = {name: getattr(abstract, name) for name in _FIELDS[Plan]}
        del data["reactions"], data["notifier"], data["retry_max"], data["file"]
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=_fields_of)
        return hashlib.sha256(text.encode()).hexdigest()

    def backend_value(self, key: str) -> str | None:
        return dict(self.backend).get(key)


JSON_FORMAT = 2
"""How a plan's JSON writes its text. A stand-in is ``${NAME}``; the text itself reads that way
only with its ``$`` doubled: a run of ``$`` just before ``{NAME}`` is written twice as long,
and a stand-in adds one more, so an odd run ends in a stand-in and an even run is the text's
own. Any other ``$`` is written as it is. A plan without ``format`` (stored before it was
written) holds its text as it is."""
_JSON_PARTS = re.compile(r"(\$*)(?:\x00([A-Za-z_][A-Za-z0-9_]*)\x00|(\{[A-Za-z_][A-Za-z0-9_]*\}))")
_JSON_STAND_IN = re.compile(r"(\$+)\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _json_text(text: str) -> str:
    """``text`` as :data:`JSON_FORMAT` writes it."""

    def part(match: re.Match[str]) -> str:
        dollars, name, braced = match.groups()
        if name is not None:
            return "$" * (2 * len(dollars) + 1) + "{" + name + "}"
        return "$" * (2 * len(dollars)) + braced

    return _JSON_PARTS.sub(part, text) if "\x00" in text or "${" in text else text


def _from_json_text(text: str) -> str:
    """``text`` written by :func:`_json_text`, read back."""

    def part(match: re.Match[str]) -> str:
        dollars, name = match.groups()
        own = "$" * (len(dollars) // 2)
        return own + (stand_in(name) if len(dollars) % 2 else "{" + name + "}")

    return _JSON_STAND_IN.sub(part, text) if "${" in text else text


_FIELDS: dict[type, tuple[str, ...]] = {
    kind: tuple(f.name for f in fields(kind)) for kind in (Step, RecordFields, Plan)
}
"""Each plan type's field names, read once: every digest and substitution walks them."""


def _substitute(plan: Plan, fix: Callable[[str], str]) -> Plan:
    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return fix(value)
        if isinstance(value, tuple):
            return tuple(walk(v) for v in value)
        if isinstance(value, Step | RecordFields | Plan):
            return replace(value, **{n: walk(getattr(value, n)) for n in _FIELDS[type(value)]})
        return value

    result: Plan = walk(plan)
    return result


def _fields_of(value: object) -> dict[str, Any]:
    """A step's or record fields' fields, for ``json.dumps`` (which writes tuples as lists)."""
    if isinstance(value, Step | RecordFields):
        return {name: getattr(value, name) for name in _FIELDS[type(value)]}
    raise TypeError(f"a plan holds no {type(value).__name__}")


def _fields_data(plan: Plan) -> dict[str, Any]:
    """``dataclasses.asdict(plan)``, without its deep copies: every leaf is immutable."""

    def walk(value: Any) -> Any:
        if isinstance(value, tuple):
            return tuple(walk(v) for v in value)
        if isinstance(value, Step | RecordFields):
            return {name: walk(getattr(value, name)) for name in _FIELDS[type(value)]}
        return value

    return {name: walk(getattr(plan, name)) for name in _FIELDS[Plan]}


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """Everything a platform needs to render its steps for one job.

    ``job_results`` is the results directory as the job sees it (``/results``
    in a container); ``upstream`` holds the ``needs.<target>.results_dir``
    values, real paths or stand-ins for what runs first; ``user_from_host`` is
    True when ``user: host`` (not an explicit UID:GID) chose :attr:`identity`.
    """

    job: Job
    job_id: str
    identity: Identity
    launcher: Identity
    results_dir: str
    job_results: str
    upstream: tuple[tuple[str, str], ...] = ()
    user_from_host: bool = False
    values: Mapping[str, str] = field(init=False, repr=False, compare=False)
    """The placeholder values for this job."""
    spec_yaml: str | None = field(init=False, repr=False, compare=False)
    """The spec file's content, or None when the job has none."""

    def __post_init__(self) -> None:
        # Made once: every step, the plan's lint and the spec file's writer read them.
        values = {
            "config_path": self.config_path,
            "results_dir": self.job_results,
            "job_id": self.job_id,
            **{f"needs.{name}.results_dir": path for name, path in self.upstream},
        }
        object.__setattr__(self, "values", MappingProxyType(values))
        spec = self.job.spec
        text = None if spec is None else placeholders.spec_file_text(spec, self.expand)
        object.__setattr__(self, "spec_yaml", text)

    @property
    def config_path(self) -> str:
        """The spec file as the job sees it."""
        return f"{self.job_results}/{SPEC_FILE}"

    def expand(self, text: str) -> str:
        return placeholders.expand(text, self.values)

    @property
    def command(self) -> tuple[str, ...]:
        """The job's command with placeholders filled; refused where a script would misread one.

        A stand-in (the job id, an upstream's results) counts as the id it
        stands for, which is plain text.
        """
        values = self.values
        filled = {name: STAND_IN.sub("id", value) for name, value in values.items()}
        shown = {name: STAND_IN.sub(r"$\1", value) for name, value in values.items()}
        misread = placeholders.in_scripts(self.job.command, filled, shown)
        if misread:
            raise InvalidInput(
                f"{shown_file(self.job.file)}: command: {'; '.join(misread)}", key=("command",)
            )
        return tuple(self.expand(word) for word in self.job.command)

    @property
    def mounts(self) -> tuple[Mount, ...]:
        """The job's mounts with ``{needs.*}`` in their sources filled."""
        return tuple(replace(m, source=self.expand(m.source)) for m in self.job.mounts)

    @property
    def env_set(self) -> tuple[tuple[str, str], ...]:
        return tuple((name, self.expand(value)) for name, value in self.job.env_set)

    def runtime_env(self) -> tuple[tuple[str, str], ...]:
        """HOME, USER, LOGNAME and the cache redirects, under the job's results."""
        home = f"{self.job_results}/{RUNTIME_HOME}"
        pairs = [("HOME", home), ("USER", self.identity.name), ("LOGNAME", self.identity.name)]
        for name, sub in CACHE_DIRS:
            pairs.append((name, f"{home}/.cache/{sub}".rstrip("/")))
        return tuple(pairs)

    def host_dirs(self) -> tuple[str, ...]:
        """Directories created on the host before launch, parents first."""
        root = self.results_dir
        home = f"{root}/{RUNTIME_HOME}"
        dirs = [root, f"{root}/stage", f"{root}/.tao-runtime", home, f"{home}/.cache"]
        dirs += [f"{home}/.cache/{sub}" for _, sub in CACHE_DIRS if sub]
        return tuple(dirs)


def job_plan(
    context: Context,
    platform: str,
    steps: Sequence[Step],
    *,
    notes: Sequence[str] = (),
    backend: Sequence[tuple[str, str]] = (),
    teardown: Sequence[Step] = (),
) -> Plan:
    """The plan of ``context``'s job on ``platform``: its steps, and the record's fields."""
    job = context.job
    return Plan(
        file=job.file,
        target=job.name,
        platform=platform,
        job_id=context.job_id,
        record=RecordFields(
            platform=platform,
            image=job.image,
            network_arch=job.network_arch,
            action=job.action,
            storage_tier=job.storage_tier,
            results_dir=context.results_dir,
            upload_excludes=job.upload_excludes,
        ),
        steps=tuple(steps),
        notes=tuple(notes),
        backend=tuple(backend),
        secrets=job.env_pass,
        teardown=tuple(teardown),
    )


SPEC_STEP = "spec-file"
"""The step that writes the experiment spec file, its text on stdin."""


def lint_plan(plan: Plan, spec: str | None = None) -> None:
    """Refuse a plan that would put a secret on a command line or into a file.

    ``spec`` is the spec file's text, the input of the steps that write it. A step
    that writes it on a Brev instance carries it quoted in its remote script, where
    the YAML's own quotes would read as shell text (``x: 'Authorization: Basic '``);
    that step's script is judged without it, and the spec as the document it is, as
    everywhere else.
    """

    findings = []
    spec_only = True  # every finding is in the spec file's text, which the job's spec: makes
    embedded = templates.quote(spec) if spec else None
    for step in (*plan.steps, *plan.teardown):
        for words in step.word_lists():
            if embedded is not None and any(embedded in word for word in words):
                words = tuple(word.replace(embedded, "''") for word in words)
                for finding in lint.lint_text(spec or ""):
                    findings.append(f"step {step.name} (spec file): {finding}")
            for finding in lint.lint_argv([s.replace(JOB_ID, "JOB_ID") for s in words]):
                findings.append(f"step {step.name}: {finding}")
                spec_only = False
        if step.stdin_text is not None:
            for finding in lint.lint_text(step.stdin_text):
                findings.append(f"step {step.name} (input): {finding}")
                spec_only = spec_only and (step.name == SPEC_STEP or step.stdin_text == spec)
    if findings:
        listed = "\n".join(f"  {f}" for f in findings)
        in_image = not spec_only and lint.lint_argv([plan.record.image])
        raise InvalidInput(
            f"{shown_file(plan.file)}: the plan would carry inline secrets; pass them by name "
            f"under env.pass instead:\n{listed}",
            key=("spec",) if spec_only else ("image",) if in_image else (),
        )


def stored_plan(job_id: str, sidecar: Mapping[str, object]) -> dict[str, Any]:
    """The plan job ``job_id`` ran, as its sidecar keeps it (:meth:`Plan.to_json`); refused
    (exit 2) for a job that has none, such as a record ``taospec record open`` made."""
    stored = sidecar.get("plan")
    if not isinstance(stored, dict):
        raise InvalidInput(f"{job_id} has no stored plan (it was not submitted by taospec run)")
    return stored


def plan_from_json(data: Mapping[str, Any]) -> Plan:
    """A plan written by :meth:`Plan.to_json` read back: its stand-ins from
    :data:`JSON_FORMAT`'s encoding, a null ``job_id`` as the placeholder id."""
    plan = _plan_as_written(data)
    return _substitute(plan, _from_json_text) if data.get("format") == JSON_FORMAT else plan


def _plan_as_written(data: Mapping[str, Any]) -> Plan:

    def step(raw: Mapping[str, Any]) -> Step:
        fields = dict(raw)
        fields["argv"] = tuple(fields["argv"])
        fields["env"] = tuple(tuple(pair) for pair in fields["env"])
        fields["pass_env"] = tuple(fields["pass_env"])
        fields["unless"] = tuple(fields["unless"])
        fields["stdin_env_file"] = tuple(fields.get("stdin_env_file", ()))
        return Step(**fields)

    return Plan(
        file=data["file"],
        target=data["target"],
        platform=data["platform"],
        job_id=JOB_ID if data["job_id"] is None else data["job_id"],
        record=RecordFields(
            **{**data["record"], "upload_excludes": tuple(data["record"]["upload_excludes"])}
        ),
        steps=tuple(step(s) for s in data["steps"]),
        notes=tuple(data["notes"]),
        backend=tuple(tuple(pair) for pair in data["backend"]),
        secrets=tuple(data["secrets"]),
        teardown=tuple(step(s) for s in data.get("teardown", [])),
        reactions=tuple(data.get("reactions", [])),
        notifier=tuple(data.get("notifier", [])),
        retry_max=int(data.get("retry_max", 0)),
    )
