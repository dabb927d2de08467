"""reload-lint: find tensors that escape weight-reload copy-back and break captured CUDA graphs."""

__version__ = "0.4.0"
