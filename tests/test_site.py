"""How an executed notebook is staged for the book: progress bars, figure numbers, panel layout."""
import sys
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

from corekit.plots import integer_ticks, panel_grid  # noqa: E402
from corekit.runs.site import tidy_streams  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "book" / "_ext"))
import corekit_numbering  # noqa: E402


def stream(text, name="stderr"):
    return {"output_type": "stream", "name": name, "text": text}


def test_a_progress_bar_leaves_no_residue_but_other_stderr_stays():
    bar = ("training 48 model(s):  10%|█         | 800/8000 [00:10<01:30,  1.20s/it]\r"
           "training 48 model(s):  40%|████      | 3200/8000 [1:05:58<1:38:57,  1.24s/it, test_acc=0.979–1.000]\n")
    tidy = tidy_streams([stream(bar), stream("UserWarning: a real warning\n"), stream("100%|██| 3/3 [x]\n", "stdout")])
    assert tidy == [stream("UserWarning: a real warning\n"), stream("100%|██| 3/3 [x]\n", "stdout")]


def test_a_cell_with_only_a_progress_bar_shows_no_stream():
    assert tidy_streams([stream("contexts kept: 100%|██████████| 1024/1024 [07:40<00:00,  2.22it/s]")]) == []


def test_figures_are_numbered_per_page_with_the_chapter_number_on_a_chapter():
    env = SimpleNamespace(toc_fignumbers={
        "notebooks/02_grokking_cores": {"figure": {"fig-b": (19,), "fig-a": (18,)}, "table": {"t": (3,)}},
        "book/results": {"figure": {"x": (1,), "y": (2,)}},
        "book/two_lenses": {"figure": {"z": (46,)}},
    })
    changed = corekit_numbering.renumber(None, env)
    assert env.toc_fignumbers["notebooks/02_grokking_cores"] == {"figure": {"fig-a": (2, 1), "fig-b": (2, 2)},
                                                                "table": {"t": (2, 1)}}
    assert env.toc_fignumbers["book/two_lenses"] == {"figure": {"z": (1,)}}
    assert changed == ["book/two_lenses", "notebooks/02_grokking_cores"]


def test_panel_grid_lays_panels_two_to_a_row_and_removes_empty_slots():
    fig, axes = panel_grid(5, ncols=2, panel=(4.0, 3.0))
    assert axes.shape == (5,) and len(fig.axes) == 5
    assert tuple(fig.get_size_inches()) == (8.0, 9.0)
    rows = sorted({round(ax.get_position().y0, 3) for ax in axes})
    assert len(rows) == 3
    integer_ticks(axes[0], "x")
    axes[0].set_xlim(0, 3)
    fig.canvas.draw()
    assert all(float(t).is_integer() for t in axes[0].get_xticks())


def test_a_chapter_page_shows_the_claims_table_of_the_one_renderer(tmp_path):
    import nbformat

    from corekit.runs.publish import restage_claims_table
    html_out = {"output_type": "execute_result", "execution_count": 3, "metadata": {},
                "data": {"text/html": "<table class='corekit-claims'>old</table>", "text/plain": "| old |"}}
    cells = [nbformat.v4.new_code_cell("x = 1", outputs=[nbformat.from_dict(dict(html_out))]),
             nbformat.v4.new_code_cell("claims.check(...)\nclaims.table()\n", outputs=[nbformat.from_dict(dict(html_out))])]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    restage_claims_table(path, "<table>new</table>")
    shown = nbformat.read(path, as_version=4).cells
    assert shown[0].outputs[0]["data"]["text/html"] == "<table class='corekit-claims'>old</table>"
    assert shown[1].outputs[0]["data"] == {"text/html": "<table>new</table>", "text/plain": "| old |"}
    markdown_only = nbformat.v4.new_code_cell("claims.table()", outputs=[nbformat.from_dict(
        {"output_type": "execute_result", "execution_count": 4, "metadata": {}, "data": {"text/markdown": "| a |"}})])
    nbformat.write(nbformat.v4.new_notebook(cells=[markdown_only]), path)
    restage_claims_table(path, "<table>new</table>")
    assert nbformat.read(path, as_version=4).cells[0].outputs[0]["data"]["text/html"] == "<table>new</table>"


