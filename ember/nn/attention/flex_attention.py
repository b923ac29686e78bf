"""``torch.nn.attention.flex_attention``: attention with a user ``score_mod`` and a block-sparse ``BlockMask``.

PyTorch's eager (uncompiled) flex_attention materializes the full score matrix and applies the modifications to
it; ember does the same, with broadcasting index tensors instead of ``vmap``: ``score_mod(score, b, h, q_idx,
kv_idx)`` and ``mask_mod(b, h, q_idx, kv_idx)`` receive integer tensors shaped ``(B,1,1,1)``, ``(1,H,1,1)``,
``(1,1,L,1)`` and ``(1,1,1,S)``, so a modification written for PyTorch (arithmetic, comparisons, ``where``,
indexing a bias table with the indices) gives the same values. A ``BlockMask`` keeps PyTorch's block-sparse
layout (``kv_num_blocks``, ``kv_indices``, the "full" blocks that skip ``mask_mod``, and their transposes), built
from the dense mask; a query position attends to a key position when its block is full, or partial and
``mask_mod`` is True there. Rows that attend nowhere give 0 and a log-sum-exp of -inf, as PyTorch's.
Differentiable through ember's autograd (the scores are ordinary ops).

Example:
    >>> import ember
    >>> from ember.nn.attention.flex_attention import create_block_mask, flex_attention
    >>> q = k = v = ember.randn(1, 2, 8, 4)
    >>> mask = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, 8, 8, device="cpu", BLOCK_SIZE=4)
    >>> flex_attention(q, k, v, block_mask=mask).shape
    ember.Size([1, 2, 8, 4])
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Callable, NamedTuple

import ember
from ember.tensor import Tensor

__all__ = ["AuxOutput", "AuxRequest", "BlockMask", "and_masks", "create_block_mask", "create_mask",
           "flex_attention", "noop_mask", "or_masks"]

_DEFAULT_SPARSE_BLOCK_SIZE = 128
_LARGE_SPARSE_BLOCK_SIZE = 1 << 30

_score_mod_signature = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]
_mask_mod_signature = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]


class AuxRequest(NamedTuple):
    """Which auxiliary outputs ``flex_attention(..., return_aux=AuxRequest(lse=True))`` computes."""

    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """The auxiliary outputs: the log-sum-exp and the maximum score of each query row (None when not requested)."""

    lse: Tensor | None = None
    max_scores: Tensor | None = None


def noop_mask(batch: Tensor, head: Tensor, token_q: Tensor, token_kv: Tensor) -> Tensor:
    """Every position attends everywhere."""
    return batch.new_ones(size=(), dtype=ember.bool)


def and_masks(*mask_mods: _mask_mod_signature) -> _mask_mod_signature:
    """A mask_mod True where all of ``mask_mods`` are."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def and_mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        result = b.new_ones((), dtype=ember.bool)
        for mod in mask_mods:
            result = result & mod(b, h, q_idx, kv_idx)
        return result
    return and_mask


def or_masks(*mask_mods: _mask_mod_signature) -> _mask_mod_signature:
    """A mask_mod True where any of ``mask_mods`` is."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def or_mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        result = b.new_zeros((), dtype=ember.bool)
        for mod in mask_mods:
            result = result | mod(b, h, q_idx, kv_idx)
        return result
    return or_mask


def _index_grids(B: int, H: int, Q_LEN: int, KV_LEN: int, device: Any) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Broadcasting stand-ins for PyTorch's vmapped scalar indices."""
    b = ember.arange(B, device=device).view(B, 1, 1, 1)
    h = ember.arange(H, device=device).view(1, H, 1, 1)
    q = ember.arange(Q_LEN, device=device).view(1, 1, Q_LEN, 1)
    kv = ember.arange(KV_LEN, device=device).view(1, 1, 1, KV_LEN)
    return b, h, q, kv


