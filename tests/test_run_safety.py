"""`corekit run` / `corekit book` on bad input and interrupted runs.

Bad values are rejected before a kernel starts (the tests fail if one starts) with one line naming the
parameter and what it accepts. Runs are all or nothing: a failed, interrupted or killed run leaves the
last complete run in place, and `book` names a corrupt executed notebook or metrics file and re-executes.
"""
from __future__ import annotations

import ast
import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import tinyrepo
from tinyrepo import REPO, corekit, make_repo, record_name, run_in_process, unrecorded

from corekit.runs import cli, notebooks, parameters, paramspec, source_hash

NAME = "00_slow"
SLOW_NOTEBOOK = '''\
# %% [markdown]
# # A notebook that saves figures and can sleep, fail or skip its metrics

# %% tags=["parameters"]
figures = 2  # range: [0, inf)
sleep_s = 0.0  # range: [0, inf)
fail = False
seeds = [0, 1]  # length: 2 or more; range: [0, inf)
betas = [0.9, 0.98]  # length: 2; range: [0, 1)
rate = 0.1  # range: [0, 1)
lr = 1e-3  # range: (0, inf)
layers = 2  # range: [1, inf) or null
norm = "pre"  # one of: pre, post, none
checkpoint_dir = ""  # path; where to keep state
transition = [[0.5, 0.5], [0.25, 0.75]]  # range: [0, 1]
output_dir = ""  # path; where the metrics file and figures go

# %%
import time

import matplotlib.pyplot as plt

from corekit import plots
from corekit.runs.claims import Claims

claims = Claims("{name}", dict(figures=figures, sleep_s=sleep_s, checkpoint_dir=checkpoint_dir,
                               output_dir=output_dir))
figs = plots.Figures(output_dir, "{name}")
for k in range(figures):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, k])
    figs.save(fig, f"figure_{{k}}")
    plt.close(fig)
print("sleeping", flush=True)
time.sleep(sleep_s)
if fail:
    raise RuntimeError("asked to fail")
claims.report("figures", figures, kind="paper", statistic="the number of figures")
claims.write()
'''.format(name=NAME)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A book holding the one notebook 00_slow."""
    return make_repo(tmp_path_factory.mktemp("book"), {NAME: SLOW_NOTEBOOK})




# --------------------------------------------------------------------------------------------
# Bad values: one line, before any kernel

BAD_VALUES = [
    # (parameter, value, expected message)                             category
    ("seeds", "abc", "expected a list of at least 2 integers >= 0, got 'abc' (not a list)"),        # wrong type
    ("seeds", "5", "expected a list of at least 2 integers >= 0, got 5 (not a list)"),              # scalar for list
    ("seeds", "[0, 0.5]", "got [0, 0.5] (0.5 is not an integer)"),                                 # int list stays int
    ("seeds", "[0, -1]", "got [0, -1] (-1 is out of range)"),                                      # item range
    ("seeds", "[3]", "got [3] (1 item)"),                                                          # min length
    ("betas", "[0.9]", "expected a list of 2 numbers in [0, 1), got [0.9] (1 item)"),              # exact length
    ("figures", "1e2", "expected an integer >= 0, got 100.0 (not an integer)"),                    # float for int
    ("figures", "-1", "expected an integer >= 0, got -1 (out of range)"),                          # range
    ("figures", "true", "expected an integer >= 0, got true (not an integer)"),                    # bool for int
    ("figures", "2024-01-01", "expected an integer >= 0, got '2024-01-01' (not an integer)"),      # YAML date
    ("lr", ".nan", "expected a number > 0, got nan (not a finite number)"),                        # non-finite
    ("lr", "0", "expected a number > 0, got 0 (out of range)"),                                    # open bound
    ("lr", "abc", "expected a number > 0, got 'abc' (not a number)"),                              # text for number
    ("rate", "1", "expected a number in [0, 1), got 1 (out of range)"),                            # interval
    ("layers", "0", "expected an integer >= 1 or null, got 0 (out of range)"),                     # nullable range
    ("norm", "rms", "expected one of pre, post, none, got 'rms' (not one of them)"),               # choices
    ("fail", "1", "expected true or false, got 1 (not true or false)"),                            # bool
    ("transition", "[[1.5, -0.5], [0, 1]]", "got [[1.5, -0.5], [0, 1]] (1.5 is out of range)"),    # nested list
    ("transition", "[0.5, 0.5]", "got [0.5, 0.5] (0.5 is not a list)"),                            # nesting depth
]


@pytest.mark.parametrize("name, value, message", BAD_VALUES, ids=[f"{n}={v}" for n, v, _ in BAD_VALUES])
def test_bad_value_is_one_line_naming_the_parameter_before_any_kernel(repo, tmp_path, capsys, monkeypatch,
                                                                      no_kernel, name, value, message):
    code, _, err = run_in_process(capsys, monkeypatch, repo, "run", NAME, "-p", name, value, "--out", str(tmp_path))
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"corekit: error: -p {name}: ")
    assert message in err


def test_good_values_pass_and_paths_become_absolute(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    nb = notebooks.Notebook(repo, NAME)
    params = parameters.effective_parameters(nb, "quick", {"seeds": [0, 5, 9], "betas": [0, 0.5], "rate": 0, "lr": 3,
                                                    "layers": None, "transition": [[1, 0], [0, 1]],
                                                    "checkpoint_dir": "ckpt", "norm": "post"})
    assert params["checkpoint_dir"] == str(tmp_path / "ckpt")     # not notebooks/ckpt, the kernel's folder
    assert params["lr"] == 3 and params["layers"] is None


def test_a_bad_paper_profile_names_its_file(tmp_path, capsys, monkeypatch, no_kernel):
    root = make_repo(tmp_path / "book", {NAME: SLOW_NOTEBOOK})
    profile = root / "notebooks" / "params" / "paper" / f"{NAME}.yaml"
    profile.parent.mkdir(parents=True)
    profile.write_text("seeds: [0, 0.5]\n")
    code, _, err = run_in_process(capsys, monkeypatch, root, "run", NAME, "--profile", "paper")
    assert code == 2
    assert err == (f"corekit: error: notebooks/params/paper/{NAME}.yaml: seeds: expected a list of at least 2 "
                   "integers >= 0, got [0, 0.5] (0.5 is not an integer)\n")


def test_an_unreadable_declaration_names_the_notebook_and_parameter(tmp_path, capsys, monkeypatch, no_kernel):
    root = make_repo(tmp_path / "book", {NAME: SLOW_NOTEBOOK.replace("# range: [1, inf) or null", "# range: >> 1")})
    code, _, err = run_in_process(capsys, monkeypatch, root, "run", NAME, "--out", str(tmp_path / "out"))
    assert code == 2 and f"{NAME}.py: parameter layers: cannot read 'range: >> 1'" in err


@pytest.mark.parametrize("notebook, name, value, message", [
    ("01_markov_cores", "seeds", "[0, 0.5]", "(0.5 is not an integer)"),
    ("01_markov_cores", "epochs", "0", "expected an integer >= 1, got 0"),
    ("01_markov_cores", "lr", ".nan", "(not a finite number)"),
    ("02_grokking_cores", "p", "abc", "expected an integer >= 3, got 'abc'"),
    ("02_grokking_cores", "betas", "[0.9]", "expected a list of 2 numbers in [0, 1), got [0.9] (1 item)"),
    ("05_entk_mlp_modular", "seed", "2024-01-01", "expected an integer >= 0, got '2024-01-01'"),
])
def test_the_books_notebooks_declare_what_they_accept(tmp_path, capsys, monkeypatch, no_kernel, notebook, name,
                                                      value, message):
    code, _, err = run_in_process(capsys, monkeypatch, REPO, "run", notebook, "-p", name, value, "--out", str(tmp_path))
    assert code == 2 and err.startswith(f"corekit: error: -p {name}: ") and message in err


def test_every_default_and_paper_profile_satisfies_its_declarations():
    for name in notebooks.notebook_names(REPO):
        nb = notebooks.Notebook(REPO, name)
        rules = parameters.accepted_values(nb)
        for param in parameters.read_parameters(nb).values():
            paramspec.check(ast.literal_eval(param.default), rules[param.name], REPO)
        if nb.paper_profile.is_file():
            parameters.effective_parameters(nb, "paper", {})


def test_papermill_reads_every_declared_parameter():
    from papermill.translators import PythonTranslator

    for name in notebooks.notebook_names(REPO):
        nb = notebooks.Notebook(REPO, name)
        seen = {p.name for p in PythonTranslator.inspect({"source": parameters.parameters_cell(nb.py)})}
        assert seen == set(parameters.read_parameters(nb)), f"papermill cannot read some of {name}'s parameter lines"


@pytest.mark.parametrize("where", ["file", "under_file", "proc"])
def test_unusable_out_is_one_line(repo, tmp_path, capsys, monkeypatch, no_kernel, where):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    out = {"file": a_file, "under_file": a_file / "sub", "proc": Path("/proc/corekit-out")}[where]
    code, _, err = run_in_process(capsys, monkeypatch, repo, "run", NAME, "--out", str(out))
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"corekit: error: --out {out}: ")


def test_oserror_and_broken_pipe_end_in_one_line(capsys, monkeypatch):
    def raise_(error):
        def command(args):
            raise error
        return command
    monkeypatch.setitem(cli.COMMANDS, "list", raise_(OSError(28, "No space left on device", "/x/y")))
    assert cli.main(["list"]) == 1
    assert capsys.readouterr().err == "corekit: error: [Errno 28] No space left on device: '/x/y'\n"
    monkeypatch.setitem(cli.COMMANDS, "list", raise_(KeyboardInterrupt()))
    assert cli.main(["list"]) == 130
    assert capsys.readouterr().err == "corekit: error: interrupted\n"


def test_closed_pipe_is_one_line(repo):
    env = {**os.environ, "COREKIT_ROOT": str(repo)}
    code = ("import sys; from corekit.runs import cli; sys.stdout = open(sys.stdout.fileno(), 'w', buffering=1); "
            "sys.exit(cli.main(['list']))")
    reader = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    reader.stdout.close()                                     # the reader (e.g. `| head`) has gone
    err = reader.stderr.read().decode()
    assert reader.wait() == 1
    assert err == "corekit: error: output closed before the command finished (broken pipe)\n"


# --------------------------------------------------------------------------------------------
# All-or-nothing runs


def outputs(out: Path) -> dict[str, bytes]:
    """Return every file under ``out`` (relative path → content)."""
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.fixture
def good_run(repo, tmp_path):
    """A complete run of 00_slow (three figures) in a fresh folder: (output folder, its files)."""
    out = tmp_path / "out"
    done = corekit("run", NAME, "-p", "figures", "3", "--out", str(out), root=repo)
    assert done.returncode == 0, done.stderr
    return out, outputs(out)


def sleeping_cell_runs(ipynb: Path) -> bool:
    """Return whether papermill has marked the notebook's sleeping cell as running."""
    with contextlib.suppress(json.JSONDecodeError):          # a save in progress
        return any("time.sleep" in "".join(cell["source"]) and cell["metadata"]["papermill"].get("status") == "running"
                   for cell in json.loads(ipynb.read_text())["cells"])
    return False


