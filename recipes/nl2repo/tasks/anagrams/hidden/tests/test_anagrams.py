from anagrams import group, is_anagram, signature


def test_signature():
    assert signature("Dormitory") == "dimoorrty"


def test_is_anagram_ignores_case_and_spaces():
    assert is_anagram("Dormitory", "Dirty room!")


def test_not_anagram():
    assert not is_anagram("abc", "abd")


def test_empty_is_not_anagram():
    assert not is_anagram("", "!!")


def test_group():
    assert group(["listen", "google", "silent", "enlist", "gogole", "x"]) == [
        ["listen", "silent", "enlist"],
        ["google", "gogole"],
        ["x"],
    ]
