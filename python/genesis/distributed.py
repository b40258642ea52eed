"""genesis.distributed: process groups from a launcher's environment, and collectives
on storages (Gloo for CPU storages, NCCL for CUDA storages).

    # torchrun --nproc_per_node=2 train.py
    import genesis
    group = genesis.distributed.init_process_group("nccl")
    grad = genesis.ones(1 << 20, device=f"cuda:{group.rank}")
    group.all_reduce(grad)                       # in place, blocks until done
    work = group.all_reduce(grad, async_op=True)
    work.wait()
"""

from genesis._genesis.distributed import (  # noqa: F401  (re-exported)
    ProcessGroup,
    Work,
    init_process_group,
)
