"""Variable-length sequences: ``PackedSequence``, ``pack_padded_sequence``, ``pad_packed_sequence``,
``pad_sequence``, ``pack_sequence`` (PyTorch's layout: ``data`` is time-major, ``batch_sizes[t]`` rows at step t).

ember's RNN/LSTM/GRU accept a PackedSequence (as PyTorch) and also a padded batch plus an ember-only
``lengths=`` keyword; both give the same result as running each sequence alone.

Example:
    >>> import ember
    >>> from ember.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    >>> x = ember.randn(3, 2, 4)                      # (T, B, H), lengths 3 and 1
    >>> packed = pack_padded_sequence(x, [3, 1])
    >>> packed.batch_sizes.tolist(), packed.data.shape
    ([2, 1, 1], ember.Size([4, 4]))
    >>> pad_packed_sequence(packed)[1].tolist()
    [3, 1]
"""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

from ember import creation, dtypes
from ember.tensor import Tensor
from ember.creation import arange, empty_like
from ember.ops.views import cat, stack


class PackedSequence(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args: Any, **kwargs: Any) -> "PackedSequence":
        return self._replace(data=self.data.to(*args, **kwargs))

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda


def _lengths_array(lengths: Any) -> np.ndarray:
    if isinstance(lengths, Tensor):
        lengths = lengths.tolist()
    out = np.asarray(lengths, dtype=np.int64).reshape(-1)
    if out.size and out.min() <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    return out


def _batch_sizes(sorted_lengths: np.ndarray) -> np.ndarray:
    steps = int(sorted_lengths.max()) if sorted_lengths.size else 0
    return np.array([(sorted_lengths > t).sum() for t in range(steps)], dtype=np.int64)


def _packed_rows(batch_sizes: np.ndarray, batch: int) -> np.ndarray:
    """Row of the flattened time-major (T*B) padded batch that each packed row comes from."""
    return np.concatenate([t * batch + np.arange(n) for t, n in enumerate(batch_sizes)]).astype(np.int64)


def pack_padded_sequence(input: Tensor, lengths: Any, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (T, B, *) (or (B, T, *) with batch_first) whose sequences have ``lengths``."""
    lens = _lengths_array(lengths)
    if batch_first:
        input = input.transpose(0, 1)
    steps, batch = tuple(input.shape)[:2]
    if lens.size != batch:
        raise ValueError(f"pack_padded_sequence: got {lens.size} lengths for a batch of {batch} sequences")
    if int(lens.max()) > steps:
        raise RuntimeError(f"pack_padded_sequence: a length {int(lens.max())} exceeds the padded length {steps}")
    if enforce_sorted:
        if np.any(np.diff(lens) > 0):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
                               "to sidestep this requirement if you do not need ONNX exportability.")
        order = None
    else:
        order = np.argsort(-lens, kind="stable")
        lens = lens[order]
        input = input.index_select(1, creation.tensor(order, device=input.device))
    sizes = _batch_sizes(lens)
    rows = _packed_rows(sizes, batch)
    flat = input.reshape(steps * batch, *tuple(input.shape)[2:])
    data = flat[creation.tensor(rows, device=input.device)]
    sorted_t = None if order is None else creation.tensor(order)
    unsorted_t = None if order is None else creation.tensor(np.argsort(order, kind="stable"))
    return PackedSequence(data, creation.tensor(sizes), sorted_t, unsorted_t)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """Undo packing: returns the padded batch (original order) and the lengths (int64)."""
    data = sequence.data
    sizes = np.asarray(sequence.batch_sizes.tolist(), dtype=np.int64)
    batch = int(sizes[0]) if sizes.size else 0
    steps = len(sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {steps}")
        steps = total_length
    rows = _packed_rows(sizes, batch)
    # Gather from the packed rows plus one padding row: differentiable and device independent.
    source = np.full(steps * batch, data.shape[0], dtype=np.int64)
    source[rows] = np.arange(rows.size)
    pad_row = creation.full((1, *tuple(data.shape)[1:]), padding_value, dtype=data.dtype, device=data.device)

    table = cat([data, pad_row], 0)
    padded = table[creation.tensor(source, device=data.device)].reshape(steps, batch, *tuple(data.shape)[1:])
    lens_sorted = np.array([(sizes > b).sum() for b in range(batch)], dtype=np.int64)
    if sequence.unsorted_indices is not None:
        unsorted = creation.tensor(sequence.unsorted_indices.tolist(), device=data.device)
        padded = padded.index_select(1, unsorted)
        lens_sorted = lens_sorted[np.asarray(sequence.unsorted_indices.tolist())]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, creation.tensor(lens_sorted, dtype=dtypes.int64)


def pad_sequence(sequences: Sequence[Tensor], batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack tensors of shapes (L_i, *) into (L_max, B, *) (or (B, L_max, *)), filling with padding_value."""
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        if missing:
            fill = creation.full((missing, *tuple(s.shape)[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = cat([s, fill] if padding_side == "right" else [fill, s], 0)
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of (L_i, *) tensors."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences: Tensor, lengths: Any, batch_first: bool = False) -> list:
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [padded_sequences[i, : int(n)] for i, n in enumerate(_lengths_array(lengths))]


def _pack_like(padded: Tensor, template: PackedSequence) -> PackedSequence:
    """Pack time-major ``padded`` (original batch order) with ``template``'s sizes and ordering."""
    sizes = np.asarray(template.batch_sizes.tolist(), dtype=np.int64)
    if template.sorted_indices is not None:
        padded = padded.index_select(1, creation.tensor(template.sorted_indices.tolist(), device=padded.device))
    steps, batch = tuple(padded.shape)[:2]
    rows = _packed_rows(sizes, batch)
    flat = padded.reshape(steps * batch, *tuple(padded.shape)[2:])
    return PackedSequence(flat[creation.tensor(rows, device=padded.device)], template.batch_sizes,
                          template.sorted_indices, template.unsorted_indices)


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of a permutation of 0..n-1 (None stays None)."""
    if permutation is None:
        return None

    output = empty_like(permutation)
    output[permutation] = arange(permutation.numel(), device=permutation.device)
    return output


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """The list of variable-length sequences a PackedSequence holds (inverse of ``pack_sequence``)."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