def create_mask(mod_fn: Callable, B: int | None, H: int | None, Q_LEN: int, KV_LEN: int,
                device: Any = "cpu") -> Tensor:
    """The dense boolean mask ``(B, H, Q_LEN, KV_LEN)`` of a mask_mod (or, for a score_mod, where it is not -inf)."""
    B, H = B or 1, H or 1
    b, h, q, kv = _index_grids(B, H, Q_LEN, KV_LEN, device)
    with ember.no_grad():
        if _arity(mod_fn) == 5:  # a score_mod: masked where it turns a zero score into -inf
            out = mod_fn(ember.zeros((), device=device), b, h, q, kv) != -math.inf
        else:
            out = mod_fn(b, h, q, kv)
    return ember.as_tensor(out, device=device).to(ember.bool).expand(B, H, Q_LEN, KV_LEN).contiguous()


def _arity(fn: Callable) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 4
    return sum(p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               for p in params)


def _ordered(blocks: Tensor) -> tuple[Tensor, Tensor]:
    """PyTorch's layout of a block map ``(..., rows, cols)``: the count per row, and the column indices with the
    selected ones first in ascending order (a stable sort), as int32."""
    num = blocks.sum(-1).to(ember.int32)
    order = ember.argsort((~blocks).to(ember.int32), dim=-1, stable=True).to(ember.int32)
    return num, order


