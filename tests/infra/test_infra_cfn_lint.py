"""cfn-lint on the synthesized templates: no error and no warning."""

from __future__ import annotations

from pathlib import Path

import pytest
from cfnlint.api import ManualArgs, lint_file

from s3ingest_cdk.synth import Synth

from .conftest import VARIANTS

REGIONS = ["us-east-1", "eu-west-1"]


def lint_problems(template_path: Path) -> list[str]:
    """cfn-lint's errors and warnings on the template (in :data:`REGIONS`)."""
    matches = lint_file(template_path, config=ManualArgs(regions=REGIONS))
    return [
        f"{match.rule.id} {match.path_string if hasattr(match, 'path_string') else ''}: "
        f"{match.message}"
        for match in matches
        if match.rule.id[0] in "EW"
    ]


@pytest.mark.parametrize("variant", VARIANTS)
def test_cfn_lint_clean(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    problems = lint_problems(synth.template_path)
    assert not problems, "cfn-lint:\n" + "\n".join(problems)
