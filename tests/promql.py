"""A tiny PromQL evaluator for the chart's alert expressions, over real scrapes.

It knows the forms the rules use and no more: selectors with `=`, `!=`, `=~` matchers;
`rate`, `increase` and `delta` over a range (from the first to the last scrape that has the
series: the range is the scrapes given); `absent`; `sum`, `max`, `min` with `by`; `/`
between vectors with the same labels; a comparison with a number (a filter, as in PromQL);
`or`. An expression it cannot parse fails the test, so a rule using more must extend it.
An alert "fires" when its expression's result is not empty (its `for:` is not simulated).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

Labels = frozenset[tuple[str, str]]
Vector = dict[Labels, float]


@dataclass
class Scrape:
    """One scrape of every target: each sample's name and labels (job, namespace added
    as Prometheus would), at `time` seconds."""

    time: float
    samples: dict[tuple[str, Labels], float]


TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+(?:\.\d+)?(?:e-?\d+)?)|(?P<duration>\[\d+[smhd]\])"
    r"|(?P<string>\"(?:[^\"\\]|\\.)*\")|(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)"
    r"|(?P<op>==|!=|>=|<=|=~|[(){},=<>/]))"
)
COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    "<": operator.lt,
    "==": operator.eq,
    "!=": operator.ne,
    ">=": operator.ge,
    "<=": operator.le,
}
AGGREGATE: dict[str, Callable[[list[float]], float]] = {"sum": sum, "max": max, "min": min}


def tokens(text: str) -> list[tuple[str, str]]:
    found, position = [], 0
    text = text.strip()
    while position < len(text):
        match = TOKEN.match(text, position)
        assert match and match.end() > position, f"cannot read {text[position:]!r}"
        kind = match.lastgroup
        assert kind is not None
        found.append((kind, match.group(kind)))
        position = match.end()
    return found


class Evaluator:
    def __init__(self, text: str, scrapes: list[Scrape]) -> None:
        self.tokens = tokens(text)
        self.at = 0
        self.scrapes = scrapes

    def evaluate(self) -> Vector:
        result = self.or_expr()
        assert self.at == len(self.tokens), f"unread: {self.tokens[self.at :]}"
        return result

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        text = self.tokens[self.at][1]
        assert expected is None or text == expected, f"expected {expected}, got {text}"
        self.at += 1
        return text

    def left_assoc(
        self, op: str, operand: Callable[[], Vector], apply: Callable[[Vector, Vector], Vector]
    ) -> Vector:
        """`operand (op operand)*`, folded from the left."""
        left = operand()
        while self.peek() == op:
            self.take()
            left = apply(left, operand())
        return left

    def or_expr(self) -> Vector:
        return self.left_assoc("or", self.compare, lambda left, right: {**right, **left})

    def compare(self) -> Vector:
        vector = self.divide()
        if self.peek() in COMPARE:
            test = COMPARE[self.take()]
            threshold = float(self.take())
            vector = {k: v for k, v in vector.items() if test(v, threshold)}
        return vector

    def divide(self) -> Vector:
        return self.left_assoc(
            "/",
            self.unary,
            lambda left, right: {k: v / right[k] for k, v in left.items() if right.get(k)},
        )

    def unary(self) -> Vector:
        word = self.peek()
        if word == "(":
            self.take()
            inner = self.or_expr()
            self.take(")")
            return inner
        if word in AGGREGATE:
            return self.aggregate()
        if word in ("rate", "increase", "delta"):
            return self.over_range()
        if word == "absent":
            self.take()
            self.take("(")
            found = self.selector(self.scrapes[-1:])
            self.take(")")
            return {} if found else {frozenset(): 1.0}
        return self.selector(self.scrapes[-1:])

    def aggregate(self) -> Vector:
        fold = AGGREGATE[self.take()]
        by: list[str] = []
        if self.peek() == "by":
            self.take()
            self.take("(")
            while self.peek() != ")":
                by.append(self.take())
                if self.peek() == ",":
                    self.take()
            self.take(")")
        self.take("(")
        inner = self.or_expr()
        self.take(")")
        groups: dict[Labels, list[float]] = {}
        for labels, v in inner.items():
            key = frozenset((k, x) for k, x in labels if k in by)
            groups.setdefault(key, []).append(v)
        return {k: fold(vs) for k, vs in groups.items()}

    def over_range(self) -> Vector:
        function = self.take()
        self.take("(")
        first_and_last: dict[Labels, list[tuple[float, float]]] = {}
        start = self.at
        for scrape in self.scrapes:
            self.at = start
            for labels, v in self.selector([scrape]).items():
                first_and_last.setdefault(labels, []).append((scrape.time, v))
        kind, _ = self.tokens[self.at]
        assert kind == "duration", "a range function needs a range"
        self.take()
        self.take(")")
        result: Vector = {}
        for labels, points in first_and_last.items():
            if len(points) < 2:
                continue
            (t0, v0), (t1, v1) = points[0], points[-1]
            change = v1 - v0
            result[labels] = change / (t1 - t0) if function == "rate" else change
        return result

    def selector(self, scrapes: list[Scrape]) -> Vector:
        """The series of the last of `scrapes` matching the selector (its name dropped)."""
        name = None
        if self.peek() != "{":
            name = self.take()
        matchers: list[tuple[str, str, str]] = []
        if self.peek() == "{":
            self.take()
            while self.peek() != "}":
                label, op, raw = self.take(), self.take(), self.take()
                matchers.append((label, op, raw[1:-1].replace('\\"', '"')))
                if self.peek() == ",":
                    self.take()
            self.take("}")
        result: Vector = {}
        for scrape in scrapes[-1:]:
            for (sample, labels), v in scrape.samples.items():
                if name is not None and sample != name:
                    continue
                if all(matches(dict(labels).get(k, ""), op, x) for k, op, x in matchers):
                    result[labels] = v
        return result


def matches(value: str, op: str, expected: str) -> bool:
    if op == "=":
        return value == expected
    if op == "!=":
        return value != expected
    assert op == "=~", op
    return re.fullmatch(expected, value) is not None


def evaluate(expression: str, scrapes: list[Scrape]) -> Vector:
    """The expression's result over `scrapes` (oldest first; instant selectors read the
    last)."""
    return Evaluator(expression, scrapes).evaluate()
