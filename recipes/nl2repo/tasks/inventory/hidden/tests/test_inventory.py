import pytest

from inventory import Inventory


@pytest.fixture
def inv():
    stock = Inventory()
    stock.add("apple", 10, 0.5)
    stock.add("pear", 2, 1.25)
    return stock


def test_quantity(inv):
    assert inv.quantity("apple") == 10
    assert inv.quantity("kiwi") == 0


def test_add_existing_updates_price(inv):
    inv.add("apple", 5, 0.6)
    assert inv.quantity("apple") == 15
    assert inv.total_value() == 11.5


def test_total_value(inv):
    assert inv.total_value() == 7.5


def test_remove(inv):
    inv.remove("apple", 4)
    assert inv.quantity("apple") == 6
    inv.remove("pear", 2)
    assert inv.names() == ["apple"]


def test_remove_errors(inv):
    with pytest.raises(KeyError):
        inv.remove("kiwi", 1)
    with pytest.raises(ValueError):
        inv.remove("pear", 3)


def test_add_errors(inv):
    with pytest.raises(ValueError):
        inv.add("x", 0, 1)
    with pytest.raises(ValueError):
        inv.add("x", 1, -1)


def test_low_stock(inv):
    assert inv.low_stock(5) == ["pear"]
