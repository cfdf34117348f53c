"""The fenced code blocks of README.md and docs/*.md, as the documentation tests read them (Sybil's Markdown lexer).

Every block's info string says what it is (docs/testing.md, "The documentation's code blocks"):

    ```bash / ```python              run in the CPU sandbox (a scratch venv over .venv's torch)
    ```bash npu / ```python npu      run in the default torch_npu's runtime over the fake CANN
    ```bash cpu npu                  run in both (README's install command: every host)
    ```bash mindspeed / ...          run in the MindSpeed stage's venv (make test-mindspeed)
    ```bash ci                       what a CI stage runs (each line a command of .ci/run): not run by these tests
    ```bash not-run                  cannot run on these machines: its first line says why, visibly ("# not run here:
                                     needs a real Ascend host ...")
    ```output                        what the block before it prints (its lines, in order; "..." skips any)
    ```text                          a listing that is neither a command nor code (the repository layout)
"""

import re
from dataclasses import dataclass
from pathlib import Path

from sybil import Document, Region
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer
import paths

ROOT = Path(paths.ROOT)
RUNTIMES = ("cpu", "npu", "mindspeed")
LANGUAGES = ("bash", "python")
NOT_RUN_REASON = re.compile(r"^# not run here: \S.*")

_LEXER = RawFencedCodeBlockLexer(info_pattern=re.compile(r"(?P<info>[^\n]*)$\n", re.MULTILINE))


@dataclass
class Block:
    path: str     # relative to the repository
    line: int     # of the opening fence, 1-based
    info: str     # the whole info string
    kind: str     # "run", "ci", "not-run", "output", "text", or "unknown"
    language: str  # bash / python for commands and code, else ""
    runtime: str  # for "run": the runtimes it runs in, cpu / npu / mindspeed, space-separated
    source: str

    @property
    def where(self):
        return f"{self.path}:{self.line}"


def classify(info):
    """(kind, language, runtime) of an info string."""
    words = info.split()
    if words == ["output"]:
        return "output", "", ""
    if words == ["text"]:
        return "text", "", ""
    if not words or words[0] not in LANGUAGES:
        return "unknown", "", ""
    language, tags = words[0], words[1:] or ["cpu"]
    if all(t in RUNTIMES for t in tags) and len(set(tags)) == len(tags):
        return "run", language, " ".join(tags)
    if tags in (["ci"], ["not-run"]):
        return tags[0], language, ""
    return "unknown", language, ""


def _parser(document):
    for region in _LEXER(document):
        info = region.lexemes["info"].strip()
        kind, language, runtime = classify(info)
        line = document.text.count("\n", 0, region.start) + 1
        path = str(Path(document.path).resolve().relative_to(ROOT))
        block = Block(path, line, info, kind, language, runtime, str(region.lexemes["source"]))
        yield Region(region.start, region.end, parsed=block, evaluator=_not_set)


def _not_set(example):
    raise RuntimeError(f"{example.parsed.where}: no evaluator (tests/docs/test_pages.py sets one per runtime)")


def pages():
    """README.md, then docs/install.md (the pages after it install nothing), then the other pages by name."""
    rest = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "install.md")
    return [ROOT / "README.md", ROOT / "docs" / "install.md"] + rest


def document(path):
    return Document.parse(str(path), _parser)


def blocks(path):
    return [example.parsed for example in document(path)]


def all_blocks():
    return [b for p in pages() for b in blocks(p)]


def missing_lines(expected, output):
    """The lines of an output block not found in `output`, in order ("..." lines skip any); [] when all are."""
    lines = output.splitlines()
    at, missing = 0, []
    for want in (line.strip() for line in expected.splitlines()):
        if not want or want == "...":
            continue
        for i in range(at, len(lines)):
            if want in lines[i]:
                at = i + 1
                break
        else:
            missing.append(want)
    return missing
