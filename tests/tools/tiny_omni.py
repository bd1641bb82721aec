"""Tiny random-weight Qwen2.5-Omni and Qwen3-Omni checkpoints, built fully offline (no Hub access), for runs of
lmms-eval's real `qwen2_5_omni` / `qwen3_omni` model classes on CPU.

Each checkpoint is the real `...ForConditionalGeneration` (thinker only: `enable_audio_output=False`, so no talker
or vocoder) with 2 text layers of hidden size 64, a 2-block vision tower and a 1-layer audio encoder, random
weights; the processor is the real `Qwen2_5OmniProcessor` / `Qwen3OmniMoeProcessor` built from local parts: a
byte-level BPE tokenizer (256 byte tokens, no merges) plus Qwen-Omni's special tokens, a chat template that renders
text, image, video and audio parts as Qwen-Omni's does, `Qwen2VLImageProcessor` / `Qwen2VLVideoProcessor` with
small pixel bounds and a `WhisperFeatureExtractor` (128 mel bins, 16 kHz, 30 s window).

Usage: `python tests/tools/tiny_omni.py qwen2_5_omni|qwen3_omni <dir>`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # run as a script: its sibling tiny_qwen.py
from tiny_qwen import byte_tokenizer  # noqa: E402

# Qwen-Omni's chat template, reduced to what the lmms-eval classes send: a system turn, then user turns whose parts
# are text, image, video or audio (a video with `use_audio_in_video` is still one <|VIDEO|>: the processor
# interleaves the audio into it).
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content %}<|vision_bos|><|IMAGE|><|vision_eos|>"
    "{% elif content['type'] == 'video' or 'video' in content %}<|vision_bos|><|VIDEO|><|vision_eos|>"
    "{% elif content['type'] == 'audio' or 'audio' in content %}<|audio_bos|><|AUDIO|><|audio_eos|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

#: the tokenizer attributes the Qwen-Omni processors read (`tokenizer.image_token`, ...), with their strings
ROLE_TOKENS = {
    "image_token": "<|IMAGE|>",
    "audio_token": "<|AUDIO|>",
    "video_token": "<|VIDEO|>",
    "vision_bos_token": "<|vision_bos|>",
    "vision_eos_token": "<|vision_eos|>",
    "audio_bos_token": "<|audio_bos|>",
    "audio_eos_token": "<|audio_eos|>",
}
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *ROLE_TOKENS.values()]
MIN_PIXELS = 32 * 32
MAX_PIXELS = 4 * 32 * 32
SEED = 1234
HIDDEN = 64


def _tokenizer():
    return byte_tokenizer(SPECIAL_TOKENS, CHAT_TEMPLATE, ROLE_TOKENS)


def _parts(patch: int):
    from transformers import Qwen2VLImageProcessor, Qwen2VLVideoProcessor, WhisperFeatureExtractor

    bounds = {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS}
    common = {"patch_size": patch, "temporal_patch_size": 2, "merge_size": 2, "size": bounds}
    features = WhisperFeatureExtractor(feature_size=128, sampling_rate=16000, hop_length=160, chunk_length=30)
    return Qwen2VLImageProcessor(**common), Qwen2VLVideoProcessor(**common), features


def _text(ids: dict[str, int], vocab_size: int) -> dict:
    return {
        "vocab_size": vocab_size,
        "hidden_size": HIDDEN,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,  # head_dim 16 -> mrope_section sums to 8
        "num_key_value_heads": 2,
        "max_position_embeddings": 32768,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
    }


def _audio() -> dict:
    return {
        "num_mel_bins": 128,
        "encoder_layers": 1,
        "encoder_attention_heads": 2,
        "encoder_ffn_dim": 64,
        "d_model": 32,
        "output_dim": HIDDEN,
    }


def _save(model, processor, tokenizer, ids: dict[str, int], dir: Path) -> Path:  # noqa: A002
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.generation_config.bos_token_id = ids["<|endoftext|>"]
    model.generation_config.do_sample = False
    model.save_pretrained(dir)
    processor.save_pretrained(dir)
    tokenizer.save_pretrained(dir)
    return dir


def build_qwen25_omni(dir: Path) -> Path:  # noqa: A002
    import torch
    from transformers import Qwen2_5OmniConfig, Qwen2_5OmniForConditionalGeneration, Qwen2_5OmniProcessor

    tokenizer = _tokenizer()
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text = _text(ids, len(tokenizer))
    text["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}
    thinker = {
        "text_config": text,
        "audio_config": {**_audio(), "n_window": 100},
        "vision_config": {
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "window_size": 112,
            "out_hidden_size": HIDDEN,
            "fullatt_block_indexes": [1],
        },
        "audio_token_index": ids["<|AUDIO|>"],
        "image_token_index": ids["<|IMAGE|>"],
        "video_token_index": ids["<|VIDEO|>"],
        "audio_start_token_id": ids["<|audio_bos|>"],
        "audio_end_token_id": ids["<|audio_eos|>"],
        "vision_start_token_id": ids["<|vision_bos|>"],
        "vision_end_token_id": ids["<|vision_eos|>"],
        "user_token_id": tokenizer.convert_tokens_to_ids("u"),
    }
    config = Qwen2_5OmniConfig(thinker_config=thinker, enable_audio_output=False)
    torch.manual_seed(SEED)
    model = Qwen2_5OmniForConditionalGeneration(config).eval()
    image, video, features = _parts(14)
    processor = Qwen2_5OmniProcessor(image, video, features, tokenizer, chat_template=CHAT_TEMPLATE)
    # `from_pretrained` loads the talker's speakers and `generate` looks up its default one, even without a talker
    speaker = {"bos_token": 0, "cond": torch.zeros(1, 8), "ref_mel": torch.zeros(1, 8, 8)}
    torch.save({"Chelsie": speaker}, Path(dir) / "spk_dict.pt")
    return _save(model, processor, tokenizer, ids, dir)


def build_qwen3_omni(dir: Path) -> Path:  # noqa: A002
    import torch
    from transformers import Qwen3OmniMoeConfig, Qwen3OmniMoeForConditionalGeneration, Qwen3OmniMoeProcessor

    tokenizer = _tokenizer()
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text = _text(ids, len(tokenizer))
    text.update(
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000.0,
            "mrope_section": [2, 3, 3],
            "interleaved": True,
        },
        moe_intermediate_size=32,
        num_experts=4,
        num_experts_per_tok=2,
    )
    thinker = {
        "text_config": text,
        "audio_config": {**_audio(), "n_window": 50, "n_window_infer": 400, "conv_chunksize": 500,
                         "downsample_hidden_size": 16},
        "vision_config": {
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "out_hidden_size": HIDDEN,
            "num_position_embeddings": 64,
            "deepstack_visual_indexes": [1],
        },
        "audio_token_id": ids["<|AUDIO|>"],
        "image_token_id": ids["<|IMAGE|>"],
        "video_token_id": ids["<|VIDEO|>"],
        "audio_start_token_id": ids["<|audio_bos|>"],
        "vision_start_token_id": ids["<|vision_bos|>"],
        "user_token_id": tokenizer.convert_tokens_to_ids("u"),
    }  # fmt: skip
    config = Qwen3OmniMoeConfig(thinker_config=thinker, enable_audio_output=False)
    torch.manual_seed(SEED)
    model = Qwen3OmniMoeForConditionalGeneration(config).eval()
    image, video, features = _parts(16)
    processor = Qwen3OmniMoeProcessor(image, video, features, tokenizer, chat_template=CHAT_TEMPLATE)
    return _save(model, processor, tokenizer, ids, dir)


BUILDERS = {"qwen2_5_omni": build_qwen25_omni, "qwen3_omni": build_qwen3_omni}
#: lmms-eval 0.7.3's simple `qwen2_5_omni` class loads its processor from this Hub id whatever `pretrained` says
#: (lmms_eval/models/simple/qwen2_5_omni.py:77)
HUB_PROCESSOR = {"qwen2_5_omni": "Qwen/Qwen2.5-Omni-7B"}
PROCESSOR_FILES = ("config.json", "processor_config.json", "tokenizer.json", "tokenizer_config.json")
PROCESSOR_FILES += ("chat_template.jinja",)


def place_in_hub_cache(checkpoint: Path, repo_id: str, hub_cache: Path) -> Path:
    """Copy the checkpoint's processor files into `hub_cache` as the snapshot of `repo_id` (the Hub cache's own
    layout), so `from_pretrained(repo_id)` finds them with HF_HUB_OFFLINE=1 and HF_HUB_CACHE=hub_cache."""
    import shutil

    repo = hub_cache / ("models--" + repo_id.replace("/", "--"))
    revision = "0" * 40
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True, exist_ok=True)
    for name in PROCESSOR_FILES:
        shutil.copy2(checkpoint / name, snapshot / name)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot


if __name__ == "__main__":
    # tiny_omni.py CLASS OUT_DIR [HUB_CACHE]: the checkpoint, and (with HUB_CACHE) the processor where the class
    # looks for it on the Hub
    name, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    BUILDERS[name](out)
    if len(sys.argv) > 3 and name in HUB_PROCESSOR:
        place_in_hub_cache(out, HUB_PROCESSOR[name], Path(sys.argv[3]))
    print(out)
