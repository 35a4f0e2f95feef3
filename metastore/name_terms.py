"""A name's search terms: the name, lowercased, from each word's start after its first
character.

/search finds a name by `q` at its start (the name index) or at the start of one of its
words (these terms, each a row of an index in term order: a page of them is a range read
in the order the answer gives, and a count stops at its cap, however many names share the
word). A word is a run of letters and digits; one begins after any other character (`.`,
`/`, `_`, `://`) and at an upper-case letter after a lower-case one:
`s3a://warehouse/sales.db/ordersDaily` has the terms `warehouse/sales.db/ordersdaily`,
`sales.db/ordersdaily`, `db/ordersdaily` and `daily`. A `q` that starts with other
characters (`_daily`, `.db/`) is looked for by its part from its first letter or digit on,
in names that have the whole `q`. The projections write the terms with each new name
(projections/datasets.py, projections/jobs.py); the API ranks namespaces by them directly
(api/search.py).
"""

from __future__ import annotations

# A term is stored cut at this many characters: an index entry of a term (up to 4 bytes a
# character) and a name (1,024 bytes and its namespace's 1,024) stays under btree's 2,704.
# A longer `q` (up to 200) is looked for by its first MAX_TERM characters and then in the
# whole name.
MAX_TERM = 100
# Names bounded at 1,024 bytes could have hundreds of words; a word past this many is not
# found by search (one row each: a name of 500 one-letter words would write 500).
MAX_TERMS = 64


def terms(name: str) -> list[str]:
    """The name's terms, lowercased, in the order of their place in it: its start first."""
    found = [name[:MAX_TERM].lower()] if name else []
    for i in range(1, len(name)):
        before, c = name[i - 1], name[i]
        if c.isalnum() and (not before.isalnum() or (before.islower() and c.isupper())):
            found.append(name[i : i + MAX_TERM].lower())
            if len(found) == MAX_TERMS:
                break
    return found


def word_of(q: str) -> str:
    """The part of `q` (lowercase) the terms are asked for: from its first letter or digit
    on ('' when it has none: no word matches it)."""
    for i, c in enumerate(q):
        if c.isalnum():
            return q[i:]
    return ""


def checked_in_name(q: str) -> bool:
    """Whether a term that starts with `q`'s word (cut at MAX_TERM) may still lack `q` in its
    name: `q` is longer than a term, or starts with other characters than its word."""
    return len(q) > MAX_TERM or word_of(q) != q


def best(name: str, q: str) -> str | None:
    """The least term of `name` (in byte order) `q` (lowercase) matches, if any: one that
    starts with `q`'s word (its first MAX_TERM characters), in a name that has `q`."""
    word = word_of(q)[:MAX_TERM]
    if not word or (checked_in_name(q) and q not in name.lower()):
        return None
    matching = [t for t in terms(name) if t.startswith(word)]
    return min(matching, key=str.encode) if matching else None


def past_prefix(prefix: str) -> str:
    """The least string in byte order (code point order: PostgreSQL's "C") after every
    string starting with `prefix`: its last character's successor (a lone surrogate has no
    UTF-8, so past them), or the string past the rest when that is the last code point."""
    for i in range(len(prefix) - 1, -1, -1):
        code = ord(prefix[i]) + 1
        if code == 0xD800:
            code = 0xE000
        if code <= 0x10FFFF:
            return prefix[:i] + chr(code)
    return "\U0010ffff" * (len(prefix) + 1)  # (no string starts with it: past them all)
