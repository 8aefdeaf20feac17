from palindromes import is_palindrome, longest, make_palindrome


def test_sentence_palindrome():
    assert is_palindrome("A man, a plan, a canal: Panama")


def test_not_palindrome():
    assert not is_palindrome("hello")


def test_empty():
    assert is_palindrome("")
    assert longest("") == ""


def test_longest():
    assert longest("babad") == "bab"
    assert longest("cbbd") == "bb"
    assert longest("xabacdcabay") == "abacdcaba"


def test_make_palindrome():
    assert make_palindrome("abc") == "abcba"
    assert make_palindrome("abb") == "abba"
    assert make_palindrome("aba") == "aba"
