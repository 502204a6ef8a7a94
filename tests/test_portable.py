"""Portable paths: what a published file may say of the machine that made it."""
from pathlib import Path

import nbformat

from corekit import oracle
from corekit.runs.portable import OUTSIDE, portable_notebook, portable_parameters, portable_text


def test_paths_become_relative_to_the_repository_or_name_only_the_file(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    text = (f"checkpoints written to {root}/_build/ckpt.pt; kernel at /srv/x/kernel.json; a ratio 3/4/5, "
            "https://example.org/a/b, </td></tr> and it/s")
    assert portable_text(text, root) == ("checkpoints written to _build/ckpt.pt; kernel at "
                                         f"{OUTSIDE}/kernel.json; a ratio 3/4/5, https://example.org/a/b, "
                                         "</td></tr> and it/s")
    assert portable_parameters({"p": 31, "out": f"{root}/x.pt", "name": "a/b"}, root) == \
        {"p": 31, "out": "x.pt", "name": "a/b"}


def test_a_notebook_loses_papermills_private_paths_and_keeps_the_rest(tmp_path):
    root, run = tmp_path / "repo", tmp_path / "out" / ".nb.running-1-x"
    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"input_path": "/tmp/corekit-1/nb.ipynb", "output_path": f"{run}/nb.ipynb",
                                "parameters": {"seed": 3, "output_dir": str(run), "export": f"{root}/_build/c.pt"}}
    injected = nbformat.v4.new_code_cell(f'# Parameters\nseed = 3\nexport = "{root}/_build/c.pt"\n'
                                         f'output_dir = "{run}"\n')
    injected.metadata["tags"] = ["injected-parameters"]
    printed = nbformat.v4.new_code_cell("print(x)")
    printed.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"saved {run}/figures/a.png\n"),
                       nbformat.v4.new_output("display_data", data={"text/plain": f"'{root}/notebooks'",
                                                                    "image/png": "iVBO+/ab/cd"})]
    nb.cells = [injected, printed]
    portable_notebook(nb, root)
    assert nb.metadata["papermill"] == {"parameters": {"seed": 3, "export": "_build/c.pt"}}
    assert nb.cells[0].source == '# Parameters\nseed = 3\nexport = "_build/c.pt"'
    assert nb.cells[1].outputs[0]["text"] == "saved figures/a.png\n"
    assert nb.cells[1].outputs[1]["data"] == {"text/plain": "'notebooks'", "image/png": "iVBO+/ab/cd"}


def test_an_oracle_command_names_no_clone_and_no_machine_path():
    root = oracle.ORACLE_DIR.parents[1]
    command = oracle.command_line(str(root / "scripts" / "oracle" / "cores_02.py"),
                                  ["--authors-repo", "/home/me/cores", "--checkpoints",
                                   str(root / "_build" / "c.pt"), "--seeds", "2"])
    assert command == ("python scripts/oracle/cores_02.py --authors-repo <authors' clone> "
                       "--checkpoints _build/c.pt --seeds 2")
    assert oracle.command_line("x.py", ["--authors-repo=/a/b", "--out", str(Path("/elsewhere/o.json"))]) == \
        "python x.py --authors-repo=<authors' clone> --out <o.json>"