def test_the_verdict_box_says_how_the_run_differs_from_the_paper_profile():
    from corekit.runs.notebooks import Notebook
    from corekit.runs.parameters import read_profile
    from corekit.runs.publish import against_paper, verdict_box

    nb = Notebook(Path(__file__).resolve().parents[1], "02_grokking_cores")
    paper = read_profile(nb, "paper")
    assert against_paper(nb, {"parameters": dict(paper)}) == "This run used the settings of the paper profile."
    smaller = {**paper, "p": 31, "d_model": 64, "export_checkpoints": "_build/elsewhere.pt"}
    sentence = against_paper(nb, {"parameters": smaller})
    assert sentence == (f"Against the paper profile, this run used `p` 31 (paper profile: {paper['p']}); "
                        f"`d_model` 64 (paper profile: {paper['d_model']}).")
    assert sentence in verdict_box({"claims": []}, sentence)


def test_a_long_module_path_in_a_result_table_may_wrap_but_numbers_stay_whole():
    from corekit.runs.site import breakable_cells
    row = "<td>model.layers.16.mlp.down_proj</td><td>1,310,720</td><td>0.00522</td>"
    shown = breakable_cells(f'<table class="corekit-values"><tr>{row}</tr></table>')
    assert "<td>model.<wbr>layers.<wbr>16.<wbr>mlp.<wbr>down_<wbr>proj</td><td>1,310,720</td><td>0.00522</td>" in shown
    assert breakable_cells(f'<table class="other"><tr>{row}</tr></table>') == f'<table class="other"><tr>{row}</tr></table>'


def test_a_long_claims_table_is_folded_on_its_chapter_page(tmp_path):
    import nbformat

    from corekit.runs.publish import FOLD_CLAIMS_OVER, restage_claims_table, verdict_box
    out = {"output_type": "execute_result", "execution_count": 1, "metadata": {}, "data": {"text/markdown": "| a |"}}
    path = tmp_path / "nb.ipynb"
    for n, folded in ((FOLD_CLAIMS_OVER, False), (FOLD_CLAIMS_OVER + 1, True)):
        cell = nbformat.v4.new_code_cell("claims.table()", outputs=[nbformat.from_dict(dict(out))])
        nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
        restage_claims_table(path, "<table></table>", n)
        assert ("hide-output" in nbformat.read(path, as_version=4).cells[0].metadata.get("tags", [])) == folded
        claims = [{"id": f"c{i}", "verdict": "pass", "target": "x"} for i in range(n)]
        assert ("end of the page, folded)" in verdict_box({"claims": claims})) == folded


def test_a_result_table_of_many_rows_scrolls_in_its_own_box():
    import nbformat

    from corekit.runs.site import SCROLL_ROWS, scroll_long_tables
    for rows, scrolls in ((SCROLL_ROWS, False), (SCROLL_ROWS + 1, True)):
        html = "<table>" + "<tr><td>1</td></tr>" * rows + "</table>"
        cell = nbformat.v4.new_code_cell("table(rows)", outputs=[nbformat.from_dict(
            {"output_type": "execute_result", "execution_count": 1, "metadata": {}, "data": {"text/html": html}})])
        scroll_long_tables(cell)
        assert ("scroll-output" in cell.metadata.get("tags", [])) == scrolls


def test_nothing_a_reader_has_points_outside_the_repository():
    """The notebooks, their profiles, the book's pages and the README name no file of the authors' workspace
    (``../shared``, its DESIGN.md): a reader's clone holds none of it."""
    files = [p for p in (REPO / "notebooks").rglob("*") if p.suffix in (".py", ".ipynb", ".yaml", ".md")]
    files += [p for p in (REPO / "book").rglob("*") if p.suffix in (".md", ".yml", ".py", ".bib", ".css")
              and "_build" not in p.parts]
    files += [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "_config.yml", REPO / "_toc.yml"]
    assert len(files) > 30, f"only {len(files)} files found under {REPO}"
    for outside in ("../shared", "DESIGN.md"):
        named = [str(p.relative_to(REPO)) for p in files if outside in p.read_text(encoding="utf-8")]
        assert not named, f"files that point at {outside}, which a reader does not have: {named}"
