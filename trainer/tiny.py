"""A tiny causal LM that needs no download: a byte-level tokenizer built in code and a randomly initialised Llama.

Used by the CI demo and the benchmark in place of a pretrained checkpoint. Both objects are ordinary transformers
objects, so `save_pretrained` / `from_pretrained` round-trip them like any real model (`--model PATH`).
"""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from trainer.sft import sft
from trainer.tasks import demonstrations

EOS, PAD = "<|endoftext|>", "<|pad|>"


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """One token per byte (GPT-2's byte-to-unicode alphabet, no merges) plus end-of-text and padding tokens."""
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=EOS, pad_token=PAD)
    tokenizer.padding_side = "left"  # prompts are left-padded so that every completion starts at the same column
    return tokenizer


def tiny_llama(tokenizer: PreTrainedTokenizerFast, hidden: int = 128, layers: int = 2, heads: int = 4,
               seed: int = 0) -> LlamaForCausalLM:
    """A ~0.5M-parameter Llama (RoPE, so left padding is handled by position ids), random init from `seed`."""
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=4 * hidden,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                         max_position_embeddings=256, tie_word_embeddings=True,
                         bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def warm_started(seed: int = 0, sft_steps: int = 400, p_right: float = 0.5) -> tuple[LlamaForCausalLM,
                                                                                      PreTrainedTokenizerFast]:
    """The tiny model after supervised warm start on the weak demonstrator's completions (trainer.tasks):
    it writes the format and about half of the programs right, which leaves the other half to the reward.
    A lower `p_right` makes a weaker student (the sparse-reward case of the distillation experiment)."""
    tokenizer = byte_tokenizer()
    model = tiny_llama(tokenizer, seed=seed)
    sft(model, tokenizer, demonstrations(4000, seed=seed, p_right=p_right), steps=sft_steps, seed=seed)
    return model, tokenizer


def teacher_of(seed: int = 0, sft_steps: int = 600, p_right: float = 0.9) -> tuple[LlamaForCausalLM,
                                                                                    PreTrainedTokenizerFast]:
    """A teacher for the warm-started student: the same tiny architecture and tokenizer (the distillation term
    compares their distributions token by token), trained longer and on a better demonstrator (right 90% of the
    time instead of 50%), from another initialisation so that it is not the student's copy."""
    tokenizer = byte_tokenizer()
    model = tiny_llama(tokenizer, seed=seed + 1000)
    sft(model, tokenizer, demonstrations(4000, seed=seed + 1000, p_right=p_right), steps=sft_steps, seed=seed + 1000)
    return model, tokenizer
