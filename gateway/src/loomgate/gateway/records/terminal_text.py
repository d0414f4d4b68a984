"""Incremental rendering of one terminal output stream into plain text lines."""

from __future__ import annotations

import codecs
import enum
import re

# Characters that need more than "append to the current line": C0 controls except TAB and LF,
# DEL and the C1 range.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# The same controls for ASCII text, likeliest first: `in` scans of these cost less than the regex.
_ASCII_CONTROLS = ("\x1b", "\r", "\x08", *map(chr, (*range(9), *range(11, 32), 127)))
_COMPLETE_CSI = re.compile(r"(?:\x1b\[|\x9b)(?P<params>[\x20-\x3f]*)(?P<final>[\x40-\x7e])")
_CSI_BODY = re.compile(r"[\x20-\x3f]*")
_OSC_END = re.compile(r"[\x07\x1b\x9c]")
_STRING_END = re.compile(r"[\x1b\x9c]")
_CSI_PARAMS_CAP = 32  # longer parameter strings are truncated; they can never select an erase


class _State(enum.Enum):
    GROUND = enum.auto()
    ESC = enum.auto()  # after ESC
    ESC_INTERMEDIATE = enum.auto()  # after ESC and 0x20-0x2F bytes, waiting for the final byte
    CSI = enum.auto()
    OSC = enum.auto()  # ended by BEL, ESC \ or ST
    STRING = enum.auto()  # DCS/SOS/PM/APC, ended by ESC \ or ST
    STRING_ESC = enum.auto()  # ESC seen inside an OSC or other string


_STRING_INTRODUCERS = {
    "]": _State.OSC,
    "P": _State.STRING,  # DCS
    "X": _State.STRING,  # SOS
    "^": _State.STRING,  # PM
    "_": _State.STRING,  # APC
}


class _Line:
    """The current line as appended parts plus a cursor column, spliced only on overwrite."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self.length = 0
        self.col = 0

    def write(self, text: str) -> None:
        """Put text at the cursor, overwriting what is there, and advance the cursor."""
        if self.col > self.length:
            self._parts.append(" " * (self.col - self.length))
            self.length = self.col
        n = len(text)
        if self.col == self.length:
            self._parts.append(text)
            self.length += n
        else:
            rest = self._cut(self.col)
            self._parts.append(text)
            if len(rest) > n:
                self._parts.append(rest[n:])
            self.length = self.col + max(n, len(rest))
        self.col += n

    def erase_to_end(self) -> None:
        """Drop everything from the cursor to the end of the line."""
        if self.col < self.length:
            self._cut(self.col)

    def erase_to_start(self) -> None:
        """Blank the line from its start through the cursor column."""
        blank = min(self.col + 1, self.length)
        rest = self._cut(0)
        self._parts = [part for part in (" " * blank, rest[blank:]) if part]
        self.length = len(rest)

    def erase_all(self) -> None:
        """Blank the whole line, leaving the cursor where it is."""
        self._parts.clear()
        self.length = 0

    def rendered(self) -> str:
        """Return the line's text, collapsing its parts so a repeated call is cheap."""
        text = "".join(self._parts)
        self._parts = [text] if text else []
        return text

    def take(self) -> str:
        """Return the line's text and start a new empty line."""
        text = "".join(self._parts)
        self._parts = []
        self.length = self.col = 0
        return text

    def _cut(self, at: int) -> str:
        """Remove the text from column `at` on and return it, joining only the parts it spans."""
        cut_size = self.length - at
        tail: list[str] = []
        size = 0
        while size < cut_size:
            part = self._parts.pop()
            tail.append(part)
            size += len(part)
        tail.reverse()
        joined = "".join(tail)
        extra = size - cut_size
        if extra:
            self._parts.append(joined[:extra])
        self.length = at
        return joined[extra:]


def _has_controls(text: str) -> bool:
    """Return whether `text` holds a control character other than newline and tab."""
    if text.isascii():
        return any(control in text for control in _ASCII_CONTROLS)
    return _CONTROL.search(text) is not None


