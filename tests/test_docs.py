"""The documentation stays true: README.md, RELIABILITY.md and docs/*.md.

- Every link between them resolves, on GitHub's terms (relative to the file, to a file that
  exists, to an anchor its headings make), and each heading's anchor is the same on GitHub and
  on the MkDocs site (make docs).
- Every module path (`lakerules.scan.planning`) they and the shim's comments name exists, and
  every class of the shim is in docs/architecture.md's list.
- Every code block marked runnable runs against the test session: an HTML comment
  `<!-- runnable -->` on the line before a ```python or ```sql fence. A page's blocks run in
  order in a fresh namespace (`lake.db` and `'db.` become it), Python ones with `spark` (and
  `lakerules.session(...)` returning it) in a scratch folder; SQL ones statement by statement
  (each ends with `;` at the end of a line). A `# ... text ...` comment on a line of a Python
  block says its output shows `text`, and is checked.
- The site builds with `mkdocs build --strict` (skipped when MkDocs is not installed).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", ROOT / "RELIABILITY.md", *sorted(DOCS.glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _load_hooks():
    spec = importlib.util.spec_from_file_location("lakerules_docs_hooks", DOCS / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return hooks


_HOOKS = _load_hooks()


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _split(text: str):
    """(is_code, piece) over a markdown text: the site's own split (docs/hooks.py), so the links
    this test checks are the ones the site rewrites."""
    return _HOOKS._prose(text)


def _prose(text: str) -> str:
    return "".join(piece for is_code, piece in _split(text) if not is_code)


def _headings(text: str) -> list[str]:
    return [m.group(2).strip() for m in re.finditer(r"^(#{1,6})\s+(.+)$", _prose(text), re.M)]


def _plain(heading: str) -> str:
    """A heading's text as rendered: no code marks, emphasis or link targets."""
    heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    return re.sub(r"[`*]", "", heading)


