"""Why dynamic graphs matter (the lectures' RNN example): every batch holds sequences of different
lengths, and the graph is simply rebuilt each step to match them.

The task: read a sequence of random digits (length 3..12) and predict their sum modulo 10.
Sequences are padded to the longest in the batch; the last *real* step of each sequence is picked
with its length, so padding never influences the answer.
"""
import ember as torch
import ember.nn as nn

from _args import steps

T = steps(300, __doc__)
torch.manual_seed(0)


class SumModTen(nn.Module):
    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 16)
        self.lstm = nn.LSTM(16, hidden, num_layers=1, batch_first=True)
        self.head = nn.Linear(hidden, 10)

    def forward(self, digits, lengths):
        out, _ = self.lstm(self.embed(digits))            # (batch, max_len, hidden)
        last = out[torch.arange(digits.shape[0]), lengths - 1]  # each sequence's own last step
        return self.head(last)


def make_batch(batch: int = 32):
    lengths = torch.randint(3, 13, (batch,))
    max_len = int(lengths.max())
    digits = torch.randint(0, 10, (batch, max_len))
    mask = torch.arange(max_len).unsqueeze(0) < lengths.unsqueeze(1)
    digits = torch.where(mask, digits, torch.zeros_like(digits))
    target = (digits * mask.long()).sum(dim=1) % 10
    return digits, lengths, target


model = SumModTen()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
loss_fn = nn.CrossEntropyLoss()
for t in range(T):
    digits, lengths, target = make_batch()
    loss = loss_fn(model(digits, lengths), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if t % 50 == 0 or t == T - 1:
        print(f"step {t:4d} max_len {digits.shape[1]:2d} loss {loss.item():.4f}")

with torch.no_grad():
    digits, lengths, target = make_batch(512)
    accuracy = (model(digits, lengths).argmax(dim=1) == target).float().mean().item()
print(f"accuracy on fresh sequences: {accuracy:.3f} (chance 0.100)")
