"""Execute every notebook once (quick profile), build the book from those outputs, and check the HTML.

The session fixtures run `corekit run all` and then `corekit book --executed` on the same folder, so
nothing is executed twice. Until every notebook listed in `_toc.yml` has its `notebooks/NAME.py`,
the book is built from a copy of the repository with a tiny stand-in notebook in each missing slot.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import warnings
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from browser import CHROMIUM, MISSING, chromium, serve
from tinyrepo import REPO, corekit, tiny_notebook, write_notebook

from corekit.device import usable_cores
from corekit.runs import notebooks
from corekit.verdicts import NO_NULL, VERDICTS

pytestmark = pytest.mark.book

CHAPTER = "01_markov_cores"  # the chapter checked in depth and opened in a browser
EXECUTE_TIMEOUT_S = 3600
BUILD_TIMEOUT_S = 1800
CLAIM_KEYS = {"id", "paper", "measured", "target", "verdict", "pass"}


@pytest.fixture(scope="session")
def book_root(tmp_path_factory) -> Path:
    """The repository, or a copy of it with stand-ins for notebooks listed in _toc.yml but not written yet."""
    listed = [f.split("/", 1)[1] for f in notebooks.toc_files(REPO) if f.startswith("notebooks/")]
    missing = [name for name in listed if not (REPO / "notebooks" / f"{name}.py").is_file()]
    if not missing:
        return REPO
    warnings.warn(f"building the book with stand-ins for {', '.join(missing)} (no notebooks/NAME.py yet)",
                  stacklevel=2)
    root = tmp_path_factory.mktemp("repo")
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy2(REPO / name, root / name)
    for folder in ("book", "notebooks"):
        shutil.copytree(REPO / folder, root / folder)
    for name in missing:
        write_notebook(root, name, tiny_notebook(name, figures=5, title=f"Stand-in for {name}"))
    return root


@pytest.fixture(scope="session")
def executed(book_root, tmp_path_factory) -> Path:
    """Folder where `corekit run all` executed every notebook on the quick profile, two at a time where there are
    two cores (each pinned to half of them, with the parameters of a run on its own, so `corekit book` reuses it)."""
    out = tmp_path_factory.mktemp("executed")
    jobs = "2" if len(usable_cores()) >= 2 else "1"
    done = corekit("run", "all", "--jobs", jobs, "--out", str(out), root=book_root, timeout=EXECUTE_TIMEOUT_S)
    assert done.returncode == 0, f"corekit run all failed:\n{done.stdout}\n{done.stderr}"
    return out


@pytest.fixture(scope="session")
def book(book_root, executed, tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """The finished `corekit book` process and the HTML folder it built from the executed notebooks."""
    out = tmp_path_factory.mktemp("book")
    done = corekit("book", "--executed", str(executed), "--out", str(out), root=book_root, timeout=BUILD_TIMEOUT_S)
    assert done.returncode == 0, f"corekit book failed:\n{done.stdout}\n{done.stderr}"
    return done, out / "_build" / "html"


class PageLinks(HTMLParser):
    """Collects the image sources, link targets and table classes of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []
        self.table_classes: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "img" and attributes.get("src"):
            self.images.append(attributes["src"])
        if tag == "a" and attributes.get("href"):
            self.links.append(attributes["href"])
        if tag == "table":
            self.table_classes.extend((attributes.get("class") or "").split())


def parse_page(path: Path) -> PageLinks:
    """Return the links of the HTML page at ``path``."""
    parser = PageLinks()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def local_target(page: Path, url: str) -> Path | None:
    """Return the file a relative URL on ``page`` points at, or None for external and in-page URLs."""
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or url.startswith(("#", "mailto:", "javascript:")) or not parts.path:
        return None
    target = (page.parent / unquote(parts.path)).resolve()
    return target / "index.html" if url.endswith("/") else target


def notebook_pages(html: Path, book_root: Path) -> list[Path]:
    """Return the HTML page of every notebook in the toc."""
    return [html / "notebooks" / f"{name}.html" for name in notebooks.toc_notebooks(book_root)]


