"""``python -m torch_ext``: prints torch_ext.show_config(), the report to attach to a bug report."""

from torch_ext import show_config

print(show_config())
