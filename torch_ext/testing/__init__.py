"""torch_ext.testing: what the package's tests, benchmarks and ``python -m torch_ext --check`` share, defined once
(as ``torch.testing`` is for PyTorch's).

- ``samples``: the table of sample inputs per operator (``OpInfo``): value samples in every dtype, layout and size,
  whole-range samples, random shapes for the property-based tests, and the training function of each op with
  PyTorch's own equivalent;
- ``oracle``: a float64 reference per operator, written from the operator contract (docs/operators.md) and
  sharing no code with the package;
- ``tolerances``: the contract's accuracy metric (``THRESHOLD``, ``SMALL``, ``assert_accurate``) and the
  agreement bounds between implementations (``DEVICE``, ``MODEL``, ``NATIVE``);
- ``inputs``: tensors in every layout the operators accept.

Import the submodules (``from torch_ext.testing import samples``): this module imports nothing, so that the package
loads none of it unless asked. ``oracle`` needs numpy.
"""
