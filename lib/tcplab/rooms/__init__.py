"""The code of one case alone, kept in the case's room: ``from tcplab.rooms import nagle``.

A room declares its modules in its ``case.toml`` (``modules = ["nagle"]``); this package's
search path is the folders of the rooms that declare some, so each module imports under one
name everywhere it runs: in the notebook, in the tests, and inside a UML lab kernel, where a
function the notebook sends (``lab.keep(..., lambda: slowstart.settled_tcp_metrics(...))``)
arrives by that name. Two rooms may not declare the same module, and a room may not hold a
module it does not declare (it would import by accident): both are refused here, at import.
"""

from __future__ import annotations

from ..course import Course, CourseError, course


def module_folders(the_course: Course) -> list[str]:
    """The folders of the rooms that declare modules: this package's search path."""
    owners: dict[str, str] = {}
    folders = []
    for room in the_course.rooms:
        for name in room.modules:
            if name in owners:
                raise CourseError(f"module {name!r} is declared by two rooms: {owners[name]} and {room.case_id}")
            owners[name] = room.case_id
        undeclared = sorted(p.stem for p in room.folder.glob("*.py") if p.stem not in room.modules)
        if undeclared:
            raise CourseError(f"{room.folder}: holds {', '.join(undeclared)}.py, which its case.toml does "
                              f"not declare under modules")
        if room.modules:
            folders.append(str(room.folder))
    return folders


__path__ = module_folders(course())
