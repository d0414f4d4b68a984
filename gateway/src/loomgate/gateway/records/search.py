"""Finding lines of line logs by literal text or regular expression, with context."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypedDict

import regex

from loomgate.gateway.records.output_log import LineLog
from loomgate.shared.echo import echo
from loomgate.shared.wire import Marker, SearchGroup, SearchLine, SearchMode, SearchReading


class SearchError(ValueError):
    """A search that cannot be run: an empty query or an invalid regular expression."""


class SearchTimeout(SearchError):
    """A search that did not finish before its deadline."""


def _timeout_error() -> SearchTimeout:
    """Return the error raised when a search runs past its deadline."""
    return SearchTimeout("The search did not finish before its deadline; try a simpler query.")


# Characters that give a query a meaning as a regex beyond its text.
REGEX_SYNTAX = frozenset(".^$*+?{}[]\\|()")


@dataclass(frozen=True)
class Matcher:
    """A validated query matched per line: as literal text, as a regular expression, or (the
    automatic reading of a query with regex syntax) as either."""

    query: str
    mode: SearchReading
    ignore_case: bool
    pattern: regex.Pattern[str] | None = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.query:
            raise SearchError("The search query is empty; give the text or pattern to look for.")
        pattern = None
        if self.mode != "literal":
            try:
                pattern = regex.compile(self.query, regex.IGNORECASE if self.ignore_case else 0)
            except regex.error as error:
                query = echo(self.query)
                raise SearchError(f"Invalid regular expression {query}: {error}.") from error
        object.__setattr__(self, "pattern", pattern)

    @classmethod
    def build(cls, query: str, mode: SearchMode = "auto", ignore_case: bool = False) -> Matcher:
        """Return a matcher. "auto" finds the query's text always, and also what it matches
        as a regex when it has regex syntax and compiles: models type code like `f(0)`."""
        if mode != "auto":
            return cls(query, mode, ignore_case)
        if not REGEX_SYNTAX & set(query):
            return cls(query, "literal", ignore_case)
        try:
            return cls(query, "literal or regex", ignore_case)
        except SearchError:
            return cls(query, "literal", ignore_case)

    def matching_indices(
        self, first: int, lines: list[str], deadline: float | None = None
    ) -> Iterator[int]:
        """Yield the indices (counted from `first`) of the matching lines of a block."""
        if self.pattern is None:
            yield from self._literal_indices(first, lines, deadline)
            return
        literal = (
            set(self._literal_indices(first, lines, deadline)) if self.mode != "regex" else set()
        )
        yield from _regex_indices(self.pattern, first, lines, deadline, literal)

    def _literal_indices(
        self, first: int, lines: list[str], deadline: float | None
    ) -> Iterator[int]:
        _check_deadline(deadline)
        needle = self.query.casefold() if self.ignore_case else self.query
        if "\n" in needle:
            return
        text = "\n".join(lines)
        if self.ignore_case:
            text = text.casefold()  # casefolding never adds or removes a newline
        index, position = first, 0
        found = text.find(needle)
        while found >= 0:
            index += text.count("\n", position, found)
            yield index
            position = text.find("\n", found) + 1
            if position == 0:
                return
            index += 1
            found = text.find(needle, position)


def _regex_indices(
    pattern: regex.Pattern[str],
    first: int,
    lines: list[str],
    deadline: float | None,
    already: set[int],
) -> Iterator[int]:
    """Yield the indices (counted from `first`) of the lines in `already` or in which `pattern`
    finds a match."""
    search = pattern.search
    try:
        if deadline is None:
            yield from (
                index for index, line in enumerate(lines, first) if index in already or search(line)
            )
            return
        clock = time.monotonic
        for index, line in enumerate(lines, first):
            if index in already:
                yield index
                continue
            left = deadline - clock()
            if left <= 0:
                raise _timeout_error()
            if search(line, timeout=left):
                yield index
    except TimeoutError as error:
        raise _timeout_error() from error


def _check_deadline(deadline: float | None) -> None:
    """Raise SearchTimeout if `deadline` (a time.monotonic() value) has passed."""
    if deadline is not None and time.monotonic() >= deadline:
        raise _timeout_error()


@dataclass(frozen=True, slots=True)
class Hit:
    """A line shown in search results: a match ("M") or context around one ("C")."""

    number: int
    text: str
    marker: Marker


@dataclass
class LogMatches:
    """Matching lines grouped with their context."""

    groups: list[list[Hit]]  # runs of adjacent lines; a new group wherever lines are skipped
    matches: int  # number of "M" lines returned
    truncated: bool  # more matches existed beyond max_matches


def _find(log: LineLog, matcher: Matcher, limit: int, deadline: float | None) -> list[int]:
    """Return the 0-based indices of up to `limit` matching lines, pending line included."""
    found: list[int] = []
    for first, lines in log.iter_committed():
        for index in matcher.matching_indices(first, lines, deadline):
            found.append(index)
            if len(found) == limit:
                return found
    pending = [line.text for line in log.read(log.count, log.count + 1)]
    found.extend(matcher.matching_indices(log.count, pending, deadline))
    return found


def search_log(
    log: LineLog,
    matcher: Matcher,
    *,
    context: int = 0,
    max_matches: int = 50,
    deadline: float | None = None,
) -> LogMatches:
    """Return the first `max_matches` matching lines of `log` with `context` lines around each."""
    if max_matches < 1:
        raise ValueError(f"max_matches must be at least 1, not {max_matches}.")
    if context < 0:
        raise ValueError(f"context must be at least 0, not {context}.")
    found = _find(log, matcher, max_matches + 1, deadline)
    truncated = len(found) > max_matches
    found = found[:max_matches]
    spans: list[list[int]] = []
    for index in found:
        lo, hi = max(index - context, 0), index + context + 1
        if spans and lo <= spans[-1][1]:
            spans[-1][1] = hi
        else:
            spans.append([lo, hi])
    matched = set(found)
    groups = [
        [
            Hit(line.number, line.text, "M" if line.number - 1 in matched else "C")
            for line in log.read(lo, hi)
        ]
        for lo, hi in spans
    ]
    return LogMatches(groups, len(found), truncated)


class RecordMatches(TypedDict):
    """Matches across several executions: the search reply without the query echoed."""

    matches: int
    truncated: bool
    groups: list[SearchGroup]
    searched: int


def search_records(
    logs: list[tuple[int, LineLog]],
    matcher: Matcher,
    *,
    context: int,
    max_matches: int,
    timeout: float,
) -> RecordMatches:
    """Return matches across the (execution number, log) pairs in order, `max_matches` at most."""
    deadline = time.monotonic() + timeout
    groups: list[SearchGroup] = []
    matches = searched = 0
    truncated = False
    for number, log in logs:
        if matches >= max_matches:
            truncated = True
            break
        searched += 1
        result = search_log(
            log, matcher, context=context, max_matches=max_matches - matches, deadline=deadline
        )
        matches += result.matches
        truncated = truncated or result.truncated
        for group in result.groups:
            lines = [SearchLine(n=h.number, text=h.text, marker=h.marker) for h in group]
            groups.append(SearchGroup(execution=number, lines=lines))
    return RecordMatches(matches=matches, truncated=truncated, groups=groups, searched=searched)
