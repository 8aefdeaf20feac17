from textstats import average_word_length, reading_time, sentences, word_count


def test_sentences():
    assert sentences("Hi there. How are you?! Fine...") == ["Hi there", "How are you", "Fine"]


def test_word_count():
    assert word_count("It's a dog's life, isn't it?") == 6


def test_average_word_length():
    assert average_word_length("ab abcd") == 3.0
    assert average_word_length("it's") == 3.0
    assert average_word_length("123 !!") == 0.0


def test_reading_time():
    assert reading_time("word " * 401) == 3
    assert reading_time("one") == 1
    assert reading_time("") == 0


def test_reading_time_custom_speed():
    assert reading_time("a b c d", wpm=2) == 2
