"""A character-level Transformer language model on Tiny Shakespeare, then text sampled from it.

Reads ../shared/data/tinyshakespeare/input.txt when present, else the gzipped copy carried in
examples/data/ (public-domain text), so it runs offline on a fresh clone.
"""
import gzip
import math
from pathlib import Path

import ember as torch
import ember.nn as nn
import ember.nn.functional as F

from _args import steps

T = steps(400, __doc__)
torch.manual_seed(0)

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "data" / "tinyshakespeare" / "input.txt"
text = SHARED.read_text() if SHARED.exists() else gzip.open(HERE / "data" / "tinyshakespeare.txt.gz", "rt").read()
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
split = int(0.9 * len(data))
train_data, val_data = data[:split], data[split:]

block, batch, d_model, heads, layers = 64, 32, 128, 4, 2


class CharTransformer(nn.Module):
    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, d_model)
        self.positions = nn.Embedding(block, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, batch_first=True,
                                           norm_first=True, activation="gelu")
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, idx):
        n = idx.shape[1]
        h = self.tokens(idx) + self.positions(torch.arange(n))
        mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)  # causal: no peeking ahead
        return self.head(self.norm(self.encoder(h, mask=mask)))


def get_batch(source):
    starts = torch.randint(0, len(source) - block - 1, (batch,))
    x = torch.stack([source[int(s):int(s) + block] for s in starts])
    y = torch.stack([source[int(s) + 1:int(s) + block + 1] for s in starts])
    return x, y


model = CharTransformer(len(chars))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for t in range(T):
    x, y = get_batch(train_data)
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, len(chars)), y.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if t % 50 == 0 or t == T - 1:
        print(f"step {t:4d} train loss {loss.item():.4f}")

model.eval()
with torch.no_grad():
    x, y = get_batch(val_data)
    val = F.cross_entropy(model(x).reshape(-1, len(chars)), y.reshape(-1)).item()
    print(f"validation loss {val:.4f} (uniform guess: {math.log(len(chars)):.4f})")
    idx = torch.tensor([[stoi["\n"]]])
    for _ in range(200):
        logits = model(idx[:, -block:])[:, -1, :]
        probs = F.softmax(logits / 0.8, dim=-1)
        idx = torch.cat([idx, torch.multinomial(probs, 1)], dim=1)
    print("".join(chars[i] for i in idx[0].tolist()))
