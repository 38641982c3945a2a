"""taospec: declarative YAML job specs for NVIDIA TAO containers."""

__version__ = "0.1.0"
