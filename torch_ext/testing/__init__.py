"""torch_ext.testing: what the package's tests, benchmarks and ``python -m torch_ext --check`` share, defined once
(as ``torch.testing`` is for PyTorch's).

- ``families``: one module per operator family, holding its ``OpInfo`` entry (``opinfo`` documents the fields: value
  samples in every dtype, layout and size, whole-range samples, random shapes for the property-based tests, the
  training function with PyTorch's own equivalent, gradcheck cases, aclnn entry points, benchmark rows, pinned error
  messages) and its float64 oracle, written from the operator contract (docs/operators.md) and sharing no code with
  the package;
- ``samples``: the table (``OPS``, gathered from the families) and the iterators over it; ``oracle``: the oracles by
  operator name;
- ``tolerances``: the contract's accuracy metric (``THRESHOLD``, ``SMALL``, ``assert_accurate``) and the
  agreement bounds between implementations (``DEVICE``, ``MODEL``, ``NATIVE``);
- ``inputs``: tensors in every layout the operators accept.

Import the submodules (``from torch_ext.testing import samples``): this module imports nothing, so that the package
loads none of it unless asked. ``oracle`` needs numpy.
"""
