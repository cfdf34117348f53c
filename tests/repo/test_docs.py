"""The documentation's links resolve, and README stays an entry point.

Every relative link in README.md, CHANGELOG.md and docs/*.md must name an existing file (or directory), and a
`#anchor` must name a heading of the target markdown file (or of the same file), with GitHub's heading slugs:
lowercase, punctuation dropped except '-' and '_', spaces to '-', '-1', '-2', ... for repeated headings. Links
in fenced code blocks and inline code are not links. README.md has at most 300 lines and its first code block
holds exactly the two commands `make bench` and `make test`. No torch needed: plain text.
"""

import re
import subprocess
from pathlib import Path

import pytest
import paths

# Not under the aarch64 emulation (tools/aarch64/run.sh selects -m 'not arch_independent'): no
# architecture-specific code of the package here, and make test runs it natively.
pytestmark = pytest.mark.arch_independent

ROOT = Path(paths.ROOT)
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 300

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def doc_files():
    return [README, ROOT / "CHANGELOG.md"] + sorted(DOCS.glob("*.md"))


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield n, line


def slug(heading):
    """GitHub's anchor for a heading's text: inline markup reduced to its text, lowercase, every character that
    is not a letter, digit, '_', '-' or space dropped, spaces to '-'."""
    text = _INLINE_CODE.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading keeps its text
    text = re.sub(r"<[^>]+>", "", text)  # HTML tags
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in "-_ ")
    return text.replace(" ", "-")


def anchors(path):
    """Every anchor a markdown file defines: its headings' slugs (repeats numbered as GitHub does) and HTML
    name/id anchors."""
    seen, out = {}, set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        m = _HEADING.match(line)
        if m:
            base = slug(m.group(2))
            k = seen.get(base, 0)
            seen[base] = k + 1
            out.add(base if k == 0 else f"{base}-{k}")
        out.update(_HTML_ANCHOR.findall(line))
    return out


def links(path):
    """(line number, target) of every link in the file's prose."""
    for n, line in prose_lines(path.read_text(encoding="utf-8")):
        m = _REF_DEF.match(line)
        if m:
            yield n, m.group(1)
            continue
        for target in _LINK.findall(_INLINE_CODE.sub("", line)):
            yield n, target


def broken_links(path):
    """The relative links of `path` that do not resolve, as 'file:line: target (reason)'."""
    bad = []
    for n, target in links(path):
        if not target or _SCHEME.match(target) or target.startswith("//"):
            continue  # external (http:, https:, mailto:, ...): not checked here
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(path.parent.parent) if path.parent != ROOT else path.name}:{n}: {target}"
        if not dest.exists():
            bad.append(f"{where} (no such file)")
        elif anchor and dest.is_file() and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{where} (no heading with anchor #{anchor} in {dest.name})")
    return bad


# ----------------------------------------------------------------------------------------------------------
# The checker itself: it must tell a broken link from a good one, or the link test below could never fail.
@pytest.mark.parametrize("heading, expected", [
    ("Semantics notes", "semantics-notes"),
    ("What was verified here (no NPU, no CANN) and how", "what-was-verified-here-no-npu-no-cann-and-how"),
    ("torch.compile on the NPU (torchair)", "torchcompile-on-the-npu-torchair"),
    ("0.1.0 tables (AMD EPYC Zen 3, AVX2)", "010-tables-amd-epyc-zen-3-avx2"),
    ("Bug reports: `python -m torch_ext`", "bug-reports-python--m-torch_ext"),
    ("gelu erf fp32: how it reached its target on AVX2", "gelu-erf-fp32-how-it-reached-its-target-on-avx2"),
    ("The **[README](../README.md)** link", "the-readme-link"),
])
def test_slug_follows_github(heading, expected):
    assert slug(heading) == expected


def test_checker_finds_broken_links(tmp_path):
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## Known part\n\n## Known part\n", encoding="utf-8")
    page.write_text(
        "# Page\n\n"
        "[good file](../other.md), [good anchor](../other.md#known-part), [repeat](../other.md#known-part-1),\n"
        "[self](#page), [external](https://example.com/x.md#nowhere)\n"
        "[missing file](../nothing.md) and [missing anchor](../other.md#unknown-part)\n"
        "[bad self anchor](#not-here), `[in code](../also-nothing.md)`\n"
        "```\n[in a fence](../fenced-nothing.md)\n```\n"
        "[ref]: ../ref-nothing.md\n",
        encoding="utf-8")
    bad = broken_links(page)
    assert [b.split(": ", 1)[1] for b in bad] == [
        "../nothing.md (no such file)",
        "../other.md#unknown-part (no heading with anchor #unknown-part in other.md)",
        "#not-here (no heading with anchor #not-here in page.md)",
        "../ref-nothing.md (no such file)",
    ], bad


# ----------------------------------------------------------------------------------------------------------
# The repository's documentation.
def test_every_relative_link_resolves():
    files = [f for f in doc_files() if f.exists()]
    assert README in files and len(files) > 3, files
    bad = [b for f in files for b in broken_links(f)]
    assert not bad, "broken links:\n" + "\n".join(bad)


def test_readme_is_short():
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines (at most {README_MAX_LINES}): move detail to docs/"


def test_readme_starts_with_the_two_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if _FENCE.match(line))
    end = next(i for i in range(start + 1, len(lines)) if _FENCE.match(lines[i]))
    commands = [line.split("#", 1)[0].strip() for line in lines[start + 1:end]]
    assert [c for c in commands if c] == ["make bench", "make test"]