def start_run(repo: Path, out: Path, *args: str, ready=sleeping_cell_runs) -> subprocess.Popen:
    """Return a running `corekit run 00_slow ARGS` once ``ready`` holds for its staged notebook (default: sleeping cell)."""
    return tinyrepo.start_run(repo, NAME, out, *args, ready=ready)


def test_run_is_published_whole_and_removes_stale_figures(repo, good_run):
    out, first = good_run
    record = record_name(NAME)                                 # what the run wrote, all a later run may replace
    assert sorted(first) == [record, f"{NAME}.ipynb", f"{NAME}.metrics.json"] + [f"figures/{NAME}/figure_{k}.png"
                                                                                  for k in range(3)]
    metrics = json.loads(first[f"{NAME}.metrics.json"])
    assert metrics["source_hash"] == source_hash.source_hash(notebooks.Notebook(repo, NAME), {"figures": 3})
    done = corekit("run", NAME, "-p", "figures", "1", "--out", str(out), root=repo)
    assert done.returncode == 0, done.stderr
    assert sorted(outputs(out)) == [record, f"{NAME}.ipynb", f"{NAME}.metrics.json", f"figures/{NAME}/figure_0.png"]
    assert json.loads((out / record).read_text())["paths"] == [f"{NAME}.ipynb", f"{NAME}.metrics.json",
                                                                f"figures/{NAME}", f"figures/{NAME}/figure_0.png"]
    assert [p.name for p in out.glob(".*")] == [record], "a private run folder or temporary file was left behind"


