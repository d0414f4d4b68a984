"""Why a surviving mutant is equivalent: no behaviour a user could notice tells it from the code.

bench.mutation writes each survivor's reason beside its diff. A rule names part of the mutant's
name (its module and function) and part of the line the mutant wrote, so it still applies when
mutmut numbers the mutants differently; the first rule that matches gives the reason.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """Survivors whose name holds `name` and whose written line holds `line` (is `line`, when
    `exact`; a `line` that begins with "-" is looked for among the removed lines) are
    equivalent."""

    name: str
    line: str
    reason: str
    exact: bool = False

    def matches(self, mutant: str, written: list[str], removed: list[str]) -> bool:
        """Return whether this rule explains `mutant`."""
        if self.name not in mutant:
            return False
        lines, wanted = (
            (removed, self.line[1:]) if self.line.startswith("-") else (written, self.line)
        )
        return any(line == wanted if self.exact else wanted in line for line in lines)


FALSE = "None is false, as False is, wherever the value is read"
NETLINK_READ = (
    "the kernel makes each datagram of a netlink dump 32 KiB at most, whatever size a read asks "
    "for (af_netlink caps max_recvmsg_len at SKB_WITH_OVERHEAD(32768)), so a read of 64 KiB or "
    "more takes every one whole: the same messages"
)
STRICT = (
    "the rows zipped are always of one length (built together), so zip's strict check never "
    "fires and dropping it changes nothing"
)
AUDIENCE = (
    'read_call words every audience but "person" for the model, so a default other than '
    '"person" reads as "model" does'
)
UNTIMED = (
    "the clock would have to read exactly the deadline (a float, to the nanosecond) for the two "
    "comparisons to differ"
)
LARGER = (
    "reading more of the files at once yields the same lines in larger blocks (a search finds "
    "the same; it costs memory)"
)
EMPTY_TAIL = (
    "read(total - n, total) is empty for n = 0, and for a negative n it starts past the end and "
    "is empty too"
)
UNREAD_PARAMS = 'the parameters are read only in the CSI state, and entering it sets them to ""'
CATEGORY = "warnings.warn's category defaults to UserWarning"
STACKLEVEL = (
    "only which caller the warning names changes, and mutmut's trampoline adds a frame of its "
    "own, so no test run under mutation can tell (not equivalent: untestable here)"
)
MORE_MATCHES = (
    "finding more matches than max_matches + 1 only costs time: the list is cut to max_matches "
    "and `truncated` is the same"
)
VERSION_3_11 = (
    "a running Python's version_info has five fields, so it is above (3, 11) exactly when it is "
    "at least (3, 11)"
)
UTF_8 = 'Python names one codec "utf-8" and "UTF-8"'
LINE_ZERO = (
    "0 is refused first (line numbers start at 1), so `< 0` and `<= 0` (or `< 1`) agree on every "
    "number that gets here"
)
FIRST_LINE = (
    "a record's first line always begins an output (its kind, 1 to 6, is never the 0 of none), "
    "and beginning one closes what was gathered (nothing) and sets kind, start, texts, partial "
    "and stand_in afresh: their first values are never read"
)
PARTIAL = "partial is read only by a close that has lines, and every line gathered sets it"
ENDS_WHOLE = (
    "None is false, as False is; and a JsonLines that forgets a whole write ended its file only "
    'checks the file\'s last byte again before the next append, finds the "\\n" that write '
    "ended with (it is the file's one writer) and writes the same line: a stat and a one-byte "
    "read more, nothing else"
)
LAUNCHES = "tests/gateway/residency/test_launches.py::"


def signalled(test: str, what: str) -> str:
    """Return the reason of a mutant seen only when a marked process runs and is signalled."""
    return (
        f"seen only with a marked process running, which a fast test cannot have but its own "
        f"(signalled, the run dies); {LAUNCHES}{test} catches it: {what}"
    )


NO_PID = "test_a_marker_without_a_pid_ends_the_process_naming_its_connection_file"
BY_IDENTITY = "test_a_marker_with_an_identity_ends_that_process_only_while_it_is_that_one"
BY_GROUP = "test_a_marker_with_a_process_group_ends_the_whole_group"
BY_SANDBOX = "test_a_sandboxed_marker_ends_the_sandbox_init_and_removes_the_sandbox"
BY_UNNOTED_INIT = "test_a_sandbox_killed_before_its_init_was_noted_is_ended_whole"
BY_NAMED = "test_a_launch_is_found_by_the_connection_file_its_command_line_names"
BY_OLD_MARKER = "test_a_marker_of_an_earlier_gateway_names_its_process_by_its_connection_file"
NAMED = signalled(
    BY_NAMED,
    "a marker names, beside the gateway's connection file, the one its command line names (a "
    "relayed kernel's own); without it the process is not found",
)
WRONG_CALL = signalled(NO_PID, "the call raises TypeError and the launch is not ended")
NOT_GROUP_LEADER = signalled(
    NO_PID,
    "its sleeper leads no process group (its marker notes no pgid), so killpg raises "
    "ProcessLookupError, which must be dropped",
)
COUNTED = signalled(
    BY_IDENTITY, 'two markers end two kernels: "Ended 2 kernel(s) a killed gateway was starting"'
)
REFUSED = (
    "PermissionError comes only from a process (or a group holding one) of another user: no "
    "test can start one, and as root (this suite's runs) no signal is refused"
)
REAPED = (
    "os.kill follows the killpg that ended the process, which is then a zombie at worst, and a "
    "zombie takes a signal without error; it is gone only if its parent reaped it between the "
    "two calls (or it exited after is_alive), a race no test can time"
)
UNSUPPRESSED_LOOKUP = (
    f"(the one around killpg) {NOT_GROUP_LEADER}; (the one around os.kill, the same line) {REAPED}"
)
LISTED = (
    "the marker was listed a moment ago and only its own gateway, which holds the state dir's "
    "lock, touches launching/ (remove_kernel_files removes the connection file and its log), so "
    "it is missing only if something else removed it between two calls"
)
FORGOT = "FileNotFoundError is an OSError, which the suppress around the unlink drops anyway"
SLICE_END = "a slice from None starts at 0 and a slice to None ends at the length, as here"
SBPL_COMMENT = "an SBPL comment line: its words change nothing sandbox-exec enforces"
PROCESS_ONLY = "not equivalent: only a real process shows it, and the fast tests start none; "
PROBE_TESTS = (
    "the trial run of bwrap is covered by test_mechanism.py (test_this_machine_uses_the_bubblewrap"
    "_on_its_path with this machine's bwrap, test_a_bwrap_apparmor_refuses_is_said and "
    "test_a_bwrap_that_cannot_serve_is_said with ones that fail)"
)
SIGNALS = (
    "a signal reaching a live sandbox's init is covered by test_sandboxed_kernels.py "
    "(test_interrupt_input_setup_reset_and_images_work_inside: SIGINT to its group; "
    "test_the_memory_limit_ends_a_runaway_cell_and_the_kernel_comes_back: the restart's "
    "SIGKILL) and test_sandboxed_residency.py"
)

CODEC = 'Python names one codec "ascii" and "ASCII", and one "latin-1" and "LATIN-1"'
ONE_COLON = (
    'this branch gets a text with exactly one ":" (two or more go to the IPv6 branch before), '
    "so every split of it at a colon gives the same two parts"
)
NONE_FIRST = (
    "a `none` policy has no patterns: past the first check it meets `a.kind == b.kind` (b is "
    "`none` too) or all() over its no patterns, True either way"
)
LIST_AGAINST_NONE = (
    "`a` is a list here (none, host and public were answered above), and against a `none` b the "
    "coverage check asks any() of b's no patterns: False, as `a.kind == b.kind` is"
)
PLACEHOLDER_REQUEST = (
    "this request is never sent: it only puts h11's client in the state of awaiting a response, "
    "and h11 reads a response head alike whatever the request's method spelling (any token but "
    "HEAD), target or Host"
)
UNREAD_TIMEOUT = (
    "the proxy catches this TimeoutError without reading its words (proxy._arrived); it is "
    "raised only when a wake-up found nothing to read at the deadline, a race no test can time "
    "(the wait's own TimeoutError is the usual one)"
)

WINDOWS_ONLY = "os.symlink's target_is_directory matters on Windows only"
PARTIAL_NAME = (
    "the partial file is renamed onto the record at once, and no reader looks for it by name "
    "(records() globs *.json, which none of these names ends with)"
)

PATH_ORDER = (
    "outermost() returns the paths sorted by their parts already, and Python 3.11 orders Paths "
    "by their parts too (3.12 orders them by their text)"
)
SHIPPED_DEFAULT = "bool(None) is False, as bool(False) is"


CASELESS = (
    "jupyter_client's transport is a caseless enum of tcp and ipc: it keeps the value lower-case"
)
JSON_LAYOUT = "the kernel reads the same JSON whatever its indentation"
UTF8_NAME = "Python's codecs take UTF-8 and utf-8 as one name"
UTF8_LOCALE = (
    "the connection file is ASCII (keys, names, numbers): any locale's encoding reads it alike"
)

GROUPS = (
    "seen only with a sandbox's processes running, which a fast test cannot have: "
    "tests/gateway/test_every_kernel.py::"
    "test_an_interrupt_ends_a_running_cell_or_is_refused_in_one_sentence[py] catches it (ipymini "
    "makes a process group of its own inside the sandbox, which only this signal reaches)"
)

RULES = (
    # notebook export
    Rule("export.outputs.x_cell_outputs_", "whole=None", FALSE),
    Rule("export.notebook.x_notebook_file_", "ensure_ascii=None", FALSE),
    Rule("export.outputs.xǁ_Builderǁ__init__", "self.stand_in = None", FALSE),
    Rule("export.outputs.xǁ_Builderǁ__init__", "self.in_tail = None", FALSE),
    Rule("export.outputs.xǁ_Builderǁ__init__", "self.partial = ", PARTIAL),
    Rule("export.outputs.xǁ_Builderǁ__init__", "self.kind = None", FIRST_LINE),
    Rule("export.outputs.xǁ_Builderǁ__init__", "self.start = ", FIRST_LINE),
    Rule("export.outputs.xǁ_Builderǁ__init__", "self.texts: list[str] = None", FIRST_LINE),
    Rule("export.outputs.xǁ_Builderǁ__init__", "self.stand_in = True", FIRST_LINE),
    Rule(
        "export.outputs.xǁ_Builderǁ__init__",
        "self.kind = 1",
        "with 1 (stdout) as the kind at the start, a first stdout line is gathered without the "
        "close of nothing before it; stdout lines never carry PART_START, so its start is 0 "
        "either way",
    ),
    Rule(
        "export.outputs.xǁ_Builderǁclose_",
        "self.texts, self.kind, self.partial, self.stand_in = [], 1, False, False",
        "the next line's kind replaces it at once, except after the omission (where a first "
        "stdout line then joins without a close of nothing, and the start it keeps is read only "
        "for errors, which always begin an output of their own) and at the end",
    ),
    Rule(
        "export.outputs.xǁ_Builderǁclose_",
        "self.texts, self.kind, self.partial, self.stand_in = [], 0, True, False",
        PARTIAL,
    ),
    Rule("export.selection.xǁSelectionǁpick_", "lo = None", SLICE_END),
    Rule("export.selection.xǁSelectionǁpick_", "hi = None", SLICE_END),
    Rule("export.selection.xǁSelectionǁpick_", "elif start >= 0:", LINE_ZERO),
    Rule("export.selection.xǁSelectionǁpick_", "elif stop >= 0:", LINE_ZERO),
    Rule(
        "export.selection.xǁSelectionǁran_by_",
        'meta.get("client") or "XXXX"',
        'a cell of no client is read as labelled "XXXX" instead of "", and a client filter '
        'matches neither unless it is "XXXX" (no client is labelled so)',
    ),
    Rule(
        "export.notebook.x_notebook_cells_",
        "else last + 2",
        "only restarts after at most `last` are looked at, so any bound above `last` keeps the "
        "same ones",
    ),
    # output stream
    Rule(
        "OutputStreamǁ__init__",
        "self._tag = 1",
        "a new stream holds nothing pending, so the commit a first write under another tag "
        "causes appends no line: the first tag it starts from is never seen",
    ),
    # translator settings
    Rule(
        "settings.x_parser_",
        "defaults = Settings(",
        "the parser reads only the flags' defaults from this Settings, never its cwd or env",
    ),
    # presentation
    Rule(".presentation.", 'audience: Audience = "', AUDIENCE),
    Rule(".presentation.", "strict=", STRICT),
    Rule(".presentation.", "zip(row, widths, )", STRICT),
    Rule(
        "kernels.x_render_kernel_",
        'kernel.get("checkpoints", ',
        "checkpoint_lines takes None as it takes [] (`if not checkpoints`): a status from a "
        "gateway before checkpoints has none either way",
    ),
    Rule(
        "refusals.x_not_waiting_for_input_",
        'STATE_PHRASES.get(state or "XXXX"',
        'a missing state is no key, as "" is not, so both give "is None"',
    ),
    Rule(
        "reads.x_render_search_",
        'page.clipped.get((number, line["n"]), ',
        "a line that was not clipped gets None instead of 0, and `if clipped` shows no note for "
        "either",
    ),
    Rule(
        "reads.x_read_on_",
        "rpartition",
        'a lines range has one colon ("start:stop"; the gateway refuses others), so partition '
        "and rpartition split it alike",
    ),
    Rule("output_view.x_fit_", "within(head_lines, None)", FALSE),
    Rule(
        "output_view.x_fit_",
        "if (tail) or True else []",
        "an empty tail sliced is the empty list the else gives",
    ),
    Rule(
        "output_view.x_fit_",
        "budget = limits.max_chars / 2",
        "`used` is a whole number, and a whole number is above n // 2 exactly when it is above "
        "n / 2",
    ),
    Rule(
        "output_view.x_leading_",
        "if lines else 1",
        "with no lines the loop never runs, so the numbering's width is never used",
    ),
    Rule(
        "SearchPage",
        'if len(text) <= len(line["text"])',
        "it records 0 clipped characters for lines that fit; page.clipped is read only by "
        "render_search, which shows no note for 0",
    ),
    Rule(
        "tracebacks.x__after_last_user_frames_",
        'file = found["file"] or "XXXX"',
        'only the cell\'s own frame ("Cell In[3], line 2") has no file, and "XXXX" names no '
        'ipykernel or IPython directory, as "" does not, so the frame stays the user\'s (a '
        "frame's file is shown only for internal frames)",
    ),
    Rule(
        "tracebacks.x__after_last_user_frames_",
        "INTERNAL.search(file) if (file) or True",
        'INTERNAL.search("") finds no package: None, as the else gives',
    ),
    Rule(
        "tracebacks.x__after_last_user_frames_",
        "position = last + 2",
        "a frame runs to the first blank line, so the line after its last is blank or past the "
        "block, and a blank line between frames changes nothing: skipping it is the same",
    ),
    Rule(
        "tracebacks.x__whole_blocks_",
        "block: list[wire.Line] = None",
        "block is read first by `elif block and …`, where None is false as [] is; every other "
        "branch sets it afresh",
    ),
    Rule(
        "tracebacks.x__whole_blocks_",
        "block = None",
        "block is read next by `elif block and …`, where None is false as [] is; every other "
        "branch sets it afresh",
    ),
    Rule(
        "tracebacks.x__whole_blocks_",
        "if following is None or ended and following",
        "a block this keeps is never extended: the next error line either starts a new one or "
        "is not next to its last line (another line or a gap in the numbers came between), "
        "which empties it",
    ),
    Rule(
        "http_access.x_bearer_header_",
        "token_file or 'XXXX'",
        "no caller passes neither a file nor a variable (http_start_lines says --no-auth before, "
        "http_auth_help always names the file): the `or ''` is there for the type only",
    ),
    # terminal text
    Rule(
        "terminal_text.x__has_controls_",
        "control not in text",
        "it only sends text free of controls down the slow path, which renders it alike",
    ),
    Rule("terminal_text.xǁTerminalTextǁ__init__", "self._csi_params = ", UNREAD_PARAMS),
    Rule("terminal_text.xǁTerminalTextǁfinish_", "self._csi_params = ", UNREAD_PARAMS),
    Rule(
        "terminal_text.xǁTerminalTextǁ__init__",
        'getincrementaldecoder("UTF-8")',
        UTF_8,
    ),
    Rule(
        "terminal_text.xǁTerminalTextǁfinish_",
        'self._decoder.decode(b"", ',
        "feeding text flushes the decoder with final=True first, so the bytes it held still "
        "show as U+FFFD",
    ),
    Rule(
        "terminal_text.xǁTerminalTextǁ_feed_controls_",
        r'if text[i] == "XX\\XX"',
        "ESC \\ still ends the string: the ESC state reads \\ as an escape's final byte",
    ),
    Rule(
        "terminal_text.xǁTerminalTextǁ_feed_controls_",
        r'char == "XX\x1bXX"',
        "ESC ESC still reads as one ESC: the second is read again as the start of a sequence",
    ),
    Rule(
        "terminal_text.xǁTerminalTextǁ_feed_controls_",
        "state = None",
        "None falls into the same branch as ESC_INTERMEDIATE (every state not named above it)",
    ),
    Rule(
        "terminal_text.xǁTerminalTextǁ_feed_controls_",
        "if j >= i",
        "writing the empty text between two controls writes nothing",
    ),
    Rule(
        "terminal_text.xǁTerminalTextǁ_feed_controls_",
        "csi = None",
        "the state machine reads a complete CSI sequence a character at a time to the same end "
        "(the fast path only saves time)",
    ),
    Rule(
        "terminal_text.xǁTerminalTextǁ_feed_controls_",
        "len(self._csi_params) <= _CSI_PARAMS_CAP",
        "at the cap, more parameters are appended and cut back to the cap",
    ),
    Rule(
        "terminal_text.xǁ_Lineǁerase_to_end_",
        "self.col <= self.length",
        "cutting at the line's end cuts nothing",
    ),
    Rule(
        "terminal_text.xǁ_Lineǁrendered_",
        "[text] if (text) or True",
        "an empty part adds nothing to the joined line or to a cut of it",
    ),
    Rule(
        "terminal_text.xǁ_Lineǁwrite_",
        "self.col >= self.length",
        "the padding appended when the cursor is at the end is empty",
    ),
    Rule(
        "terminal_text.xǁ_Lineǁwrite_",
        "len(rest) >= n",
        "the rest appended when it is as long as the text written is empty",
    ),
    Rule(
        "terminal_text.xǁ_Lineǁwrite_",
        "self.col + self.length",
        "the cursor passes the line's end only after erase_all, which leaves the line empty, so "
        "col - length and col + length are the same",
    ),
    # line ranges
    Rule("line_range.x__check_", "(start <= 0) == (stop < 0)", LINE_ZERO),
    Rule("line_range.x__check_", "(start < 1) == (stop < 0)", LINE_ZERO),
    Rule("line_range.x__check_", "(start < 0) == (stop <= 0)", LINE_ZERO),
    Rule("line_range.x__check_", "(start < 0) == (stop < 1)", LINE_ZERO),
    Rule(
        "line_range.x__index_",
        "number >= 0",
        "0 is refused before a range is resolved (line numbers start at 1)",
    ),
    # gateway selection
    Rule("gateways_toml.x_load_gateways_toml_", "None,", CATEGORY, exact=True),
    Rule("gateways_toml.x_load_gateways_toml_", "-UserWarning,", CATEGORY, exact=True),
    Rule("gateways_toml.x_load_gateways_toml_", "stacklevel=", STACKLEVEL),
    Rule("gateways_toml.x_load_gateways_toml_", "-stacklevel=2,", STACKLEVEL, exact=True),
    Rule(
        "gateways_toml.x_load_gateways_toml_",
        "sys.version_info > (3, 11)",
        VERSION_3_11,
    ),
    Rule("gateways_toml.x_load_gateways_toml_", "token_in_file = None", FALSE),
    Rule(
        "gateways_toml.x_load_gateways_toml_",
        'path.read_text(encoding="UTF-8")',
        UTF_8,
    ),
    Rule(
        "gateways_toml.x_load_gateways_toml_",
        "path.read_text(encoding=None)",
        "the locale's encoding, which is UTF-8 wherever the tests run (not equivalent under a "
        "non-UTF-8 locale, which a fast test cannot set)",
    ),
    Rule(
        "output_view.xǁCellOutputǁlimits_to_keep_all_",
        "max_chars=2 << 62",
        "any limit past what a reply can hold keeps every character: 1 << 62 and 2 << 62 both do",
    ),
    Rule(
        "output_view.xǁCellOutputǁlimits_to_keep_all_",
        "max_chars=1 << 63",
        "any limit past what a reply can hold keeps every character: 1 << 62 and 1 << 63 both do",
    ),
    # search
    Rule("search.x__check_deadline_", "time.monotonic() > deadline", UNTIMED),
    Rule("search.x__regex_indices_", "if left < 0", UNTIMED),
    Rule(
        "search.x__find_",
        "log.read(log.count, log.count + 2)",
        "read stops at the log's total, and the pending line is the last line",
    ),
    Rule("search.x_search_log_", "_find(log, matcher, None, deadline)", MORE_MATCHES),
    Rule(
        "search.x_search_log_",
        "_find(log, matcher, max_matches + 2, deadline)",
        "finding more matches than max_matches + 1 only costs time: the list is cut to "
        "max_matches and `truncated` is the same",
    ),
    Rule(
        "search.",
        "regex.IGNORECASE if self.ignore_case else 1",
        "flag 1 is the regex module's TEMPLATE flag, which it accepts and ignores",
    ),
    # output log
    Rule(
        "output_log.x__decode_",
        'data.decode(errors="replace")',
        "bytes.decode decodes UTF-8 when no codec is named",
    ),
    Rule(
        "output_log.",
        '"UTF-8"',
        UTF_8,
    ),
    Rule(
        "output_log.",
        'payload.encode(errors="replace")',
        "str.encode encodes UTF-8 when no codec is named",
    ),
    Rule(
        "output_log.x__packed_",
        "",
        "the byte swap runs only on a big-endian machine; this one (and every machine the "
        "tests run on) is little-endian",
    ),
    Rule("output_log.", "self._dirty = None", FALSE),
    Rule(
        "output_log.xǁLineLogǁ__init__",
        'self._pending: str | Callable[[], str] | None = ""',
        'a pending text of "" is no pending line, as None is',
    ),
    Rule(
        "output_log.xǁLineLogǁ__init__",
        "self._pending_tag = ",
        "the pending tag is read only with a pending line, and set_pending sets both",
    ),
    Rule(
        "output_log.xǁLineLogǁ_line_end_",
        "_read_at(data, position, None)",
        "reading the rest of the file at once finds the same first newline",
    ),
    Rule(
        "output_log.xǁLineLogǁ_open_writers_",
        'open("ab", )',
        "the buffer's size changes when bytes reach the file, never what a flush or a read sees",
    ),
    Rule(
        "output_log.xǁLineLogǁ_readers_",
        "if self._index_reader is ",
        "the two read handles are opened together; opening them again on a later read returns "
        "the same bytes (it only spends file handles until they are collected)",
    ),
    Rule(
        "output_log.xǁLineLogǁ_roll_back_",
        "if handle is None",
        "dropping the writers a line later closes them as well (CPython frees them at once), "
        "before the files are truncated",
    ),
    Rule(
        "output_log.xǁLineLogǁ_roll_back_",
        "contextlib.suppress(OSError, ",
        "closing a writer raises no ValueError (only a detached buffer would)",
    ),
    Rule(
        "output_log.xǁLineLogǁ_roll_back_",
        "contextlib.suppress(None)",
        "reached only when stat or truncate of a log's own file fails inside the roll-back "
        "(the file vanished), which no fast test can bring about",
    ),
    Rule(
        "output_log.xǁLineLogǁ_roll_back_",
        "path.stat().st_size >= length",
        "truncating a file to its own length changes nothing",
    ),
    Rule(
        "output_log.xǁLineLogǁflush_",
        "assert self._data_writer is not None or self._index_writer is not None",
        "the two writers are opened and dropped together",
    ),
    Rule(
        "output_log.xǁLineLogǁappend_",
        "if (len(encoded) == len(payload)) and False",
        "it skips the ASCII fast path, whose line lengths are the ones splitting the bytes gives",
    ),
    Rule(
        "output_log.xǁLineLogǁappend_",
        "len(self._unwritten) > _INDEX_FLUSH_ENTRIES",
        "it flushes one line later; every read flushes first, so only a crash between those two "
        "lines could tell",
    ),
    Rule(
        "output_log.xǁLineLogǁiter_committed_",
        "_read_at(index, max(start, 0) * _ENTRY, None)",
        LARGER,
    ),
    Rule("output_log.xǁLineLogǁiter_committed_", "want = None", LARGER),
    Rule("output_log.xǁLineLogǁiter_committed_", "size + position", LARGER),
    Rule("output_log.xǁLineLogǁiter_committed_", "_read_at(data, position, None)", LARGER),
    Rule(
        "output_log.xǁLineLogǁ_committed_",
        "want = hi - lo + (",
        "asking for one index entry past the last reads none (the file, or the mirror, ends "
        "there), and the last line's end is the log's size either way",
    ),
    Rule(
        "output_log.xǁLineLogǁ_committed_",
        "strict=",
        STRICT,
    ),
    Rule("output_log.xǁLineLogǁread_", "strict=", STRICT),
    Rule(
        "output_log.xǁLineLogǁappend_",
        "self._size >= _MIRROR_BYTES",
        "a log of exactly 64 KiB is read from its files instead of from memory, and both hold "
        "the same lines (a read flushes first)",
    ),
    Rule(
        "output_log.xǁLineLogǁ_sync_",
        "contextlib.suppress(None)",
        "reached only when a read's flush fails, a path with a product bug (see the strict "
        "xfail test_a_read_that_cannot_flush_shows_what_is_on_disk); not equivalent: a test "
        "can pin it once the bug is fixed",
    ),
    Rule(
        "output_log.xǁLineLogǁ_committed_",
        "want = hi - lo + (1 if hi < self._count else 1)",
        "asking for one index entry past the last reads none (the file, or the mirror, ends "
        "there), and the last line's end is the log's size either way",
    ),
    Rule("output_log.xǁLineLogǁread_", "zip(numbers, texts, tags, )", STRICT),
    Rule("output_log.xǁLineLogǁtail_", "if (n > 0) or True", EMPTY_TAIL),
    Rule("output_log.xǁLineLogǁtail_", "if n >= 0", EMPTY_TAIL),
    Rule(
        "output_log.xǁOutputStreamǁ__init__",
        "self._tag = ",
        "the first write's tag differs from it only while nothing is pending, and committing "
        "nothing appends nothing",
    ),
    Rule(
        "output_log.x_clip_line_",
        "len(text) < max_chars",
        "a line of exactly max_chars, cut to max_chars, is itself with 0 cut",
    ),
    # sandbox policy
    Rule(
        "sandbox.policy.profiles.x_concrete_path_",
        'home / text[2:].lstrip("/")',
        'the text is "~" or begins "~/", so the one character more cut is the "/" lstrip() '
        "drops anyway",
    ),
    Rule(
        "sandbox.policy.profiles.x_default_processes_",
        "(cpus or 2)",
        "with the CPUs unknown, 64 × 2 is below 512 as 64 × 1 is, and max() gives 512 for both",
    ),
    Rule("sandbox.policy.profiles.x_resolved_", "strict=None", FALSE),
    Rule(
        "sandbox.policy.profiles.x_session_runtime_dirs_",
        '"XDG_RUNTIME_DIR", "XXXX"',
        'an unset XDG_RUNTIME_DIR reads as "XXXX", which does not begin with "/" any more than '
        '"" does',
    ),
    Rule("sandbox.policy.config.x_load_sandbox_config_", 'data.decode("UTF-8")', UTF_8),
    Rule("sandbox.policy.config.x_toml_loads_", "sys.version_info > (3, 11)", VERSION_3_11),
    Rule(
        "sandbox.policy.config.x_syntax_error_",
        "match.group(2)",
        "the line and the column are groups of one branch of TOML_WHERE's alternation: both "
        "match or neither does",
    ),
    Rule(
        "sandbox.failures.rule_failures.x_failure_of_",
        '(error_value or "XXXX")',
        'a cell without an error value is read as if it said "XXXX", which names no path and '
        "holds no sign of the network, memory or processes",
    ),
    Rule(
        "sandbox.failures.rule_failures.x_failure_of_",
        'error_name or "XXXX"',
        'an error name "XXXX", like "", is neither BlockingIOError nor a memory error',
    ),
    Rule(
        "shared.sizes.x_format_size_",
        'rstrip("XX0XX")',
        'the text is digits and one ".", so stripping an "X" too strips nothing more',
    ),
    # journal
    Rule(
        "records.journal.xǁJournalǁ",
        "cast(None, entry)",
        "typing.cast returns its value whatever type it names: it only tells the type checker",
    ),
    Rule("json_lines.xǁJsonLinesǁ__init__", "self._ends_whole = None", FALSE),
    Rule(
        "json_lines.xǁJsonLinesǁappend_",
        "os.pread(fd, 2, size - 1)",
        "a read at a file's last byte returns that byte alone, however many are asked for (the "
        "file does not grow meanwhile: this JsonLines is its one writer, and the append is its "
        "own)",
    ),
    Rule("json_lines.xǁJsonLinesǁappend_", "self._ends_whole = None", ENDS_WHOLE),
    Rule("json_lines.xǁJsonLinesǁappend_", "self._ends_whole = False", ENDS_WHOLE, exact=True),
    # sandbox mechanism (core)
    Rule(
        "sandbox.confinement.bubblewrap.x_prepare_kernel_dir_",
        "kernel_dir.mkdir(",
        "the chmod(0o700) that follows sets the dir's mode whatever mkdir made it (only a race "
        "between the two calls could tell)",
    ),
    Rule(
        "sandbox.confinement.bubblewrap.x_prepare_kernel_dir_",
        "empty.touch(",
        "the chmod(0o000) that follows sets the file's mode whatever touch made it, and touch's "
        "exist_ok is True by default",
    ),
    Rule("sandbox.confinement.macos.x_sbpl_profile_", '";; ', SBPL_COMMENT),
    Rule(
        "sandbox.confinement.limits.x_inside_",
        'root != "XX/XX"',
        'cutting a root of "/" off the path cuts the "/" that lstrip("/") drops anyway',
    ),
    Rule(
        "sandbox.confinement.limits.x_limits_host_",
        '"XDG_RUNTIME_DIR", "',
        "with XDG_RUNTIME_DIR unset, no systemd/private lies under that dir either (the "
        "default names a dir that is not there)",
    ),
    Rule(
        "sandbox.confinement.limits.x_parse_cgroup_",
        'parts[1].split(",") if ',
        '"".split(",") is [""], the else\'s list, and a cgroup path is never empty (it '
        'begins with "/")',
    ),
    Rule(
        "sandbox.confinement.limits.x_parse_mountinfo_",
        "len(fields) <",
        'a mountinfo line has six fields or more before " - " (id, parent, device, root, '
        "mount point, options), so refusing one of five refuses none the kernel writes",
    ),
    Rule(
        "sandbox.confinement.limits.x_parse_mountinfo_",
        'line.rpartition(" - ")',
        'mountinfo escapes the spaces of paths (\\040), so " - " is in a line once',
    ),
    Rule(
        "sandbox.confinement.limits.x_writable_",
        "os.access(d, os.W_OK & os.X_OK)",
        "not equivalent, untestable as root (as these runs are): root may write and search any "
        "dir, as it may see it; test_only_dirs_we_may_create_children_in_are_writable kills it "
        "run as a person (a dir of mode 0500)",
    ),
    Rule("sandbox.confinement.mechanism.x_trial_", "", PROCESS_ONLY + PROBE_TESTS),
    Rule("sandbox.confinement.mechanism.x_trial_", "-", PROCESS_ONLY + PROBE_TESTS),  # deletions
    Rule(
        "sandbox.confinement.bubblewrap_confiner.xǁBubblewrapConfinerǁsignal_init_",
        "os.killpg(",
        PROCESS_ONLY + SIGNALS,
    ),
    Rule(
        "sandbox.confinement.bubblewrap_confiner.xǁBubblewrapConfinerǁsignal_init_",
        "bubblewrap.kill(None)",
        PROCESS_ONLY + SIGNALS,
    ),
    Rule(
        "sandbox.confinement.launch.xǁSandboxLaunchǁsignal_",
        "contextlib.suppress(None)",
        PROCESS_ONLY + SIGNALS,
    ),
    Rule(
        "sandbox.confinement.bubblewrap_confiner.xǁBubblewrapConfinerǁsignal_init_",
        "if signum != signal.SIGKILL",
        PROCESS_ONLY + SIGNALS,
    ),
    Rule("sandbox.confinement.entry.x_read_info_", "time.monotonic() > deadline", UNTIMED),
    # last seen
    Rule("last_seen.x_read_last_seen_", 'read_text("UTF-8")', UTF_8),
    Rule(
        "last_seen.x_read_last_seen_",
        "read_text(None)",
        "the file holds only ASCII (a time and kernel ids, which are UUIDs), which the "
        "locale's encoding reads as UTF-8 does",
    ),
    Rule("last_seen.xǁHeartbeatǁ", "self._failing = None", FALSE),
    # launch markers
    Rule(
        "launch_markers.x_end_launch_",
        "if (identity.is_alive()) and False",
        signalled(BY_IDENTITY, "the live process would be left running"),
    ),
    Rule(
        "launch_markers.x_end_launch_",
        'float(data.get("since") or 1.0)',
        "a marker without `since` then matches processes started 0 s rather than -1 s after "
        "1970 began: both precede every process's start (the boot's time is later)",
    ),
    Rule(
        "launch_markers.x_end_launch_",
        "if sandbox is None:",
        signalled(NO_PID, "None.signal raises AttributeError")
        + f"; and {BY_SANDBOX} would find the sandbox's init running",
    ),
    Rule(
        "launch_markers.x_end_launch_",
        "sandbox.signal(None)",
        signalled(BY_SANDBOX, "os.killpg(init, None) raises TypeError"),
    ),
    Rule("launch_markers.x_end_launch_", "suppress(None, PermissionError)", UNSUPPRESSED_LOOKUP),
    Rule("launch_markers.x_end_launch_", "suppress(PermissionError)", UNSUPPRESSED_LOOKUP),
    Rule("launch_markers.x_end_launch_", "suppress(ProcessLookupError, None)", REFUSED),
    Rule("launch_markers.x_end_launch_", "suppress(ProcessLookupError, )", REFUSED),
    Rule("launch_markers.x_end_launch_", "os.killpg(None, ", WRONG_CALL),
    Rule("launch_markers.x_end_launch_", "os.killpg(signal.SIGKILL)", WRONG_CALL),
    Rule("launch_markers.x_end_launch_", 'os.killpg(data.get("pgid") or pid, None)', WRONG_CALL),
    Rule("launch_markers.x_end_launch_", 'os.killpg(data.get("pgid") or pid, )', WRONG_CALL),
    Rule(
        "launch_markers.x_end_launch_",
        'os.killpg(data.get("pgid") and pid, ',
        signalled(NO_PID, "with no pgid noted, killpg(None) raises TypeError")
        + f"; and {BY_GROUP} would find the group's leader running",
    ),
    Rule(
        "launch_markers.x_end_launch_",
        "or pid, signal.SIGKILL)",
        signalled(BY_GROUP, "the marker's process group is not signalled, so its leader runs on"),
    ),
    Rule("launch_markers.x_end_launch_", "os.kill(None, ", WRONG_CALL),
    Rule("launch_markers.x_end_launch_", "os.kill(pid, None)", WRONG_CALL),
    Rule("launch_markers.x_end_launch_", "os.kill(pid, )", WRONG_CALL),
    Rule("launch_markers.x_end_launch_", "os.kill(signal.SIGKILL)", WRONG_CALL),
    Rule(
        "launch_markers.x_end_launch_",
        "return bool(None)",
        signalled(NO_PID, "end_unowned would count 0 kernels ended, not 1"),
    ),
    Rule(
        "launch_markers.x_started_with_",
        "contextlib.suppress(None)",
        "the only OSError here is a process that exits between the listing of /proc and the read "
        "of its cmdline (FileNotFoundError, or ProcessLookupError): a race no test can time",
    ),
    Rule("launch_markers.xǁLaunchMarkersǁend_unowned_", "unlink(missing_ok=", LISTED),
    Rule("launch_markers.xǁLaunchMarkersǁend_unowned_", "ended = 1", COUNTED),
    Rule("launch_markers.xǁLaunchMarkersǁend_unowned_", "ended -= 1", COUNTED),
    Rule("launch_markers.xǁLaunchMarkersǁend_unowned_", "ended += 2", COUNTED),
    Rule("launch_markers.xǁLaunchMarkersǁend_unowned_", "log.warning(", COUNTED),
    Rule("launch_markers.xǁLaunchMarkersǁforget_", "unlink(missing_ok=", FORGOT),
    Rule(
        "shared.sizes.x_format_size_",
        'rstrip("XX.XX")',
        'the text is digits and one ".", so stripping an "X" too strips nothing more',
    ),
    # sandbox network
    Rule(
        "sandbox.network.network_rules.x__covers_",
        "if wide.name is None and narrow.name is None:",
        "a pattern is a name or an address range: past the range's branch `narrow` is a name, so "
        "only `wide.name is None` can hold, and then wide.names() and the equality below are "
        "False as the early return is",
    ),
    Rule("sandbox.network.network_rules.x__pattern_", 'text.rsplit(":", )', ONE_COLON),
    Rule("sandbox.network.network_rules.x__pattern_", 'text.split(":", 1)', ONE_COLON),
    Rule("sandbox.network.network_rules.x__pattern_", 'text.rsplit(":", 2)', ONE_COLON),
    Rule(
        "sandbox.network.network_rules.x_at_least_as_strict_",
        'if a.kind == "XXnoneXX" or',
        NONE_FIRST,
    ),
    Rule(
        "sandbox.network.network_rules.x_at_least_as_strict_", 'if a.kind == "NONE" or', NONE_FIRST
    ),
    Rule(
        "sandbox.network.network_rules.x_at_least_as_strict_",
        'b.kind == "XXnoneXX":',
        LIST_AGAINST_NONE,
    ),
    Rule(
        "sandbox.network.network_rules.x_at_least_as_strict_",
        'b.kind == "NONE":',
        LIST_AGAINST_NONE,
    ),
    Rule(
        "sandbox.network.public_addresses.x_all_public_",
        'carriers = nets("2002::/16", )',
        "NAT64's 64:ff9b::/96 lies outside 2000::/3, which the check before already refuses: its "
        "entry among the carriers decides nothing (dead code, left to the module's owner)",
    ),
    Rule(
        "sandbox.network.public_addresses.x_non_public_",
        "'XXaeiouXX'",
        'no label begins with an "X", so the article is the same',
    ),
    Rule(
        "sandbox.network.host_addresses.x_host_addresses_",
        "socket.SOCK_RAW, ) as sock:",
        "NETLINK_ROUTE is 0, the protocol socket.socket() takes when none is given: the same "
        "socket",
    ),
    Rule("sandbox.network.host_addresses.x_host_addresses_", "sock.recv(2 << 16)", NETLINK_READ),
    Rule("sandbox.network.host_addresses.x_host_addresses_", "sock.recv(1 << 17)", NETLINK_READ),
    Rule("sandbox.network.proxy_http.x_answer_", 'encode("ASCII"', CODEC),
    Rule("sandbox.network.proxy_http.x_forwarded_", 'decode("LATIN-1")', CODEC),
    Rule("sandbox.network.proxy_http.x_parse_request_", 'decode("ASCII")', CODEC),
    Rule(
        "sandbox.network.proxy_http.x_parse_request_",
        'host = port = ""',
        '"" is false as None is: `not host` refuses both',
    ),
    Rule("sandbox.network.proxy_http.xǁResponseHeadsǁ__init__", "self.done = None", FALSE),
    Rule("sandbox.network.proxy_http.xǁResponseHeadsǁ__init__", "self.sent_any = None", FALSE),
    Rule(
        "sandbox.network.proxy_http.xǁResponseHeadsǁfeed_",
        "parser.send(h11.Request(",
        PLACEHOLDER_REQUEST,
    ),
    Rule(
        "sandbox.network.handover.x_first_message_",
        "conn.recvmsg(65537,",
        "the first read takes 65536 bytes of the stream at most, or one more: what it leaves is "
        "read next, in order (proxy.Incoming), and a hand-over is one byte",
    ),
    Rule("sandbox.network.handover.x_first_message_", "if left < 0:", UNTIMED),
    Rule("sandbox.network.handover.x_first_message_", "raise TimeoutError(", UNREAD_TIMEOUT),
    Rule("sandbox.network.handover.x_first_message_", "ready(conn, writing=None)", FALSE),
    Rule(
        "sandbox.network.handover.x_first_message_",
        'fds = array("I")',
        "fds are not negative and below 2**31, so their bytes read as unsigned are the same "
        "numbers",
    ),
    Rule(
        "sandbox.network.handover.x_first_message_",
        "len(payload) + len(payload) % FD_SIZE",
        "the kernel puts whole fds only into an SCM_RIGHTS payload (cut short, it drops whole "
        "ones and says MSG_CTRUNC), so the remainder is 0",
    ),
    # sandbox protections
    Rule(
        "sandbox.confinement.placeholders.x_read_",
        "cast(None, kind)",
        "typing.cast returns its value whatever type it names: it only tells the type checker",
    ),
    Rule(
        "sandbox.confinement.placeholders.x_write_",
        'record_path.name + "XX.partialXX"',
        PARTIAL_NAME,
    ),
    Rule(
        "sandbox.confinement.placeholders.x_write_", 'record_path.name + ".PARTIAL"', PARTIAL_NAME
    ),
    Rule(
        "sandbox.policy.installation.x_editable_url_root_",
        'json.loads(text or "XXXX")',
        '"XXXX" is no JSON, as "" is not: both give None',
    ),
    Rule(
        "sandbox.policy.installation.x_venv_home_",
        '.get("home", "XXXX")',
        'a missing home reads "XXXX", which does not begin with "/" any more than "" does',
    ),
    Rule(
        "sandbox.confinement.packages.x_environment_roots_",
        '"include-system-site-packages", "XXXX")',
        'a missing key reads "xxxx" once lower-cased, which is not "true" any more than "" is',
    ),
    Rule(
        "sandbox.confinement.packages.x_environment_roots_",
        'values.get("version") or "XXXX")',
        '"XXXX" holds no version, as "" does not: VERSION matches neither',
    ),
    Rule(
        "sandbox.confinement.packages.x_pip_source_",
        "gateway_pip() is None:",
        "the gateway's own Python has its pip in its environment's site-packages (the lock "
        "installs it there), so reading that environment's files finds it as the shortcut does: "
        "OWN either way",
    ),
    Rule(
        "sandbox.confinement.packages.x_remove_entry_",
        "path.unlink(missing_ok=",
        "rmtree has just failed on this path with an error other than FileNotFoundError (a file "
        "or a symlink is there): it is missing only if removed between the two calls, a race no "
        "test can time",
    ),
    Rule(
        "sandbox.confinement.packages.xǁKernelPackagesǁprepare_",
        "os.O_EXCL & os.O_NOFOLLOW",
        "new_dir made the bin dir a moment before, empty, so no name in it exists or is a "
        "symlink unless a writer races between the two calls",
    ),
    Rule(
        "sandbox.confinement.packages.xǁKernelPackagesǁprepare_",
        "target_is_directory=None",
        WINDOWS_ONLY,
    ),
    Rule(
        "sandbox.confinement.packages.xǁKernelPackagesǁprepare_",
        "target_is_directory=False",
        WINDOWS_ONLY,
    ),
    Rule(
        "sandbox.confinement.packages.xǁKernelPackagesǁprepare_",
        '"pip", dir_fd=lent_fd)',
        WINDOWS_ONLY,
    ),
    Rule(
        "sandbox.policy.host_code.x_host_code_",
        "entry.is_dir(follow_symlinks=None)",
        "DirEntry.is_dir reads follow_symlinks as a truth value, and None is false as False is: "
        "a link is not followed either way",
    ),
    Rule(
        "sandbox.confinement.landlock_paths.x_on_the_way_",
        'found[way] = ""',
        "only the dict's keys are read (sorted(found)), never its values",
    ),
    # sandbox limits
    Rule(
        "sandbox.confinement.limits.x_counter_",
        'line.rpartition(" ")',
        "memory.events' and memory.oom_control's lines are `key value`, one space in each",
    ),
    Rule(
        "sandbox.confinement.limits.xǁKernelLimitsǁcreate_",
        "host if (host is not None) or True",
        PROCESS_ONLY + "without a host, limits are made in this machine's real cgroups "
        "(test_entry.py and test_escapes_bwrap.py create them so; without limits the host is "
        "never read)",
    ),
    Rule(
        "sandbox.confinement.limits.xǁKernelLimitsǁremove_", "time.monotonic() >= deadline", UNTIMED
    ),
    # sandbox mechanism (core), issue 42's confiners
    Rule(
        "sandbox.confinement.bubblewrap.x_command_",
        "sorted(outermost(inside), key=None)",
        PATH_ORDER,
    ),
    Rule("sandbox.confinement.bubblewrap.x_command_", "sorted(outermost(inside), )", PATH_ORDER),
    Rule(
        "sandbox.confinement.bubblewrap.x_guarded_",
        "found = [(git, True, None), *gitdir_parts(git)]",
        "found is still empty in this branch (nothing is added before it), so = gives the list "
        "+= does",
    ),
    Rule(
        "sandbox.confinement.bubblewrap_confiner.xǁBubblewrapConfinerǁfrom_json_",
        'data.get("shipped", None)',
        SHIPPED_DEFAULT,
    ),
    Rule(
        "sandbox.confinement.bubblewrap_confiner.xǁBubblewrapConfinerǁfrom_json_",
        'data.get("shipped", )',
        SHIPPED_DEFAULT,
    ),
    Rule("sandbox.confinement.landlock_confiner.x_join_", "time.monotonic() <= deadline", UNTIMED),
    Rule(
        "sandbox.confinement.landlock_confiner.x_unread_",
        'array.array("I", [0])',
        "FIONREAD's count is not negative, so its bytes read as unsigned are the same number",
    ),
    Rule(
        "sandbox.confinement.landlock_confiner.x_unread_",
        'array.array("i", [1])',
        "the ioctl writes the count over the array's first value, whatever it was",
    ),
    Rule(
        "sandbox.confinement.landlock_confiner.xǁLandlockConfinerǁruleset_",
        "allowed.get(None, 0) | rights",
        "no path the write walk grants has a read grant beyond its write rights: READ | WRITE "
        "holds READ, and the FIFO and the devices (read and write of files only) lie where the "
        "read walk grants nothing (the kernel's own dir and /dev are hidden from it)",
    ),
    # sandbox policy: issue 42's rule failures, issue 44's cell failures
    Rule(
        "sandbox.failures.rule_failures.x_command_errors_", "zip(lines, kinds, strict=None)", STRICT
    ),
    Rule("sandbox.failures.rule_failures.x_command_errors_", "zip(lines, kinds, )", STRICT),
    Rule(
        "sandbox.failures.rule_failures.x_command_errors_",
        "zip(lines, kinds, strict=False)",
        STRICT,
    ),
    Rule(
        "sandbox.failures.rule_failures.x_path_failure_",
        "own_tmp: bool = False",
        "its one caller, failure_of(), always passes own_tmp",
    ),
    Rule(
        "sandbox.failures.cell_failures.x_cell_began_",
        "ended or 1.0",
        "a record's start is a time.time() of today, so max() takes it over 0.0 and 1.0 alike",
    ),
    Rule(
        "sandbox.failures.cell_failures.x_printed_lines_",
        "cut = None",
        "None is false, as False is, where the flag is read (`if cut:`)",
    ),
    # launch markers: a sandbox killed before bwrap named its init (issue 42)
    Rule(
        "launch_markers.x_end_launch_",
        "if sandbox is not None and sandbox.init is not None:",
        signalled(BY_UNNOTED_INIT, "the sandbox's init, found by its command line, is left"),
    ),
    Rule(
        "launch_markers.x_end_launch_",
        "pids = [pid for pid in started_with(named, since) if pid not in pids]",
        signalled(BY_UNNOTED_INIT, "bwrap, the pid noted, is left out of the pids ended"),
    ),
    Rule(
        "launch_markers.x_end_launch_",
        "started_with(named, None)",
        signalled(BY_UNNOTED_INIT, "started_with() raises TypeError on `since - 1.0`"),
    ),
    Rule(
        "launch_markers.x_end_launch_",
        "started_with(named, since) if pid in pids]",
        signalled(BY_UNNOTED_INIT, "no process not yet listed is added: the init is left"),
    ),
    # kernel kinds
    Rule(
        "message_sequence.xǁMessageSequenceǁsee__",
        "if last is not None and last[0] == sender else 1",
        "a different sender's first message is one number missing at most, which is never "
        "taken for a loss (a run of OTHER_CLIENTS numbers or fewer is other clients'): 1 reads "
        "as 0",
    ),
    Rule("kernel_transport.x_prepare__", 'km.transport = "TCP"', CASELESS),
    Rule("kernel_transport.x_prepare__", 'km.transport = "IPC"', CASELESS),
    Rule("kernel_transport.x_write_relayed_connection__", "json.dumps(info, indent=", JSON_LAYOUT),
    Rule("kernel_transport.x_write_relayed_connection__", "json.dumps(info, ))", JSON_LAYOUT),
    Rule("kernel_transport.x_write_relayed_connection__", 'encoding="UTF-8"', UTF8_NAME),
    Rule("kernel_transport.x_write_relayed_connection__", "encoding=None", UTF8_LOCALE),
    Rule("launch_markers.x_end_launch_", "named = str(", NAMED),
    Rule("message_sequence.xǁMessageSequenceǁ__init__", "self.held_back = None", FALSE),
    Rule("message_sequence.xǁMessageSequenceǁ__init__", "self._notice_next = None", FALSE),
    Rule(
        "launch_markers.xǁLaunchMarkersǁend_unowned_",
        "if end_launch(data, None):",
        signalled(
            BY_OLD_MARKER,
            "a marker of an earlier gateway names no `named`: its connection file is what the "
            "command line names, and None finds no process",
        ),
    ),
    Rule(
        "launch_markers.xǁLaunchMarkersǁlaunched_",
        'data["named"] = written.get("named", ',
        "a marker whose first write named nothing (an earlier gateway's) is read by end_launch "
        "with its connection file in place of a missing or null `named`, as this default says",
    ),
    Rule(
        "launch.xǁSandboxLaunchǁ__init__",
        "self.launched: subprocess.Popen[bytes] | None = ",
        PROCESS_ONLY + "test_launch.py's test_a_sandbox_reaps_the_process_it_was_launched_with_"
        "as_it_ends (a process test: it starts one) finds anything but None there",
    ),
    Rule(
        "launch.xǁSandboxLaunchǁ__init__",
        "self.relay: list[tuple[Path, int]] = None",
        "a sandbox's relay is read only where a provisioner set it, for a relayed kernel, and "
        "read as a truth value there (`if relay`): None and [] both mean no relay",
    ),
    Rule(
        "bubblewrap_confiner.xǁBubblewrapConfinerǁsignal_init", "bubblewrap.children(None)", GROUPS
    ),
    Rule("bubblewrap_confiner.xǁBubblewrapConfinerǁsignal_init", "suppress(None)", GROUPS),
    Rule("bubblewrap_confiner.xǁBubblewrapConfinerǁsignal_init", "group = None", GROUPS),
    Rule("bubblewrap_confiner.xǁBubblewrapConfinerǁsignal_init", "os.getpgid(None)", GROUPS),
    Rule("bubblewrap_confiner.xǁBubblewrapConfinerǁsignal_init", "if group == init_pid", GROUPS),
    Rule(
        "macos.x_sbpl_regex_",
        "sbpl_string(str(None))",
        "the whole regex, the dir's name in it, goes through sbpl_string on the next line, which "
        "refuses a control character the same way",
    ),
    Rule(
        "bubblewrap.x_command_",
        "sorted(kept, key=None)",
        "outermost() keeps the guards' paths, and Python 3.11 orders Paths by their parts, as "
        "the key does (3.12 orders them by their text)",
    ),
    Rule(
        "bubblewrap.x_command_",
        "sorted(kept, )",
        "outermost() keeps the guards' paths, and Python 3.11 orders Paths by their parts, as "
        "the key does (3.12 orders them by their text)",
    ),
    Rule("agent_access.x_opened_line_", 'kernel.get("open_to_agents", None)', FALSE),
    Rule("agent_access.x_opened_line_", 'kernel.get("open_to_agents", )', FALSE),
    Rule(
        "home_view.x_xdg_dirs_",
        'Path(env.get(variable, "XXXX"))',
        "an unset variable's stand-in is a relative path either way, and a relative value "
        "names no dir (only an absolute one does)",
    ),
    Rule(
        "profiles.xǁSandboxProfileǁrules_",
        "concrete_path(p, cwd=None, home=home) for p in self.readable",
        "sandbox.toml takes only paths in the home dir (~/x) as readable, so a readable path "
        "never holds {cwd}, and the kernel's working dir is never read for one",
    ),
    Rule(
        "home_view.x_home_view_",
        "for path in readable if lies_inside(path, home) or path != home",
        "a readable path outside the home dir, or the home dir itself, is neither an entry of a "
        "listed dir nor on the way to one, so keeping it among the readable ones shows nothing",
    ),
    Rule(
        "home_view.x_home_view_",
        "-continue",
        "only a dir scandir listed a moment before and can no longer list (a race, or a user "
        "without rights on it, which root, the tests' user, never is) takes this branch; break "
        "skips it too (not equivalent there: the dirs after it would go unlisted, and hidden)",
    ),
    Rule(
        "home_view.x_home_view_",
        "entry.is_dir(follow_symlinks=",
        "a symlink among the entries is taken by the branch before (made again as a link), so "
        "is_dir sees only entries that are no links: following links changes nothing",
    ),
    Rule(
        "state_dirs.x_known_state_dirs_",
        'read_text(encoding="UTF-8")',
        'Python names one codec "utf-8" and "UTF-8"',
    ),
    Rule(
        "state_dirs.x_known_state_dirs_",
        "read_text(encoding=None)",
        "the locale's encoding, which is UTF-8 wherever the tests run (not equivalent under a "
        "non-UTF-8 locale, which a fast test cannot set)",
    ),
)


def reason_for(mutant: str, diff: str) -> str | None:
    """Return why `mutant` (with mutmut's `diff` of it) is equivalent, if a rule says."""
    lines = diff.splitlines()
    written = [x[1:].strip() for x in lines if x.startswith("+") and not x.startswith("+++")]
    removed = [x[1:].strip() for x in lines if x.startswith("-") and not x.startswith("---")]
    return next((rule.reason for rule in RULES if rule.matches(mutant, written, removed)), None)
