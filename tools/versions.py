#!/usr/bin/env python3
"""The torch / torch_npu releases torch_ext supports, each tested in its own venv and real runtime (test-only).

  tools/versions.py run TORCH_NPU [--tests PATH ...]   one release (make test-npu TORCH_NPU=..., CI's version stages)
  tools/versions.py all                                 every release (make test-versions): one line each, a table
  tools/versions.py table                               README's table of the releases (tools/releases.py table)
  tools/versions.py megatron MCORE [--python 3.N]       the Megatron tests on one megatron-core release (make
                                                        test-megatron), below
  tools/versions.py mindspeed [BRANCH ...]              the real MindSpeed pairs (make test-mindspeed), below

For one release (TORCH_NPU is a torch_npu release, or "cpu-<torch>" for a torch without torch_npu):
 1. its venv, build/versions/<release>/venv: that Python, that torch (the package index's CUDA build, NVIDIA
    libraries stubbed) and that torch_npu, by tools/venvs.py;
 2. the fake CANN libraries for that torch and torch_npu (tests/fake_cann/build.py: that wheel's symbol list);
 3. a clean copy of the working tree (tracked and untracked files, nothing ignored: no build, no venv) in
    build/versions/<release>/src, installed into the venv with README's Ascend command
    (pip install --no-build-isolation --no-deps .) with the fake CANN on the library path, as on an Ascend host
    with CANN's set_env.sh sourced; the working tree's own build is never touched. NPU_EXT_KERNEL_VARIANTS=default
    builds the DEFAULT kernel variant alone (the variants are the native stage's business);
 4. checks that the install left torch and torch_npu as they were;
 5. runs the tests from the repository against the installed package inside that torch_npu's runtime on the fake
    CANN, where a skipped test is a failure (tests/conftest.py, NPU_EXT_EXPECT_NPU=1);
 6. prints one line: release, torch, Python, tests passed / failed, seconds.

A MindSpeed pair (MINDSPEED; make test-mindspeed) runs the same steps for its torch_npu release in a venv of its own,
build/mindspeed/<branch>/venv, set up as MindSpeed's install guide says: Megatron-LM's `megatron/` on PYTHONPATH
(unpacked from its archive into build/mindspeed/<branch>/megatron-lm; no megatron-core wheel in that venv) and
MindSpeed (unpacked into build/mindspeed/<branch>/mindspeed) installed with `pip install --no-deps -e` plus the
packages its import needs (MINDSPEED_PIP). The archives are $NPU_EXT_THIRDPARTY's (default build/thirdparty);
nothing of them enters the repository. The tests are tests/integrations/test_mindspeed.py, with NPU_EXT_MINDSPEED naming the
pair (a skip is a failure there too). A pair whose entry names a mindspeed_llm also gets MindSpeed-LLM: its checkout
unpacked into build/mindspeed/<branch>/mindspeed-llm, its packages (the entry's pip) in the venv, Megatron's dataset
helpers compiled in a copy of Megatron-LM with the venv's Python (_mindspeed_llm), and
tests/integrations/test_mindspeed_llm.py (marker mindspeed_llm, deselected on the other pairs). Two pairs of one
runtime test the cluster wheel (docs/install.md): the first also builds it (pip wheel --no-build-isolation
--no-deps .) into build/mindspeed/wheel, the second installs that wheel instead of compiling and runs
tests/npu/test_npu_device.py and tests/package/test_version_mismatch.py besides.
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

import releases
import venvs

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The releases: the rows of the release table, torch_ext/releases.json (tools/releases.py reads it; README's and
# docs/platforms.md's tables are generated from it). A row's name is its torch_npu release, or cpu-<torch>.
TABLE = releases.load()
ROWS = [(releases.release_id(r), r["torch"], r["python"], r["cann"]) for r in releases.rows(TABLE)]
# Tests a release cannot run are marked (pyproject.toml's markers) and not selected on it: releases.not_run(row).
# Nothing else is deselected or skipped: a skip is a failure here, as in make test-npu.
# What every release venv holds besides torch and torch_npu: packaging, what torchair imports
# (tests/npu/test_npu_torchair_import.py; MindSpeed imports torchair), and megatron-core (the NPU training tests import
# test_megatron's helpers; make test-npu runs the Megatron tests on every release): the table's megatron_core.default
# (make test's, requirements-dev.txt) unless the row names its own (the newest torch_npu pairs with the newest
# megatron-core, whose Python it shares, so CI's newest release stage is also its newest megatron-core stage; make
# test-megatron tests any other pairing). A row's pip / pip_no_deps: further packages, the reason in its _comment.
TORCHAIR_PIP = ["protobuf"]


def venv_packages(release):
    """(pip, pip_no_deps) of venvs.torch_venv for a release's venv."""
    r = releases.find(TABLE, release)
    return (["packaging>=24.2", *TORCHAIR_PIP, *r.get("pip", [])],
            [f"megatron-core=={releases.megatron_core(TABLE, r)}", *r.get("pip_no_deps", [])])


