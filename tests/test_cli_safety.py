"""`corekit run` hardened (issue 25): nothing lost, publishing guarded, SIGTERM, --out, timeouts, devices, primes.

Refusals are checked in this process with kernels forbidden (the tests fail if one starts): one line on
stderr, ``corekit: error: ...``, naming the parameter, flag or path. The runs that must execute use a
tiny notebook that finishes in seconds.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
import tinyrepo
from tinyrepo import REPO, corekit, make_repo, record_name, run_in_process, unrecorded, write_paper_profile

from corekit.primes import is_prime
from corekit.runs import cli, execute, notebooks, parameters, paramspec

NAME = "00_safe"
SAFE_NOTEBOOK = '''\
# %% [markdown]
# # A notebook that saves figures, can sleep, and declares a device, a seed and moduli

# %% tags=["parameters"]
figures = 2  # range: [0, inf)
sleep_s = 0.0  # range: [0, inf)
seed = 0  # range: [0, inf)
epochs = 3  # range: [1, inf)
device = "auto"
p = 7  # range: [3, inf); a prime
moduli = [5, 7]  # length: 1 or more; range: [3, inf); primes
width = 4  # range: [1, inf); not a prime necessarily
output_dir = ""  # path; where the metrics file and figures go

# %%
import time

import matplotlib.pyplot as plt

from corekit import plots
from corekit.runs.claims import Claims

claims = Claims("{name}", dict(figures=figures, sleep_s=sleep_s, output_dir=output_dir))
figs = plots.Figures(output_dir, "{name}")
for k in range(figures):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, k])
    figs.save(fig, f"figure_{{k}}")
    plt.close(fig)
print("sleeping", flush=True)
time.sleep(sleep_s)
claims.report("figures", figures, kind="paper", statistic="the number of figures")
claims.write()
'''.format(name=NAME)

# Every execution here is of the tiny notebook above (seconds); the refusals start no kernel.
pytestmark = pytest.mark.notebook


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A book holding the one notebook 00_safe."""
    return make_repo(tmp_path_factory.mktemp("book"), {NAME: SAFE_NOTEBOOK})




def assert_one_line(err: str, start: str) -> None:
    """Assert that ``err`` is the single line ``corekit: error: START...``."""
    assert err.count("\n") == 1 and err.startswith(f"corekit: error: {start}"), err
    assert "Traceback" not in err


def outputs(out: Path) -> dict[str, bytes]:
    """Return every file under ``out`` (relative path → content), following a symlinked figures folder."""
    files = {}
    for folder, _, names in os.walk(out, followlinks=True):
        for name in names:
            path = Path(folder) / name
            files[path.relative_to(out).as_posix()] = path.read_bytes()
    return dict(sorted(files.items()))


def in_sleeping_cell(ipynb: bytes) -> bool:
    """Return whether papermill's saved notebook ``ipynb`` shows the cell that sleeps running."""
    try:
        cells = json.loads(ipynb)["cells"]
    except json.JSONDecodeError:
        return False
    return any("time.sleep(sleep_s)" in "".join(cell["source"])
               and cell.get("metadata", {}).get("papermill", {}).get("status") == "running" for cell in cells)


def corekit_lines(err: str) -> list[str]:
    """Return the lines of ``err`` that corekit itself printed (not papermill's progress bar)."""
    return [line for line in err.splitlines() if line.startswith("corekit")]


def slept(ipynb: bytes) -> bool:
    """Return whether the executed notebook ``ipynb`` printed 'sleeping' (False while papermill is saving it)."""
    try:
        cells = json.loads(ipynb)["cells"]
    except json.JSONDecodeError:
        return False
    return any("sleeping" in "".join(output.get("text", "")) for cell in cells for output in cell.get("outputs", []))


@pytest.fixture(scope="module")
def first_run(repo, tmp_path_factory):
    """A complete run of 00_safe (two figures): (its output folder, its files)."""
    out = tmp_path_factory.mktemp("first") / "out"
    done = corekit("run", NAME, "--out", str(out), root=repo)
    assert done.returncode == 0, done.stderr
    return out, outputs(out)