# docs/history.md is the one page README.md does not list: the reference pages say what is true now, and the history
# of measurements is reached from the documentation index (docs/README.md) and from the top of CHANGELOG.md.
HISTORY = DOCS / "history.md"


def test_every_docs_page_is_reachable_and_links_back():
    readme_targets = {t.split("#", 1)[0] for _, t in links(README)}
    for page in sorted(DOCS.glob("*.md")):
        if page == HISTORY:
            assert "history.md" in {t.split("#", 1)[0] for _, t in links(DOCS / "README.md")}, \
                "docs/README.md does not link to history.md"
            changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
            top = changelog[:changelog.index("\n## ")]
            assert "(docs/history.md)" in top, "CHANGELOG.md's introduction does not link to docs/history.md"
        else:
            assert f"docs/{page.name}" in readme_targets, f"README.md does not link to docs/{page.name}"
        targets = {t.split("#", 1)[0] for _, t in links(page)}
        assert "../README.md" in targets, f"docs/{page.name} does not link back to README.md"


# ----------------------------------------------------------------------------------------------------------
# Names the documentation uses: make targets and repository paths.
# A repository path is a backticked token that starts with one of the repository's top-level directories below (or
# is one of its top-level files); it must exist. Globs (`tests/npu/test_npu_*.py`) must match something; `<...>`
# placeholders match any one path component, `{a,b}` expands; `::test` node ids are checked for their file. Anything
# else in backticks (paths outside the repository such as `../elsewhere/...`, generated ones under `build/`, `.venv` or
# `benchmarks/results/`, a user's files) is not a repository path and is not checked. CHANGELOG.md is history: it
# may name what is gone.
_TOP_DIRS = ("csrc/", "torch_ext/", "tests/", "tools/", "benchmarks/", "docs/", "examples/", ".ci/")
_GENERATED = ("benchmarks/results/",)  # written by make bench (.gitignore)
_TOP_FILES = {"setup.py", "Makefile", "pyproject.toml", "requirements-dev.txt", "README.md", "CHANGELOG.md"}
_MAKE = re.compile(r"(?<![\w-])make\s+([a-z][a-z0-9-]*)")


def current_docs():
    return [README] + sorted(DOCS.glob("*.md"))


def code_spans(path):
    """(line number, text) of every inline code span and every fenced line."""
    fence = None
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = _FENCE.match(line)
        if m:
            fence = m.group(1) if fence is None else (None if m.group(1) == fence else fence)
            continue
        if fence is not None:
            yield n, line
        else:
            for m in _INLINE_CODE.finditer(line):
                yield n, m.group(2)