# The real MindSpeed pairs: branch -> its entry of the table's mindspeed list (its archive, Megatron-LM's archive,
# the torch_npu release of a row it runs on, the Python of its venv: MindSpeed's pairing, whatever the row uses,
# further packages). The release table names each archive's repository and commit.
MINDSPEED = {p["branch"]: p for p in TABLE["mindspeed"]}
# What `import mindspeed.megatron_adaptor` and Megatron-LM's training modules import beyond torch and torch_npu
# (MindSpeed's requirements.txt lists far more: test tools, transformers, scikit-learn, ...).
MINDSPEED_PIP = ["packaging>=24.2", "numpy<=1.26.0", "einops", "six", "regex", "decorator", "attrs", "psutil",
                 "scipy", "sentencepiece", *TORCHAIR_PIP]
# What runs, by marker (pyproject.toml; tests/conftest.py marks every test with its folder): a release row runs the
# npu tests and those marked release (a row without torch_npu, cpu-<torch>, the release ones only); a MindSpeed pair
# those marked mindspeed, and the cluster wheel's second pair also the device tests and the install's imports.
SELECT_ROW = "npu or release"
SELECT_CPU_ROW = "release and not npu"
SELECT_MINDSPEED = "mindspeed"
SELECT_WHEEL = "mindspeed or device or (package and release)"
# CI's subset (make test-mindspeed MINDSPEED_SUBSET=ci): the two-rank tests on the first pair only, and the wheel pair
# without the device suite (the first pair's tests and the wheel pair's own MindSpeed tests already run the installed
# package on the device; the device suite's sources run in make test's NPU pass and in every release row).
SELECT_WHEEL_CI = "mindspeed or (package and release)"


def row(release):
    for r in ROWS:
        if r[0] == release:
            return r
    raise SystemExit(f"versions.py: {release} is not a supported release ({', '.join(r[0] for r in ROWS)})")


def _expand(tests):
    out = []
    for t in tests:
        out += sorted(glob.glob(os.path.join(ROOT, t))) or [os.path.join(ROOT, t)]
    return out


def _tree_digest():
    """What the working tree holds (HEAD, its changes and untracked files): a wheel built from another is stale."""
    import hashlib

    h = hashlib.sha256()
    for cmd in (["git", "rev-parse", "HEAD"], ["git", "diff", "HEAD"],
                ["git", "ls-files", "--others", "--exclude-standard"]):
        h.update(subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True).stdout)
    return h.hexdigest()


WHEELS = os.path.join(ROOT, "build", "mindspeed", "wheel")  # the cluster wheel: built by one pair, installed by another


