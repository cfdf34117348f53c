"""The release table, torch_ext/releases.json, is the one place a supported or tested release is written.

* The table is consistent: unique rows, oldest first, the default and the MindSpeed pairs' torch_npu are rows, the
  megatron-core pins lie in the tested range, every key is one its _comment describes.
* Files that cannot read it are checked against it: pyproject.toml's torch range, requirements-dev.txt's torch and
  megatron-core, tools/aarch64/requirements.txt's megatron-core.
* The documentation (README.md, docs/*.md) names releases only inside blocks tied to the table (tools/releases.py
  describes them): a generated block is what tools/releases.py renders now; every release number in a `names` block is
  a value of one of the names it lists, and it names each of them; a `checked` block holds a measurement table that
  its checker (CHECKERS, below) holds against the table row by row.
* Nowhere else in the repository (git's tracked and untracked files, ignored ones aside) is a release number of the
  table written: not outside those blocks, not in code, not in comments, but for the table itself, CHANGELOG.md and
  docs/history.md (history), the files checked above (the values they are checked for) and EXCEPTIONS, each with its
  reason. A release number is any X.Y.Z[.postN] of a torch series of the table or of a megatron-core series of its
  tested range (so another patch or .postN of a supported series is one too), a MindSpeed branch, or the supported
  torch range as "<oldest major.minor> to <newest major.minor>"; a major.minor series alone ("torch 2.13",
  "megatron-core 0.16") and the Pythons are not.

No torch needed: plain text. Every check is first shown to fail on a sample of the drift it guards against.
"""

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest
import paths

ROOT = Path(paths.ROOT)


