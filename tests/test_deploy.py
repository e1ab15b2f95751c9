"""The deployment recipes in deploy/ parse, agree with each other and with the pipeline.

The pipeline's options are read from ``EvidexBuildOptions._add_argparse_args`` with a
fresh parser at test time, so an option added to the pipeline but missing from the
Flex Template metadata fails here. The Airflow DAG is parsed with ``ast`` only:
Airflow is not an evidex dependency.
"""

import argparse
import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from importlib.metadata import version
from pathlib import Path
from types import ModuleType
from typing import Any

import apache_beam
import pytest
import yaml
from apache_beam.options.pipeline_options import (
    FlinkRunnerOptions,
    PipelineOptions,
    PortableOptions,
)

from pipelines.build_index import EvidexBuildOptions
from store.activation import read_active
from store.bundles import VALIDATION_REPORT, bundle_path, list_bundles
from store.regression import RegressionCase, add_case

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
IMAGE_WORKDIR = "/opt/evidex"  # where deploy/Dockerfile puts the source tree
REFRESH = DEPLOY / "scheduled" / "refresh.sh"
PACKAGES = (
    "evidex",
    "store",
    "algorithms",
    "schemas",
    "transforms",
    "pipelines",
    "validation",
    "query",
)
"""The top-level packages evidex ships (pyproject.toml's package list)."""


def pipeline_options() -> dict[str, argparse.Action]:
    """The evidex build options, by name, from a fresh parser."""
    parser = argparse.ArgumentParser(add_help=False)
    EvidexBuildOptions._add_argparse_args(parser)
    return {action.dest: action for action in parser._actions}


def load_metadata() -> dict[str, Any]:
    return json.loads((DEPLOY / "dataflow" / "metadata.json").read_text(encoding="utf-8"))


def declared_options() -> list[dict[str, Any]]:
    """Template parameters that are pipeline options (the rest fail the listing test)."""
    options = pipeline_options()
    return [p for p in load_metadata()["parameters"] if p["name"] in options]


def load_flex_main() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "evidex_flex_main", DEPLOY / "dataflow" / "flex_main.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def yaml_documents() -> dict[str, list[dict[str, Any]]]:
    found = {}
    for path in sorted(DEPLOY.rglob("*.yaml")) + sorted(DEPLOY.rglob("*.yml")):
        with open(path, encoding="utf-8") as handle:
            found[str(path.relative_to(REPO))] = [d for d in yaml.safe_load_all(handle) if d]
    return found


def manifest(kind: str) -> dict[str, Any]:
    matches = [d for docs in yaml_documents().values() for d in docs if d["kind"] == kind]
    assert len(matches) == 1, f"expected one {kind}, found {len(matches)}"
    return matches[0]


