"""Every loomgate state dir on this machine, so that each is hidden from every confined kernel:
each gateway notes its own in a list kept where no kernel sees it (the default state dir, in the
home dir)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from loomgate.shared.paths import locked, write_json_atomic

__all__ = ["known_state_dirs", "note_state_dir", "state_dirs_file"]

STATE_DIRS_FILE = "state-dirs.json"  # {"state_dirs": [path, …]}


def state_dirs_file() -> Path:
    """Return the list's file: in $XDG_STATE_HOME/loomgate, else ~/.local/state/loomgate (never
    LOOMGATE_STATE_DIR, which one gateway alone may name)."""
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state"
    return base / "loomgate" / STATE_DIRS_FILE


def note_state_dir(state_dir: Path, listed: Path | None = None) -> None:
    """Add `state_dir` to the list, and leave out the dirs gone since (the list rewritten
    whole, mode 0600, under a lock: gateways starting together each keep their own)."""
    listed = listed or state_dirs_file()
    listed.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with locked(listed.with_name(listed.name + ".lock")):
        kept = [*known_state_dirs(listed), state_dir.resolve()]
        write_json_atomic(listed, {"state_dirs": [str(path) for path in dict.fromkeys(kept)]})


def known_state_dirs(listed: Path | None = None) -> list[Path]:
    """Return the state dirs the list holds that exist (none when there is no list)."""
    try:
        data = json.loads((listed or state_dirs_file()).read_text(encoding="utf-8"))
        written = data["state_dirs"]
    except (OSError, ValueError, KeyError, TypeError):
        return []  # none yet, or cut short: the next gateway writes it anew
    if not isinstance(written, list):
        return []
    paths = [Path(p) for p in written if isinstance(p, str) and p.startswith("/")]
    return [path for path in dict.fromkeys(paths) if path.is_dir()]
