"""``taospec record`` speaks the TAO recorder's language: its messages, exit codes and output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taospec.errors import InvalidInput
from taospec.ledger import Ledger
from tests.conftest import Runner
from tests.ledgers import open_job
from tests.test_ledger import hand_written

OPEN = (
    "record", "open", "--platform", "docker", "--image", "nvcr.io/x/y:1", "--network-arch",
    "dino", "--action", "train", "--storage-tier", "A",
)  # fmt: skip
NO_ID = (
    "open: no id can be minted from this network_arch and action: it would hold a value "
    "taospec keeps out of the ledger (a secret's, or a passed variable's), whole or as an id "
    "spells it"
)


def opened(taospec: Runner, *extra: str) -> str:
    done = taospec(*OPEN, *extra)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def write_foreign_file(state_dir: Path, data: dict[str, object]) -> None:
    """A record as another TAO tool would leave it in the ledger's jobs folder."""
    (state_dir / "jobs").mkdir(parents=True, exist_ok=True)
    (state_dir / "jobs" / f"{data['id']}.json").write_text(json.dumps(data, indent=2))


def refused(done: object, message: str) -> None:
    assert done.returncode == 1  # type: ignore[attr-defined]
    assert done.stderr == message + "\n"  # type: ignore[attr-defined]
    assert done.stdout == ""  # type: ignore[attr-defined]


def test_refusals_exit_1_with_the_recorders_messages(taospec: Runner, state_dir: Path) -> None:
    job_id = opened(taospec, "--results-root", "/r")
    record = state_dir / "jobs" / "dino-train-zzzzzz.json"
    refused(taospec("record", "mark", "dino-train-zzzzzz", "--state", "RUNNING"),
            f"no job-record at {record}")  # fmt: skip
    refused(taospec("record", "show", "../../etc/passwd"), "invalid job id: '../../etc/passwd'")
    refused(taospec("record", "mark", ".hidden", "--state", "RUNNING"), "invalid job id: '.hidden'")
    refused(taospec(*OPEN), "open: pass exactly one of --results-dir or --results-root")
    refused(taospec(*OPEN, "--results-dir", "/a", "--results-root", "/b"),
            "open: pass exactly one of --results-dir or --results-root")  # fmt: skip
    for flag in ("--image", "--network-arch", "--action"):
        args = list(OPEN) + ["--results-dir", "/o"]
        args[args.index(flag) + 1] = "  "
        refused(taospec(*args), f"open: {flag} must be non-empty")
    assert taospec("record", "mark", job_id, "--state", "COMPLETE").returncode == 0
    refused(taospec("record", "mark", job_id, "--state", "RUNNING"),
            f"record {job_id} is terminal (COMPLETE); refusing transition to RUNNING")  # fmt: skip
    refused(taospec("record", "list", env={"TAO_STATE_DIR": ""}),
            "TAO_STATE_DIR is set but empty; unset it or give an absolute path")  # fmt: skip
    refused(taospec("record", "list", env={"TAO_STATE_DIR": "relative/state"}),
            "TAO_STATE_DIR must be an absolute path (got 'relative/state')")  # fmt: skip
    not_a_folder = state_dir / "file"
    not_a_folder.write_text("")
    refused(taospec(*OPEN, "--results-root", "/r", env={"TAO_STATE_DIR": str(not_a_folder)}),
            f"TAO_STATE_DIR is not a directory: {not_a_folder}")  # fmt: skip
    # every verb says so, as the recorder does; show and list ended in a traceback (exit 3)
    for verb in (("show", job_id), ("list",), ("mark", job_id, "--state", "RUNNING")):
        refused(taospec("record", *verb, env={"TAO_STATE_DIR": str(not_a_folder)}),
                f"TAO_STATE_DIR is not a directory: {not_a_folder}")  # fmt: skip
    listed = taospec("ls", env={"TAO_STATE_DIR": str(not_a_folder)})
    assert (listed.returncode, listed.stderr) == (
        2,
        f"taospec: TAO_STATE_DIR is not a directory: {not_a_folder}\n",
    )
    long_id = "a" * 300  # no file can have its name; a traceback, now no record
    refused(taospec("record", "show", long_id), f"no job-record at {state_dir}/jobs/{long_id}.json")


