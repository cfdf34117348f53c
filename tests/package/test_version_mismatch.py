"""torch_ext built against one torch / torch_npu pair and imported under another (torch_ext/_compat.py, from the
record setup.py writes beside each compiled module, <module>.versions.json), before the module is loaded: never an
undefined symbol, never a crash.

* Another torch release, or the same release with the other C++ ABI: the import stops with an ImportError naming
  both sides. A compiled module without its record (or with one that does not name the C++ ABI): an ImportError
  saying so. `python -m torch_ext` prints what was built and what runs before that ImportError.
* The same torch and another torch_npu, a .postN of the same release included: the import succeeds and the CPU ops
  work; torch_ext._C_npu is not loaded (a warning at import), and torch_ext._npu.why_not_loaded() names both
  torch_npu releases. The evidence for not loading a .postN: the release table's post_release_evidence, a torch_ext
  built against one .postN that does not load under the next (a symbol gone from its libtorch_npu.so).

* test_other_runtime: the real thing. tools/versions.py (make test-versions, make test-npu TORCH_NPU=...) runs this
  file in a release's venv against the package it installed there, with NPU_EXT_OTHER_RUNTIMES naming interpreters
  of other pairs (.venv: the default torch without torch_npu; .venv-npu: with the default torch_npu); the built
  package is imported by each of them.
* the other tests: everywhere, on a copy of the running package whose records are edited (the copy is otherwise the
  working build, so only the record can stop it). The torch_npu tests use the package's own _C_npu and the real
  torch_npu where the package has them (a release's venv); elsewhere a stand-in: a torch_npu package whose metadata
  names the release table's post_release_evidence "runs" release and a torch_ext._C_npu that fails if it is ever
  imported.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import expecttest
import pytest
import torch

import torch_ext
from torch_ext import _releases

# Not under the aarch64 emulation (tools/aarch64/run.sh selects -m 'not arch_independent'): no
# architecture-specific code of the package here, and make test runs it natively.
pytestmark = [pytest.mark.release, pytest.mark.arch_independent]

PACKAGE = os.path.dirname(os.path.abspath(torch_ext.__file__))
# The stand-in torch_npu's release: a .postN that a build of the previous one does not load under (the release table)
STANDIN_TORCH_NPU = _releases.load()["post_release_evidence"]["runs"]


def _copy_package(dst):
    """This torch_ext (its compiled modules, their records and its Python) in dst/torch_ext."""
    shutil.copytree(PACKAGE, os.path.join(dst, "torch_ext"), ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def _clean_env(**extra):
    """This process's environment without what points at its own build (PYTHONPATH, the preload of the harness),
    torch_npu's autoload off: another runtime's CANN may be absent, and the check must not need it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_PRELOAD", "NPU_EXT_EXPECT_BUILD")}
    env.update(TORCH_DEVICE_BACKEND_AUTOLOAD="0", **extra)
    return env


# Another runtime may hold an editable torch_ext (the project's .venv: `make develop`), whose import hook maps
# torch_ext's submodules to its own tree ahead of PYTHONPATH: the copy under test would load that tree's _C. The
# hook is dropped first, so that the import is this copy's alone.
THIS_COPY_ONLY = "import sys; sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in repr(f)]\n"


def _import(python, path, extra_env=None):
    """Imports torch_ext from `path` with `python`; returns (exit code, last line of stderr)."""
    env = _clean_env(PYTHONPATH=path, **(extra_env or {}))
    p = subprocess.run([python, "-c", THIS_COPY_ONLY + "import torch_ext"], capture_output=True, text=True, env=env,
                       cwd=path)
    lines = [line for line in p.stderr.strip().splitlines() if line.strip()]
    return p.returncode, (lines[-1] if lines else "")


def _fill(template, built, running):
    """The expected message of one pair: the names of the template replaced by that pair's releases (the releases
    are put into the template, not taken out of the message: torch and torch_npu often carry the same number)."""
    for name, value in sorted({**built, **running}.items(), key=lambda kv: -len(kv[0])):
        template = template.replace(name, value)
    return template


