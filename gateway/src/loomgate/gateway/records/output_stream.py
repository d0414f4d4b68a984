"""The writer of one stream: kernel output normalized as a terminal shows it, committed line by
line to a LineLog under the tag of what produced it."""

from __future__ import annotations

from loomgate.gateway.records.output_log import PART_START, LineLog
from loomgate.gateway.records.terminal_text import TerminalText, normalize


class OutputStream:
    """A LineLog fed through one TerminalText."""

    def __init__(self, log: LineLog) -> None:
        self.log = log
        self._text = TerminalText()
        self._tag = 0

    def write(self, data: str | bytes, tag: int = 0) -> None:
        """Feed stream output; a line pending under another tag is committed first."""
        if tag != self._tag:
            self._commit_pending()
            self._tag = tag
        self.log.append(self._text.feed(data), tag)
        self.log.set_pending(self._rendered_pending, tag)

    def write_block(self, text: str, tag: int) -> None:
        """Commit a whole output: its lines get `tag`, the first also PART_START."""
        self._commit_pending()
        self.log.append(normalize(text), tag, first_tag=tag | PART_START)

    def finish(self) -> None:
        """Commit the pending line, if any."""
        self._commit_pending()

    def _commit_pending(self) -> None:
        """Finish the normalizer and append what it still held under the current tag."""
        self.log.append(self._text.finish(), self._tag)
        self.log.set_pending(None)

    def _rendered_pending(self) -> str:
        """Return the normalizer's unfinished line."""
        return self._text.pending
