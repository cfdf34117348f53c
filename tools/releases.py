#!/usr/bin/env python3
"""The release table, torch_ext/releases.json, for the Makefile, CI, the tools and the documentation (test-only; the
package and setup.py read it through torch_ext/_releases.py, which this loads by its path). Standard library only.

  tools/releases.py get NAME [NAME ...]     one value per line (NAMES below), e.g. `get default.torch_npu`
  tools/releases.py table                   README's table of the supported releases (a generated block)
  tools/releases.py docs [--check]          rewrites every generated block of README.md and docs/*.md from the
                                            table (--check: lists the blocks that differ and exits 1)

The documentation names releases only inside blocks that tests/repo/test_releases.py ties to the table:

  <!-- releases: generated NAME -->   ...   <!-- releases: end -->
      the text GENERATED[NAME] renders from the table (`docs` writes it, the test compares);
  <!-- releases: names NAME [NAME ...] -->   ...   <!-- releases: end -->
      prose or a table whose every release number is one of the values of those NAMES, each of which it names;
  <!-- releases: checked NAME -->   ...   <!-- releases: end -->
      a table of measurements that tests/repo/test_releases.py's checker NAME holds against the table.

Everywhere else in the repository a release number of the table is an error, but for the table itself,
CHANGELOG.md, docs/history.md and the EXCEPTIONS of tests/repo/test_releases.py.
"""

import importlib.util
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _reader():
    path = os.path.join(ROOT, "torch_ext", "_releases.py")
    spec = importlib.util.spec_from_file_location("_torch_ext_releases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


R = _reader()
load, release_id, rows, find, series, supported_torch, npu_rows, default_row, megatron_core_range = (
    R.load, R.release_id, R.rows, R.find, R.series, R.supported_torch, R.npu_rows, R.default_row,
    R.megatron_core_range)


def megatron_core(table, row):
    """The megatron-core release of a row's venv."""
    return row.get("megatron_core") or table["megatron_core"]["default"]


def megatron_core_venv(table, release):
    """(Python, [pip requirement, ...]) of a venv for megatron-core `release` (make test-megatron): the rules of the
    table's megatron_core.series whose from / to (major.minor, inclusive) hold the release."""
    key = tuple(int(p) for p in release.split(".")[:2])
    python, pip = default_row(table)["python"], []
    for rule in table["megatron_core"].get("series", []):
        lo = tuple(int(p) for p in rule["from"].split("."))
        hi = tuple(int(p) for p in rule.get("to", "99.99").split("."))
        if lo <= key <= hi:
            python = rule.get("python", python)
            pip += rule.get("pip", [])
    return python, pip


def values(table):
    """{NAME: [value, ...]}: what `get` prints and what a `names` block may name. A dotted NAME is one value; a plain
    NAME is a group (every value of its dotted names, and for the MindSpeed pairs every string that names them)."""
    default, oldest, newest = default_row(table), npu_rows(table)[0], npu_rows(table)[-1]
    mcore = table["megatron_core"]
    lo, hi = supported_torch(table)
    out = {}
    for role, row in (("default", default), ("oldest", oldest), ("newest", newest)):
        out[f"{role}.torch_npu"] = [row["torch_npu"]]
        out[f"{role}.torch"] = [row["torch"]]
        out[f"{role}.python"] = [row["python"]]
        out[f"{role}.megatron_core"] = [megatron_core(table, row)]
        out[role] = [row["torch_npu"], row["torch"]]
    for key in ("oldest", "newest", "default"):
        out[f"megatron_core.{key}"] = [mcore[key]]
    out["megatron_core"] = [mcore["oldest"], mcore["newest"]]  # the tested range
    out["supported_torch"] = [f"{lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}"]
    out["rows"] = [r["torch_npu"] for r in npu_rows(table)] + [r["torch"] for r in rows(table)]  # any release
    # the earliest .postN of a row's torch_npu release that builds and passes here, and the first whose headers ship
    # op-plugin's extension API (the .postN before it take CANN's C API, as torch_npu 2.6)
    for key in ("min_torch_npu", "extension_api_from"):
        out[key] = [r[key] for r in npu_rows(table) if r.get(key)]
    pairs = table["mindspeed"]
    out["mindspeed.branch"] = [p["branch"] for p in pairs]
    out["mindspeed.megatron_lm"] = [p["megatron_lm"] for p in pairs]
    out["mindspeed.torch_npu"] = sorted({p["torch_npu"] for p in pairs})
    out["mindspeed.torch"] = sorted({find(table, p["torch_npu"])["torch"] for p in pairs})
    out["mindspeed"] = [v for k in ("branch", "megatron_lm", "torch_npu", "torch") for v in out[f"mindspeed.{k}"]]
    evidence = table["post_release_evidence"]
    out["post_release_evidence"] = [evidence["built"], evidence["runs"]]
    return out


# ----------------------------------------------------------------------------------------------------------
# Generated blocks
def support_table(table):
    """README's install table: every row, the CANN and Pythons of torch_npu's wheels, the Python tested here."""
    lo, hi = supported_torch(table)
    default, oldest, newest = default_row(table), npu_rows(table)[0], npu_rows(table)[-1]
    lines = [f"Supported: torch {lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}, and on Ascend the torch_npu release of that torch "
             "(the release table,", "`torch_ext/releases.json`):", "",
             "| torch_npu | torch | CANN | Python (torch_npu's wheels, x86-64) | tested here (`make test-versions`) |",
             "|---|---|---|---|---|"]
    for row in rows(table):
        tested = f"Python {row['python']}"
        if row is default:
            tested += ", the default (`make test`)"
        elif row is oldest or row is newest:
            tested += ", in CI"
        lines.append(f"| {row['torch_npu'] or '(none: CPU only)'} | {row['torch']} | {row['cann']} | "
                     f"{row['wheel_python']} | {tested} |")
    return "\n".join(lines)


# The tests a row cannot run, by marker (pyproject.toml registers them): (marker, why) for a row whose entry says so.
NOT_RUN = {"ascend950": ("ascend950", False,
                         "its torch_npu predates the Ascend950: its SoC table has no Ascend950 name, and init rejects one")}


def not_run(row):
    """[(marker, why), ...]: the markers of the tests `row` (a row of the table) cannot run (tools/versions.py
    selects with `-m "not <marker>"`)."""
    return [(marker, why) for key, (marker, value, why) in NOT_RUN.items() if row.get(key, True) is value]


def deselected(table):
    """docs/platforms.md's table of the tests a release cannot run (by marker)."""
    lines = ["| release | tests not run | why |", "|---|---|---|"]
    for r in rows(table):
        for marker, why in not_run(r):
            lines.append(f"| {release_id(r)} | marked `{marker}` | {why} |")
    return "\n".join(lines)


def mindspeed_pairs(table):
    """docs/megatron.md's table of the real MindSpeed pairs (make test-mindspeed)."""
    lines = ["| MindSpeed branch | Megatron-LM | torch_npu | torch | Python | besides MindSpeed's imports |",
             "|---|---|---|---|---|---|"]
    for p in table["mindspeed"]:
        extra = ", ".join(f"`{x}`" for x in p["pip"]) or "-"
        lines.append(f"| `{p['branch']}` | core_v{p['megatron_lm']} | {p['torch_npu']} | "
                     f"{find(table, p['torch_npu'])['torch']} | {p['python']} | {extra} |")
    return "\n".join(lines)


GENERATED = {"support-table": support_table, "deselected": deselected, "mindspeed-pairs": mindspeed_pairs}

# ----------------------------------------------------------------------------------------------------------
# The blocks of a markdown file
_MARK = re.compile(r"^<!-- releases: (generated|names|checked|end)\b\s*(.*?)\s*-->\s*$")


def doc_files(root=ROOT):
    """README.md and docs/*.md: the pages that may hold blocks."""
    docs = os.path.join(root, "docs")
    return [os.path.join(root, "README.md")] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))


