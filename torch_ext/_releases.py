"""The release table, ``torch_ext/releases.json``: the torch / torch_npu / megatron-core / MindSpeed releases torch_ext
supports and tests, written there once (its ``_comment`` says what each key holds).

This module reads it. It imports nothing but the standard library (no torch, nothing of torch_ext), so that
``setup.py`` and ``tools/releases.py`` load it by its path as well; the package reads it through here
(``torch_ext._compat``'s supported torch range, ``torch_ext.megatron``'s tested megatron-core range).
"""

import json
import os

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "releases.json")


def load(path=PATH):
    """The table as a dict (the JSON file as it is)."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def release_id(row):
    """A row's name: its torch_npu release, or cpu-<torch> for a torch without torch_npu."""
    return row["torch_npu"] or "cpu-" + row["torch"]


def rows(table):
    """The rows of the table, oldest first."""
    return table["releases"]


def find(table, release):
    """The row named ``release`` (release_id), or None."""
    return next((r for r in rows(table) if release_id(r) == release), None)


def series(version):
    """'1.23.4.post5' -> (1, 23)."""
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def supported_torch(table):
    """((major, minor) of the oldest torch, of the newest): the range setup.py builds for and the import accepts."""
    versions = [series(r["torch"]) for r in rows(table)]
    return min(versions), max(versions)


def npu_rows(table):
    """The rows with a torch_npu release."""
    return [r for r in rows(table) if r["torch_npu"]]


def default_row(table):
    """The row of the development release (``default``)."""
    return find(table, table["default"])


def megatron_core_range(table):
    """'oldest to newest' of the tested megatron-core releases."""
    m = table["megatron_core"]
    return f"{m['oldest']} to {m['newest']}"