def _github_anchor(heading: str) -> str:
    text = _plain(heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _mkdocs_anchor(heading: str) -> str:
    """Python-Markdown's toc slugify, which the site's anchors come from."""
    text = unicodedata.normalize("NFKD", _plain(heading)).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in _headings(path.read_text()):
        a = _github_anchor(heading)
        out.add(a if a not in seen else f"{a}-{seen[a]}")
        seen[a] = seen.get(a, 0) + 1
    return out


def test_the_link_checker_finds_a_broken_link(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Title\n\n[ok](#title) [gone](#nothing) [file](q.md) `[code](#x)`\n")
    (tmp_path / "q.md").write_text("# Q\n")
    assert _broken(page) == ["#nothing"]


def _broken(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(_prose(page.read_text())):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() or (anchor and (dest.suffix != ".md" or anchor not in _anchors(dest))):
            broken.append(target)
    return broken


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_link_resolves(page):
    assert _broken(page) == [], f"{_rel(page)}: broken links"


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_anchors_are_the_same_on_github_and_the_site(page):
    differ = [(h, _github_anchor(h), _mkdocs_anchor(h)) for h in _headings(page.read_text())
              if _github_anchor(h) != _mkdocs_anchor(h)]
    assert differ == [], f"{_rel(page)}: headings whose anchors differ (rename them)"


def test_every_page_is_in_the_site():
    config = (ROOT / "mkdocs.yml").read_text()
    nav = set(re.findall(r"^\s+- [^:]+: (\S+\.md)$", config, re.M))
    generated = {"index.md", "reliability.md", "benchmarks.md"}  # docs/hooks.py's PAGES
    assert nav == {p.name for p in DOCS.glob("*.md")} | generated


def _module_names(text: str) -> set[str]:
    """Dotted names under lakerules that read as module paths: not a setting (spark.lakerules.x),
    property or summary key (lakerules.operation, lakerules.previous-folders, lakerules.stream.<query
    id>), nor OPTIMIZE's
    table properties (lakerules.optimize.targetFileSize)."""
    keys = {"lakerules.operation", "lakerules.borrows", "lakerules.zorder", "lakerules.nestedids",
            "lakerules.rowGroups", "lakerules.rowgroups", "lakerules.merge", "lakerules.stream"}
    names = set()
    for m in re.finditer(r"(?<![\w.$/-])lakerules(?:\.[A-Za-z_]\w*)+(?![\w-])", text):
        name = m.group(0)
        if any(name == k or name.startswith(k + ".") for k in keys):
            continue
        if re.fullmatch(r"lakerules\.optimize\.(zorder\.)?[a-z]+[A-Z]\w*", name):
            continue
        names.add(name)
    return names


def _exists(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _java_comments(path: Path) -> str:
    return "\n".join(line for line in path.read_text().splitlines() if re.match(r"\s*(\*|//|/\*)", line)
                     ) + "\n".join(re.findall(r"//(.*)$", path.read_text(), re.M))


JAVA = sorted((ROOT / "jvm-shim" / "src").rglob("*.java"))


def test_module_paths_named_in_the_docs_and_the_shim_exist():
    assert _module_names("see lakerules.scan.planning, spark.lakerules.x, lakerules.operation") == {"lakerules.scan.planning"}
    assert not _exists("lakerules.distributed_planning") and _exists("lakerules.scan.manifest_job")
    texts = {_rel(p): _prose(p.read_text()) + "".join(c for is_code, c in _split(p.read_text()) if is_code)
             for p in PAGES}
    texts.update({_rel(p): _java_comments(p) for p in JAVA})
    missing = {f: sorted(n for n in _module_names(t) if not _exists(n)) for f, t in texts.items()}
    assert {f: n for f, n in missing.items() if n} == {}


def test_the_architecture_page_lists_every_class_of_the_shim():
    page = (DOCS / "architecture.md").read_text()
    named = set(re.findall(r"`(?:functions\.)?([A-Z]\w+)`", page))
    assert {p.stem for p in JAVA} - named == set()
    assert len(JAVA) > 20, "the shim's sources were not found"
    mentioned = set()
    for p in PAGES:
        mentioned |= set(re.findall(r"\bio\.lakerules\.((?:functions\.)?[A-Z]\w+)", p.read_text()))
    stems = {p.relative_to(ROOT / "jvm-shim/src/main/java/io/lakerules").with_suffix("").as_posix().replace("/", ".")
             for p in JAVA}
    assert mentioned - stems == set()


def test_the_architecture_page_lists_every_module():
    """docs/architecture.md's package table names each subpackage's modules, all and only those."""
    page = (DOCS / "architecture.md").read_text()
    section = page.split("\n## Packages\n", 1)[1].split("\n## ", 1)[0]
    listed = {}
    for row in re.findall(r"^\| `(\w+)` \|.*\| ([^|]+) \|$", section, re.M):
        listed[row[0]] = set(re.findall(r"`(\w+)`", row[1]))
    package = ROOT / "python" / "lakerules"
    actual = {p.name: {m.stem for m in p.glob("*.py") if m.stem != "__init__"}
              for p in package.iterdir() if (p / "__init__.py").is_file()}
    actual["errors"] = {"errors"}
    assert listed == actual


def test_every_setting_is_in_the_settings_page():
    """Each spark.lakerules.* setting the code reads, and each OPTIMIZE setting, is named in
    docs/settings.md."""
    from lakerules.optimize.rewrite import SETTINGS

    page = (DOCS / "settings.md").read_text()
    sources = [*(ROOT / "python" / "lakerules").rglob("*.py"), *JAVA]
    named = {m.rstrip(".") for p in sources for m in re.findall(r"spark\.lakerules\.[A-Za-z0-9_.-]+", p.read_text())}
    assert len(named) > 10, named
    optimize = "spark.lakerules.optimize."  # spark.lakerules.optimize.<name>: the names below
    assert sorted(n for n in named if n not in page and n.removeprefix(optimize) not in SETTINGS) == []
    assert sorted(n for n in SETTINGS if f"`{n}`" not in page) == []


# ---- runnable blocks ------------------------------------------------------------------------

def _runnable(page: Path) -> list[tuple[str, str]]:
    """(language, code) of the blocks marked runnable, in order."""
    lines = page.read_text().splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() == "<!-- runnable -->":
            fence = re.match(r"^```(python|sql)\s*$", lines[i + 1])
            assert fence, f"{_rel(page)}:{i + 2}: a runnable block is a ```python or ```sql fence"
            end = lines.index("```", i + 2)
            blocks.append((fence.group(1), "\n".join(lines[i + 2:end])))
    return blocks


RUNNABLE = [p for p in PAGES if _runnable(p)]


def test_runnable_blocks_are_found():
    names = {p.name for p in RUNNABLE}
    assert {"README.md", "sql.md", "procedures.md", "optimize.md", "metadata-tables.md"} <= names, names


def _statements(sql: str) -> list[str]:
    out, current = [], []
    for line in sql.splitlines():
        line = re.sub(r"\s+--[^']*$", "", line)
        current.append(line)
        if line.rstrip().endswith(";"):
            out.append("\n".join(current).rstrip().rstrip(";"))
            current = []
    assert not "\n".join(current).strip(), f"a statement does not end with ';': {current}"
    return out


@pytest.mark.parametrize("page", RUNNABLE, ids=_rel)
def test_runnable_blocks_run(page, spark, ns, tmp_path, monkeypatch):
    import lakerules
    from lakerules.rules import registry

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(lakerules, "session", lambda *args, **kwargs: spark)
    rules = [list(b.rules) for b in registry.BATCHES]
    here = lambda code: re.sub(r"\blake\.db\b", f"lake.{ns}", code).replace("'db.", f"'{ns}.")  # noqa: E731
    try:
        for language, code in _runnable(page):
            if language == "sql":
                for statement in _statements(here(code)):
                    spark.sql(statement).collect()
                continue
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(here(code), f"{_rel(page)} (runnable block)", "exec"), {"spark": spark, "lakerules": lakerules})
            for shown in re.findall(r"#\s*\.\.\.\s*(.+?)\s*\.\.\.\s*$", code, re.M):
                assert shown in out.getvalue(), f"{_rel(page)}: the output does not show {shown!r}:\n{out.getvalue()}"
    finally:
        for batch, kept in zip(registry.BATCHES, rules):
            batch.rules[:] = kept


# ---- the site -------------------------------------------------------------------------------

def test_the_site_builds_without_warnings(tmp_path):
    pytest.importorskip("mkdocs")
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").is_file() and (tmp_path / "site" / "img" / "layout-zorder.png").is_file()