class BlockMask:
    """Which (query block, key block) pairs take part, PyTorch's block-sparse layout.

    ``kv_num_blocks[b, h, qb]`` partial key blocks (``mask_mod`` applies) listed first in ``kv_indices[b, h, qb]``;
    ``full_kv_*`` the blocks where every position attends (``mask_mod`` is skipped); ``q_*`` the same by key block.
    """

    def __init__(self, seq_lengths: tuple[int, int], kv_num_blocks: Tensor, kv_indices: Tensor,
                 full_kv_num_blocks: Tensor | None, full_kv_indices: Tensor | None, q_num_blocks: Tensor | None,
                 q_indices: Tensor | None, full_q_num_blocks: Tensor | None, full_q_indices: Tensor | None,
                 BLOCK_SIZE: tuple[int, int] = (128, 128), mask_mod: _mask_mod_signature = noop_mask,
                 **_dq_options: Any) -> None:
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        self.seq_lengths = tuple(seq_lengths)
        self.kv_num_blocks, self.kv_indices = kv_num_blocks, kv_indices
        self.full_kv_num_blocks, self.full_kv_indices = full_kv_num_blocks, full_kv_indices
        self.q_num_blocks, self.q_indices = q_num_blocks, q_indices
        self.full_q_num_blocks, self.full_q_indices = full_q_num_blocks, full_q_indices
        self.BLOCK_SIZE = tuple(BLOCK_SIZE) if isinstance(BLOCK_SIZE, (tuple, list)) else (BLOCK_SIZE, BLOCK_SIZE)
        self.mask_mod = mask_mod

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks: Tensor, kv_indices: Tensor, full_kv_num_blocks: Tensor | None = None,
                       full_kv_indices: Tensor | None = None, BLOCK_SIZE: int | tuple[int, int] = 128,
                       mask_mod: _mask_mod_signature | None = None, seq_lengths: tuple[int, int] | None = None,
                       compute_q_blocks: bool = True, **_dq_options: Any) -> "BlockMask":
        """A BlockMask from its key-block layout (the query-block layout is derived from it)."""
        size = BLOCK_SIZE if isinstance(BLOCK_SIZE, tuple) else (BLOCK_SIZE, BLOCK_SIZE)
        if seq_lengths is None:
            seq_lengths = (kv_indices.shape[-2] * size[0], kv_indices.shape[-1] * size[1])
        partial = _blocks_from_ordered(kv_num_blocks, kv_indices)
        full = None if full_kv_num_blocks is None else _blocks_from_ordered(full_kv_num_blocks, full_kv_indices)
        q_num = q_idx = full_q_num = full_q_idx = None
        if compute_q_blocks:
            q_num, q_idx = _ordered(partial.transpose(-1, -2))
            if full is not None:
                full_q_num, full_q_idx = _ordered(full.transpose(-1, -2))
        return cls(seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, q_num, q_idx,
                   full_q_num, full_q_idx, size, mask_mod if mask_mod is not None else noop_mask)

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self.kv_indices.shape[:-2], *self.seq_lengths)

    def numel(self) -> int:
        return math.prod(self.shape)

    def as_tuple(self, flatten: bool = True) -> tuple:
        return (*self.seq_lengths, self.kv_num_blocks, self.kv_indices, self.full_kv_num_blocks, self.full_kv_indices,
                self.q_num_blocks, self.q_indices, self.full_q_num_blocks, self.full_q_indices,
                *self.BLOCK_SIZE, self.mask_mod)

    def _block_maps(self) -> tuple[Tensor, Tensor | None]:
        partial = _blocks_from_ordered(self.kv_num_blocks, self.kv_indices)
        full = None if self.full_kv_num_blocks is None else _blocks_from_ordered(self.full_kv_num_blocks,
                                                                                 self.full_kv_indices)
        return partial, full

    def to_dense(self) -> Tensor:
        """The block map ``(..., q_blocks, kv_blocks)`` as int32: 1 where a block takes part (partial or full)."""
        partial, full = self._block_maps()
        dense = partial if full is None else partial | full
        return dense.to(ember.int32)

    def sparsity(self) -> float:
        """Percent of the mask's elements in blocks that are skipped (PyTorch's count: blocks times block size)."""
        computed = int(self.kv_num_blocks.sum())
        if self.full_kv_num_blocks is not None:
            computed += int(self.full_kv_num_blocks.sum())
        return 100 * (1 - computed * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1] / self.numel())

    def to(self, device: Any) -> "BlockMask":
        move = (lambda t: None if t is None else t.to(device))
        return BlockMask(self.seq_lengths, *(move(t) for t in self.as_tuple()[2:10]), self.BLOCK_SIZE, self.mask_mod)

    def _allowed(self, B: int, H: int, Q_LEN: int, KV_LEN: int, device: Any) -> Tensor:
        """The positions attended, ``(B or 1, H or 1, Q_LEN, KV_LEN)``: full blocks, and partial ones where
        ``mask_mod`` says so."""
        partial, full = self._block_maps()
        qb, kb = self.BLOCK_SIZE
        expand = (lambda blocks: blocks.repeat_interleave(qb, dim=-2).repeat_interleave(kb, dim=-1)
                  [..., :Q_LEN, :KV_LEN])
        b, h, q, kv = _index_grids(B, H, Q_LEN, KV_LEN, device)
        with ember.no_grad():
            allowed = expand(partial) & self.mask_mod(b, h, q, kv)
            if full is not None:
                allowed = allowed | expand(full)
        return allowed

    def __repr__(self) -> str:
        return f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%)"


def _blocks_from_ordered(num_blocks: Tensor, indices: Tensor) -> Tensor:
    """The boolean block map from a count and ordered indices."""
    cols = indices.shape[-1]
    rank = ember.arange(cols, device=indices.device)
    chosen = rank < num_blocks.unsqueeze(-1)
    out = ember.zeros(indices.shape, dtype=ember.bool, device=indices.device)
    return out.scatter(-1, indices.long(), chosen)