def make_targets():
    """The targets the Makefile defines (rules and .PHONY)."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    out = set(re.findall(r"^([a-z][a-z0-9-]*)\s*:(?!=)", text, re.M))
    for m in re.finditer(r"^\.PHONY:((?:.*\\\n)*.*)$", text, re.M):
        out |= set(m.group(1).replace("\\\n", " ").split())
    return out


def unknown_make_targets(path, known):
    return [f"{path.name}:{n}: make {t}" for n, text in code_spans(path) for t in _MAKE.findall(text)
            if t not in known]


def _expand(token):
    """`a/{b,c}.d` -> a/b.d, a/c.d (one brace group at a time)."""
    m = re.search(r"\{([^{}]*)\}", token)
    if not m:
        return [token]
    return [t for alt in m.group(1).split(",") for t in _expand(token[:m.start()] + alt + token[m.end():])]


def repository_paths(text):
    """The repository paths a code span names (see above)."""
    for word in re.findall(r"(?:[^\s,;()'\"={}]|\{[^{}\s]*\})+", text):
        for token in _expand(word.rstrip(".:")):
            token = token.split("::", 1)[0]
            if (token.startswith(_TOP_DIRS) or token in _TOP_FILES) and not token.startswith(_GENERATED):
                yield token


def missing_paths(path, root=ROOT):
    bad = []
    for n, text in code_spans(path):
        for p in repository_paths(text):
            pattern = re.sub(r"<[^>]*>", "*", p)
            if not any(True for _ in root.glob(pattern.rstrip("/"))):
                bad.append(f"{path.name}:{n}: {p}")
    return bad


def test_checkers_find_unknown_targets_and_missing_paths(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("")
    page = tmp_path / "page.md"
    page.write_text("Run `make test` or `make nothing`; see `tests/test_a.py::test_x`, `tests/test_*.py`,\n"
                    "`tests/missing.py`, `tests/<name>.py`, `../elsewhere/X.md`, `build/npu/lib`, `tests/test_{a,b}.py`.\n"
                    "```bash\nmake bench BENCH_ARGS=--variants   # and tests/also_missing.py\n```\n", encoding="utf-8")
    assert unknown_make_targets(page, {"test", "bench"}) == ["page.md:1: make nothing"]
    assert missing_paths(page, tmp_path) == ["page.md:2: tests/missing.py", "page.md:2: tests/test_b.py",
                                             "page.md:4: tests/also_missing.py"]


def test_every_make_target_named_exists():
    known = make_targets()
    assert {"test", "bench", "test-npu", "test-mindspeed"} <= known, known
    bad = [b for f in current_docs() + [ROOT / ".ci" / "run"] for b in unknown_make_targets(f, known)]
    assert not bad, "make targets the Makefile does not define:\n" + "\n".join(bad)


def test_every_repository_path_named_exists():
    bad = [b for f in current_docs() for b in missing_paths(f)]
    assert not bad, "repository paths that do not exist:\n" + "\n".join(bad)


# ----------------------------------------------------------------------------------------------------------
# One install command: every command in the documentation that builds torch_ext (`--no-build-isolation`) is README's
# install command for one's own stack (or its second half, in prose), or the project sandbox's editable install
# exactly as the Makefile runs it.
def install_commands():
    """(README's install command, the Makefile's editable install)."""
    readme = README.read_text(encoding="utf-8")
    user = next(line.split("#", 1)[0].strip() for line in readme.splitlines()
                if line.startswith("pip install") and "--no-build-isolation" in line)
    m = re.search(r"install --quiet (--no-build-isolation[^&;\n]*?-e \.)", (ROOT / "Makefile").read_text())
    return user, "pip install " + m.group(1)


def odd_install_commands(path, user, editable):
    """Every command (between `&&`, `;` and a comment) of a code span that builds torch_ext, unless it is README's
    (`pip install --no-build-isolation --no-deps .`) or the Makefile's editable install."""
    allowed = {user.split("&&")[-1].strip(), editable}
    bad = []
    for n, text in code_spans(path):
        for cmd in re.split(r"&&|;|\s#", text):
            cmd = cmd.strip()
            if "--no-build-isolation" in cmd and cmd.startswith("pip install") and cmd not in allowed:
                bad.append(f"{path.name}:{n}: {cmd}")
    return bad


