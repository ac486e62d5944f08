"""Training the bundled block-diffusion model: tokenizer, data, the SDAR/BD3-LM trainer.

Imports torch/tokenizers lazily in the submodules; `clover train` is the entry point.
"""
