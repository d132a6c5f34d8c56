"""A tokenizer built in code and a tiny randomly initialised causal LM (no model hub).

The tokenizer is character level over a fixed alphabet (plus `\\boxed{` as one token);
the model is a small Llama from a config. Both save with `save_pretrained`, so the
training loop loads them like any local model directory.
"""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
DEFAULT_ALPHABET = "0123456789+-=? "
BOXED = "\\boxed{"


def build_tokenizer(alphabet: str = DEFAULT_ALPHABET, extra_tokens: tuple[str, ...] = ()) -> PreTrainedTokenizerFast:
    """Character-level tokenizer: each alphabet character is a token, `extra_tokens` are
    multi-character tokens matched first (e.g. `\\boxed{`)."""
    specials = [PAD, BOS, EOS, UNK]
    symbols = list(dict.fromkeys([*extra_tokens, *alphabet]))
    vocab = {tok: i for i, tok in enumerate(specials + symbols)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    # Longest tokens first, then any single character: a regex split into isolated pieces.
    alternatives = [_escape(t) for t in sorted(extra_tokens, key=len, reverse=True)] + ["."]
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("|".join(alternatives)), behavior="isolated")
    tok.decoder = decoders.Fuse()  # join pieces without the spaces WordLevel would insert
    # Like Llama's tokenizer: BOS in front when special tokens are added.
    tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, vocab[BOS])])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, bos_token=BOS, eos_token=EOS, unk_token=UNK, padding_side="left"
    )
    return fast


def _escape(text: str) -> str:
    return "".join("\\" + c if not c.isalnum() else c for c in text)


def build_model(
    tokenizer: PreTrainedTokenizerFast,
    *,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    max_positions: int = 64,
    seed: int = 0,
) -> LlamaForCausalLM:
    """A small Llama with random weights (fp32)."""
    import torch

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 4,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(config)
