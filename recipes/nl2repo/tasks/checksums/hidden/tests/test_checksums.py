from checksums import isbn10_valid, isbn13_valid, luhn_digit, luhn_valid


def test_luhn_valid():
    assert luhn_valid("4539 1488 0343 6467")
    assert luhn_valid("79927398713")


def test_luhn_invalid():
    assert not luhn_valid("79927398710")
    assert not luhn_valid("0")
    assert not luhn_valid("12a4")


def test_luhn_digit():
    assert luhn_digit("7992739871") == "3"


def test_isbn10():
    assert isbn10_valid("0-306-40615-2")
    assert isbn10_valid("0-8044-2957-X")
    assert not isbn10_valid("0-306-40615-3")


def test_isbn13():
    assert isbn13_valid("978-0-306-40615-7")
    assert not isbn13_valid("978-0-306-40615-6")
