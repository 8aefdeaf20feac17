"""URL slugs."""

import re
import unicodedata


def slugify(text, max_length=50):
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).lower()
    slug = re.sub(r"[^a-z0-9]+", "-", plain).strip("-")
    return slug[:max_length].rstrip("-")


def unique_slug(text, taken):
    base = slugify(text)
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def is_slug(text):
    return bool(text) and slugify(text, max_length=len(text)) == text
