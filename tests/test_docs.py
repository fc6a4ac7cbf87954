"""Generated documentation must match its single definitions."""

from kernel_lsp.docs import GENERATED, stale


def test_generated_docs_are_current():
    assert stale() == [], "run `python -m kernel_lsp.docs` and commit the result"


def test_every_rule_and_setting_is_documented():
    rules = GENERATED["rules.md"]()
    from analyzers.rules import RULES
    from kernel_lsp.settings import SETTINGS

    for code in RULES:
        assert f"### {code}" in rules
    config = GENERATED["configuration.md"]()
    for s in SETTINGS:
        assert f"`{s.key}`" in config
