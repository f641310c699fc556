"""Session fixtures: settings, the loaded QNN SDK, the artifact cache, and the pipeline stages.

Fixtures only wire stage functions to the cache and the parametrisation (``qnn_case`` ×
``qnn_target``, added by the plugin's ``pytest_generate_tests``); the work is in the stages.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pytest

from pytest_qnn_genai.cache import ArtifactCache
from pytest_qnn_genai.checks.parity import Check, ParityTable
from pytest_qnn_genai.models.registry import ModelCase
from pytest_qnn_genai.pipeline import Pipeline, products
from pytest_qnn_genai.pipeline.products import Wants, needs
from pytest_qnn_genai.plugin.session import session_of
from pytest_qnn_genai.runtime.result import RunResult
from pytest_qnn_genai.sdk import QnnSdk
from pytest_qnn_genai.settings import Settings
from pytest_qnn_genai.targets import Target

if TYPE_CHECKING:
    from pytest_benchmark.fixture import BenchmarkFixture

    from pytest_qnn_genai.devices.session import DeviceSessions
    from pytest_qnn_genai.figures import Figure
    from pytest_qnn_genai.golden.perf import GoldenPerf
    from pytest_qnn_genai.perf.benchmark import Generate, QnnBenchmark, Workload
    from pytest_qnn_genai.report.results import Record, ResultsFile
    from pytest_qnn_genai.stages.compile import PteArtifacts
    from pytest_qnn_genai.stages.prepare import PreparedModel
    from pytest_qnn_genai.stages.quantize import QdqArtifacts

__all__ = ["qnn_settings", "qnn_sdk", "qnn_cache", "qnn_devices", "qnn_pipeline", "qnn_model",
           "qnn_qdq", "qnn_pte", "qnn_run", "qnn_results", "qnn_record", "qnn_parity",
           "qnn_golden_perf", "qnn_benchmark"]


@pytest.fixture(scope="session")
def qnn_settings(request: pytest.FixtureRequest) -> Settings:
    """The resolved ``--soc/--backend/--device/...`` settings of this session."""
    return session_of(request.config).settings


@pytest.fixture(scope="session")
def qnn_sdk(request: pytest.FixtureRequest) -> QnnSdk:
    """The QNN SDK, loaded into this process (QNN_SDK_ROOT set, host libraries preloaded)."""
    return session_of(request.config).active_sdk()


@pytest.fixture(scope="session")
def qnn_cache(request: pytest.FixtureRequest, qnn_sdk: QnnSdk) -> ArtifactCache:
    """The session's artifact cache (``--qnn-cache-dir``; ``--qnn-rebuild`` ignores old entries)."""
    return session_of(request.config).cache


@pytest.fixture(scope="session")
def qnn_devices(request: pytest.FixtureRequest, qnn_settings: Settings,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeviceSessions]:
    """This worker's device sessions (``DeviceSessions``): the ``--device`` phones (locked for
    the session) and upstream's x86 runners on this machine, each started on first use (health
    check, libraries, runners)."""
    from pytest_qnn_genai.devices.session import DeviceSessions

    sessions = DeviceSessions(qnn_settings, tmp_path_factory.mktemp("qnn-device-runs"),
                              x86=session_of(request.config).x86_runners)
    yield sessions
    sessions.close()


def _on_x86_runners(target: Target) -> bool:
    return target.is_x86_runner


@pytest.fixture(scope="session")
@needs(Wants(products.RUNNERS, where=_on_x86_runners))  # they start upstream's x86 runners
def qnn_pipeline(qnn_cache: ArtifactCache, qnn_devices: DeviceSessions) -> Pipeline:
    """The staged pipeline wired to the session's cache (and phones, with ``--device``)."""
    return Pipeline(qnn_cache, devices=qnn_devices)


@pytest.fixture(scope="session")
def qnn_model(qnn_pipeline: Pipeline, qnn_case: ModelCase) -> PreparedModel:
    """Stage prepare: the model case as eager fp32 static-LLaMA graphs, tokenizer, inputs."""
    return qnn_pipeline.prepared(qnn_case)


@pytest.fixture(scope="session")
@needs(products.QUANTIZE)
def qnn_qdq(qnn_pipeline: Pipeline, qnn_case: ModelCase, qnn_target: Target) -> QdqArtifacts:
    """Stage quantize (cached): the QDQ graphs for the target."""
    return qnn_pipeline.qdq(qnn_case, qnn_target)


@pytest.fixture(scope="session")
@needs("new")
def qnn_pte(qnn_pipeline: Pipeline, qnn_case: ModelCase, qnn_target: Target) -> PteArtifacts:
    """Stage compile (cached): the hybrid .pte for the target."""
    return qnn_pipeline.pte(qnn_case, qnn_target)