def _run(path, args, extra_env=None, keep_preload=False, npu_site=None):
    """`python args` (this interpreter) with the torch_ext copy at `path` first on the path (and `npu_site`, the
    stand-in torch_npu, after it); returns the CompletedProcess. keep_preload: the real torch_npu is imported, which
    may need the harness's preload (tools/versions.py: the allocator shim of a CUDA build of torch)."""
    env = _clean_env(PYTHONPATH=os.pathsep.join([path] + ([npu_site] if npu_site else [])), **(extra_env or {}))
    if keep_preload and os.environ.get("LD_PRELOAD"):
        env["LD_PRELOAD"] = os.environ["LD_PRELOAD"]
    return subprocess.run([sys.executable] + args, capture_output=True, text=True, env=env, cwd=path, timeout=600)


def _last_line(stderr):
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _record(tmp, module, edit=None):
    """The record of `module` in the copy at tmp, edited by `edit` (a function of the dict) when given."""
    path = os.path.join(tmp, "torch_ext", module + ".versions.json")
    with open(path) as f:
        info = json.load(f)
    if edit is not None:
        edit(info)
        with open(path, "w") as f:
            json.dump(info, f)
    return info


def _npu_side(tmp):
    """A torch_ext._C_npu and a torch_npu for the copy at tmp: (stand-in torch_npu directory or None, running
    torch_npu release). The package's own _C_npu and the installed torch_npu where both are here; else a stand-in
    torch_npu (STANDIN_TORCH_NPU by its metadata, empty) in tmp/npu_site and a _C_npu.py that raises if imported,
    with the record setup.py would have written against it."""
    installed = torch_ext._compat._torch_npu_release()
    if installed and os.path.exists(os.path.join(PACKAGE, "_C_npu.versions.json")):
        return None, installed
    site = os.path.join(tmp, "npu_site")
    os.makedirs(os.path.join(site, "torch_npu"))
    open(os.path.join(site, "torch_npu", "__init__.py"), "w").close()
    dist = os.path.join(site, f"torch_npu-{STANDIN_TORCH_NPU}.dist-info")
    os.makedirs(dist)
    with open(os.path.join(dist, "METADATA"), "w") as f:
        f.write(f"Metadata-Version: 2.1\nName: torch_npu\nVersion: {STANDIN_TORCH_NPU}\n")
    with open(os.path.join(tmp, "torch_ext", "_C_npu.py"), "w") as f:
        f.write('raise ImportError("the stand-in torch_ext._C_npu was imported")\n')
    with open(os.path.join(tmp, "torch_ext", "_C_npu.versions.json"), "w") as f:
        json.dump({**_record(tmp, "_C"), "module": "torch_ext._C_npu", "torch_npu": STANDIN_TORCH_NPU}, f)
    return site, STANDIN_TORCH_NPU


def _other_post(version):
    """Another .postN of the same torch_npu release: 1.2.3.post11 -> 1.2.3.post10, 1.2.3 -> 1.2.3.post1."""
    m = re.fullmatch(r"(.*?)(?:\.post(\d+))?", version)
    n = int(m.group(2) or 0)
    return f"{m.group(1)}.post{n - 1 if n > 1 else n + 1}"


# After `import torch_ext`: what loaded, why not, the warnings of the import, and a CPU op against torch's autograd.
_PROBE = r"""
import json, sys, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch_ext
import torch
x, g = torch.randn(4, 64, dtype=torch.float64, requires_grad=True), torch.randn(4, 64, dtype=torch.float64)
expected, = torch.autograd.grad(torch.nn.functional.gelu(x), x, g)
got = torch.ops.npu_ext.gelu_backward_v2(g, x.detach(), approximate="none")
print(json.dumps({"loaded": torch_ext._npu.LOADED, "why": torch_ext._npu.why_not_loaded(),
                  "c_npu_imported": "torch_ext._C_npu" in sys.modules,
                  "warnings": [str(w.message) for w in caught if "torch_ext" in str(w.message)],
                  "cpu_op": bool(torch.allclose(got, expected))}))
"""


