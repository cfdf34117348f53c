"""The module must load and run on any x86-64 CPU: AVX/AVX2 instructions may only appear in the kernels of
the AVX2 and AVX512 variants (namespaces npu_ext::cpu::AVX2 / ::AVX512, and at::vec's matching namespaces),
and AVX-512 instructions only in the AVX512 variant. Everything else (registration, validation, dispatch,
static initialisers, inline functions the variants share) must be plain x86-64."""

import re
import shutil
import subprocess

import platform

import pytest

import torch_ext

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="x86-64 instruction check; other architectures build DEFAULT alone")


def _variant(func):
    if "AVX512::" in func or "6AVX512" in func:  # demangled, or mangled (OpenMP outlined ._omp_fn.N)
        return "AVX512"
    if "AVX2::" in func or "4AVX2" in func:
        return "AVX2"
    return None


@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs binutils' objdump")
def test_vector_instructions_only_in_their_isa_variant():
    so = torch_ext._C.__file__
    asm = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", so], capture_output=True, text=True,
                         check=True).stdout
    func, bad, seen512 = None, {}, 0
    for line in asm.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            func = m.group(1)
            continue
        if func is None or "\t" not in line:
            continue
        ins = line.split("\t", 1)[1]
        avx512 = "%zmm" in ins or re.search(r"%k[0-7]\b", ins) is not None
        avx = avx512 or "%ymm" in ins or re.match(r"\s*v[a-z0-9]+\s", ins) is not None
        variant = _variant(func)
        if avx512 and variant == "AVX512":
            seen512 += 1
        if (avx512 and variant != "AVX512") or (avx and variant is None):
            bad.setdefault(func, ins)
    assert not bad, "vector instructions outside their ISA variant:\n" + "\n".join(
        f"{f[:160]}: {i}" for f, i in list(bad.items())[:20])
    assert seen512 > 0, "no AVX-512 kernel code found: is the AVX512 variant built?"
