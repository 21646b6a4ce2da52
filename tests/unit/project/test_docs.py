"""The documentation's front door and its links (issue 38).

- README.md is a front door: at most 250 lines and 2,500 words, no sentence over 40 words; the rest lives in docs/.
- The import layers are listed in one document only (docs/architecture.md; pyproject.toml's contract is the
  linter's own copy).
- Every repository path named in src/, docs/, hack/harness/README.md, README.md, DEVELOPERS.md and pyproject.toml
  exists. A *repository path* is a run of path characters (letters, digits, `_ . - /`) that starts at a word
  boundary with one of the repository's top-level directories and a slash (`src/`, `docs/`, `hack/`, ...) or is
  one of its top-level files (`README.md`, `Makefile`, ...). A run followed by a placeholder or pattern character
  (`< * { $ %`) or preceded by one (`/`, `.`, `~`, `$`, `{`: a path under another root, a cache, a URL) names no
  single file and is not checked; a trailing `.` or `/` is punctuation. It must name a file or a directory, or the
  stem of files (a benchmark's `.json` and `.md`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
README = REPO / "README.md"
MAX_LINES, MAX_WORDS, MAX_SENTENCE_WORDS = 250, 2_500, 40
ROOTS = ("src", "docs", "hack", "tests", "bench", "charts", "crds", "examples", "manifests", "requirements", "runtimes")
TOP_FILES = ("README.md", "DEVELOPERS.md", "Makefile", "Dockerfile", "pyproject.toml")
PATH = re.compile(
    r"(?<![\w/.~${-])((?:" + "|".join(ROOTS) + r")/[\w./-]*+|" + "|".join(re.escape(f) for f in TOP_FILES) + r")"
    r"(?![\w<*{$%])"
)
LAYER_NAMES = ("codec", "api", "runtime", "flags", "config", "k8s", "controller", "ui", "offline", "cli")
LAYER = re.compile(r"`(?:trainjob_operator\.)?(" + "|".join(LAYER_NAMES) + r")(?:/|\.py)?`")


def sources() -> list[Path]:
    files = [README, REPO / "DEVELOPERS.md", REPO / "pyproject.toml", REPO / "hack" / "harness" / "README.md"]
    files += sorted((REPO / "docs").rglob("*.md"))
    files += sorted(p for p in (REPO / "src").rglob("*") if p.suffix in {".py", ".md", ".yaml", ".sh", ".html", ".js"})
    return [f for f in files if f.is_file()]


def exists(path: Path) -> bool:
    """A file or directory, or the stem of files (`bench/results/cluster-20261123-235801` for its .json and .md)."""
    return path.exists() or any(path.parent.glob(path.name + ".*"))


def named_paths(text: str) -> set[str]:
    return {m.group(1).rstrip("./") for m in PATH.finditer(text)} - {""}


def prose(markdown: str) -> str:
    """The README's sentences: without code blocks, tables, headings, link targets and inline code."""
    markdown = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    lines = [line for line in markdown.splitlines() if not line.lstrip().startswith(("|", "#", "<", "!["))]
    text = "\n".join(lines)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return re.sub(r"`[^`]*`", "code", text)


def sentences(text: str) -> list[str]:
    paragraphs = re.split(r"\n\s*\n|\n\s*[-*] |\n\s*\d+\. ", text)
    return [s.strip() for p in paragraphs for s in re.split(r"(?<=[.!?:;])\s+(?=[A-Z`(*])", " ".join(p.split()))]


@pytest.mark.parametrize(
    ("sentence", "text", "expected"),
    [
        ("a path in backticks", "see `hack/harness/cluster.py`.", {"hack/harness/cluster.py"}),
        ("a directory with its slash", "under docs/ and src/trainjob_operator/", {"docs", "src/trainjob_operator"}),
        ("a top-level file", "read README.md, then the Makefile", {"README.md", "Makefile"}),
        ("a placeholder is not a path", "tests/unit/<package>/test_x.py and crds/*.yaml", set()),
        ("a path under another root is not ours", "~/.cache/trainjob-operator/bin and ../shared/src/x", set()),
        ("a URL's path is not ours", "https://github.com/kubeflow/trainer/tree/master/docs/x", set()),
        ("a dotted module is not a path", "trainjob_operator.runtime.plugins", set()),
    ],
)
def test_what_counts_as_a_path(sentence: str, text: str, expected: set[str]) -> None:
    assert named_paths(text) == expected, sentence


def test_every_repository_path_named_in_the_docs_and_sources_exists() -> None:
    missing = sorted(
        f"{source.relative_to(REPO)}: {path}"
        for source in sources()
        for path in named_paths(source.read_text(errors="replace"))
        if not exists(REPO / path)
    )
    assert missing == []


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_LINES
    assert len(text.split()) <= MAX_WORDS


def test_no_readme_sentence_is_over_40_words() -> None:
    long = [s for s in sentences(prose(README.read_text())) if len(s.split()) > MAX_SENTENCE_WORDS]
    assert long == []


def test_the_sentence_splitter() -> None:
    text = "One two. Three four: five\n\nsix `a. b` seven.\n- item one\n- item two"
    assert sentences(prose(text)) == ["One two.", "Three four: five", "six code seven.", "item one", "item two"]


def lists_the_layers(markdown: str, window: int = 15) -> bool:
    """Seven or more of the layers' packages named in code within `window` lines: a table or list of the layers."""
    lines = markdown.splitlines()
    named = [set(LAYER.findall(line)) for line in lines]
    return any(len(set().union(*named[i : i + window])) >= 7 for i in range(max(1, len(lines))))


def test_a_list_of_the_layers_is_recognised() -> None:
    listing = "`cli` > `ui` | `offline` > `controller` > `k8s` >\n`config` > `flags` > `runtime` > `api` > `codec`"
    assert lists_the_layers(listing)
    assert not lists_the_layers("the core (`runtime/`, `api/`, `codec/`) and `controller/`")


def test_the_layers_are_listed_in_one_document() -> None:
    docs = [
        README,
        REPO / "DEVELOPERS.md",
        *sorted((REPO / "docs").rglob("*.md")),
        REPO / "hack" / "harness" / "README.md",
    ]
    listing = [str(d.relative_to(REPO)) for d in docs if d.is_file() and lists_the_layers(d.read_text())]
    assert listing == ["docs/architecture.md"]


def test_every_relative_link_of_the_docs_resolves() -> None:
    """A Markdown link `[text](target)` outside code blocks, not a URL: its target exists beside the document."""
    docs = [
        README,
        REPO / "DEVELOPERS.md",
        REPO / "hack" / "harness" / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
    ]
    broken = []
    for doc in docs:
        text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", text):
            if not target.startswith(("http:", "https:", "mailto:")) and not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(REPO)}: {target}")
    assert broken == []
