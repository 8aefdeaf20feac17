"""Methods vLLM mixes into each of its GPU workers (``worker_extension_cls``), called through
``collective_rpc`` by ``VLLMEngine``. Runs inside vLLM's worker processes; imports nothing from vLLM."""

from __future__ import annotations

from typing import Any


class GyreWorkerExtension:
    """``self`` is a vLLM worker: it has ``model_runner`` and ``device``."""

    def gyre_load_weights(self, weights: list[tuple[str, Any]]) -> int:
        """Load HF-named ``(name, tensor)`` pairs into the running model (vLLM maps names onto its fused
        layers and shards them for tensor parallelism). Returns how many tensors were given."""
        import torch

        model = self.model_runner.get_model() if hasattr(self.model_runner, "get_model") else self.model_runner.model  # type: ignore[attr-defined]
        device = getattr(self, "device", None)
        moved = [(name, tensor.to(device) if device is not None else tensor) for name, tensor in weights]
        model.load_weights(weights=moved)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return len(moved)

    def gyre_weight_checksum(self, name: str) -> float:
        """Sum of one parameter as vLLM holds it (tests use it to see that an update landed)."""
        model = self.model_runner.get_model() if hasattr(self.model_runner, "get_model") else self.model_runner.model  # type: ignore[attr-defined]
        return float(dict(model.named_parameters())[name].float().sum().item())