class TerminalText:
    """Turns one stream's chunks (bytes or text) into the lines a terminal would show."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._state = _State.GROUND
        self._csi_params = ""
        self._line = _Line()

    def feed(self, data: str | bytes) -> list[str]:
        """Return the lines completed by this chunk, without their line ends."""
        if isinstance(data, str):
            text = self._decoder.decode(b"", final=True) + data
            self._decoder.reset()
        else:
            text = self._decoder.decode(data)
        lines: list[str] = []
        if self._state is _State.GROUND and not _has_controls(text):
            self._write_text(text, lines)
        else:
            self._feed_controls(text, lines)
        return lines

    @property
    def pending(self) -> str:
        """Return the rendered, unfinished current line ("" if none)."""
        return self._line.rendered()

    def finish(self) -> list[str]:
        """Return the last, unterminated line (if non-empty) and reset for a new stream."""
        lines = self.feed(self._decoder.decode(b"", final=True))
        self._state = _State.GROUND
        self._csi_params = ""
        last = self._line.take()
        return [*lines, last] if last else lines

    def _write_text(self, text: str, lines: list[str]) -> None:
        """Write text free of controls other than newlines, adding the lines it completes."""
        pieces = text.split("\n")
        if pieces[0]:
            self._line.write(pieces[0])
        if len(pieces) > 1:
            lines.append(self._line.take())
            lines.extend(pieces[1:-1])
            if pieces[-1]:
                self._line.write(pieces[-1])

    def _feed_controls(self, text: str, lines: list[str]) -> None:
        """Interpret text with controls and escape sequences, adding the lines it completes."""
        line = self._line
        state = self._state
        i, n = 0, len(text)
        while i < n:
            if state is _State.GROUND:
                match = _CONTROL.search(text, i)
                j = n if match is None else match.start()
                if j > i:
                    self._write_text(text[i:j], lines)
                if match is None:
                    break
                csi = _COMPLETE_CSI.match(text, j)
                if csi is not None:
                    self._dispatch_csi(csi.group("final"), csi.group("params"))
                    i = csi.end()
                    continue
                i = j + 1
                char = text[j]
                if char == "\r":
                    line.col = 0
                elif char == "\b":
                    line.col = max(0, line.col - 1)
                elif char == "\x1b":
                    state = _State.ESC
                elif char == "\x9b":
                    state, self._csi_params = _State.CSI, ""
            elif state is _State.CSI:
                body = _CSI_BODY.match(text, i)
                assert body is not None  # the pattern matches the empty string
                if len(self._csi_params) < _CSI_PARAMS_CAP:
                    self._csi_params = (self._csi_params + body.group())[:_CSI_PARAMS_CAP]
                i = body.end()
                if i < n:
                    state = _State.GROUND
                    if "\x40" <= text[i] <= "\x7e":
                        self._dispatch_csi(text[i], self._csi_params)
                        i += 1
            elif state is _State.OSC or state is _State.STRING:
                end = (_OSC_END if state is _State.OSC else _STRING_END).search(text, i)
                if end is None:
                    break
                i = end.end()
                state = _State.STRING_ESC if end.group() == "\x1b" else _State.GROUND
            elif state is _State.STRING_ESC:
                if text[i] == "\\":
                    state = _State.GROUND
                    i += 1
                else:
                    state = _State.ESC
            else:
                char = text[i]
                i += 1
                if state is _State.ESC and char == "[":
                    state, self._csi_params = _State.CSI, ""
                elif state is _State.ESC and char in _STRING_INTRODUCERS:
                    state = _STRING_INTRODUCERS[char]
                elif state is _State.ESC and char == "\x1b":
                    pass
                elif "\x20" <= char <= "\x2f":
                    state = _State.ESC_INTERMEDIATE
                elif "\x30" <= char <= "\x7e":
                    state = _State.GROUND
                else:
                    state = _State.GROUND
                    i -= 1  # not part of the sequence: reinterpret it as ordinary input
        self._state = state

    def _dispatch_csi(self, final: str, params: str) -> None:
        """Apply an erase-in-line sequence; every other CSI sequence is simply dropped."""
        if final != "K":
            return
        if params in ("", "0"):
            self._line.erase_to_end()
        elif params == "1":
            self._line.erase_to_start()
        elif params == "2":
            self._line.erase_all()


def normalize(data: str | bytes) -> list[str]:
    """Return all lines of one complete stream, rendered as a terminal would show them."""
    text = TerminalText()
    return text.feed(data) + text.finish()


def normalized_text(data: str | bytes) -> str:
    """Return one complete text (an input() prompt) rendered as a terminal would show it, as
    output is: escape sequences and controls gone, `\r` applied, its line ends kept."""
    text = TerminalText()
    lines = text.feed(data)
    return "".join(line + "\n" for line in lines) + text.pending