@pytest.mark.parametrize("root", ["", "relative/state"])
def test_a_bad_job_id_is_named_before_a_bad_state_root(taospec: Runner, root: str) -> None:
    # The recorder checks the id before it reads TAO_STATE_DIR; taospec named the root.
    for verb in (("show", "../x"), ("mark", ".hidden", "--state", "RUNNING")):
        refused(taospec("record", *verb, env={"TAO_STATE_DIR": root}),
                f"invalid job id: {verb[1]!r}")  # fmt: skip
    message = {
        "": "TAO_STATE_DIR is set but empty; unset it or give an absolute path",
        "relative/state": "TAO_STATE_DIR must be an absolute path (got 'relative/state')",
    }
    for verb in (("show", "ok-id"), ("mark", "ok-id", "--state", "RUNNING"), ("list",)):
        refused(taospec("record", *verb, env={"TAO_STATE_DIR": root}), message[root])


def test_a_folder_where_a_record_would_be_is_listed_as_damaged(
    taospec: Runner, state_dir: Path
) -> None:
    job_id = opened(taospec, "--results-root", "/r")
    (state_dir / "jobs" / "dir.json").mkdir()
    listed = taospec("record", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith(f"{job_id}\t")
    assert listed.stderr == "dir\t<corrupt>\n"
    shown = taospec("ls")
    assert shown.returncode == 0, shown.stderr
    assert job_id in shown.stdout
    assert "a folder, not a record" in shown.stderr
    refused(taospec("record", "show", "dir"), f"{state_dir}/jobs/dir.json: a folder, not a record")


def test_an_existing_explicit_record_is_refused(taospec: Runner, state_dir: Path) -> None:
    job_id = opened(taospec, "--results-root", "/r")
    before = (state_dir / "jobs" / f"{job_id}.json").read_bytes()
    with pytest.raises(InvalidInput, match=f"record already exists: .*/{job_id}.json"):
        open_job(Ledger(state_dir), job_id=job_id)
    assert (state_dir / "jobs" / f"{job_id}.json").read_bytes() == before


def test_show_plan_of_a_record_with_no_stored_plan_says_so_and_exits_2(
    taospec: Runner, state_dir: Path
) -> None:
    """A record the recorder opened holds no plan: show --plan said so and exited 0."""
    job_id = opened(taospec, "--results-root", "/r")
    for flags in (("--plan",), ("--plan", "--json")):
        shown = taospec("show", *flags, job_id)
        assert (shown.returncode, shown.stdout) == (2, "")
        assert shown.stderr == (
            f"taospec: {job_id} has no stored plan (it was not submitted by taospec run)\n"
        )
    assert taospec("show", job_id).returncode == 0  # the record itself is there


def test_usage_errors_exit_2(taospec: Runner) -> None:
    assert taospec("record", "mark", "x-y-z", "--state", "QUEUED").returncode == 2
    assert taospec("record", "open", "--platform", "docker").returncode == 2
    assert taospec(*OPEN[:-1], "D", "--results-root", "/r").returncode == 2


@pytest.mark.parametrize(
    ("given", "slug"),
    [("Docker ", "docker"), ("SLURM", "slurm"), ("My_Platform", "my-platform"),
     ("-kratos-", "kratos"), ("my  platform", "my-platform")],
)  # fmt: skip
def test_platform_names_are_normalised(
    taospec: Runner, state_dir: Path, given: str, slug: str
) -> None:
    args = list(OPEN)
    args[args.index("--platform") + 1] = given
    done = taospec(*[a for a in args if a != "--platform" and a != given], f"--platform={given}",
                   "--results-root", "/r")  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads((state_dir / "jobs" / f"{done.stdout.strip()}.json").read_text())
    assert record["platform"] == slug


@pytest.mark.parametrize("garbage", ["", "   ", "k8s!", "a" * 40, "$(id)"])
def test_irreducible_platform_names_are_refused(taospec: Runner, garbage: str) -> None:
    args = [a for a in OPEN if a not in ("--platform", "docker")]
    done = taospec(*args, f"--platform={garbage}", "--results-root", "/r")
    assert done.returncode == 2
    assert f"cannot normalize platform {garbage!r} to a name" in done.stderr


def test_results_dir_is_stored_as_given_with_userinfo_redacted(
    taospec: Runner, state_dir: Path
) -> None:
    for given, stored in [
        ("s3://bucket/run", "s3://bucket/run"),
        ("https://user:leakSECRETpw@host/bucket/out", "https://user:<redacted>@host/bucket/out"),
        ("/lustre/exp/token=v1/keyframes/run", "/lustre/exp/token=v1/keyframes/run"),
    ]:
        job_id = opened(taospec, "--results-dir", given)
        raw = (state_dir / "jobs" / f"{job_id}.json").read_text()
        assert json.loads(raw)["results_dir"] == stored
        assert "leakSECRETpw" not in raw


def test_repeating_the_terminal_state_only_fills_in_what_is_missing(
    taospec: Runner, state_dir: Path
) -> None:
    job_id = opened(taospec, "--results-root", "/r")
    path = state_dir / "jobs" / f"{job_id}.json"
    assert taospec("record", "mark", job_id, "--state", "ERROR", "--source", "poller",
                   "--message", "OOM").returncode == 0  # fmt: skip
    first = json.loads(path.read_text())
    again = taospec(
        "record", "mark", job_id, "--state", "ERROR", "--err-class", "ERR_INFRA",
        "--backend-ref", "c0ffee", "--message", "seen again", "--source", "agent",
    )  # fmt: skip
    assert again.returncode == 0
    assert again.stderr == f"note: {job_id} already terminal; message not appended\n"
    after = json.loads(path.read_text())
    assert after == {**first, "err_class": "ERR_INFRA", "backend_ref": "c0ffee"}
    kept = path.read_bytes()
    third = taospec("record", "mark", job_id, "--state", "ERROR", "--err-class", "ERR_PROGRAM",
                    "--backend-ref", "other")  # fmt: skip
    assert (third.returncode, third.stderr) == (0, "")
    assert path.read_bytes() == kept


def test_secrets_in_every_field_are_redacted_by_type(taospec: Runner, state_dir: Path) -> None:
    token = "nvapi-" + "S" * 40
    job_id = opened(taospec, "--results-dir", f"https://u:{token}@h/out")
    assert taospec("record", "mark", job_id, "--state", "RUNNING", "--backend-ref",
                   f"https://u:pw{token}@h/x", "--message",
                   f"docker run -e NGC_KEY={token} img").returncode == 0  # fmt: skip
    raw = (state_dir / "jobs" / f"{job_id}.json").read_text()
    assert token not in raw
    record = json.loads(raw)
    assert record["backend_ref"].startswith("https://u:<redacted>@h/x")
    assert "NGC_KEY=" in record["transitions"][-1]["message"]
    assert token not in taospec("record", "show", job_id).stdout


def test_a_record_another_writer_left_unredacted_prints_without_its_secrets(
    taospec: Runner, state_dir: Path
) -> None:
    # The recorder's own list prints results_dir as stored; taospec redacts every listing
    # and show again, so a record written by a tool that does not redact leaks nothing.
    token = "nvapi-" + "L" * 40
    job_id = opened(taospec, "--results-dir", "/out/plain")
    path = state_dir / "jobs" / f"{job_id}.json"
    record = json.loads(path.read_text())
    record["results_dir"] = f"https://u:{token}@h/out"
    record["image"] = f"nvcr.io/x/y:1?X-Amz-Credential={token}"
    record["transitions"][-1]["message"] = f"docker login -p {token} nvcr.io"
    path.write_text(json.dumps(record, indent=2))
    listings = (("ls",), ("ls", "--json"), ("record", "list"), ("record", "list", "--json"))
    for argv in (*listings, ("show", job_id), ("record", "show", job_id)):
        done = taospec(*argv)
        assert done.returncode == 0, (argv, done.stderr)
        assert token not in done.stdout + done.stderr, argv
        assert "https://u:<redacted>@h/out" in done.stdout, argv
    for argv in (("ls", "--json"), ("show", job_id)):
        shown = json.loads(taospec(*argv).stdout)
        assert shown["transitions"][-1]["message"] == "docker login -p <redacted> nvcr.io"
        assert shown["image"] == "nvcr.io/x/y:1?X-Amz-Credential=<redacted>"


def test_list_prints_one_tab_separated_line_per_record_by_file_name(
    taospec: Runner, state_dir: Path
) -> None:
    ids = [opened(taospec, "--results-dir", f"/out/{n}") for n in range(3)]
    assert taospec("record", "mark", ids[1], "--state", "COMPLETE").returncode == 0
    done = taospec("record", "list")
    assert done.returncode == 0
    expected = sorted(
        (f"{i}\tdocker\t{'COMPLETE' if i == ids[1] else 'PENDING'}\t/out/{ids.index(i)}"
         for i in ids),
        key=lambda line: line.split("\t")[0] + ".json",
    )  # fmt: skip
    assert done.stdout.splitlines() == expected
    as_json = [json.loads(line) for line in taospec("record", "list", "--json").stdout.splitlines()]
    assert [(r["id"], r["state"]) for r in as_json] == [
        (line.split("\t")[0], line.split("\t")[2]) for line in expected
    ]


def test_a_record_whose_id_the_redactor_would_change_can_still_be_marked(
    taospec: Runner, state_dir: Path
) -> None:
    # The recorder mints ids from the arch and redacts less: an arch glpat-... gave an id
    # that taospec's redaction rewrote as <redacted>, so marking the record failed its check.
    job_id = "glpat-abcdefghijklmnopqrst-train-0a1b2c"
    first = opened(taospec, "--results-dir", "/out/plain")
    record = json.loads((state_dir / "jobs" / f"{first}.json").read_text())
    record["id"] = job_id
    (state_dir / "jobs" / f"{job_id}.json").write_text(json.dumps(record, indent=2) + "\n")
    done = taospec("record", "mark", job_id, "--state", "RUNNING")
    assert done.returncode == 0, done.stderr
    marked = json.loads((state_dir / "jobs" / f"{job_id}.json").read_text())
    assert marked["id"] == job_id
    assert [t["state"] for t in marked["transitions"]] == ["PENDING", "RUNNING"]
    listed = taospec("record", "list")
    assert f"{job_id}\tdocker\tRUNNING\t/out/plain\n" in listed.stdout, listed.stdout


def test_a_long_option_may_be_shortened_as_the_recorders_argparse_allows(
    taospec: Runner, state_dir: Path
) -> None:
    # click refused --sta, which the recorder takes for --state
    shortened = taospec(
        "record", "open", "--plat", "docker", "--ima", "nvcr.io/x/y:1", "--network-a", "dino",
        "--act", "train", "--storage", "A", "--results-ro", "/r",
    )  # fmt: skip
    assert shortened.returncode == 0, shortened.stderr
    job_id = shortened.stdout.strip()
    for message in ("-5", "-a b", "-"):  # values argparse does not read as options
        marked = taospec("record", "mark", job_id, "--sta", "RUNNING", "--mes", message)
        assert marked.returncode == 0, marked.stderr
    shown = json.loads(taospec("record", "show", job_id).stdout)
    assert [t["message"] for t in shown["transitions"][1:]] == ["-5", "-a b", "-"]
    assert shown["results_dir"] == f"/r/{job_id}"

    ambiguous = taospec("record", "mark", job_id, "--s", "COMPLETE")
    assert ambiguous.returncode == 2
    assert "ambiguous option: --s could match --state, --source" in ambiguous.stderr
    ambiguous = taospec(*OPEN, "--res", "/r")
    assert ambiguous.returncode == 2
    assert "ambiguous option: --res could match --results-dir, --results-root" in ambiguous.stderr
    # an option's value that reads as an option is refused, not taken (or expanded)
    taken = taospec("record", "mark", job_id, "--state", "COMPLETE", "--message", "--sta")
    assert taken.returncode == 2
    assert "argument --message: expected one argument" in taken.stderr
    assert json.loads(taospec("record", "show", job_id).stdout)["transitions"][-1]["state"] == (
        "RUNNING"
    )


def test_list_prints_a_partial_record_with_a_question_mark_in_each_missing_field(
    taospec: Runner, state_dir: Path
) -> None:
    # The recorder prints what a record has and "?" for a field it lacks, and any other
    # value as Python's str() gives it; taospec printed every such record as <corrupt>.
    job_id = opened(taospec, "--results-dir", "/out/a")
    jobs = state_dir / "jobs"
    whole = json.loads((jobs / f"{job_id}.json").read_text())
    files = {
        "a-empty": {},
        "b-no-platform": {"id": "b-no-platform", "transitions": [{"state": "RUNNING"}],
                          "results_dir": "/r"},
        "c-nulls": {"id": None, "platform": None, "transitions": [{"state": None}],
                    "results_dir": 7},
        "d-no-steps": {**whole, "transitions": []},
        "e-renamed": whole,  # the id it holds is printed, not its file's name
        # The recorder stops the listing with a traceback on these; taospec prints "?"
        # for the state it cannot read, and the listing goes on.
        "f-stateless-step": {"id": "f", "transitions": [{"ts": "now"}]},
        "g-steps-text": {"id": "g", "transitions": "RUNNING"},
    }  # fmt: skip
    for name, data in files.items():
        (jobs / f"{name}.json").write_text(json.dumps(data))
    # not an object: the recorder stops with a traceback; taospec calls it corrupt, goes on
    (jobs / "h-list.json").write_text("[1, 2]")
    (jobs / "i-null.json").write_text("null")
    done = taospec("record", "list")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "a-empty\t?\t?\t?",
        "b-no-platform\t?\tRUNNING\t/r",
        "None\tNone\tNone\t7",
        f"{job_id}\tdocker\t?\t/out/a",
        f"{job_id}\tdocker\tPENDING\t/out/a",
        f"{job_id}\tdocker\tPENDING\t/out/a",
        "f\t?\t?\t?",
        "g\t?\t?\t?",
    ]
    assert done.stderr == "h-list\t<corrupt>\ni-null\t<corrupt>\n"
    as_json = [json.loads(line) for line in taospec("record", "list", "--json").stdout.splitlines()]
    assert [r["id"] for r in as_json] == [job_id]  # --json lists whole records only