def create_block_mask(mask_mod: _mask_mod_signature, B: int | None, H: int | None, Q_LEN: int, KV_LEN: int,
                      device: Any = None, BLOCK_SIZE: int | tuple[int, int] = _DEFAULT_SPARSE_BLOCK_SIZE,
                      _compile: bool = False, separate_full_blocks: bool = True, compute_dq_write_order: bool = False,
                      dq_kv_order: bool = True) -> BlockMask:
    """The BlockMask of ``mask_mod`` over ``(B, H, Q_LEN, KV_LEN)`` (None for B or H: one, broadcast)."""
    device = "cpu" if device is None else device
    qb, kb = BLOCK_SIZE if isinstance(BLOCK_SIZE, tuple) else (BLOCK_SIZE, BLOCK_SIZE)
    dense = create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device)
    pad_q, pad_kv = -Q_LEN % qb, -KV_LEN % kb
    if pad_q or pad_kv:
        dense = ember.nn.functional.pad(dense, (0, pad_kv, 0, pad_q))
    shape = (*dense.shape[:2], dense.shape[2] // qb, qb, dense.shape[3] // kb, kb)
    tiles = dense.reshape(shape)
    any_true = tiles.any(dim=-1).any(dim=-2)
    all_true = tiles.all(dim=-1).all(dim=-2)  # a block holding padding is never full (mask_mod applies there)
    if not separate_full_blocks:
        num, idx = _ordered(any_true)
        return BlockMask.from_kv_blocks(num, idx, None, None, (qb, kb), mask_mod, (Q_LEN, KV_LEN))
    num, idx = _ordered(any_true & ~all_true)
    full_num, full_idx = _ordered(all_true)
    return BlockMask.from_kv_blocks(num, idx, full_num, full_idx, (qb, kb), mask_mod, (Q_LEN, KV_LEN))


def flex_attention(query: Tensor, key: Tensor, value: Tensor, score_mod: _score_mod_signature | None = None,
                   block_mask: BlockMask | None = None, scale: float | None = None, enable_gqa: bool = False,
                   return_lse: bool = False, kernel_options: dict | None = None, *,
                   return_aux: AuxRequest | None = None) -> Any:
    """``softmax(score_mod(q @ k^T * scale) masked by block_mask) @ v`` over ``(B, H, L, E)`` inputs.

    ``enable_gqa``: key/value may have fewer heads (a divisor of the query's). ``return_lse`` (deprecated in
    PyTorch) or ``return_aux=AuxRequest(lse=True, max_scores=True)`` also return the row statistics.
    """
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux. return_lse is deprecated, please use "
                         "return_aux=AuxRequest(lse=True)")
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise NotImplementedError(f"flex_attention: query, key and value must be 4-D (B, H, L, E); got "
                                  f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    B, Hq, L, E = query.shape
    Hkv, S = key.shape[1], key.shape[2]
    if Hq != Hkv:
        if not enable_gqa:
            raise ValueError(f"Expect query and key/value to have the same number of heads but got Hq={Hq} and "
                             f"Hkv={Hkv}. Try setting enable_gqa=True for GQA.")
        if Hq % Hkv:
            raise ValueError(f"Expect number of query heads to be a multiple of kv heads for GQA but got Hq={Hq} and "
                             f"Hkv={Hkv}.")
        key = key.repeat_interleave(Hq // Hkv, dim=1)
        value = value.repeat_interleave(Hq // Hkv, dim=1)
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    scores = ember.matmul(query, key.transpose(-2, -1)) * scale
    if score_mod is not None:
        b, h, q, kv = _index_grids(B, Hq, L, S, query.device)
        scores = score_mod(scores, b, h, q, kv)
    if block_mask is not None:
        allowed = block_mask._allowed(B, Hq, L, S, query.device)
        scores = scores.masked_fill(~allowed, -math.inf)
    row_max = scores.amax(dim=-1, keepdim=True)
    lse = ember.logsumexp(scores, dim=-1)
    empty = ember.isneginf(lse).unsqueeze(-1)  # rows that attend nowhere give 0 (not NaN)
    weights = ember.exp(scores - ember.where(empty, ember.zeros_like(row_max), lse.unsqueeze(-1)))
    out = ember.matmul(weights.to(value.dtype), value)
    if return_lse:
        return out, lse
    if return_aux is not None:
        return out, AuxOutput(lse=lse if return_aux.lse else None,
                              max_scores=row_max.squeeze(-1) if return_aux.max_scores else None)
    return out
