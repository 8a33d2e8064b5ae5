"""cfn-lint on the synthesized templates: no error and no warning."""

from __future__ import annotations

import pytest
from cfnlint.api import ManualArgs, lint_file

from s3ingest_cdk.synth import Synth

from .conftest import VARIANTS

REGIONS = ["us-east-1", "eu-west-1"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_cfn_lint_clean(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    matches = lint_file(synth.template_path, config=ManualArgs(regions=REGIONS))
    problems = [
        f"{match.rule.id} {match.path_string if hasattr(match, 'path_string') else ''}: "
        f"{match.message}"
        for match in matches
        if match.rule.id[0] in "EW"
    ]
    assert not problems, "cfn-lint:\n" + "\n".join(problems)
