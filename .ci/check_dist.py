"""Check the built wheel and sdist (run by .ci/run after `python -m build`).

Usage: python .ci/check_dist.py DIST_DIR. Exits 1, naming what is missing.
"""

from __future__ import annotations

import sys
import tarfile
import zipfile
from pathlib import Path

WHEEL_MUST_HAVE = (
    "courtier/store/sqlite/migrations/0001_initial.sql",
    "courtier/store/postgres/migrations/0001_initial.sql",
    "courtier/store/postgres/citus/intake.sql",
    "courtier/api/dashboard.html",
    "courtier/ops/measured_figures.json",
    "courtier/events/schema/event-v1.json",
    "courtier/py.typed",
)


def main(dist: Path) -> int:
    wheels = sorted(dist.glob("courtier-*.whl"))
    sdists = sorted(dist.glob("courtier-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        print(f"check_dist: expected one wheel and one sdist in {dist}, found "
              f"{[p.name for p in dist.iterdir()]}", file=sys.stderr)
        return 1
    names = set(zipfile.ZipFile(wheels[0]).namelist())
    migrations = [n for n in names if n.startswith("courtier/store/sqlite/migrations/")]
    missing = [n for n in WHEEL_MUST_HAVE if n not in names]
    with tarfile.open(sdists[0]) as sdist:
        sdist_names = sdist.getnames()
    if not any(n.endswith("/pyproject.toml") for n in sdist_names):
        missing.append("pyproject.toml in the sdist")
    if missing:
        print(f"check_dist: {wheels[0].name} lacks {missing}", file=sys.stderr)
        return 1
    print(f"check_dist: {wheels[0].name} ({len(names)} files, {len(migrations)} migrations) "
          f"and {sdists[0].name} are complete")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
