import argparse
import json
import os

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
    "mcp",
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


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--knowlege=false", "--no-deltaa"], ["--knowlege", "--knowledge", "--no-deltaa"]),
        (["--frobnicate-level", "3"], ["--frobnicate-level"]),
        (["--spacy-procesess", "1"], ["--spacy_processes"]),
    ],
)
def test_build_stops_before_any_work_on_an_unknown_flag(flags, named, tmp_path, capsys):
    root = tmp_path / "root"
    with pytest.raises(SystemExit) as exit_info:
        main(["build", "--input", str(tmp_path), "--root", str(root), *flags])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "usage: evidex build" in err and "unknown option" in err
    for text in named:
        assert text in err
    assert not root.exists()  # nothing was staged, no model was loaded


def test_unknown_build_flags_are_refused_by_every_entry_point(tmp_path, capsys):
    from pipelines.build_index import UnknownOptionError, check_options, run
    from pipelines.build_index import main as build_main

    check_options(["--runner", "DirectRunner", "--direct_num_workers", "2", "--knowledge=false"])
    with pytest.raises(UnknownOptionError, match=r"--knowlege \(did you mean --knowledge\?\)"):
        run(["--input", str(tmp_path), "--knowlege=false"])
    assert build_main(["--input", str(tmp_path), "--no-deltaa"]) == 2
    for command in (["eval", str(tmp_path)], ["stream", "--input", str(tmp_path)]):
        with pytest.raises(SystemExit) as exit_info:
            main([*command, "--knowlege=false"])
        assert exit_info.value.code == 2
        assert "did you mean --knowledge?" in capsys.readouterr().err


def test_build_help_lists_every_build_option(capsys):
    from pipelines.build_index import EvidexBuildOptions

    with pytest.raises(SystemExit):
        main(["build", "--help"])
    out = capsys.readouterr().out
    table = argparse.ArgumentParser(add_help=False)
    EvidexBuildOptions._add_argparse_args(table)
    for action in table._actions:
        flag = action.option_strings[0]
        assert flag in out or flag.replace("_", "-") in out, flag
    assert "--knowledge" in out and "--keep-failed" in out


def test_build_passes_its_pipeline_options_on():
    from evidex.cli import _pipeline_flags

    args = build_parser().parse_args(
        ["build", "--knowledge=false", "--semantic_chunking", "--lexical_context", "0"]
    )
    assert sorted(_pipeline_flags(args)) == [
        "--knowledge=false",
        "--lexical_context=0",
        "--semantic_chunking",
    ]
    assert _pipeline_flags(build_parser().parse_args(["build"])) == []


