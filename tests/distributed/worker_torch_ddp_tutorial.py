"""A torch program in the DDP tutorial's shape (written for these tests): ``mp.spawn`` two ranks that set
MASTER_ADDR/MASTER_PORT and call ``init_process_group("gloo", rank=, world_size=)``, then train a toy model
with DistributedDataParallel. ``python worker_torch_ddp_tutorial.py PORT`` under torch, or under
``ember run`` (``import torch`` resolves to ember, in the spawned ranks too); both print the same line."""
import os, sys
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP

def setup(rank, world_size, port):
    os.environ['MASTER_ADDR'] = 'localhost'
    os.environ['MASTER_PORT'] = port
    dist.init_process_group("gloo", rank=rank, world_size=world_size)

class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)
    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))

def demo_basic(rank, world_size, port):
    setup(rank, world_size, port)
    torch.manual_seed(rank)
    model = ToyModel()
    ddp_model = DDP(model)
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.01)
    for step in range(5):
        optimizer.zero_grad()
        outputs = ddp_model(torch.randn(20, 10))
        labels = torch.randn(20, 5)
        loss = loss_fn(outputs, labels)
        loss.backward()
        optimizer.step()
    total = torch.tensor([loss.item()])
    dist.all_reduce(total)
    if rank == 0:
        print(f"final summed loss {total.item():.6f} weight sum {sum(p.sum().item() for p in model.parameters()):.6f}")
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(demo_basic, args=(2, sys.argv[1]), nprocs=2, join=True)
