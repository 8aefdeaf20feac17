import pytest

from semver import bump, compare, parse


def test_parse():
    assert parse("1.2.3") == (1, 2, 3, "")
    assert parse("1.2.3-rc.1") == (1, 2, 3, "rc.1")


@pytest.mark.parametrize("bad", ["1.2", "v1.2.3", "1.-2.3", "a.b.c"])
def test_parse_bad(bad):
    with pytest.raises(ValueError):
        parse(bad)


def test_compare_numeric_not_lexical():
    assert compare("1.10.0", "1.9.0") == 1


def test_compare_equal():
    assert compare("2.0.0", "2.0.0") == 0


def test_prerelease_is_lower():
    assert compare("1.0.0-alpha", "1.0.0") == -1
    assert compare("1.0.0-alpha", "1.0.0-beta") == -1


def test_bump():
    assert bump("1.2.3", "major") == "2.0.0"
    assert bump("1.2.3", "minor") == "1.3.0"
    assert bump("1.2.3-rc.1", "patch") == "1.2.4"


def test_bump_bad_part():
    with pytest.raises(ValueError):
        bump("1.2.3", "build")
