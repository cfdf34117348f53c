"""torch_ext built against one torch / torch_npu pair and imported under another: the import stops with an
ImportError that names both pairs (torch_ext/_compat.py, from the versions setup.py records beside each compiled
module), before the module is loaded: never an undefined symbol, never a crash.

* test_other_runtime: the real thing. tools/versions.py (make test-versions, make test-npu TORCH_NPU=...) runs this
  file in a release's venv against the package it installed there, with NPU_EXT_OTHER_RUNTIMES naming interpreters
  of other pairs (.venv: torch 2.13.0 without torch_npu; .venv-npu: torch 2.13.0 with torch_npu 2.13.0); the built
  package is imported by each of them.
* test_recorded_release_differs: everywhere else, the same check on a copy of the running package whose record
  names other releases (the copy is otherwise the working build, so only the record can stop it).
"""

import json
import os
import re
import shutil
import subprocess
import sys

import expecttest
import torch

import torch_ext

PACKAGE = os.path.dirname(os.path.abspath(torch_ext.__file__))


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


def _import(python, path, extra_env=None):
    """Imports torch_ext from `path` with `python`; returns (exit code, last line of stderr)."""
    env = _clean_env(PYTHONPATH=path, **(extra_env or {}))
    p = subprocess.run([python, "-c", "import torch_ext"], capture_output=True, text=True, env=env, cwd=path)
    lines = [line for line in p.stderr.strip().splitlines() if line.strip()]
    return p.returncode, (lines[-1] if lines else "")


def _fill(template, built, running):
    """The expected message of one pair: the names of the template replaced by that pair's releases (the releases
    are put into the template, not taken out of the message: torch and torch_npu often carry the same number)."""
    for name, value in sorted({**built, **running}.items(), key=lambda kv: -len(kv[0])):
        template = template.replace(name, value)
    return template


class TestVersionMismatch(expecttest.TestCase):
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
                built_python = info["python"]
                if "torch_npu" in info:
                    built["BUILT_TORCH_NPU"] = info["torch_npu"]
        tried = 0
        with tempfile.TemporaryDirectory() as tmp:
            _copy_package(tmp)
            for python in runtimes:
                probe = subprocess.run(
                    [python, "-c", "import sys, torch, importlib.metadata as m\n"
                     "try: n = m.version('torch-npu')\nexcept Exception: n = ''\n"
                     "print('%d.%d' % sys.version_info[:2], torch.__version__, n)"],
                    capture_output=True, text=True, check=True, env=_clean_env())
                py_v, _, rest = probe.stdout.strip().partition(" ")
                torch_v, _, npu_v = rest.partition(" ")
                # a Python of another version does not see this build's _C_npu (its file name carries the Python
                # version), so only _C is checked there
                npu_module_seen = py_v == built_python
                running = {"RUNNING_TORCH": torch_v}
                if npu_v:
                    running["RUNNING_TORCH_NPU"] = npu_v
                same_torch = torch_v.split("+")[0] == built["BUILT_TORCH"]
                if same_torch and (not npu_v or npu_v.split("+")[0] == built.get("BUILT_TORCH_NPU", npu_v)):
                    continue  # the pair it was built for (or torch alone, with no torch_npu to load there)
                tried += 1
                code, err = _import(python, tmp)
                self.assertNotEqual(code, 0, f"{python} imported a torch_ext built against {built}")
                self.assertNotIn("undefined symbol", err)
                if npu_v and "BUILT_TORCH_NPU" in built and same_torch and npu_module_seen:
                    expected = ("ImportError: torch_ext._C_npu was built against torch BUILT_TORCH and torch_npu "
                                "BUILT_TORCH_NPU, but this environment runs torch RUNNING_TORCH and torch_npu "
                                "RUNNING_TORCH_NPU.")
                elif npu_v and "BUILT_TORCH_NPU" in built and npu_module_seen:
                    expected = ("ImportError: torch_ext._C was built against torch BUILT_TORCH; torch_ext._C_npu was "
                                "built against torch BUILT_TORCH and torch_npu BUILT_TORCH_NPU, but this environment "
                                "runs torch RUNNING_TORCH and torch_npu RUNNING_TORCH_NPU.")
                else:
                    expected = ("ImportError: torch_ext._C was built against torch BUILT_TORCH, but this environment "
                                "runs torch RUNNING_TORCH " + ("and torch_npu RUNNING_TORCH_NPU." if npu_v else
                                                               "without torch_npu."))
                self.assertTrue(err.startswith(_fill(expected, built, running)), (python, err, expected))
                self.assertTrue(re.search(r"rebuild torch_ext here \(pip install --no-build-isolation --no-deps",
                                          err), err)
        if not tried:
            self.skipTest(f"every runtime named runs the pair this build is for ({built})")


if __name__ == "__main__":
    import unittest

    unittest.main()
