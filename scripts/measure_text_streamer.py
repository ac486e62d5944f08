"""Measure the text streamer: whole-prefix decodes vs DecodeStream over a 32K-token answer
in blocks of 32 (docs/engine.md, "Events and stats"). Run: .venv/bin/python scripts/measure_text_streamer.py"""
import time, sys

from clover_cli.engine.loader import bundled_tiny_dir
from clover_cli.engine.runtime import TextStreamer
from clover_cli.engine.tokenizer import CheckpointTokenizer
tok = CheckpointTokenizer.from_dir(bundled_tiny_dir())
text = open("engine/block_decode.py").read()
ids = []
while len(ids) < 32768:
    ids += tok.encode(text, add_special_tokens=False)
ids = ids[:32768]
class Whole:  # no backend: the whole-decode path
    def __init__(s, t): s.t = t
    def decode(s, ids, skip_special_tokens=False): return s.t.decode(ids, skip_special_tokens=skip_special_tokens)
for name, t in (("whole decode", Whole(tok)), ("DecodeStream", tok)):
    st = TextStreamer(t, set()); t0 = time.perf_counter()
    for k in range(32, len(ids) + 1, 32):
        st.delta(ids[:k])
    print(f"{name}: {time.perf_counter() - t0:.2f} s for 32,768 tokens in blocks of 32")
