"""Build hook: ships the orchestration folders as ``riskgate.flows`` and ``riskgate.tasks``.

The checkout keeps the project's layout (``flows/``, ``tasks/`` beside ``riskcore/``), while an
installed wheel puts no generic top-level names (``flows``, ``tasks``) into users' environments.
A development install gets a ``riskgate`` package whose path is the checkout, so that
``riskgate.flows`` is the code being edited.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

DOC = '"""riskgate: the release gate (Prefect flows and tasks over riskcore)."""\n'


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        folder = tempfile.mkdtemp(prefix="riskgate-build-")
        init = os.path.join(folder, "__init__.py")
        if version == "editable":
            with open(init, "w", encoding="utf-8") as fh:
                fh.write(DOC + f"__path__ = [{os.path.abspath(self.root)!r}]\n")
            build_data["force_include_editable"][init] = "riskgate/__init__.py"
            return
        with open(init, "w", encoding="utf-8") as fh:
            fh.write(DOC)
        build_data["force_include"][init] = "riskgate/__init__.py"
        build_data["force_include"][os.path.join(self.root, "flows")] = "riskgate/flows"
        build_data["force_include"][os.path.join(self.root, "tasks")] = "riskgate/tasks"