def test_list_lists_every_json_file_as_the_recorder_finds_them(
    taospec: Runner, state_dir: Path
) -> None:
    # The recorder lists Path.glob("*.json"), which, unlike glob.glob, matches dot-named
    # files too, and names that are no job id; taospec listed only valid ids.
    job_id = opened(taospec, "--results-dir", "/out/a")
    assert taospec("record", "mark", job_id, "--state", "RUNNING").returncode == 0
    jobs = state_dir / "jobs"
    (jobs / ".hidden.json").write_bytes((jobs / f"{job_id}.json").read_bytes())
    (jobs / ".json").write_text("{}")  # pathlib's stem of ".json" is ".json"
    (jobs / "a b.json").write_text('{"platform": "slurm"}')
    (jobs / ".torn.json").write_text("")
    (jobs / "upper.JSON").write_text("{}")  # the pattern is case-sensitive
    done = taospec("record", "list")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"{job_id}\tdocker\tRUNNING\t/out/a",
        ".json\t?\t?\t?",
        "a b\tslurm\t?\t?",
        f"{job_id}\tdocker\tRUNNING\t/out/a",
    ]
    assert done.stderr == ".torn\t<corrupt>\n"
    # plain ls lists the ledger's records, by id, as before
    listed = taospec("ls", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["id"] for r in map(json.loads, listed.stdout.splitlines())] == [job_id]


