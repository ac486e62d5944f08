"""A scripted model for engine tests: fixed logits per absolute position, whatever the input."""
from __future__ import annotations

from types import SimpleNamespace

import torch
from transformers import Qwen3Config


class ScriptedModel(torch.nn.Module):
    """Returns fixed logits per absolute position (zeros elsewhere); counts its forwards."""

    def __init__(self, vocab: int, rows: dict[int, torch.Tensor]):
        super().__init__()
        self.config = Qwen3Config(vocab_size=vocab, hidden_size=8, num_hidden_layers=1,
                                  num_attention_heads=1, num_key_value_heads=1, head_dim=8)
        self.anchor = torch.nn.Parameter(torch.zeros(1))
        self.rows, self.vocab = rows, vocab
        self.calls = 0

    def forward(self, input_ids, position_ids, attention_mask=None, cache=None, use_cache=True,
                logits_to_keep=0):
        self.calls += 1
        flat = torch.zeros(self.vocab)
        logits = torch.stack([self.rows.get(int(p), flat) for p in position_ids[0]])[None]
        if logits_to_keep:
            logits = logits[:, -logits_to_keep:]
        return SimpleNamespace(logits=logits)
