import pytest

from jsonpath import get, parse_path, set_value

DATA = {"a": {"b": [{"c": 1}, {"c": 2}]}, "list": [10, 20, 30]}


def test_parse_path():
    assert parse_path("a.b[0][-1]") == ["a", "b", 0, -1]
    assert parse_path("[1].name") == [1, "name"]


@pytest.mark.parametrize("bad", ["a..b", "a[x]", "a.[0]"])
def test_parse_bad(bad):
    with pytest.raises(ValueError):
        parse_path(bad)


def test_get_nested():
    assert get(DATA, "a.b[1].c") == 2
    assert get(DATA, "list[-1]") == 30


def test_get_missing_and_wrong_type():
    assert get(DATA, "a.x", "d") == "d"
    assert get(DATA, "list[5]") is None
    assert get(DATA, "list.a") is None


def test_get_empty_path():
    assert get(DATA, "") is DATA


def test_set_value_creates_dicts():
    data = {}
    set_value(data, "x.y.z", 1)
    assert data == {"x": {"y": {"z": 1}}}


def test_set_value_index():
    data = {"l": [1, 2]}
    set_value(data, "l[1]", 5)
    assert data == {"l": [1, 5]}
    with pytest.raises(KeyError):
        set_value(data, "l[7]", 0)
