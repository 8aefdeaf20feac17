from slugs import is_slug, slugify, unique_slug


def test_basic():
    assert slugify("Hello, World!") == "hello-world"


def test_accents():
    assert slugify("Crème Brûlée à la carte") == "creme-brulee-a-la-carte"


def test_max_length_no_trailing_dash():
    assert slugify("abc def ghi", max_length=4) == "abc"


def test_unique():
    assert unique_slug("My Post", set()) == "my-post"
    assert unique_slug("My Post", {"my-post", "my-post-2"}) == "my-post-3"


def test_is_slug():
    assert is_slug("a-b-1")
    assert not is_slug("A b")
    assert not is_slug("")
    assert not is_slug("-a")