def _tool():
    spec = importlib.util.spec_from_file_location("releases_tool", ROOT / "tools" / "releases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


R = _tool()
TABLE = R.load()


# ----------------------------------------------------------------------------------------------------------
# Release numbers in text
def _series(table):
    """(torch series, megatron-core series): the (major, minor) of every torch of the table, and of every megatron-core
    release from the oldest to the newest tested."""
    torch = {R.series(r["torch"]) for r in table["releases"]}
    lo, hi = R.series(table["megatron_core"]["oldest"]), R.series(table["megatron_core"]["newest"])
    mcore = {(lo[0], m) for m in range(lo[1], hi[1] + 1)} if lo[0] == hi[0] else {lo, hi}
    return torch, mcore


def release_regex(table):
    """The release numbers of the table in any text: MindSpeed branches, the supported torch range phrase, and every
    release of a torch series of the table or of a megatron-core series of its tested range (X.Y.Z with an optional
    .postN: torch, torch_npu, megatron-core, Megatron-LM), so that another patch or .postN of a series is one too."""
    lo, hi = R.supported_torch(table)
    torch, mcore = _series(table)
    branches = sorted((p["branch"] for p in table["mindspeed"]), key=len, reverse=True)
    alternatives = [re.escape(b) for b in branches]
    alternatives.append(rf"{lo[0]}\.{lo[1]}\s*(?:to|-|–)\s*{hi[0]}\.{hi[1]}")
    alternatives += [rf"{major}\.{minor}\.\d+(?:\.post\d+)?" for major, minor in sorted(torch | mcore, reverse=True)]
    return re.compile(r"(?<![\d.])(?:" + "|".join(alternatives) + r")(?!\d|\.\d)")


RELEASE = release_regex(TABLE)


def tokens(text, regex=RELEASE):
    """The release numbers in a text, as written (the range phrase as 'lo to hi')."""
    return [re.sub(r"\s*(?:to|-|–)\s*", " to ", m.group(0)) if " " in m.group(0) or "–" in m.group(0) else m.group(0)
            for m in regex.finditer(text)]


def test_release_regex_finds_the_table_releases_and_nothing_else():
    npu = R.default_row(TABLE)["torch_npu"]
    torch = R.default_row(TABLE)["torch"]
    branch = TABLE["mindspeed"][0]["branch"]
    lo, hi = R.supported_torch(TABLE)
    oldest = R.series(TABLE["megatron_core"]["oldest"])
    mid = f"{oldest[0]}.{oldest[1] + 1}.7"  # a megatron-core release inside the tested range, not in the table
    text = (f"torch_npu {npu}, `torch=={torch}+cpu`, {npu}.post7, torch-{torch}-cp311, {branch}, "
            f"core_v{TABLE['megatron_core']['newest']}; torch {lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}.\n"
            f"Also another patch of a series: {lo[0]}.{lo[1]}.9.post1, {mid}.\n"
            f"Not: 1{torch}, {torch}.1, 2.1.0.post17, Python 3.11, torch {lo[0]}.{lo[1]}, 0.8.0, numpy==2.4.6.")
    assert tokens(text) == [npu, torch, f"{npu}.post7", torch, branch, TABLE["megatron_core"]["newest"],
                            f"{lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}", f"{lo[0]}.{lo[1]}.9.post1", mid], tokens(text)


# ----------------------------------------------------------------------------------------------------------
# The table itself
_ROW_KEYS = {"torch_npu", "torch", "cann", "wheel_python", "python", "megatron_core", "pip", "pip_no_deps",
             "ascend950", "min_torch_npu", "extension_api_from", "_comment"}
_PAIR_KEYS = {"branch", "archive", "megatron_lm", "megatron_lm_archive", "torch_npu", "python", "pip", "_comment",
              "repository", "commit", "megatron_lm_repository", "megatron_lm_commit", "mindspeed_llm"}


def _post(release):
    """The N of a release's .postN; 0 without one."""
    return int(release.split(".post")[1]) if ".post" in release else 0


def table_problems(table):
    """What is inconsistent in a release table."""
    bad = []
    comment = " ".join(table.get("_comment", []))
    keys = set(table) | {k for r in table["releases"] for k in r} | {k for p in table["mindspeed"] for k in p}
    keys |= set(table["megatron_core"]) | set(table["post_release_evidence"])
    bad += [f"key {k!r} is not described in the table's _comment" for k in sorted(keys)
            if not k.startswith("_") and k not in comment]
    bad += [f"row {R.release_id(r)}: unknown key {k!r}" for r in table["releases"] for k in r if k not in _ROW_KEYS]
    bad += [f"pair {p['branch']}: unknown key {k!r}" for p in table["mindspeed"] for k in p if k not in _PAIR_KEYS]
    ids = [R.release_id(r) for r in table["releases"]]
    if len(set(ids)) != len(ids):
        bad.append(f"rows named twice: {ids}")
    torches = [tuple(int(v) for v in r["torch"].split(".")) for r in table["releases"]]
    if torches != sorted(torches):
        bad.append(f"rows not oldest first: {ids}")
    for r in table["releases"]:
        if r["torch_npu"] and r["torch_npu"].split(".post")[0] != r["torch"]:
            bad.append(f"row {r['torch_npu']}: its torch is {r['torch']}")
    for r in table["releases"]:
        for key in ("min_torch_npu", "extension_api_from"):  # a .postN of the row's release, not after the row's
            if key in r and not (r["torch_npu"] and r[key].split(".post")[0] == r["torch_npu"].split(".post")[0]
                                 and _post(r[key]) <= _post(r["torch_npu"])):
                bad.append(f"row {R.release_id(r)}: {key} {r[key]} is not a .postN of its release up to the row's")
    default = R.find(table, table["default"])
    if default is None or not default["torch_npu"]:
        bad.append(f"default {table['default']} is not a row with a torch_npu")

    def mc(v):
        return tuple(int(x) for x in v.split("."))

    m = table["megatron_core"]
    pins = [m["default"]] + [r["megatron_core"] for r in table["releases"] if r.get("megatron_core")]
    bad += [f"megatron-core {v} outside the tested range {m['oldest']} to {m['newest']}" for v in pins
            if not mc(m["oldest"]) <= mc(v) <= mc(m["newest"])]
    for p in table["mindspeed"]:
        if R.find(table, p["torch_npu"]) is None:
            bad.append(f"MindSpeed {p['branch']}: torch_npu {p['torch_npu']} is not a row")
        if p["branch"] not in p["archive"] or p["megatron_lm"] not in p["megatron_lm_archive"]:
            bad.append(f"MindSpeed {p['branch']}: its archives {p['archive']}, {p['megatron_lm_archive']} name "
                       "another release")
    e = table["post_release_evidence"]
    if R.find(table, e["built"]) is None or e["built"].split(".post")[0] != e["runs"].split(".post")[0]:
        bad.append(f"post_release_evidence: {e['built']} is not a row, or {e['runs']} is not a .postN of it")
    return bad


def test_table_checker_finds_inconsistencies():
    import copy

    bad = copy.deepcopy(TABLE)
    bad["releases"][0]["colour"] = "x"  # an undocumented key
    bad["releases"][1], bad["releases"][2] = bad["releases"][2], bad["releases"][1]  # out of order
    bad["default"] = "cpu-" + bad["releases"][1]["torch"]  # a row without torch_npu
    bad["mindspeed"][0]["torch_npu"] = "9.9.9"
    bad["megatron_core"]["default"] = "0.1.0"
    bad["releases"][-1]["min_torch_npu"] = bad["releases"][0]["torch"]  # a .postN of another release
    problems = table_problems(bad)
    assert len(problems) == 7, problems  # the key twice: undescribed and unknown


def test_the_table_is_consistent():
    assert not table_problems(TABLE), "\n".join(table_problems(TABLE))


def test_the_package_reads_the_table():
    """torch_ext/_compat.py's range and torch_ext/megatron.py's tested range are the table's (read as text: the
    package's own import needs its build)."""
    for path in ("torch_ext/_compat.py", "torch_ext/megatron.py", "setup.py"):
        text = (ROOT / path).read_text(encoding="utf-8")
        assert "_releases" in text, f"{path} does not read the release table"
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    assert re.search(r"package_data=\{\"torch_ext\": \[[^]]*\"releases\.json\"", setup), \
        "setup.py does not ship torch_ext/releases.json"


# ----------------------------------------------------------------------------------------------------------
# Files that cannot read the table, checked against it: path -> [(what, regex whose group is the value, expected)]
def _torch_range(table):
    lo, hi = R.supported_torch(table)
    return f"torch>={lo[0]}.{lo[1]},<{hi[0]}.{hi[1] + 1}"


CHECKED_FILES = {
    "pyproject.toml": [("the build requirement's torch range", r'"(torch>=[\d.]+,<[\d.]+)"', _torch_range)],
    "requirements-dev.txt": [
        (".venv's torch: the default release's", r"^torch==(\S+)$", lambda t: R.default_row(t)["torch"]),
        (".venv's megatron-core: the default", r"^megatron-core==(\S+)$", lambda t: t["megatron_core"]["default"])],
    "tools/aarch64/requirements.txt": [
        ("the emulation's megatron-core: the default", r"^megatron-core==(\S+?)\s", lambda t: t["megatron_core"]["default"])],
}


def checked_file_problems(path, text, table):
    bad = []
    for what, regex, expected in CHECKED_FILES[path]:
        found = re.findall(regex, text, re.M)
        if found != [expected(table)]:
            bad.append(f"{path}: {what} is {found or 'missing'}, the release table says {expected(table)}")
    return bad


def _other_row(table):
    """A row that is not the default one."""
    return next(r for r in table["releases"] if r is not R.default_row(table))


def test_checked_file_checker_finds_drift():
    good = f"torch=={R.default_row(TABLE)['torch']}\nnumpy\nmegatron-core=={TABLE['megatron_core']['default']}\n"
    assert checked_file_problems("requirements-dev.txt", good, TABLE) == []
    drifted = good.replace(R.default_row(TABLE)["torch"], _other_row(TABLE)["torch"])
    assert len(checked_file_problems("requirements-dev.txt", drifted, TABLE)) == 1
    assert len(checked_file_problems("requirements-dev.txt", "numpy\n", TABLE)) == 2  # neither pinned


@pytest.mark.parametrize("path", sorted(CHECKED_FILES))
def test_files_that_cannot_read_the_table_agree_with_it(path):
    bad = checked_file_problems(path, (ROOT / path).read_text(encoding="utf-8"), TABLE)
    assert not bad, "\n".join(bad)


def checked_file_tokens(path, table):
    """The release numbers a checked file may hold: the values it is checked for."""
    return {expected(table) for _, _, expected in CHECKED_FILES.get(path, [])}


# ----------------------------------------------------------------------------------------------------------
# The documentation's blocks
def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table_rows(lines):
    """The data rows of the markdown tables among lines (header and separator rows left out)."""
    out = []
    for i, line in enumerate(lines):
        if line.startswith("|") and not re.match(r"^\|[-| ]+\|$", line.strip()):
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if not re.match(r"^\|[-| ]+\|$", nxt.strip()):  # not a header
                out.append(_cells(line))
    return out


def _mcore_key(v):
    return tuple(int(x) for x in v.split("."))


def _any_release(table):
    """A test of a release number: a torch or torch_npu release of the table, or a megatron-core release of its tested
    range."""
    rows = set(R.values(table)["rows"])
    m = table["megatron_core"]
    return lambda t: t in rows or (re.fullmatch(r"\d+\.\d+\.\d+", t) is not None
                                   and _mcore_key(m["oldest"]) <= _mcore_key(t) <= _mcore_key(m["newest"]))


def check_platform_results(lines, table):
    """docs/platforms.md's results per row: one row per release of the table, in its order, with its torch, Python and
    megatron-core; elsewhere in the block, supported releases only."""
    bad = []
    rows = _table_rows(lines)
    want = table["releases"]
    if [c[0] for c in rows] != [R.release_id(r) for r in want]:
        bad.append(f"rows {[c[0] for c in rows]}, the table's {[R.release_id(r) for r in want]}")
    for cells, row in zip(rows, want):
        got = (re.split(r"[ +]", cells[1])[0], cells[2], cells[3])
        if got != (row["torch"], row["python"], R.megatron_core(table, row)):
            bad.append(f"row {cells[0]}: torch, Python, megatron-core {got}, the table's "
                       f"{(row['torch'], row['python'], R.megatron_core(table, row))}")
    bad += [f"{t} is not a release of the table" for t in tokens("\n".join(lines)) if not _any_release(table)(t)]
    return bad


def check_megatron_results(lines, table):
    """docs/megatron.md's measurements per megatron-core release: every release within the tested range, the oldest,
    the default and the newest measured; elsewhere in the block, supported releases only."""
    m = table["megatron_core"]
    measured = [c[0] for c in _table_rows(lines) if re.fullmatch(r"\d+\.\d+\.\d+", c[0])]
    bad = [f"megatron-core {v} is outside the tested range {m['oldest']} to {m['newest']}" for v in measured
           if not _mcore_key(m["oldest"]) <= _mcore_key(v) <= _mcore_key(m["newest"])]
    bad += [f"no measured row for megatron-core {m[k]} ({k})" for k in ("oldest", "default", "newest")
            if m[k] not in measured]
    bad += [f"{t} is not a release of the table" for t in tokens("\n".join(lines)) if not _any_release(table)(t)]
    return bad


CHECKERS = {"platform-results": check_platform_results, "megatron-results": check_megatron_results}


def block_problems(name, text, table):
    """What is wrong with the release blocks of a page (name: for the messages)."""
    try:
        found = R.blocks(text)
    except ValueError as e:
        return [f"{name}: {e}"]
    values = R.values(table)
    bad = []
    for kind, args, first, last, lines in found:
        where = f"{name}:{first}"
        body = "\n".join(lines)
        if kind == "generated":
            if args[0] not in R.GENERATED:
                bad.append(f"{where}: no generator {args[0]!r}")
            elif body != R.GENERATED[args[0]](table):
                bad.append(f"{where}: the generated block {args[0]} is stale (python3 tools/releases.py docs)")
        elif kind == "checked":
            if args[0] not in CHECKERS:
                bad.append(f"{where}: no checker {args[0]!r}")
            else:
                bad += [f"{where}: {args[0]}: {p}" for p in CHECKERS[args[0]](lines, table)]
        else:
            unknown = [a for a in args if a not in values]
            if unknown:
                bad.append(f"{where}: unknown names {unknown} ({', '.join(values)})")
                continue
            allowed = {v for a in args for v in values[a]}
            found_tokens = tokens(body)
            bad += [f"{where}: {t} is not a value of {' '.join(args)}" for t in found_tokens if t not in allowed]
            bad += [f"{where}: names {a} but holds none of its values {values[a]}" for a in args
                    if not set(values[a]) & set(found_tokens)]
    return bad


def without_blocks(text):
    """The page with the lines of its blocks (markers and content) blanked, line numbers kept."""
    lines = text.splitlines()
    for _, _, first, last, _ in R.blocks(text):
        lines[first - 1:last] = [""] * (last - first + 1)
    return "\n".join(lines)


def test_block_checker_finds_drift():
    d = R.default_row(TABLE)
    other = _other_row(TABLE)
    old_torch = TABLE["releases"][0]["torch"]
    stale = R.GENERATED["support-table"](TABLE).replace(f"| {d['torch_npu']} |", f"| {d['torch_npu']}.post1 |")
    platform = "\n".join(f"| {R.release_id(r)} | {r['torch']} | {r['python']} | {R.megatron_core(TABLE, r)} | ok |"
                         for r in TABLE["releases"])
    page = "\n".join([
        "<!-- releases: generated support-table -->", stale, "<!-- releases: end -->",
        "<!-- releases: names default -->", f"torch_npu {d['torch_npu']} with torch {other['torch']}",
        "<!-- releases: end -->",
        "<!-- releases: names default mindspeed -->", f"torch {d['torch']}", "<!-- releases: end -->",
        "<!-- releases: checked platform-results -->", "| torch_npu | torch | Python | megatron-core | result |",
        "|---|---|---|---|---|", platform.replace(f"| {d['python']} |", "| 3.9 |", 1), "<!-- releases: end -->",
        "<!-- releases: checked megatron-results -->", "| megatron-core | tests |", "|---|---|",
        f"| {TABLE['megatron_core']['oldest']} | ok |", "| 0.1.0 | ok |", f"measured on torch {old_torch}.post3",
        "<!-- releases: end -->",
        "<!-- releases: names nothing -->", "<!-- releases: end -->",
    ])
    bad = block_problems("page.md", page, TABLE)
    opening = [f"page.md:{n}" for n, line in enumerate(page.splitlines(), 1)
               if line.startswith("<!-- releases:") and not line.startswith("<!-- releases: end")]
    assert [b.split(": ", 1)[0] for b in bad] == [
        opening[0],  # the stale generated table
        opening[1],  # another row's torch in a block of the default
        opening[2],  # names mindspeed, holds none of it
        opening[3],  # a row's Python changed
        opening[4],  # 0.1.0 outside the range
        opening[4], opening[4],  # the default and the newest not measured
        opening[4],  # a .postN the table does not have
        opening[5],  # an unknown name
    ], "\n".join(bad)
    assert block_problems("page.md", "<!-- releases: names default -->\n", TABLE) == [
        "page.md: line 1: the block is not closed"]
    assert without_blocks("a\n<!-- releases: names default -->\nb\n<!-- releases: end -->\nc") == "a\n\n\n\nc"


def test_documentation_blocks_agree_with_the_table():
    pages = [Path(p) for p in R.doc_files()]
    bad = [b for p in pages for b in block_problems(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8"), TABLE)]
    assert not bad, "release blocks that differ from the release table:\n" + "\n".join(bad)
    kinds = {(kind, args[0]) for p in pages for kind, args, *_ in R.blocks(p.read_text(encoding="utf-8"))}
    assert {("generated", g) for g in R.GENERATED} | {("checked", c) for c in CHECKERS} <= kinds, kinds


# ----------------------------------------------------------------------------------------------------------
# No release number outside the table, its generated and checked outputs, the history and EXCEPTIONS.
HISTORY = {"torch_ext/releases.json", "CHANGELOG.md", "docs/history.md"}
_CONCURRENT = ("being edited in concurrent work (the NPU path: csrc/core/npu, the fake CANN, the NPU tests, docs/npu.md); "
               "to be pointed at the release table there")
# path -> (reason, the release numbers it may hold, or None: any). A release number in the test itself would be one
# outside the table: those below are the table's values, so that a change of the table points at them.
_V = R.values(TABLE)
EXCEPTIONS = {
    "docs/performance.md": (
        "evidence: the host-cost measurement (## The NPU: host cost of a call) names the torch_npu and torch "
        "releases each of its runs used, which stay what they were when the table moves", None),
    "torch_ext/torchair.py": (
        "evidence: ATEN_OPS was checked against the GE converters of the torchair of the default torch_npu release, "
        "which it names; when the default changes, re-check (tests/training/test_torchair.py with TORCHAIR_SRC) and rename it",
        set(_V["default.torch_npu"])),
    "csrc/core/torch_compat.h": (
        "its opening comment names the supported torch range (csrc/** is being edited in concurrent work; to be "
        "pointed at the release table there)", set(_V["supported_torch"])),
    "tests/fake_cann/toolkit/README.md": (_CONCURRENT, None),
    "csrc/core/npu/torch_npu_compat.h": (
        "C++ feature gates and their evidence: from which torch_npu release an API exists or changed (op-plugin's "
        "extension API, hit_cache_ext's level form), facts about torch_npu that hold whatever the table supports; "
        + _CONCURRENT, None),
    "csrc/core/npu/aclnn.h": ("names the torch_npu release op-plugin's extension API starts at; " + _CONCURRENT, None),
    "tests/fake_cann/alloc_config_shim.cpp": (_CONCURRENT, None),
    "tests/fake_cann/build.py": (_CONCURRENT, None),
    "tests/fake_cann/opapi/pta_cache.cpp": (_CONCURRENT, None),
    "tests/fake_cann/runtime.cpp": (_CONCURRENT, None),
    "tests/npu/test_npu_cache.py": (_CONCURRENT, None),
    "tests/npu/test_npu_path.py": (_CONCURRENT, None),
    "tests/npu/test_npu_training.py": (_CONCURRENT, None),
    "docs/npu.md": (_CONCURRENT, None),
}


def repository_files(root=ROOT):
    """git's tracked and untracked files (ignored ones aside), as paths relative to root."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                         capture_output=True, check=True).stdout.split(b"\0")
    return sorted({f.decode() for f in out if f and (root / f.decode()).is_file()})


def stray_releases(files, table, exceptions, root=ROOT):
    """(['path:line: release'] outside the allowed places, {exception path: the release numbers found there})."""
    regex = release_regex(table)
    docs = {str(Path(p).relative_to(root)) for p in R.doc_files(root)}
    stray, excepted = [], {}
    for path in files:
        if path in HISTORY:
            continue
        try:
            text = (root / path).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # a binary
        if path in docs:
            text = without_blocks(text)
        allowed = checked_file_tokens(path, table)
        for n, line in enumerate(text.splitlines(), 1):
            for t in tokens(line, regex):
                if path in exceptions:
                    excepted.setdefault(path, set()).add(t)
                    if exceptions[path][1] is None or t in exceptions[path][1]:
                        continue
                elif t in allowed:
                    continue
                stray.append(f"{path}:{n}: {t}")
    return stray, excepted


def test_stray_release_checker(tmp_path):
    d = R.default_row(TABLE)
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        f"<!-- releases: names default -->\ntorch_npu {d['torch_npu']}\n<!-- releases: end -->\n"
        f"then the torch {d['torch']} default\n", encoding="utf-8")
    (tmp_path / "requirements-dev.txt").write_text(f"torch=={d['torch']}\nother=={d['torch_npu']}.post2\n")
    (tmp_path / "CHANGELOG.md").write_text(f"{d['torch_npu']}\n")
    (tmp_path / "a.py").write_text(f"# {d['torch_npu']}\n")
    (tmp_path / "b.py").write_text(f"# {d['torch_npu']} and {TABLE['releases'][0]['torch']}\n")
    files = ["CHANGELOG.md", "README.md", "a.py", "b.py", "requirements-dev.txt"]
    stray, excepted = stray_releases(files, TABLE, {"a.py": ("why", None), "b.py": ("why", {d["torch_npu"]})},
                                     tmp_path)
    assert stray == [f"README.md:4: {d['torch']}", f"b.py:1: {TABLE['releases'][0]['torch']}",
                     f"requirements-dev.txt:2: {d['torch_npu']}.post2"], stray
    assert excepted == {"a.py": {d["torch_npu"]}, "b.py": {d["torch_npu"], TABLE["releases"][0]["torch"]}}


def _in_git_checkout():
    return subprocess.run(["git", "rev-parse", "--git-dir"], cwd=ROOT, capture_output=True).returncode == 0


@pytest.mark.skipif(not _in_git_checkout(), reason="not a git checkout: the files to search come from git")
def test_no_release_number_outside_the_table():
    files = repository_files()
    assert "torch_ext/releases.json" in files and "Makefile" in files, files[:10]
    stray, excepted = stray_releases(files, TABLE, EXCEPTIONS)
    assert not stray, ("release numbers outside the release table (torch_ext/releases.json): read the table there, "
                       "reword to point at it (docs/platforms.md#the-release-table), or put them in a block tied to "
                       "it (tools/releases.py):\n" + "\n".join(stray))
    stale = [f"{p} ({'missing' if p not in files else 'no release number left'})" for p in EXCEPTIONS
             if p not in excepted]
    stale += [f"{p}: {sorted(set(allowed) - excepted[p])} no longer there" for p, (_, allowed) in EXCEPTIONS.items()
              if allowed is not None and p in excepted and set(allowed) - excepted[p]]
    assert not stale, "EXCEPTIONS that no longer apply (remove them):\n" + "\n".join(stale)


def test_megatron_core_series_rules():
    """make test-megatron's venv per megatron-core release (tools/versions.py megatron), from the table's series rules
    (a sample table with neutral numbers, then the table's own first rule)."""
    table = {"releases": [{"torch_npu": "9.1.0", "torch": "9.1.0", "python": "3.11"}], "default": "9.1.0",
             "megatron_core": {"series": [{"from": "0.41", "to": "0.43", "pip": ["numpy<2"]},
                                          {"from": "0.45", "python": "3.12"}]}}
    assert [R.megatron_core_venv(table, v) for v in ("0.40.1", "0.41.0", "0.43.3", "0.44.1", "0.47.2")] == [
        ("3.11", []), ("3.11", ["numpy<2"]), ("3.11", ["numpy<2"]), ("3.11", []), ("3.12", [])]
    rule = R.load()["megatron_core"]["series"][0]
    assert R.megatron_core_venv(R.load(), rule["from"] + ".0")[1] == rule["pip"]
