"""Palindromes."""


def is_palindrome(text):
    clean = [ch.lower() for ch in text if ch.isalnum()]
    return clean == clean[::-1]


def longest(text):
    best = ""
    for center in range(2 * len(text) - 1):
        left, right = center // 2, center // 2 + center % 2
        while left >= 0 and right < len(text) and text[left] == text[right]:
            left -= 1
            right += 1
        candidate = text[left + 1 : right]
        if len(candidate) > len(best):
            best = candidate
    return best


def make_palindrome(text):
    for i in range(len(text) + 1):
        suffix = text[i:]
        if suffix == suffix[::-1]:
            return text + text[:i][::-1]
    return text