@pytest.fixture
def previous(first_run, tmp_path):
    """A fresh copy of the complete run: (output folder, its files), the previous run of the test's own run."""
    out = tmp_path / "out"
    shutil.copytree(first_run[0], out, symlinks=True)
    return out, first_run[1]


# --------------------------------------------------------------------------------------------
# 1. Nothing lost: a failure after execution leaves the previous run whole and keeps the new notebook


def test_a_symlinked_figures_folder_is_refused_before_the_run_and_loses_nothing(repo, previous, tmp_path):
    """Issue 51: the link is refused before a kernel starts (it was found only after the run, issue 25)."""
    out, before = previous
    elsewhere = tmp_path / "elsewhere"
    shutil.move(out / "figures" / NAME, elsewhere)
    (out / "figures" / NAME).symlink_to(elsewhere, target_is_directory=True)
    done = corekit("run", NAME, "-p", "figures", "1", "--out", str(out), root=repo)
    assert done.returncode == 2
    assert_one_line(done.stderr, f"{out / 'figures' / NAME} is a symbolic link (to {elsewhere})")
    assert outputs(out) == before and (out / "figures" / NAME).is_symlink()
    assert not list(out.glob(f".{NAME}.running-*")), "the private run folder was left behind"


def test_a_failed_metrics_write_keeps_the_previous_run(repo, previous, capsys, monkeypatch):
    out, before = previous

    def full_disk(path, data):
        raise OSError(28, "No space left on device", str(path))
    monkeypatch.setattr(execute, "write_json_atomic", full_disk)
    code, _, err = run_in_process(capsys, monkeypatch, repo, "run", NAME, "-p", "figures", "1", "--out", str(out))
    assert code == 1
    lines = corekit_lines(err)
    assert len(lines) == 1 and lines[0].startswith(f"corekit: error: {NAME} ran, but its outputs could not replace "
                                                   f"the previous run in {out}"), err
    assert "No space left on device" in lines[0] and f"executed notebook: {out / (NAME + '.failed.ipynb')}" in lines[0]
    after = outputs(out)
    assert slept(after.pop(f"{NAME}.failed.ipynb"))
    assert after == before


def test_the_swap_undoes_every_move_when_one_fails(tmp_path, monkeypatch):
    final, run = execute.Outputs(tmp_path / "out", NAME), execute.Outputs(tmp_path / "out" / ".staging", NAME)
    for outputs_, text in ((final, "old"), (run, "new")):
        outputs_.figures.mkdir(parents=True)
        (outputs_.figures / f"{text}.png").write_text(text)
        outputs_.ipynb.write_text(text)
        outputs_.metrics.write_text(text)
    execute.write_record(final, execute.written(final))    # the old run, as its run recorded it
    moved = []
    real_replace = os.replace

    def replace(source, target):
        if Path(source) == run.ipynb:                  # the fifth move: the new notebook into place
            raise OSError(5, "Input/output error", str(source))
        if Path(target) != final.record:                # the record is written before the moves
            moved.append(Path(source))
        real_replace(source, target)
    monkeypatch.setattr(execute.os, "replace", replace)
    with pytest.raises(OSError, match="Input/output error"):
        execute.commit_outputs(run, final)
    assert moved[:4] == [final.metrics, final.figures, final.ipynb, run.figures]
    assert final.metrics.read_text() == final.ipynb.read_text() == "old"
    assert [p.name for p in final.figures.iterdir()] == ["old.png"]
    assert run.metrics.read_text() == run.ipynb.read_text() == "new" and (run.figures / "new.png").is_file()


# --------------------------------------------------------------------------------------------
# 2. --publish replaces no published run of a larger profile without --force


def fake_published(root: Path, profile: str, commit: str = "0123456789abcdef") -> Path:
    """Return ``results/00_safe/metrics.json`` written as a published run of ``profile`` at ``commit``."""
    path = root / "results" / NAME / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"notebook": NAME, "profile": profile, "claims": [], "environment": {"commit": commit}}))
    return path


@pytest.mark.parametrize("published, args", [("cpu", []), ("paper", []), ("paper", ["--profile", "cpu"]),
                                             ("cpu", ["--profile", "quick"])])