@pytest.fixture(scope="session")
@needs("new", products.LLM_CONFIG)
def qnn_run(qnn_pipeline: Pipeline, qnn_case: ModelCase, qnn_target: Target) -> RunResult:
    """Stage run: greedy generation of the case's eval prompt on the target, with logits (on a
    phone from a second, kv-mode runner call: the only mode that dumps them). Its outputs are
    judged, never its speed: on the emulator a kept product (``pipeline/outputs.py``)."""
    return qnn_pipeline.run(qnn_case, qnn_target, logits=True, judged=True)


# -- performance gate and report ------------------------------------------------------------
@pytest.fixture(scope="session")
def qnn_results(request: pytest.FixtureRequest) -> ResultsFile:
    """The run's records: ``qnn_results.add(Record.for_target("perf", ...))``. They go into
    ``results.json`` / ``summary.md`` with ``--qnn-report`` (shipped from xdist workers)."""
    return session_of(request.config).results


class Recorder(Protocol):
    """``qnn_record(kind, rows, ...)``: see :func:`qnn_record`."""

    def __call__(self, kind: str, rows: Sequence[Figure | Check], *,
                 values: Mapping[str, object] | None = None, note: str = "",
                 model: str | None = None, target: Target | None = None) -> Record: ...


@pytest.fixture
def qnn_record(request: pytest.FixtureRequest, qnn_results: ResultsFile) -> Recorder:
    """Record this test's judged figures in the run report::

        checks = agreement.qdq_keeps_fp32(...)
        qnn_record("gate", checks)           # Check rows become figures (Check.figure)
        assert all(c.ok for c in checks)

    ``kind`` is the suite (gate, parity, smoke, perf); ``rows`` are
    :class:`~pytest_qnn_genai.figures.Figure` or :class:`~pytest_qnn_genai.checks.parity.Check`
    objects; the model case and target are the test's own ``qnn_case``/``qnn_target`` (which
    the test must request) unless ``model``/``target`` say otherwise; ``values`` is unjudged
    context (rounds, work)."""
    from pytest_qnn_genai.report.results import Record

    def record(kind: str, rows: Sequence[Figure | Check], *,
               values: Mapping[str, object] | None = None, note: str = "",
               model: str | None = None, target: Target | None = None) -> Record:
        for name, given in (("qnn_case", model), ("qnn_target", target)):
            if given is None and name not in request.fixturenames:
                raise TypeError(f"qnn_record: {request.node.name} uses no {name} fixture; pass "
                                f"{'model' if name == 'qnn_case' else 'target'}=")
        if model is None:
            model = request.getfixturevalue("qnn_case").name
        if target is None:
            target = request.getfixturevalue("qnn_target")
        figures = [r.figure() if isinstance(r, Check) else r for r in rows]
        made = Record.for_target(kind, model, target, figures, values, request.node.nodeid, note)
        qnn_results.add(made)
        return made
    return record


@pytest.fixture(scope="session")
def qnn_parity(request: pytest.FixtureRequest) -> ParityTable:
    """The session's parity table: ``qnn_parity.add(checks, prefix)``; printed in the terminal
    summary (rows shipped from xdist workers)."""
    return session_of(request.config).parity


@pytest.fixture(scope="session")
def qnn_golden_perf(qnn_settings: Settings) -> dict[str, GoldenPerf]:
    """Golden perf floors by model (``<golden dir>/perf/*.json``); a damaged file fails the test
    with one line naming the file and the problem."""
    from pytest_qnn_genai.golden.perf import GoldenFileError, load_goldens

    try:
        return load_goldens(qnn_settings.golden_dir / "perf")
    except GoldenFileError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture
@needs("new", products.LLM_CONFIG)
def qnn_benchmark(benchmark: BenchmarkFixture, qnn_settings: Settings, qnn_pipeline: Pipeline,
                  qnn_case: ModelCase, qnn_target: Target) -> QnnBenchmark:
    """Measure the case's perf workload on the target: ``result = qnn_benchmark()`` (or
    ``qnn_benchmark(pte=other_pte)``, ``qnn_benchmark(generate)``). One warm-up round, then
    ``--qnn-perf-rounds`` rounds through pytest-benchmark (its own loop when pytest-benchmark is
    disabled, e.g. under ``-n N``), topped up until the minimum work is met; medians go into
    ``benchmark.extra_info``."""
    from pytest_qnn_genai.perf.benchmark import QnnBenchmark, generation_for

    def default(pte: Path | str | None, workload: Workload | None) -> Generate:
        return generation_for(
            qnn_case, qnn_target,
            lambda: Path(pte) if pte is not None else qnn_pipeline.pte(qnn_case, qnn_target).pte,
            lambda prompt, n: qnn_pipeline.run(qnn_case, qnn_target, prompt, n), workload)

    return QnnBenchmark(
        benchmark, qnn_settings, qnn_target, default,
        labels={"model": qnn_case.name, "soc": qnn_target.soc.name,
                "backend": qnn_target.backend, "device": qnn_target.device})