def _prepare(release, base, packages, python=None, wheel=None):
    """Steps 1-4 for a torch_npu release (a row of ROWS) in `base`: the venv (venvs.torch_venv with `packages`, its
    pip / pip_no_deps / like; `python` instead of the row's Python), the fake CANN, README's install of a clean copy
    of the tree.
    `wheel`: "build" also builds the cluster wheel (docs/install.md: `pip wheel --no-build-isolation --no-deps .`)
    into WHEELS; "install" installs the one there, built in another venv of the same torch and torch_npu, instead
    of compiling (as a cluster node without a compiler does), when it is of this tree.
    Returns (python, environment for the tests, the installed torch / torch_npu releases)."""
    npu_release, torch_release, row_python, _ = row(release)
    python = python or row_python
    cpu_only = npu_release.startswith("cpu-")
    venv = os.path.join(base, "venv")
    py = venvs.torch_venv(venv, python, torch_release, None if cpu_only else npu_release, **packages)

    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if not cpu_only:
        lib = subprocess.run([py, os.path.join(ROOT, "tests", "fake_cann", "build.py")], check=True,
                             capture_output=True, text=True).stdout.strip().splitlines()[-1]
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        shim = os.path.join(lib, "libnpu_ext_alloc_config_shim.so")  # a CUDA build of torch (alloc_config_shim.cpp)
        if os.path.exists(shim):
            env["LD_PRELOAD"] = shim

    before = (venvs.installed(py, "torch"), venvs.installed(py, "torch-npu"))
    src = os.path.join(base, "src")
    stamp = os.path.join(WHEELS, "tree.sha256")
    wheels = sorted(glob.glob(os.path.join(WHEELS, "torch_ext-*.whl")))
    if wheel == "install" and wheels and os.path.exists(stamp) and open(stamp).read() == _tree_digest():
        print(f"versions.py: installing the cluster wheel {os.path.basename(wheels[-1])} (no compiler)", flush=True)
        venvs.copy_tree(src)
        subprocess.run([py, "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", wheels[-1]],
                       env=dict(env, CC="false", CXX="false"), check=True)
    else:
        venvs.install_tree(py, src, env)
    if wheel == "build":
        shutil.rmtree(WHEELS, ignore_errors=True)
        subprocess.run([py, "-m", "pip", "wheel", "--quiet", "--no-build-isolation", "--no-deps", "-w", WHEELS, "."],
                       cwd=src, env=venvs.build_env(env), check=True)
        with open(stamp, "w") as f:
            f.write(_tree_digest())
    after = (venvs.installed(py, "torch"), venvs.installed(py, "torch-npu"))
    if before != after:
        raise SystemExit(f"versions.py: installing torch_ext changed torch / torch_npu from {before} to {after}")

    site = venvs.site(py)
    test_env = dict(env, PYTHONPATH=site + os.pathsep + ROOT, NPU_EXT_EXPECT_BUILD=os.path.join(site, "torch_ext"))
    if not cpu_only:
        test_env["NPU_EXT_EXPECT_NPU"] = "1"
    return py, test_env, after


