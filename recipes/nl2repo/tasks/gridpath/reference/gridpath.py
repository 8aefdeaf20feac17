"""Shortest paths on character grids."""

from collections import deque


def find(grid, char):
    for r, row in enumerate(grid):
        c = row.find(char)
        if c >= 0:
            return r, c
    raise ValueError(f"{char!r} not in grid")


def neighbours(grid, cell):
    r, c = cell
    out = []
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        nr, nc = r + dr, c + dc
        if 0 <= nr < len(grid) and 0 <= nc < len(grid[nr]) and grid[nr][nc] != "#":
            out.append((nr, nc))
    return out


def shortest(grid, start, goal):
    distance = {start: 0}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if cell == goal:
            return distance[cell]
        for nxt in neighbours(grid, cell):
            if nxt not in distance:
                distance[nxt] = distance[cell] + 1
                queue.append(nxt)
    return -1


def solve(grid):
    return shortest(grid, find(grid, "S"), find(grid, "G"))
