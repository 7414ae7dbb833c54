"""logits_hf.py DIR PROMPT FILE: transformers' GPT-2 logits for the bytes of PROMPT,
the model loaded from DIR, against those `bagpipe sample --logits FILE` wrote for the
same bytes (a line per position, the vocabulary's values). Prints the largest
absolute difference and fails above the tolerance.

The tolerance is float32's: the two implementations compute the same function in
float32 but sum in other orders (blocked matrix products, a fused softmax, GELU's
tanh from another libm), so each dot product may differ by about its length times
float32's epsilon (2^-23 = 1.2e-7) times the magnitude of its terms. Through two
layers of width 32 (inner 128) and the tied head, that is of the order of
1e-5 relative to the logits; 1e-4 of the largest logit leaves a factor of ten and
is still ten thousand times below what one changed weight or a wrong layer order
gives (differences of the order of the logits themselves)."""
import sys

import torch
from transformers import GPT2LMHeadModel

folder, prompt, path = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
model = GPT2LMHeadModel.from_pretrained(folder).eval()
with torch.no_grad():
    theirs = model(torch.tensor([list(prompt)])).logits[0].double()
with open(path) as f:
    ours = torch.tensor([[float(v) for v in line.split()] for line in f], dtype=torch.float64)
if ours.shape != theirs.shape:
    sys.exit(f"logits_hf.py: bagpipe wrote {tuple(ours.shape)} logits, transformers has "
             f"{tuple(theirs.shape)}")
diff = (ours - theirs).abs().max().item()
scale = theirs.abs().max().item()
tol = 1e-4 * max(scale, 1.0)
print(f"max abs difference {diff:.3g} (largest logit {scale:.3g}, tolerance {tol:.3g}, "
      f"{ours.shape[0]} positions x {ours.shape[1]})")
if not diff <= tol:
    sys.exit(f"logits_hf.py: bagpipe's logits differ from transformers' by {diff:.3g} > {tol:.3g}")
