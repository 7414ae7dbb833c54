"""Greedy generation with transformers from a `bagpipe export --format hf` folder:
export_hf.py DIR PROMPT N writes PROMPT and the N bytes GPT2LMHeadModel picks,
then a newline, as `bagpipe sample --top-k 1` does. Every weight must come from the
folder: transformers may only make up the tied head and the attention masks."""
import sys

import torch
from transformers import GPT2LMHeadModel

folder, prompt, n = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
model, info = GPT2LMHeadModel.from_pretrained(folder, output_loading_info=True)
made_up = [k for k in info["missing_keys"]
           if k != "lm_head.weight" and not k.endswith((".attn.bias", ".attn.masked_bias"))]
if made_up or info["unexpected_keys"] or info["mismatched_keys"]:
    sys.exit(f"export_hf.py: not loaded from {folder}: missing {made_up}, unexpected "
             f"{info['unexpected_keys']}, mismatched {info['mismatched_keys']}")
model.eval()
with torch.no_grad():
    out = model.generate(torch.tensor([list(prompt)]), max_new_tokens=n, do_sample=False,
                         pad_token_id=0, attention_mask=torch.ones(1, len(prompt), dtype=torch.long))
sys.stdout.buffer.write(bytes(out[0].tolist()) + b"\n")
