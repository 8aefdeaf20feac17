import pytest

from bank import Account, InsufficientFunds, transfer


def test_deposit_withdraw():
    account = Account("ann", 100)
    assert account.deposit(50) == 150
    assert account.withdraw(30) == 120


def test_negative_opening():
    with pytest.raises(ValueError):
        Account("x", -1)


def test_bad_amounts():
    account = Account("bob")
    with pytest.raises(ValueError):
        account.deposit(0)
    with pytest.raises(ValueError):
        account.withdraw(-5)


def test_overdraw():
    account = Account("cy", 10)
    with pytest.raises(InsufficientFunds):
        account.withdraw(11)
    assert account.balance == 10


def test_transfer():
    a, b = Account("a", 100), Account("b")
    transfer(a, b, 40)
    assert (a.balance, b.balance) == (60, 40)


def test_failed_transfer_changes_nothing():
    a, b = Account("a", 10), Account("b", 5)
    with pytest.raises(InsufficientFunds):
        transfer(a, b, 50)
    assert (a.balance, b.balance) == (10, 5)


def test_history():
    a, b = Account("a", 10), Account("b")
    a.deposit(5)
    transfer(a, b, 3)
    assert a.history == [("deposit", 5), ("withdraw", 3)]
    assert b.history == [("deposit", 3)]