def blocks(text):
    """[(kind, [arguments], first line, last line, the lines between the markers)] of a page (line numbers from 1,
    those of the markers). A block left open, one opened inside another, or an unknown kind raises ValueError."""
    out, open_ = [], None
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        m = _MARK.match(line)
        if not m:
            if line.lstrip().startswith("<!-- releases"):
                raise ValueError(f"line {n}: not a release-block marker: {line}")
            continue
        kind, args = m.group(1), m.group(2).split()
        if kind == "end":
            if open_ is None:
                raise ValueError(f"line {n}: an end marker outside a block")
            out.append((open_[0], open_[1], open_[2], n, lines[open_[2]:n - 1]))
            open_ = None
        elif open_ is not None:
            raise ValueError(f"line {n}: a block opened inside the block of line {open_[2]}")
        elif not args:
            raise ValueError(f"line {n}: a {kind} block without a name")
        else:
            open_ = (kind, args, n)
    if open_ is not None:
        raise ValueError(f"line {open_[2]}: the block is not closed")
    return out


def regenerate(text, table):
    """The page with every generated block rewritten from the table."""
    lines = text.splitlines(keepends=True)
    for kind, args, first, last, _ in reversed(blocks(text)):
        if kind == "generated":
            if args[0] not in GENERATED:
                raise ValueError(f"line {first}: no generator {args[0]!r} ({', '.join(GENERATED)})")
            lines[first:last - 1] = [line + "\n" for line in GENERATED[args[0]](table).splitlines()]
    return "".join(lines)


def main(argv=None):
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("get")
    g.add_argument("names", nargs="+")
    sub.add_parser("table")
    d = sub.add_parser("docs")
    d.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    table = load()
    if args.cmd == "get":
        known = values(table)
        for name in args.names:
            if name not in known or "." not in name:
                raise SystemExit(f"releases.py: no value {name!r} ({', '.join(k for k in known if '.' in k)})")
            print("\n".join(known[name]))
        return 0
    if args.cmd == "table":
        print(support_table(table))
        return 0
    stale = []
    for path in doc_files():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = regenerate(text, table)
        if new != text:
            stale.append(os.path.relpath(path, ROOT))
            if not args.check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(new)
    if stale:
        print(("stale generated blocks: " if args.check else "rewrote: ") + ", ".join(stale))
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