def _pytest(py, base, env, select, workers, not_marked=(), tests=None):
    """pytest over the tests selected by the marker expression `select` (within the paths `tests`, default all) in
    `base` with `env`, without the tests of the markers `not_marked`; (exit code, pytest's closing counts). The tests
    of one xdist_group run in one worker (--dist loadgroup; the others spread as with the default)."""
    expression = " and ".join([f"({select})"] + [f"not {m}" for m in not_marked])
    pytest = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--rootdir={ROOT}",
              "-c", os.path.join(ROOT, "pyproject.toml"), "-n", str(workers), "--dist", "loadgroup", "-m", expression]
    pytest += _expand(tests or ["tests"])
    proc = subprocess.Popen(pytest, cwd=base, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail = []
    for out in proc.stdout:
        sys.stdout.write(out)
        tail = (tail + [out])[-5:]
    proc.wait()
    return proc.returncode, _counts(tail, proc)


def run(release, tests, workers):
    select = SELECT_CPU_ROW if release.startswith("cpu-") else SELECT_ROW
    t0 = time.time()
    npu_release, _, python, _ = row(release)
    base = os.path.join(ROOT, "build", "versions", release)
    pip, pip_no_deps = venv_packages(release)
    py, test_env, after = _prepare(release, base, {"pip": pip, "pip_no_deps": pip_no_deps})
    # other torch / torch_npu pairs to import this build under (tests/package/test_version_mismatch.py)
    others = [os.path.join(ROOT, v, "bin", "python") for v in (".venv", ".venv-npu")]
    others += sorted(glob.glob(os.path.join(ROOT, "build", "versions", "*", "venv", "bin", "python")))
    test_env["NPU_EXT_OTHER_RUNTIMES"] = os.pathsep.join(p for p in others if os.path.exists(p) and p != py)
    not_run = [m for m, _ in releases.not_run(releases.find(TABLE, release))]
    code, counts = _pytest(py, base, test_env, select, workers, not_run, tests)
    seconds = time.time() - t0
    mcore = venvs.installed(py, "megatron-core")
    line = (f"torch_npu {npu_release if not npu_release.startswith('cpu-') else '-'} | torch {after[0]} | "
            f"Python {python} | megatron-core {mcore} | {counts} | {seconds:.0f} s")
    with open(os.path.join(base, "report.json"), "w") as f:
        json.dump({"release": release, "torch": after[0], "torch_npu": after[1], "python": python,
                   "megatron_core": mcore, "result": counts, "seconds": round(seconds), "exit": code}, f)
    print(f"versions: {line}", flush=True)
    return code


def thirdparty():
    """The directory of the MindSpeed and Megatron-LM archives: $NPU_EXT_THIRDPARTY, else build/thirdparty."""
    return os.environ.get("NPU_EXT_THIRDPARTY") or os.path.join(ROOT, "build", "thirdparty")


def fetch_commands(pair, directory):
    """The git commands that make a pair's two archives in `directory` from the pinned commits of the release table
    (they need the network, which this project's machines do not have: CI sets NPU_EXT_THIRDPARTY instead)."""
    lines = []
    for repo, commit, archive in ((pair["repository"], pair["commit"], pair["archive"]),
                                  (pair["megatron_lm_repository"], pair["megatron_lm_commit"],
                                   pair["megatron_lm_archive"])):
        name = archive[:-len(".tar.gz")]
        lines += [f"git clone --filter=blob:none {repo} {directory}/{name}.git",
                  f"git -C {directory}/{name}.git archive --format=tar.gz --prefix={name}/ -o {directory}/{archive} "
                  f"{commit}"]
    return lines


def _unpack(archive, dst):
    """The archive's single top directory unpacked as dst (again only when the archive changed)."""
    import tarfile

    stamp = os.path.join(dst, ".npu_ext_archive")
    key = f"{archive} {os.path.getsize(archive)} {os.path.getmtime(archive)}"
    if os.path.exists(stamp):
        with open(stamp) as f:
            if f.read() == key:
                return dst
    shutil.rmtree(dst, ignore_errors=True)
    tmp = dst + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")
    (top,) = os.listdir(tmp)
    os.replace(os.path.join(tmp, top), dst)
    os.rmdir(tmp)
    with open(stamp, "w") as f:
        f.write(key)
    return dst


def _toolkit(base, lib):
    """CANN's set_env.sh for the fake CANN, as the MindSpeed pairs need it: ASCEND_HOME_PATH laid out in
    base/ascend-toolkit from tests/fake_cann/toolkit (its README) with lib64 the fake CANN's `lib`; triton-ascend's
    compiler path, its cache (keyed by the stand-ins, which triton's own key ignores) and torch's extension
    directory under base."""
    import hashlib

    toolkit = os.path.join(ROOT, "tests", "fake_cann", "toolkit")
    home = os.path.join(base, "ascend-toolkit")
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(toolkit, home)
    for d in ("opp", "runtime", "compiler"):  # torch_npu's CANN check, once ASCEND_HOME_PATH is set
        os.makedirs(os.path.join(home, d), exist_ok=True)
    os.symlink(lib, os.path.join(home, "lib64"))
    digest = hashlib.sha256()
    for root, _, files in sorted(os.walk(toolkit)):
        for name in sorted(files):
            with open(os.path.join(root, name), "rb") as f:
                digest.update(name.encode() + f.read())
    return {"ASCEND_HOME_PATH": home, "ASCEND_OPP_PATH": os.path.join(home, "opp"),
            "TRITON_NPU_COMPILER_PATH": os.path.join(home, "bin"),
            "TRITON_CACHE_DIR": os.path.join(base, "triton-cache-" + digest.hexdigest()[:12]),
            "TORCH_EXTENSIONS_DIR": os.path.join(base, "torch-extensions")}


def mindspeed(branch, tests, workers):
    """One MindSpeed pair: its venv, Megatron-LM and MindSpeed as MindSpeed's guide installs them, torch_ext by
    README's command, tests/integrations/test_mindspeed.py in that runtime on the fake CANN."""
    t0 = time.time()
    if branch not in MINDSPEED:
        raise SystemExit(f"versions.py: {branch} is not a MindSpeed pair ({', '.join(MINDSPEED)})")
    pair = MINDSPEED[branch]
    archive, megatron_archive, release, python = (pair["archive"], pair["megatron_lm_archive"], pair["torch_npu"],
                                                  pair["python"])
    src_dir = thirdparty()
    llm = pair.get("mindspeed_llm")  # MindSpeed-LLM over this pair (tests/integrations/test_mindspeed_llm.py)
    archives = (archive, megatron_archive) + ((llm["archive"],) if llm else ())
    missing = [a for a in archives if not os.path.exists(os.path.join(src_dir, a))]
    if missing:
        raise SystemExit(f"versions.py: {', '.join(missing)} not in {src_dir}. Set NPU_EXT_THIRDPARTY to the directory "
                         "holding the MindSpeed and Megatron-LM archives, or make them there from the pinned commits "
                         "of the release table (this needs the network):\n  mkdir -p " + src_dir + "\n  "
                         + "\n  ".join(fetch_commands(pair, src_dir)))
    base = os.path.join(ROOT, "build", "mindspeed", branch)
    megatron_dir = _unpack(os.path.join(src_dir, megatron_archive), os.path.join(base, "megatron-lm"))
    mindspeed_dir = _unpack(os.path.join(src_dir, archive), os.path.join(base, "mindspeed"))
    packages = {"pip": [*MINDSPEED_PIP, *pair["pip"], *(llm["pip"] if llm else [])],
                "pip_no_deps": llm.get("pip_no_deps", []) if llm else []}
    for other, p in MINDSPEED.items():  # the same runtime: start from its copy
        like = os.path.join(ROOT, "build", "mindspeed", other, "venv")
        if other != branch and (p["torch_npu"], p["python"]) == (release, python) and os.path.isdir(like):
            packages["like"] = like
            break
    # The cluster wheel (docs/install.md): the first pair of a runtime builds it, a later pair of the same runtime
    # installs it instead of compiling, and runs the NPU device suite (not in CI's subset) and the build-contract tests
    # with it too.
    same = [b for b, p in MINDSPEED.items() if (p["torch_npu"], p["python"]) == (release, python)]
    wheel = None if len(same) < 2 else ("build" if same[0] == branch else "install")
    py, test_env, after = _prepare(release, base, packages, python, wheel)
    ci = os.environ.get("NPU_EXT_MINDSPEED_SUBSET") == "ci"
    select = (SELECT_WHEEL_CI if ci else SELECT_WHEEL) if wheel == "install" else SELECT_MINDSPEED
    if wheel == "install":
        others = [os.path.join(ROOT, v, "bin", "python") for v in (".venv", ".venv-npu")]
        others += sorted(glob.glob(os.path.join(ROOT, "build", "versions", "*", "venv", "bin", "python")))
        test_env["NPU_EXT_OTHER_RUNTIMES"] = os.pathsep.join(p for p in others if os.path.exists(p))
    # MindSpeed's guide: pip install -e . in its checkout; --no-deps: the packages its import needs are above
    r = subprocess.run([py, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "-e", mindspeed_dir],
                       env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0"), capture_output=True, text=True)
    if r.returncode != 0:  # (its setup.py's warnings otherwise: a page of them)
        raise SystemExit(f"versions.py: installing MindSpeed failed:\n{r.stdout}\n{r.stderr}")
    test_env["PYTHONPATH"] += os.pathsep + megatron_dir  # Megatron-LM's megatron/, as MindSpeed's guide puts it
    test_env.update(_toolkit(base, test_env["LD_LIBRARY_PATH"].split(os.pathsep)[0]))
    # set_env.sh's PYTHONPATH: CANN's Python modules (the acl stand-in, which MindSpeed-LLM imports)
    test_env["PYTHONPATH"] += os.pathsep + os.path.join(test_env["ASCEND_HOME_PATH"], "python", "site-packages")
    test_env["NPU_EXT_MINDSPEED"] = branch
    if llm:
        test_env.update(_mindspeed_llm(py, base, llm, megatron_dir, src_dir))
    with open(os.path.join(base, "test-env.json"), "w") as f:  # the tests' environment, to run a worker by hand
        json.dump(test_env, f)
    not_run = [] if llm else ["mindspeed_llm"]  # MindSpeed-LLM's tests: only on the pair that carries it
    if ci and branch != next(iter(MINDSPEED)):
        not_run.append("mindspeed_ranks")  # CI's subset: the ranks on one pair
    code, counts = _pytest(py, base, test_env, select, workers, not_run, tests=tests)
    if branch == next(iter(MINDSPEED)):  # the documentation's MindSpeed runtime is the first pair's
        code = _docs(py, base, test_env) or code
    seconds = time.time() - t0
    print(f"versions: MindSpeed {branch} | Megatron-LM {pair['megatron_lm']} | "
          f"torch_npu {after[1]} | torch {after[0]} | Python {python} | {counts} | {seconds:.0f} s", flush=True)
    return code


def _mindspeed_llm(py, base, llm, megatron_dir, src_dir):
    """MindSpeed-LLM over a MindSpeed pair, as its install guide lays it out: its checkout (unpacked into
    base/mindspeed-llm), run from there, with Megatron-LM's megatron/ beside it: a copy of the pair's Megatron-LM
    (base/mindspeed-llm-megatron), since Megatron compiles its dataset helpers into its source tree at start-up
    (megatron/core/datasets/Makefile). They are compiled here with the venv's Python (its pybind11 and its
    extension suffix: the Makefile asks python3-config, which on PATH may be another Python's); the run's make then
    finds them up to date when given the same suffix (the worker sets MAKEFLAGS). The environment for the tests."""
    llm_dir = _unpack(os.path.join(src_dir, llm["archive"]), os.path.join(base, "mindspeed-llm"))
    copy = os.path.join(base, "mindspeed-llm-megatron")
    stamp = os.path.join(copy, ".npu_ext_archive")
    source_stamp = open(os.path.join(megatron_dir, ".npu_ext_archive")).read()
    if not os.path.exists(stamp) or open(stamp).read() != source_stamp:
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(megatron_dir, copy, symlinks=True)
    suffix = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"],
                            check=True, capture_output=True, text=True).stdout.strip()
    venv_bin = os.path.dirname(py)
    env = dict(os.environ, PATH=venv_bin + os.pathsep + os.environ["PATH"])  # python3: the venv's (its pybind11)
    datasets = os.path.join(copy, "megatron", "core", "datasets")
    r = subprocess.run(["make", "-s", "-C", datasets, f"LIBEXT={suffix}"], env=env, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(os.path.join(datasets, "helpers_cpp" + suffix)):  # (else: warnings)
        raise SystemExit(f"versions.py: Megatron's dataset helpers were not built as helpers_cpp{suffix}:\n"
                         f"{r.stdout}\n{r.stderr}")
    return {"NPU_EXT_MINDSPEED_LLM": llm_dir, "NPU_EXT_MINDSPEED_LLM_MEGATRON": copy,
            "NPU_EXT_MINDSPEED_LLM_EXT_SUFFIX": suffix}


def _docs(py, base, env):
    """The documentation's code blocks of the MindSpeed runtime (tests/docs/test_pages.py, run by .venv's pytest):
    their scratch venv over this pair's, with the pair's environment (`env`, handed over in a file); the exit code."""
    path = os.path.join(base, "docs-env.json")
    with open(path, "w") as f:
        json.dump(env, f)
    runner = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "LD_PRELOAD")}
    runner.update(NPU_EXT_DOCS_RUNTIME="mindspeed", NPU_EXT_DOCS_PYTHON=py, NPU_EXT_DOCS_ENV=path)
    print("versions.py: the documentation's blocks of the MindSpeed runtime", flush=True)
    return subprocess.run([os.path.join(ROOT, ".venv", "bin", "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           os.path.join(ROOT, "tests", "docs")], cwd=ROOT, env=runner).returncode


def megatron(release, python, tests, workers):
    """make test-megatron: the tests marked megatron on megatron-core `release`, in a venv of its own,
    .venv-megatron/<release>-py<Python>, with the Python and packages of the table's megatron_core.series
    (releases.megatron_core_venv; `python` instead of its Python). On the default row's Python the venv is a layer
    over .venv, megatron-core installed over .venv's without its declared requirements (0.12 declares training tools,
    wandb, nvidia-modelopt, tensorstore, ..., that none of the modules used here imports), and the tests import the
    source tree's build (make build); on another Python (the series from 0.17) it holds the default torch
    (venvs.torch_venv) and megatron-core with its requirements, and the tree installed with README's command
    (build/megatron-py<Python>/src; the DEFAULT kernel variant only)."""
    rule_python, pip = releases.megatron_core_venv(TABLE, release)
    python = python or rule_python
    default = releases.default_row(TABLE)
    venv = os.path.join(ROOT, ".venv-megatron", f"{release}-py{python}")
    print(f"== megatron-core {release}, Python {python}: {' '.join(tests or ['tests'])}", flush=True)
    if python == default["python"]:
        py = venvs.layer(venv, os.path.join(ROOT, ".venv"), [f"megatron-core=={release}", *pip])
        base, env = ROOT, dict(os.environ, PYTHONPATH=ROOT)
    else:
        py = venvs.torch_venv(venv, python, default["torch"], pip=[f"megatron-core=={release}", *pip])
        base = os.path.join(ROOT, "build", f"megatron-py{python}")
        venvs.install_tree(py, os.path.join(base, "src"), dict(os.environ))
        site = venvs.site(py)
        env = dict(os.environ, PYTHONPATH=site + os.pathsep + ROOT, NPU_EXT_EXPECT_BUILD=os.path.join(site, "torch_ext"))
    code, counts = _pytest(py, base, env, "megatron", workers, tests=tests)
    print(f"versions: megatron-core {release} | Python {python} | {counts}", flush=True)
    return code


def _counts(tail, proc):
    """pytest's closing counts ('1052 passed, 3 warnings in 210.35s' -> '1052 passed, 0 failed')."""
    import re

    text = " ".join(tail)
    passed = re.search(r"(\d+) passed", text)
    failed = re.search(r"(\d+) failed", text)
    errors = re.search(r"(\d+) errors?", text)
    out = f"{passed.group(1) if passed else 0} passed, {failed.group(1) if failed else 0} failed"
    if errors:
        out += f", {errors.group(1)} errors"
    return out if proc.returncode in (0, 1) else out + f" (exit {proc.returncode})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("release")
    r.add_argument("--tests", nargs="*", default=None)
    r.add_argument("--workers", default=os.environ.get("TEST_WORKERS", str(os.cpu_count() or 2)))
    a = sub.add_parser("all")
    a.add_argument("releases", nargs="*", help="some of the releases (default: every one)")
    a.add_argument("--workers", default=os.environ.get("TEST_WORKERS", str(os.cpu_count() or 2)))
    m = sub.add_parser("mindspeed")
    m.add_argument("branches", nargs="*", help="some of the MindSpeed pairs (default: every one)")
    m.add_argument("--tests", nargs="*", default=None)
    m.add_argument("--workers", default=os.environ.get("TEST_WORKERS", str(os.cpu_count() or 2)))
    sub.add_parser("table")
    sub.add_parser("deselected")
    g = sub.add_parser("megatron")
    g.add_argument("release", help="a megatron-core release")
    g.add_argument("--python", default=None, help="the venv's Python (default: the release table's for that series)")
    g.add_argument("--tests", nargs="*", default=None)
    g.add_argument("--workers", default="2")
    args = ap.parse_args()
    if args.cmd == "megatron":
        return megatron(args.release, args.python, args.tests, args.workers)
    if args.cmd == "deselected":
        print(releases.deselected(TABLE))
        return 0
    if args.cmd == "table":
        print(releases.support_table(TABLE))
        return 0
    if args.cmd == "mindspeed":
        failed = 0
        for branch in args.branches or list(MINDSPEED):
            failed |= mindspeed(branch, args.tests, args.workers) != 0
        return 1 if failed else 0
    if args.cmd == "run":
        return run(args.release, args.tests, args.workers)
    chosen = args.releases or [r[0] for r in ROWS]
    failed = 0
    for npu in chosen:
        row(npu)
        failed |= run(npu, None, args.workers) != 0
    lines = []
    for npu in chosen:
        with open(os.path.join(ROOT, "build", "versions", npu, "report.json")) as f:
            lines.append(json.load(f))
    print("\n| torch_npu | torch | Python | tests | time |\n|---|---|---|---|---|")
    for r in lines:
        print(f"| {r['release']} | {r['torch']} | {r['python']} | {r['result']} | {r['seconds']} s |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
