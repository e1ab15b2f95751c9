"""Airflow DAG: nightly evidex refresh, build (Beam) -> validate -> activate.

Tasks, in order:

1. ``record_state`` notes the bundles that exist and the ACTIVE bundle before the build;
2. ``build`` runs ``python -m pipelines.build_index`` through the Apache Beam provider's
   ``BeamRunPythonPipelineOperator`` (DirectRunner here; any Beam runner flags work);
3. ``validate`` finds the one bundle the build added and runs ``evidex validate`` on it,
   failing the task (and so the run) when any check fails;
4. ``activate`` runs only after ``validate`` succeeded (no trigger rule is overridden) and
   swaps ACTIVE to that bundle as a compare-and-swap against the state of step 1.

Needs ``apache-airflow-providers-apache-beam`` in the Airflow environment and an
environment with evidex installed at ``EVIDEX_VENV`` on the workers. Not imported by the
evidex test suite (Airflow is not an evidex dependency); tests/test_deploy.py checks it by
parsing.
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from typing import Any

from airflow import DAG
from airflow.decorators import task
from airflow.exceptions import AirflowFailException
from airflow.providers.apache.beam.operators.beam import BeamRunPythonPipelineOperator

EVIDEX_VENV = "/opt/evidex/.venv"
EVIDEX_HOME = "/srv/evidex"
EVIDEX_INPUT = "/srv/corpus"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "GX_ANALYTICS_ENABLED": "false"}


def _evidex(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the evidex CLI on the DAG's bundle root."""
    return subprocess.run(
        [f"{EVIDEX_VENV}/bin/evidex", *args, "--root", EVIDEX_HOME],
        capture_output=True,
        text=True,
        check=False,
        env=OFFLINE | {"PATH": f"{EVIDEX_VENV}/bin:/usr/bin:/bin"},
    )


def _status() -> dict[str, Any]:
    done = _evidex("status", "--json")
    if done.returncode != 0:
        raise AirflowFailException(f"evidex status failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


with DAG(
    dag_id="evidex_refresh",
    description="Build, validate and activate an evidex bundle",
    schedule="30 2 * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 0},
    tags=["evidex"],
) as dag:

    @task(task_id="record_state")
    def record_state() -> dict[str, Any]:
        status = _status()
        return {
            "active": status["active"] or "",
            "bundles": [b["bundle_id"] for b in status["bundles"]],
        }

    build = BeamRunPythonPipelineOperator(
        task_id="build",
        runner="DirectRunner",
        py_file="pipelines.build_index",
        py_options=["-m"],
        py_interpreter=f"{EVIDEX_VENV}/bin/python",
        pipeline_options={
            "input": EVIDEX_INPUT,
            "root": EVIDEX_HOME,
            "direct_running_mode": "multi_processing",
            "direct_num_workers": 4,
        },
    )

    @task(task_id="validate")
    def validate(before: dict[str, Any]) -> str:
        added = sorted({b["bundle_id"] for b in _status()["bundles"]} - set(before["bundles"]))
        if len(added) != 1:
            raise AirflowFailException(f"expected the build to add one bundle, found {added}")
        bundle_id = added[0]
        done = _evidex("validate", bundle_id)
        if done.returncode != 0:
            raise AirflowFailException(f"bundle {bundle_id} failed validation:\n{done.stdout}")
        return bundle_id

    @task(task_id="activate")
    def activate(bundle_id: str, before: dict[str, Any]) -> None:
        done = _evidex("activate", bundle_id, "--expect", before["active"])
        if done.returncode != 0:
            raise AirflowFailException(f"activation of {bundle_id} refused: {done.stderr}")

    before = record_state()
    validated = validate(before)
    activated = activate(validated, before)
    before >> build >> validated >> activated
