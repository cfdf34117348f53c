"""Benchmark suite of the npu_ext CPU kernels against the best PyTorch alternative (python -m benchmarks.run)."""
