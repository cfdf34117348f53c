"""The unity build's grouping, for setup.py, the aarch64 stand-in's build (tests/npu_stub/npu_standin_build.py) and
the fake CANN's (tests/fake_cann/build.py), each of which loads this file by its path (standard library only: setup.py
runs before the package can import).

A unity unit is a generated translation unit that #includes several sources, so that torch's headers are parsed once
for all of them rather than once per source: most of an op source's compile time (setup.py says how much)."""

import os


def jobs():
    """The compile jobs a build runs at once: MAX_JOBS, as torch's ninja build, else one per core."""
    value = os.environ.get("MAX_JOBS", "")
    return max(1, int(value) if value.isdigit() else (os.cpu_count() or 1))


def write_units(sources, out_dir, stem, include_root, groups, header=""):
    """sources (paths) -> the paths of min(groups, len(sources)) generated units in out_dir, named
    <stem>_<i>_of_<n>.cpp, that #include them (relative to include_root), balanced by size (the largest first, each
    into the smallest unit so far). A unit is rewritten only when its text changes, so an unchanged one is not
    recompiled."""
    units = [[] for _ in range(min(groups, len(sources)))]
    sizes = [0] * len(units)
    for src in sorted(sources, key=lambda p: (-os.path.getsize(p), p)):
        i = sizes.index(min(sizes))
        units[i].append(src)
        sizes[i] += os.path.getsize(src)
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for i, group in enumerate(units):
        text = header + "".join(f'#include "{os.path.relpath(src, include_root)}"\n' for src in sorted(group))
        path = os.path.join(out_dir, f"{stem}_{i + 1}_of_{len(units)}.cpp")
        try:
            with open(path) as f:
                old = f.read()
        except FileNotFoundError:
            old = None
        if old != text:
            with open(path, "w") as f:
                f.write(text)
        paths.append(path)
    return paths
