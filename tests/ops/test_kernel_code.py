"""The fp32, fp16 and bf16 kernels are vector code in every variant built for this architecture (x86-64: AVX2,
AVX512; aarch64: DEFAULT, which is NEON there): their hot loops use vector floating-point instructions and call
no libm function per element. A libm call (expf, exp2f, erff, ...) inside them is the sign of at::vec's scalar
fallback: at::vec maps exp2/erf/tanh to Sleef only where Sleef is available to the build, and to one libm call
per lane elsewhere (as for an extension on aarch64). fp64 kernels (gradcheck only) may call libm.

Reads the disassembly of the built module (binutils' objdump; on aarch64 hosts emulated by qemu, the host's
aarch64-linux-gnu-objdump)."""

import collections
import pathlib
import platform
import re
import shutil
import subprocess

import pytest

import paths
import torch_ext

X86 = platform.machine().lower() in ("x86_64", "amd64")
VARIANTS = ["AVX2", "AVX512"] if X86 else ["DEFAULT"]


def _declared():
    """{kernel: elementwise?} of every NPU_EXT_DECLARE_KERNEL in csrc/ops/*/kernels.h (the name without _kernel;
    elementwise: it takes a TensorIterator)."""
    found = {}
    for header in sorted(pathlib.Path(paths.ROOT, "csrc", "ops").glob("*/kernels.h")):
        for name, args in re.findall(r"NPU_EXT_DECLARE_KERNEL\(void (\w+)_kernel\(([^)]*)", header.read_text()):
            found[name] = "TensorIteratorBase" in args
    return found


# The kernels, as demangled names show them (<op>_kernel or <op>_impl), and the dtypes they are instantiated for.
KERNELS = _declared()
OPS = list(KERNELS)
# Kernels whose vector loops the compiler puts into shared helpers (the rows and groups of csrc/core/cpu/vec), not
# under the op's name: the scan cannot attribute their instructions.
IN_HELPERS = {"grouped_bias_add", "grouped_bias_add_grad", "scaled_masked_softmax"}
DTYPES = {"float": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16"}
LIBM = re.compile(r"<(exp|exp2|expm1|log|log1p|log2|erf|erfc|tanh|pow|sin|cos)f?(@plt)?(\+0x[0-9a-f]+)?>")
VECTOR_FP = {True: re.compile(r"^\s*v?(add|sub|mul|div|fmadd\w*|fnmadd\w*|max|min)ps\s.*%[xyz]mm"),
             False: re.compile(r"^\s*f(add|sub|mul|div|mla|mls|max|min)\w*\s+v\d+\.(4s|8h)")}
CALL = re.compile(r"^\s*(call|bl|b)\s")


def scan(asm, variants, x86):
    """{(variant, op, dtype): [vector fp instructions, libm functions called]} of a disassembly (objdump -d -C)."""
    found = collections.defaultdict(lambda: [0, set()])
    key = None
    for line in asm.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            name, key = m.group(1), None
            variant = next((v for v in variants if f"npu_ext::cpu::{v}::" in name), None)
            op = next((o for o in OPS if re.search(rf"\b{o}_(impl|kernel)\b", name)), None)
            dtype = re.search(r"(?:vec_kernel|_impl)<(float|c10::Half|c10::BFloat16)\b", name)
            if variant and op and dtype:
                key = (variant, op, DTYPES[dtype.group(1)])
            continue
        if key is None or "\t" not in line:
            continue
        ins = line.split("\t", 1)[1]
        if VECTOR_FP[x86].match(ins):
            found[key][0] += 1
        call = LIBM.search(ins) if CALL.match(ins) else None
        if call:
            found[key][1].add(call.group(1))
    return found


@pytest.fixture(scope="module")
def kernels():
    tool = "objdump" if X86 or shutil.which("aarch64-linux-gnu-objdump") is None else "aarch64-linux-gnu-objdump"
    if shutil.which(tool) is None:
        pytest.skip(f"needs binutils' {tool}")
    asm = subprocess.run([tool, "-d", "-C", "--no-show-raw-insn", torch_ext._C.__file__], capture_output=True,
                         text=True, check=True).stdout
    return scan(asm, VARIANTS, X86)


def test_every_kernel_found(kernels):
    # The elementwise kernels, in each 16/32-bit dtype and variant, were located (else the checks below would
    # pass vacuously). The reductions' loops (prelu_backward, grouped_bias_add(_grad), softmax) are partly in
    # helpers without the op's name; those are located where the compiler keeps the op's name.
    elementwise = [o for o, iterator in KERNELS.items() if iterator]
    assert len(KERNELS) >= 8 and len(elementwise) >= 3, KERNELS
    expected = {(v, o, d) for v in VARIANTS for o in elementwise for d in DTYPES.values()}
    assert sorted(expected - set(kernels)) == []


def test_no_libm_call_per_element(kernels):
    calls = {k: sorted(v[1]) for k, v in kernels.items() if v[1]}
    assert not calls, f"scalar libm calls in fp32/fp16/bf16 kernels (at::vec scalar fallback): {calls}"


def test_vector_instructions(kernels):
    for variant in VARIANTS:
        for op in sorted(set(KERNELS) - IN_HELPERS):
            count = sum(v[0] for (var, o, d), v in kernels.items() if var == variant and o == op)
            assert count > 0, f"{variant} {op}: no vector floating-point instructions"
