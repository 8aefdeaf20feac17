"""Methods vLLM mixes into each of its workers (``worker_extension_cls``), called through ``collective_rpc``
by ``VLLMEngine``. They run inside vLLM's worker processes (a separate process even on CPU, one per
tensor-parallel rank on GPU), so weights cannot be handed over as Python objects: vLLM's RPC carries
plain values only (msgpack; a torch tensor arrives as a list of raw buffers it cannot pickle on).

Weights arrive the way verl and slime move them from trainer to rollout workers: through a process
group between the engine's process (rank 0, the sender) and every worker (ranks 1..N), made once per
engine (``gyre_join_weight_group``). The RPC carries only each bucket's layout (names, dtypes, shapes,
offsets); the bucket's bytes go by ``broadcast`` over the group (gloo on CPU; NCCL can serve engines on
GPUs of their own). Each worker gives the tensors to the vLLM model's own ``load_weights``, which maps
Hugging Face names onto its fused layers and shards them for tensor parallelism. A load is framed by
vLLM's layerwise reload (``gyre_begin_weight_load`` / ``gyre_finish_weight_load``): some builds process
weights after loading them (the CPU build repacks linear layers for its kernels), and the reload runs
that processing again on each layer once all of its weights are in. So a load gives whole layers.
"""

from __future__ import annotations

from typing import Any


class GyreWorkerExtension:
    """``self`` is a vLLM worker: it has ``model_runner``, ``rank`` and ``device``."""

    def _gyre_model(self) -> Any:
        runner = self.model_runner  # type: ignore[attr-defined]
        return runner.get_model() if hasattr(runner, "get_model") else runner.model

    def gyre_join_weight_group(self, name: str, host: str, port: int, world_size: int, backend: str) -> int:
        """Join the engine's weight group as rank ``1 + this worker's rank``; returns that rank."""
        from gyre.replica.transfer import make_group

        rank = 1 + int(self.rank)  # type: ignore[attr-defined]
        self._gyre_group = make_group(name, rank, world_size, host, port, backend)
        self._gyre_backend = backend
        return rank

    def gyre_leave_weight_group(self) -> None:
        from gyre.replica.transfer import shutdown_group

        group = getattr(self, "_gyre_group", None)
        self._gyre_group = None
        if group is not None:
            shutdown_group(group)

    def gyre_begin_weight_load(self) -> None:
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        initialize_layerwise_reload(self._gyre_model())

    def gyre_finish_weight_load(self) -> None:
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        model = self._gyre_model()
        finalize_layerwise_reload(model, self.model_config)  # type: ignore[attr-defined]
        # The reload processes a tied parameter for one of its layers only (vLLM documents this): the
        # other (the LM head tied to the embeddings) would keep computing with what its processing made of
        # the old weights (the CPU build packs its matrix). Process every sharer again.
        for module in _sharing_modules(model):
            module.quant_method.process_weights_after_loading(module)

    def gyre_receive_bucket(self, metas: list[list[Any]], nbytes: int) -> int:
        """Receive one packed bucket from rank 0 and load it into the model; returns how many tensors."""
        import torch

        from gyre.replica.buckets import TensorMeta, unpack
        from gyre.replica.transfer import broadcast

        if getattr(self, "_gyre_group", None) is None:
            raise RuntimeError("gyre_receive_bucket before gyre_join_weight_group")
        device = getattr(self, "device", "cpu") if self._gyre_backend == "nccl" else "cpu"
        flat = torch.empty(int(nbytes), dtype=torch.uint8, device=device)
        broadcast(self._gyre_group, flat, root=0)
        named = unpack(flat, [TensorMeta.from_list(m) for m in metas])
        self._gyre_model().load_weights(weights=named)
        return len(named)

    def gyre_free_weights(self) -> int:
        """Release the model's parameter storage (sleep level 2 where vLLM has no sleep mode, e.g. on CPU);
        shapes are kept so ``gyre_restore_weight_storage`` can give them back. Returns bytes freed."""
        import torch

        freed, shapes = 0, {}
        for name, param in self._gyre_model().named_parameters():
            shapes[name] = tuple(param.shape)
            freed += param.numel() * param.element_size()
            param.data = torch.empty(0, dtype=param.dtype, device=param.device)
        self._gyre_freed_shapes = shapes
        return freed

    def gyre_restore_weight_storage(self) -> None:
        """Allocate (uninitialised) storage for parameters ``gyre_free_weights`` released; the engine then
        requires ``load_weights`` before it generates."""
        import torch

        shapes = getattr(self, "_gyre_freed_shapes", None) or {}
        for name, param in self._gyre_model().named_parameters():
            if name in shapes:
                param.data = torch.empty(shapes[name], dtype=param.dtype, device=param.device)
        self._gyre_freed_shapes = None

    def gyre_weight_checksum(self, name: str) -> float:
        """Sum of one parameter as vLLM holds it (vLLM's names; tests use it to see that an update landed)."""
        return float(dict(self._gyre_model().named_parameters())[name].float().sum().item())


def _sharing_modules(model: Any) -> list[Any]:
    """Modules with a weight-processing method whose parameter another module also holds (tied weights)."""
    owners: dict[int, list[Any]] = {}
    for module in model.modules():
        for param in module.parameters(recurse=False):
            owners.setdefault(id(param), []).append(module)
    shared = [m for group in owners.values() if len(group) > 1 for m in group]
    return [m for m in dict.fromkeys(shared) if hasattr(getattr(m, "quant_method", None), "process_weights_after_loading")]