def test_install_command_checker(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("`pip install --no-build-isolation --no-deps .`, `pip install --no-build-isolation -e .`\n",
                    encoding="utf-8")
    assert odd_install_commands(page, 'pip install "setuptools>=70.1" ninja wheel && pip install '
                                '--no-build-isolation --no-deps .', "pip install --no-build-isolation --no-deps -e .") \
        == ["page.md:1: pip install --no-build-isolation -e ."]


def test_the_install_command_is_one():
    user, editable = install_commands()
    assert user == 'pip install "setuptools>=70.1" ninja wheel && pip install --no-build-isolation --no-deps .', user
    assert editable == "pip install --no-build-isolation --no-deps -e .", editable
    bad = [b for f in current_docs() for b in odd_install_commands(f, user, editable)]
    assert not bad, "install commands other than README's:\n" + "\n".join(bad)


# ----------------------------------------------------------------------------------------------------------
# Every schema the documentation quotes (a table row `| ... | \`op\` | \`(args) -> returns\` | ...`) is the one
# its operator family's csrc/ops/<family>/library.cpp defines for that op.
def schemas():
    """{"op" or "op.overload": "(args) -> returns"} from the m.def calls of csrc/ (each family's library.cpp, and the
    core's introspection op)."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "csrc").rglob("*.cpp")))
    out = {}
    for call in re.findall(r"m\.def\(((?:\s*\"(?:[^\"\\]|\\.)*\")+)\s*\)", text):
        schema = "".join(bytes(lit, "utf-8").decode("unicode_escape") for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', call))
        name, rest = schema.split("(", 1)
        out[name.strip()] = "(" + rest
    return out


def quoted_schemas(path):
    """(line number, op, schema) of every table row quoting a schema."""
    for n, line in prose_lines(path.read_text(encoding="utf-8")):
        m = re.match(r"\|.*\|\s*`([a-z_][\w.]*)`\s*\|\s*`(\([^`]*\) -> [^`]*)`", line)
        if m:
            yield n, m.group(1), m.group(2)


def test_every_quoted_schema_is_the_registered_one():
    defined = schemas()
    assert defined["prelu_backward"] == "(Tensor grad_output, Tensor self, Tensor weight) -> (Tensor, Tensor)"
    families = [d for d in (ROOT / "csrc" / "ops").iterdir() if d.is_dir()]
    # per family a forward op, a backward op and its .out overload; and one probe
    assert len(families) >= 5 and len(defined) == 3 * len(families) + 1, sorted(defined)
    quoted = [(f.name, n, op, sch) for f in current_docs() for n, op, sch in quoted_schemas(f)]
    assert len(quoted) >= 10, quoted  # README's and operators.md's tables
    bad = [f"{name}:{n}: {op}{sch} (library.cpp: {op}{defined.get(op)})" for name, n, op, sch in quoted
           if defined.get(op) != sch]
    assert not bad, "schemas that differ from the registered ones (csrc/ops/<family>/library.cpp):\n" + "\n".join(bad)


# ----------------------------------------------------------------------------------------------------------
# Reference pages say what is true now. README.md and docs/*.md other than docs/history.md (CHANGELOG.md and
# history.md are history) cite no commit of this repository and no dated run. A commit is a 7-40 hex-digit token that
# `git cat-file` resolves to a commit of this repository (so hex numbers such as 0x7f, sha256 digests and other
# repositories' revisions are not flagged); a dated run is an ISO date 20YY-MM-DD.
_HEX_TOKEN = re.compile(r"(?<![0-9A-Za-z_])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
_ISO_DATE = re.compile(r"(?<![0-9])20\d\d-[01]\d-[0-3]\d(?![0-9])")


def reference_pages():
    return [p for p in current_docs() if p != HISTORY]


def git_commits(tokens, root=ROOT):
    """The tokens that name a commit of the repository at `root` (one `git cat-file --batch-check` call)."""
    tokens = sorted(set(tokens))
    if not tokens:
        return set()
    out = subprocess.run(["git", "cat-file", "--batch-check"], cwd=root, capture_output=True, text=True, check=True,
                         input="".join(f"{t}^{{commit}}\n" for t in tokens)).stdout.splitlines()
    assert len(out) == len(tokens), out
    return {t for t, line in zip(tokens, out) if not line.endswith("missing") and " commit " in f" {line} "}


def history_citations(path, root=ROOT):
    """'file:line: token' for every commit of the repository and every ISO date the page cites."""
    lines = path.read_text(encoding="utf-8").splitlines()
    hexes = [(n, t) for n, line in enumerate(lines, 1) for t in _HEX_TOKEN.findall(line)]
    commits = git_commits([t for _, t in hexes], root)
    bad = [f"{path.name}:{n}: commit {t}" for n, t in hexes if t in commits]
    bad += [f"{path.name}:{n}: date {d}" for n, line in enumerate(lines, 1) for d in _ISO_DATE.findall(line)]
    return bad


def _in_git_checkout():
    return subprocess.run(["git", "rev-parse", "--git-dir"], cwd=ROOT, capture_output=True).returncode == 0


@pytest.mark.skipif(not _in_git_checkout(), reason="not a git checkout: commits cannot be told from hex numbers")
def test_citation_checker(tmp_path):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    page = tmp_path / "page.md"
    page.write_text(f"Measured at {head[:7]} (`{head}`), 2026-11-24.\n"
                    "Not commits: 0x7f, deadbeef0, sha256 " + "ab" * 32 + ", ops-nn e5c3fa93, 1234567; version 1.23.0.\n",
                    encoding="utf-8")
    assert history_citations(page) == [f"page.md:1: commit {head[:7]}", f"page.md:1: commit {head}",
                                       "page.md:1: date 2026-11-24"]


@pytest.mark.skipif(not _in_git_checkout(), reason="not a git checkout: commits cannot be told from hex numbers")
def test_reference_pages_cite_no_commit_and_no_dated_run():
    pages = reference_pages()
    assert README in pages and DOCS / "performance.md" in pages and HISTORY not in pages
    bad = [b for p in pages for b in history_citations(p)]
    assert not bad, ("reference pages must say what is true now; move measured runs to docs/history.md:\n"
                     + "\n".join(bad))


# ----------------------------------------------------------------------------------------------------------
# Environment variables. docs/config.md's tables list every variable with its owner: "torch_ext" for the project's
# own, "<owner>'s own" (CANN's, PyTorch's, ...) for a third party's. Every `NPU_EXT_*` name in the code of the package
# (torch_ext/, csrc/), setup.py, tools/, benchmarks/, the Makefile, .ci/ and tests/ is a variable that code reads or
# sets for a reader, except by two stated rules: a name a C preprocessor line defines or tests (#define, #undef, #if,
# #ifdef, #ifndef, #elif; setup.py's define_macros reach the sources that way) is a compile-time define, and a name
# inside a `startswith(...)` call is a prefix, not a variable. Each such variable is in config.md's tables, and
# every `NPU_EXT_*` name config.md gives is one of them.
_ENV_NAME = re.compile(r"\bNPU_EXT_[A-Z0-9_]+\b")
_CPP_DIRECTIVE = re.compile(r"^\s*#\s*(?:define|undef|ifdef|ifndef|if|elif)\b.*$", re.M)
_C_SUFFIXES = {".c", ".cc", ".cpp", ".h", ".hpp", ".cu"}
_CODE_SUFFIXES = _C_SUFFIXES | {".py", ".sh", ""}
_CONFIG = DOCS / "config.md"


def code_files(root=ROOT):
    roots = [root / d for d in ("torch_ext", "csrc", "tools", "benchmarks", "tests", ".ci")]
    files = [root / "setup.py", root / "Makefile"]
    for d in roots:
        files += [p for p in d.rglob("*") if p.is_file() and p.suffix in _CODE_SUFFIXES and "__pycache__" not in p.parts]
    return [p for p in files if p.exists() and p != Path(__file__).resolve()]  # not these checks' own samples


def code_env_vars(files):
    """{name: first file} of the NPU_EXT_* environment variables the files name, C defines and prefixes aside."""
    found, macros = {}, set()
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # a binary without a suffix
        if path.suffix in _C_SUFFIXES:
            macros.update(n for line in _CPP_DIRECTIVE.findall(text) for n in _ENV_NAME.findall(line))
        text = re.sub(r"startswith\([^)]*\)", "", text)
        for name in _ENV_NAME.findall(text):
            found.setdefault(name, path.name)
    return {n: f for n, f in found.items() if n not in macros}


def config_variables(path=_CONFIG):
    """(line number, variable, owner) of every row of config.md's variable tables."""
    for n, line in prose_lines(path.read_text(encoding="utf-8")):
        m = re.match(r"\|\s*`([A-Z][A-Z0-9_]*)`\s*\|\s*([^|]*?)\s*\|", line)
        if m:
            yield n, m.group(1), m.group(2)


def test_env_var_scanner(tmp_path):
    (tmp_path / "a.py").write_text('os.environ.get("NPU_EXT_ONE")\nk.startswith(("NPU_FAKE_", "NPU_EXT_NO"))\n')
    (tmp_path / "b.h").write_text('#define NPU_EXT_MACRO(x) x\n#if NPU_EXT_LEVEL >= 2\nint v = NPU_EXT_LEVEL;\n#endif\n'
                                  'const char* e = std::getenv("NPU_EXT_TWO");\n')
    (tmp_path / "c.sh").write_text('A="${NPU_EXT_THREE:-x}"\n')
    assert code_env_vars(sorted(tmp_path.iterdir())) == {"NPU_EXT_ONE": "a.py", "NPU_EXT_TWO": "b.h",
                                                         "NPU_EXT_THREE": "c.sh"}


def test_every_env_var_is_in_config_md_and_every_one_there_is_read():
    in_code = code_env_vars(code_files())
    assert {"NPU_EXT_LOAD_NPU", "NPU_EXT_BUILD_NPU", "NPU_EXT_AARCH64_DIR"} <= set(in_code), sorted(in_code)
    assert not {"NPU_EXT_TORCH_NPU_VERSION", "NPU_EXT_HIT_CACHE_LEVEL", "NPU_EXT_NO_CPU"} & set(in_code)
    rows = {v for _, v, _ in config_variables()}
    missing = sorted(f"{n} (in {f})" for n, f in in_code.items() if n not in rows)
    assert not missing, "environment variables the code reads that docs/config.md's tables do not list:\n" + \
        "\n".join(missing)
    named = set(_ENV_NAME.findall(_CONFIG.read_text(encoding="utf-8")))
    unread = sorted(named - set(in_code))
    assert not unread, "NPU_EXT_* names in docs/config.md that no code reads: " + ", ".join(unread)


def test_config_md_marks_third_party_variables():
    rows = list(config_variables())
    assert len(rows) >= 30, rows
    bad = []
    for n, var, owner in rows:
        ours = owner == "torch_ext"
        m = re.fullmatch(r"([A-Za-z][\w-]*)'s own", owner)
        if not ours and not (m and m.group(1) != "torch_ext"):
            bad.append(f"config.md:{n}: {var}: owner {owner!r} is neither 'torch_ext' nor \"<owner>'s own\"")
        elif var.startswith("NPU_EXT_") and not ours:
            bad.append(f"config.md:{n}: {var} is torch_ext's own")
    listed = {v for _, v, _ in rows}
    # Every variable-like name (upper case with an underscore) config.md puts in backticks is a row of its tables.
    text = _CONFIG.read_text(encoding="utf-8")
    for name in sorted(set(re.findall(r"`([A-Z][A-Z0-9]*_[A-Z0-9_]+)(?:=[^`]*)?`", text)) - listed):
        bad.append(f"config.md: `{name}` is named but not in a table with its owner")
    assert not bad, "\n".join(bad)


def version_story(changelog, readme, version):
    """What disagrees between the package's version, CHANGELOG's newest heading and README's sentence ([] if none)."""
    problems = []
    newest = re.search(r"^## (\S+)", changelog, re.MULTILINE)
    if newest is None or newest.group(1) != version:
        problems.append(f"CHANGELOG's newest heading is {newest and newest.group(1)!r}, the package is {version!r}")
    if ".dev" in version:
        release = version.split(".dev")[0]
        if re.search(rf"^## {re.escape(release)} ", changelog, re.MULTILINE):
            problems.append(f"{version} is a development version of {release}, which CHANGELOG says is released")
    if f"version {version}" not in readme.replace("\n", " "):
        problems.append(f"README does not say 'version {version}'")
    return problems


def test_version_story_checker():
    log = "# Changelog\n\n## 0.6.0.dev0 (in development)\n\n## 0.5.0 (2026-11-28)\n"
    assert version_story(log, "the development version 0.6.0.dev0, after", "0.6.0.dev0") == []
    assert version_story(log, "version 0.5.0", "0.5.0")[0].startswith("CHANGELOG's newest heading")
    assert len(version_story(log.replace("0.5.0 (", "0.6.0 ("), "version 0.6.0.dev0", "0.6.0.dev0")) == 1
    assert version_story(log, "Version 0.5.0", "0.6.0.dev0") == ["README does not say 'version 0.6.0.dev0'"]


def test_one_version_in_the_package_changelog_and_readme():
    import torch_ext

    assert version_story((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"),
                         (ROOT / "README.md").read_text(encoding="utf-8"), torch_ext.__version__) == []


# A path outside the repository (a clone holds none of it) or of a development machine. The one exception: CI has no
# network, so .ci/run points the MindSpeed stage at the archives beside its clone.
_OUTSIDE = re.compile(r"\.\./shared|/work/|/root/|/home/\w")
_OUTSIDE_ALLOWED = {(".ci/run", 'export NPU_EXT_THIRDPARTY="${NPU_EXT_THIRDPARTY:-$PWD/../shared/thirdparty}"')}


def outside_references(files, root=ROOT):
    found = []
    for name in files:
        try:
            text = (root / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        for i, line in enumerate(text.splitlines(), 1):
            if _OUTSIDE.search(line) and (name, line.strip()) not in _OUTSIDE_ALLOWED:
                found.append(f"{name}:{i}")
    return found


def test_outside_reference_checker(tmp_path):
    (tmp_path / "a.md").write_text("see ../shared/SPEC.md\nfine\n/work/main/x\n")
    (tmp_path / "b.py").write_text("x = 1\n")
    assert outside_references(["a.md", "b.py"], tmp_path) == ["a.md:1", "a.md:3"]


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the git checkout (the file list)")
def test_no_file_points_outside_the_repository():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert outside_references([f for f in files if f != "tests/repo/test_docs.py"]) == []


def test_readme_names_every_switch_python_m_torch_ext_prints():
    """README's bug-report paragraph lists the environment switches `python -m torch_ext` reports (it once left out
    NPU_EXT_NPU_FORWARD)."""
    from torch_ext._config import ENV_SWITCHES

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("### Bug reports"):text.index("## Operators")]
    assert [name for name in ENV_SWITCHES if f"`{name}`" not in section] == []


def test_where_to_report_promises_no_address_and_says_what_to_send():
    """install.md's "Where to report a problem" lists what to send and names no tracker the project does not have."""
    text = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    section = text[text.index("## Where to report a problem"):]
    assert "python -m torch_ext" in section and "--check" in section and "pip list" in section
    assert not re.search(r"https?://|open an issue on the project", section, re.IGNORECASE)


def test_the_npu_training_example_explains_torchs_process_group_warning():
    """check-on-npu.md's step 4 names the warning that comes with the two loss curves on the npu device, in both
    of torch's wordings, and says where it comes from (the example's per-device backends)."""
    text = (ROOT / "docs" / "check-on-npu.md").read_text(encoding="utf-8")
    for words in ("Failed to check if ProcessGroup has hooks", "No backend of type 0 found", "cpu:gloo,npu:hccl"):
        assert words in text
    assert "cpu:gloo," in (ROOT / "examples" / "megatron_gpt.py").read_text(encoding="utf-8")
