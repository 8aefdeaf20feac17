"""The keys/values of the live root-to-leaf path while a long tree trains in chunks, and their gradients.

Rows enter in preorder and leave deepest first (a row's subtree ends no later than its ancestor's), so the
live path is a stack: one buffer per layer for keys, one for values, and one gradient buffer beside each,
grown by doubling. A chunk attends to the stack's rows through ``leaves()``: zero-copy views made autograd
leaves, whose gradients ``accumulate`` adds into the gradient buffers once the chunk's backward has run.
"""

from __future__ import annotations

import numpy as np
import torch

LayerKV = tuple[torch.Tensor, torch.Tensor]


class PathKV:
    """Per-layer ``[1, kv_heads, rows, head_dim]`` keys/values of the live path rows, plus their gradients."""

    def __init__(self, with_grads: bool = True) -> None:
        self.with_grads = with_grads
        self.rows = np.zeros(0, np.int64)  # preorder index of each stacked row, increasing
        self.length = 0
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.grad_keys: list[torch.Tensor] = []
        self.grad_values: list[torch.Tensor] = []
        self.peak_rows = 0

    @property
    def capacity(self) -> int:
        return int(self.keys[0].shape[2]) if self.keys else 0

    def nbytes(self) -> int:
        """Bytes the buffers hold now (keys, values and, when kept, their gradients)."""
        return sum(t.numel() * t.element_size() for t in self.keys + self.values + self.grad_keys + self.grad_values)

    def row_ids(self, end: int | None = None) -> np.ndarray:
        return self.rows[: self.length if end is None else end]

    def push(self, rows: np.ndarray, layers: list[LayerKV]) -> None:
        """Stack ``rows`` (deeper than every row already there) with their keys/values (detached copies)."""
        count = int(rows.shape[0])
        if count == 0:
            return
        if self.length and rows[0] <= self.rows[self.length - 1]:
            raise ValueError("rows must enter the path stack in preorder")
        self._reserve(self.length + count, layers)
        end = self.length + count
        for index, (key, value) in enumerate(layers):
            self.keys[index][:, :, self.length : end] = key.detach()
            self.values[index][:, :, self.length : end] = value.detach()
            if self.with_grads:
                self.grad_keys[index][:, :, self.length : end] = 0
                self.grad_values[index][:, :, self.length : end] = 0
        if self.rows.shape[0] < end:
            grown = np.zeros(max(end, 2 * self.rows.shape[0]), np.int64)
            grown[: self.length] = self.rows[: self.length]
            self.rows = grown
        self.rows[self.length : end] = rows
        self.length = end
        self.peak_rows = max(self.peak_rows, end)

    def truncate(self, length: int) -> None:
        """Drop the rows from ``length`` on (their subtrees have ended)."""
        self.length = min(self.length, length)

    def leaves(self, end: int) -> list[LayerKV] | None:
        """Rows ``[0, end)`` per layer as autograd leaves (views of the buffers); None when ``end`` is 0."""
        if end == 0:
            return None
        requires_grad = self.with_grads and torch.is_grad_enabled()
        return [
            (k[:, :, :end].detach().requires_grad_(requires_grad), v[:, :, :end].detach().requires_grad_(requires_grad))
            for k, v in zip(self.keys, self.values, strict=True)
        ]

    def accumulate(self, leaves: list[LayerKV] | None) -> None:
        """Add the gradients a backward left on ``leaves`` into the rows' gradient buffers."""
        if leaves is None or not self.with_grads:
            return
        for index, (key, value) in enumerate(leaves):
            end = key.shape[2]
            if key.grad is not None:
                self.grad_keys[index][:, :, :end] += key.grad
            if value.grad is not None:
                self.grad_values[index][:, :, :end] += value.grad

    def grads(self, start: int, end: int) -> list[LayerKV]:
        """Accumulated gradients of rows ``[start, end)`` per layer."""
        pairs = zip(self.grad_keys, self.grad_values, strict=True)
        return [(gk[:, :, start:end], gv[:, :, start:end]) for gk, gv in pairs]

    def _reserve(self, needed: int, like: list[LayerKV]) -> None:
        if needed <= self.capacity:
            return
        capacity = max(needed, 2 * self.capacity)
        buffers = [self.keys, self.values] + ([self.grad_keys, self.grad_values] if self.with_grads else [])
        templates = [k for k, _ in like], [v for _, v in like]
        for which, group in enumerate(buffers):
            for index in range(len(like)):
                template = templates[which % 2][index]
                shape = (template.shape[0], template.shape[1], capacity, template.shape[3])
                grown = template.new_empty(shape, requires_grad=False)
                if index < len(group):
                    grown[:, :, : self.length] = group[index][:, :, : self.length]
                    group[index] = grown
                else:
                    group.append(grown)