def test_show_prints_whatever_json_a_record_file_holds(taospec: Runner, state_dir: Path) -> None:
    # The recorder's show prints the file's JSON, indented, whatever its shape; taospec
    # refused a record that failed its schema.
    job_id = opened(taospec, "--results-dir", "/out/a")
    jobs = state_dir / "jobs"
    whole = json.loads((jobs / f"{job_id}.json").read_text())
    token = "nvapi-" + "P" * 40
    files = {
        "empty": {},
        "no-platform": {"id": "no-platform", "transitions": [{"state": "RUNNING"}]},
        "renamed": whole,
        "listed": [1, None, {"message": f"docker login -p {token}"}],
    }
    for name, data in files.items():
        (jobs / f"{name}.json").write_text(json.dumps(data))
        done = taospec("record", "show", name)
        assert (done.returncode, done.stderr) == (0, ""), name
        assert token not in done.stdout
        shown = json.loads(done.stdout)
        assert done.stdout == json.dumps(shown, indent=2) + "\n"
        if name != "listed":
            assert shown == data
    assert shown == [1, None, {"message": "docker login -p <redacted>"}]
    # where the recorder stops with a traceback (exit 1), taospec says what is wrong
    (jobs / "torn.json").write_text('{"id": ')
    done = taospec("record", "show", "torn")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(f"{jobs}/torn.json: not valid JSON (")