def test_killed_run_leaves_the_last_complete_run_intact(repo, good_run):
    out, before = good_run
    proc = start_run(repo, out, "-p", "sleep_s", "60", "-p", "figures", "1")
    proc.kill()                                              # SIGKILL: no chance to clean up
    proc.communicate()
    assert {k: v for k, v in outputs(out).items() if not k.startswith(f".{NAME}.running-")} == before
    done = corekit("run", NAME, "-p", "figures", "0", "--out", str(out), root=repo)   # the next run tidies up
    assert done.returncode == 0, done.stderr
    assert not list(out.glob(f".{NAME}.running-*"))


def test_interrupted_run_is_kept_as_such_in_one_line(repo, good_run):
    out, before = good_run
    proc = start_run(repo, out, "-p", "sleep_s", "60")
    proc.send_signal(signal.SIGINT)                          # Ctrl-C
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    lines = [line for line in err.splitlines() if line.startswith("corekit")]
    assert lines == [f"corekit: error: {NAME} interrupted; partially executed notebook: "
                     f"{out / (NAME + '.interrupted.ipynb')}; the last complete run ({NAME}.metrics.json) is unchanged"]
    assert "Traceback" not in err
    after = outputs(out)
    assert "sleeping" in after.pop(f"{NAME}.interrupted.ipynb").decode()
    assert f"{NAME}.interrupted.ipynb" in json.loads(after[record_name(NAME)])["paths"]     # a later run replaces it
    assert unrecorded(after, NAME) == unrecorded(before, NAME)


