"""Hot ops as pairs: a plain-torch reference and a Triton kernel (docs/design.md, Boundaries).

Each op lives in its own package (``confidence``, ``block_attention``, ``gated_delta``) whose
public function dispatches: Triton when the tensors are on CUDA (or when the environment sets
``CLOVER_FORCE_TRITON=1``, used by the tests under ``TRITON_INTERPRET=1``), the reference
otherwise. Importing this package does not import triton.
"""