def test_a_record_file_that_is_not_utf8_text_is_corrupt_to_list_and_show(
    taospec: Runner, state_dir: Path
) -> None:
    # The recorder reads a record as UTF-8 text, so a BOM or UTF-16 is no JSON to it (list:
    # <corrupt>; show: a traceback); taospec's bytes decoder took both as JSON.
    jobs = state_dir / "jobs"
    jobs.mkdir()
    (jobs / "bom.json").write_bytes(b'\xef\xbb\xbf{"id": "bom"}')
    (jobs / "wide.json").write_bytes('{"id": "wide"}'.encode("utf-16"))
    listed = taospec("record", "list")
    assert (listed.returncode, listed.stdout) == (0, "")
    assert listed.stderr == "bom\t<corrupt>\nwide\t<corrupt>\n"
    for name, why in (("bom", "not valid JSON (Unexpected UTF-8 BOM"), ("wide", "not UTF-8")):
        shown = taospec("record", "show", name)
        assert (shown.returncode, shown.stdout) == (1, "")
        assert shown.stderr.startswith(f"{jobs}/{name}.json: {why}"), shown.stderr


def test_an_arch_every_minted_id_would_leak_is_refused_for_what_it_is(
    taospec: Runner, state_dir: Path
) -> None:
    # every id minted from a secret's value was refused by redaction, and the open said
    # "record already exists: .../jobs/.json", a file nobody had made
    done = taospec(
        "record", "open", "--platform", "local", "--image", "i", "--network-arch",
        "CANARY1234abcd", "--action", "train", "--storage-tier", "A", "--results-root", "/r",
        env={"MY_TOKEN": "CANARY1234abcd"},
    )  # fmt: skip
    refused(
        done,
        NO_ID,
    )
    assert not list((state_dir / "jobs").glob("*.json"))


