import json

import pytest

from evidex.cli import build_parser, main

SUBCOMMANDS = (
    "build",
    "validate",
    "activate",
    "rollback",
    "status",
    "query",
    "gc",
    "regression",
    "serve",
    "eval",
)


def test_top_level_help_names_every_subcommand(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert name in out


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_subcommand_explains_itself(name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([name, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert f"usage: evidex {name}" in out
    assert "--root" in out
    description = build_parser()._subparsers._group_actions[0].choices[name].description
    assert description and len(description) > 40


def test_validate_activate_status_query_and_rollback(fresh_root, capsys):
    root = str(fresh_root)
    assert main(["query", "tea", "--root", root]) == 1
    assert "no active bundle" in capsys.readouterr().err
    assert main(["activate", "--root", root]) == 1
    assert "has not been validated" in capsys.readouterr().err
    assert main(["validate", "--root", root]) == 0
    assert "PASSED" in capsys.readouterr().out
    assert main(["activate", "b1", "--root", root, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bundle_id"] == "b1"
    assert main(["status", "--root", root, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["active"] == "b1" and status["bundles"][0]["validation"] == "passed"
    counts = status["bundles"][0]["row_counts"]
    assert counts["entities"] > 0 and counts["relations"] > 0 and "communities" in counts
    assert main(["status", "--root", root]) == 0
    assert f"{counts['entities']} entities" in capsys.readouterr().out
    assert main(["query", "How is green tea made?", "--root", root, "--k", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["evidence"][0]["doc_id"] == "tea.md"
    assert main(["query", "How is green tea made?", "--root", root, "--k", "1"]) == 0
    human = capsys.readouterr().out
    assert "tea.md" in human and "[" in human and "score" in human
    assert main(["rollback", "--root", root]) == 1
    assert "nothing to roll back to" in capsys.readouterr().err


def test_unknown_flags_are_rejected_outside_build(capsys):
    with pytest.raises(SystemExit):
        main(["status", "--bogus"])
    assert "unrecognized arguments" in capsys.readouterr().err


@pytest.mark.slow
def test_end_to_end_on_the_embedded_corpus(tmp_path, capsys):
    root = str(tmp_path / "home")
    assert main(["build", "--root", root, "--limit", "8", "--json"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert built["row_counts"]["documents"] == 8
    assert main(["validate", "--root", root]) == 0
    assert main(["activate", "--root", root]) == 0
    capsys.readouterr()
    assert main(["query", "What does the assert statement do?", "--root", root, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["evidence"][0]["doc_id"] == "python/topics/assert"