def test_publish_refuses_to_replace_a_larger_profile(tmp_path, capsys, monkeypatch, no_kernel, published, args):
    root = make_repo(tmp_path / "book", {NAME: SAFE_NOTEBOOK})
    (root / "notebooks" / "params" / "cpu").mkdir(parents=True)
    (root / "notebooks" / "params" / "cpu" / f"{NAME}.yaml").write_text("figures: 1\n")
    before = fake_published(root, published).read_bytes()
    for notebook in (NAME, "all"):
        code, _, err = run_in_process(capsys, monkeypatch, root, "run", notebook, "--publish", *args,
                                      "--out", str(tmp_path / "out"))
        assert code == 2
        assert_one_line(err, "--publish: ")
        assert f"{NAME} ({published} profile)" in err and f"--profile {published}" in err and "--force" in err
    assert (root / "results" / NAME / "metrics.json").read_bytes() == before


def test_publish_of_the_same_or_a_larger_profile_is_allowed(tmp_path):
    root = make_repo(tmp_path / "book", {NAME: SAFE_NOTEBOOK})
    fake_published(root, "cpu")
    cli.check_publishable(root, [NAME], "cpu", force=False)
    cli.check_publishable(root, [NAME], "paper", force=False)
    cli.check_publishable(root, [NAME], "quick", force=True)


def test_publish_force_replaces_and_says_which_run(tmp_path):
    root = make_repo(tmp_path / "book", {NAME: SAFE_NOTEBOOK})
    fake_published(root, "paper", commit="feedc0ffee1234567")
    done = corekit("run", NAME, "--publish", "--force", "--out", str(tmp_path / "out"), root=root)
    assert done.returncode == 0, done.stderr
    assert f"{NAME}: replaced the published paper-profile run (commit feedc0ffee)" in done.stdout.splitlines()
    assert json.loads((root / "results" / NAME / "metrics.json").read_text())["profile"] == "quick"


def test_force_without_publish_is_one_line(repo, capsys, monkeypatch, no_kernel, tmp_path):
    code, _, err = run_in_process(capsys, monkeypatch, repo, "run", NAME, "--force", "--out", str(tmp_path))
    assert code == 2
    assert_one_line(err, "--force goes with --publish")


# --------------------------------------------------------------------------------------------
# 3. SIGTERM


def start_run(repo: Path, out: Path, *args: str) -> subprocess.Popen:
    """Return a running `corekit run 00_safe ARGS` once its staged notebook shows it is sleeping."""
    return tinyrepo.start_run(repo, NAME, out, *args, ready=lambda ipynb: slept(ipynb.read_bytes()))


def test_sigterm_stops_the_run_in_one_line_and_removes_its_staging_folder(repo, previous):
    out, before = previous
    proc = start_run(repo, out, "-p", "sleep_s", "60")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert corekit_lines(err) == [f"corekit: error: {NAME} stopped by SIGTERM; partially executed notebook: "
                                  f"{out / (NAME + '.interrupted.ipynb')}; the last complete run "
                                  f"({NAME}.metrics.json) is unchanged"], err
    assert "Traceback" not in err
    assert not list(out.glob(f".{NAME}.running-*")), "the private run folder was left behind"
    after = outputs(out)
    assert slept(after.pop(f"{NAME}.interrupted.ipynb"))
    assert f"{NAME}.interrupted.ipynb" in json.loads(after[record_name(NAME)])["paths"]     # a later run replaces it
    assert unrecorded(after, NAME) == unrecorded(before, NAME)


