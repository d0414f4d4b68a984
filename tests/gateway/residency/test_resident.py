"""resident.json across loomgate versions: every older format is read, a newer one refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loomgate.gateway.residency import resident
from loomgate.gateway.residency.resident import FORMAT, MIGRATIONS, RESIDENT_FILE, ResidentError

DATA = Path(__file__).parent.parent / "data"
# Written by loomgate 0.1.0 (format 1); kept as it was, so that a later format still reads it.
FORMAT_1 = DATA / "resident-format-1.json"
FORMAT_1_KERNEL = "8372108e-8a00-4fa3-8e42-0f2e72cf4689"


def test_every_older_format_has_a_migration() -> None:
    assert set(MIGRATIONS) == set(range(1, FORMAT))


def test_a_format_1_state_is_read(tmp_path: Path) -> None:
    shutil.copy(FORMAT_1, tmp_path / RESIDENT_FILE)
    state = resident.load(tmp_path, FORMAT_1_KERNEL)
    assert state["kernel_id"] == FORMAT_1_KERNEL
    assert state["provisioner"]["identity"]["pid"] == 29521
    assert state["provisioner"]["connection_info"]["key"] == "3e7813ef-014eb0d6218729416ab02fbf"
    assert state["launch"] == {"cwd": "/tmp", "env": {}}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"format": FORMAT + 1}, f"has format {FORMAT + 1}; this gateway reads formats 1 to"),
        ({"format": 0}, "has format 0; this gateway reads formats 1 to"),
        ({"format": "1"}, "has format '1'; this gateway reads formats 1 to"),
        ({"kernel_id": "another"}, "describes kernel 'another'"),
    ],
    ids=["newer", "zero", "text", "another-kernel"],
)
def test_a_state_it_cannot_use_is_refused_and_kept(
    tmp_path: Path, change: dict[str, object], reason: str
) -> None:
    path = tmp_path / RESIDENT_FILE
    path.write_text(json.dumps({**json.loads(FORMAT_1.read_text()), **change}))
    before = path.read_bytes()
    with pytest.raises(ResidentError) as refused:
        resident.load(tmp_path, FORMAT_1_KERNEL)
    assert reason in str(refused.value)
    assert path.read_bytes() == before