def test_eval_help_names_its_argument_as_the_text_does(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    out = capsys.readouterr().out
    assert "usage: evidex eval" in out and " DIR" in out.split("\n\n")[0]
    assert "data" not in out.split("\n\n")[0].split()


def test_build_summary_says_why_fewer_texts_than_chunks_were_embedded():
    from pipelines.build_index import embedding_summary

    line = embedding_summary(4697, {"texts_embedded": 4150, "chunks_reused": 0})
    assert line.startswith("4697 chunks: 4150 texts embedded")
    assert "547 chunks repeat a text embedded once" in line
    line = embedding_summary(10, {"texts_embedded": 2, "chunks_reused": 8})
    assert line == "10 chunks: 2 texts embedded, 8 chunks reused from the active bundle"


def test_first_activation_names_no_previous_bundle(fresh_root, capsys):
    root = str(fresh_root)
    assert main(["validate", "--root", root]) == 0
    capsys.readouterr()
    assert main(["activate", "--root", root]) == 0
    out = capsys.readouterr().out
    assert out.strip() == "active bundle: b1 (first activation)"


@pytest.mark.slow
def test_all_bad_input_fails_in_one_line_and_cleans_its_staging(tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.bin").write_bytes(bytes(range(256)) * 8)
    (bad / "b.dat").write_bytes(b"\x00\x01" * 100)
    (bad / "c.pdf").write_bytes(b"%PDF-1.4 this is no PDF")
    root = tmp_path / "root"
    assert main(["build", "--input", str(bad), "--root", str(root)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(
        "evidex build: error: 0 documents ingested; 3 dead letters (unsupported 2, broken_pdf 1)"
    )
    assert "--keep-failed" in last
    assert os.listdir(root / "staging") == []  # no folder, no heartbeat left behind

    assert main(["build", "--input", str(bad), "--root", str(root), "--keep-failed"]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    (kept,) = os.listdir(root / "staging")
    assert last.endswith(f"in {root / 'staging' / kept / 'failures'}")
    assert os.listdir(root / "staging" / kept) == ["failures"]


@pytest.mark.slow
def test_a_one_chunk_corpus_builds_and_validates(tmp_path, capsys):
    corpus = tmp_path / "one"
    corpus.mkdir()
    (corpus / "a.txt").write_text("ok\n")
    root = str(tmp_path / "root")
    assert main(["build", "--input", str(corpus), "--root", root, "--json"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert built["row_counts"]["chunks"] == 1
    assert main(["validate", "--root", root]) == 0


def test_explain_shows_an_absent_anchor_and_its_reason(validated_root, capsys):
    query = "What does tea.zorbulate() do to green tea?"
    assert main(["query", query, "--root", str(validated_root), "--k", "2", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "admission: UNKNOWN (anchor_absent: 'tea.zorbulate()' occurs in no document" in out
    assert "anchors: tea.zorbulate()" in out


def test_serve_refuses_a_worker_count_below_one(validated_root, capsys):
    assert main(["serve", "--root", str(validated_root), "--workers", "-1"]) == 1
    assert "--workers must be at least 1" in capsys.readouterr().err


def test_one_shot_query_routes_with_spacy_without_pytorch(validated_root, query_encoder):
    # `evidex query` runs the bundle's spaCy NER in a forked helper while it opens the
    # bundle; its answer must be the in-process one, and PyTorch must stay out.
    import subprocess
    import sys

    from query import answer, load_bundle

    question = "what did the danube do in romania?"
    expected = answer(load_bundle(str(validated_root), model=query_encoder), question, k=3)
    code = (
        "import sys\n"
        "from evidex.cli import main\n"
        f"rc = main(['query', '--root', {str(validated_root)!r}, {question!r}, '--k', '3', "
        "'--json'])\n"
        "heavy = [m for m in ('torch', 'transformers', 'sentence_transformers', 'spacy', "
        "'pandas') if m in sys.modules]\n"
        "print('HEAVY', heavy, rc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    body, _, tail = out.stdout.rpartition("HEAVY")
    # spaCy ran in the helper, PyTorch nowhere, pandas not even for pyarrow's probe
    assert tail.strip() == "[] 0", tail
    result = json.loads(body)
    answers = result if isinstance(result, list) else [result]
    assert answers[0]["route"]["reasons"] == list(expected.route.reasons)
    assert answers[0]["status"] == expected.status
    assert [e["chunk_id"] for e in answers[0]["evidence"]] == [
        e.chunk_id for e in expected.evidence
    ]


def test_one_shot_query_forks_its_ner_helper_before_the_heavy_imports(validated_root):
    # The helper imports spaCy while this process parses its arguments and opens the
    # bundle; forked after the parser's imports (pyarrow), it would start later.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import query.ner as ner\n"
        "seen = []\n"
        "fork = ner.EarlyHelper.fork.__func__\n"
        "def watched(cls):\n"
        "    heavy = ('pyarrow', 'spacy', 'onnxruntime', 'scipy')\n"
        "    seen.append([m for m in heavy if m in sys.modules])\n"
        "    return fork(cls)\n"
        "ner.EarlyHelper.fork = classmethod(watched)\n"
        "from evidex.cli import main\n"
        f"rc = main(['query', '--root', {str(validated_root)!r}, 'green tea', '--k', '1', "
        "'--json'])\n"
        "after = [m for m in ('spacy', 'bm25s', 'scipy') if m in sys.modules]\n"
        "print('FORKED', seen, rc, after)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    # spaCy ran in the helper; a lookup that walks no graph reads BM25 without bm25s,
    # so neither it nor scipy is imported (query/bm25_files.py)
    assert out.stdout.rpartition("FORKED")[2].strip() == "[[]] 0 []"