def _abi(flag):
    return torch_ext._compat.abi_name(flag)


class TestVersionMismatch(expecttest.TestCase):
    def _running_pair(self, with_abi=False):
        npu = torch_ext._compat._torch_npu_release()
        return (f"torch {torch.__version__}" + (f" ({_abi(torch_ext._compat.torch_cxx11_abi())})" if with_abi else "")
                + (f" and torch_npu {npu}" if npu else " without torch_npu"))

    def test_recorded_abi_differs(self):
        """The same torch release with the other C++ ABI (torch 2.6's PyPI wheels, pre-C++11, against its
        +cpu.cxx11.abi build): both sides named with their ABI."""
        import tempfile

        running_abi = torch_ext._compat.torch_cxx11_abi()
        with tempfile.TemporaryDirectory() as tmp:
            _copy_package(tmp)
            info = _record(tmp, "_C", lambda i: i.update(cxx11_abi=not i["cxx11_abi"]))
            r = _run(tmp, ["-c", "import torch_ext"], {"NPU_EXT_LOAD_NPU": "0"})
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(_last_line(r.stderr), (
            f"ImportError: torch_ext._C was built against torch {info['torch']} ({_abi(not running_abi)}), but this "
            f"environment runs {self._running_pair(with_abi=True)}. A C++ extension only loads in the torch (and "
            "torch_npu) it was compiled for: rebuild torch_ext here (pip install --no-build-isolation --no-deps "
            "<torch_ext source>), or run it with the releases it was built for."))

    def test_module_without_its_record(self):
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            _copy_package(tmp)
            os.remove(os.path.join(tmp, "torch_ext", "_C.versions.json"))
            r = _run(tmp, ["-c", "import torch_ext"], {"NPU_EXT_LOAD_NPU": "0"})
            so = os.path.basename(torch_ext._C.__file__)
            err = _last_line(r.stderr).replace(tmp, "TMP").replace(so, "_C.SO")
        self.assertNotEqual(r.returncode, 0)
        self.assertExpectedInline(err, """\
ImportError: torch_ext._C (TMP/torch_ext/_C.SO) has no build record: TMP/torch_ext/_C.versions.json is missing. torch_ext's setup.py writes it beside every module it compiles (pip install, pip install -e, setup.py build_ext), so this one was built by other means or copied without it, and the torch it was compiled for is unknown. Rebuild torch_ext here (pip install --no-build-isolation --no-deps <torch_ext source>).""")  # noqa: B950

    def test_sources_without_their_build_shadow_the_installed_package(self):
        """Python run from a checkout that was not built in place imports its sources (sys.path[0]): a message
        saying so and naming the installed package, instead of a partial-import error about _C."""
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(PACKAGE, os.path.join(tmp, "torch_ext"),
                            ignore=shutil.ignore_patterns("__pycache__", "_C*.so", "*.versions.json"))
            env = _clean_env(PYTHONPATH=os.path.dirname(PACKAGE))  # an installed torch_ext further down the path
            r = subprocess.run([sys.executable, "-c", THIS_COPY_ONLY + "import torch_ext"], capture_output=True,
                               text=True, env=env, cwd=tmp)
            err = _last_line(r.stderr).replace(tmp, "TMP").replace(PACKAGE, "INSTALLED")
        self.assertNotEqual(r.returncode, 0)
        self.assertExpectedInline(err, """\
ImportError: torch_ext: TMP/torch_ext holds torch_ext's sources without its compiled module (torch_ext._C): this is a source directory, imported ahead of the installed torch_ext in INSTALLED because Python runs from TMP (the current directory, or the script's). Run from another directory (cd ~), or build the sources in place (pip install --no-build-isolation --no-deps -e .).""")  # noqa: B950

    def test_record_without_the_abi(self):
        """A record written before the ABI was recorded (torch_ext 0.5.0) does not identify the build."""
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            _copy_package(tmp)
            _record(tmp, "_C", lambda i: i.pop("cxx11_abi"))
            r = _run(tmp, ["-c", "import torch_ext"], {"NPU_EXT_LOAD_NPU": "0"})
            err = _last_line(r.stderr).replace(tmp, "TMP")
        self.assertNotEqual(r.returncode, 0)
        self.assertExpectedInline(err, """\
ImportError: torch_ext._C's build record TMP/torch_ext/_C.versions.json does not name cxx11_abi (written by a torch_ext before 0.5.1, or edited), so the torch it was compiled for is not known. Rebuild torch_ext here (pip install --no-build-isolation --no-deps <torch_ext source>).""")  # noqa: B950

    def test_torch_npu_postn_difference(self):
        """_C_npu built against another .postN of the running torch_npu release (another release alike): the
        import succeeds, the CPU ops work, _C_npu is not loaded, one warning, why_not_loaded() names both; python -m
        torch_ext reports it."""
        import tempfile

        for other in ("post", "release"):
            with self.subTest(other), tempfile.TemporaryDirectory() as tmp:
                _copy_package(tmp)
                npu_site, running = _npu_side(tmp)
                built = _other_post(running) if other == "post" else "2.5.1"
                info = _record(tmp, "_C_npu", lambda i: i.update(torch_npu=built))
                r = _run(tmp, ["-c", _PROBE], keep_preload=True, npu_site=npu_site)
                self.assertEqual(r.returncode, 0, r.stderr)
                out = json.loads(r.stdout.strip().splitlines()[-1])
                same = (f" (the same release {torch_ext._compat.base_release(running)}, another .postN: "
                        "post-releases change the C++ symbols torch_ext._C_npu links)" if other == "post" else "")
                why = (f"torch_ext._C_npu was built against torch_npu {built}, but this environment runs torch_npu "
                       f"{running}{same}; rebuild torch_ext here (pip install --no-build-isolation --no-deps "
                       "<torch_ext source>) to load the NPU kernels")
                self.assertEqual(out, {"loaded": False, "why": why, "c_npu_imported": False,
                                       "warnings": [f"torch_ext: {why}. The npu_ext NPU kernels are not loaded; the "
                                                    "CPU ops work"],
                                       "cpu_op": True})
                r = _run(tmp, ["-m", "torch_ext"], keep_preload=True, npu_site=npu_site)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(f"built against: _C_npu: torch {info['torch']}, {_abi(info['cxx11_abi'])}, torch_npu "
                              f"{built}, Python {info['python']} (differs: torch_npu {running} runs)\n", r.stdout)
                self.assertIn(f"built against: _C: torch {info['torch']}, {_abi(info['cxx11_abi'])}, Python "
                              f"{info['python']} (matches what runs)\n", r.stdout)
                self.assertIn(f"\nNPU kernels: not loaded ({why})\n", r.stdout)

    def test_npu_module_without_its_record(self):
        """_C_npu without its record stops the import too (the torch it was built for is unknown);
        NPU_EXT_LOAD_NPU=0 runs without it."""
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            _copy_package(tmp)
            npu_site, _ = _npu_side(tmp)
            os.remove(os.path.join(tmp, "torch_ext", "_C_npu.versions.json"))
            r = _run(tmp, ["-c", "import torch_ext"], keep_preload=True, npu_site=npu_site)
            err = _last_line(r.stderr)
            self.assertNotEqual(r.returncode, 0)
            self.assertTrue(err.startswith("ImportError: torch_ext._C_npu ("), err)
            self.assertIn(f"has no build record: {tmp}/torch_ext/_C_npu.versions.json is missing.", err)
            self.assertTrue(err.endswith("Rebuild torch_ext here (pip install --no-build-isolation "
                                         "--no-deps <torch_ext source>) (or set NPU_EXT_LOAD_NPU=0 to run without its "
                                         "NPU kernels)."), err)
            r = _run(tmp, ["-c", _PROBE], {"NPU_EXT_LOAD_NPU": "0"}, keep_preload=True, npu_site=npu_site)
            self.assertEqual(r.returncode, 0, r.stderr)
            out = json.loads(r.stdout.strip().splitlines()[-1])
            self.assertEqual((out["loaded"], out["why"], out["cpu_op"]), (False, "NPU_EXT_LOAD_NPU=0", True))

    def test_python_m_torch_ext_reports_a_torch_mismatch(self):
        """python -m torch_ext cannot import the package then, but prints what was built and what runs before the
        ImportError."""
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            _copy_package(tmp)
            info = _record(tmp, "_C", lambda i: i.update(torch="2.5.1"))
            r = _run(tmp, ["-m", "torch_ext"], {"NPU_EXT_LOAD_NPU": "0"})
        self.assertNotEqual(r.returncode, 0)
        npu = torch_ext._compat._torch_npu_release()
        abi = _abi(torch_ext._compat.torch_cxx11_abi())
        lo, hi = torch_ext._compat.MIN_TORCH, torch_ext._compat.MAX_TORCH
        report = ("torch_ext: the import stops on what its compiled modules were built against:\n"
                  f"  built against: _C: torch 2.5.1, {_abi(info['cxx11_abi'])}, Python {info['python']} (differs: "
                  f"torch {torch_ext._compat.torch_release()} runs)\n")
        self.assertIn(report, r.stderr)
        self.assertIn(f"  running: torch {torch.__version__}, {abi}, " + (f"torch_npu {npu}" if npu else "no torch_npu")
                      + f", Python {info['python']} (supported: torch {lo[0]}.{lo[1]} to {hi[0]}.{hi[1]})\n", r.stderr)
        self.assertTrue(_last_line(r.stderr).startswith("ImportError: torch_ext._C was built against torch 2.5.1, but "
                                                        f"this environment runs {self._running_pair()}."), r.stderr)

    def test_recorded_release_differs(self):
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            _copy_package(tmp)
            record = os.path.join(tmp, "torch_ext", "_C.versions.json")
            with open(record) as f:
                info = json.load(f)
            self.assertEqual(info["torch"], torch.__version__.split("+")[0])  # what setup.py recorded
            # the copy imports as it is (the record matches)
            code, err = _import(sys.executable, tmp, {"NPU_EXT_LOAD_NPU": "0"})
            self.assertEqual(code, 0, err)
            info["torch"] = "2.5.1"  # a release that never runs here (below the supported range)
            with open(record, "w") as f:
                json.dump(info, f)
            code, err = _import(sys.executable, tmp, {"NPU_EXT_LOAD_NPU": "0"})
        self.assertNotEqual(code, 0)
        # the running pair as the message words it (torch_npu may be installed here: the version venvs)
        npu = torch_ext._compat._torch_npu_release()
        running = f"torch {torch.__version__}" + (f" and torch_npu {npu}" if npu else " without torch_npu")
        self.assertIn(f" runs {running}.", err)
        self.assertExpectedInline(err.replace(running, "RUNNING_PAIR"), """\
ImportError: torch_ext._C was built against torch 2.5.1, but this environment runs RUNNING_PAIR. A C++ extension only loads in the torch (and torch_npu) it was compiled for: rebuild torch_ext here (pip install --no-build-isolation --no-deps <torch_ext source>), or run it with the releases it was built for.""")  # noqa: B950

    def test_other_runtime(self):
        runtimes = [p for p in os.environ.get("NPU_EXT_OTHER_RUNTIMES", "").split(os.pathsep) if p]
        if not runtimes:
            self.skipTest("no other runtime named (NPU_EXT_OTHER_RUNTIMES: tools/versions.py sets it)")
        import tempfile

        built = {}
        for module in ("_C", "_C_npu"):
            path = os.path.join(PACKAGE, module + ".versions.json")
            if os.path.exists(path):
                with open(path) as f:
                    info = json.load(f)
                built["BUILT_TORCH"] = info["torch"]
                built["BUILT_PYTHON"] = built_python = info["python"]
                built_abi = info["cxx11_abi"]
                if "torch_npu" in info:
                    built["BUILT_TORCH_NPU"] = info["torch_npu"]
        tried = 0
        with tempfile.TemporaryDirectory() as tmp:
            _copy_package(tmp)
            for python in runtimes:
                probe = subprocess.run(
                    [python, "-c", "import sys, torch, importlib.metadata as m\n"
                     "try: n = m.version('torch-npu')\nexcept Exception: n = ''\n"
                     "print(int(torch._C._GLIBCXX_USE_CXX11_ABI), '%d.%d' % sys.version_info[:2], torch.__version__, "
                     "n)"],
                    capture_output=True, text=True, check=True, env=_clean_env())
                abi_v, _, rest = probe.stdout.strip().partition(" ")
                py_v, _, rest = rest.partition(" ")
                torch_v, _, npu_v = rest.partition(" ")
                # a Python of another version does not see this build's _C_npu (its file name carries the Python
                # version), so only _C is checked there
                npu_module_seen = py_v == built_python
                running = {"RUNNING_TORCH": torch_v, "RUNNING_PYTHON": py_v}
                if npu_v:
                    running["RUNNING_TORCH_NPU"] = npu_v
                same_torch = torch_v.split("+")[0] == built["BUILT_TORCH"]
                if same_torch and (not npu_v or npu_v.split("+")[0] == built.get("BUILT_TORCH_NPU", npu_v)):
                    continue  # the pair it was built for (or torch alone, with no torch_npu to load there)
                tried += 1
                if same_torch and npu_module_seen:  # torch_npu alone differs: the import succeeds without _C_npu
                    env = _clean_env(PYTHONPATH=tmp)
                    p = subprocess.run([python, "-c", THIS_COPY_ONLY +
                                        "import torch_ext; print(torch_ext._npu.why_not_loaded())"],
                                       capture_output=True, text=True, env=env, cwd=tmp)
                    self.assertEqual(p.returncode, 0, (python, p.stderr))
                    self.assertTrue(p.stdout.strip().startswith(_fill(
                        "torch_ext._C_npu was built against torch_npu BUILT_TORCH_NPU, but this environment runs "
                        "torch_npu RUNNING_TORCH_NPU", built, running)), (python, p.stdout))
                    continue
                code, err = _import(python, tmp)
                self.assertNotEqual(code, 0, f"{python} imported a torch_ext built against {built}")
                self.assertNotIn("undefined symbol", err)
                if same_torch:  # and another Python, which does not see this build's modules
                    expected = ("ImportError: torch_ext._C was built for Python BUILT_PYTHON, which this Python "
                                "RUNNING_PYTHON does not load")
                elif npu_v and "BUILT_TORCH_NPU" in built and npu_module_seen:
                    expected = ("ImportError: torch_ext._C was built against torch BUILT_TORCH; torch_ext._C_npu was "
                                "built against torch BUILT_TORCH and torch_npu BUILT_TORCH_NPU, but this environment "
                                "runs torch RUNNING_TORCH and torch_npu RUNNING_TORCH_NPU.")
                else:
                    expected = ("ImportError: torch_ext._C was built against torch BUILT_TORCH, but this environment "
                                "runs torch RUNNING_TORCH " + ("and torch_npu RUNNING_TORCH_NPU." if npu_v else
                                                               "without torch_npu."))
                built_side = dict(built)
                if bool(int(abi_v)) != built_abi:  # the message names each side's C++ ABI then
                    running["RUNNING_TORCH"] += f" ({_abi(bool(int(abi_v)))})"
                    built_side["BUILT_TORCH"] += f" ({_abi(built_abi)})"
                self.assertTrue(err.startswith(_fill(expected, built_side, running)), (python, err, expected))
                self.assertTrue(re.search(r"[Rr]ebuild torch_ext here \(pip install --no-build-isolation --no-deps",
                                          err), err)
        if not tried:
            self.skipTest(f"every runtime named runs the pair this build is for ({built})")


if __name__ == "__main__":
    import unittest

    unittest.main()