def test_a_refusal_quoting_a_secret_prints_it_redacted(taospec: Runner, state_dir: Path) -> None:
    # record show printed the refused id whole, where taospec show redacts it
    token = "Wk3jXp9LmQ2vRt7sAbCdEf"
    env = {"HF_TOKEN": token}
    refused(taospec("record", "show", f"x/{token}", env=env), "invalid job id: 'x/<redacted>'")
    refused(
        taospec("record", "mark", f"nosuch-{token}", "--state", "RUNNING", env=env),
        f"no job-record at {state_dir / 'jobs'}/nosuch-<redacted>.json",
    )


def test_an_arch_whose_cut_would_keep_part_of_a_secret_is_refused(
    taospec: Runner, state_dir: Path
) -> None:
    # the id was judged after its arch was cut to 64 characters: the cut left the first 12
    # characters of the token in it, which redaction no longer found
    token = "Wk3jXp9LmQ2vRt7sAbCdEf"
    done = taospec(
        "record", "open", "--platform", "docker", "--image", "img", "--network-arch",
        f"model_{'a' * 45}_{token}", "--action", "train", "--storage-tier", "A",
        "--results-root", "/r", env={"HF_TOKEN": token},
    )  # fmt: skip
    refused(
        done,
        NO_ID,
    )
    assert not list((state_dir / "jobs").glob("*.json"))
    args = [*OPEN, "--results-root", "/r"]
    args[args.index("--network-arch") + 1] = f"model_{'a' * 70}"
    cut = taospec(*args)  # a cut alone is no refusal
    assert cut.returncode == 0, cut.stderr
    assert cut.stdout.startswith(f"model_{'a' * 58}-train-")
    for path in state_dir.rglob("*"):
        assert "Wk3j" not in path.name
        assert path.is_dir() or "Wk3j" not in path.read_text()


@pytest.mark.parametrize(
    ("arch", "action"),
    [
        ("model_Pa'ss w0rd!42", "train"),  # the id spells it model_Pa-ss-w0rd-42
        ("model_Pa-ss-w0rd-42", "train"),  # as the id would spell it
        ("model", "x Pa'ss w0rd!42!"),  # in the action
        ("Pa?ss", "w0rd!42"),  # across the two: Pa-ss-w0rd-42
    ],
)
def test_an_arch_whose_id_spells_a_secret_otherwise_is_refused(
    taospec: Runner, state_dir: Path, arch: str, action: str
) -> None:
    # an id was judged only for the value as it is: one that unsafe characters made "-"
    # in the id left it there for redaction not to find, in the ledger, output and names
    token = "Pa'ss w0rd!42"
    done = taospec(
        "record", "open", "--platform", "docker", "--image", "img", "--network-arch", arch,
        "--action", action, "--storage-tier", "A", "--results-root", "/r",
        env={"HF_TOKEN": token},
    )  # fmt: skip
    refused(
        done,
        NO_ID,
    )
    assert not list(state_dir.rglob("*.json"))