def pod_spec(resource: dict[str, Any]) -> dict[str, Any]:
    spec = resource["spec"]
    if resource["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


def container_env(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container.get("env", [])}


def image_path(path: str) -> Path:
    """A path inside the evidex image -> the repository file it was copied from."""
    assert path.startswith(IMAGE_WORKDIR + "/"), path
    return REPO / path[len(IMAGE_WORKDIR) + 1 :]


# --- Dataflow Flex Template ---------------------------------------------------------------


def test_metadata_lists_exactly_the_pipeline_options():
    options = pipeline_options()
    parameters = load_metadata()["parameters"]
    names = [p["name"] for p in parameters]
    assert len(names) == len(set(names)), "duplicate parameter"
    assert set(names) == set(options), (
        f"missing from metadata.json: {sorted(set(options) - set(names))}; "
        f"not pipeline options: {sorted(set(names) - set(options))}"
    )
    for parameter in parameters:
        action = options[parameter["name"]]
        assert f"--{parameter['name']}" in action.option_strings
        assert parameter["label"].strip() and parameter["helpText"].strip()
        assert parameter["isOptional"] is (not action.required)


def _sample(action: argparse.Action, parameter: dict[str, Any]) -> tuple[str, Any]:
    """A launcher value for ``action`` and what the pipeline should read from it."""
    if action.nargs == 0:
        return "true", True
    if action.type is int:
        return "3", 3
    if action.type is float:
        return "0.25", 0.25
    if any(r.startswith("^(auto|") for r in parameter.get("regexes", [])):
        return "auto", "auto"
    if any("true|false" in r for r in parameter.get("regexes", [])):
        return "false", action.type("false") if action.type else "false"
    if action.choices:  # the last choice: not the default, where the default comes first
        choice = list(action.choices)[-1]
        return choice, choice
    return "sample-value", action.type("sample-value") if action.type else "sample-value"


def test_every_template_parameter_reaches_the_pipeline():
    flex_main = load_flex_main()
    options = pipeline_options()
    for parameter in declared_options():
        name = parameter["name"]
        value, expected = _sample(options[name], parameter)
        for regex in parameter.get("regexes", []):
            assert re.fullmatch(regex, value), (name, regex, value)
        argv = flex_main.template_argv([f"--{name}={value}"])
        assert "--runner=DataflowRunner" in argv
        parsed = PipelineOptions(argv).view_as(EvidexBuildOptions)
        assert getattr(parsed, name) == expected, name


def test_template_defaults_match_the_declared_regexes():
    options = pipeline_options()
    for parameter in declared_options():
        default = options[parameter["name"]].default
        if default is None or not parameter.get("regexes"):
            continue
        text = str(default).lower() if isinstance(default, bool) else str(default)
        assert any(re.fullmatch(r, text) for r in parameter["regexes"]), parameter["name"]


def test_flex_entry_point_turns_presence_flags_into_plain_flags():
    flex_main = load_flex_main()
    assert "--title_in_text" in flex_main.presence_flags()
    assert flex_main.template_argv(["--title_in_text=true", "--runner=DirectRunner"]) == [
        "--title_in_text",
        "--runner=DirectRunner",
    ]
    assert flex_main.template_argv(["--title_in_text=false", "--input=gs://b/docs"]) == [
        "--input=gs://b/docs",
        "--runner=DataflowRunner",
    ]
    with pytest.raises(ValueError, match="takes true or false"):
        flex_main.template_argv(["--title_in_text=maybe"])


def test_dockerfile_builds_on_the_matching_beam_sdk_image():
    dockerfile = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    sdk_image = f"apache/beam_python{python}_sdk:{apache_beam.__version__}"
    assert re.search(rf"^ARG BEAM_SDK_IMAGE={re.escape(sdk_image)}$", dockerfile, re.M)
    assert re.search(rf"^WORKDIR {IMAGE_WORKDIR}$", dockerfile, re.M)
    entry = re.search(r"^ENV FLEX_TEMPLATE_PYTHON_PY_FILE=(\S+)$", dockerfile, re.M)
    assert entry and image_path(entry.group(1)).is_file()
    copied = set(re.findall(r"^COPY (\w+) \./\1$", dockerfile, re.M))
    assert {*PACKAGES, "deploy"} <= copied
    assert 'ENTRYPOINT ["/opt/apache/beam/boot"]' in dockerfile


@pytest.mark.slow
def test_setup_py_ships_every_evidex_package(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", ".evidex", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"
        ),
    )
    dist = tmp_path / "dist"
    done = subprocess.run(
        [sys.executable, "setup.py", "-q", "sdist", "--dist-dir", str(dist)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (sdist,) = dist.glob("evidex-*.tar.gz")
    prefix = f"evidex-{version('evidex')}"
    with tarfile.open(sdist) as archive:
        members = set(archive.getnames())
        info = archive.extractfile(f"{prefix}/PKG-INFO")
        assert info is not None
        requires = info.read().decode("utf-8")
    for package in PACKAGES:
        assert f"{prefix}/{package}/__init__.py" in members, package
    assert f"{prefix}/pipelines/build_index.py" in members
    assert f"Requires-Dist: apache-beam=={apache_beam.__version__}" in requires


# --- Kubernetes, Flink ---------------------------------------------------------------------


def test_every_yaml_recipe_parses_into_kubernetes_resources():
    found = yaml_documents()
    assert found
    kinds = set()
    for path, docs in found.items():
        assert docs, f"{path} is empty"
        for doc in docs:
            assert doc["apiVersion"] and doc["kind"] and doc["metadata"]["name"], path
            kinds.add(doc["kind"])
    assert {"CronJob", "FlinkDeployment", "Deployment", "Service", "Job"} <= kinds
    assert {"PersistentVolumeClaim"} <= kinds


def test_every_json_recipe_parses():
    paths = sorted(DEPLOY.rglob("*.json"))
    assert paths
    for path in paths:
        assert isinstance(json.loads(path.read_text(encoding="utf-8")), dict), path


def test_flink_versions_agree_with_beam():
    flink = manifest("FlinkDeployment")
    major_minor = flink["spec"]["image"].split(":")[1]
    assert flink["spec"]["flinkVersion"] == "v" + major_minor.replace(".", "_")
    assert major_minor in FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS
    (server,) = pod_spec(manifest("Deployment"))["containers"]
    assert server["image"] == (
        f"apache/beam_flink{major_minor}_job_server:{apache_beam.__version__}"
    )
    assert f"--flink-master={flink['metadata']['name']}-rest:8081" in server["args"]


def test_flink_jobs_reach_the_job_server_and_the_sdk_harness_sidecar():
    flink = manifest("FlinkDeployment")
    containers = flink["spec"]["taskManager"]["podTemplate"]["spec"]["containers"]
    (harness,) = [c for c in containers if c["name"] == "beam-sdk-harness"]
    assert harness["args"] == ["--worker_pool"]
    harness_port = harness["ports"][0]["containerPort"]
    (submit,) = pod_spec(manifest("Job"))["containers"]
    options = PipelineOptions(container_env(submit)["EVIDEX_BUILD_ARGS"].split())
    portable = options.view_as(PortableOptions)
    assert portable.environment_type == "EXTERNAL"
    assert portable.environment_config == f"localhost:{harness_port}"
    service = manifest("Service")
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert portable.job_endpoint == f"{service['metadata']['name']}:{ports['job']}"
    assert portable.artifact_endpoint == f"{service['metadata']['name']}:{ports['artifact']}"


def test_every_pod_mounts_the_shared_bundle_root_at_the_same_path():
    claim = manifest("PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    flink = manifest("FlinkDeployment")
    specs = [
        pod_spec(manifest("CronJob")),
        pod_spec(manifest("Job")),
        pod_spec(manifest("Deployment")),
        flink["spec"]["taskManager"]["podTemplate"]["spec"],
    ]
    for spec in specs:
        (volume,) = [v for v in spec["volumes"] if "persistentVolumeClaim" in v]
        assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
        for container in spec["containers"]:
            mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
            assert mounts == {volume["name"]: "/data"}, container["name"]


def test_scheduled_pods_run_the_refresh_script_on_known_beam_options():
    known = set(PipelineOptions([]).get_all_options())
    for kind in ("CronJob", "Job"):
        (container,) = pod_spec(manifest(kind))["containers"]
        (command,) = container["command"]
        assert image_path(command) == REFRESH
        env = container_env(container)
        assert env["EVIDEX_HOME"].startswith("/data/") and env["EVIDEX_INPUT"]
        flags = [a for a in env["EVIDEX_BUILD_ARGS"].split() if a.startswith("--")]
        assert flags and {f[2:] for f in flags} <= known, kind
    cron = manifest("CronJob")["spec"]
    assert cron["concurrencyPolicy"] == "Forbid"
    assert cron["jobTemplate"]["spec"]["backoffLimit"] == 0


# --- cron, shell, Airflow -----------------------------------------------------------------


def test_shell_recipes_are_valid_executable_bash():
    scripts = sorted(DEPLOY.rglob("*.sh"))
    assert REFRESH in scripts
    for script in scripts:
        assert os.access(script, os.X_OK), f"{script} is not executable"
        done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_crontab_line_runs_the_refresh_script_under_a_lock():
    lines = (DEPLOY / "scheduled" / "crontab").read_text(encoding="utf-8").splitlines()
    entries = [ln for ln in lines if ln.strip() and not ln.startswith("#") and "=" not in ln]
    (entry,) = entries
    fields = entry.split()
    assert all(re.fullmatch(r"[\d*/,-]+", f) for f in fields[:5]), fields[:5]
    assert fields[5:7] == ["flock", "-n"] and fields[7].endswith(".lock")
    assert image_path(fields[8]) == REFRESH
    settings = dict(ln.split("=", 1) for ln in lines if re.match(r"^[A-Z_]+=", ln))
    assert {"EVIDEX_HOME", "EVIDEX_INPUT", "PATH"} <= set(settings)


def _dag_tree() -> ast.Module:
    source = (DEPLOY / "airflow" / "evidex_refresh_dag.py").read_text(encoding="utf-8")
    return ast.parse(source)


def _chain(node: ast.expr) -> list[str]:
    """``a >> b >> c`` -> ``["a", "b", "c"]``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.RShift):
        return _chain(node.left) + _chain(node.right)
    assert isinstance(node, ast.Name), ast.dump(node)
    return [node.id]


def test_airflow_dag_builds_with_the_beam_operator_then_validates_then_activates():
    tree = _dag_tree()
    imports = {
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert (
        "airflow.providers.apache.beam.operators.beam",
        "BeamRunPythonPipelineOperator",
    ) in imports
    # Which variable holds which task: `name = call(...)`.
    made_by: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Name) and isinstance(node.targets[0], ast.Name):
                made_by[node.targets[0].id] = func.id
    beam_calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "BeamRunPythonPipelineOperator"
    ]
    (build,) = beam_calls
    kwargs = {k.arg: k.value for k in build.keywords}
    assert ast.literal_eval(kwargs["py_file"]) == "pipelines.build_index"
    assert ast.literal_eval(kwargs["py_options"]) == ["-m"]
    pipeline_options_node = kwargs["pipeline_options"]
    assert isinstance(pipeline_options_node, ast.Dict)
    option_keys = {ast.literal_eval(k) for k in pipeline_options_node.keys if k is not None}
    known = set(PipelineOptions([]).get_all_options())
    assert {"input", "root"} <= option_keys <= known
    chains = [
        _chain(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.BinOp)
    ]
    (order,) = chains
    tasks = [made_by[name] for name in order]
    assert tasks == ["record_state", "BeamRunPythonPipelineOperator", "validate", "activate"]
    # Activation must not run after a failed validation: no trigger rule is overridden.
    assert not any(
        isinstance(node, ast.keyword) and node.arg == "trigger_rule" for node in ast.walk(tree)
    )
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    for name in ("validate", "activate"):
        calls = [
            ast.literal_eval(call.args[0])
            for call in ast.walk(functions[name])
            if isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "_evidex"
        ]
        assert calls == [name], name
        raises = [n for n in ast.walk(functions[name]) if isinstance(n, ast.Raise)]
        assert raises, f"{name} must fail its task on a non-zero exit"


# --- the refresh script, for real ---------------------------------------------------------


def _refresh(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(REFRESH)], env=env, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.slow
def test_refresh_script_activates_only_a_validated_bundle_and_stops_at_failures(
    tiny_corpus, tmp_path
):
    root = tmp_path / "root"
    env = {
        **os.environ,
        "EVIDEX_HOME": str(root),
        "EVIDEX_INPUT": str(tiny_corpus),
        "EVIDEX_BIN": str(Path(sys.executable).parent / "evidex"),
        "EVIDEX_PYTHON": sys.executable,
    }
    first = _refresh(env)
    assert first.returncode == 0, first.stderr[-3000:]
    (built,) = list_bundles(str(root))
    assert read_active(str(root)) == built
    report = json.loads(Path(bundle_path(str(root), built), VALIDATION_REPORT).read_text())
    assert report["passed"] is True

    # A frozen regression case no bundle can pass: the next bundle fails validation.
    add_case(str(root), RegressionCase(query="Where does the Danube flow?", expect=("no/such",)))
    second = _refresh(env)
    assert second.returncode != 0
    assert "validating" in second.stderr and "activating" not in second.stderr
    (rejected,) = set(list_bundles(str(root))) - {built}
    report = json.loads(Path(bundle_path(str(root), rejected), VALIDATION_REPORT).read_text())
    assert report["passed"] is False
    assert read_active(str(root)) == built

    # A failed build stops before validation; nothing new appears.
    third = _refresh({**env, "EVIDEX_INPUT": str(tmp_path / "missing")})
    assert third.returncode != 0
    assert "validating" not in third.stderr
    assert set(list_bundles(str(root))) == {built, rejected}
    assert read_active(str(root)) == built
