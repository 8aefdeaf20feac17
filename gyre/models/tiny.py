"""The built-in models: Qwen3 architectures with a tokenizer made offline, saved as HF checkpoints.

Two presets, named like paths (``model.path=tiny`` / ``model.path=small``): ``tiny`` runs a training step
in milliseconds and exercises the system; ``small`` (4 layers, width 128, ~1M parameters) is large enough
to learn the built-in ``learn`` suite after a supervised warm start, and still trains in well under a
second per step on one CPU core. Nothing is downloaded: the byte-level BPE tokenizer is trained on ``tiny_corpus.txt`` (shipped with the
package) and the weights are initialised from a fixed seed. The result is written once to a cache folder
keyed by a hash of everything that defines it, and from then on loads like any local HF checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

_HERE = Path(__file__).parent
CORPUS_PATH = _HERE / "tiny_corpus.txt"
CHAT_TEMPLATE_PATH = _HERE / "chat_template.jinja"
# Bump when the build procedure changes in a way the config hash cannot see.
BUILD_VERSION = 1

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]


@dataclass(frozen=True)
class TinySpec:
    """Shape of the tiny model. The defaults make a model that runs a training step in milliseconds."""

    vocab_size: int = 2048
    hidden_size: int = 64
    intermediate_size: int = 192
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 16
    max_position_embeddings: int = 65536
    seed: int = 0

    def key(self) -> str:
        payload = json.dumps(
            {
                "spec": asdict(self),
                "build": BUILD_VERSION,
                "corpus": hashlib.sha256(CORPUS_PATH.read_bytes()).hexdigest(),
                "template": hashlib.sha256(CHAT_TEMPLATE_PATH.read_bytes()).hexdigest(),
            },
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


BUILTIN_MODELS: dict[str, TinySpec] = {
    "tiny": TinySpec(),
    "small": TinySpec(
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
    ),
}

# The built-in model vLLM's CPU build accepts: its attention kernels take head_dim >= 32, and tiny's is 16.
# (tiny keeps its shape: every recorded figure and cached warm start is of that model.)
VLLM_CPU_MODEL = "small"


def cache_root() -> Path:
    return Path(os.environ.get("GYRE_CACHE", Path.home() / ".cache" / "gyre"))


def tiny_path(spec: TinySpec | None = None) -> Path:
    """Folder of the tiny checkpoint for ``spec``, built on first use."""
    spec = spec or TinySpec()
    path = cache_root() / f"tiny-{spec.key()}"
    if not (path / "config.json").exists():
        _build(spec, path)
    return path


def train_tokenizer(vocab_size: int):
    """A byte-level BPE trained deterministically on the shipped corpus, wrapped as a fast HF tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(CORPUS_PATH.read_text().splitlines(keepends=True), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:],
    )
    # Tool-call markers are ordinary text to the decoder (the chat parser needs them in the output).
    tokenizer.chat_template = CHAT_TEMPLATE_PATH.read_text()
    return tokenizer


def _build(spec: TinySpec, path: Path) -> None:
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    tokenizer = train_tokenizer(spec.vocab_size)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        head_dim=spec.head_dim,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng():
        torch.manual_seed(spec.seed)
        model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id
    )
    # Write to a temporary folder and rename, so concurrent builders never see a half-written checkpoint.
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}-"))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / "gyre_tiny.json").write_text(json.dumps(asdict(spec), indent=2))
        try:
            staging.rename(path)
        except OSError:
            if not (path / "config.json").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
