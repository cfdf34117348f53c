"""``python -m torch_ext``: prints torch_ext.show_config(), the report to attach to a bug report.

``python -m torch_ext --check [--device npu:N]``: runs torch_ext.check() (the NPU results compared with the CPU
kernels on the package's sample set), prints its report and exits 0 when every case matched, 1 on a mismatch or
an error, 2 when there is nothing to check (no NPU, torch_npu not installed, the NPU kernels not loaded).
"""

import argparse
import sys

parser = argparse.ArgumentParser(prog="python -m torch_ext",
                                 description="Prints what this installation runs (torch_ext.show_config()).")
parser.add_argument("--check", action="store_true",
                    help="compare the NPU path with the CPU kernels on a small sample set and print a report "
                         "(exit 0: all match, 1: a mismatch or error, 2: no NPU or NPU kernels not loaded)")
parser.add_argument("--device", default="npu", help="the device --check compares with the CPU (default: npu)")
args = parser.parse_args()

if args.check:
    from torch_ext import check

    result = check(args.device)
    print(result.report, flush=True)
    sys.exit(result.exit_code)

from torch_ext import show_config  # noqa: E402

print(show_config())
