"""Prints the contract's accuracy metric (docs/operators.md; mean / max relative error vs the float64 oracle) per
op, variant, output and dtype, on the sample table's inputs (samples.py): the ordinary domain ("medium", 1M
elements) and the whole normal range of each dtype (the inputs and tiny bound of test_range.py).

    .venv/bin/python tests/support/accuracy_report.py
"""

import torch_ext  # noqa: F401
from torch_ext.testing import samples, tolerances

DTYPES = samples.LOW_DTYPES


def table(title, rows_of):
    cells = {}
    for dtype in DTYPES:
        for label, actual, expected, small in rows_of(dtype):
            mean_rel, max_rel, _ = tolerances.relative_errors(actual, expected, dtype, small)
            cells.setdefault(label, []).append(f"{mean_rel:.1e} / {max_rel:.1e}")
    print(f"\n{title}\n")
    print("| op (variant) output | " + " | ".join(f"{str(d).replace('torch.', '')} mean / max" for d in DTYPES) + " |")
    print("|---|" + "---|" * len(DTYPES))
    for label, c in cells.items():
        print(f"| {label} | " + " | ".join(c) + " |")
    print("| threshold T (mean < T, max < 10T) | " + " | ".join(f"{tolerances.THRESHOLD[d]:.1e}" for d in DTYPES) + " |")


def ordinary(dtype):
    for s in samples.samples("medium", dtypes=(dtype,)):
        for label, a, e in samples.accuracy_rows(s):
            yield label, a, e, None


def whole_range(dtype):
    for s in samples.range_samples(dtypes=(dtype,)):
        yield from samples.range_rows(s)


def main():
    table("Ordinary inputs (samples.py, size medium)", ordinary)
    table("Whole normal range of each dtype (test_range.py: every normal output held to the relative bound)",
          whole_range)


if __name__ == "__main__":
    main()
