"""import_hf.py SRC DST: the GPT-2 folder SRC loaded by transformers and saved again
by transformers itself (save_pretrained, safetensors) into DST, so that bagpipe
import reads a file that transformers wrote, with its names and its metadata."""
import sys

from transformers import GPT2LMHeadModel

GPT2LMHeadModel.from_pretrained(sys.argv[1]).save_pretrained(sys.argv[2], safe_serialization=True)
