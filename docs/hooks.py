"""MkDocs hooks (mkdocs.yml): the site is README.md (its front page), docs/*.md, RELIABILITY.md and
bench/RESULTS.md. Every page's links are written for GitHub, relative to the file in the
repository (README.md links `docs/sql.md`, a docs page `../RELIABILITY.md`); here each is turned
into the link between the site's pages, and the other repository files a page links to
(examples, tests) are copied into the site under `repo/`. Links inside code are left alone.

tests/test_docs.py checks the same links on the repository's files; `mkdocs build --strict`
(make docs) checks them, anchors included, on the site.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Repository markdown files outside docs/ that are pages of the site, and their names there.
PAGES = {"README.md": "index.md", "RELIABILITY.md": "reliability.md", "bench/RESULTS.md": "benchmarks.md"}
REPO = "repo/"
LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)(\))")
FENCE = re.compile(r"^(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:.+?)\1", re.S)


def _prose(text: str):
    """(is_code, piece) over a markdown text: fenced blocks and inline code spans are code."""
    chunk, inside = [], None

    def prose(lines):
        text, last = "".join(lines), 0
        for m in CODE_SPAN.finditer(text):
            yield False, text[last:m.start()]
            yield True, m.group(0)
            last = m.end()
        yield False, text[last:]

    for line in text.splitlines(keepends=True):
        fence = FENCE.match(line)
        if inside is None and fence:
            yield from prose(chunk)
            chunk, inside = [line], fence.group(1)
        elif inside is not None and fence and fence.group(1) == inside:
            chunk.append(line)
            yield True, "".join(chunk)
            chunk, inside = [], None
        else:
            chunk.append(line)
    if inside is None:
        yield from prose(chunk)
    else:
        yield True, "".join(chunk)


def _repo_path(src_uri: str) -> str:
    """Where a site page's markdown lives in the repository."""
    for repo, site in PAGES.items():
        if site == src_uri:
            return repo
    return "docs/" + src_uri


def _site_path(repo: str) -> str:
    """Where a repository file is on the site."""
    if repo in PAGES:
        return PAGES[repo]
    if repo.startswith("docs/"):
        return repo[len("docs/"):]
    return REPO + repo


def _targets(text: str, page_repo: str):
    """The repository paths a page links to (relative links, outside code)."""
    for is_code, piece in _prose(text):
        if is_code:
            continue
        for m in LINK.finditer(piece):
            target = m.group(2)
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.partition("#")[0]
            yield posixpath.normpath(posixpath.join(posixpath.dirname(page_repo), path))


def on_files(files, config):
    from mkdocs.structure.files import File

    for repo, site in PAGES.items():
        files.append(File.generated(config, site, abs_src_path=str(ROOT / repo)))
    copied = set()
    sources = [(repo, (ROOT / repo).read_text()) for repo in PAGES]
    sources += [("docs/" + f.src_uri, Path(f.abs_src_path).read_text()) for f in files.documentation_pages()
                if f.src_uri not in PAGES.values()]
    for page_repo, text in sources:
        for repo in _targets(text, page_repo):
            if repo in PAGES or repo.startswith("docs/") or repo in copied or not (ROOT / repo).is_file():
                continue
            copied.add(repo)
            files.append(File.generated(config, REPO + repo, abs_src_path=str(ROOT / repo)))
    return files


def on_page_markdown(markdown: str, page, config, files):
    page_repo = _repo_path(page.file.src_uri)
    here = posixpath.dirname(page.file.src_uri)

    def relink(m):
        target = m.group(2)
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            return m.group(0)
        path, hash_, anchor = target.partition("#")
        repo = posixpath.normpath(posixpath.join(posixpath.dirname(page_repo), path))
        site = posixpath.relpath(_site_path(repo), here or ".")
        return f"{m.group(1)}{site}{hash_}{anchor}{m.group(3)}"

    return "".join(piece if is_code else LINK.sub(relink, piece) for is_code, piece in _prose(markdown))