def test_sigterm_to_run_all_with_jobs_stops_every_running_notebook_and_keeps_each_partial_run(tmp_path):
    import time
    second = "01_safe"
    root = make_repo(tmp_path / "book", {NAME: SAFE_NOTEBOOK, second: SAFE_NOTEBOOK.replace(NAME, second)})
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("COREKIT_")} | {"COREKIT_ROOT": str(root)}
    proc = subprocess.Popen([tinyrepo.sys.executable, "-m", "corekit", "run", "all", "--jobs", "2", "-p", "sleep_s",
                             "120", "--out", str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 100
    while not all(any(in_sleeping_cell(f.read_bytes()) for f in out.glob(f".{n}.running-*/{n}.ipynb"))
                  for n in (NAME, second)):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)                 # well before the notebooks' 120 s sleep ends
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert corekit_lines(err)[-1] == "corekit: error: stopped by SIGTERM", err
    for name in (NAME, second):
        assert json.loads((out / f"{name}.interrupted.ipynb").read_text())["cells"]
        assert not (out / f"{name}.metrics.json").exists()
    assert not list(out.glob(".*.running-*")), "a private run folder was left behind"


# --------------------------------------------------------------------------------------------
# 4. --out outside the sources


@pytest.mark.parametrize("where", ["empty", "root", "notebooks", "in_notebooks", "in_lib", "results", "in_results",
                                   "link_to_notebooks"])
def test_out_in_the_sources_is_refused_before_anything(repo, tmp_path, capsys, monkeypatch, no_kernel, where):
    monkeypatch.chdir(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(repo / "notebooks", target_is_directory=True)
    out = {"empty": "", "root": str(repo), "notebooks": str(repo / "notebooks"),
           "in_notebooks": str(repo / "notebooks" / "runs"), "in_lib": str(repo / "lib" / "corekit" / "runs"),
           "results": str(repo / "results"), "in_results": str(repo / "results" / NAME),
           "link_to_notebooks": str(link / "runs")}[where]
    code, _, err = run_in_process(capsys, monkeypatch, repo, "run", NAME, "--out", out)
    assert code == 2
    assert_one_line(err, f"--out {out!r}: an empty path" if where == "empty" else "--out ")
    reason = {"empty": "empty path", "root": "the repository root", "link_to_notebooks": "inside notebooks/"}
    assert reason.get(where, f"inside {where.removeprefix('in_')}/") in err
    assert not (repo / "lib").exists() and not (repo / "results").exists()
    assert not (repo / "notebooks" / "runs").exists() and not list(tmp_path.glob(f"*{NAME}*"))


# --------------------------------------------------------------------------------------------
# 5. --cell-timeout, devices, huge integers


def test_a_fractional_cell_timeout_is_rounded_up(repo, tmp_path):
    assert cli.positive_seconds("2.5") == 3 and isinstance(cli.positive_seconds("2.5"), int)
    done = corekit("run", NAME, "--cell-timeout", "119.5", "-p", "figures", "0", "--out", str(tmp_path), root=repo)
    assert done.returncode == 0, done.stderr
    assert "TraitError" not in done.stderr


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "abc"])
def test_a_bad_cell_timeout_is_one_line(repo, capsys, monkeypatch, no_kernel, value):
    code, _, err = run_in_process(capsys, monkeypatch, repo, "run", NAME, f"--cell-timeout={value}")
    assert code == 2
    assert_one_line(err, f"argument --cell-timeout: expected a positive number of seconds, got {value!r}")


BAD_VALUES = [
    # (parameter, value, expected in the message)
    ("device", "meta", "expected a device of this machine, one of {devices}, got 'meta'"),
    ("device", "cuda:99", "expected a device of this machine, one of {devices}, got 'cuda:99'"),
    ("device", "gpu", "got 'gpu'"),
    ("seed", str(2**70), f"{2**70} is beyond 2**63-1"),
    ("seed", str(2**63), f"{2**63} is beyond 2**63-1"),
    ("moduli", f"[5, {2**64 + 1}]", f"{2**64 + 1} is beyond 2**63-1"),
    ("seed", "2**70", "expected an integer >= 0, got '2**70' (not an integer)"),
    ("epochs", "1e9", "expected an integer >= 1, got 1000000000.0 (not an integer)"),
    ("p", "51", "expected a prime, got 51 (51 is not a prime; nearest primes: 47, 53)"),
    ("p", "9", "expected a prime, got 9 (9 is not a prime; nearest primes: 7, 11)"),
    ("moduli", "[5, 9]", "expected primes, got [5, 9] (9 is not a prime; nearest primes: 7, 11)"),
    ("moduli", "[561, 7]", "(561 is not a prime"),                                  # a Carmichael number
    ("p", "3215031751", "(3215031751 is not a prime"),                              # a strong pseudoprime to 2, 3, 5, 7
]


