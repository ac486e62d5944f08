"""Clover CLI: a terminal coding assistant on an in-process block-diffusion engine."""

__version__ = "0.1.0"