def test_an_id_spelling_of_a_secret_too_short_to_look_for_is_no_refusal(
    taospec: Runner, state_dir: Path
) -> None:
    # "ab!!" is looked for as it is (four characters), but an id spells it "ab-": as short
    # as that, redaction would find it in every other id
    args = [*OPEN, "--results-root", "/r"]
    args[args.index("--network-arch") + 1] = "lab-model"
    done = taospec(*args, env={"HF_TOKEN": "ab!!"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("lab-model-train-")


def test_a_ledger_mints_no_id_that_spells_a_passed_value(state_dir: Path) -> None:
    # run opens with the job's passed values: an id that spells one is refused there too
    ledger = Ledger(state_dir, ["Pa'ss w0rd!42"])
    with pytest.raises(InvalidInput) as refusal:
        open_job(ledger, network_arch="model_Pa-ss-w0rd-42")
    assert str(refusal.value) == NO_ID
    assert not list(state_dir.rglob("*.json"))
    assert open_job(ledger, network_arch="model_Pa-ss").id.startswith("model_Pa-ss-train-")


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("20260101T083000Z", "2026-01-01 08:30:00"),  # basic form, as `date -u +%Y%m%dT%H%M%SZ`
        ("2026-01-01T08:30Z", "2026-01-01 08:30:00"),  # to the minute, as `date -u -Iminutes`
        ("2026-01-01T08:30:00+0000", "2026-01-01 08:30:00"),  # as `date -u +%FT%T%z`
        ("2026-01-01T08,5+00", "2026-01-01 08:30:00"),  # half an hour, a comma for the point
        ("2026-01-01T08:30:00.123456789Z", "2026-01-01 08:30:00"),
    ],
)
def test_a_record_another_writer_stamped_in_another_iso_8601_utc_form_is_marked_and_listed(
    taospec: Runner, state_dir: Path, written: str, shown: str
) -> None:
    # The recorder reads no time; taospec refused every form but its own, so a record
    # another tool wrote could never be advanced or closed, and ls passed it over
    record = hand_written("other-1", written)
    write_foreign_file(state_dir, record)
    marked = taospec("record", "mark", "other-1", "--state", "COMPLETE")
    assert (marked.returncode, marked.stderr) == (0, "")
    stored = json.loads((state_dir / "jobs" / "other-1.json").read_text())
    assert stored["submitted_at"] == written  # as the writer wrote it
    assert [t["state"] for t in stored["transitions"]] == ["PENDING", "RUNNING", "COMPLETE"]
    ours = opened(taospec, "--results-root", "/r")  # submitted now, after the other
    listed = taospec("ls")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split("  ")[0] for line in listed.stdout.splitlines()[1:]]
    assert rows == [ours, "other-1"]
    assert f"COMPLETE  slurm     {shown}" in listed.stdout


@pytest.mark.parametrize(
    "written", ["2026-02-30T08:30:00Z", "2026-01-01T25:00:00Z", "2026-01-01T08:30:00+01:00"]
)
def test_a_submission_time_that_names_no_utc_moment_is_named_as_the_damage(
    taospec: Runner, state_dir: Path, written: str
) -> None:
    # a day no calendar has passed as a time, and ls showed it as written
    write_foreign_file(state_dir, hand_written("other-1", written))
    marked = taospec("record", "mark", "other-1", "--state", "COMPLETE")
    path = state_dir / "jobs" / "other-1.json"
    refused(marked, f"{path}: $.submitted_at must be an ISO 8601 UTC time, found str")
    listed = taospec("ls")
    assert listed.returncode == 0
    assert "other-1" not in listed.stdout
    assert f"{path}: $.submitted_at must be an ISO 8601 UTC time" in listed.stderr


def test_prune_names_and_keeps_a_job_whose_end_holds_no_time(
    taospec: Runner, state_dir: Path
) -> None:
    # prune read the last transition's time as taospec writes it, and ended in a traceback
    record = hand_written("other-1", "2026-01-01T08:30:00Z", platform="docker")
    transitions = record["transitions"]
    assert isinstance(transitions, list)
    transitions[-1] = {"ts": "later", "state": "COMPLETE", "message": "", "source": "agent"}
    record["terminal_state"] = "COMPLETE"
    write_foreign_file(state_dir, record)
    pruned = taospec("prune", "--older-than", "1d", "-n")
    assert (pruned.returncode, pruned.stdout) == (0, "")
    assert pruned.stderr == (
        "other-1: kept: its last transition's time, 'later', is no ISO 8601 UTC time\n"
    )
