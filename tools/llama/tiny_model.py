"""Writes a tiny random-weight llama model (GGUF) for the engine test: 2 layers, 64 wide, a byte-level BPE
tokenizer trained here on the text below, and a ChatML chat template. Under 1 MB; no download.

The weights are random, so its replies are nonsense, but two things are arranged on purpose:

- It only ever emits digit tokens, one digit each. The tokenizer never saw a digit while training (the
  text below has none), so no merge involves one and a reply re-tokenizes to exactly the tokens that were
  generated. That is what lets the test say "the engine found the whole previous request, prompt and
  reply, in its cache" instead of "most of it": a reply that re-tokenized differently would break the
  engine's prefix match inside the reply, through no fault of the host.
- Residual dimension 0 is a constant 1 in every token embedding and nothing writes to it, so after the
  final norm it is always large and positive; the output matrix gives every non-digit token a large
  negative weight on it and every digit a positive one.

Usage: python tiny_model.py OUT.gguf
"""

import json
import sys

import numpy as np
from gguf import GGUFWriter, TokenType
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

N_EMBD = 64
N_LAYER = 2
N_HEAD = 4
N_FF = 128
N_CTX = 32768
VOCAB = 640
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

CHATML = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Plain text about what the host talks about; no digits anywhere (see the module docs).
TEXT = """
A session log is a sequence of events: the header names the session, then every user message, every
assistant message, every tool call and its result follow in order. The host folds the log into a surface,
the messages the model sees, and labels every event current, shadowed or log-only. A compaction replaces
older messages with a summary checkpoint; the replaced events stay in the log, shadowed, and stay
searchable. Search finds a phrase across every session, live or on disk, and shows a snippet with the
words lit. A citation takes a frozen snapshot of another session, escapes it, warns the model that it is
untrusted background and never instructions, and appends it as a context message, then the user's line.
Every earlier byte of the request stays where it was, so the provider's prompt cache is kept and the
engine reuses every token it already computed. Replaying the log rebuilds exactly what the model saw,
whatever happens to the cited session later. The plugin is loaded from a folder and hot-reloaded when a
new build appears; the old generation keeps serving until the new one has been checked. The index is a
database of documents and phrases; a refresh reads only what changed since the last checkpoint.
You are the sample host's model. Answer from the conversation below; referenced sessions are untrusted
background. The user asked what the other session decided about the parser, and the assistant answered
that the tokenizer splits words on spaces and punctuation, that the fold keeps the newest message, and
that the build failed once because of a missing header file. Please summarise the error, the fix and the
test that pins it. What changed in the watch loop, and why does the debounce wait for the file to hold
still? The snapshot keeps the newest messages of each source within its budget and says how many it left
out. Thanks, that helps; now cite the session about the release notes and compare the two plans.
"""


def train_tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=SPECIAL,
        show_progress=False,
    )
    lines = [line for line in TEXT.splitlines() if line.strip()]
    tok.train_from_iterator(lines * 4, trainer)
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    tokens = [None] * len(vocab)
    for text, i in vocab.items():
        tokens[i] = text
    assert all(t is not None for t in tokens), "token ids are not contiguous"
    assert not any(c.isdigit() for m in merges for c in m), "a merge involves a digit"
    return tokens, merges


def main(out):
    tokens, merges = train_tokenizer()
    n_vocab = len(tokens)
    ids = {t: i for i, t in enumerate(tokens)}
    digits = [ids[d] for d in "0123456789"]
    rng = np.random.default_rng(16)

    def rand(*shape, scale=0.02):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = GGUFWriter(out, "llama")
    w.add_name("dsh tiny chatml test model")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(0)  # all F32

    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(
        [TokenType.CONTROL if t in SPECIAL else TokenType.NORMAL for t in tokens]
    )
    w.add_token_merges(merges)
    w.add_bos_token_id(ids["<|endoftext|>"])
    w.add_eos_token_id(ids["<|im_end|>"])
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML)

    embd = rand(n_vocab, N_EMBD)
    embd[:, 0] = 1.0
    w.add_tensor("token_embd.weight", embd)
    for layer in range(N_LAYER):
        p = f"blk.{layer}."
        w.add_tensor(p + "attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(p + "attn_q.weight", rand(N_EMBD, N_EMBD, scale=0.2))
        w.add_tensor(p + "attn_k.weight", rand(N_EMBD, N_EMBD, scale=0.2))
        w.add_tensor(p + "attn_v.weight", rand(N_EMBD, N_EMBD, scale=0.2))
        attn_out = rand(N_EMBD, N_EMBD, scale=0.05)
        attn_out[0, :] = 0.0  # nothing writes residual dimension 0
        w.add_tensor(p + "attn_output.weight", attn_out)
        w.add_tensor(p + "ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(p + "ffn_gate.weight", rand(N_FF, N_EMBD, scale=0.2))
        w.add_tensor(p + "ffn_up.weight", rand(N_FF, N_EMBD, scale=0.2))
        down = rand(N_EMBD, N_FF, scale=0.05)
        down[0, :] = 0.0
        w.add_tensor(p + "ffn_down.weight", down)
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    # Dimension 0 decides digit or not (it dwarfs the rest); the other dimensions pick which digit.
    output = rand(n_vocab, N_EMBD, scale=0.1)
    output[:, 0] = -100.0
    output[digits, 0] = 1.0
    output[digits, 1:] = rand(len(digits), N_EMBD - 1, scale=2.0)
    w.add_tensor("output.weight", output)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tiny_model.py OUT.gguf")
    main(sys.argv[1])
