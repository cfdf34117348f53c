import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))  # tests/oracle.py and tests/helpers.py

import torch_ext  # noqa: E402,F401  (registers torch.ops.npu_ext)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
