"""Token counts with tiktoken's `o200k_base` (GPT-4o's encoding), offline.

The paper's Avg Token is the mean length of the model's answer in tokens.  tiktoken downloads its BPE file from
the internet on first use; we build the same encoding from the copy that the `bpe-openai` wheel ships
(`bpe_openai/data/o200k_base.tiktoken.gz`), after checking it against tiktoken's own expected sha256, so counts
equal `tiktoken.get_encoding("o200k_base")` and nothing is fetched.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ENCODING = "o200k_base"
_O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"  # tiktoken_ext.openai_public
_lock = threading.Lock()
_encoding: Any = None


class TokenizerUnavailable(RuntimeError):
    """The o200k_base data could not be found or did not match its expected hash."""


def _bundled_bpe() -> dict[bytes, int]:
    try:
        import bpe_openai
    except ImportError as exc:
        raise TokenizerUnavailable("bpe-openai (which ships the o200k_base file) is not installed") from exc
    path = Path(bpe_openai.__file__).parent / "data" / "o200k_base.tiktoken.gz"
    raw = gzip.decompress(path.read_bytes())
    if hashlib.sha256(raw).hexdigest() != _O200K_SHA256:
        raise TokenizerUnavailable(f"{path} does not match tiktoken's o200k_base hash")
    ranks = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def get_encoding() -> Any:
    """tiktoken's o200k_base Encoding, built from the bundled file (once per process, thread-safe)."""
    global _encoding
    with _lock:
        if _encoding is None:
            import tiktoken
            import tiktoken_ext.openai_public as public

            ranks = _bundled_bpe()
            original = public.load_tiktoken_bpe
            try:  # reuse tiktoken's own constructor (pattern, special tokens) with our verified ranks
                public.load_tiktoken_bpe = lambda *_a, **_k: ranks
                kwargs = public.o200k_base()
            finally:
                public.load_tiktoken_bpe = original
            _encoding = tiktoken.Encoding(**kwargs)
        return _encoding


def count_tokens(texts: Iterable[str]) -> list[int]:
    """o200k_base token counts (special-token text is counted as ordinary text, never rejected)."""
    enc = get_encoding()
    return [len(enc.encode(t or "", disallowed_special=())) for t in texts]
