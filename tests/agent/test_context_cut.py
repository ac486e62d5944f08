"""cut_until_fits on a dense paste: the conversation is cut to fit the budget, not to nothing.
The count is a stand-in for a server's tokenizer at 1.39 characters a token (what vLLM counted
for random words with digits) plus a fixed share for the tool schemas, which the characters of
the messages do not show."""
from clover_cli.agent.context import cut_until_fits

TOOLS_TOKENS = 1517


def _count(messages):
    return lambda: int(sum(len(str(m.get("content") or "")) for m in messages) / 1.39) + TOOLS_TOKENS


def test_a_dense_paste_is_cut_to_fit_and_keeps_most_of_the_room():
    dense = " ".join(f"w{i:05d}x" for i in range(6000))  # 47,999 characters
    messages = [{"role": "system", "content": "s" * 1500}, {"role": "user", "content": dense}]
    budget = 6144
    cuts = cut_until_fits(messages, _count(messages), budget)
    tokens = _count(messages)()
    assert tokens <= budget
    assert tokens >= budget * 0.7, f"cut far more than needed: {tokens} of {budget} tokens left"
    assert len(cuts) == 1 and cuts[0][1] == len(dense)


def test_a_prompt_that_fits_is_not_cut():
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "x" * 1000}]
    assert cut_until_fits(messages, _count(messages), 6144) == []
    assert messages[1]["content"] == "x" * 1000
