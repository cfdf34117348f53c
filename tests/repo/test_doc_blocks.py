"""The documentation's code blocks are all accounted for (make test; make test-docs runs them, tests/docs):
every fenced block of README.md and docs/*.md says what it is (tests/support/doc_blocks.py), the ones not run say why where
the reader sees it, at most a quarter of them are not run, a block marked as CI's names commands .ci/run runs, an
output block follows a block that runs, and a listing names paths that exist."""

import glob
import re

import pytest

from doc_blocks import NOT_RUN_REASON, ROOT, all_blocks, classify, missing_lines

# Not under the aarch64 emulation (tools/aarch64/run.sh selects -m 'not arch_independent'): no
# architecture-specific code of the package here, and make test runs it natively.
pytestmark = pytest.mark.arch_independent

BLOCKS = all_blocks()
RUNS = [b for b in BLOCKS if b.kind in ("run", "ci", "not-run")]  # the blocks of commands or code
MARKED = [b for b in RUNS if b.kind != "run"]


def ci_commands():
    """The commands .ci/run runs (its `run X` lines)."""
    text = (ROOT / ".ci" / "run").read_text()
    return {m.group(1).strip() for m in re.finditer(r"^run (.+)$", text, re.MULTILINE)}


def test_classify():
    assert classify("bash") == ("run", "bash", "cpu")
    assert classify("python npu") == ("run", "python", "npu")
    assert classify("bash mindspeed") == ("run", "bash", "mindspeed")
    assert classify("bash cpu npu") == ("run", "bash", "cpu npu")
    assert classify("bash ci npu") == ("unknown", "bash", "")
    assert classify("bash ci") == ("ci", "bash", "")
    assert classify("bash not-run") == ("not-run", "bash", "")
    assert classify("output") == ("output", "", "")
    assert classify("") == ("unknown", "", "")
    assert classify("sh") == ("unknown", "", "")
    assert classify("bash gpu") == ("unknown", "bash", "")


def test_missing_lines():
    out = "a first line\nsecond: 2\nthird\n"
    assert missing_lines("first\n...\nthird", out) == []
    assert missing_lines("third\nsecond", out) == ["second"]  # in order
    assert missing_lines("fourth", out) == ["fourth"]


def test_blocks_are_found():
    """The lexer sees the pages' blocks (a check that finds none would pass on anything)."""
    assert len(RUNS) >= 25
    assert {r for b in RUNS if b.kind == "run" for r in b.runtime.split()} == {"cpu", "npu", "mindspeed"}


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.where)
def test_every_block_says_what_it_is(block):
    assert block.kind != "unknown", (
        f"{block.where}: info string {block.info!r}: use bash / python [npu|mindspeed|ci|not-run], output or text "
        "(tests/support/doc_blocks.py)")
    if block.kind == "not-run":
        first = block.source.splitlines()[0] if block.source.strip() else ""
        assert NOT_RUN_REASON.match(first), f"{block.where}: a block not run starts with '# not run here: <why>'"
    if block.kind == "ci":
        stages = ci_commands()
        for line in block.source.splitlines():
            command = line.split("#")[0].strip()
            assert not command or command in stages, f"{block.where}: {command!r} is not a stage of .ci/run {stages}"


def test_output_blocks_follow_a_block_that_runs():
    previous = None
    for block in BLOCKS:
        if block.kind == "output":
            assert previous is not None and previous.kind == "run" and previous.path == block.path, block.where
        previous = block


def test_at_most_a_quarter_is_not_run():
    assert len(MARKED) * 4 <= len(RUNS), [b.where for b in MARKED]


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.kind == "text"], ids=lambda b: b.where)
def test_listings_name_existing_paths(block):
    """A listing's first column (csrc/ops/<family>/cpu.cpp, csrc/core/cpu/{isa,vec}.h, ...) names files."""
    for line in block.source.splitlines():
        first = line.split()[0].rstrip(",") if line.strip() and not line.startswith(" ") else ""
        if "/" not in first:
            continue
        names = [first]
        brace = re.search(r"\{([^}]*)\}", first)
        if brace:
            names = [first[:brace.start()] + alt + first[brace.end():] for alt in brace.group(1).split(",")]
        for name in names:
            pattern = re.sub(r"<[^>]+>", "*", name)
            assert glob.glob(str(ROOT / pattern)), f"{block.where}: {name} names nothing in the repository"


def test_the_runtimes_are_run():
    """cpu and npu by make test-docs, mindspeed by the MindSpeed stage (tools/versions.py)."""
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test-docs:", makefile, re.MULTILINE) and "for rt in cpu npu" in makefile
    assert "NPU_EXT_DOCS_RUNTIME" in (ROOT / "tools" / "versions.py").read_text()
    assert "make test-docs" in ci_commands()


def unexplained_installs(blocks):
    """Lines of blocks of commands that `pip install` into a user's stack neither with --no-deps nor with a comment
    saying what the install pulls (pip would otherwise resolve torch's dependencies: megatron-core's wheel asks for
    about 3 GB of CUDA packages)."""
    bad = []
    for b in blocks:
        if b.kind not in ("run", "not-run") or b.language != "bash":
            continue
        for i, line in enumerate(b.source.splitlines(), b.line + 1):
            command, _, comment = line.partition("#")
            installs = [part for part in command.split("&&") if "pip install" in part]
            if any("--no-deps" not in part for part in installs) and not comment.strip():
                bad.append(f"{b.path}:{i}")
    return bad


def test_install_checker():
    from doc_blocks import Block

    block = Block("p.md", 1, "bash", "run", "bash", "cpu",
                  "pip install --no-deps x\npip install y\npip install z   # tools only\npip install a && pip install --no-deps .\n")
    assert unexplained_installs([block]) == ["p.md:3", "p.md:5"]


def test_every_install_into_a_users_stack_says_what_it_pulls():
    assert unexplained_installs(BLOCKS) == []