def test_ctrl_c_while_the_kernel_starts_is_one_line_too(repo, good_run):
    out, before = good_run
    proc = start_run(repo, out, "-p", "sleep_s", "60", ready=lambda ipynb: True)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    lines = [line for line in err.splitlines() if line.startswith("corekit")]
    assert len(lines) == 1 and lines[0].startswith(f"corekit: error: {NAME} interrupted"), err
    assert "Traceback" not in err
    after = outputs(out)
    after.pop(f"{NAME}.interrupted.ipynb", None)
    assert unrecorded(after, NAME) == unrecorded(before, NAME)


def test_failed_and_timed_out_runs_are_kept_as_failed(repo, good_run):
    out, before = good_run
    done = corekit("run", NAME, "-p", "fail", "true", "--out", str(out), root=repo)
    assert done.returncode == 1 and "asked to fail" in done.stderr
    assert f"partially executed notebook: {out / (NAME + '.failed.ipynb')}" in done.stderr
    done = corekit("run", NAME, "-p", "sleep_s", "60", "--cell-timeout", "3", "--out", str(out), root=repo)
    assert done.returncode == 1
    assert f"{NAME}: a cell ran longer than --cell-timeout 3 s" in done.stderr
    after = outputs(out)
    assert "sleeping" in after.pop(f"{NAME}.failed.ipynb").decode()
    assert f"{NAME}.failed.ipynb" in json.loads(after[record_name(NAME)])["paths"]
    assert unrecorded(after, NAME) == unrecorded(before, NAME)


# --------------------------------------------------------------------------------------------
# corekit book on corrupt inputs


@pytest.mark.parametrize("corrupt", ["metrics_truncated", "metrics_without_hash", "ipynb_truncated"])
def test_book_names_a_corrupt_input_and_executes_again(repo, good_run, capsys, corrupt):
    out, _ = good_run
    nb = notebooks.Notebook(repo, NAME)
    params = parameters.effective_parameters(nb, "quick", {})
    metrics_path, ipynb = out / f"{NAME}.metrics.json", out / f"{NAME}.ipynb"
    corekit("run", NAME, "--out", str(out), root=repo)       # the defaults, as `book` runs them
    assert cli.is_current(nb, "quick", params, out)
    if corrupt == "metrics_truncated":
        metrics_path.write_text(metrics_path.read_text()[:40])
    elif corrupt == "metrics_without_hash":
        metrics = json.loads(metrics_path.read_text())
        del metrics["source_hash"]
        metrics_path.write_text(json.dumps(metrics))
    else:
        ipynb.write_bytes(ipynb.read_bytes()[:200])
    capsys.readouterr()
    assert not cli.is_current(nb, "quick", params, out)
    bad = ipynb if corrupt.startswith("ipynb") else metrics_path
    assert f"corekit: {bad} is corrupt (" in capsys.readouterr().err
