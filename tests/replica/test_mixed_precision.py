"""``model.dtype=bfloat16`` trains in bfloat16 on float32 master weights and optimizer state (FSDP2's
MixedPrecisionPolicy; a one-rank cell shards over a one-rank mesh). At the GPU recipe's learning rate
(1e-6) an update is far below bfloat16's resolution of a weight: pure bfloat16 parameters round most of
them away, master weights keep them. 20 steps on the same batch: the mixed run moves the weights as the
float32 run does (within what bfloat16 compute changes in the gradients), the pure bfloat16 run does not.
On a GPU the same runs repeat on CUDA, the one-rank mesh over NCCL (the path a GPU cell takes).
"""

from __future__ import annotations

import multiprocessing

import pytest
import torch

from gyre.algo.losses import LossConfig
from gyre.replica.sharding import Replica
from gyre.replica.step import StepConfig

pytestmark = pytest.mark.slow  # 20 training steps, twice: out of the fast tier (-m 'not slow')

LR, STEPS = 1e-6, 20
STEP = StepConfig(attention_backend="auto")  # block on CPU, flex on CUDA


def batches():
    from gyre.trajectory import pack_trees
    from gyre.trajectory.processor import TrajectoryConfig, process_executions
    from gyre.trajectory.synthetic import WorkloadSpec, synthetic_execution

    spec = WorkloadSpec(turns=3, system_tokens=16, task_tokens=16, response_tokens=(4, 10), tool_tokens=(4, 12))
    executions = [synthetic_execution(f"e{i}", spec, seed=i, group=f"g{i // 2}") for i in range(4)]  # a pass and a fail per group
    for i, execution in enumerate(executions):
        execution.reward = float(i % 2)
    return pack_trees(process_executions(executions, TrajectoryConfig(max_paths=None)), 4096)


def train(replica: Replica, work) -> dict[str, torch.Tensor]:
    replica.make_optimizer(LR, 0.0, (0.9, 0.999))
    for _ in range(STEPS):
        for batch in work:
            replica.train([batch], LossConfig(), STEP)
        replica.step(max_grad_norm=1.0)
    return {name: weight.float().clone() for name, weight in replica.full_params()}


def mixed_precision_run(port: int, work, results, device: str) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    torch.set_num_threads(1)
    backend = "nccl" if device == "cuda" else "gloo"
    dist.init_process_group(backend, store=dist.TCPStore("127.0.0.1", port, 1, True), rank=0, world_size=1)
    mesh = init_device_mesh(device, (1,))
    replica = Replica.build("tiny", dtype="bfloat16", device=device, mesh=mesh, reference_path=None)
    computed_in = []
    replica.model.model.layers[0].mlp.register_forward_hook(lambda m, i, o: computed_in.append(o.dtype))
    weights = train(replica, work)
    wire = replica.bucket_shard(range(len(replica.params)), torch.bfloat16)
    state, _ = replica.full_state()
    results.put({
        "weights": {k: v.cpu().numpy() for k, v in weights.items()},
        "master": sorted({str(p.dtype) for p in replica.params}),
        "grads": sorted({str(s["exp_avg"].dtype) for s in replica.optimizer.state.values()}),
        "computed_in": sorted({str(d) for d in computed_in}),
        "wire": str(wire.dtype), "wire_bytes": wire.numel() * wire.element_size(),
        "master_bytes": sum(p.numel() * 4 for p in replica.params),
        "state_dtype": sorted({str(t.dtype) for t in state.values()}),
    })
    dist.destroy_process_group()


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def runs(request, tiny_model_path):
    from gyre.models import load_model
    from gyre.ports import free_ports

    device = request.param
    work = batches()
    start = {n: p.detach().float().clone() for n, p in load_model("tiny").named_parameters()}
    fp32 = train(Replica(load_model("tiny", dtype="float32", device=device).train()), work)
    pure_bf16 = train(Replica(load_model("tiny", dtype="bfloat16", device=device).train()), work)
    fp32, pure_bf16 = ({k: v.cpu() for k, v in run.items()} for run in (fp32, pure_bf16))
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    process = context.Process(target=mixed_precision_run, args=(free_ports(1)[0], work, results, device))
    process.start()
    mixed = results.get(timeout=300)
    process.join(60)
    assert process.exitcode == 0
    return start, fp32, pure_bf16, mixed


def moved(start, weights) -> torch.Tensor:
    return torch.cat([(weights[name] - start[name]).reshape(-1) for name in start])


def test_mixed_precision_keeps_float32_master_weights_and_computes_in_bfloat16(runs):
    _, _, _, mixed = runs
    assert mixed["master"] == ["torch.float32"] and mixed["grads"] == ["torch.float32"]
    assert mixed["computed_in"] == ["torch.bfloat16"]
    assert mixed["state_dtype"] == ["torch.float32"]  # what the trainer state keeps (the HF folder: bf16)
    # what leaves the replica (a weight sync) is in the model's dtype, half the master copy's bytes
    assert mixed["wire"] == "torch.bfloat16" and mixed["wire_bytes"] * 2 == mixed["master_bytes"]


def test_small_updates_survive_on_master_weights_and_round_away_in_pure_bfloat16(runs):
    start, fp32, pure_bf16, mixed = runs
    reference = moved(start, fp32)
    with_master = moved(start, {k: torch.from_numpy(v) for k, v in mixed["weights"].items()})
    pure = moved({n: w.to(torch.bfloat16).float() for n, w in start.items()}, pure_bf16)  # from its own start
    assert reference.abs().mean() > 0.5 * STEPS * LR  # Adam moved every weight by ~lr a step
    # bf16 compute changes the gradients a little; the updates follow float32's
    assert (with_master - reference).norm() < 0.1 * reference.norm()
    assert (with_master != 0).float().mean() > 0.99
    # pure bf16: most updates round away (a weight of ~0.02 has a bf16 spacing of ~1e-4 > 20 x 1e-6)
    assert (pure != 0).float().mean() < 0.2
    assert (pure - reference).norm() > 0.5 * reference.norm()
