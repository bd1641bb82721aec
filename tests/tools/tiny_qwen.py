"""A tiny random-weight Qwen2.5-VL checkpoint, built fully offline (no Hub access), for end-to-end runs of
lmms-eval's real `qwen2_5_vl` model classes on CPU.

The checkpoint is a real `Qwen2_5_VLForConditionalGeneration` (2 text layers, hidden 64; 2 vision blocks) with a
byte-level BPE tokenizer (256 byte tokens, no merges) plus Qwen's special tokens, the Qwen2.5-VL chat template and
`Qwen2VLImageProcessor` / `Qwen2VLVideoProcessor` (patch 14, temporal patch 2, merge 2) with small pixel bounds,
so `AutoProcessor.from_pretrained`, `AutoTokenizer.from_pretrained` and
`Qwen2_5_VLForConditionalGeneration.from_pretrained` all load it from the folder.

Usage: `build_tiny_qwen25vl(Path("/tmp/tiny"))`, or `python tests/tools/tiny_qwen.py <dir>`.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Qwen2-VL / Qwen2.5-VL's chat template (as shipped with the Instruct checkpoints).
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# Small pixel bounds: an image or a video frame becomes a few 28x28 merged patches.
MIN_PIXELS = 28 * 28
MAX_PIXELS = 4 * 28 * 28
SEED = 1234


def byte_tokenizer(special_tokens: list[str], chat_template: str, extra_special_tokens: dict[str, str] | None = None):
    """A byte-level BPE tokenizer (256 byte tokens, no merges) plus `special_tokens`; `extra_special_tokens` names
    tokens as attributes (`tokenizer.image_token`, ...), as the Qwen-Omni processors read them.  Shared by the tiny
    Qwen2.5-VL checkpoint here and the tiny Qwen-Omni ones (tiny_omni.py)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    extra = {"extra_special_tokens": extra_special_tokens} if extra_special_tokens else {}
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=special_tokens,
        **extra,
        model_max_length=32768,
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = chat_template
    return fast


def build_tiny_qwen25vl(dir: Path) -> Path:  # noqa: A002 - the name the tests use
    """Write the tiny checkpoint into `dir` (created) and return it. Deterministic for a given seed."""
    import torch
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    dir = Path(dir)  # noqa: A001
    dir.mkdir(parents=True, exist_ok=True)
    tokenizer = byte_tokenizer(SPECIAL_TOKENS, CHAT_TEMPLATE)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    vocab_size = len(tokenizer)

    text_config = {
        "vocab_size": vocab_size,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,  # head_dim 16 -> mrope_section sums to 8
        "num_key_value_heads": 2,
        "max_position_embeddings": 32768,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "use_sliding_window": False,
    }
    vision_config = {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 2,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "window_size": 112,
        "out_hidden_size": 64,  # = text hidden_size
        "fullatt_block_indexes": [1],
        "tokens_per_second": 2,
    }
    config = Qwen2_5_VLConfig(
        text_config=text_config,
        vision_config=vision_config,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )
    torch.manual_seed(SEED)
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.generation_config.bos_token_id = ids["<|endoftext|>"]
    model.generation_config.do_sample = False
    model.save_pretrained(dir)

    bounds = {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS}
    common = {"patch_size": 14, "temporal_patch_size": 2, "merge_size": 2, "size": bounds}
    processor = Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(**common),
        tokenizer=tokenizer,
        video_processor=Qwen2VLVideoProcessor(**common),
        chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(dir)
    tokenizer.save_pretrained(dir)
    return dir


if __name__ == "__main__":
    print(build_tiny_qwen25vl(Path(sys.argv[1])))
