import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))  # tests/oracle.py and tests/helpers.py

import torch_ext  # noqa: E402,F401  (registers torch.ops.npu_ext)

if os.environ.get("NPU_EXT_EXPECT_SANITIZED") == "1":  # make test-asan: the sanitizer build, not the normal one
    assert os.sep + os.path.join("build", "asan", "lib") in torch_ext._C.__file__, torch_ext._C.__file__


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