@pytest.mark.parametrize("name, value, message", BAD_VALUES, ids=[f"{n}={v}" for n, v, _ in BAD_VALUES])
def test_bad_value_is_one_line_naming_the_parameter(repo, tmp_path, capsys, monkeypatch, no_kernel, name, value,
                                                    message):
    code, _, err = run_in_process(capsys, monkeypatch, repo, "run", NAME, "-p", name, value, "--out", str(tmp_path))
    assert code == 2
    assert_one_line(err, f"-p {name}: ")
    if "{devices}" in message:
        message = message.format(devices=", ".join(paramspec.accepted_devices()))
    assert message in err


def test_mps_is_refused_where_there_is_none(repo, tmp_path, capsys, monkeypatch, no_kernel):
    import torch

    if torch.backends.mps.is_available():
        pytest.skip("this machine has MPS")
    code, _, err = run_in_process(capsys, monkeypatch, repo, "run", NAME, "-p", "device", "mps", "--out", str(tmp_path))
    assert code == 2
    assert_one_line(err, "-p device: expected a device of this machine, one of auto, cpu")


def test_accepted_devices_are_those_of_this_machine():
    import torch

    devices = paramspec.accepted_devices()
    assert devices[:2] == ["auto", "cpu"]
    assert ("cuda" in devices) == torch.cuda.is_available()
    assert [d for d in devices if d.startswith("cuda:")] == [f"cuda:{i}" for i in range(torch.cuda.device_count())]


def test_good_values_pass(repo):
    nb = notebooks.Notebook(repo, NAME)
    values = {"p": 53, "moduli": [3, 5, 7, 2**61 - 1], "device": "cpu", "seed": 2**63 - 1, "width": 4}
    assert parameters.effective_parameters(nb, "quick", values) == values
    assert parameters.effective_parameters(nb, "quick", {"device": "auto"}) == {"device": "auto"}


def test_is_prime_agrees_with_a_sieve():
    limit = 5000
    sieve = [True] * limit
    sieve[0] = sieve[1] = False
    for n in range(2, int(limit ** 0.5) + 1):
        sieve[n * n::n] = [False] * len(sieve[n * n::n])
    assert [n for n in range(-3, limit) if is_prime(n)] == [n for n in range(limit) if sieve[n]]
    assert is_prime(2**61 - 1) and not is_prime(2**59 - 1) and not is_prime(3825123056546413051)


def test_a_non_prime_in_a_profile_names_its_file(tmp_path, capsys, monkeypatch, no_kernel):
    root = make_repo(tmp_path / "book", {NAME: SAFE_NOTEBOOK})
    write_paper_profile(root, NAME, {"p": 15})
    code, _, err = run_in_process(capsys, monkeypatch, root, "run", NAME, "--profile", "paper", "--out",
                                  str(tmp_path / "out"))
    assert code == 2
    assert_one_line(err, f"notebooks/params/paper/{NAME}.yaml: p: expected a prime, got 15")


@pytest.mark.parametrize("notebook, name, value, message", [
    ("02_grokking_cores", "p", "51", "expected a prime, got 51"),
    ("03_grokking_scaling_law", "p_values", "[31, 33]", "expected primes, got [31, 33]"),
    ("03_grokking_scaling_law", "omega_p", "35", "expected a prime, got 35"),
    ("05_entk_mlp_modular", "p", "27", "expected a prime, got 27"),
    ("01_markov_cores", "device", "meta", "expected a device of this machine"),
    ("02_grokking_cores", "seeds", f"[0, {2**70}]", "is beyond 2**63-1"),
])
def test_the_books_notebooks_are_checked_too(tmp_path, capsys, monkeypatch, no_kernel, notebook, name, value,
                                             message):
    code, _, err = run_in_process(capsys, monkeypatch, REPO, "run", notebook, "-p", name, value, "--out", str(tmp_path))
    assert code == 2
    assert_one_line(err, f"-p {name}: ")
    assert message in err
