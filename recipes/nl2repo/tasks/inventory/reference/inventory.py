"""A stock inventory."""


class Inventory:
    def __init__(self):
        self._items = {}

    def add(self, name, quantity, unit_price):
        if quantity <= 0 or unit_price < 0:
            raise ValueError("quantity must be positive and price >= 0")
        current = self._items.get(name, (0, unit_price))[0]
        self._items[name] = (current + quantity, unit_price)

    def remove(self, name, quantity):
        if name not in self._items:
            raise KeyError(name)
        current, price = self._items[name]
        if quantity <= 0 or quantity > current:
            raise ValueError("bad quantity")
        if quantity == current:
            del self._items[name]
        else:
            self._items[name] = (current - quantity, price)

    def quantity(self, name):
        return self._items.get(name, (0, 0))[0]

    def total_value(self):
        return round(sum(q * p for q, p in self._items.values()), 2)

    def names(self):
        return sorted(self._items)

    def low_stock(self, threshold):
        return sorted(name for name, (q, _) in self._items.items() if q < threshold)
