"""Dependency resolution."""


class CycleError(Exception):
    def __init__(self, cycle):
        super().__init__(" -> ".join(cycle))
        self.cycle = cycle


def install_order(deps, targets=None):
    known = set(deps) | {d for needs in deps.values() for d in needs}
    if targets is None:
        targets = sorted(deps)
    for target in targets:
        if target not in known:
            raise KeyError(target)
    order, done, stack = [], set(), []

    def visit(name):
        if name in done:
            return
        if name in stack:
            raise CycleError(stack[stack.index(name):] + [name])
        stack.append(name)
        for dep in sorted(deps.get(name, ())):
            visit(dep)
        stack.pop()
        done.add(name)
        order.append(name)

    for target in targets:
        visit(target)
    return order
