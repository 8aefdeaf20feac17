from trie import Trie


def make(*words):
    t = Trie()
    for word in words:
        t.insert(word)
    return t


def test_contains():
    t = make("car", "cart")
    assert t.contains("car") and "cart" in t
    assert "ca" not in t


def test_duplicates_counted_once():
    assert len(make("a", "a", "b")) == 2


def test_starts_with():
    assert make("card", "care", "dog", "car").starts_with("car") == ["car", "card", "care"]
    assert make("x").starts_with("y") == []


def test_remove_keeps_prefix_words():
    t = make("car", "cart")
    assert t.remove("car")
    assert "cart" in t and "car" not in t
    assert not t.remove("car")
    assert len(t) == 1


def test_longest_common_prefix():
    assert make("flower", "flow", "flight").longest_common_prefix() == "fl"
    assert Trie().longest_common_prefix() == ""
