"""scripts/gpu-wheelhouse.sh, without a package index: its requirements agree with pyproject.toml, it asks pip for
wheels of the GPU machine's Python and platform, keeps out what that machine has, and refuses a bad command line."""
import re
import subprocess
import sys

import pytest
from tinyrepo import REPO

SCRIPT = REPO / "scripts" / "gpu-wheelhouse.sh"
#: pyproject.toml's book and llm requirements the wheelhouse leaves out: the book's build (not needed to run a
#: notebook), and what a GPU machine prepared for scripts/gpu-check.sh has already.
NOT_SHIPPED = {"jupyter-book", "sphinx-mathjax-offline", "sphinxcontrib-lightbox2", "transformers", "accelerate"}
#: A stand-in for `python -m pip download`: records its arguments and leaves a few wheels in --dest.
FAKE_PIP = """#!/usr/bin/env bash
echo "$@" > "$(dirname "$0")/pip-args"
while (($#)); do [[ $1 == --dest ]] && dest=$2; shift; done
for wheel in papermill-2.7.0-py3-none-any numpy-2.3.0-cp312-cp312-manylinux_2_28_x86_64 MarkupSafe-3.0.2-cp312-cp312-any \\
             spacy_legacy-3.0.12-py2.py3-none-any PyYAML-6.0.2-cp312-cp312-manylinux_2_17_x86_64; do
    touch "$dest/$wheel.whl"
done
"""


def script_requirements() -> list[str]:
    """Return the REQUIREMENTS array of the script."""
    array = re.search(r"^REQUIREMENTS=\((.*?)\)$", SCRIPT.read_text(), re.S | re.M)
    assert array, "scripts/gpu-wheelhouse.sh has no REQUIREMENTS=( ... ) array"
    return re.findall(r'"([^"]+)"', array.group(1))


def test_requirements_are_pyprojects():
    """Every requirement the script fetches is written the same in pyproject.toml, and it misses none but NOT_SHIPPED."""
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    declared = {re.split(r"[<>=!~ ]", spec, maxsplit=1)[0]: spec for spec in extras["book"] + extras["llm"]}
    fetched = script_requirements()
    assert [spec for spec in fetched if spec not in declared.values()] == [], "differs from pyproject.toml"
    missing = set(declared) - NOT_SHIPPED - {re.split(r"[<>=!~ ]", spec, maxsplit=1)[0] for spec in fetched}
    assert not missing, f"pyproject.toml's requirements {sorted(missing)} are not in the wheelhouse"


def run(*args, tmp_path):
    """Run the script with the stand-in pip; return the finished process."""
    fake = tmp_path / "python"
    fake.write_text(FAKE_PIP)
    fake.chmod(0o755)
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": str(fake), "TMPDIR": str(tmp_path)})


def test_fetches_for_the_gpu_machine_and_keeps_out_what_it_has(tmp_path):
    out = tmp_path / "wheels"
    done = run(str(out), "--python-version", "3.13", "accelerate>=1.0", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    pip = (tmp_path / "pip-args").read_text().split()
    assert pip[:2] == ["-m", "pip"] and pip[2] == "download" and "--only-binary=:all:" in pip
    assert pip[pip.index("--python-version") + 1] == "3.13" and "manylinux2014_x86_64" in pip
    assert set(script_requirements()) | {"accelerate>=1.0"} <= set(pip)
    assert sorted(p.name.split("-")[0] for p in out.iterdir()) == ["papermill", "spacy_legacy"]
    left = re.search(r"left out, as the GPU machine has them \(--keep-all keeps them\): (.*)", done.stdout)
    assert left and sorted(left.group(1).split()) == ["markupsafe", "numpy", "pyyaml"], done.stdout
    assert not list(tmp_path.glob("gpu-wheelhouse.*")), "the download folder was left behind"


def test_keep_all_keeps_every_wheel(tmp_path):
    out = tmp_path / "wheels"
    assert run(str(out), "--keep-all", tmp_path=tmp_path).returncode == 0
    assert len(list(out.glob("*.whl"))) == 5


@pytest.mark.parametrize("args, message", [((), "DIR missing"), (("x", "--bogus"), "unknown option --bogus"),
                                           (("x", "--python-version", "12"), "--python-version needs X.Y"),
                                           (("x", "--platform"), "--platform needs a wheel platform tag")])
def test_refuses_a_bad_command_line(tmp_path, args, message):
    done = run(*args, tmp_path=tmp_path)
    assert done.returncode == 2 and f"gpu-wheelhouse.sh: {message}" in done.stderr
    assert not (tmp_path / "pip-args").exists()