def test_every_notebook_executes_and_writes_its_metrics(book_root, executed):
    for name in notebooks.notebook_names(book_root):
        assert (executed / f"{name}.ipynb").is_file(), f"no executed notebook for {name}"
        metrics = json.loads((executed / f"{name}.metrics.json").read_text())
        assert metrics["notebook"] == name
        assert isinstance(metrics["parameters"], dict)
        assert metrics["runtime_s"] > 0
        assert metrics["claims"], f"{name} records no claims"
        for claim in metrics["claims"]:
            assert CLAIM_KEYS <= set(claim), f"{name}: claim {claim.get('id')} lacks {CLAIM_KEYS - set(claim)}"
            assert claim["verdict"] in VERDICTS
            if claim["verdict"] != "reported":
                assert claim.get("null") or claim.get("no_null") in NO_NULL, f"{name}: {claim['id']} has no null"
            if claim["verdict"] not in ("pass", "reported"):
                assert len(claim.get("reason", "").split()) >= 5, f"{name}: {claim['id']} gives no reason in words"


def test_book_reuses_the_executed_notebooks(book, book_root):
    done, html = book
    for name in notebooks.toc_notebooks(book_root):
        assert f"{name}: reusing" in done.stdout, f"corekit book re-executed {name}"
    assert (html / "index.html").is_file()


def test_every_toc_page_is_built(book, book_root):
    _, html = book
    missing = [f for f in notebooks.toc_files(book_root) if not (html / f"{f}.html").is_file()]
    assert not missing, f"pages in _toc.yml without HTML: {missing}"


def test_notebook_pages_embed_their_images_and_claims(book, book_root):
    _, html = book
    for page in notebook_pages(html, book_root):
        links = parse_page(page)
        broken = [src for src in links.images if (t := local_target(page, src)) is not None and not t.is_file()]
        assert not broken, f"{page.name}: images that do not exist: {broken}"
        assert "corekit-claims" in links.table_classes, f"{page.name} has no claims table"
    chapter = parse_page(html / "notebooks" / f"{CHAPTER}.html")
    assert len(chapter.images) >= 5, f"{CHAPTER} shows {len(chapter.images)} images, expected at least 5"


def test_chapter_opens_with_its_run_record_and_the_results_page_lists_its_claims(book, book_root, executed):
    _, html = book
    chapter = (html / "notebooks" / f"{CHAPTER}.html").read_text(encoding="utf-8")
    assert "corekit-run" in chapter and "profile</strong> quick" in chapter, f"{CHAPTER} has no run record"
    assert chapter.index("corekit-run") < chapter.index("corekit-claims")
    results = (html / "book" / "results.html").read_text(encoding="utf-8").replace("<wbr>", "")   # id break points
    claims = json.loads((executed / f"{CHAPTER}.metrics.json").read_text())["claims"]
    absent = [c["id"] for c in claims if c["id"] not in results]
    assert not absent, f"claims of {CHAPTER} missing from the results page: {absent}"
    assert f'href="../notebooks/{CHAPTER}.html' in results


def test_internal_links_resolve(book):
    _, html = book
    broken = []
    for page in sorted(html.rglob("*.html")):
        for url in parse_page(page).links:
            target = local_target(page, url)
            if target is not None and not target.exists():
                broken.append(f"{page.relative_to(html)} -> {url}")
    assert not broken, "broken internal links:\n" + "\n".join(broken)


@pytest.fixture
def served(book):
    """Base URL of the built HTML served on 127.0.0.1."""
    _, html = book
    with serve(html) as base:
        yield base


@pytest.mark.skipif(not CHROMIUM.exists(), reason=MISSING)
def test_chapter_renders_in_chromium(served, executed, tmp_path):
    url = f"{served}/notebooks/{CHAPTER}.html"
    screenshot = tmp_path / f"{CHAPTER}.png"
    done = chromium(f"--screenshot={screenshot}", "--window-size=1280,4000", url, profile=tmp_path / "shot")
    assert screenshot.is_file(), f"no screenshot of {url}:\n{done.stderr[-2000:]}"
    assert screenshot.stat().st_size > 20_000, f"the screenshot of {url} is nearly empty"
    keep = REPO / "_build" / "screenshots"
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy2(screenshot, keep / screenshot.name)

    dom = chromium("--dump-dom", url, profile=tmp_path / "dom").stdout
    assert "corekit-claims" in dom, f"the DOM of {url} has no claims table"
    claims = json.loads((executed / f"{CHAPTER}.metrics.json").read_text())["claims"]
    text = unescape(dom.replace("<wbr>", ""))  # an id may break after an underscore in a narrow column
    absent = [c["id"] for c in claims if c["id"] not in text]
    assert not absent, f"claims missing from the rendered page: {absent}"
