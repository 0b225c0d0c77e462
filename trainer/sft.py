"""Supervised warm start: next-token cross-entropy on (prompt, completion) pairs, loss on the completion only."""

from __future__ import annotations

import random

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase


def sft(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, pairs: list[tuple[str, str]], steps: int = 300,
        batch_size: int = 32, lr: float = 3e-3, seed: int = 0) -> list[float]:
    """Trains `model` in place for `steps` minibatches; returns the loss of each step."""
    device = next(model.parameters()).device
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    # warm up over 20 steps, hold, decay linearly over the last fifth: holding the rate is what gets a small model
    # through the plateau before it learns to copy from the prompt
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer,
                                                 lambda s: min(1.0, (s + 1) / 20, (steps - s) / (0.2 * steps)))
    model.train()
    losses = []
    for _ in range(steps):
        batch = rng.sample(pairs, min(batch_size, len(pairs)))
        ids, labels = [], []
        for prompt, completion in batch:
            p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            c = tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            ids.append(p + c)
            labels.append([-100] * len(p) + c)
        width = max(map(len, ids))
        input_ids = torch.tensor([x + [tokenizer.pad_token_id] * (width - len(x)) for x in ids], device=device)
        attention = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids], device=device)
        target = torch.tensor([y + [-100] * (width - len(y)) for y in labels], device=device)
        loss = model(input_ids=input_ids, attention_mask=attention, labels=target).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    model.eval()
    return losses
