"""A FIFO queue built from two stacks."""


class Queue:
    def __init__(self, items=()):
        self._in = []
        self._out = []
        for item in items:
            self.push(item)

    def push(self, item):
        self._in.append(item)

    def _shift(self):
        if not self._out:
            while self._in:
                self._out.append(self._in.pop())

    def pop(self):
        self._shift()
        if not self._out:
            raise IndexError("pop from empty queue")
        return self._out.pop()

    def peek(self):
        self._shift()
        if not self._out:
            raise IndexError("peek at empty queue")
        return self._out[-1]

    def __len__(self):
        return len(self._in) + len(self._out)

    def __bool__(self):
        return len(self) > 0

    def __iter__(self):
        yield from reversed(self._out)
        yield from self._in
