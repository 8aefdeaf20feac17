import pytest

from dependency import CycleError, install_order

DEPS = {"app": ["web", "db"], "web": ["http"], "db": ["driver"], "cli": ["http"]}


def test_full_order():
    assert install_order(DEPS) == ["driver", "db", "http", "web", "app", "cli"]


def test_targets():
    assert install_order(DEPS, ["web"]) == ["http", "web"]


def test_dependencies_first():
    order = install_order(DEPS)
    for package, needs in DEPS.items():
        for need in needs:
            assert order.index(need) < order.index(package)


def test_cycle():
    with pytest.raises(CycleError) as info:
        install_order({"a": ["b"], "b": ["a"]})
    assert info.value.cycle == ["a", "b", "a"]


def test_unknown_target():
    with pytest.raises(KeyError):
        install_order(DEPS, ["nope"])
