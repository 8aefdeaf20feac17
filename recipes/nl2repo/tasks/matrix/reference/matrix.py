"""Small matrix algebra on lists of rows."""


def shape(m):
    if not m or not m[0]:
        raise ValueError("empty matrix")
    width = len(m[0])
    if any(len(row) != width for row in m):
        raise ValueError("ragged matrix")
    return len(m), width


def identity(n):
    return [[1 if i == j else 0 for j in range(n)] for i in range(n)]


def transpose(m):
    rows, cols = shape(m)
    return [[m[r][c] for r in range(rows)] for c in range(cols)]


def add(a, b):
    if shape(a) != shape(b):
        raise ValueError("shapes differ")
    return [[x + y for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]


def multiply(a, b):
    (ar, ac), (br, bc) = shape(a), shape(b)
    if ac != br:
        raise ValueError("inner dimensions differ")
    return [[sum(a[i][k] * b[k][j] for k in range(ac)) for j in range(bc)] for i in range(ar)]


def determinant(m):
    rows, cols = shape(m)
    if rows != cols:
        raise ValueError("determinant needs a square matrix")
    if rows == 1:
        return m[0][0]
    total = 0
    for j in range(cols):
        minor = [row[:j] + row[j + 1 :] for row in m[1:]]
        total += (-1) ** j * m[0][j] * determinant(minor)
    return total
